import contextlib

import pytest

from nanokube.apiserver.admission import Admission
from nanokube.apiserver.loopback import connector
from nanokube.client.informer import InformerFactory
from nanokube.clock import parse_time
from nanokube.controllers.nodelifecycle import NodeLifecycleController, options_from_env
from nanokube.controllers.taint_eviction import (
    TaintEvictionController,
    toleration_seconds,
)
from nanokube.node.cluster import default_cluster, parse_cluster
from nanokube.node.faults import ANNOTATION
from nanokube.node.manager import NodeManager
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


def _ready(node: dict) -> dict:
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def _managed_taints(node: dict) -> set:
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or [] if t["key"].startswith("node.kubernetes.io/")}


@pytest.fixture
async def cluster():
    """Two simulated nodes (agents on the manual clock) under the lifecycle controller."""
    async with _nodes(default_cluster()) as got:
        yield got


@contextlib.asynccontextmanager
async def _nodes(nodes):
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), nodes, clock)
    await mgr.start()
    ctl = NodeLifecycleController(s.client, clock, grace_period=50, monitor_period=5)
    await ctl.start()
    try:
        yield s.client, clock
    finally:
        await ctl.stop()
        await mgr.stop()
        await s.close()


async def _advance(clock: ManualClock, seconds: int) -> None:
    for _ in range(seconds // 5):
        await clock.advance(5)


async def _fault(client, node: str, value: str | None) -> None:
    await client.resource("", "v1", "nodes").patch(node, {"metadata": {"annotations": {ANNOTATION: value}}})


async def test_a_node_whose_lease_stops_goes_unknown_and_tainted_then_recovers(cluster):
    client, clock = cluster
    nodes = client.resource("", "v1", "nodes")
    await _fault(client, "gpu-0", "lease-stop")
    await _advance(clock, 35)
    assert _ready(await nodes.get("gpu-0"))["status"] == "True"
    await _advance(clock, 35)

    async def unknown():
        n = await nodes.get("gpu-0")
        return n if _managed_taints(n) else None

    n = await eventually(unknown)
    ready = _ready(n)
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    conds = {c["type"]: c["status"] for c in n["status"]["conditions"]}
    assert conds == {"Ready": "Unknown", "MemoryPressure": "Unknown", "DiskPressure": "Unknown", "PIDPressure": "Unknown"}
    assert _managed_taints(n) == {(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")}
    assert all(t.get("timeAdded") for t in n["spec"]["taints"])
    other = await nodes.get("gpu-1")
    assert _ready(other)["status"] == "True" and not _managed_taints(other)

    await _fault(client, "gpu-0", None)

    async def healed():
        n = await nodes.get("gpu-0")
        return n if _ready(n)["status"] == "True" and not _managed_taints(n) else None

    await eventually(healed)


async def test_a_registering_kubelet_is_tainted_not_ready_until_the_controller_sees_it_ready():
    """TaintNodesByCondition admission (on, as in `nanokube up`) taints each new Node not-ready;
    the controller takes that off once it finds the node Ready."""
    s = await make_stack()
    s.rest.admission = Admission(s.rest)
    s.rest.admission.disable("ServiceAccount")
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    nodes = s.client.resource("", "v1", "nodes")
    ctl = NodeLifecycleController(s.client, clock, grace_period=50, monitor_period=5)
    try:
        registered = (await nodes.list())[0]
        assert registered and all(_ready(n)["status"] == "True" for n in registered)
        assert [_managed_taints(n) for n in registered] == [{(NOT_READY, "NoSchedule")}] * len(registered)
        await ctl.start()

        async def untainted():
            return all("taints" not in n["spec"] for n in (await nodes.list())[0])
        await eventually(untainted)
    finally:
        await ctl.stop()
        await mgr.stop()
        await s.close()


async def test_a_not_ready_kubelet_gets_the_not_ready_taint(cluster):
    client, _ = cluster
    nodes = client.resource("", "v1", "nodes")
    await _fault(client, "gpu-1", "not-ready")

    async def tainted():
        n = await nodes.get("gpu-1")
        return n if _managed_taints(n) else None

    n = await eventually(tainted)
    assert _ready(n)["status"] == "False" and _ready(n)["reason"] == "KubeletNotReady"
    assert _managed_taints(n) == {(NOT_READY, "NoExecute"), (NOT_READY, "NoSchedule")}


async def test_pressure_conditions_and_cordon_bring_their_no_schedule_taints(cluster):
    """TaintNodesByCondition: a True pressure condition and spec.unschedulable each taint NoSchedule."""
    client, _ = cluster
    nodes = client.resource("", "v1", "nodes")
    conditions = [{"type": "MemoryPressure", "status": "True", "reason": "KubeletHasInsufficientMemory"},
                  {"type": "DiskPressure", "status": "True", "reason": "KubeletHasDiskPressure"},
                  {"type": "PIDPressure", "status": "True", "reason": "KubeletHasInsufficientPID"},
                  {"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated"}]
    await nodes.patch("gpu-1", {"status": {"conditions": conditions}}, "application/strategic-merge-patch+json",
                      subresource="status")
    await nodes.patch("gpu-1", {"spec": {"unschedulable": True}})

    async def tainted():
        n = await nodes.get("gpu-1")
        return n if len(_managed_taints(n)) == 5 else None

    assert _managed_taints(await eventually(tainted)) == {
        ("node.kubernetes.io/memory-pressure", "NoSchedule"), ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/network-unavailable", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule")}
    await nodes.patch("gpu-1", {"spec": {"unschedulable": False}})

    async def uncordoned():
        n = await nodes.get("gpu-1")
        return n if ("node.kubernetes.io/unschedulable", "NoSchedule") not in _managed_taints(n) else None

    await eventually(uncordoned)


def test_toleration_seconds_takes_the_smallest_finite_matching_toleration():
    taint = {"key": UNREACHABLE, "effect": "NoExecute"}
    assert toleration_seconds(taint, []) == 0
    assert toleration_seconds(taint, [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]) == 0
    assert toleration_seconds(taint, [{"key": UNREACHABLE, "operator": "Exists"}]) is None
    assert toleration_seconds(taint, [{"key": UNREACHABLE, "operator": "Exists", "tolerationSeconds": 300},
                                      {"operator": "Exists", "tolerationSeconds": 60}]) == 60
    assert toleration_seconds(taint, [{"operator": "Exists", "tolerationSeconds": -5}]) == 0


def test_the_grace_period_comes_from_the_environment():
    assert options_from_env({}) == {}
    assert options_from_env({"NANOKUBE_NODE_MONITOR_GRACE": "5"}) == {"grace_period": 5.0, "monitor_period": 1.0}


def _pod(name: str, tolerations: list | None = None, node: str | None = "n1") -> dict:
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"]}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def test_pods_on_a_noexecute_node_are_evicted_after_their_toleration():
    s = await make_stack()
    clock = ManualClock()
    nodes, pods = s.client.resource("", "v1", "nodes"), s.client.resource("", "v1", "pods")
    await nodes.create({"metadata": {"name": "n1"}, "spec": {}})
    for p in (_pod("default-300s"), _pod("forever", [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]),
              _pod("short", [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}])):
        await pods.create(p)
    ctl = TaintEvictionController(s.client, clock)
    await ctl.start()
    try:
        await nodes.patch("n1", {"spec": {"taints": [
            {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": clock.rfc3339()}]}})
        await eventually(lambda: _true(len(clock._sleepers) >= 2))

        async def deleted(name):
            p = await pods.get(name, "default")
            return p if p["metadata"].get("deletionTimestamp") else None

        await clock.advance(59)
        assert not any([await deleted(x) for x in ("default-300s", "forever", "short")])
        await clock.advance(2)
        p = await eventually(lambda: deleted("short"))
        cond = next(c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (cond["status"], cond["reason"]) == ("True", "DeletionByTaintManager")
        # synced again before the informer shows the deletion: no second eviction
        stale = {**p, "metadata": {k: v for k, v in p["metadata"].items() if k != "deletionTimestamp"}}
        ctl.pods.store["default/short"] = stale
        await ctl.sync("default/short")
        assert not await deleted("default-300s")
        await clock.advance(240)
        await eventually(lambda: deleted("default-300s"))
        assert not await deleted("forever")

        async def evicted():
            events, _ = await s.client.resource("", "v1", "events").list("default")
            return sorted(e["involvedObject"]["name"] for e in events if e["reason"] == "TaintManagerEviction")
        await becomes(evicted, ["default-300s", "short"])
    finally:
        await ctl.stop()
        await s.close()


async def _true(v: bool) -> bool:
    return v


async def test_a_pod_arriving_on_a_tainted_node_is_given_its_toleration_from_then_and_a_lifted_taint_cancels():
    """Upstream's timed eviction counts tolerationSeconds from when the controller finds the pod on the
    tainted node, not from the taint's timeAdded: a pod bound to a node tainted long ago stays its 60 s
    (was: deleted at once). Each taint uses the pod's first matching toleration (here one without
    seconds: never evicted). Lifting the taint calls a scheduled deletion off with a "Cancelling
    deletion of Pod" event (was: silently)."""
    s = await make_stack()
    clock = ManualClock()
    nodes, pods, events = (s.client.resource("", "v1", r) for r in ("nodes", "pods", "events"))
    await nodes.create({"metadata": {"name": "n1"}, "spec": {"taints": [
        {"key": "maint", "effect": "NoExecute", "timeAdded": "2020-01-01T00:00:00Z"}]}})
    minute = [{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
    ctl = TaintEvictionController(s.client, clock)
    await ctl.start()

    def deleted(name):
        async def check():
            p = await pods.get(name, "default")
            return p if p["metadata"].get("deletionTimestamp") else None
        return check

    try:
        await pods.create(_pod("late", minute))
        await pods.create(_pod("first-match", [{"key": "maint", "operator": "Exists"}, *minute]))
        await eventually(lambda: _true(len(clock._sleepers) >= 1))
        await clock.advance(59)
        assert not await deleted("late")()
        await clock.advance(2)
        await eventually(deleted("late"))

        await pods.create(_pod("spared", minute))
        await eventually(lambda: _true(len(clock._sleepers) >= 1))
        await clock.advance(30)
        await nodes.patch("n1", {"spec": {"taints": None}})

        async def cancelled():
            items, _ = await events.list("default")
            return [(e["involvedObject"]["name"], e["message"]) for e in items
                    if e["reason"] == "TaintManagerEviction" and e["message"].startswith("Cancelling")]
        await becomes(cancelled, [("spared", "Cancelling deletion of Pod default/spared")])
        await clock.advance(60)
        assert not await deleted("spared")() and not await deleted("first-match")()
    finally:
        await ctl.stop()
        await s.close()


async def test_a_nodes_new_taint_queues_the_pods_on_it_from_the_shared_pod_informers_node_index():
    """getPodsAssignedToNode: the manager's one pod informer (no second, field-selected watch) and its
    spec.nodeName index give the pods of a node whose NoExecute taints changed; unscheduled pods and
    those elsewhere are not looked at."""
    s = await make_stack()
    clock = ManualClock()
    nodes, pods = s.client.resource("", "v1", "nodes"), s.client.resource("", "v1", "pods")
    for name in ("n1", "n2"):
        await nodes.create({"metadata": {"name": name}, "spec": {}})
    for p in (_pod("here"), _pod("there", node="n2"), _pod("pending", node=None)):
        await pods.create(p)
    factory = InformerFactory(clock)
    ctl = TaintEvictionController(s.client, clock, informers=factory)
    assert ctl.pods is factory.informer(pods)
    factory.start(ctl.informers())  # informers only: what the handlers queue stays queued
    try:
        for inf in ctl.informers():
            await inf.synced.wait()
        assert not len(ctl.queue)  # no node has NoExecute taints yet
        await nodes.patch("n1", {"spec": {"taints": [{"key": UNREACHABLE, "effect": "NoExecute"}]}})

        async def tainted():
            return bool(ctl.nodes.get("n1")["spec"].get("taints"))
        await eventually(tainted)
        queued = set()
        while len(ctl.queue):
            queued.add(await ctl.queue.get())
        assert queued == {"default/here"}
        assert [p["metadata"]["name"] for p in ctl.pods.by_index("spec.nodeName", "n1")] == ["here"]
    finally:
        await factory.stop()
        await s.close()


async def test_registered_and_removed_nodes_are_recorded_as_upstream_does(cluster):
    """RecordNodeEvent from node-controller: RegisteredNode for each node it first sees, RemovingNode
    once one is gone; Normal, on the Node by name and uid, in the default namespace."""
    client, _ = cluster
    nodes, events = client.resource("", "v1", "nodes"), client.resource("", "v1", "events")
    uid = {n: (await nodes.get(n))["metadata"]["uid"] for n in ("gpu-0", "gpu-1")}

    def by_reason(reason: str, count: int):
        async def found():
            got = [e for e in (await events.list(namespace="default"))[0] if e["reason"] == reason]
            return got if len(got) >= count else None
        return found

    registered = await eventually(by_reason("RegisteredNode", 2))
    assert sorted((e["involvedObject"]["name"], e["message"]) for e in registered) == [
        ("gpu-0", "Node gpu-0 event: Registered Node gpu-0 in Controller"),
        ("gpu-1", "Node gpu-1 event: Registered Node gpu-1 in Controller")]
    e = next(e for e in registered if e["involvedObject"]["name"] == "gpu-0")
    assert e["involvedObject"] == {"kind": "Node", "apiVersion": "v1", "name": "gpu-0", "uid": uid["gpu-0"]}
    assert (e["type"], e["source"], e["count"]) == ("Normal", {"component": "node-controller"}, 1)
    await nodes.delete("gpu-1")
    [removed] = await eventually(by_reason("RemovingNode", 1))
    assert (removed["involvedObject"]["uid"], removed["message"]) == (
        uid["gpu-1"], "Node gpu-1 event: Removing Node gpu-1 from Controller")


async def test_a_node_turned_unknown_has_its_pods_marked_not_ready_with_events(cluster):
    """monitorNodeHealth: once it turns a Ready node Unknown, RecordNodeStatusChange ('Node gpu-0
    status is now: NodeNotReady' on the Node) and MarkPodsNotReady (each pod's Ready condition False,
    then a NodeNotReady Warning 'Node is not ready' on it); pods on other nodes are left alone."""
    client, clock = cluster
    pods, events = client.resource("", "v1", "pods"), client.resource("", "v1", "events")
    for name, node in (("here", "gpu-0"), ("there", "gpu-1")):
        await pods.create({"metadata": {"name": name, "namespace": "default"},
                           "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox",
                                                                        "command": ["sleep", "infinity"]}]}})

    def ready(name, status):
        async def check():
            p = await pods.get(name, "default")
            c = next((c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), {})
            return p if c.get("status") == status else None
        return check
    was = await eventually(ready("here", "True"))
    await eventually(ready("there", "True"))
    await _fault(client, "gpu-0", "lease-stop")
    await _advance(clock, 70)
    p = await eventually(ready("here", "False"))
    [before, after] = [next(c for c in q["status"]["conditions"] if c["type"] == "Ready") for q in (was, p)]
    assert after == {**before, "status": "False", "lastTransitionTime": after["lastTransitionTime"]}
    assert after["lastTransitionTime"] > before["lastTransitionTime"]
    assert (await eventually(ready("there", "True")))

    async def not_ready_events():
        items, _ = await events.list(namespace="default")
        got = [e for e in items if e["reason"] == "NodeNotReady" and e["source"] == {"component": "node-controller"}]
        return got if len(got) == 2 else None
    by_kind = {e["involvedObject"]["kind"]: e for e in await eventually(not_ready_events)}
    node_uid = (await client.resource("", "v1", "nodes").get("gpu-0"))["metadata"]["uid"]
    assert (by_kind["Node"]["type"], by_kind["Node"]["message"], by_kind["Node"]["involvedObject"]["uid"]) == (
        "Normal", "Node gpu-0 status is now: NodeNotReady", node_uid)
    assert (by_kind["Pod"]["type"], by_kind["Pod"]["message"], by_kind["Pod"]["involvedObject"]["name"]) == (
        "Warning", "Node is not ready", "here")

    await _fault(client, "gpu-0", None)  # the kubelet speaks again: its pod's status is written again
    await eventually(ready("here", "True"))


def _no_execute(node: dict) -> set:
    return {t["key"] for t in node["spec"].get("taints") or [] if t["effect"] == "NoExecute"}


async def _silence(client, clock: ManualClock, names: tuple[str, ...], seconds: int) -> None:
    """Stop the nodes' leases together, then let `seconds` pass."""
    for name in names:
        await _fault(client, name, "lease-stop")
    await _advance(clock, seconds)


async def test_when_every_node_goes_quiet_none_is_tainted_no_execute_until_one_returns(cluster):
    """handleDisruption's master disruption mode: every zone fully disrupted reads as the control
    plane's fault, so no NoExecute taint evicts the cluster's pods (was: both nodes tainted, every
    pod evicted 300 s later); the nodes are still Unknown and NoSchedule-tainted. Once one node is
    Ready again the other, still Unknown, gets its NoExecute taint."""
    client, clock = cluster
    nodes = client.resource("", "v1", "nodes")
    await _silence(client, clock, ("gpu-0", "gpu-1"), 70)

    async def quiet():
        got = [await nodes.get(name) for name in ("gpu-0", "gpu-1")]
        ok = all(_ready(n)["status"] == "Unknown" and _managed_taints(n) == {(UNREACHABLE, "NoSchedule")} for n in got)
        return got if ok else None

    await eventually(quiet)
    await _advance(clock, 30)
    assert await quiet(), "no NoExecute taint comes back while every node is down"

    await _fault(client, "gpu-0", None)

    async def tainted():
        n = await nodes.get("gpu-1")
        return n if _no_execute(n) == {UNREACHABLE} else None

    await eventually(tainted)
    assert _ready(await nodes.get("gpu-0"))["status"] == "True" and not _no_execute(await nodes.get("gpu-0"))


ZONES = """
pools:
  - {name: a, count: 4, capacity: {cpu: "4", memory: 8Gi, pods: "10"}, topology: {zone: zone-a}}
  - {name: b, count: 1, capacity: {cpu: "4", memory: 8Gi, pods: "10"}, topology: {zone: zone-b}}
"""


async def test_a_small_zone_mostly_down_adds_no_new_no_execute_taint():
    """A zone with more than two nodes and at least 55% of them down is partially disrupted, and at 50
    nodes or fewer its NoExecute limiter stops (ReducedQPSFunc): a third node of four going quiet is
    not tainted NoExecute, those tainted before keep theirs; once the zone is back to normal it is."""
    async with _nodes(parse_cluster(ZONES)) as (client, clock):
        nodes = client.resource("", "v1", "nodes")

        async def state(name):
            n = await nodes.get(name)
            return _ready(n)["status"], _no_execute(n)

        async def reads(name, want):
            async def check():
                got = await state(name)
                return got if got == want else None
            return await eventually(check)

        await _silence(client, clock, ("a-0", "a-1"), 70)
        for name in ("a-0", "a-1"):
            await reads(name, ("Unknown", {UNREACHABLE}))
        await _silence(client, clock, ("a-2",), 70)
        await reads("a-2", ("Unknown", set()))
        await _advance(clock, 30)
        assert await state("a-2") == ("Unknown", set())
        assert (await nodes.get("a-2"))["spec"]["taints"][0]["key"] == UNREACHABLE  # (NoSchedule)
        assert await state("a-0") == ("Unknown", {UNREACHABLE})

        await _fault(client, "a-0", None)
        await reads("a-0", ("True", set()))
        await reads("a-2", ("Unknown", {UNREACHABLE}))


async def test_a_zone_taints_one_more_node_no_execute_every_ten_seconds():
    """--node-eviction-rate 0.1 with a burst of one: of two nodes of a zone that go quiet together, one
    is tainted NoExecute at once and the other ten seconds later (was: both at once)."""
    async with _nodes(parse_cluster(ZONES)) as (client, clock):
        nodes = client.resource("", "v1", "nodes")
        await _silence(client, clock, ("a-0", "a-1"), 100)

        async def added():
            got = [await nodes.get(name) for name in ("a-0", "a-1")]
            times = [t["timeAdded"] for n in got for t in n["spec"].get("taints") or () if t["effect"] == "NoExecute"]
            return sorted(times) if len(times) == 2 else None

        first, second = [parse_time(t) for t in await eventually(added)]
        assert second - first == 10
