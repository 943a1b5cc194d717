"""ResourcePoolStatusRequests answered (kube-controller-manager's
resourcepoolstatusrequest-controller).

For a request without status: the driver's pools (optionally one pool) from
the ResourceSlices of each pool's newest generation, each with its slice
count, node (when all its slices name the same one), devices in total,
allocated to claims (admin-access results do not count; a device shared by
several claims counts once), unavailable (a NoSchedule/NoExecute taint of its
own or from a DeviceTaintRule) and available. A pool whose slices at its
generation are not all published yet is retried; pools are sorted by driver
then name and cut at `spec.limit`, and a `Complete` condition ends it.
Answered requests are deleted an hour after, unanswered ones after a day.
The partition, counter-set and shareable-capacity summaries are not computed.
"""

from __future__ import annotations

from ..clock import parse_time
from ..machinery.errors import APIError
from .base import Controller

GROUP = "resource.k8s.io"
INCOMPLETE = "PoolIncomplete:"
COMPLETED_TTL, PENDING_TTL = 3600.0, 86400.0
_UNAVAILABLE_EFFECTS = ("NoSchedule", "NoExecute")


class IncompletePools(Exception):
    """A pool's driver is still publishing slices: answer later."""


def _unavailable(driver: str, pool: str, device: dict, rules: list[dict]) -> bool:
    if any(t.get("effect") in _UNAVAILABLE_EFFECTS for t in device.get("taints") or []):
        return True
    for rule in rules:
        spec = rule.get("spec") or {}
        sel = spec.get("deviceSelector")
        if (spec.get("taint") or {}).get("effect") not in _UNAVAILABLE_EFFECTS or sel is None:
            continue
        if all(sel.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool), ("device", device.get("name")))):
            return True
    return False


def pool_status(spec: dict, slices: list[dict], claims: list[dict], rules: list[dict], now: str) -> dict:
    """calculatePoolStatus over the listed objects."""
    driver, only = spec.get("driver", ""), spec.get("poolName")
    mine = [s for s in slices if (s.get("spec") or {}).get("driver") == driver
            and (only is None or ((s["spec"].get("pool") or {}).get("name")) == only)]
    newest: dict[str, int] = {}
    for s in mine:
        p = s["spec"].get("pool") or {}
        newest[p.get("name", "")] = max(newest.get(p.get("name", ""), p.get("generation", 0)), p.get("generation", 0))
    pools: dict[str, dict] = {}
    for s in mine:
        sp = s["spec"]
        p = sp.get("pool") or {}
        name = p.get("name", "")
        if p.get("generation", 0) < newest[name]:
            continue
        devices = sp.get("devices") or []
        info = pools.setdefault(name, {"node": sp.get("nodeName") or "", "mixed": False, "total": 0, "unavailable": 0,
                                       "slices": 0, "expected": p.get("resourceSliceCount", 0), "generation": newest[name]})
        if info["slices"] and (sp.get("nodeName") or "") != info["node"]:
            info["mixed"] = True
        info["slices"] += 1
        info["total"] += len(devices)
        info["unavailable"] += sum(_unavailable(driver, name, d, rules) for d in devices)
    allocated: dict[str, set[str]] = {}
    for claim in claims:
        for r in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            if not r.get("adminAccess") and r.get("driver") == driver:
                allocated.setdefault(r.get("pool", ""), set()).add(r.get("device", ""))
    out = []
    for name, info in pools.items():
        pool: dict = {"driver": driver, "poolName": name, "generation": info["generation"]}
        if info["node"] and not info["mixed"]:
            pool["nodeName"] = info["node"]
        if info["slices"] < info["expected"]:
            raise IncompletePools(f"{INCOMPLETE} pool {driver}/{name} is incomplete: observed "
                                  f"{info['slices']}/{info['expected']} slices at generation {info['generation']}")
        used = len(allocated.get(name, ()))
        pool.update(resourceSliceCount=info["slices"], totalDevices=info["total"], allocatedDevices=used,
                    availableDevices=max(0, info["total"] - used - info["unavailable"]),
                    unavailableDevices=info["unavailable"])
        out.append(pool)
    out.sort(key=lambda p: (p["driver"], p["poolName"]))
    count = len(out)
    out = out[:spec.get("limit") or 100]
    status: dict = {"poolCount": count, "conditions": [{
        "type": "Complete", "status": "True", "lastTransitionTime": now, "reason": "CalculationComplete",
        "message": f"Calculated status for {len(out)} pools"}]}
    if out:
        status["pools"] = out
    return status


class ResourcePoolStatusRequestController(Controller):
    name = "resourcepoolstatusrequest-controller"
    queue_name = "resourcepoolstatusrequest"
    retriable = (IncompletePools,)
    feature_gates = ("DRAResourcePoolStatus",)

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.requests = client.resource(GROUP, "v1alpha3", "resourcepoolstatusrequests")
        self.req_inf = self.informer_factory.informer(self.requests)
        self.slice_inf = self.informer_factory.informer(client.resource(GROUP, "v1", "resourceslices"))
        self.claim_inf = self.informer_factory.informer(client.resource(GROUP, "v1", "resourceclaims"))
        self.rule_inf = self.informer_factory.informer(client.resource(GROUP, "v1", "devicetaintrules"))
        self.req_inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.req_inf, self.slice_inf, self.claim_inf, self.rule_inf]

    def _enqueue(self, req: dict) -> None:
        self.queue.add(req["metadata"]["name"])

    def _expires(self, req: dict) -> float:
        """When the request is cleaned up: an hour after its answer, a day after creation if unanswered."""
        for c in (req.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Complete", "Failed"):
                return parse_time(c["lastTransitionTime"]) + COMPLETED_TTL
        return parse_time(req["metadata"]["creationTimestamp"]) + (
            COMPLETED_TTL if req.get("status") is not None else PENDING_TTL)

    async def sync(self, name: str) -> None:
        req = self.req_inf.get(name)
        if req is None:
            return
        left = self._expires(req) - self.clock.now()
        if left <= 0:
            try:
                await self.requests.delete(name, preconditions={"uid": req["metadata"]["uid"]})
            except APIError as e:
                if e.code not in (404, 409):
                    raise
            return
        self.queue.add_after(name, left)
        if req.get("status") is not None:
            return
        # IncompletePools propagates: the driver is still publishing, the work queue retries with backoff
        status = pool_status(req.get("spec") or {}, self.slice_inf.list(), self.claim_inf.list(),
                             self.rule_inf.list(), self.clock.rfc3339())
        await self.requests.update({**req, "status": status}, subresource="status")
