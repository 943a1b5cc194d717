"""The store backends by URL: the one place that knows them all, so the interface
knows none of its implementations. Each is imported only when opened: `check` judges a
URL without them (etcd's client alone imports aiohttp), for `up` to refuse a bad --store
with its other flags, before it makes the cluster's keys."""

from __future__ import annotations

import os

from .interface import Store


def check(url: str, shared: bool = False) -> None:
    """ValueError naming what is wrong with `url`, or with `shared` for it (see `open_store`)."""
    if url == "memory":
        if shared:
            raise ValueError("the memory store lives in one process: several API server workers need sqlite or etcd")
    elif not (url == "sqlite" or url.startswith("sqlite://") or url.startswith("etcd://")):
        raise ValueError(f"unknown store {url!r}: expected sqlite, memory or etcd://HOST:PORT[,HOST:PORT...]")


def open_store(url: str, data_dir: str | None = None, shared: bool = False) -> Store:
    """`sqlite` (in data_dir), `sqlite:///path/to.db`, `memory`, or
    `etcd://host:port[,host:port...]`. `shared`: one of several processes writing the store
    (ValueError for memory, which lives in one process)."""
    check(url, shared)
    if url == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if url.startswith("etcd://"):
        from .etcd import EtcdStore

        return EtcdStore(url[len("etcd://"):].split(","))
    from .sqlite import SQLiteStore

    path = url[len("sqlite://"):] if url.startswith("sqlite://") else os.path.join(data_dir or ".", "state.db")
    return SQLiteStore(path, shared=shared)
