"""The IPAddress repair loop's grace for an allocator's IPAddress whose Service is on its way
(several API server workers record the address before they write the Service)."""

from __future__ import annotations

import asyncio
import time


from nanokube.apiserver.ipaddresses import GROUP, IPAddressRepair, ip_address_for
from nanokube.clock import VirtualClock
from nanokube.machinery.errors import APIError
from tests.controllers import eventually


async def _orphan(stack, ip: str, service: str):
    """An allocator's IPAddress whose Service does not exist; returns the ipaddresses client."""
    ipas = stack.client.resource(GROUP, "v1", "ipaddresses")
    await ipas.create(ip_address_for(ip, {"metadata": {"name": service, "namespace": "default"}}))
    return ipas


async def _deleted(ipas, ip: str) -> bool:
    """Whether the IPAddress is (or soon is) gone: False if it is still there after `eventually`'s wait."""
    async def gone():
        try:
            await ipas.get(ip)
        except APIError as e:
            return e.code == 404
        return False

    try:
        return await eventually(gone)
    except AssertionError:
        return False


async def test_a_young_orphan_is_kept_for_its_grace_then_deleted(stack):
    clock = VirtualClock(start=time.time())
    ipas = await _orphan(stack, "10.96.0.50", "on-its-way")
    repair = IPAddressRepair(stack.client, None, orphan_grace=10, clock=clock)
    await repair.start()
    try:
        for _ in range(20):  # nothing to wait for: the repair must leave it alone
            await asyncio.sleep(0)
        assert (await ipas.get("10.96.0.50"))["spec"]["parentRef"]["name"] == "on-its-way"
        await clock.advance(11)
        assert await _deleted(ipas, "10.96.0.50")
    finally:
        await repair.stop()


async def test_without_grace_an_orphan_goes_at_once(stack):
    ipas = await _orphan(stack, "10.96.0.51", "gone")
    repair = IPAddressRepair(stack.client, None)
    await repair.start()
    try:
        assert await _deleted(ipas, "10.96.0.51")
    finally:
        await repair.stop()
