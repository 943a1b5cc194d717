"""A cluster with a queue of pods that fit nowhere stays cheap (issue 19): a nodeSelector no node
carries is answered from the label index without visiting nodes, preemption is not tried where it
cannot help, the pending pod waits for an event that may help (not for a timer), its PodScheduled=False
condition is written once per distinct message, and its repeated FailedScheduling events fold
into one Event's series, counted in memory between the recorder's periodic writes."""

import asyncio

import pytest

from types import SimpleNamespace

from nanokube.clock import VirtualClock
from nanokube.scheduler.cache import Cache, Snapshot
from nanokube.scheduler.cycle import Algorithm, FitError
from nanokube.scheduler.framework import ASSIGNED_POD, NODE, Action, ClusterEvent, CycleState, Framework, PodInfo, Profile
from nanokube.scheduler.metrics import Metrics
from nanokube.scheduler.plugins.node_affinity import NodeAffinity
from nanokube.scheduler.plugins.priority_sort import PrioritySort
from nanokube.scheduler.queue import UnschedulablePods
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack, settled
from tests.scheduler import FakeClock, node, pod
from tests.scheduler.test_queue import make_queue
from tests.scheduler.test_scheduler import add_node, bound, strip_uid


@pytest.fixture
async def env(stack):
    client, sched = stack
    for i in range(20):
        await add_node(client, node(f"n{i}", "4", "8Gi", labels={"pool": "cpu"}))
    await sched.start()
    return stack


def test_label_index_follows_node_changes():
    cache, snap = Cache(), Snapshot()
    cache.add_node(node("a", labels={"pool": "gpu", "zone": "x"}))
    cache.add_node(node("b", labels={"pool": "gpu", "zone": "y"}))
    cache.update_snapshot(snap)
    assert snap.nodes_with_labels({"pool": "gpu"}) == {"a", "b"}
    assert snap.nodes_with_labels({"pool": "gpu", "zone": "y"}) == {"b"}
    assert snap.nodes_with_labels({"pool": "none"}) == set()
    cache.update_node(node("b", labels={"pool": "cpu", "zone": "y"}))
    cache.remove_node("a")
    cache.update_snapshot(snap)
    assert snap.nodes_with_labels({"pool": "gpu"}) == set()
    assert snap.nodes_with_labels({"pool": "cpu"}) == {"b"}
    assert "gpu" not in snap.label_index["pool"]


class _Recorder:
    """A PreFilter plugin after NodeAffinity that records the pods it saw."""

    name = "Recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def pre_filter(self, state, info):
        self.seen.append(info.pod["metadata"]["name"])
        return None, None


def test_pre_filter_stops_once_no_node_is_left():
    """As upstream's RunPreFilterPlugins: once the narrowed nodes are none, the later PreFilter
    plugins do not run, and the message still reads as if Filter had rejected every node."""
    cache, handle = Cache(), SimpleNamespace(snapshot=Snapshot())
    for i in range(3):
        cache.add_node(node(f"n{i}", labels={"pool": "cpu"}))
    cache.update_snapshot(handle.snapshot)
    recorder = _Recorder()
    plugins = [PrioritySort({}, None), NodeAffinity({}, handle), recorder]
    fwk = Framework(Profile(plugins=[p.name for p in plugins]), plugins, Metrics(), FakeClock())
    alg = Algorithm()
    alg.next_start = 2
    with pytest.raises(FitError) as e:
        alg.find_nodes(fwk, CycleState(), PodInfo(pod("nowhere", nodeSelector={"pool": "gpu"}), 0.0), handle.snapshot)
    assert str(e.value) == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    assert e.value.plugins() == {"NodeAffinity"}
    assert alg.next_start == 0  # as a search of no nodes leaves it: the next pod's search starts at the first node
    found = alg.find_nodes(fwk, CycleState(), PodInfo(pod("cpu-job", nodeSelector={"pool": "cpu"}), 0.0),
                           handle.snapshot)
    assert len(found) == 3 and recorder.seen == ["cpu-job"]


async def test_selector_mismatch_is_answered_without_filtering_or_preemption(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    visited = []
    affinity = sched.frameworks["default-scheduler"].plugins["NodeAffinity"]
    original = affinity.filter_nodes
    affinity.filter_nodes = lambda state, info, nodes: visited.append(len(nodes)) or original(state, info, nodes)
    preemption = sched.frameworks["default-scheduler"].plugins["DefaultPreemption"]
    preemption._select_victims = lambda *a: pytest.fail("preemption looked for victims for a selector mismatch")
    await pods.create(strip_uid(pod("nowhere", nodeSelector={"pool": "gpu"})))

    async def condition():
        p = await pods.get("nowhere", "default")
        return next((c for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)

    cond = await eventually(condition)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == ("0/20 nodes are available: 20 node(s) didn't match Pod's node affinity/selector. "
                               "preemption: 0/20 nodes are available: 20 Preemption is not helpful for scheduling.")
    assert visited == []


async def test_pending_pod_waits_for_a_matching_node_and_binds_within_a_second():
    """The node's event alone brings the pod back: on a VirtualClock that the test does not move
    once the pod's backoff is over, it binds with no timer falling due (in 0 s of the scheduler's time)."""
    s = await make_stack()
    clock = VirtualClock()
    sched = Scheduler(s.client, clock=clock, seed=1)
    client, pods = s.client, s.client.resource("", "v1", "pods")
    for i in range(20):
        await add_node(client, node(f"n{i}", "4", "8Gi", labels={"pool": "cpu"}))
    await sched.start()
    try:
        await pods.create(strip_uid(pod("gpu-job", nodeSelector={"pool": "gpu"})))
        await settled(clock, lambda: _condition_written(pods, "gpu-job"))
        assert "default/gpu-job" in sched.queue.unschedulable
        # unrelated events: pods bound elsewhere, a node without the label
        for i in range(5):
            await pods.create(strip_uid(pod(f"filler-{i}")))
            await settled(clock, bound(pods, f"filler-{i}"))
        await add_node(client, node("plain", "4", "8Gi", labels={"pool": "cpu"}))
        await settled(clock, lambda: _node_seen(sched, "plain"))
        assert "default/gpu-job" in sched.queue.unschedulable
        info = sched.queue.unschedulable["default/gpu-job"]
        attempts = info.attempts
        # a pod pending for a while: its backoff has run out, so the event alone brings it back
        await clock.advance(max(0.0, info.backoff_expires - clock.monotonic()) + 0.05)
        t0 = clock.monotonic()
        await add_node(client, node("gpu-1", "4", "8Gi", labels={"pool": "gpu"}))
        assert await settled(clock, bound(pods, "gpu-job")) == "gpu-1"
        assert clock.monotonic() == t0
        assert attempts == 1
    finally:
        await sched.stop()
        await s.close()


async def test_repeated_failures_fold_into_one_event_series_without_a_write_per_attempt(env):
    """As client-go's events recorder: the first attempt's Event regards the pod before its
    PodScheduled=False patch; the next one's regards the patched pod (another resourceVersion,
    so another Event); from then on the same report is one Event whose series the first repeat
    writes, later ones only count until the periodic refresh writes the count."""
    client, sched = env
    pods = client.resource("", "v1", "pods")
    events = client.resource("events.k8s.io", "v1", "events")
    await pods.create(strip_uid(pod("too-big", "16")))
    await eventually(lambda: _condition_written(pods, "too-big"))
    info = sched.queue.unschedulable["default/too-big"]
    await eventually(lambda: _true(_scheduled_condition(info.pod) is not None))  # the patched pod is queued

    async def retry():  # a node changing in a way that might have helped: the same failure again
        sched.queue.on_event(ClusterEvent(NODE, Action.ADD, "NodeAdd"), None, node("ghost", "32", "64Gi"))
        info.backoff_expires = 0
        sched.queue.flush_backoff_completed()
        await eventually(lambda: _back_in_pool(sched, "default/too-big", info))

    for _ in range(2):
        await retry()

    async def series_written():  # each Event is written on a task of its own: the series' after the create, maybe
        found = await _failed_events(events, "too-big", 2)
        return found if found and any("series" in e for e in found) else None
    first, series = await eventually(series_written)
    assert "series" not in first and series["series"]["count"] == 2
    assert first["regarding"]["resourceVersion"] != series["regarding"]["resourceVersion"]
    written = series["metadata"]["resourceVersion"]
    for _ in range(3):
        await retry()
    assert info.attempts == 6
    _, unchanged = await _failed_events(events, "too-big", 2)
    assert unchanged["metadata"]["resourceVersion"] == written  # counted in memory only
    await sched.api.broadcaster.refresh()
    _, refreshed = await _failed_events(events, "too-big", 2)
    assert refreshed["series"]["count"] == 5 and refreshed["note"] == first["note"]
    # a node big enough but tainted: the condition takes the new message, and the next attempt
    # (about the pod it patched) records it as a new Event
    await add_node(client, node("tainted", "32", "64Gi", taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}]))
    await eventually(lambda: _true("taint" in (_scheduled_condition(info.pod) or {}).get("message", "")))
    await eventually(lambda: _back_in_pool(sched, "default/too-big", info))
    await retry()
    *_, latest = await eventually(lambda: _failed_events(events, "too-big", 3))
    assert "taint" in latest["note"]


def _scheduled_condition(p: dict) -> dict | None:
    return next((c for c in p["status"].get("conditions") or [] if c["type"] == "PodScheduled"), None)


async def _failed_events(events, name: str, n: int) -> list[dict] | None:
    """The pod's FailedScheduling Events by creation, once there are `n`."""
    items, _ = await events.list("default")
    found = [e for e in items if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == name]
    return sorted(found, key=lambda e: e["eventTime"]) if len(found) == n else None


def _attempts(sched) -> float:
    return sched.metrics.registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": "unschedulable", "profile": "default-scheduler"}) or 0


def _incoming(sched, event) -> float:
    return sum(sched.metrics.registry.get_sample_value("scheduler_queue_incoming_pods_total",
                                                       {"queue": q, "event": event}) or 0 for q in ("active", "backoff"))


async def _parked_after_one_attempt(sched, pods, name):
    await eventually(lambda: _condition_written(pods, name))
    info = await eventually(lambda: _in_pool(sched, f"default/{name}"))
    info.backoff_expires = 0  # a move now would retry it at once
    return info


async def _in_pool(sched, key):
    return key not in sched.queue.in_flight and sched.queue.unschedulable.get(key)


async def test_a_pending_pods_own_label_and_status_changes_do_not_retry_it(env):
    """Upstream's Update with queueing hints: the pod's label change is an UnscheduledPod
    UpdatePodLabel event no rejecting plugin (NodeAffinity) asks for, and a status write (like
    the scheduler's own PodScheduled=False patch) is no event for any plugin."""
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("gpu-job", nodeSelector={"pool": "gpu"})))
    info = await _parked_after_one_attempt(sched, pods, "gpu-job")
    await pods.patch("gpu-job", {"metadata": {"labels": {"team": "a"}}}, namespace="default")
    await pods.patch("gpu-job", {"status": {"conditions": [{"type": "example.com/Checked", "status": "True"}]}},
                     namespace="default", subresource="status")

    async def both_seen():
        p = info.pod
        return p["metadata"].get("labels") == {"team": "a"} and any(
            c["type"] == "example.com/Checked" for c in p["status"].get("conditions") or [])

    await eventually(both_seen)
    assert sched.queue.unschedulable.get("default/gpu-job") is info
    assert info.attempts == 1 and _attempts(sched) == 1
    assert _incoming(sched, "PodLabelChange") == _incoming(sched, "PodUpdate") == 0
    await add_node(client, node("gpu-1", "4", "8Gi", labels={"pool": "gpu"}))
    assert await eventually(bound(pods, "gpu-job")) == "gpu-1"


async def test_a_pending_pod_is_retried_when_it_gets_the_toleration_it_lacked(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    await add_node(client, node("gpu-1", "4", "8Gi", labels={"pool": "gpu"}, taints=[taint]))
    await eventually(lambda: _node_seen(sched, "gpu-1"))
    await pods.create(strip_uid(pod("gpu-job", nodeSelector={"pool": "gpu"})))
    info = await _parked_after_one_attempt(sched, pods, "gpu-job")
    assert info.unschedulable_plugins == {"NodeAffinity", "TaintToleration"}
    p = await pods.get("gpu-job", "default")
    tolerations = [*(p["spec"].get("tolerations") or []), {**taint, "operator": "Equal"}]
    await pods.update({**p, "spec": {**p["spec"], "tolerations": tolerations}})
    assert await eventually(bound(pods, "gpu-job")) == "gpu-1"
    assert _incoming(sched, "PodTolerationChange") == 1 and _attempts(sched) == 1


async def test_node_updates_that_cannot_help_leave_a_pending_pod_waiting(env):
    """A heartbeat, an annotation, a label a matching node gains and a label that still does not
    match are no reason to retry a pod NodeAffinity and NodeResourcesFit turned away; a node's
    labels coming to match its selector are."""
    client, sched = env
    pods, nodes = client.resource("", "v1", "pods"), client.resource("", "v1", "nodes")
    await add_node(client, node("gpu-small", "1", "8Gi", labels={"pool": "gpu"}))
    await eventually(lambda: _node_seen(sched, "gpu-small"))
    await pods.create(strip_uid(pod("gpu-job", "2", nodeSelector={"pool": "gpu"})))
    info = await _parked_after_one_attempt(sched, pods, "gpu-job")
    assert info.unschedulable_plugins == {"NodeAffinity", "NodeResourcesFit"}
    n0 = await nodes.get("n0")
    ready = {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
    n0 = await nodes.update({**n0, "status": {**n0["status"], "conditions": [ready]}}, subresource="status")
    await nodes.update({**n0, "status": {**n0["status"], "conditions": [
        {**ready, "lastHeartbeatTime": "2026-01-01T00:00:40Z"}]}}, subresource="status")
    await nodes.patch("n0", {"metadata": {"annotations": {"example.com/seen": "yes"}}})
    await nodes.patch("n1", {"metadata": {"labels": {"pool": "fpga"}}})
    await nodes.patch("gpu-small", {"metadata": {"labels": {"rack": "r1"}}})
    await eventually(lambda: _true(sched.cache.infos["gpu-small"].labels.get("rack") == "r1"))
    assert sched.queue.unschedulable.get("default/gpu-job") is info
    assert info.attempts == 1 and _attempts(sched) == 1
    await nodes.patch("n0", {"metadata": {"labels": {"pool": "gpu"}}})
    assert await eventually(bound(pods, "gpu-job")) == "n0"
    assert _incoming(sched, "NodeLabelChange") == 1


async def test_a_node_event_asks_node_affinitys_hint_only_of_the_pods_its_labels_could_satisfy(env):
    """The pending pods are indexed by one nodeSelector pair (affinity-only pods apart), so a
    joining node that carries none of the pairs costs no hint call per pending pod; the pods
    whose selector it satisfies are retried and bound."""
    client, sched = env
    pods = client.resource("", "v1", "pods")
    tpu = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["tpu"]}]}]}}}
    await pods.create(strip_uid(pod("gpu-a", nodeSelector={"pool": "gpu"})))
    await pods.create(strip_uid(pod("gpu-b", nodeSelector={"pool": "gpu", "zone": "z1"})))
    await pods.create(strip_uid(pod("fpga", nodeSelector={"pool": "fpga"})))
    await pods.create(strip_uid(pod("tpu", affinity=tpu)))
    for name in ("gpu-a", "gpu-b", "fpga", "tpu"):
        await _parked_after_one_attempt(sched, pods, name)
    pending = sched.frameworks["default-scheduler"].plugins["NodeAffinity"].pending
    assert pending.targets(None, node("x", labels={"pool": "cpu"})) == {"default/tpu"}
    assert pending.targets(None, node("x", labels={"pool": "gpu", "zone": "z1"})) == {
        "default/gpu-a", "default/gpu-b", "default/tpu"}
    asked = []
    hint = next(r.hint for r in sched.queue.registrations["NodeAffinity"] if r.event.resource == NODE)
    for r in sched.queue.registrations["NodeAffinity"]:
        r.hint = lambda p, old, new: asked.append(p["metadata"]["name"]) or hint(p, old, new)
    await add_node(client, node("plain", labels={"pool": "cpu"}))
    await eventually(lambda: _node_seen(sched, "plain"))
    assert asked == ["tpu"]
    await add_node(client, node("gpu-1", labels={"pool": "gpu", "zone": "z1"}))
    assert await eventually(bound(pods, "gpu-a")) == await eventually(bound(pods, "gpu-b")) == "gpu-1"
    assert pending.targets(None, node("x", labels={"pool": "gpu", "zone": "z1"})) == {"default/tpu"}
    assert sorted(asked) == ["gpu-a", "gpu-b", "tpu", "tpu"]


async def _true(v):
    return v


async def _condition_written(pods, name):
    p = await pods.get(name, "default")
    return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in (p.get("status") or {}).get("conditions") or [])


async def _node_seen(sched, name):
    return name in sched.cache.infos


async def _back_in_pool(sched, key, info):
    return key in sched.queue.unschedulable and key not in sched.queue.in_flight


def test_an_event_visits_only_the_pods_its_plugins_rejected():
    q, _ = make_queue()
    q.add(pod("selector", nodeSelector={"pool": "gpu"}))
    q.add(pod("big", "64"))

    async def fail_both():
        a = await q.pop()
        b = await q.pop()
        a.unschedulable_plugins = {"NodeAffinity"} if a.key == "default/selector" else {"NodeResourcesFit"}
        b.unschedulable_plugins = {"NodeAffinity"} if b.key == "default/selector" else {"NodeResourcesFit"}
        q.add_unschedulable(a)
        q.add_unschedulable(b)

    asyncio.run(fail_both())
    assert [i.key for i in q.unschedulable.rejected_by(("NodeResourcesFit",))] == ["default/big"]
    q.on_event(ClusterEvent(ASSIGNED_POD, Action.DELETE, "AssignedPodDelete"), pod("x", "1"), None)
    assert "default/selector" in q.unschedulable and "default/big" not in q.unschedulable


def test_the_pods_an_event_concerns_come_in_arrival_order_without_the_others():
    pool = UnschedulablePods()
    infos = []
    for i in range(200):
        info = PodInfo(pod(f"p{i}"), 0.0)
        info.unschedulable_plugins = {"NodeResourcesFit"} if i % 50 == 7 else {"NodeAffinity"}
        pool[info.key] = info
        infos.append(info)
    assert pool.rejected_by(("InterPodAffinity",)) == []
    assert [i.key for i in pool.rejected_by(("NodeResourcesFit",))] == [
        "default/p7", "default/p57", "default/p107", "default/p157"]
    del pool["default/p57"]
    pool[infos[57].key] = infos[57]  # back in the pool: last in arrival order
    pool[infos[107].key] = infos[107]  # set again while in it: keeps its place
    assert [i.key for i in pool.rejected_by(("NodeResourcesFit",))] == [
        "default/p7", "default/p107", "default/p157", "default/p57"]
    assert [i.key for i in pool.rejected_by(("NodeAffinity", "NodeResourcesFit"))] == list(pool)


def test_pods_gated_in_pre_enqueue_are_kept_apart_from_those_an_event_may_move():
    pool = UnschedulablePods()
    for i in range(6):
        info = PodInfo(pod(f"p{i}"), 0.0)
        info.unschedulable_plugins = {"DynamicResources"}
        info.gated_by = "DynamicResources" if i % 2 else ""
        pool[info.key] = info
    assert [i.key for i in pool.rejected_by(("DynamicResources",))] == ["default/p0", "default/p2", "default/p4"]
    assert [i.key for i in pool.rejected_by(("DynamicResources",), gated=True)] == [
        "default/p1", "default/p3", "default/p5"]
    gated = pool.pop("default/p3")
    gated.gated_by = ""  # admitted, then rejected in a scheduling attempt
    pool[gated.key] = gated
    assert [i.key for i in pool.rejected_by(("DynamicResources",), gated=True)] == ["default/p1", "default/p5"]
    assert [i.key for i in pool.rejected_by(("DynamicResources",))][-1] == "default/p3"
    assert pool.gated == 2
