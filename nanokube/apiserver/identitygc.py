"""The API server identity Lease garbage collector: every kube-apiserver deletes the identity Leases
(storageversion.py) whose holder stopped renewing them, at start and then hourly, so the Leases
list the API servers that run. In HA each server runs it: a Lease one renewed since the list is
kept (the delete's resourceVersion precondition), one another server deleted first is no error."""

from __future__ import annotations

import logging

from ..clock import parse_time
from ..machinery.errors import APIError
from .background import BackgroundLoop
from .rest import SYSTEM, WriteOptions
from .storageversion import IDENTITY_LABEL

log = logging.getLogger(__name__)

#: upstream's IdentityLeaseGCPeriod: an hour between checks
GC_PERIOD = 3600.0


def expired(lease: dict, now: float) -> bool:
    """Past renewTime + leaseDurationSeconds; a Lease missing either is invalid and expired too."""
    spec = lease.get("spec") or {}
    renew, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if not renew or duration is None:
        return True
    try:
        return parse_time(renew) + duration < now
    except ValueError:
        return True


class IdentityLeaseGC(BackgroundLoop):
    """Deletes expired identity Leases in kube-system every `period` seconds."""

    def __init__(self, server, period: float = GC_PERIOD) -> None:
        self.server, self.period = server, period
        self.opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)

    async def _loop(self) -> None:
        while True:
            try:
                await self.collect()
            except APIError as e:
                log.warning("apiserver lease garbage collection: %s", e.message)
            await self.server.clock.sleep(self.period)

    async def collect(self) -> None:
        rest, res = self.server.rest, self.server.index.get("coordination.k8s.io", "v1", "leases")
        leases, _ = await rest.list(res, "v1", "kube-system", label_selector=f"{IDENTITY_LABEL}=kube-apiserver")
        now = self.server.clock.now()
        for lease in leases:
            if not expired(lease, now):
                continue
            meta = lease["metadata"]
            try:
                await rest.delete(res, "v1", "kube-system", meta["name"],
                                  {"preconditions": {"resourceVersion": meta["resourceVersion"]}}, self.opts)
                log.info("deleted the expired apiserver identity lease %s", meta["name"])
            except APIError as e:
                if e.code not in (404, 409):  # gone (another server's collector) or renewed since the list
                    raise
