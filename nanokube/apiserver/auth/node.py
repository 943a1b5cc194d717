"""The Node authorizer: a node's own credentials (user `system:node:<name>`
in group `system:nodes`) reach what its pods need.

As upstream's, it holds the `system:node` role's rules itself (the default
`system:node` binding names nobody). The kinds it governs it judges by their
relation to the node alone (the pods on it and the secrets, configmaps, claims,
volumes and service accounts they use; its own Node, Lease, CSINode and
ResourceSlices); anything else it allows as those rules do. What it does not
allow it has no opinion on, so RBAC is asked next and grants a node what an
admin bound it. Other members of `system:nodes` (the in-process node agents act
as one such user, `system:node-agents`, bound to the `system:node` role by
`nanokube:node-agents`: one identity for the many nodes of a process) are left
to RBAC. Reads go to the API server's watch cache; the pod scan per request is
affordable because only node credentials pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...machinery.errors import APIError
from ...machinery.selectors import field_requirements
from .authorizer import Attributes, Decision
from .rbac import NODE_RULES, rule_allows

NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
LEASE_NAMESPACE = "kube-node-lease"
NO_RELATION = "no relationship found between node '{node}' and this object"
#: why a node's rules cannot all be listed (SelfSubjectRulesReview): the Node authorizer's come from its graph
NOT_LISTED = "node authorizer does not support user rule resolution"
_WRITES = ("update", "patch", "delete")
_ALLOWED = Decision(True)


def node_of(user_name: str, groups: Iterable[str]) -> str:
    """The node a user speaks for, or "" when it is not a node identity."""
    if user_name.startswith(NODE_PREFIX) and NODES_GROUP in groups:
        return user_name[len(NODE_PREFIX):]
    return ""


def unknown_node(user_name: str, groups: Iterable[str]) -> bool:
    """A node identity that names no node (`system:node:` in system:nodes): the Node authorizer
    and NodeRestriction refuse it everything, as upstream's."""
    return user_name == NODE_PREFIX and NODES_GROUP in groups


#: where a pod names objects of each kind: (volume source, name field), projected source, env refs
_VOLUME_REFS = {"secrets": ("secret", "secretName"), "configmaps": ("configMap", "name"),
                "persistentvolumeclaims": ("persistentVolumeClaim", "claimName")}
_PROJECTED_REFS = {"secrets": "secret", "configmaps": "configMap"}
_ENV_REFS = {"secrets": ("secretKeyRef", "secretRef"), "configmaps": ("configMapKeyRef", "configMapRef")}


def referenced(pod: dict, kind: str) -> set[str]:
    """Names of the secrets, configmaps, PVCs or resource claims a pod uses."""
    spec = pod.get("spec") or {}
    out: set[str] = set()
    if kind in _VOLUME_REFS:
        source, field = _VOLUME_REFS[kind]
        for vol in spec.get("volumes") or []:
            out.add((vol.get(source) or {}).get(field, ""))
            for src in (vol.get("projected") or {}).get("sources") or []:
                out.add((src.get(_PROJECTED_REFS.get(kind, "")) or {}).get("name", ""))
    if kind in _ENV_REFS:
        key_ref, all_ref = _ENV_REFS[kind]
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            out |= {((e.get("valueFrom") or {}).get(key_ref) or {}).get("name", "") for e in c.get("env") or []}
            out |= {(e.get(all_ref) or {}).get("name", "") for e in c.get("envFrom") or []}
    if kind == "secrets":
        out |= {s.get("name", "") for s in spec.get("imagePullSecrets") or []}
    if kind == "persistentvolumeclaims":  # generic ephemeral volumes' claims
        out |= {f"{pod['metadata']['name']}-{v['name']}" for v in spec.get("volumes") or [] if v.get("ephemeral")}
    if kind == "serviceaccounts":
        out.add(spec.get("serviceAccountName") or "default")
    if kind == "resourceclaims":
        out |= {s.get("resourceClaimName", "") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        out |= {c.get("resourceClaimName", "") for c in spec.get("resourceClaims") or []}
    out.discard("")
    return out


class NodeAuthorizer:
    """`authorize` allows, refuses with why, or returns None (no opinion, no reason): a refusal is
    no opinion too, upstream's NoOpinion, which leaves the request to the next authorizer.

    As upstream's with AuthorizeNodeWithSelectors (locked on since 1.34), it judges every request
    of a node for the kinds it governs itself, without the system:node rules: pods, nodes and
    ResourceSlices read only through a field selector naming the node (or by the name of a related
    one), what pods use only when a pod of the node uses it, its own Lease and CSINode only. The
    system:node rules decide the rest."""

    def __init__(self, get: Callable[[str, str, str, str], dict | None],
                 pods: Callable[[str | None], Iterable[dict]]):
        """`get(group, plural, namespace, name)` reads one object and `pods(namespace)`
        lists pods (all namespaces for None), both from the watch cache."""
        self.get = get
        self.pods = pods

    def authorize(self, user_name: str, groups: tuple[str, ...], a: Attributes) -> Decision | None:
        node = node_of(user_name, groups)
        if not node:
            # (the name compared first: every request of any other user passes here)
            return Decision(False, f'unknown node for user "{user_name}"') if user_name == NODE_PREFIX \
                and unknown_node(user_name, groups) else None
        if a.resource_request and (rule := _RULES.get((a.group, a.resource))) is not None:
            return rule(self, node, a)
        return _ALLOWED if any(rule_allows(r, a) for r in NODE_RULES) else None

    @staticmethod
    def _deny(node: str, reason: str = "") -> Decision:
        return Decision(False, reason or NO_RELATION.format(node=node))

    def _on_node(self, node: str, namespace: str | None) -> list[dict]:
        return [p for p in self.pods(namespace) if (p.get("spec") or {}).get("nodeName") == node]

    @staticmethod
    def _selects_node(node: str, a: Attributes, field: str) -> bool:
        """Whether a term of the fieldSelector is `field` equal to the node (as parsed for the list:
        unescaped, untrimmed); a selector that does not parse selects nothing."""
        try:
            return (field, True, node) in field_requirements(a.field_selector)
        except APIError:
            return False

    def pods_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizePod: reads of its pods (one by name, or the list or watch of spec.nodeName=<node>);
        create and delete (mirror pods), status writes and evictions, which NodeRestriction confines
        to the node's own pods."""
        if not a.subresource:
            if a.verb == "get":
                return self._get_only(node, a) or self._pod_on_node(node, a)
            if a.verb in ("list", "watch"):
                if self._selects_node(node, a, "spec.nodeName"):
                    return _ALLOWED
                if a.name:
                    return self._pod_on_node(node, a)
                return self._deny(node, "can only list/watch pods with spec.nodeName field selector")
            if a.verb in ("create", "delete"):
                return _ALLOWED
        elif (a.subresource == "status" and a.verb in ("update", "patch")) or \
                (a.subresource == "eviction" and a.verb == "create"):
            return _ALLOWED
        return _NO_OPINION

    def _pod_on_node(self, node: str, a: Attributes) -> Decision:
        if not a.name:
            return self._deny(node, "No Object name found")
        pod = self.get("", "pods", a.namespace, a.name)
        return _ALLOWED if pod is not None and (pod.get("spec") or {}).get("nodeName") == node else self._deny(node)

    def nodes_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizeNode: a node reads only its own Node (by name, or listed or watched by its
        metadata.name, before it exists too); its writes are NodeRestriction's to confine."""
        if not a.subresource:
            if a.verb in ("create", "update", "patch"):
                return _ALLOWED
            if a.verb in ("get", "list", "watch"):
                if a.name == node:
                    return _ALLOWED
                if not a.name:
                    return self._deny(node, f"node '{node}' cannot read all nodes, only its own Node object")
                return self._deny(node, f"node '{node}' cannot read '{a.name}', only its own Node object")
        elif a.subresource == "status" and a.verb in ("update", "patch"):
            return _ALLOWED
        return _NO_OPINION

    def referenced_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizeReadNamespacedObject: a node reads (get, or list/watch of one by its metadata.name,
        which the request's attributes take as its name: the kubelet's watch of a volume's object)
        the secrets and configmaps its pods use."""
        if a.verb not in ("get", "list", "watch"):
            return self._deny(node, "can only read resources of this type")
        if a.subresource:
            return self._deny(node, "cannot read subresource")
        if not a.namespace:
            return self._deny(node, "can only read namespaced object of this type")
        return self._referenced(node, a)

    def _referenced(self, node: str, a: Attributes) -> Decision | None:
        if not a.name:
            return self._deny(node, "No Object name found")
        for pod in self._on_node(node, a.namespace):
            if a.name in referenced(pod, a.resource):
                return _ALLOWED
        return self._deny(node)

    def _get_only(self, node: str, a: Attributes) -> Decision | None:
        """authorizeGet's refusals, before it looks for a relationship."""
        if a.verb != "get":
            return self._deny(node, "can only get individual resources of this type")
        if a.subresource:
            return self._deny(node, "cannot get subresource")
        return None

    def resource_claims_rule(self, node: str, a: Attributes) -> Decision | None:
        """A node gets the ResourceClaims its pods use (authorizeGet)."""
        return self._get_only(node, a) or self._referenced(node, a)

    def claims_rule(self, node: str, a: Attributes) -> Decision | None:
        """A node reads the claims its pods use (authorizeGet), and updates or patches their
        status (authorizeStatusUpdate: the kubelet's volume expansion writes it)."""
        if a.subresource != "status":
            return self._get_only(node, a) or self._referenced(node, a)
        if a.verb not in ("update", "patch"):
            return self._deny(node, "can only get/update/patch this type")
        return self._referenced(node, a)

    def volume_rule(self, node: str, a: Attributes) -> Decision | None:
        """A node reads the PersistentVolumes bound to claims its pods use (authorizeGet)."""
        if refused := self._get_only(node, a):
            return refused
        if not a.name:
            return self._deny(node, "No Object name found")
        for pod in self._on_node(node, None):
            ns = pod["metadata"].get("namespace", "")
            for claim in referenced(pod, "persistentvolumeclaims"):
                pvc = self.get("", "persistentvolumeclaims", ns, claim)
                if pvc is not None and (pvc.get("spec") or {}).get("volumeName") == a.name:
                    return _ALLOWED
        return self._deny(node)

    def attachment_rule(self, node: str, a: Attributes) -> Decision | None:
        """A node reads the VolumeAttachments to it (authorizeGet)."""
        if refused := self._get_only(node, a):
            return refused
        if not a.name:
            return self._deny(node, "No Object name found")
        va = self.get("storage.k8s.io", "volumeattachments", "", a.name)
        return _ALLOWED if va is not None and (va.get("spec") or {}).get("nodeName") == node else self._deny(node)

    def service_account_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizeServiceAccount: a node gets the service accounts of its pods (their UIDs go into
        its pods' certificate requests) and creates their tokens, nothing else of them."""
        if a.verb == "get" and not a.subresource:
            return self.referenced_rule(node, a)
        if a.verb != "create" or a.subresource != "token" or not a.name:
            return self._deny(node, "can only create tokens for individual service accounts")
        return self._referenced(node, a)

    def leases_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizeLease: its own Lease in kube-node-lease (created under any name: NodeRestriction
        checks the name the body gives)."""
        if a.verb not in _OWN_VERBS:
            return self._deny(node, "can only get, create, update, patch, or delete a node lease")
        if a.namespace != LEASE_NAMESPACE:
            return self._deny(node, f'can only access leases in the "{LEASE_NAMESPACE}" system namespace')
        if a.verb != "create" and a.name != node:
            return self._deny(node, "can only access node lease with the same name as the requesting node")
        return _ALLOWED

    def csinode_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizeCSINode: its own CSINode (created under any name: NodeRestriction checks it)."""
        if a.verb not in _OWN_VERBS:
            return self._deny(node, "can only get, create, update, patch, or delete a CSINode")
        if a.subresource:
            return self._deny(node, "cannot authorize CSINode subresources")
        if a.verb != "create" and a.name != node:
            return self._deny(node, "can only access CSINode with the same name as the requesting node")
        return _ALLOWED

    def resource_slice_rule(self, node: str, a: Attributes) -> Decision | None:
        """authorizeResourceSlice: the slices whose spec.nodeName is the node, one by name or all
        of them through that field selector; a create is NodeRestriction's to check, as is each
        slice a deletecollection removes."""
        if a.subresource:
            return self._deny(node, "cannot authorize ResourceSlice subresources")
        if a.verb == "create":
            return _ALLOWED
        if a.verb in ("get", "update", "patch", "delete"):
            if not a.name:
                return self._deny(node, "No Object name found")
            found = self.get("resource.k8s.io", "resourceslices", "", a.name)
            return _ALLOWED if found is not None and (found.get("spec") or {}).get("nodeName") == node \
                else self._deny(node)
        if a.verb in ("list", "watch", "deletecollection"):
            if self._selects_node(node, a, "spec.nodeName"):
                return _ALLOWED
            return self._deny(node, "can only list/watch/deletecollection resourceslices with nodeName field selector")
        return self._deny(node, "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, "
                                "update, patch, delete, deletecollection")

    def pod_certificate_rule(self, node: str, a: Attributes) -> Decision | None:
        """A node creates requests for its pods (NodeRestriction checks the pod), reads and
        deletes its own, and lists or watches them through spec.nodeName=<node>."""
        if a.subresource:
            return self._deny(node)
        if a.verb in ("list", "watch"):
            if self._selects_node(node, a, "spec.nodeName"):
                return _ALLOWED if any(rule_allows(r, a) for r in NODE_RULES) else None
            return self._deny(node, "can only list/watch podcertificaterequests with spec.nodeName field selector")
        if a.verb in ("get",) + _WRITES:
            pcr = self.get("certificates.k8s.io", "podcertificaterequests", a.namespace, a.name)
            if pcr is None or (pcr.get("spec") or {}).get("nodeName") != node:
                return self._deny(node)
        return _ALLOWED if any(rule_allows(r, a) for r in NODE_RULES) else None


#: the verbs a node has on its own Lease and CSINode
_OWN_VERBS = ("get", "create", "update", "patch", "delete")
#: no opinion and no reason: upstream's NoOpinion with an empty reason, which adds nothing to a refusal
_NO_OPINION = Decision(False)

_RULES = {
    ("", "pods"): NodeAuthorizer.pods_rule,
    ("", "secrets"): NodeAuthorizer.referenced_rule,
    ("", "configmaps"): NodeAuthorizer.referenced_rule,
    ("", "persistentvolumeclaims"): NodeAuthorizer.claims_rule,
    ("", "persistentvolumes"): NodeAuthorizer.volume_rule,
    ("storage.k8s.io", "volumeattachments"): NodeAuthorizer.attachment_rule,
    ("resource.k8s.io", "resourceclaims"): NodeAuthorizer.resource_claims_rule,
    ("", "serviceaccounts"): NodeAuthorizer.service_account_rule,
    ("", "nodes"): NodeAuthorizer.nodes_rule,
    ("coordination.k8s.io", "leases"): NodeAuthorizer.leases_rule,
    ("storage.k8s.io", "csinodes"): NodeAuthorizer.csinode_rule,
    ("resource.k8s.io", "resourceslices"): NodeAuthorizer.resource_slice_rule,
    ("certificates.k8s.io", "podcertificaterequests"): NodeAuthorizer.pod_certificate_rule,
}


def cache_reader(index, cache) -> tuple[Callable[[str, str, str, str], dict | None], Callable[[str | None], Iterable[dict]]]:
    """The (get, pods) pair a NodeAuthorizer reads through, over the API server's watch cache."""

    def get(group: str, plural: str, namespace: str, name: str) -> dict | None:
        e = cache.get(index.get(group, "v1", plural).key(namespace or None, name))
        return e.obj if e is not None else None

    def pods(namespace: str | None) -> Iterable[dict]:
        return (e.obj for _, e in cache.list(index.get("", "v1", "pods").key_prefix(namespace or None)))

    return get, pods


class ChainAuthorizer:
    """The Node authorizer, then RBAC for what it did not allow (its reason kept for the refusal)."""

    def __init__(self, node: NodeAuthorizer, rbac) -> None:
        self.node = node
        self.rbac = rbac

    def authorize(self, user_name: str, groups: tuple[str, ...], a: Attributes) -> Decision:
        decided = self.node.authorize(user_name, groups, a)
        if decided is not None and decided.allowed:
            return decided
        answer = self.rbac.authorize(user_name, groups, a)
        if answer.allowed or decided is None:
            return answer
        return Decision(False, "\n".join(r for r in (decided.reason, answer.reason) if r))

    @staticmethod
    def unlisted(user_name: str, groups: tuple[str, ...], rbac: list[str]) -> tuple[bool, list[str]]:
        """(whether the rules listed for a user may be incomplete, the rule resolvers' errors), as
        upstream's union of rule resolvers gives them, Node's then RBAC's (`rbac`): the Node
        authorizer says so for a node, whose rules it cannot list."""
        node = node_of(user_name, groups)
        return node, [NOT_LISTED, *rbac] if node else rbac
