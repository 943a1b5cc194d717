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
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from ..machinery.conditions import find_condition
from ..machinery.errors import APIError
from ..client.informer import InformerFactory
from ..client.record import CoreEventRecorder
from ..clock import REAL, Clock
from .base import Controller
from .taint_eviction import NODE_INDEX, pod_node

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


def wanted_taints(node: dict) -> set[tuple[str, str]]:
    """The (key, effect) taints this controller keeps on `node`: NoSchedule by its conditions
    and cordon (doNoScheduleTaintingPass), NoExecute by its Ready condition (doNoExecuteTaintingPass)."""
    status = node.get("status") or {}
    want = {(key, "NoSchedule") for c in status.get("conditions") or []
            if (key := _CONDITION_TAINTS.get((c.get("type"), c.get("status"))))}
    if (node.get("spec") or {}).get("unschedulable"):
        want.add((UNSCHEDULABLE, "NoSchedule"))
    if key := _TAINT_FOR.get(ready_status(node) or "True"):
        want.add((key, "NoExecute"))
    return want


class NodeLifecycleController(Controller):
    name = "node-lifecycle-controller"
    aliases = ("nodelifecycle",)
    queue_name = "node_lifecycle_controller"

    def __init__(self, client, clock: Clock = REAL, *, grace_period: float = DEFAULT_GRACE,
                 monitor_period: float = DEFAULT_MONITOR_PERIOD,
                 informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
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
        self.recorder = CoreEventRecorder(client, "node-controller", clock)

    def informers(self):
        return [self.nodes, self.leases, self.pods]

    async def start(self) -> None:
        await super().start()
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

    # --- reconciling -------------------------------------------------------------

    async def sync(self, name) -> None:
        node = self.nodes.get(name)
        if node is None:
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
        want = wanted_taints(node)
        if set(have) == want:
            return
        now = self.clock.rfc3339()
        kept = [t for t in taints if not _managed(t) or (t["key"], t["effect"]) in want]
        added = [{"key": k, "effect": e, "timeAdded": now} for k, e in sorted(want - set(have))]
        try:
            await self.nodes_api.update({**node, "spec": {**node.get("spec", {}), "taints": kept + added}})
        except APIError as e:
            if e.code != 404:
                raise
