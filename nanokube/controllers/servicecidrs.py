"""ServiceCIDR protection and readiness (kube-controller-manager's
service-cidr-controller).

Every ServiceCIDR gets the `networking.k8s.io/service-cidr-finalizer` and a
Ready condition, after which the API server allocates ClusterIPs from it. A
deleting ServiceCIDR keeps its finalizer while an IPAddress the allocator
made lies only in it (Ready=False, reason Terminating); once none does, or
another ServiceCIDR contains all of its ranges, the finalizer goes after a
grace period in which allocators stop using the range.
"""

from __future__ import annotations

import ipaddress
import os

from ..clock import parse_time
from ..machinery.conditions import find_condition, remove_condition, transition_time
from ..machinery.errors import APIError
from .base import Controller

GROUP = "networking.k8s.io"
FINALIZER = "networking.k8s.io/service-cidr-finalizer"
MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
ALLOCATOR = "ipallocator.k8s.io"
#: how long a deleting ServiceCIDR waits for the allocators to stop using it
DELETION_GRACE = 10.0
#: a shorter grace for tests (seconds)
GRACE_ENV = "NANOKUBE_SERVICECIDR_DELETION_GRACE"
READY_MESSAGE = "Kubernetes Service CIDR is ready"
TERMINATING_MESSAGE = ("There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new "
                       "ServiceCIDR")


def _networks(cidr: dict) -> list:
    return [ipaddress.ip_network(c) for c in (cidr.get("spec") or {}).get("cidrs") or []]


def _containing(cidrs: list[dict], test) -> list[dict]:
    return [c for c in cidrs if any(test(n) for n in _networks(c))]


def can_delete(cidr: dict, cidrs: list[dict], ipaddresses: list[dict]) -> bool:
    """canDeleteCIDR: another ServiceCIDR covers every range, or no allocated
    IPAddress lies in this ServiceCIDR alone."""
    name = cidr["metadata"]["name"]
    covered = True
    for net in _networks(cidr):
        holders = _containing(cidrs, lambda n: n.version == net.version and net.subnet_of(n))
        if not holders or [c["metadata"]["name"] for c in holders] == [name]:
            covered = False
    if covered:
        return True
    for ip in ipaddresses:
        if (ip["metadata"].get("labels") or {}).get(MANAGED_BY) != ALLOCATOR:
            continue
        addr = ipaddress.ip_address(ip["metadata"]["name"])
        holders = _containing(cidrs, lambda n: n.version == addr.version and addr in n)
        if [c["metadata"]["name"] for c in holders] == [name]:
            return False
    return True


class ServiceCIDRController(Controller):
    name = "service-cidr-controller"
    queue_name = "ipaddresses"

    def __init__(self, client, deletion_grace: float | None = None, **kw):
        super().__init__(client, **kw)
        self.deletion_grace = deletion_grace if deletion_grace is not None else float(
            os.environ.get(GRACE_ENV) or DELETION_GRACE)
        self.cidrs = client.resource(GROUP, "v1", "servicecidrs")
        self.cidr_inf = self.informer_factory.informer(self.cidrs)
        self.ip_inf = self.informer_factory.informer(client.resource(GROUP, "v1", "ipaddresses"))
        self.cidr_inf.add_handlers(self._enqueue, lambda o, n: self._enqueue_all(), lambda o: self._enqueue_all())
        self.ip_inf.add_handlers(on_delete=lambda o: self._enqueue_all())

    def informers(self):
        return [self.cidr_inf, self.ip_inf]

    def _enqueue(self, cidr: dict) -> None:
        self.queue.add(cidr["metadata"]["name"])

    def _enqueue_all(self) -> None:
        for c in self.cidr_inf.list():
            self._enqueue(c)

    async def _status(self, cidr: dict, status: str, reason: str, message: str) -> None:
        conditions = (cidr.get("status") or {}).get("conditions")
        old = find_condition(conditions, "Ready")
        if old is not None and (old.get("status"), old.get("reason", ""), old.get("message")) == (status, reason, message):
            return
        cond = {"type": "Ready", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": transition_time(old, status, self.clock.rfc3339())}
        body = {**cidr, "status": {"conditions": remove_condition(conditions, "Ready") + [cond]}}
        await self.cidrs.update(body, subresource="status")

    async def _finalizers(self, cidr: dict, finalizers: list[str]) -> None:
        md = cidr["metadata"]
        await self.cidrs.patch(md["name"], {"metadata": {"finalizers": finalizers, "resourceVersion": md["resourceVersion"]}})

    async def sync(self, name: str) -> None:
        cidr = self.cidr_inf.get(name)
        if cidr is None:
            return
        md = cidr["metadata"]
        finalizers = md.get("finalizers") or []
        try:
            if md.get("deletionTimestamp"):
                if FINALIZER not in finalizers:
                    return
                if not can_delete(cidr, self.cidr_inf.list(), self.ip_inf.list()):
                    await self._status(cidr, "False", "Terminating", TERMINATING_MESSAGE)
                    return
                wait = parse_time(md["deletionTimestamp"]) + self.deletion_grace - self.clock.now()
                if wait > 0:
                    self.queue.add_after(name, wait)
                    return
                await self._finalizers(cidr, [f for f in finalizers if f != FINALIZER])
                return
            if FINALIZER not in finalizers:
                await self._finalizers(cidr, finalizers + [FINALIZER])
                return  # the update comes back through the informer
            await self._status(cidr, "True", "", READY_MESSAGE)
        except APIError as e:
            if e.code != 404:
                raise
