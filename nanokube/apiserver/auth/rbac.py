"""RBAC: Roles, ClusterRoles and their bindings decide what a user may do.

Evaluation reads the policy objects from a `PolicySource` (the API server passes
its watch cache, so a new binding applies at once). An aggregated ClusterRole's
rules are the union of the rules of the roles its selectors pick, resolved when
it is evaluated. A source that says when any policy object changed (`mark`) has
what a user's bindings grant resolved once per change, not on every request.
Members of `system:masters` are always allowed, as kube-apiserver's
privileged-group authorizer does.
"""

from __future__ import annotations

from typing import Iterable, Protocol

from ...machinery import gofmt
from ...machinery.selectors import matches_labels, selector_from_object
from .authorizer import Attributes, Decision
from .controller_policy import RULES as CONTROLLER_RULES

GROUP = "rbac.authorization.k8s.io"
MASTERS = "system:masters"


class PolicySource(Protocol):
    def list(self, plural: str, namespace: str | None = None) -> Iterable[dict]: ...

    def get(self, plural: str, namespace: str | None, name: str) -> dict | None: ...


class CachePolicySource:
    """Policy objects straight from the API server's watch cache."""

    def __init__(self, index, cache) -> None:
        self._res = {p: index.get(GROUP, "v1", p) for p in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")}
        self._cache = cache
        self._prefixes = tuple(r.key_prefix() for r in self._res.values())

    def mark(self) -> tuple[int, ...]:
        """A value that differs from every earlier one once any role or binding was added, changed
        or deleted (WatchCache.changes)."""
        changes, (a, b, c, d) = self._cache.changes, self._prefixes
        return changes(a), changes(b), changes(c), changes(d)

    def list(self, plural: str, namespace: str | None = None) -> Iterable[dict]:
        return (e.obj for _, e in self._cache.entries(self._res[plural].key_prefix(namespace)))

    def get(self, plural: str, namespace: str | None, name: str) -> dict | None:
        e = self._cache.get(self._res[plural].key(namespace, name))
        return e.obj if e is not None else None


def _has(values: list | None, want: str) -> bool:
    return bool(values) and ("*" in values or want in values)


def _resource_matches(resources: list | None, a: Attributes) -> bool:
    full = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    for r in resources or ():
        if r == "*" or r == full or (a.subresource and r == f"*/{a.subresource}"):
            return True
    return False


def _url_matches(urls: list | None, path: str) -> bool:
    for u in urls or ():
        if u == "*" or u == path or (u.endswith("*") and path.startswith(u[:-1])):
            return True
    return False


def rule_allows(rule: dict, a: Attributes) -> bool:
    if not _has(rule.get("verbs"), a.verb):
        return False
    if not a.resource_request:
        return _url_matches(rule.get("nonResourceURLs"), a.path)
    if not _has(rule.get("apiGroups"), a.group) or not _resource_matches(rule.get("resources"), a):
        return False
    names = rule.get("resourceNames")
    return not names or a.name in names


def subject_matches(subject: dict, user_name: str, groups: tuple[str, ...], binding_ns: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return name == user_name
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        return user_name == f"system:serviceaccount:{subject.get('namespace') or binding_ns}:{name}"
    return False


_MASTERS_ALLOWED = Decision(True, f'allowed by group "{MASTERS}"')
_NOT_ALLOWED = Decision(False)
#: users and namespaces whose grants are kept at once; past it they are resolved anew
_GRANTS_LIMIT = 4096


class RBACAuthorizer:
    def __init__(self, source: PolicySource) -> None:
        self.source = source
        #: (user, groups, namespace or "" for the ClusterRoleBindings) -> what `_granted` resolved,
        #: while the source's `mark` is `_mark`
        self._grants: dict[tuple, tuple[tuple[list[dict], Decision], ...]] = {}
        self._mark: tuple | None = None

    def cluster_role_rules(self, role: dict) -> list[dict]:
        agg = role.get("aggregationRule")
        if not agg:
            return role.get("rules") or []
        rules: list[dict] = list(role.get("rules") or [])
        selectors = [selector_from_object(s) for s in agg.get("clusterRoleSelectors") or []]
        for other in self.source.list("clusterroles"):
            if other is role or other.get("aggregationRule"):
                continue
            if any(matches_labels(s, other["metadata"].get("labels")) for s in selectors):
                rules.extend(r for r in other.get("rules") or [] if r not in rules)
        return rules

    def _role_rules(self, ref: dict, namespace: str) -> list[dict]:
        if ref.get("kind") == "ClusterRole":
            role = self.source.get("clusterroles", None, ref.get("name", ""))
            return self.cluster_role_rules(role) if role else []
        role = self.source.get("roles", namespace, ref.get("name", ""))
        return (role or {}).get("rules") or []

    def _missing(self, ref: dict, namespace: str) -> str:
        """"" where the role a binding refers to exists, else the NotFound message its lookup gives."""
        plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        if self.source.get(plural, None if plural == "clusterroles" else namespace, ref.get("name", "")) is not None:
            return ""
        return f'{plural}.rbac.authorization.k8s.io {gofmt.quote(ref.get("name", ""))} not found'

    def rules_for(self, user_name: str, groups: tuple[str, ...], namespace: str,
                  unresolved: list[str] | None = None) -> tuple[list[dict], list[dict]]:
        """(resource rules, non-resource rules) granted to the user in `namespace`
        by every ClusterRoleBinding and the namespace's RoleBindings (RulesFor); `unresolved`
        gathers, in that order, why a binding's role could not be found (RulesFor's errors)."""
        rules: list[dict] = []
        bindings = [(b, "") for b in self.source.list("clusterrolebindings")]
        if namespace:
            bindings += [(b, namespace) for b in self.source.list("rolebindings", namespace)]
        for b, ns in bindings:
            if any(subject_matches(s, user_name, groups, ns) for s in b.get("subjects") or []):
                ref = b.get("roleRef") or {}
                if unresolved is not None and (missing := self._missing(ref, ns)):
                    unresolved.append(missing)
                rules += self._role_rules(ref, ns)
        return [r for r in rules if r.get("resources")], [r for r in rules if r.get("nonResourceURLs")]

    def authorize(self, user_name: str, groups: tuple[str, ...], a: Attributes) -> Decision:
        """Allowed by the first binding, ClusterRoleBindings then the namespace's RoleBindings,
        whose role has a rule that allows `a`."""
        if MASTERS in groups:
            return _MASTERS_ALLOWED
        mark = getattr(self.source, "mark", None)
        if mark is not None and (mark := mark()) != self._mark:
            self._grants.clear()
            self._mark = mark
        for rules, allowed in self._granted(user_name, groups, "", mark is not None):
            for r in rules:
                if rule_allows(r, a):
                    return allowed
        if a.namespace:
            for rules, allowed in self._granted(user_name, groups, a.namespace, mark is not None):
                for r in rules:
                    if rule_allows(r, a):
                        return allowed
        return _NOT_ALLOWED

    def _granted(self, user_name: str, groups, namespace: str, kept: bool) -> tuple[tuple[list[dict], Decision], ...]:
        """For each binding that names the user (every ClusterRoleBinding where `namespace` is "",
        else the namespace's RoleBindings), in order: its role's rules and the decision they allow
        by, which names the binding's first subject that matches. `kept`: remembered until the
        source's mark changes."""
        key = (user_name, groups if type(groups) is tuple else tuple(groups), namespace)
        if kept and (hit := self._grants.get(key)) is not None:
            return hit
        if namespace:
            kind, bindings = "RoleBinding", self.source.list("rolebindings", namespace)
        else:
            kind, bindings = "ClusterRoleBinding", self.source.list("clusterrolebindings")
        grants = []
        for b in bindings:
            for s in b.get("subjects") or ():
                if subject_matches(s, user_name, groups, namespace):
                    ref = b.get("roleRef") or {}
                    shown = f'{b["metadata"]["name"]}/{namespace}' if namespace else b["metadata"]["name"]
                    grants.append((self._role_rules(ref, namespace), Decision(
                        True, f'RBAC: allowed by {kind} "{shown}" of {ref.get("kind")} "{ref.get("name")}" '
                              f'to {s.get("kind")} "{s.get("name")}"')))
                    break
        out = tuple(grants)
        if kept:
            if len(self._grants) >= _GRANTS_LIMIT:
                self._grants.clear()
            self._grants[key] = out
        return out


# --- default policy -----------------------------------------------------------------

_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE_KEY = "rbac.authorization.kubernetes.io/autoupdate"
_AUTOUPDATE = {AUTOUPDATE_KEY: "true"}
_RO = ["get", "list", "watch"]
_RW = ["create", "delete", "deletecollection", "patch", "update"]


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources}


def _urls(verbs: list[str], urls: list[str]) -> dict:
    return {"verbs": verbs, "nonResourceURLs": urls}


def _cluster_role(name: str, rules: list[dict], labels: dict | None = None, aggregate: str = "") -> dict:
    role: dict = {"metadata": {"name": name, "labels": {**_BOOTSTRAP_LABELS, **(labels or {})}, "annotations": dict(_AUTOUPDATE)},
                  "rules": rules}
    if aggregate:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{aggregate}": "true"}}]}
        role["rules"] = []
    return role


def _binding(name: str, role: str, *subjects: tuple[str, str]) -> dict:
    return {"metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}} | \
        ({"subjects": [_subject(k, n) for k, n in subjects]} if subjects else {})


def _subject(kind: str, name: str) -> dict:
    if kind == "ServiceAccount":
        ns, _, sa = name.partition("/")
        return {"kind": kind, "namespace": ns, "name": sa}
    return {"apiGroup": GROUP, "kind": kind, "name": name}


def _role(namespace: str, name: str, rules: list[dict]) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": dict(_BOOTSTRAP_LABELS),
                         "annotations": dict(_AUTOUPDATE)}, "rules": rules}


def _role_binding(namespace: str, name: str, role: str, *subjects: tuple[str, str]) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": dict(_BOOTSTRAP_LABELS),
                         "annotations": dict(_AUTOUPDATE)},
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": role},
            "subjects": [_subject(k, n) for k, n in subjects]}


def _aggregate_to(*roles: str) -> dict:
    return {f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in roles}


_VIEW = [
    _rule(_RO, [""], ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
                      "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                      "services/status"]),
    _rule(_RO, [""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                      "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
    _rule(_RO, [""], ["namespaces"]),
    _rule(_RO, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(_RO, ["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                          "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
                          "statefulsets/scale", "statefulsets/status"]),
    _rule(_RO, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    _rule(_RO, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(_RO, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(_RO, ["resource.k8s.io"], ["resourceclaims", "resourceclaims/status", "resourceclaimtemplates"]),
    _rule(_RO, ["scheduling.k8s.io"], ["workloads", "podgroups"]),
    _rule(_RO, ["certificates.k8s.io"], ["podcertificaterequests"]),
]
_EDIT = [
    _rule(["create", "delete", "deletecollection", "patch", "update", "get", "list", "watch"], [""],
          ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    _rule(["create"], [""], ["pods/eviction", "serviceaccounts/token"]),
    _rule(_RW, [""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                      "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"]),
    _rule(_RO, [""], ["secrets", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "services/proxy"]),
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(_RW, ["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                          "replicasets/scale", "statefulsets", "statefulsets/scale"]),
    _rule(_RW, ["autoscaling"], ["horizontalpodautoscalers"]),
    _rule(_RW, ["batch"], ["cronjobs", "jobs"]),
    _rule(_RW, ["policy"], ["poddisruptionbudgets"]),
    _rule(_RW, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(_RW, ["resource.k8s.io"], ["resourceclaims", "resourceclaimtemplates"]),
    _rule(_RW, ["scheduling.k8s.io"], ["workloads", "podgroups"]),
    _rule(_RW, ["coordination.k8s.io"], ["leases"]),
]
_ADMIN = [
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _rule(_RW + _RO, [GROUP], ["rolebindings", "roles"]),
]
#: the system:node role's rules (bootstrappolicy's NodeRules), which the Node authorizer grants a node
NODE_RULES = [
    _rule(_RO, [""], ["nodes", "pods", "services", "endpoints", "configmaps", "secrets", "persistentvolumeclaims",
                      "persistentvolumes", "serviceaccounts"]),
    _rule(["create", "update", "patch", "delete"], [""], ["nodes", "nodes/status", "pods", "pods/status"]),
    _rule(["get", "update", "patch"], [""], ["persistentvolumeclaims/status"]),
    _rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"]),
    _rule(["create"], [""], ["serviceaccounts/token", "pods/eviction"]),
    _rule(_RW + _RO, ["coordination.k8s.io"], ["leases"]),
    _rule(_RO + ["create"], ["certificates.k8s.io"], ["podcertificaterequests", "certificatesigningrequests"]),
    _rule(_RO, ["certificates.k8s.io"], ["clustertrustbundles"]),
    _rule(_RO + ["update", "patch"], ["resource.k8s.io"], ["resourceclaims", "resourceclaims/status"]),
    _rule(_RW + _RO, ["resource.k8s.io"], ["resourceslices"]),
    _rule(["get"], ["storage.k8s.io"], ["volumeattachments"]),
    _rule(["get", "watch", "list"], ["storage.k8s.io"], ["csidrivers"]),
    _rule(["get", "create", "update", "patch", "delete"], ["storage.k8s.io"], ["csinodes"]),
    # the kubelet's webhook authentication and authorization of its own endpoints (non-mutating creates)
    _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
    _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews", "localsubjectaccessreviews"]),
]


_EVENTS = _rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"])
_RU = _RO + ["update", "patch"]

#: kube-scheduler's role (bootstrappolicy's kubeSchedulerRules): leader election, binding, the
#: objects its plugins read; with DRA, Workload/PodGroup and CompositePodGroup the 1.37 additions
#: its plugins need: claims it allocates (finalizer and status), the extended-resource claims it
#: creates and deletes, and the status of the groups it schedules
_KUBE_SCHEDULER = [
    _EVENTS,
    _rule(["create"], ["coordination.k8s.io"], ["leases"]),
    _rule(["get", "update"], ["coordination.k8s.io"], ["leases"]) | {"resourceNames": ["kube-scheduler"]},
    _rule(["create"], [""], ["endpoints"]),
    _rule(["get", "update"], [""], ["endpoints"]) | {"resourceNames": ["kube-scheduler"]},
    _rule(_RO, [""], ["nodes"]),
    _rule(_RO + ["delete"], [""], ["pods"]),
    _rule(["create"], [""], ["pods/binding", "bindings"]),
    _rule(["patch", "update"], [""], ["pods/status"]),
    _rule(_RO, [""], ["services", "replicationcontrollers"]),
    _rule(_RO, ["apps", "extensions"], ["replicasets"]),
    _rule(_RO, ["apps"], ["statefulsets"]),
    _rule(_RO, ["policy"], ["poddisruptionbudgets"]),
    _rule(_RO, [""], ["persistentvolumeclaims", "persistentvolumes"]),
    _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
    _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    _rule(_RO, ["storage.k8s.io"], ["csinodes"]),
    _rule(_RO, [""], ["namespaces"]),
    _rule(_RO, ["storage.k8s.io"], ["csidrivers"]),
    _rule(_RO, ["storage.k8s.io"], ["csistoragecapacities"]),
    _rule(_RO, ["storage.k8s.io"], ["volumeattachments"]),
    _rule(_RO, ["resource.k8s.io"], ["resourceclaims", "deviceclasses"]),
    _rule(_RU, [""], ["pods/finalizers"]),
    _rule(_RU, ["resource.k8s.io"], ["resourceclaims", "resourceclaims/status"]),
    _rule(["create", "delete"], ["resource.k8s.io"], ["resourceclaims"]),
    _rule(_RO, ["resource.k8s.io"], ["resourceslices", "devicetaintrules"]),
    _rule(_RO, ["scheduling.k8s.io"], ["workloads", "podgroups", "compositepodgroups"]),
    _rule(["patch", "update"], ["scheduling.k8s.io"], ["podgroups/status", "compositepodgroups/status"]),
]
#: kube-controller-manager's own identity: enough to start the shared informers and mint the
#: per-controller service accounts and their tokens (each controller then acts as its own)
_KUBE_CONTROLLER_MANAGER = [
    _EVENTS,
    _rule(["create"], ["coordination.k8s.io"], ["leases"]),
    _rule(["get", "update"], ["coordination.k8s.io"], ["leases"]) | {"resourceNames": ["kube-controller-manager"]},
    _rule(["create"], [""], ["endpoints"]),
    _rule(["get", "update"], [""], ["endpoints"]) | {"resourceNames": ["kube-controller-manager"]},
    _rule(["create"], [""], ["secrets", "serviceaccounts"]),
    _rule(["delete"], [""], ["secrets"]),
    _rule(["get"], [""], ["namespaces", "secrets", "serviceaccounts", "configmaps"]),
    _rule(["update"], [""], ["secrets", "serviceaccounts"]),
    _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
    _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    _rule(["list", "watch"], ["*"], ["*"]),
    _rule(["create"], [""], ["serviceaccounts/token"]),
]
#: the roles of the other system components kube-apiserver bootstraps; only some are bound by default
_COMPONENT_ROLES = [
    _cluster_role("system:kube-scheduler", _KUBE_SCHEDULER),
    _cluster_role("system:volume-scheduler", [
        _rule(_RU, [""], ["persistentvolumes"]),
        _rule(_RO, ["storage.k8s.io"], ["storageclasses"]),
        _rule(_RU, [""], ["persistentvolumeclaims"]),
    ]),
    _cluster_role("system:kube-controller-manager", _KUBE_CONTROLLER_MANAGER),
    _cluster_role("system:node-proxier", [
        _rule(["list", "watch"], [""], ["services", "endpoints"]),
        _rule(_RO, [""], ["nodes"]),
        _EVENTS,
        _rule(["list", "watch"], ["discovery.k8s.io"], ["endpointslices"]),
        _rule(["list", "watch"], ["networking.k8s.io"], ["servicecidrs"]),
    ]),
    _cluster_role("system:kube-dns", [_rule(["list", "watch"], [""], ["endpoints", "services"])]),
    _cluster_role("system:kube-aggregator", [_rule(_RO, [""], ["services", "endpoints"])]),
    _cluster_role("system:heapster", [
        _rule(_RO, [""], ["events", "pods", "nodes", "namespaces"]),
        _rule(_RO, ["extensions"], ["deployments"]),
    ]),
    _cluster_role("system:node-problem-detector", [
        _rule(["get"], [""], ["nodes"]),
        _rule(["patch"], [""], ["nodes/status"]),
        _EVENTS,
    ]),
    _cluster_role("system:persistent-volume-provisioner", [
        _rule(["get", "list", "watch", "create", "delete"], [""], ["persistentvolumes"]),
        _rule(["get", "list", "watch", "update"], [""], ["persistentvolumeclaims"]),
        _rule(_RO, ["storage.k8s.io"], ["storageclasses"]),
        _rule(["watch"], [""], ["events"]),
        _EVENTS,
    ]),
]


#: kube-apiserver's ClusterRoles for certificate requests, bound by nobody by default (kubeadm binds
#: them): csrapproving approves a kubelet client request whose requester may create .../nodeclient or
#: .../selfnodeclient; a bootstrapping kubelet needs the node-bootstrapper's; an approver needs
#: `approve` on the request's signer
_CSR_ROLES = [
    _cluster_role("system:node-bootstrapper",
                  [_rule(["create", "get", "list", "watch"], ["certificates.k8s.io"], ["certificatesigningrequests"])]),
    *(_cluster_role(f"system:certificates.k8s.io:certificatesigningrequests:{sub}",
                    [_rule(["create"], ["certificates.k8s.io"], [f"certificatesigningrequests/{sub}"])])
      for sub in ("nodeclient", "selfnodeclient")),
    *(_cluster_role(f"system:certificates.k8s.io:{signer}-approver",
                    [_rule(["approve"], ["certificates.k8s.io"], ["signers"]) | {"resourceNames": [f"kubernetes.io/{signer}"]}])
      for signer in ("legacy-unknown", "kubelet-serving", "kube-apiserver-client", "kube-apiserver-client-kubelet")),
]


def bootstrap_policy() -> tuple[list[dict], list[dict]]:
    """(ClusterRoles, ClusterRoleBindings) every nanokube cluster starts with,
    the subset of kube-apiserver's bootstrap policy this control plane serves."""
    roles = [
        _cluster_role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])]),
        _cluster_role("admin", [], aggregate="admin"),
        _cluster_role("edit", [], labels=_aggregate_to("admin"), aggregate="edit"),
        _cluster_role("view", [], labels=_aggregate_to("admin", "edit"), aggregate="view"),
        _cluster_role("system:aggregate-to-admin", _ADMIN, _aggregate_to("admin")),
        _cluster_role("system:aggregate-to-edit", _EDIT, _aggregate_to("admin", "edit")),
        _cluster_role("system:aggregate-to-view", _VIEW, _aggregate_to("admin", "edit", "view")),
        _cluster_role("system:discovery", [_urls(["get"], ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                           "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])]),
        _cluster_role("system:public-info-viewer", [_urls(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"])]),
        _cluster_role("system:monitoring", [_urls(["get"], [
            "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*",
            "/statusz", "/flagz"])]),
        _cluster_role("system:service-account-issuer-discovery", [_urls(["get"], [
            "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks",
            "/openid/v1/jwks/"])]),
        _cluster_role("system:basic-user", [
            _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
        ]),
        _cluster_role("system:node", NODE_RULES),
        # full access to the kubelet API (nodes/proxy and the kubelet's fine-grained subresources), bound by
        # nobody by default: what the API server's kubelet client or a node debugger is given
        _cluster_role("system:kubelet-api-admin", [
            _rule(_RO, [""], ["nodes"]),
            _rule(["proxy"], [""], ["nodes"]),
            _rule(["*"], [""], ["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"]),
            _rule(["*"], [""], ["nodes/pods", "nodes/healthz", "nodes/configz"]),
        ]),
        _cluster_role("nanokube:pod-identity-signer", [
            _rule(["sign", "attest"], ["certificates.k8s.io"], ["signers"]) | {"resourceNames": ["nanokube.io/pod-identity"]},
            _rule(_RO, ["certificates.k8s.io"], ["podcertificaterequests"]),
            _rule(["update", "patch"], ["certificates.k8s.io"], ["podcertificaterequests/status"]),
            _rule(_RO + ["create", "update"], ["certificates.k8s.io"], ["clustertrustbundles"]),
        ]),
        # the web console's static page (nanokube/ui), which a browser loads (or HEADs: a non-resource HEAD is verb
        # `head`, as upstream's RequestInfo has it) before it holds a token; what the page then shows, it reads
        # under the user's token
        _cluster_role("nanokube:console", [_urls(["get", "head"], ["/ui", "/ui/*"])]),
        _cluster_role("system:cluster-trust-bundle-discovery", [_rule(_RO, ["certificates.k8s.io"], ["clustertrustbundles"])]),
        # what an extension API server or an auth proxy binds to delegate authentication and authorization
        _cluster_role("system:auth-delegator", [_rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
                                                _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"])]),
        *_CSR_ROLES,
        *_COMPONENT_ROLES,
        *(_cluster_role(f"system:controller:{sa}", rules) for sa, rules in CONTROLLER_RULES.items()),
    ]
    bindings = [
        _binding("cluster-admin", "cluster-admin", ("Group", MASTERS)),
        _binding("system:discovery", "system:discovery", ("Group", "system:authenticated")),
        _binding("system:basic-user", "system:basic-user", ("Group", "system:authenticated")),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 ("Group", "system:authenticated"), ("Group", "system:unauthenticated")),
        _binding("nanokube:console", "nanokube:console",
                 ("Group", "system:authenticated"), ("Group", "system:unauthenticated")),
        _binding("system:monitoring", "system:monitoring", ("Group", "system:monitoring")),
        _binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
                 ("Group", "system:serviceaccounts")),
        # nobody: the Node authorizer grants a node the role's rules, checked against what its pods use
        _binding("system:node", "system:node"),
        # the in-process node agents, which speak for every node as one user (nanokube/node/manager.py)
        _binding("nanokube:node-agents", "system:node", ("User", "system:node-agents")),
        _binding("system:node-proxier", "system:node-proxier", ("User", "system:kube-proxy")),
        _binding("system:kube-controller-manager", "system:kube-controller-manager",
                 ("User", "system:kube-controller-manager")),
        _binding("system:kube-dns", "system:kube-dns", ("ServiceAccount", "kube-system/kube-dns")),
        _binding("system:kube-scheduler", "system:kube-scheduler", ("User", "system:kube-scheduler")),
        _binding("system:volume-scheduler", "system:volume-scheduler", ("User", "system:kube-scheduler")),
        _binding("nanokube:pod-identity-signer", "nanokube:pod-identity-signer",
                 ("ServiceAccount", "kube-system/pod-identity-signer")),
        _binding("system:cluster-trust-bundle-discovery", "system:cluster-trust-bundle-discovery",
                 ("Group", "system:serviceaccounts"), ("Group", "system:nodes")),
        *(_binding(f"system:controller:{sa}", f"system:controller:{sa}", ("ServiceAccount", f"kube-system/{sa}"))
          for sa in CONTROLLER_RULES),
    ]
    return roles, bindings


def _atoms(rule: dict) -> Iterable[tuple[dict, Attributes]]:
    """A rule broken down into one rule per verb, group, resource and name (or URL), each with
    the request it grants (upstream's BreakdownRule)."""
    for verb in rule.get("verbs") or ():
        for url in rule.get("nonResourceURLs") or ():
            yield _urls([verb], [url]), Attributes(verb, url)
        for group in rule.get("apiGroups") or ():
            for resource in rule.get("resources") or ():
                res, _, sub = resource.partition("/")
                for name in rule.get("resourceNames") or [""]:
                    atom = _rule([verb], [group], [resource]) | ({"resourceNames": [name]} if name else {})
                    yield atom, Attributes(verb, "", True, group, "", res, sub, "", name)


def _merged_metadata(existing: dict, wanted: dict) -> dict:
    """The existing metadata with the labels and annotations it lacks; the values it has win."""
    md = existing["metadata"]
    out = dict(md)
    for key in ("labels", "annotations"):
        merged = {**(wanted["metadata"].get(key) or {}), **(md.get(key) or {})}
        if merged != (md.get(key) or {}):
            out[key] = merged
    return out


def reconcile_role(existing: dict, wanted: dict) -> dict | None:
    """The (Cluster)Role the API server's bootstrap reconcile writes over `existing`, or None to
    leave it be (upstream's computeReconciledRole without RemoveExtraPermissions): a role
    annotated autoupdate "false" is the user's; otherwise what the user added stays, and the
    labels, annotations, rules (each piece not covered by a rule it has) and aggregation
    selectors of the default that it lacks are added."""
    if ((existing["metadata"].get("annotations") or {}).get(AUTOUPDATE_KEY)) == "false":
        return None
    out = {**existing, "metadata": _merged_metadata(existing, wanted)}
    if "aggregationRule" in wanted:
        have = (existing.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        missing = [sel for sel in wanted["aggregationRule"]["clusterRoleSelectors"] if sel not in have]
        if missing:
            out["aggregationRule"] = {**(existing.get("aggregationRule") or {}), "clusterRoleSelectors": have + missing}
    else:
        rules = existing.get("rules") or []
        missing = [atom for rule in wanted["rules"] for atom, a in _atoms(rule)
                   if not any(rule_allows(r, a) for r in rules)]
        if missing:
            out["rules"] = rules + missing
    return None if out == existing else out


def _subject_key(subject: dict) -> tuple[str, str, str]:
    return subject.get("kind", ""), subject.get("namespace", ""), subject.get("name", "")


#: subjects an earlier nanokube's default binding named and reconcile takes out: system:node named the
#: whole system:nodes group, which would grant every node what the Node authorizer refused it
_RETIRED_SUBJECTS = {"system:node": {("Group", "", "system:nodes")}}


def reconcile_binding(existing: dict, wanted: dict) -> tuple[dict | None, bool]:
    """(the binding to write over `existing` or None, whether it must be deleted and created
    again) as upstream's computeReconciledRoleBinding: autoupdate "false" keeps it; else the
    labels, annotations and subjects it lacks are added (and a retired default subject taken
    out), and a different roleRef, which is immutable, is set by recreating it."""
    if ((existing["metadata"].get("annotations") or {}).get(AUTOUPDATE_KEY)) == "false":
        return None, False
    out = {**existing, "metadata": _merged_metadata(existing, wanted)}
    have = existing.get("subjects") or []
    retired = _RETIRED_SUBJECTS.get(existing["metadata"]["name"], ())
    if any(_subject_key(s) in retired for s in have):
        have = [s for s in have if _subject_key(s) not in retired]
        out = {k: v for k, v in out.items() if k != "subjects"} | ({"subjects": have} if have else {})
    keys = {_subject_key(s) for s in have}
    missing = [s for s in wanted.get("subjects") or [] if _subject_key(s) not in keys]
    if missing:
        out["subjects"] = have + missing
    if existing.get("roleRef") != wanted["roleRef"]:
        return {**out, "roleRef": wanted["roleRef"]}, True
    return (None if out == existing else out), False


def namespace_policy() -> tuple[list[dict], list[dict]]:
    """(Roles, RoleBindings) kube-apiserver's bootstrap policy puts in kube-system and
    kube-public (bootstrappolicy/namespace_policy.go): notably the Role an extension API
    server's RoleBinding names to read the extension-apiserver-authentication ConfigMap."""
    events = _rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"])
    sys, pub = "kube-system", "kube-public"
    roles = [
        _role(sys, "extension-apiserver-authentication-reader", [
            _rule(_RO, [""], ["configmaps"]) | {"resourceNames": ["extension-apiserver-authentication"]}]),
        _role(sys, "system:controller:bootstrap-signer", [_rule(_RO, [""], ["secrets"])]),
        _role(sys, "system:controller:cloud-provider", [_rule(["create", "get", "list", "watch"], [""], ["configmaps"])]),
        _role(sys, "system:controller:token-cleaner", [_rule(["delete", "get", "list", "watch"], [""], ["secrets"]), events]),
        _role(sys, "system::leader-locking-kube-controller-manager", [
            _rule(["watch"], [""], ["configmaps"]),
            _rule(["get", "update"], [""], ["configmaps"]) | {"resourceNames": ["kube-controller-manager"]},
            _rule(["create", "get", "list", "update", "watch"], ["coordination.k8s.io"], ["leases"])]),
        _role(sys, "system::leader-locking-kube-scheduler", [
            _rule(["watch"], [""], ["configmaps"]),
            _rule(["get", "update"], [""], ["configmaps"]) | {"resourceNames": ["kube-scheduler"]}]),
        _role(pub, "system:controller:bootstrap-signer", [
            _rule(_RO, [""], ["configmaps"]),
            _rule(["update"], [""], ["configmaps"]) | {"resourceNames": ["cluster-info"]}, events]),
    ]
    bindings = [
        _role_binding(sys, "system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader",
                      ("User", "system:kube-controller-manager"), ("User", "system:kube-scheduler")),
        _role_binding(sys, "system::leader-locking-kube-controller-manager", "system::leader-locking-kube-controller-manager",
                      ("User", "system:kube-controller-manager"), ("ServiceAccount", "kube-system/kube-controller-manager"),
                      ("ServiceAccount", "kube-system/leader-election-controller")),
        _role_binding(sys, "system::leader-locking-kube-scheduler", "system::leader-locking-kube-scheduler",
                      ("User", "system:kube-scheduler"), ("ServiceAccount", "kube-system/kube-scheduler")),
        *(_role_binding(sys, f"system:controller:{sa}", f"system:controller:{sa}", ("ServiceAccount", f"kube-system/{sa}"))
          for sa in ("bootstrap-signer", "cloud-provider", "token-cleaner")),
        _role_binding(pub, "system:controller:bootstrap-signer", "system:controller:bootstrap-signer",
                      ("ServiceAccount", "kube-system/bootstrap-signer")),
    ]
    return roles, bindings
