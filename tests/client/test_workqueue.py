import asyncio

from nanokube.client.workqueue import WorkQueue
from nanokube.clock import Clock, VirtualClock


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
