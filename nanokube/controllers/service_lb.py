"""Service load-balancer controller: what a cloud's service controller does
for `type: LoadBalancer` Services, with the "cloud" being a pool of IPv4
addresses that kube-proxy captures on every node (as MetalLB's L2 mode
without the announcement: the process runtime's nodes DNAT the address
themselves).

Each LoadBalancer Service without `spec.loadBalancerClass` (a classed one
belongs to another implementation, as upstream's controller skips it) gets
one address, written as `status.loadBalancer.ingress: [{ip, ipMode: VIP}]`
through the status subresource. The addresses in use are read back from the
Services' status, so a restarted controller hands out none twice; a
`spec.loadBalancerIP` inside the pool is honoured when free. An address is
released when its Service is deleted or stops being a LoadBalancer (its
status is then cleared); Services still waiting for one are retried then.
Events are upstream's: EnsuringLoadBalancer / EnsuredLoadBalancer,
DeletingLoadBalancer / DeletedLoadBalancer, and a Warning
SyncLoadBalancerFailed when no address can be given (pool exhausted, a
requested address taken or outside the pool), once per distinct failure.
Upstream's `service.kubernetes.io/load-balancer-cleanup` finalizer is not
added: nothing outside the API holds the address, so a deleted Service frees
it at once.
"""

from __future__ import annotations

import ipaddress
import logging

from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock
from .base import Controller
from .lb_pool import DEFAULT_POOL, parse_pool
from ..client.record import CoreEventRecorder

log = logging.getLogger(__name__)


def wants_load_balancer(svc: dict) -> bool:
    """Upstream's wantsLoadBalancer: type LoadBalancer and no loadBalancerClass."""
    spec = svc.get("spec") or {}
    return spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")


def ingress_ips(svc: dict) -> list[str]:
    return [i["ip"] for i in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [] if i.get("ip")]


class ServiceLBController(Controller):
    name = "service-lb-controller"
    aliases = ("service",)
    queue_name = "service"

    def __init__(self, client, clock: Clock = REAL, pool: str = DEFAULT_POOL,
                 informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.pool = parse_pool(pool)
        self.api = client.resource("", "v1", "services")
        self.services = self.informer_factory.informer(self.api)
        self.recorder = CoreEventRecorder(client, "service-controller", clock)
        #: service key -> its pool addresses, as its status shows them or as this controller just wrote them
        self.held: dict[str, set[str]] = {}
        self._failed: dict[str, str] = {}  # service key -> the last failure reported as an event
        self.services.add_handlers(self._observe, lambda _o, n: self._observe(n), self._deleted)

    def informers(self):
        return [self.services]

    def _in_pool(self, svc: dict) -> set[str]:
        out = set()
        for a in ingress_ips(svc):
            try:
                if ipaddress.ip_address(a) in self.pool:
                    out.add(a)
            except ValueError:
                continue
        return out

    def _observe(self, svc: dict) -> None:
        """Every Service's pool addresses are held from the moment the informer
        sees them (the initial list included, so a restart reuses none)."""
        key = key_of(svc)
        ips = self._in_pool(svc)
        if ips:
            self.held[key] = ips
        if ips or wants_load_balancer(svc) or key in self.held:
            self.queue.add(key)

    def _deleted(self, svc: dict) -> None:
        key = key_of(svc)
        self._failed.pop(key, None)
        if self.held.pop(key, None):
            self._retry_waiting()

    def _retry_waiting(self) -> None:
        """An address came free: Services still waiting for one try again."""
        for svc in self.services.list():
            if wants_load_balancer(svc) and not self._in_pool(svc):
                self.queue.add(key_of(svc))

    def _taken(self, key: str) -> set[str]:
        return {a for k, ips in self.held.items() if k != key for a in ips}

    async def sync(self, key: str) -> None:
        svc = self.services.get(key)
        if svc is None:
            return
        current = self._in_pool(svc)
        if not wants_load_balancer(svc):
            if (svc.get("spec") or {}).get("type") == "LoadBalancer":
                return  # another implementation's (loadBalancerClass): its addresses stay held, untouched
            if current:
                await self._release(svc, key)
            self.held.pop(key, None)
            self._failed.pop(key, None)
            return
        requested = (svc.get("spec") or {}).get("loadBalancerIP") or ""
        taken = self._taken(key)
        if current and not current & taken and (not requested or current == {requested}):
            self.held[key] = current
            return
        await self.recorder.emit(svc, "Normal", "EnsuringLoadBalancer", "Ensuring load balancer")
        ip, problem = self._choose(svc, requested, taken)
        if problem:
            if self._failed.get(key) != problem:
                self._failed[key] = problem
                await self.recorder.emit(svc, "Warning", "SyncLoadBalancerFailed",
                                         f"Error syncing load balancer: failed to ensure load balancer: {problem}")
            log.info("%s: service %s: %s", self.name, key, problem)
            return
        self.held[key] = {ip}
        try:
            await self._write_ingress(svc, [{"ip": ip, "ipMode": "VIP"}])
        except Exception:
            self.held[key] = current
            raise
        self._failed.pop(key, None)
        if current - {ip}:
            self._retry_waiting()
        await self.recorder.emit(svc, "Normal", "EnsuredLoadBalancer", "Ensured load balancer")
        log.info("%s: service %s: load balancer IP %s", self.name, key, ip)

    def _choose(self, svc: dict, requested: str, taken: set[str]) -> tuple[str, str]:
        """(address, "") or ("", why none can be given)."""
        families = (svc.get("spec") or {}).get("ipFamilies") or ["IPv4"]
        if "IPv4" not in families:
            return "", (f"the load balancer pool {self.pool} has IPv4 addresses only, the Service's ipFamilies "
                        f"are {', '.join(families)}")
        if requested:
            try:
                inside = ipaddress.ip_address(requested) in self.pool
            except ValueError:
                inside = False
            if not inside:
                return "", f"requested loadBalancerIP {requested} is not in the load balancer pool {self.pool}"
            if requested in taken:
                return "", f"requested loadBalancerIP {requested} is already allocated"
            return requested, ""
        for a in self.pool.hosts():
            if str(a) not in taken:
                return str(a), ""
        return "", f"no IPv4 address left in the load balancer pool {self.pool}"

    async def _release(self, svc: dict, key: str) -> None:
        """A Service that stopped being a LoadBalancer: upstream's cleanup
        deletes the load balancer and empties status.loadBalancer."""
        await self.recorder.emit(svc, "Normal", "DeletingLoadBalancer", "Deleting load balancer")
        await self._write_ingress(svc, [])
        self.held.pop(key, None)
        self._retry_waiting()
        await self.recorder.emit(svc, "Normal", "DeletedLoadBalancer", "Deleted load balancer")

    async def _write_ingress(self, svc: dict, ingress: list[dict]) -> None:
        """Through the status subresource, preconditioned on the informer's
        resourceVersion: a conflict retries the sync on fresher state."""
        status = dict(svc.get("status") or {})
        status["loadBalancer"] = {"ingress": ingress} if ingress else {}
        await self.api.update({**svc, "status": status}, subresource="status")
