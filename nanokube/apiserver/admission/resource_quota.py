"""ResourceQuota admission, last in the chain: a create (or an update that
changes what an object charges) is refused when it would take any covering
quota of the namespace past `status.hard`, with upstream's `exceeded quota`
message; otherwise the new usage is written to each quota's `status.used` in
the same request, so the next request sees it before the resource-quota
controller recounts. Quotas without a status yet constrain nothing (upstream
reads `status.hard`), so the controller fills it as soon as a quota appears.
--admission-control-config-file's ResourceQuotaConfiguration may limit resources
by default (`limitedResources`): what it names is refused unless a quota covers it,
in any namespace, quotas or none (the docs' "Limit Priority Class consumption by
default": critical pods only where a quota of their class is)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

from ...machinery import configfile, errors
from ...machinery.configfile import Kind, Struct
from ...machinery.quantity import Quantity, add, parse_list
from ...quota.evaluators import (
    ClaimLookup,
    Usage,
    charged_on_update,
    extended_names,
    matching_scopes,
    missing_container_resources,
    quota_covers,
    scope_selectors,
    usage,
)
from ..auth.authentication_config import SCHEME
from .pod_security import PLUGIN_INIT
from ..rest import SYSTEM, WriteOptions
from .lookup import Listing, get, list_objects, object_name

#: how often the status write is retried after losing a race with another writer
ATTEMPTS = 8


def _config_schema(kind: str) -> Callable[[str], Struct]:
    """The ResourceQuota plugin's configuration (`kind` in a Go package of its version's name): the
    resources quota limits."""
    return lambda v: Struct(f"{v}.{kind}", {"apiVersion": str, "kind": str, "limitedResources": [Struct(
        f"{v}.LimitedResource", {"apiGroup": str, "resource": str, "matchContains": [str],
                                 "matchScopes": [Struct("v1.ScopedResourceSelectorRequirement", {
                                     "scopeName": "v1.ResourceQuotaScope", "operator": "v1.ScopeSelectorOperator",
                                     "values": [str]})]})]})


#: the configuration's kinds as the plugin's (lenient) codec decodes them, by apiVersion prefix:
#: resourcequota.admission.k8s.io's Configuration, apiserver.config.k8s.io/v1's ResourceQuotaConfiguration
CONFIG_FILES = {"resourcequota.admission.k8s.io/": Kind(
                    tuple(f"resourcequota.admission.k8s.io/{v}" for v in ("v1beta1", "v1alpha1")), "Configuration",
                    SCHEME, _config_schema("Configuration")),
                "": Kind("apiserver.config.k8s.io/v1", "ResourceQuotaConfiguration", SCHEME,
                         _config_schema("ResourceQuotaConfiguration"))}


def pretty(bag: dict[str, Quantity]) -> str:
    return ",".join(f"{k}={bag[k]}" for k in sorted(bag))


@dataclass(frozen=True)
class LimitedResource:
    """One of the configuration's limitedResources: the resources named in a usage of this
    group/resource containing any of `contains` (matchContains), and any object matching one of
    `scopes` (matchScopes), must be covered by a quota."""
    group: str
    resource: str
    contains: tuple[str, ...] = ()
    scopes: tuple[dict, ...] = field(default=())


def parse_configuration(doc: dict, text: str = "") -> list[LimitedResource]:
    """A ResourceQuota configuration's limitedResources (`text`: what its file held); ValueError says
    what is wrong with it, as the API server does."""
    version = doc.get("apiVersion") if isinstance(doc, dict) else None
    kind = next(k for prefix, k in CONFIG_FILES.items() if str(version or "").startswith(prefix))
    try:
        doc, _ = configfile.decode_object(doc, [], text, kind, lenient=True)
    except configfile.DecodeError as e:
        raise ValueError(PLUGIN_INIT.format("ResourceQuota") + str(e)) from None
    out = []
    for i, item in enumerate(doc.get("limitedResources") or ()):
        if not item.get("resource"):
            raise ValueError(f"{PLUGIN_INIT.format('ResourceQuota')}limitedResources[{i}].resource: Required value")
        out.append(LimitedResource(item.get("apiGroup") or "", item["resource"], tuple(item.get("matchContains") or ()),
                                   tuple(item.get("matchScopes") or ())))
    return out


def _go_scopes(scopes: list[dict]) -> str:
    """%v of []ScopedResourceSelectorRequirement, as upstream's refusal prints them."""
    return "[" + " ".join(f"{{{s.get('scopeName', '')} {s.get('operator', '')} [{' '.join(s.get('values') or [])}]}}"
                          for s in scopes) + "]"


class ResourceQuota:
    def __init__(self, rest) -> None:
        self.rest = rest
        self._quotas = Listing(rest, "", "resourcequotas")
        self._extended_names = Listing(rest, "resource.k8s.io", "deviceclasses", extended_names)
        #: the configuration's limitedResources (none unless --admission-control-config-file says)
        self.limited: list[LimitedResource] = []

    def configure(self, limited: list[LimitedResource]) -> None:
        self.limited = limited

    def _claims(self) -> ClaimLookup:
        return ClaimLookup(self._extended_names(), lambda ns, name: get(self.rest, "", "pods", ns, name),
                           lambda ns: list_objects(self.rest, "resource.k8s.io", "resourceclaims", ns))

    def _requested(self, a) -> Usage:
        g, p = a.res.group, a.res.plural
        now = self.rest.clock.now()
        claims = self._claims() if (g, p) == ("resource.k8s.io", "resourceclaims") else None
        new = usage(g, p, a.obj, now, claims)
        if a.operation == "CREATE":
            return new
        if not charged_on_update(g, p, a.subresource):
            return {}
        old = usage(g, p, a.old, now, claims)
        return {k: Quantity(v.value - old[k].value, v.format) if k in old else v for k, v in new.items()
                if k not in old or v.value > old[k].value}

    def may_charge(self, a) -> bool:
        """Whether `validate` has anything to check: a namespaced create or update (one through a
        subresource only where it changes what is charged) in a namespace that has quotas, or
        anywhere resources are limited by default. Most writes have none, and are not awaited for it."""
        if a.obj is None or a.operation not in ("CREATE", "UPDATE") or not a.res.namespaced:
            return False
        if a.subresource and (a.operation != "UPDATE" or not charged_on_update(a.res.group, a.res.plural, a.subresource)):
            return False
        return bool(self.limited) or bool(self._quotas(a.namespace or a.obj["metadata"].get("namespace", "")))

    async def validate(self, a) -> None:
        if not self.may_charge(a):
            return
        ns = a.namespace or a.obj["metadata"].get("namespace", "")
        requested = self._requested(a)
        if not requested:
            return
        for attempt in range(ATTEMPTS):
            quotas = self._quotas(ns)
            updates = self._check(a, quotas, requested)
            if a.dry_run or not updates:
                return
            try:
                for q in updates:
                    await self.rest.update(self.rest.index.get("", "v1", "resourcequotas"), "v1", ns,
                                           q["metadata"]["name"], q, WriteOptions(user=SYSTEM), subresource="status")
                return
            except errors.APIError as e:
                if e.code != 409 or attempt == ATTEMPTS - 1:
                    raise
                # another writer got there first: read the quota again once the watch cache has
                # caught up with the store (upstream's evaluator refetches it), not the same stale copy
                await self.rest.cache.sync()

    def _check(self, a, quotas: list[dict], requested: Usage) -> list[dict]:
        """Raise if the object breaks a covering quota's constraints, uses a resource or scope
        limited by default that no quota covers, or would exceed a covering quota (upstream's
        CheckRequest, in its order); else the quotas with their new status.used."""
        g, p = a.res.group, a.res.plural
        covering, covered, scopes = [], set(), set()
        for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            if self.limited:
                scopes |= {sel.get("scopeName") for sel in matching_scopes(g, p, a.obj, scope_selectors(q))}
            if not quota_covers(q, g, p, a.obj):
                continue
            status = q.get("status") or {}
            hard = parse_list(status.get("hard"))
            name = q["metadata"]["name"]
            if g == "" and p == "pods":
                missing = missing_container_resources(a.obj, hard)
                if missing:
                    raise errors.forbidden(g, p, object_name(a), f"failed quota: {name}: {missing}")
            relevant = {k: v for k, v in requested.items() if k in hard}
            used = parse_list(status.get("used"))
            if any(k not in used for k in relevant):
                raise errors.forbidden(g, p, object_name(a), f"status unknown for quota: {name}, resources: "
                                       + ",".join(sorted(relevant)))
            covered |= set(hard)
            covering.append((q, hard, used, relevant))
        if self.limited:
            self._limited(a, covered, scopes)
        updates = []
        for q, hard, used, relevant in covering:
            if not relevant:
                continue
            name = q["metadata"]["name"]
            new_used = {k: add(used.get(k), v) for k, v in relevant.items()}
            exceeded = sorted(k for k, v in new_used.items() if v.value > hard[k].value)
            if exceeded:
                raise errors.forbidden(
                    g, p, object_name(a),
                    f"exceeded quota: {name}, requested: {pretty({k: relevant[k] for k in exceeded})}, "
                    f"used: {pretty({k: used[k] for k in exceeded})}, limited: {pretty({k: hard[k] for k in exceeded})}")
            q = copy.deepcopy(q)
            q["status"]["used"] = {**q["status"].get("used", {}), **{k: str(v) for k, v in new_used.items()}}
            updates.append(q)
        return updates

    def _limited(self, a, covered: set[str], scopes: set[str]) -> None:
        """limitedResources: each resource the object uses that is limited by default must be in a
        covering quota's hard (`covered`), each limited scope it matches among the scopes of the
        namespace's quotas' selectors it matches (`scopes`, by name as upstream compares them)."""
        g, p = a.res.group, a.res.plural
        mine = [lr for lr in self.limited if (lr.group, lr.resource) == (g, p)]
        if mine:
            now = self.rest.clock.now()
            claims = self._claims() if (g, p) == ("resource.k8s.io", "resourceclaims") else None
            used = [k for k, v in usage(g, p, a.obj, now, claims).items() if v.value > 0]
            limited = {k for lr in mine for k in used if any(c in k for c in lr.contains)}
            if uncovered := sorted(limited - covered):
                raise errors.forbidden(g, p, object_name(a), "insufficient quota to consume: " + ",".join(uncovered))
        matched = [sel for lr in self.limited for sel in matching_scopes(g, p, a.obj, lr.scopes)]
        if uncovered_scopes := [sel for sel in matched if sel.get("scopeName") not in scopes]:
            # a plain error upstream, so a 500 without a reason
            raise errors.APIError(500, "", f"insufficient quota to match these scopes: {_go_scopes(uncovered_scopes)}")
