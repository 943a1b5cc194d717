"""ResourceQuota admission, last in the chain: a create (or an update that
changes what an object charges) is refused when it would take any covering
quota of the namespace past `status.hard`, with upstream's `exceeded quota`
message; otherwise the new usage is written to each quota's `status.used` in
the same request, so the next request sees it before the resource-quota
controller recounts. Quotas without a status yet constrain nothing (upstream
reads `status.hard`), so the controller fills it as soon as a quota appears."""

from __future__ import annotations

import copy

from ...machinery import errors
from ...machinery.quantity import Quantity, add, parse_list
from ...quota.evaluators import (
    ClaimLookup,
    Usage,
    charged_on_update,
    extended_names,
    missing_container_resources,
    quota_covers,
    usage,
)
from ..rest import SYSTEM, WriteOptions
from .lookup import Listing, get, list_objects, object_name

#: how often the status write is retried after losing a race with another writer
ATTEMPTS = 8


def pretty(bag: dict[str, Quantity]) -> str:
    return ",".join(f"{k}={bag[k]}" for k in sorted(bag))


class ResourceQuota:
    def __init__(self, rest) -> None:
        self.rest = rest
        self._quotas = Listing(rest, "", "resourcequotas")
        self._extended_names = Listing(rest, "resource.k8s.io", "deviceclasses", extended_names)

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
        subresource only where it changes what is charged) in a namespace that has quotas. Most
        writes have none, and are not awaited for it."""
        if a.obj is None or a.operation not in ("CREATE", "UPDATE") or not a.res.namespaced:
            return False
        if a.subresource and (a.operation != "UPDATE" or not charged_on_update(a.res.group, a.res.plural, a.subresource)):
            return False
        return bool(self._quotas(a.namespace or a.obj["metadata"].get("namespace", "")))

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
        """Raise if any covering quota is exceeded; else the quotas with their new status.used."""
        updates = []
        g, p = a.res.group, a.res.plural
        for q in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            status = q.get("status") or {}
            hard = parse_list(status.get("hard"))
            if not quota_covers(q, g, p, a.obj):
                continue
            name = q["metadata"]["name"]
            if g == "" and p == "pods":
                missing = missing_container_resources(a.obj, hard)
                if missing:
                    raise errors.forbidden(g, p, object_name(a), f"failed quota: {name}: {missing}")
            relevant = {k: v for k, v in requested.items() if k in hard}
            if not relevant:
                continue
            used = parse_list(status.get("used"))
            if any(k not in used for k in hard if k in relevant):
                raise errors.forbidden(g, p, object_name(a), f"status unknown for quota: {name}, resources: "
                                       + ",".join(sorted(relevant)))
            new_used = {k: add(used.get(k), v) for k, v in relevant.items()}
            exceeded = sorted(k for k, v in new_used.items() if v.value > hard[k].value)
            if exceeded:
                raise errors.forbidden(
                    g, p, object_name(a),
                    f"exceeded quota: {name}, requested: {pretty({k: relevant[k] for k in exceeded})}, "
                    f"used: {pretty({k: used[k] for k in exceeded})}, limited: {pretty({k: hard[k] for k in exceeded})}")
            q = copy.deepcopy(q)
            q["status"]["used"] = {**status.get("used", {}), **{k: str(v) for k, v in new_used.items()}}
            updates.append(q)
        return updates
