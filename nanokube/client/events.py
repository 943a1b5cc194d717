"""events.k8s.io/v1 Events as client-go's events recorder (tools/events) writes them.

Repeats of an isomorphic event (same type, action, reason, reporting controller and
instance, regarding and related object references; the note is not compared) fold into one
Event's series: the first repeat patches `series: {count: 2, lastObservedTime}` onto the
Event, later ones only count in memory. Every 30 minutes each series is patched with its
count (a write, so the API server's --event-ttl starts over), and every 6 minutes a series
observed last more than 6 minutes ago gets a final write and leaves the cache, as does a
singleton older than that. A component that keeps reporting the same thing (a pod that fits
nowhere, retried every 5 to 5.5 minutes) keeps its Event, at a few writes an hour.

The references compare whole, resourceVersion included, as upstream's: an object changed
between two reports is another object to the cache.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import socket

from ..clock import Clock
from ..machinery.errors import APIError

log = logging.getLogger(__name__)

#: upstream's finishTime, refreshTime, maxTriesPerEvent and defaultSleepDuration
FINISH_TIME = 360.0
REFRESH_TIME = 1800.0
MAX_TRIES = 12
#: upstream's maxQueuedEvents: Events `post`ed and not yet written, past which new ones are dropped
MAX_QUEUED = 1000
RETRY_SLEEP = 10.0
SMP = "application/strategic-merge-patch+json"


def _ref_key(ref: dict | None) -> tuple:
    """An ObjectReference as a comparable value (a missing field and an empty one are the same);
    spelled out, as a pending pod's every attempt makes one."""
    if not ref:
        return ()
    get = ref.get
    return (get("kind") or "", get("namespace") or "", get("name") or "", get("uid") or "",
            get("apiVersion") or "", get("resourceVersion") or "", get("fieldPath") or "")


class _Cached:
    """An Event in the cache: as created, with its series kept apart (count 0: a singleton)
    and `last` the time it was last observed."""

    __slots__ = ("event", "count", "last")

    def __init__(self, event: dict, last: float) -> None:
        self.event, self.count, self.last = event, 0, last


class EventQueue:
    """A broadcaster's incoming queue and the task that drains it (upstream's watch.Broadcaster made
    with maxQueuedEvents and DropIfChannelFull, and the goroutine handing them to the sink): `post`
    returns at once, as upstream's recorders never wait for the API server; `handle` gets each item
    in the order posted, one at a time. With MAX_QUEUED waiting a new one is dropped. The task
    starts with the first `post`; `close` ends it (what it was handling included) and drops what
    is still queued, as Shutdown's cancelation does, and later posts are dropped."""

    def __init__(self, handle) -> None:
        self._handle = handle
        self._items: collections.deque = collections.deque()
        self._posted: asyncio.Future | None = None
        self._task: asyncio.Task | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    def open(self) -> None:
        """Takes posts again after a `close` (a component started again)."""
        self._closed = False

    def post(self, item) -> None:
        if self._closed:
            return
        if len(self._items) >= MAX_QUEUED:
            log.warning("event queue full: dropping an event (%d waiting)", len(self._items))
            return
        self._items.append(item)
        if self._posted is not None and not self._posted.done():
            self._posted.set_result(None)
        elif self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def close(self) -> None:
        self._closed = True
        self._items.clear()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._task = self._posted = None

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while self._items:
                try:
                    await self._handle(self._items.popleft())
                except Exception:
                    log.exception("writing an event")
            self._posted = loop.create_future()
            await self._posted
            self._posted = None


class EventBroadcaster:
    """One per component: the cache of recent Events its recorders share, their writes,
    and the refresh and finish loops, on the component's clock (`start`, `stop`)."""

    def __init__(self, client, clock: Clock) -> None:
        self.events = client.resource("events.k8s.io", "v1", "events")
        self.clock = clock
        self.cache: dict[tuple, _Cached] = {}
        self._seq = 0
        self._filled = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._queue = EventQueue(self._spawn)
        #: the writes `post`ed Events are on, each on a task of its own
        self._writes: set[asyncio.Task] = set()

    def recorder(self, controller: str, instance: str | None = None) -> EventRecorder:
        """Events reported by `controller` (reportingInstance `controller-hostname` by default)."""
        return EventRecorder(self, controller, instance or f"{controller}-{socket.gethostname()}")

    def start(self) -> None:
        self._queue.open()
        self._tasks = [asyncio.create_task(self._every(REFRESH_TIME, self.refresh)),
                       asyncio.create_task(self._every(FINISH_TIME, self.finish))]

    async def stop(self) -> None:
        """Ends the loops and the writer; Events still queued are dropped, as upstream's are once
        its broadcaster is shut down."""
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self._queue.close()
        writes = list(self._writes)
        for t in writes:
            t.cancel()
        await asyncio.gather(*writes, return_exceptions=True)

    def post(self, event: dict) -> None:
        """Queues an Event `record` returned for the broadcaster's writer task (EventQueue): a slow
        or failing API server delays no caller (a scheduler's failure report, then its
        PodScheduled=False, waited on each Event's write)."""
        self._queue.post(event)

    def pending(self) -> int:
        """Events posted and not yet written (queued, or their write in progress or retrying)."""
        return len(self._queue) + len(self._writes)

    async def _spawn(self, event: dict) -> None:
        """recordToSink: the Event's `write`, retries included, on a task of its own, as upstream's
        starts a goroutine per Event; one retrying holds up no other."""
        task = asyncio.ensure_future(self.write(event))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _every(self, period: float, run) -> None:
        """`run` every `period`, as upstream's wait.Until; while the cache is empty no timer is
        set (a virtual clock then jumps past the idle time)."""
        while True:
            if not self.cache:
                self._filled.clear()
                await self._filled.wait()
            await self.clock.sleep(period)
            await run()

    def add(self, key: tuple, event: dict, now: float) -> dict:
        """A new event, observed at `now`: cached under `key`; returns it, for the caller to `write`.
        The refresh and finish loops clear `_filled` only while the cache is empty, so only the
        first entry of an empty cache needs to set it."""
        if not self.cache:
            self._filled.set()
        self.cache[key] = _Cached(event, now)
        return event

    def repeat(self, cached: _Cached) -> dict | None:
        """Another occurrence of a cached event: the Event to `write` (the series' first patch), or
        None (counted in memory)."""
        cached.last = self.clock.now()
        if cached.count:
            cached.count += 1
            return None
        cached.count = 2
        return self._with_series(cached)

    def _with_series(self, cached: _Cached) -> dict:
        return {**cached.event, "series": {"count": cached.count,
                                           "lastObservedTime": self.clock.rfc3339_micro(cached.last)}}

    async def refresh(self) -> None:
        """Every series' count to the server (refreshExistingEventSeries)."""
        for cached in list(self.cache.values()):
            if cached.count:
                await self._record(self._with_series(cached))

    async def finish(self) -> None:
        """A series observed last over FINISH_TIME ago is written a last time and forgotten,
        as is a singleton that old (finishSeries)."""
        horizon = self.clock.now() - FINISH_TIME
        for key, cached in list(self.cache.items()):
            if cached.last >= horizon:
                continue
            if cached.count and (await self._record(self._with_series(cached)))[1]:
                continue
            if self.cache.get(key) is cached and cached.last < horizon:
                del self.cache[key]

    async def write(self, event: dict) -> None:
        """attemptRecording: the write of an Event `record` returned, tried again after a transport
        error. Its coroutine is made only by a caller about to await it or queue it as a task: one
        made in `record` was dropped unawaited whenever its caller's queue was (a scheduler stopped
        with failure reports waiting)."""
        for _ in range(MAX_TRIES - 1):
            if not (await self._record(event))[1]:
                return
            await self.clock.sleep(RETRY_SLEEP * (1 + 0.25 * random.random()))
        if (await self._record(event))[1]:
            log.error("unable to write event %s (retry limit exceeded)", event["metadata"]["name"])

    async def _record(self, event: dict) -> tuple[dict | None, bool]:
        """recordEvent: a series is patched (created if the Event is gone: it expired), a singleton
        created. Returns the server's Event (None from a create: the recorder drops that answer, as
        upstream's does, so it does not ask for it) and whether to try again: only after a transport error,
        or when creating a series' Event found it created meanwhile."""
        md = event["metadata"]
        series = event.get("series")
        try:
            if series is not None:
                try:
                    return await self.events.patch(md["name"], {"series": series}, SMP, namespace=md["namespace"]), False
                except APIError as e:
                    if e.code != 404:
                        raise
            return await self.events.create(event, response=False), False
        except APIError as e:
            if e.reason == "AlreadyExists" and series is not None:
                return None, True
            log.info("server rejected event %s/%s (will not retry): %s", md["namespace"], md["name"], e.message)
            return None, False
        except Exception as e:  # a transport error: the server may be back on the next try
            log.info("unable to write event %s/%s (may retry): %s", md["namespace"], md["name"], e)
            return None, True


class EventRecorder:
    """Records Events reported by one controller through its broadcaster (upstream's
    recorderImpl; kube-scheduler has one per profile)."""

    def __init__(self, broadcaster: EventBroadcaster, controller: str, instance: str) -> None:
        self.broadcaster, self.controller, self.instance = broadcaster, controller, instance

    def record(self, regarding: dict, related: dict | None, type_: str, reason: str, action: str,
               note: str) -> dict | None:
        """An Event about the object `regarding` references (an ObjectReference); returns the
        Event to write (created, or the series' first patch) for the caller to pass to the
        broadcaster's `write` now or later, or None: nothing to write. A repeat builds no Event."""
        b = self.broadcaster
        key = (type_, action, reason, self.controller, self.instance, _ref_key(regarding),
               _ref_key(related) if related else ())
        cached = b.cache.get(key)
        if cached is not None:
            return b.repeat(cached)
        now = b.clock.now()  # one instant for the name, eventTime and the cache, as upstream's one timestamp
        # the name: the object's, and `now` in nanoseconds made unique (virtual time stands still)
        b._seq += 1
        name = f"{regarding['name']}.{int(now * 1e9) + b._seq:x}"
        ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
              "metadata": {"name": name, "namespace": regarding.get("namespace") or "default"},
              "eventTime": b.clock.rfc3339_micro(now), "reportingController": self.controller,
              "reportingInstance": self.instance, "action": action, "reason": reason, "type": type_,
              "note": note, "regarding": regarding}
        if related is not None:
            ev["related"] = related
        return b.add(key, ev, now)

    async def event(self, regarding: dict, related: dict | None, type_: str, reason: str, action: str,
                    note: str) -> None:
        """`record`, waiting for its write."""
        event = self.record(regarding, related, type_, reason, action, note)
        if event is not None:
            await self.broadcaster.write(event)
