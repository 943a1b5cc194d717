"""In-process change stream shared by the local backends (memory, SQLite).

Keeps a bounded window of recent events so a watcher can resume from a recent
revision, and fans every new event out to live subscribers in order.

The API server's watch cache is the one follower: it subscribes once and follows
live, resuming only after an error, from the last event it applied, and relisting
when that is gone. The window therefore only has to cover such a gap; the watch
cache keeps the history clients resume from. Each event holds the object's bytes
(and its previous ones), so a window of 100,000 events held about 8 KiB per
object of a cluster of 10,000 pods for nobody, and one of 10,000 still about
4 KiB; 2,000 events cover the half second the cache waits before resuming at
4,000 writes a second.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from collections.abc import Callable
from typing import AsyncIterator

from .interface import Compacted, Event

_CLOSED = object()
_LOST = object()


class History:
    def __init__(self, start_revision: int, window: int = 2_000):
        self._events: deque[Event] = deque()
        self._revs: deque[int] = deque()
        self._window = window
        self._compacted = start_revision
        #: in the order they subscribed (not a set of objects, whose order is their addresses'): each event
        #: wakes their readers in the same order every run
        self._subscribers: dict[asyncio.Queue, None] = {}
        #: called with each event as it is appended (see follow)
        self._followers: list[Callable[[Event], None]] = []
        #: each follower's function told when the history starts over (see reset)
        self._lost: dict[Callable[[Event], None], Callable[[], None] | None] = {}

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    def append(self, event: Event) -> None:
        self._events.append(event)
        self._revs.append(event.revision)
        if len(self._events) > self._window:
            self._compacted = self._revs[0]
            self._events.popleft()
            self._revs.popleft()
        for q in self._subscribers:
            q.put_nowait(event)
        for fn in self._followers:
            fn(event)

    def compact(self, revision: int) -> None:
        while self._revs and self._revs[0] <= revision:
            self._events.popleft()
            self._revs.popleft()
        self._compacted = max(self._compacted, revision)

    def since(self, revision: int) -> list[Event]:
        if revision < self._compacted:
            raise Compacted(revision, self._compacted)
        i = bisect.bisect_right(self._revs, revision)
        return list(self._events)[i:] if i < len(self._events) else []

    def reset(self, revision: int) -> None:
        """The events up to `revision` will never be appended (a shared SQLite worker that fell
        behind the change log's window): forget the window, end every watch with Compacted, and stop
        every follower, calling its `lost` (the watch cache relists)."""
        self._events.clear()
        self._revs.clear()
        self._compacted = revision
        for q in self._subscribers:
            q.put_nowait(_LOST)
        followers, self._followers = self._followers, []
        lost, self._lost = self._lost, {}
        for fn in followers:
            if lost.get(fn) is not None:
                lost[fn]()

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None]:
        """Calls `apply` with every event after `from_revision` now, then with each new one as it is
        appended, in the same call: the watch cache takes a commit's events while the store publishes
        them, instead of a loop turn later through a queue and its task. Returns the function that
        stops it. Raises Compacted as `since` does; `apply` must not raise. `lost` is called instead
        of `apply` if the history starts over (see reset)."""
        for ev in self.since(from_revision):
            apply(ev)
        self._followers.append(apply)
        self._lost[apply] = lost

        def stop() -> None:
            if apply in self._followers:
                self._followers.remove(apply)
                self._lost.pop(apply, None)

        return stop

    async def watch(self, from_revision: int) -> AsyncIterator[Event]:
        backlog = self.since(from_revision)
        q: asyncio.Queue = asyncio.Queue()
        self._subscribers[q] = None
        try:
            last = from_revision
            for ev in backlog:
                last = ev.revision
                yield ev
            while True:
                ev = await q.get()
                if ev is _CLOSED:
                    return
                if ev is _LOST:
                    raise Compacted(last, self._compacted)
                if ev.revision > last:
                    last = ev.revision
                    yield ev
        finally:
            self._subscribers.pop(q, None)

    def close(self) -> None:
        for q in self._subscribers:
            q.put_nowait(_CLOSED)
