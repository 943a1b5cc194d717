"""Wraps a Store to record each request to it as kube-apiserver's etcd3 store records its etcd
requests (RecordEtcdRequest): latency, count, and failures, by operation, group and resource."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import AsyncIterator

from .interface import KV, Event, Store, Unavailable


def _group_resource(key: str) -> tuple[str, str]:
    """/registry/<resource>.<group>/... -> (group, resource), etcd_request_duration_seconds' labels."""
    parts = key.split("/", 3)
    resource, _, group = (parts[2] if len(parts) > 2 else "").partition(".")
    return group, resource


class InstrumentedStore(Store):
    """`metrics`: the API server's (etcd_request_duration_seconds, etcd_requests_total and
    etcd_request_errors_total). A failure is the store's (Unavailable), as an etcd client's error
    is upstream's: a key that exists, is missing or moved on is a request answered. The (group,
    resource) pairs in `unmetered` are kept here but not in upstream's storage, so have no series."""

    def __init__(self, inner: Store, metrics, unmetered: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.inner = inner
        self._latency = metrics.storage_latency
        self._requests, self._errors = metrics.storage_requests, metrics.storage_errors
        self._unmetered = unmetered
        metrics.storage_size(self.size)
        #: the latency and count children by (operation, group, resource); () for an unmetered resource
        self._children: dict[tuple[str, str, str], tuple] = {}

    def _obs(self, op: str, key: str, t0: float, failed: bool) -> None:
        labels = (op, *_group_resource(key))
        series = self._children.get(labels)
        if series is None:
            series = self._children[labels] = () if labels[1:] in self._unmetered else (
                self._latency.labels(*labels), self._requests.labels(*labels))
        if not series:
            return
        series[0].observe(time.perf_counter() - t0)
        series[1].inc()
        if failed:
            self._errors.labels(*labels).inc()

    async def start(self) -> None:
        await self.inner.start()

    def size(self) -> int | None:
        return self.inner.size()

    async def close(self) -> None:
        await self.inner.close()

    async def get(self, key: str) -> KV | None:
        t0, failed = time.perf_counter(), False
        try:
            return await self.inner.get(key)
        except Unavailable:
            failed = True
            raise
        finally:
            self._obs("get", key, t0, failed)

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        t0, failed = time.perf_counter(), False
        try:
            return await self.inner.list(prefix)
        except Unavailable:
            failed = True
            raise
        finally:
            self._obs("list", prefix, t0, failed)

    async def create(self, key: str, value: bytes) -> KV:
        t0, failed = time.perf_counter(), False
        try:
            return await self.inner.create(key, value)
        except Unavailable:
            failed = True
            raise
        finally:
            self._obs("create", key, t0, failed)

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        t0, failed = time.perf_counter(), False
        try:
            return await self.inner.update(key, value, expected_mod_revision, prev)
        except Unavailable:
            failed = True
            raise
        finally:
            self._obs("update", key, t0, failed)

    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        t0, failed = time.perf_counter(), False
        try:
            return await self.inner.delete(key, expected_mod_revision, prev)
        except Unavailable:
            failed = True
            raise
        finally:
            self._obs("delete", key, t0, failed)

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self.inner.watch(from_revision)

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None] | None:
        return self.inner.follow(from_revision, apply, lost)

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def list_at(self, prefix: str, revision: int, after: str = "", limit: int = 0) -> tuple[int, list[KV]]:
        t0, failed = time.perf_counter(), False
        try:
            return await self.inner.list_at(prefix, revision, after, limit)
        except Unavailable:
            failed = True
            raise
        finally:
            self._obs("list", prefix, t0, failed)

    async def compaction_round(self, turn: int, revision: int) -> tuple[int, int, int]:
        return await self.inner.compaction_round(turn, revision)

    @property
    def compacted_revision(self) -> int:
        return self.inner.compacted_revision
