"""A stopped proxier leaves nothing running: its informers, its sync loop and the writes of
its Events still waiting to be tried again (upstream's broadcaster Shutdown)."""

from __future__ import annotations

import asyncio

from nanokube.clock import Clock
from nanokube.proxy.nftables.nft import Nft, NftError
from nanokube.proxy.proxier import Proxier
from tests.controllers import eventually, make_stack
from tests.proxy.test_proxier import endpoint_slice, endpoints_of, service


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


async def test_stop_right_after_a_change_ends_the_sync_loop(netns, nft):
    """A change that wakes the loop just as stop() cancels it: Python 3.11's asyncio.wait_for, which the
    loop waited in, returned the wake and dropped the cancellation, so the loop went on and stop()
    never returned (found by topo54's test, which deleted its Service just before stopping)."""
    s = await make_stack()
    svcs = s.client.resource("", "v1", "services")
    await svcs.create(service("10.96.0.55"))
    await s.client.resource("discovery.k8s.io", "v1", "endpointslices").create(endpoint_slice(["10.244.1.1"]))
    p = Proxier(s.client, "node-1", "", netns=netns, min_sync_period=0.01)
    before = _running()
    await p.start()
    try:
        async def programmed():
            return endpoints_of(nft, "10.96.0.55") == 1
        assert await eventually(programmed)
    finally:
        await svcs.delete("web", "default")  # a change that wakes the sync loop as stop() cancels it
        await p.stop()
    assert _running() - before == set()
    await s.close()
