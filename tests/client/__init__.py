"""Shared set-up of the client tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.loopback import LocalClient
from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore


@contextlib.asynccontextmanager
async def expiring_events(clock: VirtualClock) -> AsyncIterator[LocalClient]:
    """An in-process API server on `clock` that deletes Events an hour after their last write
    (--event-ttl 1h), with the namespace `default`; a client of it."""
    s = APIServer(MemoryStore(), None, port=0, clock=clock, event_ttl=3600)
    await s.store.start()
    await s.cache.start()
    s.event_ttl.start()
    try:
        client = LocalClient(s.rest)
        await client.resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
        yield client
    finally:
        await s.event_ttl.stop()
        await s.cache.stop()
        await s.store.close()
