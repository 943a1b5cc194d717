"""The watch cache: the API server's in-memory mirror of the store.

Like kube-apiserver's cacher, it lists the store once, then follows the store's
change stream. Reads (get, list) are served from it, and every client watch is
a filter over its event stream, so a thousand watchers cost one store watch.
Each resource keeps its own history of recent events, sized as upstream's
watchCache sizes it, from which a watch resumes at a recent resourceVersion;
one older than that resource's history is 410 Gone, whatever other resources
wrote meanwhile. Lists at an earlier revision (continue tokens, Exact) read a
window of every resource's recent events, as upstream hands them to etcd.

Cached objects are decoded once, carry their resourceVersion, and are treated
as immutable by every reader.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
import math
import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from sortedcontainers import SortedList

from ..clock import REAL, Clock
from ..machinery import encoded as json_memo
from ..machinery.fieldorder import in_unstructured_order, in_upstream_order
from ..machinery.responses import go_escaped
from ..store.interface import DELETE, KV, Compacted, Event, Store

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

# Encoded watch events remembered for fan-out: enough for the events of a
# burst of writes to reach every watcher before they are evicted.
_ENCODED_MEMO = 512
# Objects handed over by writes in flight (see WatchCache.expect); a write that fails leaves
# its hand-over behind until this many newer ones push it out.
_WRITTEN_MAX = 1024
# JSON bytes of the distinct spec values kept for sharing (see WatchCache._share_spec), values
# that may outlive their objects; past it the table starts over.
_SHARED_MAX = 8 << 20
# A value joins that table only once a second object holds it: the values seen in one object so
# far are noted by the hash of their JSON, this many at most (then the notes start over; they hold
# the values, which may outlive their objects too). A pod's own token volume and its mounts in each
# container (ServiceAccount admission names it kube-api-access-<random>) never repeat in another
# pod, and each filled the table by ~110 bytes per pod until it started over, dropping every pod's
# shared values with them.
_SEEN_ONCE = 4096
# A spec field of a resource whose values found in that table (or held by an object before) come
# to under a quarter of the JSON of its values seen for the first time, once those come to this
# many bytes, is no longer shared until the table starts over, or until _SHARE_REPROBE more objects were shared (the table no longer fills
# with values that never repeat, so it seldom starts over): a ResourceSlice's devices and their
# attributes (GPUs' UUIDs) never repeat, their capacities and a pod's containers do. At most
# _SHARE_FIELDS are tracked.
_SHARE_PROBE = 1 << 20
_SHARE_FIELDS = 4096
_SHARE_REPROBE = 200_000
# Whole specs already shared, by their JSON (see WatchCache._share_spec): the pods of one template
# (a ReplicaSet's, a benchmark's) have one, so a create takes it whole instead of field by field.
# At most _SPECS of them; a resource whose specs missed _SPEC_TRIES times in a row is looked up for
# one spec in _SPEC_TRIES only, until one hits.
_SPECS = 256
_SPEC_TRIES = 32
#: the metadata fields a decoded object shares with the objects cached before it (see WatchCache._decoded):
#: those that the objects made from one template (a ReplicaSet's pods) repeat
_SHARED_META = ("labels", "annotations", "ownerReferences", "finalizers")
# Past versions (the objects events replaced or deleted) stay decoded while their event is
# among this many newest; older ones keep only their encoded JSON (about a third of the
# memory) until a watcher resuming from far back reads them again.
_DECODED_HISTORY = 1024
# A resource relisted on its own while its values do not all read (see WatchCache.relist) is listed
# again after this many seconds, twice as long each time up to the second: upstream's reflector
# backs off its failed relists so (800 ms to 30 s).
_RELIST_BACKOFF = (0.8, 30.0)
# A relist that the resource's own events overtook (applied past the list's revision while it was
# read) is read again, at most this many times.
_RELIST_TRIES = 5


class CacheStats:
    """Counts behind kube-apiserver's watch cache metrics, per resource prefix: the events the
    cache received from the store (each one dispatched to the watchers at once, so also the
    dispatched ones), its initializations (a list of the store at start and at each relist, which
    upstream's reflector makes through the storage, so also the storage's lists and the objects
    they read), the initial events handed to new watches, the watches ended for falling behind,
    and the lists it served: [lists, objects read, objects returned]."""

    __slots__ = ("received", "inits", "init_objects", "init_events", "terminated", "lists", "capacity", "increases",
                 "decreases")

    def __init__(self) -> None:
        self.received: dict[str, int] = {}
        self.inits: dict[str, int] = {}
        self.init_objects: dict[str, int] = {}
        self.init_events: dict[str, int] = {}
        self.terminated: dict[str, int] = {}
        self.lists: dict[str, list[int]] = {}
        #: the capacity of each resource's watch cache that changed (see CAPACITY_MIN), and its changes
        self.capacity: dict[str, int] = {}
        self.increases: dict[str, int] = {}
        self.decreases: dict[str, int] = {}

    @staticmethod
    def add(counts: dict[str, int], prefix: str, n: int) -> None:
        counts[prefix] = counts.get(prefix, 0) + n

    def initialized(self, objects: dict[str, dict]) -> None:
        for rp, objs in objects.items():
            self.add(self.inits, rp, 1)
            self.add(self.init_objects, rp, len(objs))

    def resized(self, prefix: str, was: int, capacity: int) -> None:
        self.capacity[prefix] = capacity
        self.add(self.increases if capacity > was else self.decreases, prefix, 1)

    def listed(self, prefix: str, fetched: int, returned: int) -> None:
        """A list of `prefix` (a resource's or a namespace's) served: `fetched` entries read, `returned` sent."""
        counts = self.lists.get(rp := _bucket(prefix))
        if counts is None:
            counts = self.lists[rp] = [0, 0, 0]
        counts[0] += 1
        counts[1] += fetched
        counts[2] += returned

    def watched(self, prefix: str, initial: int) -> None:
        """A watch of `prefix` starts with `initial` events (its list, or those since its revision)."""
        if initial:
            self.add(self.init_events, _bucket(prefix), initial)


@dataclass(slots=True)
class Entry:
    """A cached object at its revision. Those loaded at start keep the stored
    bytes and decode on first use, so a restart over many objects is ready
    without decoding the ones nobody has asked for yet."""

    _obj: dict | None
    rev: int
    _raw: bytes | None = None
    _stored: bytes | None = None
    #: decodes `_stored` sharing values with the cached objects (WatchCache.decoder); `decode` where None
    _decode: Callable[[bytes, int], dict] | None = None
    #: the length of the JSON it was stored as (0 where unknown): how a write judges its size (rest._large)
    size: int = 0
    #: the store's KV of a version this server wrote, and where the resourceVersion goes in its
    #: bytes (served_json, -1: not known): `raw` then splices instead of encoding the object again
    #: (a pod's first GET or watch event), keeping the KV without its value (see `kv`)
    _kv: KV | None = None
    _at: int = -1

    @property
    def obj(self) -> dict:
        if self._obj is None:
            if self._stored is None:  # a past version kept as its JSON, read again (a watch from far back)
                # kept once decoded: readers rely on getting the same object (conversion memos by identity)
                self._obj = orjson.loads(self._raw)
            else:
                self._obj = (self._decode or decode)(self._stored, self.rev)
                self._stored = self._decode = None
        return self._obj

    def keep_encoded(self) -> None:
        """A past version: keep its JSON and let the decoded object go. The JSON is the bytes it
        was stored as where the cache was handed them (`replaced`), else its served JSON, encoded
        now (a pod's, ~40 k instructions, paid 1024 events after each of its updates)."""
        if self._obj is not None:
            if self._stored is None:
                self.raw
            self._obj = None

    def replaced(self, kv: KV | None, unstructured: bool = False) -> None:
        """A write replaced or deleted this version; `kv` is what the store's event says was
        stored before it. When that is this version, its bytes are kept for `keep_encoded`,
        which then encodes nothing: they decode to the same object (they were encoded from it;
        a custom resource's as one, `unstructured`)."""
        if kv is not None and kv.mod_revision == self.rev and self._stored is None and self._raw is None:
            self._stored = kv.value
            if unstructured:
                self._decode = _decode_unstructured

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            kv = self._kv
            if kv is None or self._at < 0:
                self._raw = compact_dumps(self.obj)
                self._kv = None
            else:  # the bytes go: keeping them as well would hold the object's JSON twice
                self._raw = served_json(kv.value, self._at, self.rev, b"")
                self._kv = KV(kv.key, b"", kv.create_revision, kv.mod_revision)
        return self._raw

    @property
    def kv(self) -> KV | None:
        """The store's KV of this version where this server wrote it, which an update hands the
        store as the one its precondition names (`Store.update`'s prev: nothing is read first);
        once `raw` took the bytes' place, rebuilt from it (the bytes are `raw` less the
        resourceVersion `served_json` put at `_at`). None for an entry loaded at start or decoded
        from an event."""
        kv, raw = self._kv, self._raw
        if kv is None or raw is None:
            return kv
        at = self._at
        return KV(kv.key, raw[:at] + raw[at + len(b',"resourceVersion":"%d"' % self.rev):], kv.create_revision, self.rev)

    # A list page reads these of every entry: the slots straight, and the properties only where
    # they have work to do (three property calls per entry were a third of a 500-pod page's list).

    @staticmethod
    def objects(entries: list[Entry]) -> list[dict]:
        """`obj` of each entry."""
        return [e._obj or e.obj for e in entries]

    @staticmethod
    def kept_json(entries: list[Entry], served: list[dict]) -> list[bytes | None]:
        """`raw` of each entry served as it is cached (`served[i]` is its `obj`); None for one
        converted for the client."""
        return [(e._raw or e.raw) if o is e._obj else None for e, o in zip(entries, served)]


@dataclass(slots=True)
class CacheEvent:
    type: str
    key: str
    entry: Entry
    prev: Entry | None
    rev: int
    #: when the cache took it (the clock's monotonic seconds): its resource's history is sized by it
    at: float = 0.0


class EventQueue(asyncio.Queue):
    """A watch's queue: asyncio.Queue with a lighter put_nowait and get. The cache puts each event
    into the queue of every watch of its resource (every in-process pod informer), and the stock
    methods' helper calls and join() bookkeeping (nothing joins or puts awaiting into a watch's
    queue) were a third of handing an event over. It takes every event it is handed: how far a
    watch may fall behind is the cache's to judge (`Watcher.size`)."""

    def __init__(self) -> None:
        super().__init__()
        #: called as each event is taken while the watch is blocked (`WatchCache._block`)
        self.taken: Callable[[], None] | None = None

    def put_nowait(self, item) -> None:
        q = self._queue
        q.append(item)
        getters = self._getters
        while getters:
            getter = getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    async def get(self):
        q = self._queue
        while not q:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                # cancelled, or woken and then cancelled: leave the wake-up to the next waiter
                getter.cancel()
                if getter in self._getters:
                    self._getters.remove(getter)
                if q and not getter.cancelled():
                    self._wakeup_next(self._getters)
                raise
        item = q.popleft()
        if self.taken is not None:
            self.taken()
        return item


#: a watch's buffer (`Watcher.size`), as upstream's cacheWatcher's channel (suggestedWatchChannelSize):
#: about a second of its resource's events, its watch cache's capacity (see CAPACITY_MIN) over
#: EVENT_FRESH seconds, at least WATCH_BUFFER_MIN and at most WATCH_BUFFER_TRIGGERED for a watch of one
#: value of its resource's trigger field (a node's pods by spec.nodeName), WATCH_BUFFER_INDEXED for any
#: other watch of such a resource, WATCH_BUFFER_OTHER for any other resource's
WATCH_BUFFER_MIN = 10
WATCH_BUFFER_TRIGGERED = 10
WATCH_BUFFER_INDEXED = 1000
WATCH_BUFFER_OTHER = 100
EVENT_FRESH = 75.0
#: the capacity of a resource's watch cache (upstream's watchCacheHistory, in events): it starts at
#: CAPACITY_MIN; an event that finds it full doubles it (up to CAPACITY_MAX) when the oldest event it
#: holds came less than EVENT_FRESH seconds before, and halves it (down to CAPACITY_MIN, keeping the
#: newest) when the oldest of its newest quarter came more than EVENT_FRESH seconds before, so it
#: follows the events of the last 75 s by powers of two, and only as events come; one that finds it
#: full still drops the oldest. A watch resumes from what it holds (`WatchCache._history`,
#: `events_since`)
CAPACITY_MIN = 100
CAPACITY_MAX = 100 * 1024
#: upstream's dispatchTimeoutBudget (a timeBudget per resource): the seconds its dispatch may wait,
#: all its blocked watchers together, for those whose buffer an event found full, before it closes
#: the ones still full ("Forcing ... watcher close due to unresponsiveness",
#: apiserver_terminated_watchers_total). It starts empty, gains WATCH_BUDGET_REFRESH each whole
#: second of the clock up to WATCH_BUDGET, is taken whole by a dispatch that finds watchers blocked,
#: and gets back what their wait left unused. An in-process informer's task drains its queue
#: whenever it runs, and it is woken before the dispatch's timer is due, so however long the loop
#: was busy it is never ended; a client that reads less than it is sent is, and watches again.
WATCH_BUDGET = 0.1
WATCH_BUDGET_REFRESH = 0.05
#: `Watcher.size` of a watch the cache never ends for falling behind (its own: admission's
#: configuration, the Event TTL's relist watch)
UNBOUNDED = sys.maxsize


@dataclass(eq=False)
class Watcher:
    """One client watch: a queue fed by the cache, filtered by `accept`.

    `direct`, when set, takes an event at once instead (writing it to the client from inside
    `WatchCache._apply`): the cache offers it an event only while the watch's task waits on an
    empty queue (`parked`), so events still go out in order, and queues the event when `direct`
    returns False (a client that does not keep up). That saves a task switch and a generator
    round per watcher and event, which was most of a fan-out's cost. The task's wait for its
    next event then ends only at its bookmark interval, so a watch with bookmarks gets one every
    interval however busy it is (as upstream's cacher sends them: by time, not by quiet)."""

    prefix: str
    #: the event as this watch takes it, or a false value to skip it; True: the event as it is. A watch
    #: with selectors answers with the event retyped where the object came to match them (ADDED) or
    #: stopped matching (DELETED), so that its selectors are matched once an event, here
    accept: Callable[[CacheEvent], CacheEvent | bool | None]
    queue: asyncio.Queue = field(default_factory=EventQueue)
    #: events the queue may hold for long: past them, the watch is blocked (`WatchCache._block`) and
    #: ended as unresponsive unless it is back within them before its resource's budget runs out
    size: int = UNBOUNDED
    overflowed: bool = False
    direct: Callable[[CacheEvent], bool] | None = None
    #: the stored object of the event the stream yielded last: a Table's cells read it, as a list's do
    stored: dict | None = None
    #: the wait this watch is blocked in (its queue past its buffer), which ends it unless its queue
    #: is back within its buffer by the wait's end
    blocked: Blocked | None = None

    @property
    def parked(self) -> bool:
        """The watch's task waits in `queue.get()` for an event (asyncio.Queue lists its waiting getters)."""
        q = self.queue
        return not q.qsize() and bool(q._getters)


class TimeBudget:
    """Upstream's timeBudget (see WATCH_BUDGET) on the cache's clock: its refresh is counted in the
    whole seconds passed since the last one, when it is taken, instead of by a ticker."""

    __slots__ = ("clock", "left", "at")

    def __init__(self, clock: Clock, since: float) -> None:
        """Empty at `since` (its cacher's start, when upstream's starts ticking)."""
        self.clock = clock
        self.left = 0.0
        self.at = since

    def take(self) -> float:
        """All that is left, which leaves none (takeAvailable)."""
        ticks = int(self.clock.monotonic() - self.at)
        if ticks > 0:
            self.at += ticks
            self.left = min(WATCH_BUDGET, self.left + ticks * WATCH_BUDGET_REFRESH)
        left, self.left = self.left, 0.0
        return left

    def give_back(self, unused: float) -> None:
        """What a wait did not use (returnUnused)."""
        if unused > 0:
            self.left = min(WATCH_BUDGET, self.left + unused)


@dataclass(eq=False)
class Blocked:
    """The watches one event (`rev`) took past their buffer, sharing one timer, as the blocked
    watchers of upstream's dispatchEvent share the one its budget sets: those still past it when it
    fires are ended. The last to get back within its buffer ends the wait early, and what it did not
    use goes back to the budget. Watches another event blocks while a wait runs wait in the `next`
    one, whose timer starts when this one ends, with what the budget has then: upstream dispatches
    events one at a time, so a later event reaches its watchers only after the running wait (which
    the blocked ones can use to catch up). A timer is never set before its event, as one could come
    due before the tasks the event woke have run."""

    rev: int
    budget: TimeBudget
    timeout: float = 0.0
    started: float = 0.0
    watchers: dict[Watcher, None] = field(default_factory=dict)
    #: None while it waits for the wait before it (`next` of that one) to end
    timer: asyncio.TimerHandle | asyncio.Future | None = None
    next: Blocked | None = None


def _resource_prefix(key: str) -> str:
    # /registry/<group-resource>/...
    i = key.index("/", len("/registry/"))
    return key[: i + 1]


def _bucket(prefix: str) -> str:
    """The resource prefix a list or watch of `prefix` (a resource's, a namespace's or one key) is kept under."""
    return _resource_prefix(prefix) if prefix.count("/") > 2 else prefix


def compact_dumps(obj: Any) -> bytes:
    """orjson.dumps for bytes that are kept, escaped as Go's encoder does: orjson's result holds a
    buffer of at least 4 KiB, or twice what a pod needs, so kept encodings are copied to their
    exact size (about 1 us)."""
    return memoryview(go_escaped(orjson.dumps(obj))).tobytes()


def decode(value: bytes, rev: int, unstructured: bool = False) -> dict:
    """A stored object as it is served: in upstream's field order (a custom resource's: every map
    sorted), with its resourceVersion."""
    if unstructured:
        return in_unstructured_order(orjson.loads(value), str(rev))
    return in_upstream_order(orjson.loads(value), str(rev))


class WatchCache:
    def __init__(self, store: Store, window: int = 50_000, clock: Clock = REAL):
        """`clock` times the read-your-writes waits (`wait_for`) and each resource's history: virtual
        seconds in simulation. `window`: how many events of all resources together a list at an
        earlier revision reaches back (a continue token's, resourceVersionMatch=Exact): the history
        of a store that keeps no past values; a list further back reads etcd's own (Store.list_at),
        as upstream's cacher hands it such lists, until the compactor compacts it (`compact`)."""
        self.store = store
        self.clock = clock
        self.window = window
        #: the bounds of each resource's history (CAPACITY_MIN, CAPACITY_MAX): upstream's watchCacheHistory's
        self.capacity_min = CAPACITY_MIN
        self.capacity_max = CAPACITY_MAX
        self.rev = 0
        #: the revision of the last list of the store (at start, or a relist): upstream's listResourceVersion
        self._listed = 0
        #: per resource prefix whose history began after that list (`begin_history`), its own
        self._listed_at: dict[str, int] = {}
        self._by_prefix: dict[str, dict[str, Entry]] = {}
        #: each resource prefix's keys in order, so a page or a namespace is found by bisection; kept in
        #: blocks (SortedList), as one list's insort or del moved every later key (~50 us at 100,000 Events)
        self._keys: dict[str, SortedList] = {}
        self._events: deque[CacheEvent] = deque()
        self._oldest = 0  # lists at an earlier revision may read any rev >= this
        #: the store's revision last compacted (`compact`): no list reads an earlier one
        self._compacted = 0
        #: each bucket's watchers in the order they started (a dict, not a set: a set of objects iterates in
        #: address order, which differs run to run, and the order watchers are handed an event decides
        #: which of their tasks runs first; `nanokube simulate` must repeat)
        self._watchers: dict[str, dict[Watcher, None]] = {}
        #: read-your-writes waiters, a heap by the revision each waits for: (revision, sequence,
        #: future, deadline)
        self._waiters: list[tuple[int, int, asyncio.Future, float]] = []
        self._waiter_seq = itertools.count()
        #: the one timer that fails the waiters past their deadline (see wait_for), and when it is due
        self._expiry: asyncio.TimerHandle | asyncio.Future | None = None
        self._expiry_at = 0.0
        self._task: asyncio.Task | None = None
        #: stops the store's synchronous delivery of commits (see _follow); None while the cache
        #: follows the store's change stream instead
        self._unfollow: Callable[[], None] | None = None
        self._synced = False
        self.ready = asyncio.Event()
        self.on_event: list[Callable[[CacheEvent], None]] = []
        #: the memos below drop their oldest entry with popitem(last=False), O(1): a dict's
        #: `next(iter(d))` walks the slots its deletions left (~4 us at 1024 entries)
        self._encoded: OrderedDict[tuple[int, str], tuple[dict, bytes]] = OrderedDict()
        self._chunks: OrderedDict[int, tuple[bytes, bytes]] = OrderedDict()
        #: the last chunk encode_chunk made: (type, object, chunk)
        self._last_chunk: tuple = ("", None, b"")
        #: the entries of the newest events by id(object), so their watch lines reuse the entries' JSON
        self._recent: OrderedDict[int, Entry] = OrderedDict()
        #: spec values by their JSON (see _share_spec)
        self._shared: dict[bytes, Any] = {}
        self._shared_size = 0
        #: per (resource prefix, spec field[, field of its list's items]): [JSON bytes found in
        #: self._shared or seen before in another object, JSON bytes seen for the first time]
        self._share_gain: dict[tuple[str, ...], list[int]] = {}
        #: hash of the JSON of a value seen in one object only -> (that object's number, `_share_seq`;
        #: the value) (see _SEEN_ONCE)
        self._seen_once: dict[int, tuple[int, Any]] = {}
        self._share_seq = 0
        #: (resource prefix, a spec's JSON) -> that spec as shared (see _SPECS)
        self._specs: OrderedDict[tuple[str, bytes], dict] = OrderedDict()
        #: per resource prefix, its specs' lookups in self._specs that missed in a row
        self._spec_misses: dict[str, int] = {}
        #: per resource prefix, its `decoder`
        self._decoders: dict[str, Callable[[bytes, int], dict]] = {}
        self._written: dict[str, tuple[bytes, dict, int]] = {}
        #: with several API server workers (workers.py): another worker's write to a resource nobody
        #: watches here is kept as its stored bytes until something reads it (decoding every one was
        #: 16% of a second worker's time while creating pods, which nothing there reads)
        self.lazy = False
        #: whether a resource prefix holds unstructured objects (custom resources), whose every map
        #: is decoded in Go's sorted order (`in_unstructured_order`) instead of struct order
        self.unstructured: Callable[[str], bool] = lambda prefix: False
        #: per resource prefix, a number that changes whenever any of its objects does (see `changes`)
        self._changes: dict[str, int] = {}
        self._change_seq = 0
        #: per resource prefix, what kube-apiserver's cacher metrics count (collected by metrics.py's
        #: WatchCacheCollector): a dict increment on the paths they count, nothing else
        self.stats = CacheStats()
        #: per resource prefix, its latest events, as many as its capacity (`maxlen`, see CAPACITY_MIN):
        #: upstream's watchCacheHistory, whose every event is also in `_events` while that reaches it
        self._history: dict[str, deque[CacheEvent]] = {}
        #: the resource prefixes whose history dropped an event since the last list (removedEventSinceRelist)
        self._trimmed: set[str] = set()
        #: per resource prefix relisted on its own (`relist`), the revision of that list: the store's events
        #: for it up to there, which the cache may have yet to reach, are in the list already
        self._relisted: dict[str, int] = {}
        self._relisting: set[asyncio.Task] = set()
        #: the resource prefixes relisted until their values read (`relist` with `unread`)
        self._retrying: set[str] = set()
        #: per resource prefix, its dispatch's budget, ticking since the cache was made, and the last wait
        #: an event's blocked watches share (see Blocked)
        self._born = clock.monotonic()
        self._budgets: dict[str, TimeBudget] = {}
        self._blocking: dict[str, Blocked] = {}

    async def start(self) -> None:
        kvs, rev = await self.store.list("/registry/")
        prefix, bucket = "", None
        for kv in kvs:  # sorted by key: one resource's objects come together
            key = kv.key
            if bucket is None or not key.startswith(prefix):
                prefix = _resource_prefix(key)
                bucket = self._by_prefix.setdefault(prefix, {})
            bucket[key] = Entry(None, kv.mod_revision, None, kv.value, self.decoder(prefix),  # decoded on first use
                                len(kv.value))
        self._keys = {rp: SortedList(objs) for rp, objs in self._by_prefix.items()}
        self._changed(self._by_prefix)
        self.stats.initialized(self._by_prefix)
        self.rev = self._oldest = self._listed = rev
        self._task = asyncio.create_task(self._follow(rev))
        self.ready.set()

    async def stop(self) -> None:
        self._synced = False
        for task in self._relisting:
            task.cancel()
        if self._unfollow is not None:
            self._unfollow()
            self._unfollow = None
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._blocking.clear()
        for ws in self._watchers.values():
            for w in ws:
                if w.blocked is not None and w.blocked.timer is not None:
                    w.blocked.timer.cancel()
                w.queue.put_nowait(None)

    async def _follow(self, rev: int, stream: bool = False) -> None:
        """Follows the store from `rev`: a local store hands each commit's events to `_committed`
        as it publishes them (the fan-out to watchers happens in the commit's own loop turn, not a
        turn later in this task); any other store, or one whose event failed to apply, through its
        change stream."""
        while True:
            try:
                if not stream:
                    self._synced = True
                    unfollow = self.store.follow(rev, self._committed, self._lost)
                    if unfollow is not None:
                        if self._synced:
                            self._unfollow = unfollow
                        else:  # an event of the backlog failed: the change stream took over
                            unfollow()
                        return
                    self._synced = False
                async for ev in self.store.watch(rev):
                    self._apply(ev)
                    rev = ev.revision
                return  # the change stream ends only when the store is closed: watching again would spin
            except asyncio.CancelledError:
                raise
            except Compacted:
                self._synced = False
                log.warning("store history compacted under the watch cache; relisting")
                await self._relist()
                rev = self.rev
            except Exception:
                log.exception("store watch failed; retrying")
                await asyncio.sleep(0.5)

    def _committed(self, ev: Event) -> None:
        if not self._synced:
            return
        try:
            self._apply(ev)
        except Exception:  # as with the change stream: log, and take the event again from the stream
            log.exception("applying a committed event failed; following the store's change stream")
            self._synced = False
            if self._unfollow is not None:
                self._unfollow()
                self._unfollow = None
            self._task = asyncio.get_running_loop().create_task(self._follow(ev.revision - 1, stream=True))

    def _lost(self) -> None:
        """The store stopped handing over its commits (it missed some): relist, as after Compacted."""
        self._synced = False
        self._unfollow = None
        self._task = asyncio.get_running_loop().create_task(self._follow(self.rev, stream=True))

    async def _relist(self) -> None:
        kvs, rev = await self.store.list("/registry/")
        fresh: dict[str, dict[str, Entry]] = {}
        for kv in kvs:
            prefix = _resource_prefix(kv.key)
            fresh.setdefault(prefix, {})[kv.key] = Entry(self.decoder(prefix)(kv.value, kv.mod_revision), kv.mod_revision,
                                                               size=len(kv.value))
        self._changed({*fresh, *self._by_prefix, *self._changes})
        self._by_prefix = fresh
        self._keys = {rp: SortedList(objs) for rp, objs in fresh.items()}
        self.stats.initialized(fresh)
        self._events.clear()
        for history in self._history.values():  # as upstream's Replace empties its history, keeping its capacity
            history.clear()
        self._trimmed.clear()
        self._listed_at.clear()
        self._relisted.clear()
        self.rev = self._oldest = self._listed = rev
        for ws in self._watchers.values():
            for w in ws:
                w.overflowed = True
                w.queue.put_nowait(None)
        self._wake()

    def _apply(self, ev: Event) -> None:
        key = ev.kv.key
        if not key.startswith("/registry/"):  # no object's (reservations.py's node ports): the revision passes
            self.rev = ev.revision
            self._wake()
            return
        prefix = _resource_prefix(key)
        if self._relisted and (listed := self._relisted.get(prefix)) is not None:
            if ev.revision <= listed:  # (its resource's own list has it)
                self.rev = ev.revision
                self._wake()
                return
            del self._relisted[prefix]
        self._change_seq += 1
        self._changes[prefix] = self._change_seq
        received = self.stats.received
        received[prefix] = received.get(prefix, 0) + 1
        now = self.clock.monotonic()
        objs = self._by_prefix.setdefault(prefix, {})
        prev = objs.get(key)
        rev = ev.revision
        if prev is not None:
            prev.replaced(ev.prev, self.unstructured(prefix))
        if ev.type == DELETE:
            if objs.pop(key, None) is not None:
                self._keys[prefix].remove(key)
            gone = prev.obj if prev else decode(ev.kv.value, ev.kv.mod_revision, self.unstructured(prefix))
            obj = {**gone, "metadata": {**gone.get("metadata", {}), "resourceVersion": str(rev)}}
            # the last stored bytes, which decode to `obj` at the deletion's revision (keep_encoded)
            cev = CacheEvent(DELETED, key, Entry(obj, rev, None, ev.kv.value), prev, rev, now)
        else:
            handed = self._written.pop(key, None)
            if handed is not None and handed[0] is ev.kv.value:  # this very write: its object, not a decode
                obj = handed[1]
                obj["metadata"]["resourceVersion"] = str(rev)
                self._share_spec(obj, prev._obj if prev is not None else None, prefix)
                entry = Entry(obj, rev, size=len(ev.kv.value), _kv=ev.kv, _at=handed[2])
            elif self.lazy and not self._watchers.get(prefix):  # read, if ever, later: decoded then
                entry = Entry(None, rev, None, ev.kv.value, self.decoder(prefix), len(ev.kv.value))
            else:
                entry = Entry(self._decoded(prefix, ev.kv.value, rev, prev._obj if prev is not None else None), rev,
                              size=len(ev.kv.value))
            objs[key] = entry
            if prev is None:
                keys = self._keys.get(prefix)
                if keys is None:
                    keys = self._keys[prefix] = SortedList()
                keys.add(key)
            cev = CacheEvent(MODIFIED if prev is not None else ADDED, key, entry, prev, rev, now)
        history = self._history.get(prefix)
        if history is None:
            history = self._history[prefix] = deque(maxlen=self.capacity_min)
        if len(history) == history.maxlen:
            capacity = history.maxlen
            if (now - history[0].at < EVENT_FRESH and capacity < self.capacity_max
                    or now - history[-(capacity >> 2)].at > EVENT_FRESH and capacity > self.capacity_min):
                history = self._resize(prefix, history, now)
            if len(history) == history.maxlen:  # still full: appending drops its oldest
                self._trimmed.add(prefix)
        history.append(cev)
        self.rev = rev
        self._events.append(cev)
        if len(self._events) > _DECODED_HISTORY:
            past = self._events[-_DECODED_HISTORY - 1]
            if past.prev is not None:
                past.prev.keep_encoded()
            if past.type == DELETED:
                past.entry.keep_encoded()
        while len(self._events) > self.window:  # (a window made smaller drops the excess)
            self._oldest = self._events.popleft().rev
        recent = self._recent
        if len(recent) >= _ENCODED_MEMO:
            recent.popitem(last=False)
        if cev.entry._obj is not None:
            recent[id(cev.entry._obj)] = cev.entry
        for w in list(self._watchers.get(prefix, ())):
            if w.overflowed:
                continue
            ev = w.accept(cev)
            if not ev:
                continue
            if ev is True:
                ev = cev
            if w.direct is None or not self._hand(w, ev):
                self._offer(w, ev)
        for cb in self.on_event:
            cb(cev)
        self._wake()

    def _offer(self, w: Watcher, cev: CacheEvent) -> None:
        """Queues an event `w` accepted (`accept`'s answer) for its task; one that takes its queue past
        its buffer blocks it (`_block`)."""
        q = w.queue
        q.put_nowait(cev)
        if len(q._queue) > w.size and w.blocked is None:
            self._block(w)

    def _block(self, w: Watcher) -> None:
        """`w` waits, with the other watches of its resource the same event blocked, for what the
        resource's budget has left (see Blocked, WATCH_BUDGET)."""
        rp = _bucket(w.prefix)
        b = self._blocking.get(rp)
        if b is None or (b.rev != self.rev and b.timer is not None):  # none, or another event's, started
            budget = self._budgets.get(rp)
            if budget is None:
                budget = self._budgets[rp] = TimeBudget(self.clock, self._born)
            running = b if b is not None and b.watchers else None
            b = self._blocking[rp] = Blocked(self.rev, budget, watchers={w: None})
            if running is None:
                self._start(rp, b)
            else:
                running.next = b
        else:
            b.watchers[w] = None
        w.blocked = b
        w.queue.taken = functools.partial(self._took, w)

    def _took(self, w: Watcher) -> None:
        """`w`'s task took an event while it was blocked: back within its buffer, it no longer is."""
        if len(w.queue._queue) <= w.size:
            self._unblock(w)

    def _unblock(self, w: Watcher) -> None:
        b = w.blocked
        w.blocked = None
        w.queue.taken = None
        del b.watchers[w]
        if not b.watchers and b.timer is not None:  # the wait is over before its timer: what it did not use goes back
            b.timer.cancel()
            b.budget.give_back(b.timeout - (self.clock.monotonic() - b.started))
            self._start(_bucket(w.prefix), b.next)

    def _start(self, rp: str, b: Blocked | None) -> None:
        """`b`'s wait begins, for what its resource's budget has now; one whose watches all caught up
        while it waited for the one before it is dropped. (The one before can end twice: its last
        watch catching up after its timer fired, before the wait's end ran.)"""
        if b is None or b.timer is not None:
            return
        if not b.watchers:
            if self._blocking.get(rp) is b:
                del self._blocking[rp]
            return
        b.timeout, b.started = b.budget.take(), self.clock.monotonic()
        b.timer = self.clock.call_later(b.timeout, functools.partial(self._time_up, rp, b))

    def _time_up(self, rp: str, b: Blocked) -> None:
        """The wait's timer: its end runs after the callbacks already queued, the wake-ups of the tasks
        the events woke among them. uvloop (`nanokube up`'s loop) runs the timers due before the
        callbacks queued in the loop's last turn, so a loop busy past the timer's due time ended an
        in-process informer woken before it was set, which takes its whole queue when it runs."""
        asyncio.get_running_loop().call_soon(self._blocked_out, rp, b)

    def _blocked_out(self, rp: str, b: Blocked) -> None:
        """The wait's time is up: a watch back within its buffer is fine; one still past it is ended
        as unresponsive, what it had not taken dropped (its client watches again from what it had)."""
        for w in b.watchers:
            w.blocked = None
            w.queue.taken = None
            q = w.queue._queue
            if w.overflowed or len(q) <= w.size:
                continue
            w.overflowed = True
            self.stats.add(self.stats.terminated, rp, 1)
            log.info("Forcing %s watcher close due to unresponsiveness: %d events queued, buffer %d", rp, len(q), w.size)
            q.clear()  # its task ends the stream after what it was sent; its client watches again
            w.queue.put_nowait(None)
        b.watchers.clear()
        self._start(rp, b.next)

    def _resize(self, prefix: str, history: deque[CacheEvent], now: float) -> deque[CacheEvent]:
        """The history of `prefix`'s events, full, doubled or halved as CAPACITY_MIN says (halved, it
        keeps the newest, as upstream's doCacheResizeLocked)."""
        was = history.maxlen
        if now - history[0].at < EVENT_FRESH:
            capacity = min(2 * was, self.capacity_max)
        else:
            capacity = max(was // 2, self.capacity_min)
        history = self._history[prefix] = deque(history, maxlen=capacity)
        self.stats.resized(prefix, was, capacity)
        return history

    def capacity(self, prefix: str) -> int:
        """The capacity of the watch cache of `prefix`'s resource (see CAPACITY_MIN)."""
        history = self._history.get(_bucket(prefix))
        return self.capacity_min if history is None else history.maxlen

    def buffer_size(self, prefix: str, indexed: bool = False, triggered: bool = False) -> int:
        """`Watcher.size` for a watch of `prefix` (see WATCH_BUFFER_MIN): `indexed`, its resource has a
        trigger field (pods' spec.nodeName, nodes' name), which the watch's field selector names one
        value of (`triggered`)."""
        most = WATCH_BUFFER_TRIGGERED if triggered else WATCH_BUFFER_INDEXED if indexed else WATCH_BUFFER_OTHER
        return max(WATCH_BUFFER_MIN, min(most, math.ceil(self.capacity(prefix) / EVENT_FRESH)))

    @staticmethod
    def _end(w: Watcher) -> None:
        """End `w`'s stream after what its queue holds."""
        w.queue.put_nowait(None)

    def decoder(self, prefix: str) -> Callable[[bytes, int], dict]:
        """`decode` for the objects of `prefix` (one function per resource, which the lazily decoded
        entries of a start-up hold): their values are shared as a written object's are (`_decoded`)."""
        d = self._decoders.get(prefix)
        if d is None:
            d = self._decoders[prefix] = functools.partial(self._decoded, prefix)
        return d

    def _decoded(self, prefix: str, value: bytes, rev: int, prev: dict | None = None) -> dict:
        """A stored object decoded to be cached, made of the values already cached with the same JSON,
        as a written one is: its spec's (`_share_spec`), its managedFields' FieldsV1 (a write's entries
        share those of one field set: fieldpath.to_fields_v1), and its labels, annotations, owner
        references and finalizers. Restarted over 300,000 pods of one ReplicaSet, each was decoded
        into 19 objects the cycle collector tracks, none shared."""
        obj = decode(value, rev, self.unstructured(prefix))
        self._share_spec(obj, prev, prefix)
        md = obj.get("metadata")
        if type(md) is not dict:
            return obj
        self._bound_shared()
        for k in _SHARED_META:
            v = md.get(k)
            if v:
                md[k] = self._shared_value(v, (prefix, "metadata", k))
        entries = md.get("managedFields")
        if type(entries) is list:
            for e in entries:
                fields = e.get("fieldsV1") if type(e) is dict else None
                if fields:
                    manager = e.get("manager")
                    e["fieldsV1"] = self._shared_value(fields, (prefix, "fieldsV1", manager if type(manager) is str else ""))
        return obj

    def _bound_shared(self) -> None:
        """Starts the table of shared values over once it passes _SHARED_MAX bytes or _SHARE_FIELDS fields."""
        if self._shared_size > _SHARED_MAX or len(self._share_gain) > _SHARE_FIELDS:
            self._shared.clear()
            self._shared_size = 0
            self._share_gain.clear()
            self._seen_once.clear()

    def _share_spec(self, obj: dict, prev: dict | None, prefix: str) -> None:
        """Objects made from one template (a Deployment's pods) repeat most of their spec: an
        unchanged spec is the previous version's, and a new one is made of the values already
        cached with the same JSON (each field of the spec, and each field of the objects in its
        lists: a container's ports, env, resources, probes), so a pod's spec costs its few own
        values instead of about 7 KB. Readers never change cached objects, and a value is shared
        only with values of identical JSON (key order and number types included), so every
        object encodes as before. A value is kept for sharing once a second object holds it
        (`_keep_if_seen`), and a field whose values do not repeat stops at _SHARE_PROBE:
        encoding ResourceSlices' device lists and attributes only to miss cost a 5000-node
        start-up ~9% of its instructions, and their JSON filled the table, which then dropped
        the pods' shared values too."""
        self._share_seq += 1
        if not self._share_seq % _SHARE_REPROBE:
            self._share_gain.clear()
        spec = obj.get("spec")
        if type(spec) is not dict:
            return
        old = prev.get("spec") if prev is not None else None
        if old is spec:  # kept by the write (a status write's): `==` walked every field to find that
            return
        if type(old) is not dict:
            old = {}
        elif old == spec:  # a C-level comparison
            obj["spec"] = old
            json_memo.alias(spec, old)
            return
        key = self._spec_key(spec, prefix)
        if key is not None:
            hit = self._specs.get(key)
            if hit is not None:
                self._spec_misses[prefix] = 0
                obj["spec"] = hit
                json_memo.alias(spec, hit)
                return
            self._spec_misses[prefix] = self._spec_misses.get(prefix, 0) + 1
        self._bound_shared()
        fresh = {}
        for k, v in spec.items():
            if old.get(k) is v:  # the previous version's own (a binding copies the spec shallowly): shared already
                fresh[k] = v
                continue
            t = type(v)
            if t is list:
                v = self._shared_list(v, prefix, k)
            elif t is dict:
                v = self._shared_value(v, (prefix, k))
            fresh[k] = v
        obj["spec"] = fresh
        json_memo.alias(spec, fresh)  # the written spec's JSON, encoded for the store, is the shared copy's
        if key is not None:
            if len(self._specs) >= _SPECS:
                self._specs.popitem(last=False)
            self._specs[key] = fresh

    def _spec_key(self, spec: dict, prefix: str) -> tuple[str, bytes] | None:
        """What a whole spec is found by in self._specs (its JSON, which holds key order and number
        types, so a spec is shared only with one that encodes alike), or None: not looked up (this
        resource's specs keep missing), or not JSON."""
        misses = self._spec_misses.get(prefix, 0)
        if misses >= _SPEC_TRIES and misses % _SPEC_TRIES:
            self._spec_misses[prefix] = misses + 1
            return None
        try:
            return prefix, orjson.dumps(spec)
        except TypeError:  # orjson.JSONEncodeError: not JSON (an integer past 64 bits)
            return None

    def _shared_list(self, v: list, prefix: str, field: str) -> list:
        """A list of the spec: the cached list of the same JSON when there is one (a Deployment's
        pods' containers: one encoding instead of one per field of each container), else the list
        of its objects' fields shared one by one, kept for the next."""
        where = (prefix, field)
        gain = self._share_gain.get(where)
        if gain is None:
            gain = self._share_gain[where] = [0, 0]
        elif gain[1] > _SHARE_PROBE and gain[0] * 4 < gain[1]:
            return [self._shared_fields(x, prefix, field) if type(x) is dict else x for x in v]
        key = orjson.dumps(v)
        hit = self._shared.get(key)
        if hit is not None:
            gain[0] += len(key)
            return hit
        return self._keep_if_seen(key, [self._shared_fields(x, prefix, field) if type(x) is dict else x for x in v], gain)

    def _shared_fields(self, d: dict, prefix: str, field: str) -> dict:
        """A list's object with its maps and lists shared one by one (its strings, numbers and
        booleans are taken as they are, without a call each)."""
        shared = {}
        for k, v in d.items():
            t = type(v)
            shared[k] = self._shared_value(v, (prefix, field, k)) if t is dict or t is list else v
        return shared

    def _shared_value(self, v: Any, where: tuple[str, ...]) -> Any:
        if type(v) is not dict and type(v) is not list:
            return v
        gain = self._share_gain.get(where)
        if gain is None:
            gain = self._share_gain[where] = [0, 0]
        elif gain[1] > _SHARE_PROBE and gain[0] * 4 < gain[1]:
            return v
        key = orjson.dumps(v)
        hit = self._shared.get(key)
        if hit is None:
            return self._keep_if_seen(key, v, gain)
        gain[0] += len(key)
        return hit

    def _keep_if_seen(self, key: bytes, v: Any, gain: list[int]) -> Any:
        """`v`, whose JSON `key` is not in the table, or the value of that JSON another object held
        before, which then joins the table (found by the hash of `key`, and checked: a collision
        only notes `v` instead). A value repeated within one object (a pod's token mount in each
        of its containers) is noted once and not kept."""
        h = hash(key)
        once = self._seen_once
        seen = once.get(h)
        if seen is None or (seen[0] != self._share_seq and orjson.dumps(seen[1]) != key):
            if len(once) >= _SEEN_ONCE:
                once.clear()
            once[h] = (self._share_seq, v)
            gain[1] += len(key)
            return v
        if seen[0] == self._share_seq:
            return v
        del once[h]
        v = self._shared[memoryview(key).tobytes()] = seen[1]
        self._shared_size += len(key)
        gain[0] += len(key)
        return v

    def _hand(self, w: Watcher, cev: CacheEvent) -> bool:
        """Whether `w.direct` took an event `w` accepted: only while the watch's task waits on an empty queue."""
        if not w.parked:
            return False
        try:
            return w.direct(cev)
        except Exception:  # queued instead: the watch's task meets the same error and ends the watch with it
            w.direct = None
            return False

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.rev:
            fut = heapq.heappop(self._waiters)[2]
            if not fut.done():
                fut.set_result(None)
            if not self._waiters and self._expiry is not None:  # none left to fail: no wake-up for nothing
                self._expiry.cancel()
                self._expiry = None

    def expect(self, key: str, value: bytes, obj: dict, at: int = -1) -> None:
        """A writer is about to store `value` (`stored_json`'s bytes and object) and will not
        change `obj` afterwards: when the store's event carries these very bytes (a local store
        passes them through), the cache serves `obj` with its resourceVersion filled in instead of
        decoding them again (a JSON decode of the object was about 5% of the server's CPU while
        creating pods). `at`: where `value` takes the resourceVersion (stored_json), when known."""
        written = self._written
        if len(written) >= _WRITTEN_MAX:
            del written[next(iter(written))]
        written[key] = (value, obj, at)

    async def wait_for(self, rev: int, timeout: float = 10.0) -> None:
        """Block until the cache reflects revision `rev` (read-your-writes); TimeoutError after
        `timeout` seconds of the cache's clock (virtual ones in simulation, as upstream's
        waitUntilFreshAndBlock takes its clock). Every write waits here, nearly always for less than a
        loop turn: one timer for all waiters, set for the earliest deadline, replaces an
        `asyncio.timeout` per wait (its timer scheduled and cancelled again: ~35 k instructions, 4-8%
        of a small write). The timer finds the waiters past their deadline among those still waiting,
        nearly always none: a heap of every wait's deadline, each popped 10 s later, was ~10 k
        instructions of a write waiting here (the memory store's, the simulation's). It is cancelled
        once no one waits (`_wake`), so a virtual clock has no wake-up left for it."""
        if rev <= self.rev:
            return
        fut = asyncio.get_running_loop().create_future()
        deadline = self.clock.monotonic() + timeout
        heapq.heappush(self._waiters, (rev, next(self._waiter_seq), fut, deadline))
        if self._expiry is None or deadline < self._expiry_at:
            if self._expiry is not None:
                self._expiry.cancel()
            self._expiry, self._expiry_at = self.clock.call_later(timeout, self._expire), deadline
        await fut

    def _expire(self) -> None:
        """Fail the waiters past their deadline, forget those done, and set the timer for the next."""
        self._expiry = None
        now = self.clock.monotonic()
        waiting = []
        for w in self._waiters:
            if w[2].done():
                continue
            if w[3] <= now:
                w[2].set_exception(TimeoutError())
            else:
                waiting.append(w)
        heapq.heapify(waiting)
        self._waiters = waiting
        if waiting:
            self._expiry_at = min(w[3] for w in waiting)
            self._expiry = self.clock.call_later(self._expiry_at - now, self._expire)

    async def sync(self) -> None:
        """Catch up with the store's current revision (a consistent read). Nearly always caught up
        already (every GET without a resourceVersion asks): then no wait is begun."""
        if (rev := await self.store.current_revision()) > self.rev:
            await self.wait_for(rev)

    def encode_chunk(self, typ: str, obj: dict) -> bytes:
        """`encode_event`'s line framed as one HTTP/1.1 chunk, framed once for every watcher; the
        last one is at hand for the next watcher of the same event."""
        last = self._last_chunk
        if last[1] is obj and last[0] == typ:
            return last[2]
        line = self.encode_event(typ, obj)
        hit = self._chunks.get(id(line))
        if hit is not None and hit[0] is line:
            chunk = hit[1]
        else:
            chunk = b"%x\r\n%b\r\n" % (len(line), line)
            if len(self._chunks) >= _ENCODED_MEMO:
                self._chunks.popitem(last=False)
            self._chunks[id(line)] = (line, chunk)
        self._last_chunk = (typ, obj, chunk)
        return chunk

    def encode_event(self, typ: str, obj: dict) -> bytes:
        """A watch event's JSON line. Watchers of one version receive the same
        (immutable) object, so a recent object's line is encoded once and
        shared by every watcher; the memo keeps its objects alive, so an id
        in it always names the object it was encoded from. A cached object's
        line is made of its entry's JSON, which LIST serves too."""
        memo_key = (id(obj), typ)
        hit = self._encoded.get(memo_key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        entry = self._recent.get(id(obj))
        if entry is not None and entry._obj is obj:
            line = b'{"type":"%b","object":%b}\n' % (typ.encode(), entry.raw)
        else:
            line = go_escaped(orjson.dumps({"type": typ, "object": obj})) + b"\n"
        if len(self._encoded) >= _ENCODED_MEMO:
            self._encoded.popitem(last=False)
        self._encoded[memo_key] = (obj, line)
        return line

    # --- reads ---------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        return self._by_prefix.get(_resource_prefix(key), {}).get(key)

    def list(self, prefix: str) -> list[tuple[str, Entry]]:
        """Entries under `prefix` (a resource prefix, optionally with namespace), sorted by key."""
        return self.scan(prefix)[1]

    def entries(self, prefix: str) -> Iterator[tuple[str, Entry]]:
        """`list`'s entries one at a time, for a reader that stops at the first it wants (RBAC's walk
        of the bindings, which finds most users' in the first few of some sixty) and builds no list
        of the rest; read through without awaiting, as the cache may change meanwhile."""
        rp = _bucket(prefix)
        keys = self._keys.get(rp)
        if not keys:
            return iter(())
        lo, hi = self._bounds(keys, rp, prefix, "")
        objs = self._by_prefix[rp]
        return ((k, objs[k]) for k in keys.islice(lo, hi))

    def scan(self, prefix: str, after: str = "", limit: int = 0, rev: int = 0) -> tuple[int, list[tuple[str, Entry]]]:
        """Entries under `prefix` whose key sorts after `after`, in key order: how many there
        are, and the first `limit` of them (all when 0). Found by bisecting the sorted keys, so
        a page costs its own size, not the resource's. With `rev` older than the cache's, the
        entries as they were at that revision (a continued list is one snapshot, as upstream's):
        the current ones, less what the window's events since `rev` changed, plus the versions
        those events replaced; Compacted once the window no longer reaches back to `rev`."""
        rp = _bucket(prefix)
        if rev and rev < self.rev:
            return self._scan_at(rp, prefix, after, limit, rev)
        keys = self._keys.get(rp)
        if not keys:
            return 0, []
        lo, hi = self._bounds(keys, rp, prefix, after)
        return self._page(keys, self._by_prefix[rp], lo, hi, limit)

    @staticmethod
    def _bounds(keys: SortedList, rp: str, prefix: str, after: str) -> tuple[int, int]:
        lo, hi = 0, len(keys)
        if prefix != rp:  # a namespace: its keys are those from "<prefix>" to "<prefix><the highest character>"
            lo, hi = keys.bisect_left(prefix), keys.bisect_left(prefix + "\U0010ffff")
        if after:
            lo = max(lo, keys.bisect_right(after))
        return lo, max(lo, hi)

    @staticmethod
    def _page(keys: SortedList, objs: dict[str, Entry], lo: int, hi: int, limit: int) -> tuple[int, list[tuple[str, Entry]]]:
        end = min(hi, lo + limit) if limit else hi
        return hi - lo, [(k, objs[k]) for k in keys[lo:end]]

    def _scan_at(self, rp: str, prefix: str, after: str, limit: int, rev: int) -> tuple[int, list[tuple[str, Entry]]]:
        """`scan` at an earlier revision, from the resource's own history where it reaches `rev`
        (upstream's cacher serves such a list from its snapshot at `rev`, which it keeps as long as
        its history), else from the window of all resources' events (etcd's history, which upstream
        then asks)."""
        if rev < self._compacted:
            raise Compacted(rev, self._compacted)
        if rev >= self._reach(rp):
            events = self._history.get(rp, ())
        elif rev >= self._oldest:
            events = self._events
        else:
            raise Compacted(rev, self._oldest)
        then: dict[str, Entry | None] = {}  # each key the events since `rev` touched: its entry at `rev`
        for ev in reversed(events):  # newest first: the oldest event's `prev` stays
            if ev.rev <= rev:
                break
            if ev.key.startswith(prefix) and ev.key > after:
                then[ev.key] = ev.prev
        keys = self._keys.get(rp) or SortedList()
        objs = self._by_prefix.get(rp, {})
        lo, hi = self._bounds(keys, rp, prefix, after)
        if not then:  # nothing here changed since `rev`, only other resources (leases, heartbeats): as at the latest
            return self._page(keys, objs, lo, hi, limit)
        total = hi - lo - sum(k in objs for k in then) + sum(e is not None for e in then.values())
        out: list[tuple[str, Entry]] = []
        last = None
        for k in heapq.merge(keys[lo:hi], sorted(then)):
            if k == last:
                continue
            last = k
            e = then[k] if k in then else objs[k]
            if e is not None:
                out.append((k, e))
                if len(out) == limit:
                    break
        return total, out

    def changes(self, resource_prefix: str) -> int:
        """A number that differs from any earlier one it gave for `resource_prefix` once any of
        that resource's objects was added, changed or deleted (or the cache relisted): what a
        reader keeps derived from the resource's objects (admission's listings, lookup.Listing)
        is current while this number is the same."""
        return self._changes.get(resource_prefix, 0)

    def _changed(self, prefixes) -> None:
        for rp in prefixes:
            self._change_seq += 1
            self._changes[rp] = self._change_seq

    def count(self, resource_prefix: str) -> int:
        return len(self._by_prefix.get(resource_prefix, ()))

    def prefixes(self) -> list[str]:
        return list(self._by_prefix)

    # --- watch ---------------------------------------------------------

    def events_since(self, rev: int, prefix: str) -> list[CacheEvent]:
        """The events under `prefix` after `rev`, from its resource's history, as upstream's
        getAllEventsSinceLocked finds them: Compacted (410 "too old resource version: rev (R)")
        where `rev` is older than R, one before the oldest event the history can deliver: the first
        after the last list, or, once the history dropped one since, its oldest event. Other
        resources' writes never age it; a revision past the resource's newest event is served
        from the state at the cache's revision (no events)."""
        rp = _bucket(prefix)
        reach = self._reach(rp)
        if rev < reach:
            raise Compacted(rev, reach)
        tail = []  # taken from the end: a watch resumes from a recent revision
        for e in reversed(self._history.get(rp, ())):
            if e.rev <= rev:
                break
            tail.append(e)
        tail.reverse()
        return tail if rp == prefix else [e for e in tail if e.key.startswith(prefix)]

    def _reach(self, rp: str) -> int:
        """The oldest revision after which resource `rp`'s history holds every event (upstream's
        oldest servable one, less one)."""
        return self._history[rp][0].rev - 1 if rp in self._trimmed else self._listed_at.get(rp, self._listed)

    def begin_history(self, prefix: str) -> None:
        """Start the history of the resource under `prefix` afresh at the cache's revision: a custom
        resource whose storage is (re)built gets a new cacher upstream, whose history begins at its
        own first list, so a watch from a revision before it is 410 Expired, not one with no events."""
        rp = _bucket(prefix)
        self._history.pop(rp, None)
        self._trimmed.discard(rp)
        self._listed_at[rp] = self.rev

    def stored(self, prefix: str, kvs: list[KV]) -> list[tuple[str, Entry]]:
        """`kvs` of the resource under `prefix` as read from the store at a revision `scan` no longer
        reaches, as entries decoded when read."""
        decode = self.decoder(_bucket(prefix))
        return [(kv.key, Entry(None, kv.mod_revision, None, kv.value, decode, len(kv.value))) for kv in kvs]

    def compact(self, rev: int) -> None:
        """The store forgot its history up to `rev` (the API server's compactor): a list at an earlier
        revision (a continue token's, an Exact one) is 410 Expired from now on, however far back the
        window or its resource's history reach, as upstream's cacher drops its snapshots older than
        etcd's compacted revision and etcd refuses the rest. Watches still resume from a resource's
        history, which upstream's compaction leaves alone too."""
        self._compacted = max(self._compacted, rev)
        events = self._events
        while events and events[0].rev <= rev:
            self._oldest = events.popleft().rev

    def add_watcher(self, w: Watcher) -> None:
        self._watchers.setdefault(_bucket(w.prefix), {})[w] = None

    def remove_watcher(self, w: Watcher) -> None:
        self._watchers.get(_bucket(w.prefix), {}).pop(w, None)
        if w.blocked is not None:
            self._unblock(w)

    def end_watches(self, prefix: str) -> None:
        """End every watch of what lies under `prefix` after the events it holds (a custom
        resource whose CRD is gone: upstream's crdHandler tears its storage, and so its watches, down)."""
        bucket = self._watchers.get(_bucket(prefix), {})
        for w in [w for w in bucket if w.prefix.startswith(prefix)]:
            del bucket[w]
            self._end(w)

    def drop(self, key: str, rev: int) -> None:
        """`key`'s value at `rev` does not read (encryption/store.py: no provider decrypts it), as
        upstream's cacher meets it: its watch errors out and it relists, its watches of the resource
        end and the relist lacks the key. So here: the entry goes (a read of it answers why, never
        the value it replaced), the resource's watches end, and its history begins at `rev`, so a
        watch resumed from before it is 410 Gone and its client relists."""
        rp = _resource_prefix(key)
        objs = self._by_prefix.get(rp)
        if objs is not None and objs.pop(key, None) is not None:
            self._keys[rp].remove(key)
        self._changed((rp,))
        self.begin_history(rp)
        self._listed_at[rp] = rev
        self.end_watches(rp)

    def relist(self, prefix: str, unread: Callable[[], bool] | None = None) -> None:
        """List the resource under `prefix` (its resource prefix) afresh, on its own, as upstream's
        cacher of that resource relists: now (after an encryption configuration's reload, whose
        values may read again), or, with `unread`, again and again while `unread()` says some of
        its values still do not (after `drop`: a plugin that failed for a while, another server's
        key this one has yet to get), backing off as upstream's reflector does. A list that finds
        what the cache holds changes nothing; one that differs replaces the resource's entries,
        begins its history afresh and ends its watches; other resources are not touched."""
        if unread is not None and prefix in self._retrying:
            return
        task = asyncio.get_running_loop().create_task(self._relist_resource(prefix) if unread is None
                                                      else self._relist_until(prefix, unread))
        self._relisting.add(task)
        task.add_done_callback(self._relisting.discard)

    async def _relist_until(self, prefix: str, unread: Callable[[], bool]) -> None:
        self._retrying.add(prefix)
        try:
            delay = _RELIST_BACKOFF[0]
            while unread():
                await self.clock.sleep(delay)
                delay = min(2 * delay, _RELIST_BACKOFF[1])
                await self._relist_resource(prefix)
        finally:
            self._retrying.discard(prefix)

    async def _relist_resource(self, prefix: str) -> None:
        for _ in range(_RELIST_TRIES):
            changed = self._changes.get(prefix, 0)
            try:
                kvs, rev = await self.store.list(prefix)
            except Exception:  # (its values stay as they were: a later relist, or reload, tries again)
                log.exception("relisting %s failed", prefix)
                return
            # an event of the resource the cache applied while the list was read, past the list's
            # revision, is not in it: the list would put back what that event replaced
            if rev >= self.rev or self._changes.get(prefix, 0) == changed:
                break
        else:
            log.warning("relisting %s: its events kept outrunning %d lists; left as it was", prefix, _RELIST_TRIES)
            return
        held = self._by_prefix.get(prefix, {})
        if len(kvs) == len(held) and all((e := held.get(kv.key)) is not None and e.rev == kv.mod_revision
                                         for kv in kvs):
            return
        decoder = self.decoder(prefix)
        objs = {kv.key: Entry(None, kv.mod_revision, None, kv.value, decoder, len(kv.value)) for kv in kvs}
        self._by_prefix[prefix] = objs
        self._keys[prefix] = SortedList(objs)
        self._changed((prefix,))
        self.stats.initialized({prefix: objs})
        self.begin_history(prefix)
        if rev > self.rev:
            self._relisted[prefix] = self._listed_at[prefix] = rev
        self.end_watches(prefix)

    @property
    def watcher_count(self) -> int:
        return sum(len(s) for s in self._watchers.values())

    @property
    def oldest_revision(self) -> int:
        """The oldest revision a list at an earlier one may read (`window`)."""
        return self._oldest


#: a stored object's resourceVersion while it is encoded (`stored_json`), and the field as cut out
_RV = b'"resourceVersion":""'
_RV_FIELD = b',"resourceVersion":""'


def _decode_unstructured(value: bytes, rev: int) -> dict:
    return decode(value, rev, True)


def stored_json(obj: dict[str, Any], keeps_spec: bool = False, unstructured: bool = False,
                ordered: dict[str, Any] | None = None) -> tuple[bytes, dict, int]:
    """The bytes written to the store for `obj` (without its resourceVersion), the object in
    upstream's order with an empty resourceVersion in its place (what the writer hands
    `WatchCache.expect`, which fills it in), and where the field was cut out of the bytes (-1:
    not known). The served JSON at any revision is the bytes with the field put back
    (`served_json`), so a write's response is not a second encoding of the cached object.
    `keeps_spec`: the write keeps the spec the object had (a status write), whose JSON is then
    remembered for its next writes. `unstructured`: a custom resource, every map of which is stored
    sorted, as Go encodes a map[string]interface{}. `ordered`: `obj` in that order already, with an
    empty resourceVersion (`in_unstructured_order(obj, "")`, which a writer of a large custom resource
    computes in a worker thread: linear, but ~0.3 s at 3 MB)."""
    if ordered is None:
        ordered = in_unstructured_order(obj, "") if unstructured else in_upstream_order(dict(obj), "")
    encoded = go_escaped(orjson.dumps(_framed(ordered, keeps_spec)))
    at = encoded.find(_RV)
    # it is the metadata's field (after another) where no brace precedes it but the object's and its
    # metadata's (no map before it could hold a field of that name; a string's quotes are escaped), or
    # where no other field of that name follows: a custom resource's sorted metadata holds its
    # managedFields before it, and an encoding of the object again was ~20% of a 3 MB one's write
    if at > 0 and encoded[at - 1] == 44 and (encoded.count(b"{", 0, at) == 2 or encoded.find(_RV, at + 1) < 0):
        return encoded.replace(_RV_FIELD, b"", 1), ordered, at - 1
    return stored_value(ordered), ordered, -1


#: the least JSON of a FieldsV1 that `_framed` puts in as its remembered JSON: an Event's few
#: fields are encoded faster than its entry and metadata are copied to hold them
_FRAMED_LEAST = 512


def _framed(obj: dict[str, Any], keeps_spec: bool = False) -> dict[str, Any]:
    """`obj` to encode, with the managedFields and status whose JSON is remembered
    (machinery/encoded.py), or else the FieldsV1 of its managedFields entries, and its spec in it
    as that JSON: the entries' FieldsV1 objects are shared by the objects of one shape and their
    writes (a pod's create entry is ~40% of its JSON), a remembered status write's entries by all
    its writes, and a status write keeps its object's spec (a pod's is ~35% of its JSON). What is
    handed to the store is not changed any more, so its FieldsV1 objects are remembered, and its
    spec once a write keeps it (`keeps_spec`): remembering every created or changed spec cost a
    pod create and a binding more than the status writes that reuse it saved."""
    md = obj.get("metadata")
    entries = md.get("managedFields") if type(md) is dict else None
    if type(entries) is list and entries and (f := json_memo.known_fragment(entries)) is not None:
        obj = {**obj, "metadata": {**md, "managedFields": f}}
    elif type(entries) is list and entries:
        framed = None
        for i, e in enumerate(entries):
            fields = e.get("fieldsV1") if type(e) is dict else None
            if type(fields) is dict and (f := json_memo.framing(fields, _FRAMED_LEAST)) is not None:
                if framed is None:
                    framed = entries[:i]
                framed.append({**e, "fieldsV1": f})
            elif framed is not None:
                framed.append(e)
        if framed is not None:
            obj = {**obj, "metadata": {**md, "managedFields": framed}}
    status = obj.get("status")
    if status and (f := json_memo.known_fragment(status)) is not None:
        obj = {**obj, "status": f}
    spec = obj.get("spec")
    if type(spec) is dict and spec:  # the watch cache's copy of it is known by its JSON too (alias)
        f = json_memo.fragment(spec) if keeps_spec else json_memo.known_fragment(spec)
        if f is not None:
            obj = {**obj, "spec": f}
    return obj


def served_json(value: bytes, at: int, rev: int, end: bytes = b"\n") -> bytes | None:
    """The object `stored_json` encoded as `value`, as served at revision `rev`, followed by `end`
    (the newline a response body ends with); None where `at` is not known."""
    if at < 0:
        return None
    view = memoryview(value)
    return b"".join((view[:at], b',"resourceVersion":"%d"' % rev, view[at:], end))


def stored_value(obj: dict[str, Any]) -> bytes:
    """The bytes written to the store: the object without its resourceVersion."""
    md = obj.get("metadata")
    if md and "resourceVersion" in md:
        obj = {**obj, "metadata": {k: v for k, v in md.items() if k != "resourceVersion"}}
    return compact_dumps(obj)
