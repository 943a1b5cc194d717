"""The controllers' shared worker loop (nanokube/controllers/base.py): a failed sync is retried,
and one that fails from a bug says so with its traceback (the fuzzer's log scan finds it); a pass
over many objects lets the loop run (in_turns)."""

from __future__ import annotations

import asyncio
import logging

from nanokube.clock import VirtualClock
from nanokube.controllers.base import CONFLICT_RETRIES, TURN, Controller, in_turns
from nanokube.machinery.errors import APIError
from tests.controllers import tries


class NotYet(Exception):
    pass


class Failing(Controller):
    name = "failing"
    retriable = (NotYet,)

    def __init__(self, error: Exception):
        super().__init__(client=None)
        self.error, self.calls = error, 0

    async def sync(self, key) -> None:
        self.calls += 1
        if self.calls == 1:
            raise self.error


async def _run(error: Exception, caplog) -> list[logging.LogRecord]:
    c = Failing(error)
    caplog.set_level(logging.WARNING, logger="nanokube.controllers.base")
    await c.start()
    c.queue.add("ns/a")
    for _ in tries():
        if c.calls >= 2:
            break
        await asyncio.sleep(0.01)
    await c.stop()
    assert c.calls == 2, "the failed sync is retried"
    return [r for r in caplog.records if r.name == "nanokube.controllers.base"]


async def test_a_bug_in_a_sync_is_logged_at_error_with_its_traceback(caplog):
    [record] = await _run(KeyError("spec"), caplog)
    assert record.levelname == "ERROR" and record.getMessage() == "failing: sync ns/a failed"
    assert record.exc_info[0] is KeyError


async def test_a_refusal_or_a_retriable_failure_is_a_warning_without_one(caplog):
    for error in (APIError(403, "Forbidden", "cannot update"), NotYet(), ConnectionResetError()):
        caplog.clear()
        [record] = await _run(error, caplog)
        assert record.levelname == "WARNING" and record.exc_info is None, error


class Conflicting(Controller):
    name = "conflicting"

    def __init__(self, clock: VirtualClock, conflicts: int):
        super().__init__(client=None, clock=clock)
        self.left, self.calls = conflicts, 0

    async def sync(self, key) -> None:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise APIError(409, "Conflict", "the object has been modified")


async def test_a_conflict_is_logged_at_info_until_it_keeps_coming_back(caplog):
    """A sync ended by a conflict is retried and mostly succeeds: nothing to act on, so not a warning
    (a simulated run's --quiet showed a dozen for one Deployment; conflict57). The CONFLICT_RETRIES+1th
    in a row of one key is: some writer keeps changing the object."""
    caplog.set_level(logging.INFO, logger="nanokube.controllers.base")
    clock = VirtualClock()
    c = Conflicting(clock, CONFLICT_RETRIES + 1)
    await c.start()
    c.queue.add("ns/a")
    for _ in range(400):  # the backoff doubles from 5 ms to its 60 s ceiling: 202 s in all
        await clock.advance(1)
        if c.calls == CONFLICT_RETRIES + 2:
            break
    await c.stop()
    levels = [r.levelname for r in caplog.records if r.name == "nanokube.controllers.base"]
    assert c.calls == CONFLICT_RETRIES + 2 and levels == ["INFO"] * CONFLICT_RETRIES + ["WARNING"]


async def test_in_turns_hands_every_item_in_order_and_lets_the_loop_run_between_slices():
    items = list(range(3 * TURN + 5))
    ran: list[int] = []
    seen: list[int] = []
    loop = asyncio.get_running_loop()
    async for part in in_turns(items):
        loop.call_soon(lambda: ran.append(len(seen)))  # runs only when the pass lets the loop through
        seen.extend(part)
    assert seen == items
    assert ran == [TURN, 2 * TURN, 3 * TURN]


async def test_in_turns_hands_a_short_list_whole_without_a_turn():
    items = list(range(TURN))
    ran: list[int] = []
    asyncio.get_running_loop().call_soon(ran.append, 1)
    parts = [part async for part in in_turns(items)]
    assert parts == [items] and parts[0] is items
    assert ran == []
