"""The wait a resource's watches past their buffer get, as upstream's dispatchEvent waits on its
blocked watchers: one timer for all the watchers blocked together, as long as the resource's budget
has left (cache.WATCH_BUDGET at most, WATCH_BUDGET_REFRESH more each second, nothing at start), the
budget spent by a wait that runs out and given back by one its watchers all end early. Watches
through GenericREST, their tasks driven by hand; a virtual clock."""

import asyncio
import time

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.cache import ADDED, WATCH_BUDGET, WATCH_BUDGET_REFRESH, CacheEvent, Entry, TimeBudget
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.client.informer import Informer
from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore

OPTS = WriteOptions(user=SYSTEM)
#: a little past an instant, for the clock's float sums
EPS = 1e-6


@pytest.fixture
async def server():
    clock = VirtualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    await server.start()
    yield server
    await server.stop()


async def _stuck(server, n: int) -> list:
    """`n` watches of ConfigMaps whose tasks take nothing (each with its first event taken), buffer 1."""
    cms = server.index.get("", "v1", "configmaps")
    streams = [await server.rest.watch(cms, "v1", "default", resource_version=str(server.cache.rev)) for _ in range(n)]
    for s in streams:
        s.watcher.size = 1
    return streams


async def _writes(server, k: int) -> None:
    cms = server.index.get("", "v1", "configmaps")
    for _ in range(k):
        await server.rest.create(cms, "v1", "default", {"metadata": {"generateName": "cm-"}}, OPTS)


async def test_watches_blocked_together_share_one_wait_and_spend_the_budget_once(server):
    clock = server.clock
    await clock.advance(2)  # the budget's most: two refreshes
    streams = await _stuck(server, 100)
    await _writes(server, 2)  # the second event takes each past its buffer
    assert len({id(s.watcher.blocked) for s in streams}) == 1
    await clock.advance(WATCH_BUDGET - EPS)
    assert server.cache.stats.terminated == {}
    await clock.advance(2 * EPS)  # 100 stuck watches cost one wait of WATCH_BUDGET, not 100 of them
    assert server.cache.stats.terminated == {"/registry/configmaps/": 100}
    for s in streams:  # each stream ends: what it had not taken was dropped
        assert [e async for e in s] == []

    late = await _stuck(server, 1)  # the budget is spent: the next blocked watch waits for nothing
    await _writes(server, 2)
    await clock.advance(0)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 101}
    await late[0].aclose()

    await clock.advance(1)  # a second's refresh
    later = await _stuck(server, 1)
    await _writes(server, 2)
    await clock.advance(WATCH_BUDGET_REFRESH - EPS)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 101}
    await clock.advance(2 * EPS)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 102}
    await later[0].aclose()


async def test_a_wait_its_watches_end_early_gives_back_what_it_did_not_use(server):
    """A watch whose task takes its events again, back within its buffer, ends the wait 30 ms in: the
    70 ms it did not use go back, and the next blocked watch waits that long."""
    clock = server.clock
    await clock.advance(2)
    [slow] = await _stuck(server, 1)
    await _writes(server, 2)
    wait = slow.watcher.blocked
    await clock.advance(0.03)
    await slow.__anext__()  # back within its buffer
    assert slow.watcher.blocked is None and wait.timer.cancelled()
    await slow.aclose()
    await clock.advance(5)  # refreshes: never past the most
    [stuck] = await _stuck(server, 1)
    await _writes(server, 2)
    await clock.advance(WATCH_BUDGET - EPS)
    assert server.cache.stats.terminated == {}
    await clock.advance(2 * EPS)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
    await stuck.aclose()


async def test_a_budget_given_back_counts_toward_the_next_wait(server):
    clock = server.clock
    await clock.advance(2)
    [slow] = await _stuck(server, 1)
    await _writes(server, 2)
    await clock.advance(0.03)
    await slow.__anext__()  # 70 ms given back to an empty budget
    await slow.aclose()
    [stuck] = await _stuck(server, 1)
    await _writes(server, 2)
    await clock.advance(0.07 - 0.001)
    assert server.cache.stats.terminated == {}
    await clock.advance(0.002)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
    await stuck.aclose()


async def test_a_watch_another_event_blocks_while_a_wait_runs_waits_for_that_wait_then_for_what_is_left(server):
    """Upstream dispatches one event at a time: a later event reaches its watchers only once the
    running wait is over, and its own wait has what the budget has then (here nothing: the first
    wait used it all). A timer is never shared with an event before it."""
    clock = server.clock
    await clock.advance(2)
    first, second = await _stuck(server, 2)
    second.watcher.size = 3
    await _writes(server, 2)  # the first is blocked, its wait holding all the budget
    await clock.advance(0.06)
    await _writes(server, 2)  # the second too, by another event: it waits behind the first's wait
    assert second.watcher.blocked is not first.watcher.blocked and second.watcher.blocked.timer is None
    await clock.advance(0.04 - EPS)
    assert server.cache.stats.terminated == {}
    await clock.advance(2 * EPS)  # the first's wait ran out; the second's had nothing left
    await clock.advance(0)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 2} and second.watcher.overflowed
    await asyncio.gather(first.aclose(), second.aclose())


async def test_a_wait_that_ends_early_hands_the_next_what_it_did_not_use(server):
    """The first wait's watch catches up 30 ms in: the 70 ms it leaves are the wait of the watch a
    later event blocked meanwhile, which starts then."""
    clock = server.clock
    await clock.advance(2)
    first, second = await _stuck(server, 2)
    second.watcher.size = 3
    await _writes(server, 2)
    await clock.advance(0.01)
    await _writes(server, 2)  # the second waits behind the first's wait
    await clock.advance(0.02)
    while first.watcher.blocked is not None:  # back within its buffer at 30 ms
        await first.__anext__()
    assert first.watcher.blocked is None and second.watcher.blocked.timer is not None
    await clock.advance(0.07 - 0.001)
    assert server.cache.stats.terminated == {}
    await clock.advance(0.002)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 1} and second.watcher.overflowed
    await asyncio.gather(first.aclose(), second.aclose())


async def test_watches_that_catch_up_before_their_wait_starts_leave_no_wait(server):
    clock = server.clock
    await clock.advance(2)
    first, second = await _stuck(server, 2)
    second.watcher.size = 3
    await _writes(server, 2)
    await _writes(server, 2)
    pending = second.watcher.blocked
    for _ in range(3):  # the second takes its events again before the first's wait ends
        await second.__anext__()
    assert second.watcher.blocked is None and not pending.watchers
    await clock.advance(WATCH_BUDGET + EPS)
    await clock.advance(0)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
    assert pending.timer is None and server.cache._blocking.get("/registry/configmaps/") is not pending
    await asyncio.gather(first.aclose(), second.aclose())


def _event(i: int) -> CacheEvent:
    """A ConfigMap's ADDED event as the cache's fan-out hands it to a watcher."""
    rev = 10 ** 6 + i
    obj = {"kind": "ConfigMap", "apiVersion": "v1",
           "metadata": {"name": f"cm-{i}", "namespace": "default", "resourceVersion": str(rev)}}
    return CacheEvent(ADDED, f"/registry/configmaps/default/cm-{i}", Entry(obj, rev), None, rev)


async def _informer(server) -> tuple[Informer, asyncio.Task]:
    """An in-process informer of the default namespace's ConfigMaps, synced, and its task."""
    informer = Informer(LocalClient(server.rest).resource("", "v1", "configmaps"), namespace="default")
    task = asyncio.ensure_future(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 10)
    return informer, task


async def _until_taken(informer: Informer, n: int) -> int:
    """How many objects the informer holds once it holds `n`, or after a second."""
    for _ in range(100):
        if len(informer.list()) == n:
            break
        await asyncio.sleep(0.01)
    return len(informer.list())


async def test_an_in_process_informer_woken_by_an_event_is_not_ended_by_an_earlier_wait_come_due():
    """An earlier wait's timer comes due in the loop turn that runs a write taking an informer's queue
    past its buffer, ahead of the informer's task, which that write woke: the informer is not ended
    (it would be, waiting on that timer), and takes its events. Real time; events handed over as the
    cache's fan-out hands them."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        informer, task = await _informer(server)
        [stuck] = await _stuck(server, 1)
        [watched] = [w for w in server.cache._watchers["/registry/configmaps/"] if w is not stuck.watcher]
        cache = server.cache

        def burst() -> None:  # another event's fan-out
            cache.rev += 1
            for i in range(3 * watched.size):
                cache._offer(watched, _event(i))

        # an empty budget: one counted from the cache's start has a refresh once a loaded machine took
        # a second to get here, and the stuck watch's wait then outlasts the informer's catching up
        cache._budgets["/registry/configmaps/"] = TimeBudget(cache.clock, cache.clock.monotonic())
        cache._offer(stuck.watcher, _event(-2))
        cache._offer(stuck.watcher, _event(-1))  # a wait, for what the budget has: nothing
        asyncio.get_running_loop().call_soon(burst)
        time.sleep(0.01)  # the wait's timer is due as the next turn begins, behind `burst`
        taken = await _until_taken(informer, 3 * watched.size)
        assert stuck.watcher.overflowed and not watched.overflowed
        assert taken == 3 * watched.size
        task.cancel()
        await asyncio.gather(task, stuck.aclose(), return_exceptions=True)
    finally:
        await server.stop()


def test_under_uvloop_an_informer_woken_before_its_wait_is_due_is_not_ended_however_busy_the_loop():
    """`nanokube up` runs on uvloop, whose turn runs the timers due before the callbacks the last turn
    queued: a wait's end, due while the loop was busy, came before the task of the informer the same
    write woke, and ended its watch (the informer takes its whole queue when it runs)."""
    import uvloop
    ended, taken, sent = uvloop.run(_busy_loop_burst())
    assert not ended and taken == sent


async def _busy_loop_burst() -> tuple[bool, int, int]:
    """(whether the informer's watch was ended, the objects it took, those one write's fan-out sent it
    while a wait of 50 ms was set and the loop then stayed busy past its end)."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        informer, task = await _informer(server)
        cache = server.cache
        [watched] = cache._watchers["/registry/configmaps/"]
        budget = cache._budgets["/registry/configmaps/"] = TimeBudget(cache.clock, cache.clock.monotonic())
        budget.left = 0.05
        n = 3 * watched.size
        for i in range(n):  # one write's fan-out: the informer's task woken, then a wait of 50 ms
            cache._offer(watched, _event(i))
        time.sleep(0.1)  # the loop is busy past the wait's end
        taken = await _until_taken(informer, n)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return watched.overflowed, taken, n
    finally:
        await server.stop()
