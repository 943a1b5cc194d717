"""A pod that fits nowhere is retried every 5 minutes (the unschedulable pods' flush) and on
cluster events; a retry over a cluster where nothing it depends on changed repeats the last
attempt's outcome instead of filtering every node and looking for preemption victims again:
same FailedScheduling message, same rejecting plugins, preemption attempts counted as before.
Anything the scheduler hears (a node, a pod bound, a claim...) makes the next retry run in full,
so it binds, or preempts, as soon as it can."""

import asyncio

import pytest

from nanokube.clock import VirtualClock
from nanokube.scheduler import plugins
from nanokube.scheduler.cycle import Algorithm, FitError
from nanokube.scheduler.framework import CycleState, PodInfo, Profile
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import make_stack, settled
from tests.scheduler import add_priority_classes, node, pod
from tests.scheduler.test_cycle import framework, snapshot
from tests.scheduler.test_default_preemption import pending, running
from tests.scheduler.test_pending_queue import _attempts, _condition_written
from tests.scheduler.test_scheduler import add_node, bound, strip_uid

FLUSH = 331.0  # past a pod's 5 minutes in the unschedulable pool, at the flusher's next 30 s tick


class FilterCounter:
    """A Filter plugin, first in the profile, that lets every node through and counts them."""

    name = "FilterCounter"

    def __init__(self, args, handle) -> None:
        self.nodes: list[str] = []

    def filter(self, state, info, node):
        self.nodes.append(node.name)
        return None


@pytest.fixture
async def cluster(monkeypatch):
    """(client, scheduler on a VirtualClock with FilterCounter before the default plugins, clock)."""
    monkeypatch.setitem(plugins.REGISTRY, FilterCounter.name, FilterCounter)
    s = await make_stack()
    await add_priority_classes(s.client)
    clock = VirtualClock()
    profile = Profile("default-scheduler", [FilterCounter.name, *plugins.DEFAULT_PLUGINS], dict(plugins.DEFAULT_WEIGHTS))
    sched = Scheduler(s.client, clock=clock, seed=1, profiles=[profile])
    yield s.client, sched, clock
    await sched.stop()
    await s.close()


def _counter(sched) -> FilterCounter:
    return sched.frameworks["default-scheduler"].plugins[FilterCounter.name]


async def _attempt(sched, clock, n: int, advance: float = 0.0) -> None:
    """Moves virtual time on by `advance`, then waits until the scheduler has made `n` failed attempts
    and the pod is back in the unschedulable pool."""
    await clock.advance(advance)

    async def done():
        return _attempts(sched) == n and not sched.queue.in_flight and bool(sched.queue.unschedulable)
    await settled(clock, done)


async def test_a_retry_over_an_unchanged_cluster_filters_no_node_and_a_new_node_that_fits_binds(cluster):
    client, sched, clock = cluster
    pods = client.resource("", "v1", "pods")
    for i in range(3):
        await add_node(client, node(f"n{i}", "4", "8Gi"))
    await sched.start()
    await pods.create(strip_uid(pod("too-big", "16")))
    await settled(clock, lambda: _condition_written(pods, "too-big"))
    await _attempt(sched, clock, 1)
    # the scheduler's own PodScheduled=False patch changed the pod: the second attempt runs in full
    await _attempt(sched, clock, 2, FLUSH)
    counter = _counter(sched)
    assert counter.nodes == ["n0", "n1", "n2"] * 2
    info = sched.queue.unschedulable["default/too-big"]
    preemptions = sched.metrics.preemption_attempts.value
    for n in (3, 4):
        await _attempt(sched, clock, n, FLUSH)
    assert counter.nodes == ["n0", "n1", "n2"] * 2  # two more retries, no node filtered
    assert info.attempts == 4 and info.unschedulable_plugins == {"NodeResourcesFit"}
    assert sched.metrics.preemption_attempts.value == preemptions + 2  # PostFilter's runs counted as if run
    p = await pods.get("too-big", "default")
    cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["message"] == ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
                               "3 Preemption is not helpful for scheduling.")
    assert p["metadata"]["resourceVersion"] == info.pod["metadata"]["resourceVersion"]  # no write per retry
    await add_node(client, node("big", "32", "64Gi"))
    assert await settled(clock, bound(pods, "too-big")) == "big"
    assert counter.nodes[6:] == ["n0", "n1", "n2", "big"]  # the node's event: a search of every node


async def test_a_lower_priority_pod_seen_later_makes_the_retry_run_and_preempt(cluster):
    """The pod fits nowhere and no pod of lower priority runs: no victims, and retries repeat that.
    A node holding a lower-priority pod appears: the next attempt runs in full and preempts it."""
    client, sched, clock = cluster
    pods = client.resource("", "v1", "pods")
    await add_node(client, node("n0", "1", "8Gi"))
    await pods.create(running("peer", "n0", 5))
    await sched.start()
    await pods.create(pending("high", 5))
    await settled(clock, lambda: _condition_written(pods, "high"))
    await _attempt(sched, clock, 1)
    await _attempt(sched, clock, 2, FLUSH)
    seen = len(_counter(sched).nodes)
    await _attempt(sched, clock, 3, FLUSH)
    await _attempt(sched, clock, 4, FLUSH)
    assert len(_counter(sched).nodes) == seen == 2
    p = await pods.get("high", "default")
    assert next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    await pods.create(running("low", "n1", 1, finalizers=["test/hold"]))
    await add_node(client, node("n1", "1", "8Gi"))

    async def preempted():
        p = await pods.get("low", "default")
        return p["metadata"].get("deletionTimestamp") and \
            (await pods.get("high", "default"))["status"].get("nominatedNodeName")
    assert await settled(clock, preempted) == "n1"
    assert len(_counter(sched).nodes) > seen
    assert not (await pods.get("peer", "default"))["metadata"].get("deletionTimestamp")


def test_a_repeated_failure_moves_the_search_start_as_the_search_does():
    """A failed search of n nodes leaves the next pod's start at start % n, one PreFilter left no
    node to search at 0: `repeat_failure` replays that, so later placements are unchanged."""
    fwk, snap = framework(), snapshot(5, lambda i: True)
    big = PodInfo(pod("big", "64"), 0.0)
    searched, replayed = Algorithm(), Algorithm()
    for start in (0, 3, 7, 12):
        searched.next_start = replayed.next_start = start
        with pytest.raises(FitError) as e:
            searched.find_nodes(fwk, CycleState(), big, snap)
        replayed.repeat_failure(e.value.searched)
        assert e.value.searched == 5 and replayed.next_start == searched.next_start == start % 5
    replayed.repeat_failure(0)
    assert replayed.next_start == 0


class _HeldStatusPatches:
    """The pods resource, its status patches counted and held until `gate` is set: the informer
    cannot hear of a patch the scheduler sent."""

    def __init__(self, inner, gate: asyncio.Event) -> None:
        self.inner, self.gate, self.status_patches = inner, gate, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def patch(self, *args, **kwargs):
        if kwargs.get("subresource") == "status":
            self.status_patches += 1
            await self.gate.wait()
        return await self.inner.patch(*args, **kwargs)


class _Client:
    def __init__(self, client, pods) -> None:
        self.client, self.pods = client, pods

    def resource(self, group, version, plural):
        return self.pods if (group, plural) == ("", "pods") else self.client.resource(group, version, plural)


async def test_a_retry_before_the_informer_hears_of_the_status_patch_sends_it_once():
    """The same PodScheduled=False for the same version of the pod is patched once: a second patch
    would bump the resourceVersion for nothing and start a new FailedScheduling series."""
    s = await make_stack()
    gate = asyncio.Event()
    pods = _HeldStatusPatches(s.client.resource("", "v1", "pods"), gate)
    clock = VirtualClock()
    sched = Scheduler(_Client(s.client, pods), clock=clock, seed=1)
    try:
        await add_node(s.client, node("n0", "4", "8Gi"))
        await sched.start()
        await pods.create(strip_uid(pod("too-big", "16")))
        await _attempt(sched, clock, 1)
        await _attempt(sched, clock, 2, FLUSH)
        await settled(clock, lambda: _true(not sched._reports))
        assert pods.status_patches == 1
        gate.set()
        await settled(clock, lambda: _condition_written(pods, "too-big"))
        await _attempt(sched, clock, 3, FLUSH)
        await settled(clock, lambda: _true(not sched._reports))
        assert pods.status_patches == 1  # the informer's pod says it now
    finally:
        gate.set()
        await sched.stop()
        await s.close()


async def _true(value):
    return value
