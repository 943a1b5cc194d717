"""Store test fixtures: one opener per backend. The etcd server fixture is
shared by the whole session (tests/conftest.py), so every test works under its
own key prefix."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

import pytest

from nanokube.store.interface import Store
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore


@dataclass
class Backend:
    """Opens stores of one kind; `reopen` closes one and opens it again on the
    same durable state (for etcd, across a server restart)."""

    name: str
    opener: Callable[[], Store]
    restart_server: Callable[[], None] | None = None
    opened: list[Store] = field(default_factory=list)

    async def open(self) -> Store:
        store = self.opener()
        await store.start()
        self.opened.append(store)
        return store

    async def reopen(self, store: Store) -> Store:
        await store.close()
        if self.restart_server:
            self.restart_server()
        return await self.open()

    @property
    def durable(self) -> bool:
        return self.name != "memory"


@pytest.fixture(params=["memory", "sqlite", "etcd"])
async def backend(request, tmp_path):
    if request.param == "memory":
        b = Backend("memory", MemoryStore)
    elif request.param == "sqlite":
        b = Backend("sqlite", lambda: SQLiteStore(str(tmp_path / "state.db")))
    else:
        from nanokube.store.etcd import EtcdStore

        server = request.getfixturevalue("etcd_server")
        b = Backend("etcd", lambda: EtcdStore([server.endpoint]), server.restart)
    yield b
    for store in b.opened:
        await store.close()


@pytest.fixture
async def store(backend) -> Store:
    return await backend.open()


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses (the etcd server is shared)."""
    return f"/registry/t{uuid.uuid4().hex[:12]}/"
