"""The wait a resource's watches past their buffer get, as upstream's dispatchEvent waits on its
blocked watchers: one timer for all the watchers blocked together, as long as the resource's budget
has left (cache.WATCH_BUDGET at most, WATCH_BUDGET_REFRESH more each second, nothing at start), the
budget spent by a wait that runs out and given back by one its watchers all end early. Watches
through GenericREST, their tasks driven by hand; a virtual clock."""

import asyncio

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.cache import WATCH_BUDGET, WATCH_BUDGET_REFRESH
from nanokube.apiserver.rest import SYSTEM, WriteOptions
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


async def test_a_watch_blocked_while_a_wait_runs_shares_its_timer(server):
    clock = server.clock
    await clock.advance(2)
    first, second = await _stuck(server, 2)
    second.watcher.size = 3
    await _writes(server, 2)  # the first is blocked
    await clock.advance(0.06)
    await _writes(server, 2)  # the second too: it joins the first's wait, 40 ms left
    assert second.watcher.blocked is first.watcher.blocked
    await clock.advance(0.04 + EPS)
    assert server.cache.stats.terminated == {"/registry/configmaps/": 2}
    await asyncio.gather(first.aclose(), second.aclose())
