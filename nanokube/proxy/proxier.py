"""The proxier: Services and EndpointSlices in, nftables syncs out.

Dual-stack as upstream's MetaProxier is: one `kube-proxy` table per IP
family (`ip` for IPv4, `ip6` for IPv6), each with its own syncer, fed the
Services' ClusterIPs of its family and the EndpointSlices of its
addressType. Unlike upstream's two proxiers, the families share one loop,
one registry of metrics (upstream's are per process too, the sync ones
labelled by ip_family, as here) and one health: a change counts as
written once every family's sync succeeded.

Besides ClusterIPs, each family's table captures the Services' externalIPs
and the VIP-mode `status.loadBalancer.ingress` IPs of that family (those the
service-lb-controller writes included), with their loadBalancerSourceRanges.

Informer events mark services dirty; a service's typed structures are rebuilt
only when it changed, so unchanged services keep their identity and the
syncer skips them. Syncs are batched by `min_sync_period`, a sync runs at
least every `sync_period` (upstream's --sync-period), and a full resync
every `full_sync_period`.

A failed nft transaction is what upstream does with one: logged ("nftables
sync failed"), counted in kubeproxy_sync_proxy_rules_nftables_sync_failures_total,
and retried as a full sync of that family's table (at once for a partial
sync, after `sync_period` when the full sync failed too). Upstream records
no Event for it; the pending change turns `/healthz` unhealthy once it waits
past the health timeout (twice `sync_period`). A stale chain the kernel will not delete
(the syncer's own transaction before a sync, a second after the chain was flushed) is counted in
kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total and the sync goes on.

Each table drops traffic to the addresses of the ServiceCIDRs of its family that no Service
holds (`cluster-ips-check`): the ranges start as the configs give them and follow the
ServiceCIDR objects once those are listed (upstream's ServiceCIDRConfig and
OnServiceCIDRsChanged), a change written by a full sync of the table it concerns.

After a sync that changed a UDP Service, the UDP flows still translated to an endpoint the Service
no longer serves from are deleted from the node's conntrack table (conntrack.py), so a client
keeping its socket moves on instead of sending into the void.

Given `health_check_listen`, the proxier also serves upstream's per-Service health checks
(service_health.py) on the `healthCheckNodePort` of each LoadBalancer with
`externalTrafficPolicy: Local`, after each successful sync, as upstream does.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..client.informer import Informer
from ..client.events import EventBroadcaster
from ..clock import REAL, Clock
from ..machinery.gotime import TimeParseError, parse_rfc3339
from ..machinery.metrics import exponential_buckets
from ..machinery.services import health_check_node_port
from ..machinery.topology import NONE, ZONE_LABEL, Hints, available, hints_of, topology_mode
from .conntrack import Conntrack
from .events import ACTION_SYNC, node_ref
from .health import ProxyHealth
from .service_health import ServiceHealthServer
from .nftables.layout import TABLE, Config, Endpoint, ServicePort
from .nftables.nft import Nft
from .nftables.sync import Syncer, SyncReport

log = logging.getLogger(__name__)
#: the longest note an events.k8s.io Event may have (validation's noteLengthLimit)
NOTE_LIMIT = 1024

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
#: nftables family -> the Kubernetes IP family (ipFamilies, EndpointSlice addressType) its table serves
IP_FAMILIES = {"ip": "IPv4", "ip6": "IPv6"}
DUAL_STACK = (Config(), Config(family="ip6"))


def cluster_ip(spec: dict, family: str = "ip") -> str:
    """The ClusterIP of nftables `family` ("" if none), as upstream's
    GetClusterIPByFamily picks it: the clusterIPs entry at the family's
    position in ipFamilies, or the clusterIP itself when a client from
    before dual-stack left ipFamilies empty."""
    families = spec.get("ipFamilies") or []
    if not families:
        ip = spec.get("clusterIP") or ""
        return ip if ip != "None" and (":" in ip) == (family == "ip6") else ""
    ips = spec.get("clusterIPs") or [spec.get("clusterIP") or ""]
    i = families.index(IP_FAMILIES[family]) if IP_FAMILIES[family] in families else len(ips)
    return ips[i] if i < len(ips) and ips[i] != "None" else ""


def _of_family(addr: str, family: str) -> bool:
    return (":" in addr) == (family == "ip6")


def lb_vips(svc: dict, family: str = "ip") -> tuple[str, ...]:
    """The Service's load-balancer ingress IPs of `family` that kube-proxy
    captures: those in VIP mode (an unset ipMode is VIP); a Proxy-mode load
    balancer delivers to the nodes itself (upstream's IsVIPMode)."""
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return tuple(dict.fromkeys(i["ip"] for i in ingress
                               if i.get("ip") and i.get("ipMode", "VIP") == "VIP" and _of_family(i["ip"], family)))


def source_ranges(spec: dict, lb_ips: tuple[str, ...], node_ip: str, family: str = "ip") -> tuple[str, ...]:
    """loadBalancerSourceRanges of `family` (upstream trims the whitespace
    validation lets through), merged so nft gets no overlapping intervals.
    When a range holds the node's IP the LB IPs are allowed too: a VIP
    bound on the node answers the node's own requests from the VIP itself."""
    nets = []
    for r in spec.get("loadBalancerSourceRanges") or []:
        try:
            net = ipaddress.ip_network(r.strip(), strict=False)
        except ValueError:
            continue
        if _of_family(str(net.network_address), family):
            nets.append(net)
    if not nets:
        return ()
    if node_ip and _of_family(node_ip, family) and any(ipaddress.ip_address(node_ip) in n for n in nets):
        nets += [ipaddress.ip_network(a) for a in lb_ips]
    return tuple(str(n) for n in ipaddress.collapse_addresses(nets))


def service_ports(svc: dict, slices: list[dict], node_name: str = "", family: str = "ip",
                  node_ip: str = "", zone: str = "") -> list[ServicePort]:
    """The typed structures of one Service in nftables `family` from its
    EndpointSlices of that family's addressType; endpoints on `node_name`
    are the local ones, and their hints, read for `node_name` in `zone`, say
    which the cluster traffic uses (machinery/topology.py). A Service with no ClusterIP
    of the family has none."""
    spec, md = svc.get("spec", {}), svc["metadata"]
    ip = cluster_ip(spec, family)
    if not ip:
        return []
    affinity = 0
    if spec.get("sessionAffinity") == "ClientIP":
        affinity = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds") or 10800
    external_ips = tuple(dict.fromkeys(a for a in spec.get("externalIPs") or [] if _of_family(a, family)))
    vips = lb_vips(svc, family)
    ranges = source_ranges(spec, vips, node_ip, family)
    accessible = spec.get("type") in ("NodePort", "LoadBalancer") or bool(spec.get("externalIPs"))
    external = accessible and spec.get("externalTrafficPolicy") == "Local"
    out = []
    for p in spec.get("ports", []):
        name, proto = p.get("name", ""), p.get("protocol", "TCP")
        eps: dict[tuple[str, int], Endpoint] = {}
        hints: dict[tuple[str, int], Hints] = {}
        for sl in slices:
            if sl.get("addressType") != IP_FAMILIES[family]:
                continue
            port = next((sp["port"] for sp in sl.get("ports") or []
                         if sp.get("name", "") == name and sp.get("protocol", "TCP") == proto), None)
            if port is None:
                continue
            for ep in sl.get("endpoints") or []:
                conditions = ep.get("conditions") or {}
                ready = conditions.get("ready") is not False  # (unset: ready and serving, not terminating)
                serving_terminating = not ready and conditions.get("serving") is not False and \
                    conditions.get("terminating") is True
                for addr in ep.get("addresses", [])[:1]:
                    eps[(addr, port)] = Endpoint(addr, port, ready, bool(node_name) and ep.get("nodeName") == node_name,
                                                 serving_terminating)
                    if ep.get("hints"):
                        hints[(addr, port)] = hints_of(ep)
        if hints and (mode := topology_mode((hints.get(k, NONE) for k, e in eps.items() if e.ready), node_name,
                                            zone)):
            for k, e in eps.items():
                if not available(hints.get(k, NONE), mode, node_name, zone):
                    eps[k] = Endpoint(e.ip, e.port, e.ready, e.local, e.serving_terminating, close=False)
        out.append(ServicePort(md["namespace"], md["name"], name or str(p["port"]), proto.lower(), ip,
                               p["port"], p.get("nodePort", 0), tuple(eps[k] for k in sorted(eps)), affinity,
                               spec.get("internalTrafficPolicy") == "Local", external, external_ips, vips, ranges))
    return out


#: the sync latency histograms' buckets (pkg/proxy/metrics: ExponentialBuckets(0.001, 2, 15))
_SYNC_BUCKETS = exponential_buckets(0.001, 2, 15)
#: network_programming_duration_seconds' buckets: component-base's MergeBuckets of 0.25 s and 0.5 s,
#: 1..59 s, 60..115 s by 5 and 2..5 min by 30 s, after the 0 its result starts with
_PROGRAMMING_BUCKETS = (0.0, 0.25, 0.5, *range(1, 60), *range(60, 120, 5), *range(120, 301, 30))
#: the annotation the EndpointSlice controller stamps with the time of the change it wrote
TRIGGER_TIME_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time"


class ProxyMetrics:
    """kube-proxy's metrics (pkg/proxy/metrics, all ALPHA) under upstream's names, buckets and HELP texts."""

    def __init__(self, registry: CollectorRegistry):
        family = ["ip_family"]  # IPv4 or IPv6: each of a dual-stack kube-proxy's proxiers reports its own (1.33+)
        self.sync = Histogram("kubeproxy_sync_proxy_rules_duration_seconds",
                              "[ALPHA] SyncProxyRules latency in seconds", family, buckets=_SYNC_BUCKETS,
                              registry=registry)
        self.partial = Histogram("kubeproxy_sync_partial_proxy_rules_duration_seconds",
                                 "[ALPHA] SyncProxyRules latency in seconds for partial resyncs", family,
                                 buckets=_SYNC_BUCKETS, registry=registry)
        self.full = Histogram("kubeproxy_sync_full_proxy_rules_duration_seconds",
                              "[ALPHA] SyncProxyRules latency in seconds for full resyncs", family,
                              buckets=_SYNC_BUCKETS, registry=registry)
        self.failures = Counter("kubeproxy_sync_proxy_rules_nftables_sync_failures",
                                "[ALPHA] Cumulative proxy nftables sync failures", family, registry=registry)
        self.cleanup_failures = Counter("kubeproxy_sync_proxy_rules_nftables_cleanup_failures",
                                        "[ALPHA] Cumulative proxy nftables cleanup failures", family,
                                        registry=registry)
        self.last_sync = Gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                               "[ALPHA] The last time proxy rules were successfully synced", family, registry=registry)
        self.last_queued = Gauge("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
                                 "[ALPHA] The last time a sync of proxy rules was queued", family, registry=registry)
        self.endpoint_changes = Counter("kubeproxy_sync_proxy_rules_endpoint_changes",
                                        "[ALPHA] Cumulative proxy rules Endpoint changes", registry=registry)
        self.endpoint_pending = Gauge("kubeproxy_sync_proxy_rules_endpoint_changes_pending",
                                      "[ALPHA] Pending proxy rules Endpoint changes", registry=registry)
        self.service_changes = Counter("kubeproxy_sync_proxy_rules_service_changes",
                                       "[ALPHA] Cumulative proxy rules Service changes", registry=registry)
        self.service_pending = Gauge("kubeproxy_sync_proxy_rules_service_changes_pending",
                                     "[ALPHA] Pending proxy rules Service changes", registry=registry)
        self.programming = Histogram("kubeproxy_network_programming_duration_seconds",
                                     "[ALPHA] In Cluster Network Programming Latency in seconds", ["ip_family"],
                                     buckets=_PROGRAMMING_BUCKETS, registry=registry)
        self.no_local = Gauge("kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                              "[ALPHA] Number of services with a Local traffic policy and no endpoints",
                              ["traffic_policy", "ip_family"], registry=registry)
        self.conntrack_sync = Histogram("kubeproxy_conntrack_reconciler_sync_duration_seconds",
                                        "[ALPHA] ReconcileConntrackFlowsLatency latency in seconds", family,
                                        buckets=_SYNC_BUCKETS, registry=registry)
        self.conntrack_deleted = Counter("kubeproxy_conntrack_reconciler_deleted_entries",
                                         "[ALPHA] Cumulative conntrack flows deleted by conntrack reconciler", family,
                                         registry=registry)


@dataclass
class FamilyTable:
    """One family's `kube-proxy` table: its syncer and the service ports it holds."""

    family: str
    syncer: Syncer
    ports: dict[str, list[ServicePort]] = field(default_factory=dict)  # service key -> its ports
    flat: dict[str, ServicePort] = field(default_factory=dict)  # service-port key -> port
    reported_error: str = ""
    last_report: SyncReport | None = None


class Proxier:
    def __init__(self, client, node_name: str, node_ip: str | Sequence[str], netns: str | None = None,
                 clock: Clock = REAL, configs: Sequence[Config] = DUAL_STACK, min_sync_period: float = 1.0,
                 sync_period: float = 30.0, full_sync_period: float = 3600.0, registry: CollectorRegistry | None = None,
                 nft: Nft | None = None, health_check_listen: Callable[[int], socket.socket] | None = None):
        """`node_ip`: the node's IP, or one per family (node_ips.py), "" where unknown;
        `configs`: one per table, `ip` and/or `ip6`; both tables load through one nft context.
        `health_check_listen(port)`: a socket bound to `port` on the node's addresses, for the
        Services' health checks (none served without it)."""
        self.node_name, self.clock = node_name, clock
        self.node_ips = (node_ip,) if isinstance(node_ip, str) else tuple(node_ip)
        self.client = client
        self.nft = nft or Nft(netns)
        self.conntrack = Conntrack(netns)
        self.tables = {c.family: FamilyTable(c.family, Syncer(self.nft, c, clock)) for c in configs}
        self.min_sync_period, self.sync_period, self.full_sync_period = min_sync_period, sync_period, full_sync_period
        self.registry = registry or CollectorRegistry()
        self.metrics = ProxyMetrics(self.registry)
        self.health = ProxyHealth(2 * sync_period, clock, self.registry)
        self.service_health = ServiceHealthServer(self.health, health_check_listen, node_name, self._health_check_failed) \
            if health_check_listen else None
        #: events.k8s.io/v1, as upstream's kube-proxy records (reportingInstance kube-proxy-<host>)
        self.broadcaster = EventBroadcaster(client, clock)
        self.recorder = self.broadcaster.recorder("kube-proxy", f"kube-proxy-{node_name}")
        self.health_check_ports: dict[str, int] = {}  # service key -> its healthCheckNodePort
        self.services = Informer(client.resource("", "v1", "services"), clock=clock)
        self.slices = Informer(client.resource("discovery.k8s.io", "v1", "endpointslices"), clock=clock)
        #: this node, for its zone label (upstream's NodeTopologyConfig)
        self.node = Informer(client.resource("", "v1", "nodes"), field_selector=f"metadata.name={node_name}",
                             clock=clock)
        self.zone = ""
        #: every ServiceCIDR's ranges, for each table's unallocated-ClusterIP drop
        self.service_cidrs = Informer(client.resource("networking.k8s.io", "v1", "servicecidrs"), clock=clock)
        self._cidrs_changed = False
        self.syncs = 0
        self._dirty: set[str] = set()
        #: the services changed since the last sync, and how many EndpointSlice changes (the trackers' pending)
        self._services_pending: set[str] = set()
        self._endpoints_pending = 0
        #: family -> service key -> the trigger times of its slices' changes since the last sync, those
        #: after the proxier started (the EndpointsChangeTracker's lastChangeTriggerTimes)
        self._trigger_times: dict[str, dict[str, list[float]]] = {f: {} for f in self.tables}
        self._started_at = clock.now()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self.services.add_handlers(self._on_service, lambda old, new: self._on_service(new), self._on_service)
        self.slices.add_handlers(lambda sl: self._on_slice(None, sl), self._on_slice, lambda sl: self._on_slice(sl, None))
        self.node.add_handlers(self._on_node, lambda old, new: self._on_node(new), lambda n: self._on_node(None))
        self.service_cidrs.add_handlers(*[lambda *_: self._on_service_cidrs()] * 3)

    def _on_service_cidrs(self) -> None:
        """OnServiceCIDRsChanged: the ranges are read again before the next sync."""
        self._cidrs_changed = True
        self._wake.set()

    def _apply_service_cidrs(self) -> None:
        """Each table's drop covers the ServiceCIDRs' ranges of its family (whether Ready or being
        deleted, as upstream's); a table whose ranges changed gets a full sync, as only full syncs
        write the fixed chains. Set between syncs, never while one of them plans."""
        self._cidrs_changed = False
        cidrs = sorted({c for sc in self.service_cidrs.list() for c in (sc.get("spec") or {}).get("cidrs") or ()})
        for t in self.tables.values():
            mine = tuple(c for c in cidrs if _of_family(c, t.family))
            if mine != t.syncer.cfg.service_cidrs:
                t.syncer.cfg = replace(t.syncer.cfg, service_cidrs=mine)
                t.syncer.need_full = True

    def _on_node(self, node: dict | None) -> None:
        """OnTopologyChange: a new zone label re-reads every Service's hints."""
        zone = ((node or {}).get("metadata", {}).get("labels") or {}).get(ZONE_LABEL, "")
        if zone != self.zone:
            self.zone = zone
            for svc in self.services.list():
                self._mark(f"{svc['metadata']['namespace']}/{svc['metadata']['name']}")

    def _on_service(self, svc: dict) -> None:
        """ServiceChangeTracker.Update: every event counts once per family's proxier, as upstream's
        MetaProxier hands it to both of a dual-stack kube-proxy's."""
        key = f"{svc['metadata']['namespace']}/{svc['metadata']['name']}"
        self.metrics.service_changes.inc(len(self.tables))
        self._services_pending.add(key)
        self.metrics.service_pending.set(len(self._services_pending))
        self._mark(key)

    def _on_slice(self, old: dict | None, new: dict | None) -> None:
        for sl in (old, new):
            if sl is not None and (name := (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)):
                self._mark(f"{sl['metadata']['namespace']}/{name}")
        self._track_slice(old, new)

    def _track_slice(self, old: dict | None, new: dict | None) -> None:
        """EndpointsChangeTracker.EndpointSliceUpdate: a slice of a family served here, of a Service,
        counts as a change; one whose ports or endpoints changed (or that came or went) is pending,
        and its trigger time, when it has one later than the proxier's start, waits to be measured."""
        sl = new if new is not None else old
        name = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        family = next((f for f in self.tables if IP_FAMILIES[f] == sl.get("addressType")), None)
        if not name or family is None:
            return
        self.metrics.endpoint_changes.inc()
        if old is not None and new is not None and \
                (old.get("ports"), old.get("endpoints")) == (new.get("ports"), new.get("endpoints")):
            return
        self._endpoints_pending += 1
        self.metrics.endpoint_pending.set(self._endpoints_pending)
        key = f"{sl['metadata']['namespace']}/{name}"
        if new is None:
            self._trigger_times[family].pop(key, None)
            return
        try:
            t = parse_rfc3339((new["metadata"].get("annotations") or {}).get(TRIGGER_TIME_ANNOTATION) or "")
        except TimeParseError:
            return
        if t > self._started_at:
            self._trigger_times[family].setdefault(key, []).append(t)

    def _mark(self, key: str) -> None:
        self._dirty.add(key)
        self.health.queued()
        now = self.clock.now()
        for f in self.tables:
            self.metrics.last_queued.labels(IP_FAMILIES[f]).set(now)
        self._wake.set()

    def event(self, regarding: dict, type_: str, reason: str, action: str, note: str) -> None:
        """Eventf: recorded now, queued for the broadcaster's writer (EventBroadcaster.post), as
        upstream's broadcaster writes from its own goroutine (a sync never waits on the API server
        for it); `stop` drops what is left unwritten, as the broadcaster's Shutdown does."""
        if len(note) > NOTE_LIMIT:  # an nft error quotes its rules: cut as the scheduler's truncateMessage cuts
            note = note[:NOTE_LIMIT - 4] + " ..."
        event = self.recorder.record(regarding, None, type_, reason, action, note)
        if event is not None:
            self.broadcaster.post(event)

    def node_event(self, type_: str, reason: str, action: str, note: str) -> None:
        """An Event about this proxier's Node."""
        self.event(node_ref(self.node_name), type_, reason, action, note)

    async def start(self) -> None:
        self.broadcaster.start()
        for inf in (self.services, self.slices, self.node, self.service_cidrs):
            self._tasks.append(asyncio.create_task(inf.run()))
        for inf in (self.services, self.slices, self.node):  # the ServiceCIDRs only refine a drop: not waited for
            await inf.synced.wait()
        self._tasks.append(asyncio.create_task(self._loop()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.broadcaster.stop()
        if self.service_health is not None:
            await self.service_health.close()
        self.nft.close()  # its socket would keep a deleted node namespace alive

    def _rebuild(self) -> None:
        by_service: dict[str, list[dict]] = {}
        dirty, self._dirty = self._dirty, set()
        self._services_pending.clear()  # checkoutChanges: what this sync takes is no longer pending
        self._endpoints_pending = 0
        self.metrics.service_pending.set(0)
        self.metrics.endpoint_pending.set(0)
        for sl in self.slices.list():
            name = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
            key = f"{sl['metadata']['namespace']}/{name}"
            if name and key in dirty:
                by_service.setdefault(key, []).append(sl)
        for key in dirty:
            svc = self.services.get(key)
            hc = health_check_node_port(svc.get("spec") or {}) if svc is not None else 0
            if hc:
                self.health_check_ports[key] = hc
            else:
                self.health_check_ports.pop(key, None)
            for t in self.tables.values():
                for sp in t.ports.pop(key, []):
                    t.flat.pop(sp.key, None)
                if svc is not None:
                    node_ip = next((ip for ip in self.node_ips if ip and _of_family(ip, t.family)), "")
                    t.ports[key] = service_ports(svc, by_service.get(key, []), self.node_name, t.family,
                                                 node_ip, self.zone)
                    t.flat.update((sp.key, sp) for sp in t.ports[key])

    async def sync_once(self, full: bool = False) -> list[SyncReport]:
        """Rebuild dirty services and sync each family's table (also what the
        loop calls); the changes count as written when every sync succeeded."""
        if self._cidrs_changed:
            self._apply_service_cidrs()
        self._rebuild()
        triggers = {f: self._trigger_times[f] for f in self.tables}
        self._trigger_times = {f: {} for f in self.tables}
        reports = [await self._sync_table(t, full, triggers[t.family]) for t in self.tables.values()]
        if all(r.ok for r in reports):
            self.health.updated()
            await self._sync_health_checks()
        self.syncs += 1
        return reports

    async def _health_check_failed(self, key: str, message: str) -> None:
        """Upstream's Warning Event on the Service (its UID is "namespace/name" there too)."""
        namespace, _, name = key.partition("/")
        self.event({"kind": "Service", "namespace": namespace, "name": name, "uid": key}, "Warning",
                   "FailedToStartServiceHealthcheck", "Listen", message)

    async def _sync_health_checks(self) -> None:
        """Upstream's SyncServices and SyncEndpoints: each served Service's ready endpoints on this
        node (distinct addresses over its ports and families, as upstream's LocalReadyEndpoints)."""
        if self.service_health is None:
            return
        await self.service_health.sync_services(self.health_check_ports)
        self.service_health.sync_endpoints({
            key: len({e.ip for t in self.tables.values() for sp in t.ports.get(key, ()) for e in sp.endpoints
                      if e.local and e.ready}) for key in self.health_check_ports})

    async def _sync_table(self, t: FamilyTable, full: bool, triggers: dict[str, list[float]]) -> SyncReport:
        """One family's sync, with its metrics: the services of a Local policy with no local endpoint
        to use (ready, else serving while terminating), set whatever the outcome; once it succeeded, each change it carried's network
        programming latency (since the trigger time its slice was stamped with)."""
        family = IP_FAMILIES[t.family]
        for policy, local in (("internal", lambda sp: sp.internal_local), ("external", lambda sp: sp.external_local)):
            self.metrics.no_local.labels(policy, family).set(sum(
                1 for sp in t.flat.values() if local(sp) and not sp.local_endpoints))
        start = self.clock.monotonic()
        report = await asyncio.to_thread(t.syncer.sync, dict(t.flat), full)
        elapsed = self.clock.monotonic() - start
        if report.ok:
            now = self.clock.now()
            for t0 in (t0 for times in triggers.values() for t0 in times):
                self.metrics.programming.labels(family).observe(now - t0)
        self.metrics.sync.labels(family).observe(elapsed)
        (self.metrics.full if report.full else self.metrics.partial).labels(family).observe(elapsed)
        if report.cleanup_failures:
            self.metrics.cleanup_failures.labels(family).inc(report.cleanup_failures)
        if report.failures:
            self.metrics.failures.labels(family).inc(report.failures)
            await self._report_failure(t, report)
        if report.ok:
            self.metrics.last_sync.labels(family).set(self.clock.now())
        t.last_report = report
        if not report.ok:
            log.error("node %s: nftables sync of table %s %s failed (%d failed transactions, the kernel keeps the "
                      "last good ruleset; a full sync is retried): %s", self.node_name, t.family, TABLE,
                      report.failures, report.error)
            return report
        log.log(logging.INFO if report.lines else logging.DEBUG,
                "node %s: %s sync of table %s %s, %d service ports (%d changed, %d nft lines) in %.3fs%s",
                self.node_name, "full" if report.full else "partial", t.family, TABLE, len(t.flat),
                len(report.services_changed), report.lines, elapsed,
                f" after {report.failures} failed transaction(s)" if report.failures else "")
        await self._clean_conntrack(t, report)
        return report

    async def _clean_conntrack(self, t: FamilyTable, report: SyncReport) -> None:
        """After a sync that changed a UDP service port (or a full one), the table's family's UDP
        flows to an endpoint its Service no longer serves from are deleted (conntrack.py); upstream
        reconciles after every sync, which with no UDP change finds nothing to delete. Each
        reconcile that could read the table is timed in
        kubeproxy_conntrack_reconciler_sync_duration_seconds and what it deleted counted in
        kubeproxy_conntrack_reconciler_deleted_entries_total, both by ip_family."""
        udp = [sp for sp in t.flat.values() if sp.protocol == "udp"]
        if not udp or not (report.full or any(k in t.flat and t.flat[k].protocol == "udp"
                                              for k in report.services_changed)):
            return
        family = IP_FAMILIES[t.family]
        start = self.clock.monotonic()
        try:
            deleted = await asyncio.to_thread(self.conntrack.reconcile, t.family, udp)
        except OSError as e:
            log.error("node %s: failed to clean stale UDP conntrack entries of table %s %s: %s", self.node_name,
                      t.family, TABLE, e)
            return
        self.metrics.conntrack_sync.labels(family).observe(self.clock.monotonic() - start)
        self.metrics.conntrack_deleted.labels(family).inc(deleted)
        if deleted:
            log.info("node %s: deleted %d stale UDP conntrack entries (%s)", self.node_name, deleted, t.family)

    async def _report_failure(self, t: FamilyTable, report: SyncReport) -> None:
        """A Warning Event on the Node for each distinct nft failure of a table, so a user sees it in
        `kubectl describe node` (the events.k8s.io recorder counts a later one, whatever its note,
        in the first one's series); upstream only logs and counts it."""
        if report.error == t.reported_error:
            return
        t.reported_error = report.error
        outcome = "the full sync that followed succeeded" if report.ok else \
            "the kernel keeps the last good ruleset; a full sync is retried"
        self.node_event("Warning", "SyncProxyRulesFailed", ACTION_SYNC,
                        f"nftables transaction on table {t.family} {TABLE} failed ({outcome}): {report.error}")

    async def _loop(self) -> None:
        last_full = self.clock.monotonic()
        while True:
            full = self.clock.monotonic() - last_full >= self.full_sync_period
            reports = await self.sync_once(full)
            if all(r.full and r.ok for r in reports):
                last_full = self.clock.monotonic()
            await self.clock.sleep(self.min_sync_period)
            if self._dirty or self._cidrs_changed:
                continue
            self._wake.clear()
            try:  # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel that comes as the wake does
                async with asyncio.timeout(self.sync_period):
                    await self._wake.wait()
            except TimeoutError:
                pass
