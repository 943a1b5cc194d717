"""The revisioned key-value store every backend implements.

Modelled on etcd v3: one global, monotonic revision shared by all keys; every
write bumps it; each key remembers the revision that created it and the one
that last modified it. Values are opaque bytes (the object's JSON at its storage
version). The API server keeps `resourceVersion` out of stored values and sets
it from `mod_revision` on read.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import AsyncIterator

PUT = "PUT"
DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class KV:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int


@dataclass(frozen=True, slots=True)
class Event:
    """One change. For DELETE, `kv.value` is the last value and `kv.mod_revision`
    the revision of the deletion; `prev` is the state before the change."""

    type: str
    kv: KV
    prev: KV | None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


class StoreError(Exception):
    pass


class KeyExists(StoreError):
    def __init__(self, key: str):
        super().__init__(f"key exists: {key}")
        self.key = key


class KeyNotFound(StoreError):
    def __init__(self, key: str):
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionMismatch(StoreError):
    """A conditional write lost the race; `current` is what is there now."""

    def __init__(self, key: str, current: KV | None):
        super().__init__(f"revision mismatch on {key}")
        self.key = key
        self.current = current


class Compacted(StoreError):
    """The requested revision is older than the oldest one still kept."""

    def __init__(self, requested: int, compacted: int):
        super().__init__(f"revision {requested} compacted (oldest kept {compacted})")
        self.requested = requested
        self.compacted = compacted


class Unavailable(StoreError):
    pass


class Store(abc.ABC):
    """Async interface; implementations must be safe to call from one event loop."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def get(self, key: str) -> KV | None: ...

    @abc.abstractmethod
    async def list(self, prefix: str) -> tuple[list[KV], int]:
        """All keys under `prefix`, sorted by key, and the store revision they reflect."""

    @abc.abstractmethod
    async def create(self, key: str, value: bytes) -> KV:
        """Raises KeyExists."""

    @abc.abstractmethod
    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        """Compare-and-swap on mod_revision. Raises KeyNotFound or RevisionMismatch.

        `prev`: the caller's copy of the key's KV at `expected_mod_revision`, as this store committed
        it (the watch cache's, from the store's own event), as upstream's GuaranteedUpdate is handed
        the cached object. A store may take it as the event's previous KV instead of reading the
        key first: the compare-and-swap proves the key still holds that revision, and a revision
        names one write. A `prev` at another revision (or key) is ignored; a failed write is
        answered as without it (RevisionMismatch carries the key's current KV, read)."""

    @abc.abstractmethod
    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        """Returns the deleted KV with mod_revision set to the deletion revision.
        Raises KeyNotFound or RevisionMismatch.

        `prev`: as `update`'s, the caller's copy of the key's KV (at `expected_mod_revision` when one
        is given), which a store may take as the deleted value instead of reading the key first."""

    @abc.abstractmethod
    async def current_revision(self) -> int: ...

    @abc.abstractmethod
    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        """Every event with revision > from_revision, in revision order, across all
        keys, then live events until the iterator is closed. Raises Compacted when
        from_revision is older than what is kept."""

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None] | None:
        """A store that publishes its own commits (the local ones) calls `apply` with every event
        after `from_revision`, then with each new one as it commits, synchronously, and returns the
        function that stops it; None (the default) when events only come through `watch`. Raises
        Compacted as `watch` does. If the store later cannot hand over every event (a shared SQLite
        worker behind the change log), it stops and calls `lost` instead."""
        return None

    @abc.abstractmethod
    async def compact(self, revision: int) -> None:
        """Forget history at or below `revision` (current values stay)."""

    async def list_at(self, prefix: str, revision: int, after: str = "", limit: int = 0) -> tuple[int, list[KV]]:
        """The keys under `prefix` sorting after `after` as they were at `revision`: how many there
        were, and the first `limit` of them (all when 0), sorted by key. Raises Compacted where the
        store no longer holds that revision, which this default (a store that keeps no past values:
        the watch cache's window of events is its history) always does."""
        raise Compacted(revision, max(self.compacted_revision, revision + 1))

    async def compaction_round(self, turn: int, revision: int) -> tuple[int, int, int]:
        """One round of kube-apiserver's compactor (apiserver/app.py's `_compactor`): compact at
        `revision`, the store's revision the previous round returned (none at 0, the first round).
        Returns the next round's `turn`, the store's current revision and the revision compacted
        (0: none). This default serves a store no other API server compacts; etcd's coordinates them."""
        current = await self.current_revision()
        if revision:
            await self.compact(revision)
        return turn + 1, current, revision

    def size(self) -> int | None:
        """The database's allocated bytes as last known, what apiserver_storage_size_bytes reports
        (etcd's Status dbSize); None where there is no database file (the memory store). Called
        on each scrape of /metrics, so it must not wait on anything."""
        return None

    @property
    @abc.abstractmethod
    def compacted_revision(self) -> int: ...
