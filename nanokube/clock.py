"""Injected time. Components read time and wait only through a Clock, so the
same code runs in real time under `nanokube up` and in virtual time in
simulation."""

from __future__ import annotations

import asyncio
import datetime as _dt
import heapq
import itertools
import time
from collections.abc import Callable


class Clock:
    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def call_later(self, seconds: float, callback: Callable[[], object]) -> asyncio.TimerHandle | asyncio.Future:
        """Call `callback` once `seconds` have passed on this clock, without a task of its own (a
        timeout many waiters share); `cancel()` on what it returns stops it."""
        return asyncio.get_running_loop().call_later(seconds, callback)

    def rfc3339(self, t: float | None = None) -> str:
        """Kubernetes' metav1.Time form: second precision, UTC, `Z` suffix."""
        return format_time(self.now() if t is None else t)

    def rfc3339_micro(self, t: float | None = None) -> str:
        """metav1.MicroTime form, used by Leases and events.k8s.io."""
        t = self.now() if t is None else t
        # datetime's own rounding (half to even, carrying into the second), with the second's text
        # from format_time's cache: the audit log stamps every request twice. `t - sec` is exact
        # (math.modf's fraction, without its call), and the six digits are two table lookups
        # (`{us:06d}` parsed its format spec on every call: a third of the method)
        sec = int(t)
        us = round((t - sec) * 1e6)
        if us >= 1_000_000:
            sec, us = sec + 1, us - 1_000_000
        elif us < 0:
            sec, us = sec - 1, us + 1_000_000
        if sec != _last_micro[0]:
            _last_micro[:] = sec, format_time(sec)[:-1] + "."
        return f"{_last_micro[1]}{_DIGITS3[us // 1000]}{_DIGITS3[us % 1000]}Z"


def format_time(t: float) -> str:
    """metav1.Time text of `t`; the last second's text is kept, since every
    write in that second (managedFields, conditions, events) asks for it."""
    sec = int(t)
    if sec != _last[0]:
        _last[:] = sec, _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _last[1]


_last: list = [None, ""]
#: "000" to "999": a MicroTime's fraction is two of them
_DIGITS3 = tuple(f"{i:03d}" for i in range(1000))
#: the last second rfc3339_micro wrote, and its text up to the fraction (every new Event asks)
_last_micro: list = [None, ""]


#: one Gregorian cycle: 400 years, 146,097 days
_GREGORIAN_CYCLE = 146_097 * 86_400


def parse_time(s: str) -> float:
    """Parse RFC3339 (with or without fraction); returns epoch seconds. Year 0000 too, which Go's
    time.Parse reads and the API keeps: datetime starts at year 1, so it is read 400 years on (the same
    place in the Gregorian cycle) and moved back."""
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    if s.startswith("0000"):
        return _dt.datetime.fromisoformat("0400" + s[4:]).timestamp() - _GREGORIAN_CYCLE
    return _dt.datetime.fromisoformat(s).timestamp()


class VirtualClock(Clock):
    """Virtual time: it stands still until `advance` moves it, and sleepers
    wake in deadline order at their own instant; time moves on only once the
    loop has nothing left to run, so what a wake-up sets off happens at that
    instant and a simulated day runs in moments."""

    def __init__(self, start: float = 1_800_000_000.0, max_turns: int = 100_000):
        self._now = start
        self._mono = 0.0
        self._max_turns = max_turns
        self._sleepers: list[tuple[float, int, asyncio.Future]] = []
        self._seq = itertools.count()
        #: sleepers woken so far (a discrete-event run's event count)
        self.wakeups = 0

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    def call_later(self, seconds: float, callback: Callable[[], object]) -> asyncio.Future:
        """A timer among the sleepers: `advance` calls `callback` when it reaches the deadline."""
        fut = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda f: f.cancelled() or callback())
        heapq.heappush(self._sleepers, (self._mono + max(seconds, 0.0), next(self._seq), fut))
        return fut

    def next_due(self) -> float | None:
        """The monotonic instant of the earliest live sleeper (None: nobody
        sleeps); sleepers whose task was cancelled are dropped, not waited for."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, waking each sleeper due on the way."""
        end = self._mono + seconds
        await self._settle()
        while (due := self.next_due()) is not None and due <= end:
            fut = heapq.heappop(self._sleepers)[2]
            self._set(due)
            fut.set_result(None)
            self.wakeups += 1
            await self._settle()
        self._set(end)
        await self._settle()

    def _set(self, mono: float) -> None:
        self._now += mono - self._mono
        self._mono = mono

    async def _settle(self) -> None:
        """Yield until no callback is ready (asyncio's run queue is empty):
        every task is waiting on a sleeper, I/O or a real timer."""
        loop = asyncio.get_running_loop()
        for _ in range(self._max_turns):
            await asyncio.sleep(0)
            if not getattr(loop, "_ready", None):
                return


REAL = Clock()
