"""A stopped proxier leaves nothing running: its informers, its sync loop and the writes of
its Events still waiting to be tried again (upstream's broadcaster Shutdown)."""

from __future__ import annotations

import asyncio

from nanokube.clock import Clock
from nanokube.proxy.nftables.nft import Nft, NftError
from nanokube.proxy.proxier import Proxier
from tests.controllers import eventually, make_stack


class BrokenNft(Nft):
    def apply(self, transaction: str) -> None:
        raise NftError("Error: Could not process rule: Operation not supported")


class Unreachable:
    """The stack's client, except that the API server cannot be reached to write Events
    (a transport error: the recorder tries again later)."""

    def __init__(self, client):
        self.client = client

    def resource(self, group: str, version: str, plural: str):
        res = self.client.resource(group, version, plural)
        return _NoEvents(res) if plural == "events" else res


class _NoEvents:
    def __init__(self, res):
        self.res = res

    def __getattr__(self, name):
        return getattr(self.res, name)

    async def create(self, *args, **kwargs):
        raise ConnectionRefusedError("connection refused")

    async def patch(self, *args, **kwargs):
        raise ConnectionRefusedError("connection refused")


def _running() -> set[asyncio.Task]:
    return {t for t in asyncio.all_tasks() if not t.done() and t is not asyncio.current_task()}


async def test_stop_leaves_no_event_write_behind():
    s = await make_stack()
    before = _running()
    p = Proxier(Unreachable(s.client), "node-1", "", nft=BrokenNft(), clock=Clock(), min_sync_period=0,
                sync_period=1000)
    await p.start()
    try:
        # the failed sync's Event could not be written: its write waits to be tried again
        assert await eventually(lambda: _settled(p))
        assert _running() - before
    finally:
        await p.stop()
    assert _running() - before == set()
    await s.close()


async def _settled(p: Proxier) -> bool:
    return p.syncs >= 1 and all(not t.last_report.ok for t in p.tables.values())
