"""Built-in admission: the plugins kube-apiserver enables by default that
change what users see. Mutating (they run first, in upstream's order):
NamespaceLifecycle, NodeRestriction, Priority, the CertificateSigningRequest
requester and PodGroupProtection (ServiceAccount is service_account.py). Validating:
ClusterTrustBundleAttest, CertificateSubjectRestriction, DRA's admin-access namespace check,
Priority's one global default, and CertificateApproval and CertificateSigning (CertificateSigners,
which needs the subresource)."""

from __future__ import annotations

from ...registry.base import Resource
from ...machinery.validation import forbidden
from ...machinery import errors
from ...machinery.podgroups import PODGROUP_PROTECTION
from ..auth.restriction import (attest, certificate_signers, node_deletion, node_pod_certificate_signer,
                                node_restriction, node_subresource, pod_certificate_signer)
from .lookup import Listing

#: NamespaceLifecycle refuses to delete these
IMMORTAL_NAMESPACES = frozenset(("default", "kube-system", "kube-public"))
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
SYSTEM_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def _subject_restriction(csr: dict) -> None:
    """CertificateSubjectRestriction: no kube-apiserver-client request for a system:masters certificate."""
    signer = "kubernetes.io/kube-apiserver-client"
    if (csr.get("spec") or {}).get("signerName") != signer:
        return
    from ...pki.csr import organizations, parse_request
    if "system:masters" in organizations(parse_request(csr)):
        raise errors.forbidden("certificates.k8s.io", "certificatesigningrequests", csr["metadata"].get("name", ""),
                               f"use of {signer} signer with system:masters group is not allowed")


def _keep_priority(pod: dict, old: dict) -> None:
    """Priority on a pod update: a body without spec.priority keeps the one the create computed
    (validation refuses any other change of it)."""
    spec, was = pod.get("spec"), (old.get("spec") or {}).get("priority")
    if isinstance(spec, dict) and spec.get("priority") is None and was is not None:
        spec["priority"] = was


class BuiltinPlugins:
    def __init__(self, rest) -> None:
        self.rest = rest
        #: the server's authorizer, for checks on signer permissions; None where requests are not authorized
        self.authorizer = None
        #: where Namespaces are stored (NamespaceLifecycle reads one on every namespaced create)
        self._namespaces: str | None = None
        #: the PriorityClass marked globalDefault, or None; of several (created in a race), the one
        #: of the lowest value, as upstream's getDefaultPriorityClass picks
        self._global_default = Listing(rest, "scheduling.k8s.io", "priorityclasses",
                                       lambda pcs: min((pc for pc in pcs if pc.get("globalDefault")),
                                                       key=lambda pc: pc.get("value", 0), default=None))

    def mutate(self, res: Resource, op: str, obj: dict, old: dict | None, opts, subresource: str = "",
               namespace: str = "") -> None:
        """The in-tree mutating plugins, on the object in its storage form; `namespace`: the request's."""
        if res.namespaced and op == "CREATE":
            self._namespace_lifecycle(res, obj, namespace)
        node_restriction(self._lookup, res.group, res.plural, op, obj, old, opts.user, subresource)
        if res.group == "certificates.k8s.io" and res.plural == "certificatesigningrequests" and op == "CREATE":
            self._csr_requester(obj, opts.user)
        if res.group == "scheduling.k8s.io" and res.plural == "podgroups" and op == "CREATE":
            self._priority(obj, res.group_resource)
            finalizers = obj.setdefault("metadata", {}).setdefault("finalizers", [])
            if PODGROUP_PROTECTION not in finalizers:
                finalizers.append(PODGROUP_PROTECTION)
        if res.group == "" and res.plural == "pods" and op == "CREATE":
            self._priority(obj)
        if res.group == "" and res.plural == "pods" and op == "UPDATE" and not subresource and old is not None:
            _keep_priority(obj, old)

    def mutate_delete(self, res: Resource, name: str, opts=None, old: dict | None = None) -> None:
        """The in-tree mutating plugins on a DELETE of `old`: NamespaceLifecycle keeps the immortal
        namespaces; NodeRestriction lets a node delete only its own pods, CSINode, Lease and ResourceSlices."""
        if res.group == "" and res.plural == "namespaces" and name in IMMORTAL_NAMESPACES:
            raise errors.forbidden("", "namespaces", name, "this namespace may not be deleted")
        if opts is not None and old is not None:
            node_deletion(self._lookup, res.group, res.plural, old, opts.user)

    def mutate_subresource(self, res: Resource, subresource: str, namespace: str, name: str, opts) -> None:
        """The in-tree mutating plugins on a create through a subresource that takes an object of its
        own: NodeRestriction lets a node evict only its own pods."""
        node_subresource(self._lookup, res.group, res.plural, subresource, namespace, name, opts.user)

    def validate(self, res: Resource, op: str, obj: dict, old: dict | None, opts) -> None:
        """The in-tree validating plugins, on the final object."""
        if res.group == "certificates.k8s.io" and res.plural == "certificatesigningrequests" and op == "CREATE":
            _subject_restriction(obj)
        if res.group == "resource.k8s.io" and res.plural in ("resourceclaims", "resourceclaimtemplates") \
                and op == "CREATE":
            self._admin_access(res, obj)
        if res.group == "scheduling.k8s.io" and res.plural == "priorityclasses" and op in ("CREATE", "UPDATE"):
            self._one_global_default(obj, op)

    def _one_global_default(self, pc: dict, op: str) -> None:
        """Priority's validation: a second PriorityClass may not be created as, or made, the global default."""
        if not pc.get("globalDefault"):
            return
        default = self._global_default()
        name = pc["metadata"].get("name", "")
        if default is not None and (op == "CREATE" or default["metadata"]["name"] != name):
            raise errors.forbidden("scheduling.k8s.io", "priorityclasses", name,
                                   f"PriorityClass {default['metadata']['name']} is already marked as default. "
                                   "Only one default can exist")

    def _admin_access(self, res: Resource, obj: dict) -> None:
        """DRA admin access (in-use devices) only in namespaces labelled for it (KEP-5018)."""
        spec = obj.get("spec") or {}
        prefix = "spec.spec" if res.plural == "resourceclaimtemplates" else "spec"
        devices = ((spec.get("spec") or {}) if res.plural == "resourceclaimtemplates" else spec).get("devices") or {}
        paths = [f"{prefix}.devices.requests[{i}].exactly.adminAccess"
                 for i, r in enumerate(devices.get("requests") or []) if ((r.get("exactly") or {}).get("adminAccess"))]
        if not paths:
            return
        ns = self._lookup("", "namespaces", "", obj["metadata"].get("namespace", "")) or {}
        if (ns.get("metadata", {}).get("labels") or {}).get(ADMIN_ACCESS_LABEL) == "true":
            return
        why = f"admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"
        raise errors.invalid(res.group, res.kind, obj["metadata"].get("name", ""), [forbidden(p, why) for p in paths])

    def _lookup(self, group: str, plural: str, namespace: str, name: str) -> dict | None:
        entry = self.rest.cache.get(self.rest.index.get(group, "v1", plural).key(namespace or None, name))
        return entry.obj if entry is not None else None

    def _csr_requester(self, csr: dict, user) -> None:
        """The requester's identity is recorded by the server, never trusted from the body."""
        spec = csr.setdefault("spec", {})
        spec["username"] = user.name
        spec["groups"] = list(user.groups)
        if user.uid:
            spec["uid"] = user.uid
        else:
            spec.pop("uid", None)
        if user.extra:
            spec["extra"] = user.extra
        else:
            spec.pop("extra", None)

    def _namespace_lifecycle(self, res: Resource, obj: dict, namespace: str = "") -> None:
        """As upstream's, of the request's namespace (a.GetNamespace()), whatever a policy or webhook
        left in the object's (it must match the request's later, as BeforeCreate checks)."""
        ns = namespace or obj["metadata"].get("namespace")
        if self._namespaces is None:
            self._namespaces = self.rest.index.get("", "v1", "namespaces").key_prefix()
        entry = self.rest.cache.get(f"{self._namespaces}{ns}")
        if entry is None:
            raise errors.APIError(404, "NotFound", f'namespaces "{ns}" not found',
                                  {"name": ns, "kind": "namespaces"})
        if entry.obj["metadata"].get("deletionTimestamp") or (entry.obj.get("status") or {}).get("phase") == "Terminating":
            if res.plural not in ("events",):
                raise errors.APIError(
                    403, "Forbidden",
                    f'{res.group_resource} "{obj["metadata"].get("name") or obj["metadata"].get("generateName", "")}" is forbidden: '
                    f"unable to create new content in namespace {ns} because it is being terminated",
                    {"name": obj["metadata"].get("name", ""), "group": res.group, "kind": res.plural,
                     "causes": [{"reason": errors.NAMESPACE_TERMINATING, "message": f"namespace {ns} is being terminated", "field": "metadata.namespace"}]})

    def _priority(self, pod: dict, kind: str = "pods") -> None:
        """Priority admission for pods and PodGroups (upstream's admitPod): spec.priority and
        spec.preemptionPolicy come from the PriorityClass, the global default, or 0 and
        PreemptLowerPriority; a create that sets either to anything else is refused (a PodGroup's
        preemptionPolicy excepted), as a client may not pick its own priority."""
        spec = pod.setdefault("spec", {})
        name = spec.get("priorityClassName")
        if not name:
            default = self._global_default()
            if default is None:
                value, policy = 0, "PreemptLowerPriority"
            else:
                name, value = default["metadata"]["name"], default.get("value", 0)
                policy = default.get("preemptionPolicy", "PreemptLowerPriority")
        else:
            pcres = self.rest.index.get("scheduling.k8s.io", "v1", "priorityclasses")
            pc = self.rest.cache.get(pcres.key(None, name)) if pcres else None
            if pc is not None:
                value, policy = pc.obj.get("value", 0), pc.obj.get("preemptionPolicy", "PreemptLowerPriority")
            elif name in SYSTEM_PRIORITY:
                value, policy = SYSTEM_PRIORITY[name], "PreemptLowerPriority"
            else:
                raise self._priority_forbidden(pod, kind, f"no PriorityClass with name {name} was found")
        if spec.get("priority") is not None and spec["priority"] != value:
            raise self._priority_forbidden(
                pod, kind, f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name")
        if kind != "pods":
            # a PodGroup's policy only defaults from the class (validation then judges one it sets)
            policy = spec.get("preemptionPolicy") or policy
        elif spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
            raise self._priority_forbidden(
                pod, kind, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided "
                f"in pod spec; priority admission controller computed {policy} from the given PriorityClass name")
        if name:
            spec["priorityClassName"] = name
        spec["priority"] = value
        spec["preemptionPolicy"] = policy

    @staticmethod
    def _priority_forbidden(obj: dict, kind: str, why: str) -> errors.APIError:
        """admission.NewForbidden: 403 naming the object, by its generateName before it has a name."""
        plural, _, group = kind.partition(".")
        meta = obj["metadata"]
        return errors.forbidden(group, plural, meta.get("name") or meta.get("generateName", ""), why)


class CertificateSigners:
    """The checks on signer permissions, once the server's authorizer is known: ClusterTrustBundleAttest
    (restriction.attest); NodeRestriction's signer check of a node's PodCertificateRequest;
    CertificateApproval and CertificateSigning (restriction.certificate_signers)
    on writes through a CertificateSigningRequest's /approval and /status; and the
    PodCertificateRequest status strategy's `sign` check (restriction.pod_certificate_signer), which
    comes, as upstream's, after the status validation. Awaited: the authorizer may ask a webhook."""

    def __init__(self, plugins: BuiltinPlugins) -> None:
        self.plugins = plugins

    async def validate(self, a) -> None:
        authorizer = self.plugins.authorizer
        if authorizer is None or a.res.group != "certificates.k8s.io":
            return
        if a.res.plural == "clustertrustbundles":
            await attest(authorizer, a.obj, a.old, a.opts.user)
        elif a.res.plural == "podcertificaterequests" and a.operation == "CREATE":
            await node_pod_certificate_signer(authorizer, self.plugins._lookup, a.obj, a.opts.user)
        elif a.operation != "UPDATE" or a.old is None:
            return
        elif a.res.plural == "podcertificaterequests":
            if a.subresource == "status":
                await pod_certificate_signer(authorizer, a.obj, a.old, a.opts.user)
        elif a.res.plural == "certificatesigningrequests":
            await certificate_signers(authorizer, a.subresource, a.obj, a.old, a.opts.user)
