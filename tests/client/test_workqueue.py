import asyncio

from prometheus_client import CollectorRegistry

from nanokube.client.workqueue import WorkQueue, WorkQueueMetrics
from nanokube.clock import Clock, VirtualClock
from tests.node import ManualClock


class RecordingClock(Clock):
    """A clock whose sleeps complete at once, recording the delays asked for."""

    def __init__(self):
        self.delays: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)


async def test_waiting_keys_are_deduplicated():
    q = WorkQueue()
    for k in ("a", "b", "a", "a"):
        q.add(k)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]
    assert len(q) == 0


async def test_key_added_while_processing_is_requeued_only_when_done():
    q = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_one_key_is_never_processed_concurrently():
    q = WorkQueue()
    active: set[str] = set()
    overlaps: list[str] = []
    processed: list[str] = []

    async def worker():
        while True:
            key = await q.get()
            if key in active:
                overlaps.append(key)
            active.add(key)
            await asyncio.sleep(0)
            if processed.count(key) < 3:
                q.add(key)
            processed.append(key)
            active.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    q.add("a")
    q.add("b")
    for _ in range(200):
        if processed.count("a") >= 4 and processed.count("b") >= 4 and len(q) == 0:
            break
        await asyncio.sleep(0)
    for w in workers:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    assert overlaps == []
    assert processed.count("a") == 4 and processed.count("b") == 4


async def test_rate_limited_requeue_backs_off_exponentially_until_forgotten():
    clock = RecordingClock()
    q = WorkQueue(clock, base_delay=1.0, max_delay=5.0)
    for _ in range(4):
        q.add_rate_limited("k")
        assert await q.get() == "k"
        q.done("k")
    assert clock.delays == [1.0, 2.0, 4.0, 5.0]
    q.forget("k")
    q.add_rate_limited("k")
    await q.get()
    assert clock.delays[-1] == 1.0


async def test_a_key_failing_past_a_thousand_retries_still_waits_the_longest_delay():
    clock = RecordingClock()
    q = WorkQueue(clock, base_delay=0.005, max_delay=60.0)
    for _ in range(1100):
        q.add_rate_limited("k")
        assert await q.get() == "k"
        q.done("k")
    assert q.num_requeues("k") == 1100
    assert clock.delays[-100:] == [60.0] * 100


class GatedClock(Clock):
    """Sleeps end only when the test opens the gate."""

    def __init__(self):
        self.gate = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        await self.gate.wait()


async def test_shutdown_cancels_pending_delayed_adds():
    clock = GatedClock()
    q = WorkQueue(clock)
    q.add_after("k", 1)
    await asyncio.sleep(0)
    q.shutdown()
    clock.gate.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(q) == 0


async def test_delayed_add_arrives_after_its_sleep():
    clock = GatedClock()
    q = WorkQueue(clock)
    q.add_after("k", 1)
    await asyncio.sleep(0)
    assert len(q) == 0
    clock.gate.set()
    assert await asyncio.wait_for(q.get(), 5) == "k"


async def test_a_key_delayed_twice_waits_once_for_the_earlier_time():
    clock = VirtualClock()
    q = WorkQueue(clock)
    q.add_after("k", 60)
    q.add_after("k", 90)
    q.add_after("k", 30)
    await asyncio.sleep(0)
    await clock.advance(30)
    assert len(q) == 1 and await q.get() == "k"
    q.done("k")
    await clock.advance(120)
    assert len(q) == 0, "the later delays were folded into the first"


def _metered(name: str = "deployment"):
    """A queue metered under `name` on a registry of its own, over a clock the test moves."""
    clock, registry = ManualClock(), CollectorRegistry()
    provider = WorkQueueMetrics(clock)
    registry.register(provider)
    q = WorkQueue(clock, stats=provider.stats(name))

    def sample(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(metric, {"name": name, **labels})
    return q, clock, sample


async def test_metered_queue_counts_adds_depth_and_the_waits_as_client_go():
    q, clock, sample = _metered()
    for k in ("a", "a", "b"):
        q.add(k)
    assert sample("workqueue_adds_total") == 2, "a waiting key's second add is not an add"
    assert sample("workqueue_depth") == 2
    await clock.advance(0.5)
    assert await q.get() == "a"
    assert sample("workqueue_depth") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    assert sample("workqueue_queue_duration_seconds_sum") == 0.5
    assert sample("workqueue_queue_duration_seconds_bucket", le="0.1") == 0
    assert sample("workqueue_queue_duration_seconds_bucket", le="1.0") == 1
    assert sample("workqueue_queue_duration_seconds_bucket", le="+Inf") == 1

    await clock.advance(2)
    assert sample("workqueue_unfinished_work_seconds") == 2
    assert sample("workqueue_longest_running_processor_seconds") == 2
    q.add("a")
    assert (sample("workqueue_adds_total"), sample("workqueue_depth")) == (3, 2), \
        "an add while processing counts, as the key waits again"
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count") == 1
    assert sample("workqueue_work_duration_seconds_bucket", le="1.0") == 0
    assert sample("workqueue_work_duration_seconds_bucket", le="10.0") == 1
    # component-base's bounds: ExponentialBuckets(10e-9, 10, 10), 10 ns to 10 s
    assert sample("workqueue_work_duration_seconds_bucket", le="1e-08") == 0
    assert sample("workqueue_work_duration_seconds_bucket", le="100.0") is None
    assert sample("workqueue_unfinished_work_seconds") == 0
    assert sample("workqueue_longest_running_processor_seconds") == 0
    assert sample("workqueue_retries_total") == 0


async def test_every_delayed_add_is_a_retry():
    q, clock, sample = _metered("job")
    q.add_rate_limited("a")
    q.add_after("b", 1)
    q.add_after("b", 2)
    assert sample("workqueue_retries_total") == 3
    assert sample("workqueue_adds_total") == 0
    await clock.advance(2)
    assert sample("workqueue_adds_total") == 2 and sample("workqueue_depth") == 2
    q.shutdown()


async def test_shutdown_takes_the_queue_out_of_the_metrics():
    q, clock, sample = _metered()
    q.add("a")
    q.add("b")
    assert await q.get() == "a"
    await clock.advance(1)
    q.shutdown()
    assert sample("workqueue_depth") == 0 and sample("workqueue_unfinished_work_seconds") == 0
    q.add("c")
    assert sample("workqueue_adds_total") == 2, "a shut queue is metered no more"


def test_an_unnamed_queue_is_not_metered():
    assert WorkQueueMetrics().stats("") is None and WorkQueue().stats is None
