"""The ClusterIP allocator's objects (MultiCIDRServiceAllocator, GA in 1.33).

kube-apiserver records every ClusterIP it hands out as an `IPAddress` named by
the address, whose `parentRef` is the Service, and serves the range it
allocates from as the ServiceCIDR `kubernetes`. Here the allocator itself is
the in-memory one in registry/core_services.py; the IPAddress repair loop
(like upstream's repair-ip loop in the API server) keeps the IPAddress objects
equal to what the Services hold, through the loopback client: one per
allocated IP, none for an IP no Service holds any more, while an IPAddress
someone else made holds its address in the allocator. With several API server
workers the allocators record each address as its IPAddress before the Service
is written (reservations.py), and the loop gives such a record a grace period. The ranges loop hands
the allocator every further Ready ServiceCIDR.
"""

from __future__ import annotations

import ipaddress

from ..client.informer import Informer
from ..clock import parse_time
from ..controllers.base import Controller
from ..machinery.errors import APIError
from ..registry.core_services import AllocationError
from .rest import SYSTEM, WriteOptions

GROUP = "networking.k8s.io"
MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
ALLOCATOR = "ipallocator.k8s.io"
FAMILY = "ipaddress.kubernetes.io/ip-family"
DEFAULT_SERVICE_CIDR = "kubernetes"
#: seconds an allocator's IPAddress without its Service is kept with several API server workers
ORPHAN_GRACE = 10.0


def default_service_cidr(cidr: str) -> dict:
    """The ServiceCIDR kube-apiserver creates from --service-cluster-ip-range."""
    return {"metadata": {"name": DEFAULT_SERVICE_CIDR}, "spec": {"cidrs": [cidr]}}


def ready_condition(now: str) -> dict:
    return {"type": "Ready", "status": "True", "reason": "", "message": "Kubernetes default Service CIDR is ready",
            "lastTransitionTime": now}


def _service_ips(svc: dict) -> list[str]:
    spec = svc.get("spec") or {}
    return [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None"]


def ip_address_for(ip: str, svc: dict) -> dict:
    md = svc["metadata"]
    family = "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"
    return {"metadata": {"name": ip, "labels": {FAMILY: family, MANAGED_BY: ALLOCATOR}},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": md["namespace"], "name": md["name"]}}}


class IPAddressRepair(Controller):
    name = "ipaddress-repair"

    def __init__(self, client, services_strategy=None, orphan_grace: float = 0.0, **kw):
        """`orphan_grace`: how long an IPAddress of the allocator's that no Service holds is kept,
        as the Service it was recorded for may be on its way (several API server workers record an
        address before they write its Service: reservations.py)."""
        super().__init__(client, **kw)
        self.orphan_grace = orphan_grace
        #: IPAddresses made by others than the allocator reserve their address in it
        self.strategy = services_strategy
        self.ipaddresses = client.resource(GROUP, "v1", "ipaddresses")
        self.svc_inf = Informer(client.resource("", "v1", "services"), clock=self.clock)
        self.ip_inf = Informer(self.ipaddresses, clock=self.clock)
        #: IP -> "namespace/name" of the Service holding it
        self.holders: dict[str, str] = {}
        self.svc_inf.add_handlers(on_add=self._observe, on_update=self._changed, on_delete=self._gone)
        self.ip_inf.add_handlers(on_add=self._enqueue_ip, on_update=lambda o, n: self._enqueue_ip(n),
                                 on_delete=self._enqueue_ip)

    def informers(self):
        return [self.svc_inf, self.ip_inf]

    def _key(self, svc: dict) -> str:
        return f"{svc['metadata']['namespace']}/{svc['metadata']['name']}"

    def _observe(self, svc: dict) -> None:
        for ip in _service_ips(svc):
            self.holders[ip] = self._key(svc)
            self.queue.add(ip)

    def _gone(self, svc: dict) -> None:
        for ip in _service_ips(svc):
            if self.holders.get(ip) == self._key(svc):
                del self.holders[ip]
            self.queue.add(ip)

    def _changed(self, old: dict, new: dict) -> None:
        self._gone(old)
        self._observe(new)

    def _enqueue_ip(self, obj: dict) -> None:
        self.queue.add(obj["metadata"]["name"])

    def _reserve(self, ip: str, current: dict | None) -> None:
        """An IPAddress the allocator did not make holds its address, as upstream's
        allocator (whose only record is the IPAddress objects) treats it."""
        if self.strategy is None:
            return
        owner = f"ipaddress/{ip}"
        foreign = current is not None and (current["metadata"].get("labels") or {}).get(MANAGED_BY) != ALLOCATOR
        if foreign and self.strategy.ips.owner(ip) is None:
            try:
                self.strategy.ips.allocate(owner, ip)
            except AllocationError:
                pass  # outside every range: nothing to hold
        elif not foreign:
            self.strategy.ips.release(ip, owner)

    async def sync(self, ip: str) -> None:
        holder = self.holders.get(ip)
        svc = self.svc_inf.get(holder) if holder else None
        current = self.ip_inf.get(ip)
        self._reserve(ip, current)
        if svc is not None and ip in _service_ips(svc):
            want = ip_address_for(ip, svc)
            if current is None:
                try:
                    await self.ipaddresses.create(want)
                except APIError as e:
                    if e.code != 409:
                        raise
            return
        if current is not None and (current["metadata"].get("labels") or {}).get(MANAGED_BY) == ALLOCATOR:
            if self.orphan_grace:
                wait = parse_time(current["metadata"]["creationTimestamp"]) + self.orphan_grace - self.clock.now()
                if wait > 0:
                    self.queue.add_after(ip, wait)
                    return
            try:  # this very object: not one made again for another Service since the informer saw it
                await self.ipaddresses.delete(ip, preconditions={"uid": current["metadata"]["uid"]})
            except APIError as e:
                if e.code not in (404, 409):
                    raise


async def ensure_default_service_cidr(rest, index, clock, cidr: str) -> None:
    """Create the ServiceCIDR `kubernetes` for the allocator's range and mark it Ready."""
    res = index.get(GROUP, "v1", "servicecidrs")
    opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)
    try:
        obj = await rest.get(res, "v1", None, DEFAULT_SERVICE_CIDR)
    except APIError as e:
        if e.code != 404:
            raise
        obj = (await rest.create(res, "v1", None, default_service_cidr(cidr), opts)).obj
    conditions = (obj.get("status") or {}).get("conditions") or []
    if (obj["spec"].get("cidrs") == [cidr]
            and not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)):
        body = {**obj, "status": {"conditions": [ready_condition(clock.rfc3339())]}}
        await rest.update(res, "v1", None, DEFAULT_SERVICE_CIDR, body, opts, subresource="status")


def _ready(cidr: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (cidr.get("status") or {}).get("conditions") or [])


class ServiceCIDRRanges(Controller):
    """Feeds the ClusterIP allocator the ranges of every Ready ServiceCIDR that
    is not being deleted (besides the default one from the server's flags);
    stored Services' addresses in a range that comes back are marked again."""

    name = "servicecidr-ranges"

    def __init__(self, client, services_strategy, **kw):
        super().__init__(client, **kw)
        self.strategy = services_strategy
        self.services = client.resource("", "v1", "services")
        self.inf = Informer(client.resource(GROUP, "v1", "servicecidrs"), clock=self.clock)
        self.inf.add_handlers(lambda o: self.queue.add("ranges"), lambda o, n: self.queue.add("ranges"),
                              lambda o: self.queue.add("ranges"))

    def informers(self):
        return [self.inf]

    async def sync(self, key: str) -> None:
        extra = {c["metadata"]["name"]: (c.get("spec") or {}).get("cidrs") or [] for c in self.inf.list()
                 if c["metadata"]["name"] != DEFAULT_SERVICE_CIDR and _ready(c)
                 and not c["metadata"].get("deletionTimestamp")}
        if self.strategy.ips.set_extra_ranges(extra):
            items, _ = await self.services.list()
            self.strategy.restore(items)
