"""EndpointSlice controller, and the legacy Endpoints object beside it.

For every Service with a selector it keeps one or more EndpointSlices per
address family listing the selected pods (address, ready/serving/terminating,
node, zone, targetRef), at most 100 endpoints per slice, ports resolved from
the Service's targetPorts against each pod's container ports. Reconciling
keeps endpoints in the slice they already sit in and rewrites only slices
whose content changed, so a pod coming or going touches one slice. The
`v1/Endpoints` object of the same name is written for older clients, as
upstream's endpoints controller does. A Service's spec.trafficDistribution
gives each ready endpoint topology hints (see `endpoint_hints`); its topology-mode annotation set
to Auto gives hints in proportion to each zone's CPU instead (topologycache), recomputed as
upstream's node handlers do when a node comes, goes, or changes its readiness or zone. What the
syncs do is counted in upstream's endpoint_slice_controller_* metrics (endpointslice_metrics).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import NamedTuple

import orjson

from ..machinery.conditions import find_condition
from ..machinery.errors import APIError
from ..machinery.podphase import pod_is_terminal
from ..machinery.selectors import matches_labels, selector_from_object
from ..client.informer import InformerFactory, key_of
from ..client.record import CoreEventRecorder
from ..clock import Clock, format_time
from ..machinery.gotime import parse_rfc3339
from .base import TURN, Controller, in_turns
from .endpointslice_metrics import SliceCounts
from .metrics import ControllerMetrics
from .replicaset import owner_reference, pod_is_ready
from .topologycache import HINTS_DISABLED, Event, TopologyCache, disabled, hints_enabled, node_ready, node_zone

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = "service.kubernetes.io/headless"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
ZONE_LABEL = "topology.kubernetes.io/zone"
MAX_ENDPOINTS_PER_SLICE = 100
MAX_ENDPOINTS_ADDRESSES = 1000
OVER_CAPACITY_ANNOTATION = "endpoints.kubernetes.io/over-capacity"
TRIGGER_TIME_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time"
#: the work queue's key for a recount of the zones' CPU (upstream's topologyQueue has only this key)
TOPOLOGY_KEY = "topologyQueueItemKey"


# --- what the service wants ----------------------------------------------------

def address_types(svc: dict) -> list[str]:
    """IPv4/IPv6 from spec.ipFamilies, else from the ClusterIP, else IPv4."""
    spec = svc.get("spec") or {}
    fams = spec.get("ipFamilies") or []
    if not fams and spec.get("clusterIP") not in (None, "", "None"):
        fams = ["IPv6" if ":" in spec["clusterIP"] else "IPv4"]
    return list(fams) or ["IPv4"]


def pod_ip(pod: dict, address_type: str) -> str | None:
    st = pod.get("status") or {}
    ips = [p["ip"] for p in st.get("podIPs") or [] if p.get("ip")] or ([st["podIP"]] if st.get("podIP") else [])
    want_v6 = address_type == "IPv6"
    return next((ip for ip in ips if (":" in ip) == want_v6), None)


def find_port(pod: dict, service_port: dict) -> int | None:
    """The pod's port for a service port: a numeric targetPort as is, a named
    one looked up among the container ports of the same protocol."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    proto = service_port.get("protocol", "TCP")
    for c in (pod.get("spec") or {}).get("containers") or []:
        for cp in c.get("ports") or []:
            if cp.get("name") == target and cp.get("protocol", "TCP") == proto:
                return cp["containerPort"]
    return None


def endpoint_ports(svc: dict, pod: dict) -> tuple[dict, ...]:
    out = []
    for sp in (svc.get("spec") or {}).get("ports") or []:
        port = find_port(pod, sp)
        if port is None:
            continue
        p = {"name": sp.get("name", ""), "port": port, "protocol": sp.get("protocol", "TCP")}
        if sp.get("appProtocol"):
            p["appProtocol"] = sp["appProtocol"]
        out.append(p)
    return tuple(out)


def service_selector(svc: dict) -> list | None:
    """The Service's selector as requirements, once for a pass over many pods; None selects none."""
    sel = (svc.get("spec") or {}).get("selector")
    return selector_from_object({"matchLabels": sel}) if sel else None


def selects(svc: dict, reqs: list | None, pod: dict) -> bool:
    """Whether the Service (its `service_selector`) selects the pod."""
    return reqs is not None and pod["metadata"].get("namespace") == svc["metadata"]["namespace"] and \
        matches_labels(reqs, pod["metadata"].get("labels"))


def _has_address(pod: dict) -> bool:
    """Whether the pod has an IP: one without is in no endpoint (not scheduled or not started)."""
    st = pod.get("status") or {}
    return bool(st.get("podIPs") or st.get("podIP"))


def _endpoint_state(pod: dict) -> tuple:
    """What of a pod its endpoints show that an update can change (podEndpointsChanged):
    addresses, phase (a finished pod has none), readiness, deletion, node. Ports, hostname,
    subdomain, name and uid are immutable."""
    st = pod.get("status") or {}
    return (st.get("podIPs"), st.get("podIP"), st.get("phase"), pod_is_ready(pod),
            pod["metadata"].get("deletionTimestamp"), (pod.get("spec") or {}).get("nodeName"))


def is_headless(svc: dict) -> bool:
    return (svc.get("spec") or {}).get("clusterIP") == "None"


def _target_ref(pod: dict) -> dict:
    md = pod["metadata"]
    return {"kind": "Pod", "namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}


def hint_mode(svc: dict) -> str | None:
    """Which hints the Service's endpoints carry: "zone" (trafficDistribution PreferClose or
    PreferSameZone), "node" (PreferSameNode: zone and node), or None. The topology-mode annotation
    set to Auto takes precedence: its proportional hints are the topology cache's, given after the
    slices are planned (EndpointSliceController._sync_slices)."""
    if hints_enabled(svc):
        return None
    td = (svc.get("spec") or {}).get("trafficDistribution")
    return "node" if td == "PreferSameNode" else "zone" if td in ("PreferClose", "PreferSameZone") else None


def endpoint_hints(mode: str | None, ep: dict) -> dict | None:
    """Upstream's trafficdist heuristics: a ready endpoint is hinted for its own zone, and under
    PreferSameNode also for its own node; one not ready, or with nothing to hint, carries none,
    which makes kube-proxy fall back to all endpoints."""
    if mode is None or not ep["conditions"]["ready"]:
        return None
    hints = {}
    if ep.get("zone"):
        hints["forZones"] = [{"name": ep["zone"]}]
    if mode == "node" and ep.get("nodeName"):
        hints["forNodes"] = [{"name": ep["nodeName"]}]
    return hints or None


def slice_endpoint(svc: dict, pod: dict, ip: str, zone_of: Callable[[str], str | None],
                   mode: str | None = None) -> dict:
    """One endpoint as upstream's podToEndpoint writes it, with `mode`'s hints (hint_mode);
    `zone_of` reads a node's zone label."""
    publish = (svc.get("spec") or {}).get("publishNotReadyAddresses", False)
    terminating = bool(pod["metadata"].get("deletionTimestamp"))
    serving = publish or pod_is_ready(pod)
    ep: dict = {"addresses": [ip],
                "conditions": {"ready": serving and not terminating, "serving": serving, "terminating": terminating},
                "targetRef": _target_ref(pod)}
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        ep["nodeName"] = spec["nodeName"]
        if zone := zone_of(spec["nodeName"]):
            ep["zone"] = zone
    if is_headless(svc) and spec.get("hostname") and spec.get("subdomain") == svc["metadata"]["name"]:
        ep["hostname"] = spec["hostname"]
    if hints := endpoint_hints(mode, ep):
        ep["hints"] = hints
    return ep


def _ports_key(ports) -> bytes:
    """A canonical encoding of a port set (name and protocol defaulted), which
    decodes back into the slice's `ports`."""
    norm = [{**p, "name": p.get("name") or "", "protocol": p.get("protocol") or "TCP"} for p in ports or []]
    return orjson.dumps(sorted(norm, key=lambda p: (p["name"], p["protocol"], p["port"])),
                        option=orjson.OPT_SORT_KEYS)


async def desired_endpoints(svc: dict, pods: list[dict], address_type: str,
                            zone_of: Callable[[str], str | None]) -> dict[bytes, dict[str, dict]]:
    """port-set key -> address -> endpoint, for the pods that belong in slices
    (not finished, with an IP of this family; terminating ones included). A pass in turns
    (in_turns), as the controllers share the API server's loop."""
    out: dict[bytes, dict[str, dict]] = {}
    mode = hint_mode(svc)
    async for part in in_turns(pods):
        for pod in part:
            ip = pod_ip(pod, address_type)
            if ip is None or pod_is_terminal(pod):
                continue
            key = _ports_key(endpoint_ports(svc, pod))
            out.setdefault(key, {})[ip] = slice_endpoint(svc, pod, ip, zone_of, mode)
    return out


def managed_labels(svc: dict, extra: dict[str, str]) -> dict[str, str]:
    labels = dict(svc["metadata"].get("labels") or {})
    labels.pop(HEADLESS_LABEL, None)
    labels.update(extra)
    if is_headless(svc):
        labels[HEADLESS_LABEL] = ""
    return labels


# --- slice planning --------------------------------------------------------------

class SlicePlan(NamedTuple):
    updates: list[dict]
    #: (ports, endpoints) of each new slice
    creates: list[tuple[list[dict], list[dict]]]
    deletes: list[dict]
    #: desired endpoints no slice of their port set holds, and endpoints dropped from the slices of a
    #: port set still desired (upstream's endpoints_added/removed_per_sync: a port set no longer
    #: desired goes with its slices uncounted)
    added: int
    removed: int


async def plan_slices(existing: list[dict], desired: dict[bytes, dict[str, dict]],
                      max_per_slice: int = MAX_ENDPOINTS_PER_SLICE) -> SlicePlan:
    """Given one family's existing slices and desired endpoints, the slices to update, create and
    delete.

    Endpoints stay in the slice that already holds them; new ones fill slices
    already being rewritten, then others with room, then slices that would be
    deleted, then new slices. The slices are read in turns of about TURN endpoints (in_turns)."""
    updates: list[dict] = []
    deletes: list[dict] = []
    creates: list[tuple[list[dict], list[dict]]] = []
    added = removed = 0
    by_ports: dict[bytes, list[dict]] = {}
    for sl in existing:
        by_ports.setdefault(_ports_key(sl.get("ports")), []).append(sl)
    for key, slices in by_ports.items():
        if key not in desired:
            deletes += slices
    for key, want in desired.items():
        remaining = dict(want)
        kept: list[tuple[dict, list[dict], bool]] = []  # slice, endpoints, changed
        async for part in in_turns(by_ports.get(key, []), max(1, TURN // max_per_slice)):
            for sl in part:
                eps, changed = [], False
                for ep in sl.get("endpoints") or []:
                    addr = (ep.get("addresses") or [None])[0]
                    new = remaining.pop(addr, None)
                    if new is None:
                        changed = True
                        removed += 1
                        continue
                    changed |= new != ep
                    eps.append(new)
                kept.append((sl, eps, changed))
        fill_order = sorted(range(len(kept)), key=lambda i: not kept[i][2])
        pending = list(remaining.values())
        added += len(pending)
        for i in fill_order:
            sl, eps, changed = kept[i]
            room = max_per_slice - len(eps)
            if pending and room > 0:
                eps += pending[:room]
                pending = pending[room:]
                changed = True
            kept[i] = (sl, eps, changed)
        for sl, eps, changed in kept:
            if not eps:
                deletes.append(sl)
            elif changed:
                updates.append({**sl, "endpoints": eps})
        for i in range(0, len(pending), max_per_slice):
            creates.append((orjson.loads(key), pending[i:i + max_per_slice]))
    while creates and deletes:  # recycle a slice that would go rather than create one
        ports, eps = creates.pop()
        updates.append({**deletes.pop(), "ports": ports, "endpoints": eps})
    return SlicePlan(updates, creates, deletes, added, removed)


async def endpoints_subsets(svc: dict, pods: list[dict]) -> tuple[list[dict], bool]:
    """The legacy Endpoints subsets (primary family, terminating pods left
    out unless publishNotReadyAddresses), grouped by port set; and whether the
    addresses were truncated at 1000. The pods' addresses are read in turns (in_turns)."""
    spec = svc.get("spec") or {}
    publish = spec.get("publishNotReadyAddresses", False)
    family = address_types(svc)[0]
    groups: dict[bytes, tuple[tuple[dict, ...], list[dict], list[dict]]] = {}
    total = 0
    by_ip = sorted([(pod_ip(p, family) or "", p) async for part in in_turns(pods) for p in part], key=itemgetter(0))
    async for part in in_turns(by_ip):
        for ip, pod in part:
            if not ip or pod_is_terminal(pod) or (pod["metadata"].get("deletionTimestamp") and not publish):
                continue
            if total >= MAX_ENDPOINTS_ADDRESSES:
                return _subsets(groups), True
            total += 1
            ports = endpoint_ports(svc, pod)
            if spec.get("ports") and not ports:
                continue
            addr: dict = {"ip": ip, "targetRef": _target_ref(pod)}
            pspec = pod.get("spec") or {}
            if pspec.get("nodeName"):
                addr["nodeName"] = pspec["nodeName"]
            if pspec.get("hostname") and pspec.get("subdomain") == svc["metadata"]["name"]:
                addr["hostname"] = pspec["hostname"]
            g = groups.setdefault(_ports_key(ports), (ports, [], []))
            (g[1] if publish or pod_is_ready(pod) else g[2]).append(addr)
    return _subsets(groups), False


def _subsets(groups) -> list[dict]:
    out = []
    for _, (ports, ready, not_ready) in sorted(groups.items()):
        s: dict = {}
        if ready:
            s["addresses"] = ready
        if not_ready:
            s["notReadyAddresses"] = not_ready
        if ports:
            # EndpointPort's name is omitempty: the server returns none for "", so compare without it
            s["ports"] = [{k: v for k, v in p.items() if k != "name" or v} for p in ports]
        out.append(s)
    return out


# --- last change trigger time ---------------------------------------------------------

class TriggerTimeTracker:
    """Upstream's TriggerTimeTracker: per service, the trigger times last seen (each selected pod's
    Ready transition, the service's creation); a sync's trigger time is the earliest of those that
    changed since the previous sync, so kube-proxy can measure network programming latency from it."""

    def __init__(self) -> None:
        self._states: dict[str, tuple[str | None, dict[str, str]]] = {}

    def compute(self, svc: dict, pods: list[dict]) -> str | None:
        """The annotation's value for this sync (None: nothing that triggers changed)."""
        last_svc, last_pods = self._states.get(key_of(svc), (None, {}))
        now_pods: dict[str, str] = {}
        changed: list[str] = []
        for pod in pods:
            t = _ready_transition(pod)
            if t:
                name = pod["metadata"]["name"]
                now_pods[name] = t
                if last_pods.get(name) != t:
                    changed.append(t)
        created = svc["metadata"].get("creationTimestamp")
        if created and created != last_svc:
            changed.append(created)
        self._states[key_of(svc)] = (created, now_pods)
        return format_time(min(parse_rfc3339(t) for t in changed)) if changed else None

    def forget(self, svc_key: str) -> None:
        self._states.pop(svc_key, None)


def _ready_transition(pod: dict) -> str | None:
    return (find_condition((pod.get("status") or {}).get("conditions"), "Ready") or {}).get("lastTransitionTime") or None


def _with_trigger(obj: dict, trigger: str | None) -> dict:
    """Stamp a slice or Endpoints being written with this sync's trigger time (dropping a stale one)."""
    md = dict(obj["metadata"])
    annotations = {k: v for k, v in (md.get("annotations") or {}).items() if k != TRIGGER_TIME_ANNOTATION}
    if trigger:
        annotations[TRIGGER_TIME_ANNOTATION] = trigger
    md["annotations"] = annotations or None
    return {**obj, "metadata": md}


# --- the controller -----------------------------------------------------------------

class EndpointSliceController(Controller):
    name = "endpointslice-controller"
    queue_name = "endpoint_slice"
    workers = 2

    def __init__(self, client, clock: Clock | None = None, informers: InformerFactory | None = None,
                 max_endpoints_per_slice: int = MAX_ENDPOINTS_PER_SLICE, endpoints_client=None,
                 metrics: ControllerMetrics | None = None):
        """`endpoints_client` (else `client`) writes the Endpoints: upstream's endpoints controller,
        whose client is endpoint-controller's, not this controller's."""
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.max_per_slice = max_endpoints_per_slice
        self.stats = (metrics or ControllerMetrics()).endpointslice
        #: the numbers of the endpoint_slice_controller gauges, kept by this controller's syncs
        self.counts = SliceCounts(self.stats, max_endpoints_per_slice)
        self.slices = client.resource("discovery.k8s.io", "v1", "endpointslices")
        self.endpoints = (endpoints_client or client).resource("", "v1", "endpoints")
        self.svc_inf = self.informer_factory.informer(client.resource("", "v1", "services"))
        self.pod_inf = self.informer_factory.informer(client.resource("", "v1", "pods"))
        self.slice_inf = self.informer_factory.informer(self.slices, label_selector=f"{MANAGED_BY_LABEL}={CONTROLLER_NAME}")
        self.ep_inf = self.informer_factory.informer(self.endpoints)
        self.node_inf = self.informer_factory.informer(client.resource("", "v1", "nodes"))
        # (kind, object key) -> (service key, resourceVersion written, or None once deleted)
        self._written: dict[tuple[str, str], tuple[str, int | None]] = {}
        self.trigger_times = TriggerTimeTracker()
        self.recorder = CoreEventRecorder(client, "endpoint-slice-controller", self.clock)
        self.topology = TopologyCache()
        #: a node came, went or changed readiness or zone since the zones' CPU was last counted
        self._topology_stale = False
        self.node_inf.add_handlers(self._node_changed, self._node_updated, self._node_changed)
        self.svc_inf.add_handlers(self._enqueue, lambda o, n: self._enqueue(n), self._enqueue)
        self.pod_inf.add_handlers(self._pod_changed, self._pod_updated, self._pod_changed)
        self.slice_inf.add_handlers(lambda o: self._slice_seen(o), lambda o, n: self._slice_seen(n),
                                    lambda o: self._slice_seen(o, deleted=True))
        self.ep_inf.add_handlers(lambda o: self._ep_seen(o), lambda o, n: self._ep_seen(n),
                                 lambda o: self._ep_seen(o, deleted=True))

    def informers(self):
        return [self.svc_inf, self.pod_inf, self.slice_inf, self.ep_inf, self.node_inf]

    def _enqueue(self, obj: dict) -> None:
        self.queue.add(key_of(obj))

    def _node_changed(self, _node: dict | None = None) -> None:
        """addNode, deleteNode: the zones' CPU is counted again, at once (TOPOLOGY_KEY) where some
        Service has topology hints, which are synced again if now overloaded; otherwise when a
        Service next asks for hints, so thousands of nodes coming cost no recount each."""
        self._topology_stale = True
        if self.topology.by_service:
            self.queue.add(TOPOLOGY_KEY)

    def _node_updated(self, old: dict, new: dict) -> None:
        """updateNode: only a change of readiness or zone recounts (not allocatable CPU alone)."""
        if node_zone(old) != node_zone(new) or node_ready(old) != node_ready(new):
            self._node_changed()

    def _count_zones(self) -> None:
        if self._topology_stale:
            self._topology_stale = False
            self.topology.set_nodes(self.node_inf.list())

    def _pod_changed(self, pod: dict) -> None:
        """A pod that comes or goes is synced into the services selecting it, unless it has no
        address, as no endpoint shows it."""
        if _has_address(pod):
            self._enqueue_services(pod)

    def _enqueue_services(self, pod: dict) -> None:
        """getPodServiceMemberships: the services of the pod's namespace (its index) selecting it."""
        for svc in self.svc_inf.list_namespace(pod["metadata"]["namespace"]):
            if selects(svc, service_selector(svc), pod):
                self._enqueue(svc)

    def _pod_updated(self, old: dict, pod: dict) -> None:
        """updatePod (GetServicesToUpdateOnPodChange), for the pods an endpoint shows before or
        after: a labels change syncs the services selecting either side; otherwise only a change
        of what the endpoints show syncs its services (most pod updates are status writes that
        change neither, and a pending pod's have no address on either side)."""
        had, has = _has_address(old), _has_address(pod)
        if not (had or has):
            return
        if old["metadata"].get("labels") != pod["metadata"].get("labels"):
            if had:
                self._enqueue_services(old)
            if has:
                self._enqueue_services(pod)
        elif _endpoint_state(old) != _endpoint_state(pod):
            self._enqueue_services(pod)

    def _observe(self, kind: str, obj: dict, deleted: bool) -> str | None:
        """Forget a write the informer now shows; the service it belongs to."""
        k = (kind, key_of(obj))
        svc_key, rv = self._written.get(k, (None, None))
        if svc_key is not None and (deleted or (rv is not None and _rv(obj) >= rv)):
            del self._written[k]
        return svc_key

    def _slice_seen(self, sl: dict, deleted: bool = False) -> None:
        svc_key = self._observe("slice", sl, deleted)
        name = (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            self.queue.add(f"{sl['metadata']['namespace']}/{name}")
        elif svc_key:
            self.queue.add(svc_key)

    def _ep_seen(self, ep: dict, deleted: bool = False) -> None:
        self._observe("ep", ep, deleted)
        self._enqueue(ep)

    def _cache_stale(self, svc_key: str) -> bool:
        """Some write for this service is not in the informers yet: syncing now
        would act on old state (a second slice for the same pods, a conflict).
        The event that catches the cache up requeues the service."""
        return any(sk == svc_key for sk, _ in self._written.values())

    def _record(self, kind: str, svc_key: str, obj: dict, deleted: bool = False) -> None:
        """Remember a write unless its watch event already arrived."""
        seen = (self.slice_inf if kind == "slice" else self.ep_inf).get(key_of(obj))
        if (seen is None) if deleted else (seen is not None and _rv(seen) >= _rv(obj)):
            return
        self._written[(kind, key_of(obj))] = (svc_key, None if deleted else _rv(obj))

    async def _create(self, sl: dict) -> None:
        md = sl["metadata"]
        self._record("slice", f"{md['namespace']}/{md['labels'][SERVICE_NAME_LABEL]}", await self.slices.create(sl))
        self.stats.changes.labels("create").inc()

    async def _update(self, sl: dict) -> None:
        md = sl["metadata"]
        self._record("slice", f"{md['namespace']}/{md['labels'][SERVICE_NAME_LABEL]}", await self.slices.update(sl))
        self.stats.changes.labels("update").inc()

    def _zone(self, node_name: str) -> str | None:
        """The zone label of the node, read from the cache when a sync writes the node's endpoints (as
        upstream's reconciler reads its node lister); a node's new zone reaches them at their service's
        next sync, since upstream's node handlers refresh only the topology-hints cache."""
        node = self.node_inf.get(node_name)
        return (node["metadata"].get("labels") or {}).get(ZONE_LABEL) if node is not None else None

    def _service_slices(self, ns: str, name: str) -> list[dict]:
        return [sl for sl in self.slice_inf.list_namespace(ns)
                if (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name]

    async def sync(self, key: str) -> None:
        if key == TOPOLOGY_KEY:  # checkNodeTopologyDistribution
            self._count_zones()
            for svc_key in self.topology.overloaded():
                self.queue.add(svc_key)
            return
        try:
            result = await self._sync_service(key)
        except Exception:
            self.stats.syncs.labels("error").inc()
            raise
        self.stats.syncs.labels(result).inc()  # upstream's trackSync

    async def _sync_service(self, key: str) -> str:
        """syncService; "stale" when it waits for the informers to show the controller's own writes
        (upstream's StaleInformerCache error), else "success"."""
        if self._cache_stale(key):
            return "stale"
        ns, name = key.split("/", 1)
        svc = self.svc_inf.get(key)
        if svc is None or (svc.get("spec") or {}).get("type") == "ExternalName":
            self.trigger_times.forget(key)
            self.topology.forget(key)
            self.counts.forget(key)
            await self._delete_all(self._service_slices(ns, name), key)
            ep = self.ep_inf.get(key)
            if svc is None and ep is not None and (ep["metadata"].get("labels") or {}).get(SKIP_MIRROR_LABEL) == "true":
                await _ignore_missing(self.endpoints.delete(name, ns))  # ours; one a user wrote stays
            return "success"
        if not (svc.get("spec") or {}).get("selector") or svc["metadata"].get("deletionTimestamp"):
            return "success"
        reqs = service_selector(svc)
        pods = [p async for part in in_turns(self.pod_inf.list_namespace(ns)) for p in part if selects(svc, reqs, p)]
        trigger = self.trigger_times.compute(svc, pods)
        await self._sync_slices(svc, pods, trigger)
        await self._sync_endpoints(svc, pods, trigger)
        return "success"

    async def _delete_all(self, slices: list[dict], svc_key: str) -> None:
        for sl in slices:
            if await _ignore_missing(self.slices.delete(sl["metadata"]["name"], sl["metadata"]["namespace"])):
                self.stats.changes.labels("delete").inc()
            self._record("slice", svc_key, sl, deleted=True)

    async def _sync_slices(self, svc: dict, pods: list[dict], trigger: str | None = None) -> None:
        md = svc["metadata"]
        existing = self._service_slices(md["namespace"], md["name"])
        labels = managed_labels(svc, {SERVICE_NAME_LABEL: md["name"], MANAGED_BY_LABEL: CONTROLLER_NAME})
        owner = owner_reference(svc, "v1", "Service")
        families = address_types(svc)
        svc_key = key_of(svc)
        dropped = [sl for sl in existing if sl.get("addressType") not in families]
        for at in {sl.get("addressType") for sl in dropped}:
            self.topology.remove_hints(svc_key, at)
        await self._delete_all(dropped, svc_key)
        wanted = {at: await desired_endpoints(svc, pods, at, self._zone) for at in families}
        allocations, events = self._hint_allocations(svc, wanted)
        mode = hint_mode(svc)
        td = (svc.get("spec") or {}).get("trafficDistribution") if mode else None
        self.counts.traffic_distribution(svc_key, td)
        changed = self.stats.changed_per_sync.labels("Auto" if hints_enabled(svc) else "Disabled", td or "")
        if not any(wanted.values()):
            written = await self._placeholder(svc, [sl for sl in existing if sl.get("addressType") in families],
                                              labels, owner, trigger)
            for i in range(len(families)):  # one observation per family, as upstream's reconcileByAddressType
                self.stats.added.labels().observe(0)
                self.stats.removed.labels().observe(0)
                changed.observe(0 if i else written)
            self.counts.update(svc_key, [], 1)
            await self._record_events(svc, events)
            return
        slices, endpoints = 0, []
        for at, desired in wanted.items():
            mine = [sl for sl in existing if sl.get("addressType") == at]
            if (allocs := allocations.get(at)) is not None:
                _carry_hints(mine, desired)
            plan = await plan_slices(mine, desired, self.max_per_slice)
            updates, creates, deletes = plan.updates, plan.creates, plan.deletes
            self.stats.added.labels().observe(plan.added)
            self.stats.removed.labels().observe(plan.removed)
            touched = {sl["metadata"]["name"] for sl in updates + deletes}
            if allocs is not None:
                moved, enabled = self.topology.add_hints(
                    svc_key, at, allocs, [eps for _, eps in creates] + [sl["endpoints"] for sl in updates],
                    [sl for sl in mine if sl["metadata"]["name"] not in touched])
                updates += moved
                events += enabled
                touched |= {sl["metadata"]["name"] for sl in moved}
            relabel = [sl for sl in mine if sl["metadata"]["name"] not in touched
                       and not _meta_current(sl, labels, owner)]
            for ports, eps in creates:
                await self._create(_with_trigger(self._new_slice(md, at, ports, eps, labels, owner), trigger))
            for sl in updates + relabel:
                await self._update(_with_trigger(_with_meta(sl, labels, owner), trigger))
            await self._delete_all(deletes, svc_key)
            changed.observe(len(creates) + len(updates) + len(relabel) + len(deletes))
            slices += len(mine) + len(creates) - len(deletes)
            endpoints += [len(group) for group in desired.values()]
        self.counts.update(svc_key, endpoints, slices)
        await self._record_events(svc, events)

    def _hint_allocations(self, svc: dict, wanted: dict[str, dict[bytes, dict[str, dict]]]
                          ) -> tuple[dict[str, dict], list[Event]]:
        """Per address type, the topology cache's allocations for a Service with topology-mode Auto
        whose safeguards pass, and the events of those that fail. For any other Service, hints it
        had from the annotation are forgotten, with a Disabled event (once, as upstream's first
        address type drops the Service from the cache)."""
        key, events = key_of(svc), []
        if not hints_enabled(svc):
            for at in wanted:
                if key in self.topology.populated:
                    events.append(disabled(HINTS_DISABLED, at))
                self.topology.remove_hints(key, at)
            return {}, events
        self._count_zones()
        allocations = {}
        for at, desired in wanted.items():
            allocs, failed = self.topology.check(key, at, [ep for group in desired.values() for ep in group.values()])
            events += failed
            if allocs is not None:
                allocations[at] = allocs
        return allocations, events

    async def _record_events(self, svc: dict, events: list[Event]) -> None:
        for e in events:
            await self.recorder.emit({**svc, "kind": "Service", "apiVersion": "v1"}, e.type, e.reason, e.message)

    async def _placeholder(self, svc: dict, existing: list[dict], labels: dict, owner: dict,
                           trigger: str | None = None) -> int:
        """A Service with no endpoints keeps exactly one empty slice; the number of slices written."""
        keep = next((sl for sl in existing if not sl.get("endpoints") and not sl.get("ports")),
                    existing[0] if existing else None)
        others = [sl for sl in existing if sl is not keep]
        await self._delete_all(others, key_of(svc))
        md = svc["metadata"]
        if keep is None:
            await self._create(_with_trigger(self._new_slice(md, address_types(svc)[0], [], [], labels, owner), trigger))
        elif keep.get("endpoints") or keep.get("ports") or not _meta_current(keep, labels, owner):
            await self._update(_with_trigger(_with_meta({**keep, "ports": [], "endpoints": []}, labels, owner), trigger))
        else:
            return len(others)
        return len(others) + 1

    @staticmethod
    def _new_slice(md: dict, address_type: str, ports: list, endpoints: list, labels: dict, owner: dict) -> dict:
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{md['name'][:58]}-", "namespace": md["namespace"],
                             "labels": labels, "ownerReferences": [owner]},
                "addressType": address_type, "ports": ports, "endpoints": endpoints}

    async def _sync_endpoints(self, svc: dict, pods: list[dict], trigger: str | None = None) -> None:
        md = svc["metadata"]
        subsets, truncated = await endpoints_subsets(svc, pods)
        labels = managed_labels(svc, {SKIP_MIRROR_LABEL: "true"})
        cur = self.ep_inf.get(key_of(svc))
        annotations = dict((cur or {}).get("metadata", {}).get("annotations") or {})
        if truncated:
            annotations[OVER_CAPACITY_ANNOTATION] = "truncated"
        else:
            annotations.pop(OVER_CAPACITY_ANNOTATION, None)
        if cur is None:
            meta = {"name": md["name"], "namespace": md["namespace"], "labels": labels}
            if annotations:
                meta["annotations"] = annotations
            self._record("ep", key_of(svc), await self.endpoints.create(_with_trigger(
                {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": subsets}, trigger)))
            return
        cmd = cur["metadata"]
        if (cur.get("subsets") or []) == subsets and (cmd.get("labels") or {}) == labels \
                and (cmd.get("annotations") or {}) == annotations:
            return
        meta = {**cmd, "labels": labels, "annotations": annotations or None}
        self._record("ep", key_of(svc), await self.endpoints.update(
            _with_trigger({**cur, "metadata": meta, "subsets": subsets}, trigger)))


def _carry_hints(existing: list[dict], desired: dict[bytes, dict[str, dict]]) -> None:
    """Give each ready desired endpoint the hints its copy in the slices has, so that planning
    compares endpoints without their hints, as upstream's reconciler does: a slice left alone keeps
    its topology hints if the topology cache finds them still good (TopologyCache.add_hints)."""
    hints = {ep["addresses"][0]: ep["hints"] for sl in existing for ep in sl.get("endpoints") or ()
             if ep.get("hints") and ep.get("addresses")}
    if hints:
        for group in desired.values():
            for addr, ep in group.items():
                if ep["conditions"]["ready"] and addr in hints:
                    ep["hints"] = hints[addr]


def _meta_current(sl: dict, labels: dict, owner: dict) -> bool:
    md = sl["metadata"]
    return (md.get("labels") or {}) == labels and any(
        r.get("uid") == owner["uid"] and r.get("controller") for r in md.get("ownerReferences") or [])


def _with_meta(sl: dict, labels: dict, owner: dict) -> dict:
    md = dict(sl["metadata"])
    md["labels"] = labels
    refs = [r for r in md.get("ownerReferences") or [] if not r.get("controller")]
    md["ownerReferences"] = refs + [owner]
    return {**sl, "metadata": md}


def _rv(obj: dict) -> int:
    return int(obj["metadata"].get("resourceVersion") or 0)


async def _ignore_missing(coro) -> bool:
    """Await a delete; False when the object was already gone."""
    try:
        await coro
    except APIError as e:
        if e.code != 404:
            raise
        return False
    return True
