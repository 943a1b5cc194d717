"""Admission: the chain every write passes, in kube-apiserver's order.

Mutating admission runs on the decoded, defaulted object before the
strategy validates it: the in-tree mutating plugins, MutatingAdmissionPolicy,
then the mutating webhooks; when a policy or webhook changed the object the
chain runs a second round, in which the in-tree plugins run again and an
`IfNeeded` policy or webhook is called again if the object changed after it
ran (never one that was not called in the first round). Validating
admission runs on the final, validated object: the in-tree validating
plugins, ValidatingAdmissionPolicy, the validating webhooks, then
ResourceQuota. Configuration objects of admissionregistration.k8s.io are
never sent to policies or webhooks. Warnings come back as `Warning` headers
and audit annotations land in the request's audit event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar

from ...cel.library.authz import Authz
from ...machinery import errors, gofmt
from ...machinery.podgroups import PODGROUP_PROTECTION
from ...registry.base import Resource
from .. import warning
from ...machinery.user import User
from ..auth.authorizer import Attributes as AuthzAttributes, decide
from ..webhook.client import WebhookClient
from ..webhook.resolver import EndpointServiceResolver
from .attributes import SCALE_KIND, Attributes
from .default_ingress_class import DefaultIngressClass
from .default_storage_class import DefaultStorageClass
from .limit_ranger import LimitRanger
from .node_taint import TaintNodesByCondition
from .persistent_volume_claim_resize import PersistentVolumeClaimResize
from .pod_security import PodSecurity
from .resource_quota import ResourceQuota
from .runtime_class import RuntimeClass
from .service_account import ServiceAccount
from .storage_object_in_use import StorageObjectInUseProtection
from .matching import exempt
from ..auth.escalation import GROUP as ESCALATION_GROUP, RBACEscalation
from .plugins import BuiltinPlugins, CertificateSigners
from .policies import MutatingPolicies, PolicyRound, ValidatingPolicies
from .source import ConfigSource
from .webhooks import MutationRound, Webhooks

__all__ = ["AUDIT_ANNOTATIONS", "Admission", "Attributes", "PODGROUP_PROTECTION"]

#: the audit annotations of the request being served (set by the HTTP layer)
AUDIT_ANNOTATIONS: ContextVar[dict | None] = ContextVar("admission_audit_annotations", default=None)


def _warning_header(warnings: list[str]) -> str:
    return ", ".join('299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in warnings)


#: kube-apiserver's registered admission plugins (AllOrderedPlugins): the names its
#: --disable-admission-plugins knows
KNOWN_PLUGINS = frozenset({
    "AlwaysAdmit", "AlwaysDeny", "AlwaysPullImages", "CertificateApproval", "CertificateSigning",
    "CertificateSubjectRestriction", "ClusterTrustBundleAttest", "DefaultIngressClass", "DefaultStorageClass",
    "DefaultTolerationSeconds", "DenyServiceExternalIPs", "EventRateLimit", "ExtendedResourceToleration",
    "ImagePolicyWebhook", "LimitPodHardAntiAffinityTopology", "LimitRanger", "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook", "NamespaceAutoProvision", "NamespaceExists", "NamespaceLifecycle",
    "NodeRestriction", "OwnerReferencesPermissionEnforcement", "PersistentVolumeClaimResize", "PodNodeSelector",
    "PodSecurity", "PodTolerationRestriction", "PodTopologyLabels", "Priority", "ResourceQuota", "RuntimeClass",
    "ServiceAccount", "StorageObjectInUseProtection", "TaintNodesByCondition", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook"})


def admission_flag_problem(names) -> str | None:
    """Why `names` cannot be given to --disable-admission-plugins: a name kube-apiserver does not
    know (its own message), or a plugin nanokube always runs (only ServiceAccount, PodSecurity and
    TaintNodesByCondition can be turned off)."""
    for name in names:
        if name not in KNOWN_PLUGINS:
            return f"disable-admission-plugins plugin {gofmt.quote(name)} is unknown"
    fixed = sorted(set(names) - {ServiceAccount.name, PodSecurity.name, TaintNodesByCondition.name})
    if fixed:
        return (f"disable-admission-plugins: nanokube always runs {', '.join(fixed)}; only ServiceAccount, "
                "PodSecurity and TaintNodesByCondition can be turned off")
    return None


class Admission:
    def __init__(self, rest) -> None:
        self.rest = rest
        self.plugins = BuiltinPlugins(rest)
        self.limit_ranger = LimitRanger(rest)
        self.runtime_class = RuntimeClass(rest)
        self.node_taint = TaintNodesByCondition()
        #: in-tree mutating plugins after the built-ins, in upstream's order
        self.mutators = [self.limit_ranger, self.node_taint, DefaultStorageClass(rest), StorageObjectInUseProtection(),
                         self.runtime_class, DefaultIngressClass(rest)]
        #: the ServiceAccount plugin, None where disabled (it awaits: a missing account is looked up again)
        self.service_account: ServiceAccount | None = ServiceAccount(rest)
        self.claim_resize = PersistentVolumeClaimResize(rest)
        #: PodSecurity (Pod Security Standards by namespace labels)
        self.pod_security = PodSecurity(rest)
        #: in-tree validating plugins after the built-ins, in upstream's order
        self.validators = [self.limit_ranger, self.pod_security, self.claim_resize, self.runtime_class]
        self.signers = CertificateSigners(self.plugins)
        #: RBAC escalation prevention, on the mutated object before the registry validates it
        self.escalation = RBACEscalation(self.plugins)
        #: (mutators, validators) that can act on a (group, plural), in order: most writes are of
        #: kinds none of them handles, and a call to each to return at once was ~10 k instructions
        self._in_tree: dict[tuple[str, str], tuple[list, list]] = {}
        self.quota = ResourceQuota(rest)
        self.client = WebhookClient(EndpointServiceResolver(rest))
        #: the CEL authorizer, bound once the server's authorizer is known
        self.authz: Authz | None = None
        #: the loop CEL's `authorizer` checks are handed back to from a worker
        self._loop: asyncio.AbstractEventLoop | None = None
        self.configs = ConfigSource(rest)
        self.webhooks = Webhooks(rest, self.client, self.configs)
        self.mutating_policies = MutatingPolicies(rest, self.configs)
        self.validating_policies = ValidatingPolicies(rest, self.configs)

    def disable(self, *names: str) -> None:
        """kube-apiserver's --disable-admission-plugins, for the plugins that can be turned off:
        `ServiceAccount`, which refuses every pod until the serviceaccount controller has made its
        namespace's account (an API server without a controller manager disables it, as upstream's
        integration tests do), `PodSecurity`, and `TaintNodesByCondition`, whose taint only the node
        lifecycle controller takes off (a cluster that runs none disables it)."""
        if problem := admission_flag_problem(names):
            raise ValueError(problem)
        if TaintNodesByCondition.name in names and self.node_taint in self.mutators:
            self.mutators.remove(self.node_taint)
            self._in_tree.clear()
        if ServiceAccount.name in names:
            self.service_account = None
        if PodSecurity.name in names and self.pod_security in self.validators:
            self.validators.remove(self.pod_security)
            self._in_tree.clear()

    def configure(self, configs: dict[str, object]) -> None:
        """Plugins' configurations from --admission-control-config-file (config_file.plugin_configs)."""
        if "PodSecurity" in configs:
            self.pod_security.configure(configs["PodSecurity"])
        if "ResourceQuota" in configs:
            self.quota.configure(configs["ResourceQuota"])

    @property
    def authorizer(self):
        return self.plugins.authorizer

    @authorizer.setter
    def authorizer(self, value) -> None:
        """The server's authorizer: for signer checks and CEL's `authorizer`."""
        self.plugins.authorizer = value
        self.authz = Authz(self._authorize) if value is not None else None

    def _authorize(self, attrs: dict) -> tuple[str, str, str | None]:
        """A CEL authorization check through the server's authorizer."""
        user = attrs["user"]
        at = AuthzAttributes(attrs["verb"], attrs.get("path", ""), attrs["resourceRequest"], attrs.get("apiGroup", ""),
                             attrs.get("apiVersion", ""), attrs.get("resource", ""), attrs.get("subresource", ""),
                             attrs.get("namespace", ""), attrs.get("name", ""), attrs.get("fieldSelector", ""))
        authorizer, groups = self.plugins.authorizer, tuple(user.get("groups") or ())
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # CEL in a worker (Attributes.authorizer_waits): the loop decides, off it the webhook
            subject = User(user["username"], groups, user.get("uid", ""), user.get("extra") or {})
            decision = asyncio.run_coroutine_threadsafe(decide(authorizer, subject, at), self._loop).result()
        else:
            decision = authorizer.authorize(user["username"], groups, at)
        verdict = "Allow" if decision.allowed else "Deny" if decision.denied else "NoOpinion"
        return verdict, decision.reason, decision.error or None

    def _with_authorizer(self, a: Attributes) -> None:
        """CEL's `authorizer` for the request, set once policies or webhooks are about to see it:
        only they read it, and most writes meet none (each built two dicts of it and the user's
        info). What it is made of (user, resource, namespace, name) is fixed with the attributes."""
        if self.authz is not None and a.authorizer is None:
            a.authorizer = self.authz.authorizer(a.user_info(), {
                "group": a.res.group, "resource": a.res.plural, "subresource": a.subresource,
                "namespace": a.namespace, "name": a.name})
            a.authorizer_waits = getattr(self.plugins.authorizer, "asks_webhooks", False)
            if a.authorizer_waits:
                self._loop = asyncio.get_running_loop()

    def attributes(self, res: Resource, version: str, subresource: str, op: str, obj: dict | None,
                   old: dict | None, opts, options: dict | None = None) -> Attributes:
        md = (obj or old or {}).get("metadata") or {}
        name = md.get("name", "")
        namespace = name if res.group == "" and res.plural == "namespaces" else (md.get("namespace") or "")
        a = Attributes(res, version, subresource, op, namespace, name, obj, old, opts, options or {})
        if subresource == "scale":
            a.sub_kind = dict(SCALE_KIND)
        return a

    def subresource_attributes(self, res: Resource, version: str, subresource: str, kind: dict, namespace: str,
                               name: str, obj: dict, opts, operation: str = "CREATE") -> Attributes:
        """A create (pods/binding, pods/eviction) or connect (pods/exec, attach, portforward)
        through a subresource that takes an object of its own."""
        return Attributes(res, version, subresource, operation, namespace or "", name, obj, None, opts, sub_kind=kind)

    def shows_objects(self, res: Resource) -> bool:
        """Whether a write to `res` may be shown to a policy or webhook, which see (and may change)
        all of its object."""
        return not exempt(res) and self.configs.configured()

    async def mutate(self, a: Attributes) -> None:
        """The mutating chain; then, on the object it leaves, what upstream's RBAC storage judges before
        its registry validates the object (escalation: a role both invalid and escalating is 403)."""
        if exempt(a.res) or not self.configs.configured():  # no policy or webhook to change the object: one round
            if self.service_account is not None and a.res.plural == "pods":
                await self._mutate_in_tree(a)
            else:  # nothing in-tree awaits: no coroutine for it (most writes)
                self._mutate_builtin(a)
        else:
            state, policies = MutationRound(), PolicyRound()
            for state.round in (0, 1):
                await self._mutate_in_tree(a)
                if not exempt(a.res) and self.configs.configured():
                    self._with_authorizer(a)
                    await self.mutating_policies.mutate(a, policies, state.round)
                    await self.webhooks.mutate(a, state)
                if not (state.changed or policies.changed):
                    break  # nothing changed the object: no second round
        if a.res.group == ESCALATION_GROUP:
            await self.escalation.validate(a)

    async def _mutate_in_tree(self, a: Attributes) -> None:
        if self.service_account is None or a.res.plural != "pods" or a.operation != "CREATE" \
                or a.obj is None or (a.sub_kind is not None and not a.scale):
            self._mutate_builtin(a)
            return
        self.plugins.mutate(a.res, a.operation, a.obj, a.old, a.opts, a.subresource, a.namespace)
        await self.service_account.admit(a)
        for p in self._plugins_for(a.res)[0]:
            p.mutate(a)

    def _mutate_builtin(self, a: Attributes) -> None:
        """The in-tree mutating plugins of a write the ServiceAccount plugin does not admit."""
        if a.operation == "DELETE":
            self.plugins.mutate_delete(a.res, a.name, a.opts, a.old)
        elif a.obj is not None and a.operation in ("CREATE", "UPDATE") and (a.sub_kind is None or a.scale):
            self.plugins.mutate(a.res, a.operation, a.obj, a.old, a.opts, a.subresource, a.namespace)
            for p in self._plugins_for(a.res)[0]:
                p.mutate(a)
        elif a.operation == "CREATE" and a.sub_kind is not None:
            self.plugins.mutate_subresource(a.res, a.subresource, a.namespace, a.name, a.opts)

    def _plugins_for(self, res: Resource) -> tuple[list, list]:
        kind = (res.group, res.plural)
        found = self._in_tree.get(kind)
        if found is None:
            found = self._in_tree[kind] = ([p for p in self.mutators if kind in p.mutates],
                                           [p for p in self.validators if kind in p.validates])
        return found

    async def validate(self, a: Attributes) -> None:
        if a.obj is not None and a.operation in ("CREATE", "UPDATE") and (a.sub_kind is None or a.scale):
            self.plugins.validate(a.res, a.operation, a.obj, a.old, a.opts)
            if self.service_account is not None and a.res.plural == "pods":
                await self.service_account.validate(a)
            for p in self._plugins_for(a.res)[1]:
                p.validate(a)
            if a.res.group == "certificates.k8s.io":
                await self.signers.validate(a)
        if not exempt(a.res) and self.configs.configured():
            self._with_authorizer(a)
            await self.validating_policies.validate(a)
            await self.webhooks.validate(a)
        if self.quota.may_charge(a):
            await self.quota.validate(a)

    async def admit(self, a: Attributes, mutated: Callable[[dict], None] | None = None) -> None:
        """Both chains over one request (a subresource's or a DELETE's), its annotations and
        warnings published whether they admit it or not; `mutated` judges the object between them."""
        try:
            await self.mutate(a)
            if mutated is not None:
                mutated(a.obj)
            await self.validate(a)
        except errors.APIError as e:
            self.publish(a, e)
            raise
        self.publish(a)

    def publish(self, a: Attributes, error: errors.APIError | None = None) -> list[str]:
        """Hand the request's audit annotations to its audit event; return its
        warnings (on an error they go on the error's headers)."""
        audit = AUDIT_ANNOTATIONS.get()
        if audit is not None:
            for k, v in a.annotations.items():
                audit.setdefault(k, v)
        if error is not None and a.warnings:
            error.headers = {**error.headers, "Warning": _warning_header(warning.texts(a.warnings))}
        return a.warnings
