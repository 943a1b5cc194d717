"""Node lifecycle: a node whose kubelet stops heartbeating (neither its Lease
in kube-node-lease nor its Ready condition moves for the grace period) gets
its conditions set to Unknown, and every node is tainted by its Ready
condition (`not-ready` when False, `unreachable` when Unknown, NoSchedule and
NoExecute) until it reports Ready again. Like upstream's TaintNodesByCondition,
a node also carries a NoSchedule taint for each pressure condition that is
True (memory, disk, PID, network-unavailable) and `unschedulable` while it is
cordoned (`spec.unschedulable`), so `kubectl describe node` shows why pods no
longer land there. Evicting the pods those NoExecute
taints do not tolerate is the taint-eviction controller's job. A node this
controller turns from Ready to Unknown gets a NodeNotReady event, and so does
each pod on it, whose Ready condition turns False (upstream's MarkPodsNotReady).

Like upstream, a heartbeat's age is measured from when this controller saw it
change, on its own clock, so a node whose kubelet clock is skewed, or that a
previous run left behind, gets the full grace period.

NoExecute taints wait on the node's zone, as upstream's handleDisruption decides: a zone adds a
new one every ten seconds at most (--node-eviction-rate). A zone where every node is down is fully
disrupted; one where more than two nodes and at least 55% are down is partially disrupted, which
in a zone of 50 nodes or fewer stops new NoExecute taints there (a node already tainted still
swaps not-ready for unreachable) and slows them to one every 100 s in a larger one. When every zone is fully
disrupted the fault is taken to be the control plane's, not the nodes': the NoExecute taints
come off every node and none is added ("master disruption mode") until a node reports Ready
again; then each node gets a fresh grace period.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping

from ..machinery.conditions import find_condition
from ..machinery.errors import APIError
from ..machinery.metrics import Family
from ..client.informer import InformerFactory
from ..client.record import CoreEventRecorder
from ..clock import REAL, Clock
from .base import Controller
from .taint_eviction import NODE_INDEX, pod_node

log = logging.getLogger(__name__)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
LEASE_NAMESPACE = "kube-node-lease"
#: upstream's --node-monitor-grace-period and --node-monitor-period
DEFAULT_GRACE = 50.0
DEFAULT_MONITOR_PERIOD = 5.0
GRACE_ENV = "NANOKUBE_NODE_MONITOR_GRACE"
_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_TAINT_FOR = {"False": NOT_READY, "Unknown": UNREACHABLE}
#: the NoSchedule taint a node condition's status brings (upstream's nodeConditionToTaintKeyStatusMap)
_CONDITION_TAINTS = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
_NO_SCHEDULE_KEYS = frozenset(_CONDITION_TAINTS.values()) | {UNSCHEDULABLE}
SMP = "application/strategic-merge-patch+json"
#: upstream's --unhealthy-zone-threshold and --large-cluster-size-threshold
UNHEALTHY_ZONE_THRESHOLD = 0.55
LARGE_CLUSTER_THRESHOLD = 50
#: upstream's --node-eviction-rate and --secondary-node-eviction-rate: the nodes a second a zone taints
#: NoExecute, one at a time (burst 1); the secondary rate in a partially disrupted zone of more than 50
EVICTION_RATE = 0.1
SECONDARY_EVICTION_RATE = 0.01
#: a node labelled so is left out of its zone's count (LabelNodeExcludeDisruption)
EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"
NORMAL, PARTIAL, FULL = "Normal", "PartialDisruption", "FullDisruption"
#: what a node's NoExecute taint may do: be added, only swap its key (not-ready, unreachable), or go
TAINT, SWAP, NONE = "taint", "swap", "none"


def options_from_env(env: Mapping[str, str] = os.environ) -> dict[str, float]:
    """`nanokube up` reads a shortened grace period (seconds) from NANOKUBE_NODE_MONITOR_GRACE;
    the monitor period shrinks with it so a short grace is noticed promptly."""
    if not env.get(GRACE_ENV):
        return {}
    grace = float(env[GRACE_ENV])
    return {"grace_period": grace, "monitor_period": min(DEFAULT_MONITOR_PERIOD, max(grace / 5, 0.1))}


def ready_status(node: dict) -> str | None:
    return (find_condition((node.get("status") or {}).get("conditions"), "Ready") or {}).get("status")


def _managed(taint: dict) -> bool:
    if taint.get("effect") == "NoSchedule":
        return taint.get("key") in _NO_SCHEDULE_KEYS
    return taint.get("effect") == "NoExecute" and taint.get("key") in (NOT_READY, UNREACHABLE)


def wanted_taints(node: dict, no_execute: str = TAINT) -> set[tuple[str, str]]:
    """The (key, effect) taints this controller keeps on `node`: NoSchedule by its conditions
    and cordon (doNoScheduleTaintingPass), NoExecute by its Ready condition (doNoExecuteTaintingPass)
    where its zone lets one be added (TAINT), or only swapped on a node that has one (SWAP)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    want = {(key, "NoSchedule") for c in status.get("conditions") or []
            if (key := _CONDITION_TAINTS.get((c.get("type"), c.get("status"))))}
    if spec.get("unschedulable"):
        want.add((UNSCHEDULABLE, "NoSchedule"))
    if (key := _TAINT_FOR.get(ready_status(node) or "True")) and (no_execute == TAINT or no_execute == SWAP and any(
            t.get("effect") == "NoExecute" and t.get("key") in (NOT_READY, UNREACHABLE) for t in spec.get("taints") or ())):
        want.add((key, "NoExecute"))
    return want


def zone_key(node: dict) -> str:
    """GetZoneKey: region and zone from the topology labels (else the beta failure-domain ones)."""
    labels = node["metadata"].get("labels") or {}
    zone = labels.get("topology.kubernetes.io/zone", labels.get("failure-domain.beta.kubernetes.io/zone", ""))
    region = labels.get("topology.kubernetes.io/region", labels.get("failure-domain.beta.kubernetes.io/region", ""))
    return f"{region}:\x00:{zone}" if region or zone else ""


def _counted_as(node: dict | None) -> tuple[str, bool] | None:
    """Where handleDisruption counts a node: (its zone, not Ready); None where it is deleted or
    excluded from disruption."""
    if node is None or EXCLUDE_DISRUPTION in (node["metadata"].get("labels") or {}):
        return None
    return zone_key(node), ready_status(node) != "True"


def zone_state(ready: int, not_ready: int) -> str:
    """ComputeZoneState of a zone's Ready and other nodes."""
    if ready == 0 and not_ready > 0:
        return FULL
    if not_ready > 2 and not_ready / (not_ready + ready) >= UNHEALTHY_ZONE_THRESHOLD:
        return PARTIAL
    return NORMAL


class NodeLifecycleController(Controller):
    name = "node-lifecycle-controller"
    aliases = ("nodelifecycle",)
    queue_name = "node_lifecycle_controller"

    def __init__(self, client, clock: Clock = REAL, *, grace_period: float = DEFAULT_GRACE,
                 monitor_period: float = DEFAULT_MONITOR_PERIOD,
                 informers: InformerFactory | None = None, evictions: Family | None = None):
        """`evictions`: node_collector_evictions_total (ControllerMetrics'), counted by zone."""
        super().__init__(client, clock, informers)
        self.evictions = evictions
        self.grace_period = grace_period
        self.monitor_period = monitor_period
        self.nodes_api = client.resource("", "v1", "nodes")
        self.nodes = self.informer_factory.informer(self.nodes_api)
        self.leases = self.informer_factory.informer(client.resource("coordination.k8s.io", "v1", "leases"), namespace=LEASE_NAMESPACE)
        self.nodes.add_handlers(self._node_changed, lambda _o, n: self._node_changed(n), self._node_deleted)
        self.leases.add_handlers(self._lease_changed, lambda _o, n: self._lease_changed(n))
        self.pods_api = client.resource("", "v1", "pods")
        self.pods = self.informer_factory.informer(self.pods_api)  # the manager's shared one
        self.pods.add_index(NODE_INDEX, pod_node)
        #: nodes whose pods could not all be marked not ready (upstream's nodesToRetry)
        self._retry: set[str] = set()
        self._probes: dict[str, tuple[tuple, float]] = {}
        #: the nodes seen, by name: their uids (upstream's knownNodeSet)
        self._known: dict[str, str] = {}
        #: each zone's seconds between two new NoExecute taints (None where its limiter stopped), when
        #: it may add the next, and whether every zone is fully disrupted
        self._zones: dict[str, float | None] = {}
        self._next: dict[str, float] = {}
        self._all_down = False
        #: handleDisruption's count, kept as nodes change: each zone's [Ready, not Ready] nodes and
        #: its nodes, and where each node is counted (zone, down)
        self._counts: dict[str, list[int]] = {}
        self._members: dict[str, set[str]] = {}
        self._counted: dict[str, tuple[str, bool]] = {}
        self.recorder = CoreEventRecorder(client, "node-controller", clock)

    def informers(self):
        return [self.nodes, self.leases, self.pods]

    async def start(self) -> None:
        await super().start()
        self._disruption()  # (before the workers first run: the zones as the informer shows them)
        self._tasks.append(asyncio.create_task(self._monitor()))

    # --- heartbeats ------------------------------------------------------------

    def _heartbeat(self, name: str) -> tuple:
        lease = self.leases.get(f"{LEASE_NAMESPACE}/{name}")
        renew = ((lease or {}).get("spec") or {}).get("renewTime")
        node = self.nodes.get(name) or {}
        ready = find_condition((node.get("status") or {}).get("conditions"), "Ready") or {}
        return renew, ready.get("lastHeartbeatTime")

    def _observe(self, name: str) -> float:
        """When this node's heartbeat was last seen to change (now, if it just did)."""
        beat = self._heartbeat(name)
        seen = self._probes.get(name)
        if seen is None or seen[0] != beat:
            seen = self._probes[name] = (beat, self.clock.monotonic())
        return seen[1]

    def overdue(self, name: str) -> bool:
        return self.clock.monotonic() - self._observe(name) > self.grace_period

    def _node_changed(self, node: dict) -> None:
        self.queue.add(node["metadata"]["name"])

    def _node_deleted(self, node: dict) -> None:
        self._probes.pop(node["metadata"]["name"], None)
        self.queue.add(node["metadata"]["name"])

    def _lease_changed(self, lease: dict) -> None:
        self._observe(lease["metadata"]["name"])

    async def _monitor(self) -> None:
        """Upstream's monitorNodeHealth pass: find nodes that went quiet."""
        while True:
            await self.clock.sleep(self.monitor_period)
            for node in self.nodes.list():
                name = node["metadata"]["name"]
                if (ready_status(node) != "Unknown" and self.overdue(name)) or name in self._retry:
                    self.queue.add(name)
            self._disruption()

    def _disruption(self, fresh: dict | None = None) -> None:
        """handleDisruption: each zone's state, and whether every zone is fully disrupted; the nodes
        whose NoExecute taints that changes are queued. Leaving full disruption gives every node a
        fresh grace period. Without `fresh` (the monitor's pass) every node is counted again; with it,
        only that node's count moves (a node turning Ready or not costs its zone, not the cluster)."""
        if fresh is None:
            self._counts, self._counted, self._members = {}, {}, {}
            for node in self.nodes.list():
                self._count(node["metadata"]["name"], node)
        else:
            self._count(fresh["metadata"]["name"], fresh)
        self._judge()

    def _judge(self) -> None:
        """The zones' states from their counts; the nodes of a zone whose limiter changes queued."""
        states = {z: zone_state(ready, not_ready) for z, (ready, not_ready) in self._counts.items() if ready or not_ready}
        # setLimiterInZone: a partially disrupted zone of 50 nodes or fewer taints no more nodes
        zones = {z: (None if sum(self._counts[z]) <= LARGE_CLUSTER_THRESHOLD else 1 / SECONDARY_EVICTION_RATE)
                 if state == PARTIAL else 1 / EVICTION_RATE for z, state in states.items()}
        all_down = bool(states) and all(state == FULL for state in states.values())
        if all_down != self._all_down:
            self._all_down = all_down
            log.info("node lifecycle: %s", "every node is not Ready: entering master disruption mode (no NoExecute "
                     "taints)" if all_down else "some nodes are Ready: exiting master disruption mode")
            if not all_down:
                now = self.clock.monotonic()
                self._probes = {name: (beat, now) for name, (beat, _) in self._probes.items()}
            changed = None
        else:
            changed = {z for z in zones.keys() | self._zones.keys() if zones.get(z) != self._zones.get(z)}
        if self.evictions is not None:  # a zone's series from when it is first seen (addPodEvictorForNewZone)
            for zone in zones.keys() - self._zones.keys():
                self.evictions.labels(zone)
        self._zones = zones
        # a limiter swapped is a new one, its token there
        self._next = {z: t for z, t in self._next.items() if changed is not None and z not in changed}
        if changed is None:
            for node in self.nodes.list():
                self.queue.add(node["metadata"]["name"])
        for zone in changed or ():
            for name in self._members.get(zone, ()):
                self.queue.add(name)

    def _count(self, name: str, node: dict | None) -> None:
        """Move node `name`'s count to where `node` (None: deleted) puts it: its zone, Ready or not
        (none where it is excluded from disruption)."""
        was = self._counted.pop(name, None)
        if was is not None:
            self._counts[was[0]][was[1]] -= 1
            self._members[was[0]].discard(name)
        counted = _counted_as(node)
        if counted is not None:
            self._counted[name] = counted
            self._counts.setdefault(counted[0], [0, 0])[counted[1]] += 1
            self._members.setdefault(counted[0], set()).add(name)

    def _no_execute(self, node: dict) -> str:
        """What the node's zone lets its NoExecute taint do (the zone's limiter: none in a small
        partially disrupted zone, and no taint at all while every zone is fully disrupted)."""
        return NONE if self._all_down else SWAP if self._zones.get(zone_key(node), 0.0) is None else TAINT

    # --- reconciling -------------------------------------------------------------

    async def sync(self, name) -> None:
        node = self.nodes.get(name)
        if node is None:
            if name in self._counted:  # (gone from its zone's count now, not at the monitor's next pass)
                self._count(name, None)
                self._judge()
            if (uid := self._known.pop(name, None)) is not None:
                await self._node_event(name, uid, "RemovingNode", f"Removing Node {name} from Controller")
            return
        if self._known.get(name) != node["metadata"]["uid"]:
            self._known[name] = node["metadata"]["uid"]
            await self._node_event(name, node["metadata"]["uid"], "RegisteredNode", f"Registered Node {name} in Controller")
        observed = ready_status(node)
        turned = False
        if observed != "Unknown" and self.overdue(name):
            node = await self._mark_unknown(node)
            turned = observed == "True"
            if turned:  # reported once, when this controller turns it
                await self.recorder.emit({"kind": "Node", "apiVersion": "v1", "metadata": {
                    "name": name, "uid": node["metadata"]["uid"]}}, "Normal", "NodeNotReady",
                    f"Node {name} status is now: NodeNotReady")
        if turned or (name in self._retry and observed != "True"):
            if await self._mark_pods_not_ready(name):
                self._retry.discard(name)
            else:
                self._retry.add(name)
        elif observed == "True":
            self._retry.discard(name)
        if self._counted.get(name) != _counted_as(node):
            self._disruption(node)  # (this node's change may change its zone's state)
        await self._taint(node)

    async def _mark_pods_not_ready(self, name: str) -> bool:
        """MarkPodsNotReady: each pod on the node whose Ready condition is not False yet gets it
        False, then a NodeNotReady Warning; whether every write went through (else retried)."""
        done = True
        now = self.clock.rfc3339()
        for pod in self.pods.by_index(NODE_INDEX, name):
            md = pod["metadata"]
            ready = find_condition((pod.get("status") or {}).get("conditions"), "Ready")
            if ready is None or ready.get("status") == "False":
                continue
            try:
                await self.pods_api.patch(md["name"], {"metadata": {"uid": md["uid"]}, "status": {"conditions": [
                    {**ready, "status": "False", "lastTransitionTime": now}]}}, SMP,
                    namespace=md["namespace"], subresource="status")
            except APIError as e:
                if e.code not in (404, 409):  # gone, or another pod under its name
                    done = False
                continue
            await self.recorder.emit({"kind": "Pod", "apiVersion": "v1", "metadata": md}, "Warning", "NodeNotReady",
                                     "Node is not ready")
        return done

    async def _node_event(self, name: str, uid: str, reason: str, what: str) -> None:
        """RecordNodeEvent: a Normal event on the Node, referenced by name and uid alone."""
        ref = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "uid": uid}}
        await self.recorder.emit(ref, "Normal", reason, f"Node {name} event: {what}")

    async def _mark_unknown(self, node: dict) -> dict:
        """Every condition the kubelet owns becomes Unknown; its heartbeat time stays."""
        now = self.clock.rfc3339()
        have = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
        changed = []
        for t in _CONDITIONS:
            c = have.get(t) or {"type": t}
            if c.get("status") == "Unknown":
                continue
            changed.append({"type": t, "status": "Unknown", "reason": "NodeStatusUnknown",
                            "message": "Kubelet stopped posting node status.",
                            "lastHeartbeatTime": c.get("lastHeartbeatTime") or now, "lastTransitionTime": now})
        return await self.nodes_api.patch(node["metadata"]["name"], {"status": {"conditions": changed}},
                                          "application/strategic-merge-patch+json", subresource="status")

    async def _taint(self, node: dict) -> None:
        taints = (node.get("spec") or {}).get("taints") or []
        have = {(t["key"], t["effect"]): t for t in taints if _managed(t)}
        want = wanted_taints(node, self._no_execute(node))
        if set(have) == want:
            return
        new_no_execute = any(e == "NoExecute" for _, e in want) and not any(e == "NoExecute" for _, e in have)
        if new_no_execute:
            # a new NoExecute taint (a swap takes none) waits for its zone's limiter
            zone, at = zone_key(node), self.clock.monotonic()
            if self._next.get(zone, at) > at:
                self.queue.add_after(node["metadata"]["name"], self._next[zone] - at)
                want = {t for t in want if t[1] != "NoExecute"}
                new_no_execute = False
                if set(have) == want:
                    return
            else:
                self._next[zone] = at + (self._zones.get(zone) or 1 / EVICTION_RATE)
        now = self.clock.rfc3339()
        kept = [t for t in taints if not _managed(t) or (t["key"], t["effect"]) in want]
        added = [{"key": k, "effect": e, "timeAdded": now} for k, e in sorted(want - set(have))]
        try:
            await self.nodes_api.update({**node, "spec": {**node.get("spec", {}), "taints": kept + added}})
        except APIError as e:
            if e.code != 404:
                raise
        else:
            if new_no_execute and self.evictions is not None:  # doNoExecuteTaintingPass counts a taint it adds
                self.evictions.labels(zone_key(node)).inc()
