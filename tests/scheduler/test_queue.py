import asyncio
import random

from nanokube.clock import VirtualClock
from nanokube.scheduler import plugins
from nanokube.scheduler.framework import NODE, Action, ClusterEvent, Framework, Hint, PodInfo, Registration
from nanokube.scheduler.metrics import Metrics
from nanokube.scheduler.queue import QueuedPodGroupInfo, SchedulingQueue
from tests.scheduler import FakeClock, node, pod


def make_queue():
    clock = FakeClock()
    m = Metrics()
    prof = plugins.default_profile()
    fwk = Framework(prof, plugins.build(prof, None), m, clock)
    return SchedulingQueue({"default-scheduler": fwk}, clock, m), clock


async def test_priority_then_age_ordering():
    q, clock = make_queue()
    q.add(pod("low", priority=1))
    clock.t += 1
    q.add(pod("high", priority=10))
    clock.t += 1
    q.add(pod("high2", priority=10))
    assert [(await q.pop()).key for _ in range(3)] == ["default/high", "default/high2", "default/low"]


async def test_backoff_doubles_from_one_to_ten_seconds():
    q, clock = make_queue()
    q.add(pod("a"))
    waits = []
    for _ in range(6):
        info = await q.pop()
        info.unschedulable_plugins = set()
        q.add_unschedulable(info)
        waits.append(info.backoff_expires - clock.t)
        q.flush_backoff_completed()
        assert q.active == []
        clock.t += waits[-1]
        q.flush_backoff_completed()
    assert waits == [1, 2, 4, 8, 10, 10]


def test_backoff_stays_at_the_maximum_however_many_attempts():
    """A pod tried thousands of times (a fuzzer updating it over and over) waits the maximum; doubling
    2^(attempts-1) overflowed a float past 1024 attempts and killed the binding task."""
    q, _ = make_queue()
    info = PodInfo(pod("a"), 0.0)
    for attempts, wait in ((1, 1), (4, 8), (1025, 10), (100_000, 10)):
        info.attempts = attempts
        assert q.backoff_duration(info) == wait


async def test_unschedulable_pod_moves_only_on_a_helpful_event():
    q, clock = make_queue()
    q.add(pod("a", "8"))
    info = await q.pop()
    info.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(info)
    assert "default/a" in q.unschedulable
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("small", "2"))
    assert "default/a" in q.unschedulable
    q.on_event(ClusterEvent(NODE, Action.UPDATE_NODE_LABEL), node("x"), node("x", labels={"a": "b"}))
    assert "default/a" in q.unschedulable
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("big", "16"))
    assert "default/a" in q.backoff
    clock.t += 1
    q.flush_backoff_completed()
    assert (await q.pop()).key == "default/a"


async def test_event_during_the_attempt_sends_pod_to_backoff():
    q, _ = make_queue()
    q.add(pod("a", "8"))
    info = await q.pop()
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("n", "16"))
    info.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(info)
    assert "default/a" in q.backoff
    assert q.in_flight_events == []


async def test_event_during_the_attempt_that_cannot_help_leaves_pod_unschedulable():
    """Upstream's in-flight events: the rejecting plugins' hints judge what happened during the
    attempt, so a steady stream of unrelated events does not turn every failure into a retry."""
    q, _ = make_queue()
    q.add(pod("a", "8"))
    q.add(pod("b", "8"))
    a = await q.pop()
    b = await q.pop()
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("small", "2"))
    a.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(a)
    assert "default/a" in q.unschedulable
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("big", "16"))
    b.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(b)
    assert "default/b" in q.backoff and "default/a" in q.backoff


async def test_events_before_the_attempt_do_not_count():
    q, _ = make_queue()
    q.add(pod("a", "8"))
    q.add(pod("b", "8"))
    a = await q.pop()
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("big", "16"))
    b = await q.pop()
    b.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(b)
    assert "default/b" in q.unschedulable
    a.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(a)
    assert "default/a" in q.backoff


async def test_gated_pod_waits_until_gates_are_removed():
    q, _ = make_queue()
    gated = pod("g", schedulingGates=[{"name": "wait"}])
    q.add(gated)
    assert q.unschedulable["default/g"].gated_by == "SchedulingGates" and not q.active
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("n"))
    assert "default/g" in q.unschedulable
    q.update(gated, pod("g"))
    assert (await q.pop()).key == "default/g"


def _incoming(q, queue, event):
    return q.metrics.registry.get_sample_value("scheduler_queue_incoming_pods_total",
                                               {"queue": queue, "event": event}) or 0


async def test_a_pending_pods_own_update_moves_it_only_when_a_rejecting_plugin_says_it_may_help():
    """Upstream's Update with queueing hints: a label change or a status write (the scheduler's
    own PodScheduled=False patch) leaves a pod that fits nowhere waiting; a toleration added
    moves it if TaintToleration rejected it, and not if only NodeAffinity did."""
    q, clock = make_queue()
    old = pod("a", nodeSelector={"pool": "gpu"})
    q.add(old)
    info = await q.pop()
    info.unschedulable_plugins = {"NodeAffinity", "TaintToleration"}
    q.add_unschedulable(info)
    clock.t += 60  # its backoff is over: a move would put it in activeQ
    labelled = {**old, "metadata": {**old["metadata"], "labels": {"team": "a"}}}
    q.update(old, labelled)
    status = {**labelled, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    q.update(labelled, status)
    tolerant = {**status, "spec": {**status["spec"], "tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    info.unschedulable_plugins = {"NodeAffinity"}
    q.update(status, tolerant)
    assert "default/a" in q.unschedulable and not q.active
    assert q.unschedulable["default/a"].pod is tolerant
    info.unschedulable_plugins = {"NodeAffinity", "TaintToleration"}
    more = {**tolerant, "spec": {**tolerant["spec"], "tolerations": [*tolerant["spec"]["tolerations"],
                                                                      {"key": "b", "operator": "Exists"}]}}
    q.update(tolerant, more)
    assert (await q.pop()).key == "default/a"
    assert _incoming(q, "active", "PodTolerationChange") == 1
    assert _incoming(q, "active", "PodLabelChange") == _incoming(q, "active", "PodUpdate") == 0


async def test_a_pods_own_update_during_its_attempt_counts_among_the_attempts_events():
    """Upstream's addEventsIfPodInFlight: a toleration added while the pod is being scheduled
    sends it to backoff when TaintToleration then rejects it, instead of leaving it waiting."""
    q, _ = make_queue()
    old = pod("a")
    q.add(old)
    q.add(pod("b"))
    a, b = await q.pop(), await q.pop()
    q.update(old, {**old, "spec": {**old["spec"], "tolerations": [{"key": "gpu", "operator": "Exists"}]}})
    b.unschedulable_plugins = {"TaintToleration"}
    q.add_unschedulable(b)
    a.unschedulable_plugins = {"TaintToleration"}
    q.add_unschedulable(a)
    assert "default/a" in q.backoff and "default/b" in q.unschedulable


async def test_leftover_unschedulable_pods_flush_after_five_minutes():
    q, clock = make_queue()
    q.add(pod("a"))
    info = await q.pop()
    info.unschedulable_plugins = {"TaintToleration"}
    q.add_unschedulable(info)
    clock.t += 200
    q.flush_unschedulable_leftover()
    assert "default/a" in q.unschedulable
    clock.t += 101
    q.flush_unschedulable_leftover()
    assert (await q.pop()).key == "default/a"


async def test_with_activeq_empty_the_pod_backing_off_first_is_popped_at_once():
    """SchedulerPopFromBackoffQ: an idle scheduler tries a pod an event moved
    to backoffQ without waiting out its backoff (earliest window first,
    then priority); a pod backing off after an error still waits."""
    q, clock = make_queue()
    for name, prio in (("a", 1), ("b", 5)):
        q.add(pod(name, "8", priority=prio))
    for _ in range(2):
        info = await q.pop()
        info.unschedulable_plugins = {"NodeResourcesFit"}
        q.add_unschedulable(info)
    q.add(pod("err"))
    err = await q.pop()
    q.add_unschedulable(err, error=True)
    q.on_event(ClusterEvent(NODE, Action.ADD), None, node("big", "16"))
    assert {"default/a", "default/b", "default/err"} <= set(q.backoff)
    assert [(await q.pop()).key for _ in range(2)] == ["default/b", "default/a"]
    assert list(q.backoff) == ["default/err"]
    q.add(pod("new"))
    assert (await q.pop()).key == "default/new"


def test_an_event_asks_the_hint_only_of_the_pods_its_targets_name_and_moves_the_same_pods():
    """Registration.targets: a claim event asks the hint of the pods naming the claim (and of the
    PodGroup entries, whose hint reads a member) instead of every pod the plugin turned away."""
    def run(with_targets: bool):
        q, _ = make_queue()
        asked = []

        def hint(p, old, new):
            asked.append(p["metadata"]["name"])
            return Hint.QUEUE if old is not None or p["metadata"]["name"] in new["users"] else Hint.SKIP

        def targets(old, new):
            return None if old is not None else [f"default/{n}" for n in new["users"]]

        q.registrations = {"Claims": [Registration(ClusterEvent("ResourceClaim", Action.ALL), hint,
                                                   targets if with_targets else None)]}
        for i in range(40):
            info = PodInfo(pod(f"p{i}"), 0.0)
            info.unschedulable_plugins = {"Claims"}
            q.unschedulable[info.key] = info
        group = QueuedPodGroupInfo("default/g", 0, 0.0)
        group.members["default/m0"] = PodInfo(pod("m0"), 0.0)
        group.unschedulable_plugins = {"Claims"}
        q.unschedulable[group.key] = group
        steps = []
        for old, new in ((None, {"users": ["p30", "p3", "nobody"]}), (None, {"users": ["m0"]}),
                         (None, {"users": []}), ({"users": []}, {"users": []})):
            asked.clear()
            q.on_event(ClusterEvent("ResourceClaim", Action.UPDATE), old, new)
            steps.append((list(asked), list(q.active_keys), list(q.unschedulable)))
        return steps

    narrowed, full = run(True), run(False)
    assert [s[1:] for s in narrowed] == [s[1:] for s in full]
    assert [s[0] for s in narrowed] == [["p3", "p30", "m0"], ["m0"], [], [f"p{i}" for i in range(40) if i not in (3, 30)]]
    assert narrowed[1][1] == ["default/p3", "default/p30", "podgroup/default/g"]
    assert narrowed[3][2] == []


async def test_the_flushers_move_pods_at_the_ticks_of_a_one_second_loop_without_waking_each_second():
    """Upstream flushes backoffQ every second and the unschedulable leftovers every 30; the loop sleeps
    through the ticks that move no pod. A pod left unschedulable at 0 moves at tick 330 (the first 30th
    tick more than 5 minutes on); one backing off until 101.5 at tick 102, waking the loop early."""
    clock = VirtualClock()
    m = Metrics()
    prof = plugins.default_profile()
    q = SchedulingQueue({"default-scheduler": Framework(prof, plugins.build(prof, None), m, clock)}, clock, m)
    flushers = asyncio.create_task(q.run_flushers())
    try:
        q.add(pod("a"))
        info = await q.pop()
        info.unschedulable_plugins = {"TaintToleration"}
        q.add_unschedulable(info)
        await clock.advance(100.5)
        q.add(pod("b"))
        q.add_unschedulable(await q.pop(), error=True)
        where = {}
        for t in (101.9, 102, 329.9, 330):
            await clock.advance(t - clock.monotonic())
            where[t] = sorted(q.active_keys), sorted(q.backoff), sorted(q.unschedulable)
        assert where == {101.9: ([], ["default/b"], ["default/a"]), 102: (["default/b"], [], ["default/a"]),
                         329.9: (["default/b"], [], ["default/a"]), 330: (["default/a", "default/b"], [], [])}
        assert clock.wakeups <= 4  # a 1-s loop: 330
    finally:
        flushers.cancel()


def _walk(q, last: float, ticks: int) -> tuple[float, float, int]:
    """A 1-s loop's view: visits the ticks one by one until one at or past the earliest backoff
    expiry, a 30th past the oldest unschedulable pod's 5 minutes, or (both queues empty) the next
    one after now; at most 360 of them."""
    expiry = min((i.backoff_expires for i in q.backoff.values()), default=float("inf"))
    oldest = min((i.timestamp for i in q.unschedulable.values() if not i.gated_by), default=float("inf"))
    empty = expiry == oldest == float("inf")
    before = t = last
    for _ in range(360):
        t, ticks = before + 1.0, ticks + 1
        if t >= expiry or empty and t > q.clock.monotonic() or ticks % 30 == 0 and t - oldest > 300:
            break
        before = t
    return before, t, ticks


def test_the_flushers_next_tick_is_the_one_a_one_second_loop_reaches_first():
    """Where the flushers sleep to is counted from the queues' times; it is the tick a walk of
    every tick finds first (backoff expiries on and between ticks, unschedulable pods of any age,
    gated pods that do not count, both queues empty), for tick numbers at any place in the 30."""
    rng = random.Random(5)
    q, clock = make_queue()
    checked = 0
    for case in range(3000):
        q.backoff.clear()
        q.unschedulable.clear()
        last = rng.choice((1000.0, 1000.5, 1234.25, rng.uniform(0, 1e7)))
        clock.t = last + rng.choice((0.0, 0.5, 3.0, 400.0, rng.uniform(0, 900)))
        for i in range(rng.choice((0, 0, 1, 3))):
            info = PodInfo(pod(f"b{case}-{i}"), clock.t)
            info.backoff_expires = last + rng.choice((-5.0, 0.0, 1.0, 7.5, 12.0, 359.0, 360.0, 361.0, rng.uniform(0, 500)))
            q.backoff[info.key] = info
        for i in range(rng.choice((0, 0, 1, 4))):
            info = PodInfo(pod(f"u{case}-{i}"), clock.t)
            info.timestamp = last - rng.choice((0.0, 0.5, 299.0, 300.0, 301.0, 1e4, rng.uniform(0, 700))) + \
                rng.choice((0.0, 12.0))
            info.unschedulable_plugins = {"TaintToleration"}
            info.gated_by = rng.choice(("", "", "SchedulingGates"))
            q.unschedulable[info.key] = info
        ticks = rng.randrange(0, 100)
        before, due, n = q._next_flush(last, ticks)
        want = _walk(q, last, ticks)
        assert n == want[2], (case, last, ticks)
        assert abs(before - want[0]) < 1e-6 and abs(due - want[1]) < 1e-6, (case, last, ticks)
        checked += 1
    assert checked == 3000
