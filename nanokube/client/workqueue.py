"""A client-go style work queue: keys are deduplicated while waiting, never
processed by two workers at once, and re-added with per-key exponential
backoff on failure. A key delayed twice waits once, for the earlier time
(client-go's delaying queue), so periodic requeues never pile up."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from ..clock import REAL, Clock


class WorkQueue:
    def __init__(self, clock: Clock = REAL, base_delay: float = 0.005, max_delay: float = 60.0):
        self.clock = clock
        self._queue: asyncio.Queue = asyncio.Queue()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._base, self._max = base_delay, max_delay
        self._timers: dict[Hashable, tuple[float, asyncio.Task]] = {}

    def add(self, key: Hashable) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        ready = self.clock.monotonic() + delay
        waiting = self._timers.get(key)
        if waiting is not None:
            if waiting[0] <= ready:
                return
            waiting[1].cancel()

        async def later():
            await self.clock.sleep(delay)
            if self._timers.get(key, (0, None))[1] is task:
                del self._timers[key]
            self.add(key)

        task = asyncio.create_task(later())
        self._timers[key] = (ready, task)

    def add_rate_limited(self, key: Hashable) -> None:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, min(self._base * (2 ** n), self._max))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    async def get(self) -> Hashable:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        return self._queue.qsize()

    def shutdown(self) -> None:
        for _, t in self._timers.values():
            t.cancel()
