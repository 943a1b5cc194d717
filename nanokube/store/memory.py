"""In-memory backend for tests and simulation: same semantics, no durability."""

from __future__ import annotations

from typing import AsyncIterator, Callable

from .history import History
from .interface import DELETE, KV, PUT, Event, KeyExists, KeyNotFound, RevisionMismatch, Store


class MemoryStore(Store):
    def __init__(self) -> None:
        self._data: dict[str, KV] = {}
        self._rev = 0
        self._history = History(0)

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self._history.close()

    async def get(self, key: str) -> KV | None:
        return self._data.get(key)

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        items = [kv for k, kv in self._data.items() if k.startswith(prefix)]
        items.sort(key=lambda kv: kv.key)
        return items, self._rev

    async def create(self, key: str, value: bytes) -> KV:
        if key in self._data:
            raise KeyExists(key)
        self._rev += 1
        kv = KV(key, value, self._rev, self._rev)
        self._data[key] = kv
        self._history.append(Event(PUT, kv, None))
        return kv

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        """`prev` is not needed: the key's KV is a dict lookup away."""
        cur = self._data.get(key)
        if cur is None:
            raise KeyNotFound(key)
        if cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        self._rev += 1
        kv = KV(key, value, cur.create_revision, self._rev)
        self._data[key] = kv
        self._history.append(Event(PUT, kv, cur))
        return kv

    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        """`prev` is not needed, as for `update`."""
        cur = self._data.get(key)
        if cur is None:
            raise KeyNotFound(key)
        if expected_mod_revision is not None and cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        self._rev += 1
        del self._data[key]
        gone = KV(key, cur.value, cur.create_revision, self._rev)
        self._history.append(Event(DELETE, gone, cur))
        return gone

    async def current_revision(self) -> int:
        return self._rev

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self._history.watch(from_revision)

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None] | None:
        """Every commit is local: the watch cache applies each as it commits, without a queue
        and a task switch per write."""
        return self._history.follow(from_revision, apply, lost)

    async def compact(self, revision: int) -> None:
        self._history.compact(revision)

    @property
    def compacted_revision(self) -> int:
        return self._history.compacted_revision
