"""The proxier: Services and EndpointSlices in, nftables syncs out.

Informer events mark services dirty; a service's typed structures are rebuilt
only when it changed, so unchanged services keep their identity and the
syncer skips them. Syncs are batched by `min_sync_period`, a sync runs at
least every `sync_period` (upstream's --sync-period), and a full resync
every `full_sync_period`.

A failed nft transaction is what upstream does with one: logged ("nftables
sync failed"), counted in kubeproxy_sync_proxy_rules_nftables_sync_failures_total,
and retried as a full sync (at once for a partial sync, after `sync_period`
when the full sync failed too). Upstream records no Event for it; the
pending change turns `/healthz` unhealthy once it waits past the health
timeout (twice `sync_period`).
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..client.informer import Informer
from ..clock import REAL, Clock
from .events import record_node_event
from .health import ProxyHealth
from .nftables.layout import Config, Endpoint, ServicePort
from .nftables.nft import Nft
from .nftables.sync import Syncer, SyncReport

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def service_ports(svc: dict, slices: list[dict], node_name: str = "") -> list[ServicePort]:
    """The typed structures of one Service from its EndpointSlices (IPv4
    ClusterIPs only); endpoints on `node_name` are the local ones."""
    spec, md = svc.get("spec", {}), svc["metadata"]
    ip = spec.get("clusterIP")
    if not ip or ip == "None" or ":" in ip:
        return []
    affinity = 0
    if spec.get("sessionAffinity") == "ClientIP":
        affinity = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds") or 10800
    external = spec.get("type") in ("NodePort", "LoadBalancer") and spec.get("externalTrafficPolicy") == "Local"
    out = []
    for p in spec.get("ports", []):
        name, proto = p.get("name", ""), p.get("protocol", "TCP")
        eps: dict[tuple[str, int], Endpoint] = {}
        for sl in slices:
            if sl.get("addressType") != "IPv4":
                continue
            port = next((sp["port"] for sp in sl.get("ports") or []
                         if sp.get("name", "") == name and sp.get("protocol", "TCP") == proto), None)
            if port is None:
                continue
            for ep in sl.get("endpoints") or []:
                ready = ep.get("conditions", {}).get("ready") is not False
                for addr in ep.get("addresses", [])[:1]:
                    eps[(addr, port)] = Endpoint(addr, port, ready, bool(node_name) and ep.get("nodeName") == node_name)
        out.append(ServicePort(md["namespace"], md["name"], name or str(p["port"]), proto.lower(), ip,
                               p["port"], p.get("nodePort", 0), tuple(eps[k] for k in sorted(eps)), affinity,
                               spec.get("internalTrafficPolicy") == "Local", external))
    return out


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.sync = Histogram("kubeproxy_sync_proxy_rules_duration_seconds",
                              "SyncProxyRules latency in seconds", registry=registry)
        self.partial = Histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds",
                                 "SyncProxyRules latency in seconds for partial resyncs", registry=registry)
        self.full = Histogram("kubeproxy_sync_full_proxy_rules_duration_seconds",
                              "SyncProxyRules latency in seconds for full resyncs", registry=registry)
        self.failures = Counter("kubeproxy_sync_proxy_rules_nftables_sync_failures",
                                "Number of times an nftables transaction failed", registry=registry)
        self.last_sync = Gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                               "The last time proxy rules were successfully synced", registry=registry)
        self.last_queued = Gauge("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
                                 "The last time a sync of proxy rules was queued", registry=registry)


class Proxier:
    def __init__(self, client, node_name: str, node_ip: str, netns: str | None = None, clock: Clock = REAL,
                 cfg: Config | None = None, min_sync_period: float = 1.0, sync_period: float = 30.0,
                 full_sync_period: float = 3600.0, registry: CollectorRegistry | None = None, nft: Nft | None = None):
        self.node_name, self.node_ip, self.clock = node_name, node_ip, clock
        self.client = client
        self._reported_error = ""
        self.syncer = Syncer(nft or Nft(netns), cfg)
        self.min_sync_period, self.sync_period, self.full_sync_period = min_sync_period, sync_period, full_sync_period
        self.registry = registry or CollectorRegistry()
        self.metrics = ProxyMetrics(self.registry)
        self.health = ProxyHealth(2 * sync_period, clock, self.registry)
        self.services = Informer(client.resource("", "v1", "services"))
        self.slices = Informer(client.resource("discovery.k8s.io", "v1", "endpointslices"))
        self.last_report: SyncReport | None = None
        self.syncs = 0
        self._ports: dict[str, list[ServicePort]] = {}
        self._flat: dict[str, ServicePort] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self.services.add_handlers(self._on_service, lambda old, new: self._on_service(new), self._on_service)
        self.slices.add_handlers(self._on_slice, lambda old, new: (self._on_slice(old), self._on_slice(new)),
                                 self._on_slice)

    def _on_service(self, svc: dict) -> None:
        self._mark(f"{svc['metadata']['namespace']}/{svc['metadata']['name']}")

    def _on_slice(self, sl: dict) -> None:
        name = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            self._mark(f"{sl['metadata']['namespace']}/{name}")

    def _mark(self, key: str) -> None:
        self._dirty.add(key)
        self.health.queued()
        self.metrics.last_queued.set(self.clock.now())
        self._wake.set()

    async def start(self) -> None:
        for inf in (self.services, self.slices):
            self._tasks.append(asyncio.create_task(inf.run()))
        await self.services.synced.wait()
        await self.slices.synced.wait()
        self._tasks.append(asyncio.create_task(self._loop()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.syncer.nft.close()  # its socket would keep a deleted node namespace alive

    def _rebuild(self) -> None:
        by_service: dict[str, list[dict]] = {}
        dirty, self._dirty = self._dirty, set()
        for sl in self.slices.list():
            name = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
            key = f"{sl['metadata']['namespace']}/{name}"
            if name and key in dirty:
                by_service.setdefault(key, []).append(sl)
        for key in dirty:
            for sp in self._ports.pop(key, []):
                self._flat.pop(sp.key, None)
            svc = self.services.get(key)
            if svc is not None:
                self._ports[key] = service_ports(svc, by_service.get(key, []), self.node_name)
                self._flat.update((sp.key, sp) for sp in self._ports[key])

    async def sync_once(self, full: bool = False) -> SyncReport:
        """Rebuild dirty services and run one sync (also what the loop calls)."""
        self._rebuild()
        start = self.clock.monotonic()
        report = await asyncio.to_thread(self.syncer.sync, dict(self._flat), full)
        elapsed = self.clock.monotonic() - start
        self.metrics.sync.observe(elapsed)
        (self.metrics.full if report.full else self.metrics.partial).observe(elapsed)
        if report.failures:
            self.metrics.failures.inc(report.failures)
            await self._report_failure(report)
        if report.ok:
            self.health.updated()
            self.metrics.last_sync.set(self.clock.now())
        self.last_report, self.syncs = report, self.syncs + 1
        if not report.ok:
            log.error("node %s: nftables sync failed (%d failed transactions, the kernel keeps the last good "
                      "ruleset; a full sync is retried): %s", self.node_name, report.failures, report.error)
            return report
        log.log(logging.INFO if report.lines else logging.DEBUG,
                "node %s: %s sync of %d service ports (%d changed, %d nft lines) in %.3fs%s", self.node_name,
                "full" if report.full else "partial", len(self._flat), len(report.services_changed), report.lines,
                elapsed, f" after {report.failures} failed transaction(s)" if report.failures else "")
        return report

    async def _report_failure(self, report: SyncReport) -> None:
        """A Warning Event on the Node for each distinct nft failure, so a user
        sees it in `kubectl describe node`; upstream only logs and counts it."""
        if report.error == self._reported_error:
            return
        self._reported_error = report.error
        outcome = "the full sync that followed succeeded" if report.ok else \
            "the kernel keeps the last good ruleset; a full sync is retried"
        await record_node_event(self.client, self.clock, self.node_name, "SyncProxyRulesFailed",
                                f"nftables transaction failed ({outcome}): {report.error}")

    async def _loop(self) -> None:
        last_full = self.clock.monotonic()
        while True:
            full = self.clock.monotonic() - last_full >= self.full_sync_period
            report = await self.sync_once(full)
            if report.full and report.ok:
                last_full = self.clock.monotonic()
            await self.clock.sleep(self.min_sync_period)
            if self._dirty:
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.sync_period)
            except TimeoutError:
                pass
