"""The store backends by URL: the one place that knows them all, so the interface
knows none of its implementations."""

from __future__ import annotations

import os

from .etcd import EtcdStore
from .interface import Store
from .memory import MemoryStore
from .sqlite import SQLiteStore


def open_store(url: str, data_dir: str | None = None, shared: bool = False) -> Store:
    """`sqlite` (in data_dir), `sqlite:///path/to.db`, `memory`, or
    `etcd://host:port[,host:port...]`. `shared`: one of several processes writing the store
    (ValueError for memory, which lives in one process)."""
    if url == "memory":
        if shared:
            raise ValueError("the memory store lives in one process: several API server workers need sqlite or etcd")
        return MemoryStore()
    if url == "sqlite" or url.startswith("sqlite://"):
        path = url[len("sqlite://"):] if url.startswith("sqlite://") else os.path.join(data_dir or ".", "state.db")
        return SQLiteStore(path, shared=shared)
    if url.startswith("etcd://"):
        return EtcdStore(url[len("etcd://"):].split(","))
    raise ValueError(f"unknown store {url!r}: expected sqlite, memory or etcd://HOST:PORT[,HOST:PORT...]")
