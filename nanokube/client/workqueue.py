"""A client-go style work queue: keys are deduplicated while waiting, never
processed by two workers at once, and re-added with per-key exponential
backoff on failure. A key delayed twice waits once, for the earlier time
(client-go's delaying queue), so periodic requeues never pile up.

A queue given a QueueStats (WorkQueueMetrics.stats) keeps client-go's
workqueue metrics for its name: plain numbers on the hot path, turned into
Prometheus families only when scraped."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterator

from prometheus_client import CollectorRegistry

from ..clock import REAL, Clock
from ..machinery.backoff import doubling
from ..machinery.metrics import Family, exponential_buckets

#: component-base's workqueue histogram buckets (ExponentialBuckets(10e-9, 10, 10)): 10 ns to 10 s
BUCKETS = exponential_buckets(10e-9, 10, 10)


class QueueStats:
    """One queue name's series of the workqueue metrics (the `name` label's children upstream):
    queues of one name share them, as a new leadership term's queue continues the last one's."""

    __slots__ = ("adds", "retries", "depth", "queued", "work", "unfinished", "longest", "added", "started")

    def __init__(self, name: str, m: WorkQueueMetrics) -> None:
        self.adds, self.retries, self.depth = m.adds.labels(name), m.retries.labels(name), m.depth.labels(name)
        self.queued, self.work = m.queue_duration.labels(name), m.work_duration.labels(name)
        self.unfinished, self.longest = m.unfinished.labels(name), m.longest.labels(name)
        #: key -> when it was added, until a worker gets it (queue_duration_seconds)
        self.added: dict[Hashable, float] = {}
        #: key -> when a worker got it, until done (work_duration_seconds, unfinished work)
        self.started: dict[Hashable, float] = {}


class WorkQueueMetrics:
    """client-go's workqueue metrics provider as a Prometheus collector: register it on a
    registry and hand each named queue its `stats(name)`. The families live on a registry of
    their own; a scrape first works out the unfinished work of the items in progress (client-go
    refreshes those two gauges every half second)."""

    def __init__(self, clock: Clock = REAL) -> None:
        self.clock = clock
        self._stats: dict[str, QueueStats] = {}
        r = self._families = CollectorRegistry()
        label = ["name"]
        # component-base's HELP texts (metrics/prometheus/workqueue), all ALPHA
        self.depth = Family("gauge", "workqueue_depth", "[ALPHA] Current depth of workqueue", label, r)
        self.adds = Family("counter", "workqueue_adds_total", "[ALPHA] Total number of adds handled by workqueue",
                           label, r)
        self.queue_duration = Family("histogram", "workqueue_queue_duration_seconds",
                                     "[ALPHA] How long in seconds an item stays in workqueue before being requested.",
                                     label, r, BUCKETS)
        self.work_duration = Family("histogram", "workqueue_work_duration_seconds",
                                    "[ALPHA] How long in seconds processing an item from workqueue takes.", label, r,
                                    BUCKETS)
        self.unfinished = Family("gauge", "workqueue_unfinished_work_seconds",
                                 "[ALPHA] How many seconds of work has done that is in progress and hasn't been "
                                 "observed by work_duration. Large values indicate stuck threads. One can deduce the "
                                 "number of stuck threads by observing the rate at which this increases.", label, r)
        self.longest = Family("gauge", "workqueue_longest_running_processor_seconds",
                              "[ALPHA] How many seconds has the longest running processor for workqueue been running.",
                              label, r)
        self.retries = Family("counter", "workqueue_retries_total", "[ALPHA] Total number of retries handled by workqueue",
                              label, r)

    def stats(self, name: str) -> QueueStats | None:
        """The series for `name`; none for an unnamed queue, which upstream does not meter."""
        if not name:
            return None
        s = self._stats.get(name)
        if s is None:
            s = self._stats[name] = QueueStats(name, self)
        return s

    def describe(self) -> Iterator:
        return (m for f in (self.depth, self.adds, self.queue_duration, self.work_duration, self.unfinished,
                            self.longest, self.retries) for m in f.describe())

    def collect(self) -> Iterator:
        now = self.clock.monotonic()
        for s in self._stats.values():
            ages = [now - t for t in s.started.values()]
            s.unfinished.set(sum(ages))
            s.longest.set(max(ages, default=0.0))
        return self._families.collect()


class WorkQueue:
    def __init__(self, clock: Clock = REAL, base_delay: float = 0.005, max_delay: float = 60.0,
                 stats: QueueStats | None = None):
        self.clock = clock
        self._queue: asyncio.Queue = asyncio.Queue()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._base, self._max = base_delay, max_delay
        self._timers: dict[Hashable, tuple[float, asyncio.Task]] = {}
        #: client-go's queue metrics for this queue's name; None: not metered
        self.stats = stats

    def add(self, key: Hashable) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        m = self.stats
        if m is not None:
            m.adds.inc()
            m.depth.inc()
            if key not in m.added:
                m.added[key] = self.clock.monotonic()
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        """Every delayed add counts as a retry, as client-go's AddAfter counts it."""
        if self.stats is not None:
            self.stats.retries.inc()
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
        self.add_after(key, doubling(self._base, n, self._max))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        """How many rate-limited retries of `key` since it was last forgotten (client-go's NumRequeues)."""
        return self._failures.get(key, 0)

    async def get(self) -> Hashable:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        m = self.stats
        if m is not None:
            now = self.clock.monotonic()
            m.depth.dec()
            m.started[key] = now
            added = m.added.pop(key, None)
            if added is not None:
                m.queued.observe(now - added)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        m = self.stats
        if m is not None:
            started = m.started.pop(key, None)
            if started is not None:
                m.work.observe(self.clock.monotonic() - started)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        return self._queue.qsize()

    def shutdown(self) -> None:
        """Cancel the delayed adds. The queue's keys leave its metrics with it, and it is metered
        no more: a stopped term's waiting keys must not stay in the depth, nor its cancelled
        items count as unfinished work, nor a key's wait span terms."""
        for _, t in self._timers.values():
            t.cancel()
        m, self.stats = self.stats, None
        if m is not None:
            for key in self._dirty:
                m.depth.dec()
                m.added.pop(key, None)
            for key in self._processing:
                m.started.pop(key, None)
