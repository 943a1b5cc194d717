"""Shared helpers for the node-agent tests: a clock the test advances by hand."""

from __future__ import annotations

import asyncio
import heapq
import itertools

from nanokube.clock import Clock


class ManualClock(Clock):
    """Time moves only when the test calls `advance`; sleepers wake in order."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.t = start
        self._mono = 0.0
        self._sleepers: list = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        end = self._mono + seconds
        while self._sleepers and self._sleepers[0][0] <= end:
            due, _, fut = heapq.heappop(self._sleepers)
            self.t += due - self._mono
            self._mono = due
            if not fut.done():
                fut.set_result(None)
            for _ in range(20):
                await asyncio.sleep(0)
        self.t += end - self._mono
        self._mono = end
        for _ in range(20):
            await asyncio.sleep(0)
