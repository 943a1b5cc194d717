"""Events expire, as kube-apiserver's `--event-ttl` makes them.

Upstream's event registry gives every create and update of an Event (core/v1 and
events.k8s.io/v1 share that storage) a TTL (its `TTLFunc`), and the etcd3 store
attaches the written key to an etcd lease of that TTL: etcd deletes the key when
the lease expires, so an Event lives `ttl` after its last write and every watcher
sees it DELETED. Leases are costly in etcd, so the store's lease manager reuses
the last lease it granted for writes whose expiry would be close to it: a lease
is granted for `ttl + reuse` (reuse = 5% of the TTL, at most 60 s), and reused
while it expires between `ttl` and `ttl + reuse` from now and holds at most 1000
attachments. Each grant observes in `etcd_lease_object_counts` the attachments
counted since the previous grant, its own included (as upstream counts them).

Here the same leases live in the API server: one for each grant, kept in a heap
by expiry, each with the keys still attached to it (a key's write moves it to the
current lease). One task sleeps on the server's clock until the earliest lease
expires, so virtual time expires Events in simulation too, and then deletes each
key still attached through the store, on the revision it was attached at: the
delete is a durable write like any other, every watch sees DELETED in revision
order, and an Event written again meanwhile (the write is not in the cache yet)
lives on. No store here keeps leases, etcd included (the store client does not
speak etcd's lease API), so a restart re-derives each Event's expiry from its
last write's time, the latest `managedFields` time the server stamped (never
later than now): Events already past their TTL are deleted at once.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging

import orjson

from ..clock import Clock, parse_time
from ..machinery import goduration
from ..store.interface import KeyNotFound, RevisionMismatch, Store
from .cache import DELETED, CacheEvent, WatchCache, Watcher
from .metrics import Family

log = logging.getLogger(__name__)

#: the events' storage prefix (events.k8s.io/v1 Events are stored there too)
PREFIX = "/registry/events/"
DEFAULT_TTL = 3600.0
#: the etcd3 lease manager's defaults (--lease-reuse-duration-seconds, 5% of the TTL, 1000 objects a lease)
REUSE_SECONDS, REUSE_PERCENT, MAX_OBJECTS = 60, 0.05, 1000
_OBJECT_COUNT_BUCKETS = (10, 50, 100, 500, 1000, 2500, 5000)
#: after a store error, the expired lease's remaining Events are deleted again this much later
RETRY_SECONDS = 1.0


def parse_ttl(text: str) -> float:
    """`--event-ttl` in seconds: Go's time.ParseDuration, then kube-apiserver's check that it is
    positive. Raises ValueError with the message kube-apiserver prints."""
    seconds = goduration.parse(text, "--event-ttl")
    if seconds <= 0:
        raise ValueError("--event-ttl must be greater than 0")
    return seconds


class _Lease:
    __slots__ = ("expiry", "keys")

    def __init__(self, expiry: float) -> None:
        self.expiry = expiry
        #: the keys attached to this lease now
        self.keys: set[str] = set()


class EventTTL:
    def __init__(self, store: Store, cache: WatchCache, clock: Clock, ttl: float, registry) -> None:
        """`ttl` in seconds; as upstream's registry passes `uint64(ttl.Seconds())` on, a TTL under
        a second attaches no lease and Events never expire."""
        self.store, self.cache, self.clock = store, cache, clock
        self.ttl = int(ttl)
        self.reuse = min(int(REUSE_PERCENT * self.ttl), REUSE_SECONDS)
        self.object_counts = Family("histogram", "etcd_lease_object_counts",
                                    "[ALPHA] Number of objects attached to a single etcd lease.", [], registry,
                                    _OBJECT_COUNT_BUCKETS).labels()
        #: (expiry, grant order, lease): the leases by expiry
        self._leases: list[tuple[float, int, _Lease]] = []
        self._order = itertools.count()
        #: key -> (its lease, the revision it was attached at)
        self._attached: dict[str, tuple[_Lease, int]] = {}
        self._current: _Lease | None = None
        self._count = 0
        self._granted = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        """After the cache's start: every write from now on attaches its Event to a lease, and
        the Events stored before get the expiry of their last write."""
        if self.ttl <= 0:
            return
        self.cache.on_event.append(self._observe)
        self._tasks = [asyncio.create_task(self._run()), asyncio.create_task(self._resync())]

    async def _run(self) -> None:
        try:
            await self._restore()
        except Exception:  # a store error: the stored Events wait for their next write or a restart
            log.exception("reading the stored events' expiry failed")
        await self._expire()

    async def _restore(self) -> None:
        """The Events stored before this start, from the store (the cache keeps its entries
        undecoded until asked for, and an Event seldom is); one written since is attached already."""
        kvs, _ = await self.store.list(PREFIX)
        now = self.clock.now()
        restored: dict[float, _Lease] = {}
        for kv in kvs:
            if kv.key in self._attached:
                continue
            expiry = min(now, _written(orjson.loads(kv.value), now)) + self.ttl
            lease = restored.get(expiry)
            if lease is None:
                lease = restored[expiry] = self._add(expiry)
            self._attach(kv.key, lease, kv.mod_revision)
        log.debug("event TTL %d s: %d stored events, the first expiring in %.0f s", self.ttl, len(kvs),
                  min(restored, default=now) - now)

    async def stop(self) -> None:
        if self._observe in self.cache.on_event:
            self.cache.on_event.remove(self._observe)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _resync(self) -> None:
        """The changes a relist of the cache stands for (it lost track of the store) never came
        through `_observe`: the cache tells its watchers of a relist (this one accepts no event),
        and then an Event that is new or was rewritten meanwhile gets the current lease; one
        deleted meanwhile is dropped when its lease expires."""
        while True:
            watcher = Watcher(PREFIX, lambda cev: False)
            self.cache.add_watcher(watcher)
            try:
                await watcher.queue.get()
            finally:
                self.cache.remove_watcher(watcher)
            for key, entry in self.cache.list(PREFIX):
                held = self._attached.get(key)
                if held is None or held[1] != entry.rev:
                    self._attach(key, self._lease(), entry.rev)

    def _observe(self, cev: CacheEvent) -> None:
        """Every committed change the cache applies: an Event's write moves it to the current lease."""
        key = cev.key
        if not key.startswith(PREFIX):
            return
        if cev.type != DELETED:
            self._attach(key, self._lease(), cev.rev)
        elif (held := self._attached.pop(key, None)) is not None:
            held[0].keys.discard(key)

    def _attach(self, key: str, lease: _Lease, rev: int) -> None:
        held = self._attached.get(key)
        if held is not None:
            held[0].keys.discard(key)
        lease.keys.add(key)
        self._attached[key] = (lease, rev)

    def _lease(self) -> _Lease:
        """The lease manager's GetLease: the current lease while it expires in (ttl, ttl + reuse]
        from now and has room, else a new one of ttl + reuse."""
        now, ttl = self.clock.now(), self.ttl
        self._count += 1  # as upstream: counted before the check, so a grant observes the count with this attachment
        cur = self._current
        # `<=` where upstream has `<`: at the instant of a grant (virtual time stands still), upstream's
        # clock has always moved on
        if cur is not None and now + ttl < cur.expiry <= now + ttl + self.reuse and self._count <= MAX_OBJECTS:
            return cur
        self.object_counts.observe(self._count)
        self._count = 1
        self._current = self._add(now + ttl + self.reuse)
        return self._current

    def _add(self, expiry: float) -> _Lease:
        lease = _Lease(expiry)
        heapq.heappush(self._leases, (expiry, next(self._order), lease))
        self._granted.set()
        return lease

    async def _expire(self) -> None:
        """Sleep until the earliest lease with keys attached expires, then delete what is still
        attached to it. Leases granted while it sleeps expire later (the TTL is one), so the head
        is the one to wait for. A lease whose every key was written again since (a series
        refreshed each 30 minutes moves on each time: a third of a long run's leases) is dropped
        unrevoked, as revoking it would delete nothing, so no timer wakes for it; but not the
        current one, which later writes may still be attached to."""
        leases = self._leases
        while True:
            while leases and not leases[0][2].keys and leases[0][2] is not self._current:
                heapq.heappop(leases)
            if not leases:
                self._granted.clear()
                await self._granted.wait()
                continue
            delay = leases[0][0] - self.clock.now()
            if delay > 0:
                await self.clock.sleep(delay)
                continue
            lease = heapq.heappop(leases)[2]
            if lease is self._current:
                self._current = None
            try:
                await self._revoke(lease)
            except Exception:  # a store error: what is left attached is tried again, as etcd retries a revoke
                log.exception("deleting expired events failed; retrying in %s s", RETRY_SECONDS)
                heapq.heappush(leases, (self.clock.now() + RETRY_SECONDS, next(self._order), lease))

    async def _revoke(self, lease: _Lease) -> None:
        deleted = 0
        for key in sorted(lease.keys):
            held = self._attached.get(key)
            if held is None or held[0] is not lease:
                continue
            # the cache's KV of the revision it was attached at, when it has it: SQLite then deletes
            # without reading the row first (Store.delete's prev)
            entry = self.cache.get(key)
            try:
                await self.store.delete(key, held[1], entry.kv if entry is not None and entry.rev == held[1] else None)
                deleted += 1
            except KeyNotFound:  # deleted meanwhile (its DELETE drops it too, unless it came before a restore)
                if self._attached.get(key) is held:
                    del self._attached[key]
            except RevisionMismatch:  # written again: that write moves it to a later lease
                pass
        log.debug("event TTL: a lease expired; %d of its events deleted", deleted)


def _written(obj: dict, now: float) -> float:
    """When a stored Event was last written: the latest time the server stamped on its
    managedFields entries, else its creationTimestamp, else now."""
    md = obj.get("metadata") or {}
    stamps = [e["time"] for e in md.get("managedFields") or () if e.get("time")]
    stamp = max(stamps, key=parse_time) if stamps else md.get("creationTimestamp")
    try:
        return parse_time(stamp) if stamp else now
    except ValueError:
        return now
