"""ValidatingAdmissionPolicy status: type-checks each policy's expressions
against the kinds its matchConstraints name and records what does not check
in `status.typeChecking.expressionWarnings` with `status.observedGeneration`
(kube-controller-manager's validatingadmissionpolicy-status-controller).

`object` and `oldObject` are typed from release-1.37's OpenAPI of each
matched kind (a CustomResourceDefinition's schema for custom kinds) and
`params` from the paramKind's; `request`, `namespaceObject` and `authorizer`
are typed as admission declares them, for every expression, as upstream's
checker does; rules with wildcards name no kind and are not checked. A warning reads as upstream's: `apps/v1, Kind=Deployment: ERROR:
<input>:1:13: undefined field 'replica'` with the source lines.
"""

from __future__ import annotations

import orjson

from .. import schema as schemas
from ..cel import CELError, Environment
from ..cel import admission
from ..cel.openapi import field_type, schema_type
from ..cel.types import DYN, Type
from ..client.informer import key_of
from ..machinery.errors import APIError
from .base import Controller

GROUP = "admissionregistration.k8s.io"
FIELD_MANAGER = "validatingadmissionpolicy-status"
#: schema objects' fields, and those of request and namespaceObject as admission declares them
_FIELD_TYPE = admission.field_type(field_type)
CRD_GROUP = "apiextensions.k8s.io"


def gvk_string(group: str, version: str, kind: str) -> str:
    """schema.GroupVersionKind's String()."""
    return f"{group}/{version}, Kind={kind}"


class ValidatingAdmissionPolicyStatusController(Controller):
    name = "validatingadmissionpolicy-status-controller"
    queue_name = "validatingadmissionpolicy-status"

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.policies = client.resource(GROUP, "v1", "validatingadmissionpolicies")
        self.inf = self.informer_factory.informer(self.policies)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.inf]

    def _enqueue(self, policy: dict) -> None:
        self.queue.add(key_of(policy))

    async def sync(self, key: str) -> None:
        policy = self.inf.get(key)
        if policy is None:
            return
        generation = policy["metadata"].get("generation", 0)
        if generation <= ((policy.get("status") or {}).get("observedGeneration") or 0):
            return
        warnings = await self.check(policy)
        status = {"observedGeneration": generation, "typeChecking": {"expressionWarnings": warnings}}
        body = {"apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": policy["metadata"]["name"]}, "status": status}
        try:
            await self.policies.patch(policy["metadata"]["name"], orjson.dumps(body), "application/apply-patch+yaml",
                                      subresource="status", field_manager=FIELD_MANAGER, force=True)
        except APIError as e:
            if e.code != 404:
                raise

    # --- type checking ------------------------------------------------------

    async def check(self, policy: dict) -> list[dict]:
        spec = policy.get("spec") or {}
        kinds = await self._matched_kinds(spec.get("matchConstraints") or {})
        if not kinds:
            return []
        params = DYN
        pk = spec.get("paramKind")
        if pk:
            group, _, version = (pk.get("apiVersion") or "").rpartition("/")
            params = await self._kind_type(group, version, pk.get("kind", "")) or DYN
        envs = [(gvk_string(g, v, k), Environment({
            "object": t, "oldObject": t, "params": params, "variables": DYN, **admission.TYPED},
            _FIELD_TYPE)) for (g, v, k), t in kinds]
        out = []
        for i, v in enumerate(spec.get("validations") or []):
            for fld in ("expression", "messageExpression"):
                if v.get(fld):
                    text = self._check_one(envs, v[fld])
                    if text:
                        out.append({"fieldRef": f"spec.validations[{i}].{fld}", "warning": text})
        return out

    @staticmethod
    def _check_one(envs: list[tuple[str, Environment]], expression: str) -> str:
        messages = []
        for gvk, env in envs:
            try:
                env.compile(expression)
            except CELError as e:
                messages.append(f"{gvk}: {e}\n")
        return "\n".join(messages)

    def _kinds_by_resource(self) -> dict[tuple[str, str, str], str]:
        return {(r.group, v, r.plural): r.kind for r in self.client.resources() for v in r.versions}

    async def _matched_kinds(self, mc: dict) -> list[tuple[tuple[str, str, str], Type]]:
        """The kinds the rules name exactly (no wildcards, no subresources), with their types. The
        first resource discovery lacks has it read again, once per policy, as upstream's type
        checker resets its RESTMapper on a miss: a CRD installed after the controller last read
        discovery is checked against (one installed after the policy is not: its generation, not a
        new kind, is what checks a policy again)."""
        by_plural, refreshed = self._kinds_by_resource(), False
        out, seen = [], set()
        for rule in mc.get("resourceRules") or []:
            for g in rule.get("apiGroups") or []:
                for v in rule.get("apiVersions") or []:
                    for res in rule.get("resources") or []:
                        if "*" in (g, v) or "*" in res or "/" in res:
                            continue
                        kind = by_plural.get((g, v, res))
                        if kind is None and not refreshed:
                            refreshed = True
                            await self.client.discover()
                            by_plural = self._kinds_by_resource()
                            kind = by_plural.get((g, v, res))
                        if kind is None or (g, v, kind) in seen:
                            continue
                        seen.add((g, v, kind))
                        t = await self._kind_type(g, v, kind)
                        if t is not None:
                            out.append(((g, v, kind), t))
        return out

    async def _kind_type(self, group: str, version: str, kind: str) -> Type | None:
        s = schemas.kind_schema(group, version, kind)
        if s is not None:
            return schema_type(s)
        s = await self._crd_schema(group, version, kind)
        return schema_type(s, root=True) if s is not None else None

    async def _crd_schema(self, group: str, version: str, kind: str) -> dict | None:
        try:
            crds = self.client.resource(CRD_GROUP, "v1", "customresourcedefinitions")
        except LookupError:
            return None
        items, _ = await crds.list()
        for crd in items:
            spec = crd.get("spec") or {}
            if spec.get("group") != group or (spec.get("names") or {}).get("kind") != kind:
                continue
            for v in spec.get("versions") or []:
                if v.get("name") == version:
                    return (v.get("schema") or {}).get("openAPIV3Schema")
        return None
