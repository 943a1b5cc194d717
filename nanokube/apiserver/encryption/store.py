"""The store as the registry sees it under --encryption-provider-config: values encrypted on their
way in and decrypted on their way out (gets, lists, watch events), as etcd3's store applies its
transformer, so the watch cache, lists, watches and server-side apply see plaintext and every
backend (sqlite, memory, etcd) keeps ciphertext. Only a configured resource's values are touched.

A value no provider reads is a corrupt object (upstream's KEP-3926 handling): a list leaves it
out and notes its key in `unreadable`, where a read of it, or a list of its resource, answers
the corrupt-object error instead (rest.py). Upstream's cacher meets such a value in its watch as
an error, and relists; here a watched value that does not read (another server's write under a
key this one lacks, or has yet to reload) leaves the watch cache (`WatchCache.drop`: no reader
is served the value it replaced as if current) and ends its resource's watches, so clients
relist and meet the error; the watch cache relists that resource, backing off, until its values
read (a KMS plugin that failed for a while). A reloaded configuration while some are noted
relists their resources at once, each on its own (`WatchCache.relist`), as upstream's cacher of a
resource relists until its values read again: whatever the new configuration reads is served."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import AsyncIterator

from ...machinery import errors
from ...store.interface import DELETE, KV, PUT, Event, RevisionMismatch, Store
from .config import Resources
from .value import ENCRYPTED, IDENTITY, TransformError

log = logging.getLogger(__name__)

_REGISTRY = "/registry/"


def _resource_prefix(key: str) -> str:
    """/registry/<resource>/ of a key under it."""
    return key[:key.index("/", len(_REGISTRY)) + 1]


class EncryptedStore(Store):
    """`resources`: the loaded configuration's transformers (replaced whole on a reload)."""

    def __init__(self, inner: Store, resources: Resources) -> None:
        self.inner = inner
        self._resources = resources
        #: a key's resource segment -> its transformer (None: stored as it is), for the resources written so far
        self._by_segment: dict[str, object] = {}
        #: key -> why its stored value does not read (see the module's doc)
        self.unreadable: dict[str, str] = {}
        #: key -> (the ciphertext this server just wrote, its plaintext): its own write's event
        #: hands the plaintext on without decrypting it again
        self._written: dict[str, tuple[bytes, bytes]] = {}
        #: the server's watch cache (cache.WatchCache), told of a watched value that does not read
        #: (`drop`, then `relist` until its resource's values read) and of the resources to list
        #: again after a reload (`relist`); None: no cache
        self.watch_cache = None

    @property
    def resources(self) -> Resources:
        return self._resources

    @resources.setter
    def resources(self, resources: Resources) -> None:
        """A reloaded configuration, from the next value on; the watch cache relists the resources
        whose values did not read."""
        self._resources = resources
        self._by_segment = {}
        if self.watch_cache is not None:
            for prefix in sorted({_resource_prefix(k) for k in self.unreadable}):
                self.watch_cache.relist(prefix)

    def _transformer(self, key: str):
        """The key's resource's transformer (IDENTITY where no provider names it: stored as it is,
        refused where encrypted); None for a key outside the registry."""
        if not key.startswith(_REGISTRY):
            return None
        segment = key[len(_REGISTRY):key.find("/", len(_REGISTRY))]
        try:
            return self._by_segment[segment]
        except KeyError:
            t = self._by_segment[segment] = self._resources.for_resource(segment)
            return t

    def _read(self, kv: KV | None) -> KV | None:
        """`kv` with its value decrypted; TransformError where it does not read."""
        if kv is None:
            return None
        t = self._transformer(kv.key)
        if t is None:
            return kv
        plain, _ = t.from_storage(kv.value, kv.key.encode())
        self.unreadable.pop(kv.key, None)
        return kv if plain is kv.value else KV(kv.key, plain, kv.create_revision, kv.mod_revision)

    def _write(self, key: str, value: bytes) -> bytes:
        t = self._transformer(key)
        if t is None or t is IDENTITY:
            return value
        try:
            out = t.to_storage(value, key.encode())
        except TransformError as e:
            raise errors.internal(str(e)) from None
        self._written[key] = (out, value)
        return out

    @staticmethod
    def _mine(kv: KV, value: bytes) -> KV:
        """The KV the store answered a write with, holding the plaintext written."""
        return kv if kv.value is value else KV(kv.key, value, kv.create_revision, kv.mod_revision)

    def _mismatch(self, e: RevisionMismatch) -> RevisionMismatch:
        try:
            current = self._read(e.current)
        except TransformError:
            return e
        return RevisionMismatch(e.key, current)

    def _noted(self, key: str, e: TransformError) -> None:
        if key not in self.unreadable:
            log.error("unable to transform key %r: %s", key, e)
        self.unreadable[key] = str(e)

    async def stale(self, key: str) -> bool:
        """Whether the key's stored value is read by a provider other than the one that writes now
        (a key rotated, or a KMS key ID moved on), read afresh: the configuration may have changed
        since the watch cache read it."""
        t = self._transformer(key)
        if t is None or t is IDENTITY or (kv := await self.inner.get(key)) is None:
            return False
        await self._asked([kv])
        try:
            return t.from_storage(kv.value, key.encode())[1]
        except TransformError:
            return False

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()
        self.resources.close()

    def size(self) -> int | None:
        return self.inner.size()

    async def _asked(self, kvs: list[KV]) -> None:
        """The seeds these values need that a KMS plugin has yet to decrypt, asked in a worker thread:
        the read that follows finds them (or the plugin's error) and does not hold the loop. Each seed
        is asked once a read, so a list of many values under a seed the plugin refuses or holds waits
        one call's timeout, not one a value."""
        asked: set[tuple[int, bytes, str]] = set()
        for kv in kvs:
            t = self._transformer(kv.key)
            if t is not None and t is not IDENTITY and t.plugins and (todo := t.unread(kv.value)) is not None:
                plugin, obj = todo
                if (seed := (id(plugin), obj.encryptedDEKSource, obj.keyID)) not in asked:
                    asked.add(seed)
                    await asyncio.to_thread(plugin.learn, obj)

    async def _ready(self, key: str) -> None:
        t = self._transformer(key)
        if t is not None and t is not IDENTITY and t.ready is not None:
            await t.ready()

    async def get(self, key: str) -> KV | None:
        kv = await self.inner.get(key)
        if kv is not None:
            await self._asked([kv])
        try:
            return self._read(kv)
        except TransformError as e:  # there, though unreadable: what a get for a name taken asks
            self._noted(key, e)
            return kv

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        kvs, rev = await self.inner.list(prefix)
        await self._asked(kvs)
        out = []
        for kv in kvs:
            try:
                out.append(self._read(kv))
            except TransformError as e:
                self._noted(kv.key, e)
        return out, rev

    async def create(self, key: str, value: bytes) -> KV:
        await self._ready(key)
        kv = await self.inner.create(key, self._write(key, value))
        return self._mine(kv, value)

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        """`prev` (plaintext) goes on only for a value stored as it is."""
        await self._ready(key)
        stored = self._write(key, value)
        try:
            kv = await self.inner.update(key, stored, expected_mod_revision, prev if stored is value else None)
        except RevisionMismatch as e:
            raise self._mismatch(e) from None
        return self._mine(kv, value)

    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        t = self._transformer(key)
        plain = t is None or t is IDENTITY
        try:
            kv = await self.inner.delete(key, expected_mod_revision, prev if plain else None)
        except RevisionMismatch as e:
            raise self._mismatch(e) from None
        self.unreadable.pop(key, None)
        if plain:
            return kv
        if prev is not None and expected_mod_revision is not None and prev.mod_revision == expected_mod_revision:
            return KV(key, prev.value, kv.create_revision, kv.mod_revision)
        try:
            return self._read(kv)
        except TransformError:
            return kv

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    def _event(self, ev: Event) -> Event:
        """`ev` in plaintext. A value that does not read passes as a change outside the registry,
        which moves the watch cache's revision on and nothing else: so does an encrypted value of a
        resource no provider here names (another server's write, one whose configuration has its key:
        API workers between their reloads), which identity refuses to read."""
        key = ev.kv.key
        t = self._transformer(key)
        if t is None or t is IDENTITY and not ev.kv.value.startswith(ENCRYPTED):
            return ev
        mine = self._written.pop(key, None)
        if ev.type == PUT and mine is not None and mine[0] is ev.kv.value:
            return Event(PUT, KV(key, mine[1], ev.kv.create_revision, ev.kv.mod_revision), None)
        try:
            kv = self._read(ev.kv)
        except TransformError as e:
            if ev.type == DELETE:  # a corrupt object deleted unread (corrupt.py): no longer there to refuse
                self.unreadable.pop(key, None)
            else:
                self._noted(key, e)
                if self.watch_cache is not None:
                    self.watch_cache.drop(key, ev.kv.mod_revision)
                    prefix = _resource_prefix(key)
                    self.watch_cache.relist(prefix, lambda: any(k.startswith(prefix) for k in self.unreadable))
            return Event(DELETE if ev.type == DELETE else PUT, KV("/unreadable" + key, b"", 0, ev.kv.mod_revision), None)
        if ev.type == DELETE:
            self.unreadable.pop(key, None)
        return Event(ev.type, kv, None)

    async def _events(self, from_revision: int) -> AsyncIterator[Event]:
        async for ev in self.inner.watch(from_revision):
            if ev.type == PUT:  # a seed the plugin has yet to decrypt (another server's), asked off the loop
                await self._asked([ev.kv])
            yield self._event(ev)

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self._events(from_revision)

    def _unseen(self, kv: KV) -> bool:
        t = self._transformer(kv.key)
        return t is not None and t is not IDENTITY and bool(t.plugins) and t.unread(kv.value) is not None

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None] | None:
        """The inner store's follow. A value under a seed a KMS plugin has yet to decrypt is not read
        in the callback: the follow ends there, reported lost, and the follower's change stream
        (`_events`) asks the plugin off the loop."""
        event = self._event
        if lost is None:
            return self.inner.follow(from_revision, lambda ev: apply(event(ev)), None)
        ended = over = False  # (over: reported lost, or unfollowed by the follower: lost no more)

        def applied(ev: Event) -> None:
            nonlocal ended
            if ended:
                return
            if ev.type == PUT and self._unseen(ev.kv):  # (out of the store's fan-out first)
                ended = True
                asyncio.get_running_loop().call_soon(stream)
                return
            apply(event(ev))

        def dropped() -> None:
            nonlocal over
            if not over:
                over = True
                lost()

        def stream() -> None:
            if not over:
                unfollow()
                dropped()
        unfollow = self.inner.follow(from_revision, applied, dropped)
        if unfollow is None:
            return None

        def stop() -> None:
            nonlocal over
            over = True
            unfollow()
        return stop

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def compaction_round(self, turn: int, revision: int) -> tuple[int, int, int]:
        return await self.inner.compaction_round(turn, revision)

    @property
    def compacted_revision(self) -> int:
        return self.inner.compacted_revision
