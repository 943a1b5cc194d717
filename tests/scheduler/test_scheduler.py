"""End to end over the in-process API server: pods created through the
client are bound by the scheduler, or get FailedScheduling and
PodScheduled=False."""

import gc
import warnings

import pytest
from prometheus_client import generate_latest

from tests.controllers import becomes, eventually
from tests.scheduler import node, pod


@pytest.fixture
async def env(stack):
    client, sched = stack
    for n in (node("big", "4", "8Gi", labels={"zone": "a"}), node("small", "1", "2Gi", labels={"zone": "b"}),
              node("tainted", "8", "16Gi", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])):
        await add_node(client, n)
    await sched.start()
    return stack


async def add_node(client, n):
    """Creates a node, then writes its status (create drops status, as upstream)."""
    nodes = client.resource("", "v1", "nodes")
    created = await nodes.create(n)
    await nodes.update({**created, "status": n["status"]}, subresource="status")


def bound(pods, name):
    async def check():
        return (await pods.get(name, "default"))["spec"].get("nodeName")
    return check


def strip_uid(p):
    del p["metadata"]["uid"]
    return p


async def test_pods_land_where_resources_taints_and_affinity_allow(env):
    client, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("needs-3-cpu", "3")))
    await pods.create(strip_uid(pod("zone-b", nodeSelector={"zone": "b"})))
    tol = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    await pods.create(strip_uid(pod("needs-6-cpu", "6", tolerations=tol)))
    assert await eventually(bound(pods, "needs-3-cpu")) == "big"
    assert await eventually(bound(pods, "zone-b")) == "small"
    assert await eventually(bound(pods, "needs-6-cpu")) == "tainted"
    p = await pods.get("needs-3-cpu", "default")
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in p["status"]["conditions"])

    async def assigned():  # the scheduler writes its Events from a queue, maybe after the binding
        items, _ = await client.resource("", "v1", "events").list("default")
        return "Successfully assigned default/zone-b to small" in {e["message"] for e in items if e["reason"] == "Scheduled"}
    assert await eventually(assigned)


async def test_unschedulable_pod_gets_event_and_condition_then_fits_a_new_node(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("huge", "5")))

    async def condition():
        c = [c for c in (await pods.get("huge", "default")).get("status", {}).get("conditions", [])
             if c["type"] == "PodScheduled"]
        return c and c[0]["status"] == "False" and c[0]

    cond = await eventually(condition)
    # 5 CPUs are more than either untainted node has at all: evicting pods cannot help there (upstream's
    # Unresolvable insufficient resource), so no node is a preemption candidate
    msg = ("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
           "2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert cond["reason"] == "Unschedulable" and cond["message"] == msg
    # the generation it was judged at, as upstream's handleSchedulingFailure writes it (PodObservedGenerationTracking)
    assert cond["observedGeneration"] == 1

    async def failed_scheduling():  # the broadcaster writes it from its queue, maybe after the condition
        items, _ = await client.resource("", "v1", "events").list("default")
        return any(e["reason"] == "FailedScheduling" and e["message"] == msg and e["type"] == "Warning" for e in items)
    assert await eventually(failed_scheduling)
    await add_node(client, node("bigger", "16", "64Gi"))
    await eventually(lambda: _true("default/huge" not in sched.queue.unschedulable))
    metrics = generate_latest(sched.metrics.registry).decode()
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"}' in metrics


async def test_assumed_pods_count_against_the_node(env):
    client, _ = env
    pods = client.resource("", "v1", "pods")
    for i in range(3):
        await pods.create(strip_uid(pod(f"p{i}", "2", nodeSelector={"zone": "a"})))
    got = [await eventually(bound(pods, f"p{i}")) if i < 2 else None for i in range(3)]
    assert got[:2] == ["big", "big"]
    p2 = await pods.get("p2", "default")
    assert not p2["spec"].get("nodeName")


async def test_gated_pod_is_scheduled_once_gates_are_removed(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("gated", schedulingGates=[{"name": "example.com/wait"}])))
    await eventually(lambda: _true(sched.queue.unschedulable.get("default/gated")))
    assert not (await pods.get("gated", "default"))["spec"].get("nodeName")
    await pods.patch("gated", {"spec": {"schedulingGates": None}}, namespace="default")
    assert await eventually(bound(pods, "gated"))


async def _true(v):
    return v


def _web_affinity():
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


async def _parked(sched, key):
    async def check():
        return key in sched.queue.unschedulable
    await eventually(check)


async def test_pod_waiting_for_affinity_is_requeued_when_a_matching_pod_gets_bound(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("follower", affinity=_web_affinity())))
    await _parked(sched, "default/follower")
    assert "InterPodAffinity" in sched.queue.unschedulable["default/follower"].unschedulable_plugins
    web = strip_uid(pod("web", nodeSelector={"zone": "b"}))
    web["metadata"]["labels"] = {"app": "web"}
    await pods.create(web)
    assert await eventually(bound(pods, "web")) == "small"
    assert await eventually(bound(pods, "follower")) == "small"
    metrics = generate_latest(sched.metrics.registry).decode()
    assert 'event="AssignedPodAdd"' in metrics


async def test_label_change_of_an_assigned_pod_requeues_a_pod_waiting_for_affinity(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("web", nodeName="big")))
    await pods.create(strip_uid(pod("follower", affinity=_web_affinity())))
    await _parked(sched, "default/follower")
    await pods.patch("web", {"metadata": {"labels": {"app": "web"}}}, namespace="default")
    assert await eventually(bound(pods, "follower")) == "big"
    assert 'event="PodLabelChange"' in generate_latest(sched.metrics.registry).decode()


async def test_pod_blocked_by_a_taint_is_requeued_when_the_taint_is_removed(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("needs-6-cpu", "6")))
    await _parked(sched, "default/needs-6-cpu")
    assert "TaintToleration" in sched.queue.unschedulable["default/needs-6-cpu"].unschedulable_plugins
    await client.resource("", "v1", "nodes").patch("tainted", {"spec": {"taints": None}})
    assert await eventually(bound(pods, "needs-6-cpu")) == "tainted"
    assert 'event="NodeTaintChange"' in generate_latest(sched.metrics.registry).decode()


async def test_failure_reports_share_a_bounded_pool_of_reporters(env):
    """More pods fail at once than there are reporters: each still gets its FailedScheduling Event
    and PodScheduled=False, written by at most REPORTERS tasks, and a stop with reports queued
    leaves none of them unawaited."""
    from nanokube.scheduler.scheduler import REPORTERS

    client, sched = env
    pods = client.resource("", "v1", "pods")
    n = REPORTERS * 3
    for i in range(n):
        await pods.create(strip_uid(pod(f"nowhere-{i}", nodeSelector={"zone": "nowhere"})))

    async def reported():
        items, _ = await pods.list("default")
        return sum(1 for p in items for c in (p.get("status") or {}).get("conditions") or []
                   if c["type"] == "PodScheduled" and c["status"] == "False") == n

    assert await eventually(reported)
    assert 0 < len(sched._reporters) <= REPORTERS

    async def all_idle():
        return len(sched._idle) == len(sched._reporters)

    # idle reporters wait apart from the background writes, which all end: a wait for those returns
    assert await eventually(all_idle)
    assert sched._reporters.isdisjoint(sched._binds)
    assert [t for t in sched._binds if not t.done()] == []

    async def failed_scheduling():  # the broadcaster writes them from its queue, maybe after the conditions
        items, _ = await client.resource("events.k8s.io", "v1", "events").list("default")
        return {e["regarding"]["name"] for e in items if e["reason"] == "FailedScheduling"}
    assert await becomes(failed_scheduling, {f"nowhere-{i}" for i in range(n)})
    # reports still queued at the stop, each with an Event to write: dropped, none left unawaited
    # (a queued coroutine made its Event's write at once, and the stop dropped that unawaited)
    gone = [{"metadata": {"name": f"gone-{i}", "namespace": "default", "uid": f"g{i}"}} for i in range(3)]
    queued = [(sched.api.record_event(p, "Warning", "FailedScheduling", "x"), p, "Unschedulable", "x", False)
              for p in gone]
    assert all(isinstance(r[0], dict) for r in queued)
    sched._submit(queued[0])
    sched._reports.extend(queued[1:])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await sched.stop()
        del queued
        gc.collect()
    assert not sched._reports and not sched._reporters
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
