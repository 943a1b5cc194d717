"""The cluster a simulated pod's network commands reach (dns.Cluster), kept by watches:
one informer each of Services and EndpointSlices, and one of the bound pods (the node manager's,
which already feeds every agent), shared by the node agents of one process. They start when a
command first names `wget`, `curl`, `nslookup`, `getent`, `ping` or `nc`, so a cluster that never
runs one watches nothing more; from then on each such command, each pass of a loop running
one, reads the caches as they are at that moment and costs the API server no request.
"""

from __future__ import annotations

import asyncio
import contextlib

from ..client.informer import Informer
from ..clock import REAL, Clock
from .dns import SERVICE_NAME, cluster_ips, pod_ips, slice_addresses

#: how long a command waits for the first lists, on the node's clock, before it is left
#: uninterpreted (as where the server cannot be reached)
SYNC_WAIT = 5.0


class WatchedCluster:
    """Services, EndpointSlices and Pods as their informers last saw them, indexed the ways the
    network looks them up: a Service by name and by ClusterIP, a Service's slices, the slices
    holding an address, a pod by IP."""

    def __init__(self, client, clock: Clock = REAL, pods: Informer | None = None, watch_pods: bool = True):
        """`pods`: an informer of the bound pods already running (the node manager's), else one is
        made unless `watch_pods` is False (cluster DNS: its answers read no pod, `pods insecure`)."""
        self.clock = clock
        self.services = Informer(client.resource("", "v1", "services"), clock=clock)
        self.endpoint_slices = Informer(client.resource("discovery.k8s.io", "v1", "endpointslices"), clock=clock)
        self._own_pods = pods is None and watch_pods
        self.pods = pods or (Informer(client.resource("", "v1", "pods"), field_selector="spec.nodeName!=", clock=clock)
                             if watch_pods else None)
        self._tasks: list[asyncio.Task] = []

    async def ready(self) -> bool:
        """Start the watches (at the first call) and wait, up to SYNC_WAIT, for their first lists:
        whether they have them."""
        if not self._tasks:  # (the shared pods informer indexes addresses only from now on)
            self.services.add_index("ip", cluster_ips)
            self.endpoint_slices.add_index("service", _service_key)
            self.endpoint_slices.add_index("address", slice_addresses)
            if self.pods is not None:
                self.pods.add_index("ip", pod_ips)
            informers = [self.services, self.endpoint_slices] + ([self.pods] if self._own_pods else [])
            self._tasks = [asyncio.ensure_future(i.run()) for i in informers]
        synced = [i.synced for i in (self.services, self.endpoint_slices, self.pods) if i is not None]
        if all(e.is_set() for e in synced):
            return True
        waiting = asyncio.ensure_future(asyncio.gather(*(e.wait() for e in synced)))
        timer = asyncio.ensure_future(self.clock.sleep(SYNC_WAIT))
        await asyncio.wait((waiting, timer), return_when=asyncio.FIRST_COMPLETED)
        for t in (waiting, timer):
            t.cancel()
        return all(e.is_set() for e in synced)

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- dns.Cluster -----------------------------------------------------------------------
    def service(self, namespace: str, name: str) -> dict | None:
        return self.services.get(f"{namespace}/{name}")

    def service_at(self, ip: str) -> dict | None:
        return next(iter(self.services.by_index("ip", ip)), None)

    def slices(self, namespace: str, service: str) -> list[dict]:
        return self.endpoint_slices.by_index("service", f"{namespace}/{service}")

    def slices_with(self, ip: str) -> list[dict]:
        return self.endpoint_slices.by_index("address", ip)

    def pod_at(self, ip: str) -> dict | None:
        """The pod with address `ip`: a running one before one that has ended (whose IP may be
        another's by now); None where no pods are watched."""
        pods = self.pods.by_index("ip", ip) if self.pods is not None else ()
        return next((p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")),
                    next(iter(pods), None))


def _service_key(es: dict) -> str | None:
    meta = es["metadata"]
    service = (meta.get("labels") or {}).get(SERVICE_NAME)
    return f"{meta.get('namespace') or ''}/{service}" if service else None
