"""Wraps a Store to record per-operation latency, by group and resource (etcd_request_duration_seconds)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import AsyncIterator

from .interface import KV, Event, Store


def _group_resource(key: str) -> tuple[str, str]:
    """/registry/<resource>.<group>/... -> (group, resource), etcd_request_duration_seconds' labels."""
    parts = key.split("/", 3)
    resource, _, group = (parts[2] if len(parts) > 2 else "").partition(".")
    return group, resource


class InstrumentedStore(Store):
    def __init__(self, inner: Store, histogram) -> None:
        self.inner = inner
        self._h = histogram
        #: the histogram's children by (operation, group, resource)
        self._children: dict[tuple[str, str, str], object] = {}

    def _obs(self, op: str, key: str, t0: float) -> None:
        labels = (op, *_group_resource(key))
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._h.labels(*labels)
        child.observe(time.perf_counter() - t0)

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def get(self, key: str) -> KV | None:
        t0 = time.perf_counter()
        try:
            return await self.inner.get(key)
        finally:
            self._obs("get", key, t0)

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        t0 = time.perf_counter()
        try:
            return await self.inner.list(prefix)
        finally:
            self._obs("list", prefix, t0)

    async def create(self, key: str, value: bytes) -> KV:
        t0 = time.perf_counter()
        try:
            return await self.inner.create(key, value)
        finally:
            self._obs("create", key, t0)

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KV:
        t0 = time.perf_counter()
        try:
            return await self.inner.update(key, value, expected_mod_revision)
        finally:
            self._obs("update", key, t0)

    async def delete(self, key: str, expected_mod_revision: int | None = None) -> KV:
        t0 = time.perf_counter()
        try:
            return await self.inner.delete(key, expected_mod_revision)
        finally:
            self._obs("delete", key, t0)

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self.inner.watch(from_revision)

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None] | None:
        return self.inner.follow(from_revision, apply, lost)

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    @property
    def compacted_revision(self) -> int:
        return self.inner.compacted_revision
