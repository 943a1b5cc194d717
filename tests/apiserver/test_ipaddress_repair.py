"""The IPAddress repair loop's grace for an allocator's IPAddress whose Service is on its way
(several API server workers record the address before they write the Service)."""

from __future__ import annotations

import asyncio
import time

from nanokube.apiserver.ipaddresses import GROUP, IPAddressRepair, ip_address_for
from nanokube.clock import VirtualClock
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack


async def test_a_young_orphan_is_kept_for_its_grace_then_deleted():
    s = await make_stack()
    clock = VirtualClock(start=time.time())
    ipas = s.client.resource(GROUP, "v1", "ipaddresses")
    await ipas.create(ip_address_for("10.96.0.50", {"metadata": {"name": "on-its-way", "namespace": "default"}}))
    repair = IPAddressRepair(s.client, None, orphan_grace=10, clock=clock)
    await repair.start()
    try:
        for _ in range(20):
            await asyncio.sleep(0)
        assert (await ipas.get("10.96.0.50"))["spec"]["parentRef"]["name"] == "on-its-way"
        await clock.advance(11)

        async def gone():
            try:
                await ipas.get("10.96.0.50")
            except APIError as e:
                return e.code == 404
            return False

        assert await eventually(gone)
    finally:
        await repair.stop()
        await s.close()


async def test_without_grace_an_orphan_goes_at_once():
    s = await make_stack()
    ipas = s.client.resource(GROUP, "v1", "ipaddresses")
    await ipas.create(ip_address_for("10.96.0.51", {"metadata": {"name": "gone", "namespace": "default"}}))
    repair = IPAddressRepair(s.client, None)
    await repair.start()
    try:
        async def gone():
            try:
                await ipas.get("10.96.0.51")
            except APIError as e:
                return e.code == 404
            return False

        assert await eventually(gone)
    finally:
        await repair.stop()
        await s.close()
