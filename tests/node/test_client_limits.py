"""The kubelet's client limits (KubeletConfiguration kubeAPIQPS/kubeAPIBurst, eventRecordQPS/eventBurst):
each agent's pod writes wait for a token of its own bucket on its clock, its events for another's;
its Lease and Node status go unlimited (the kubelet's heartbeat client). /configz shows the limits
applied."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
from multidict import CIMultiDict

from nanokube.apiserver.loopback import connector
from nanokube.node.manager import KUBELET_CLIENT_LIMITS, NodeManager
from tests.node import api_on_manual_clock
from tests.node.test_admission import CLUSTER, bound

GET = SimpleNamespace(method="GET", query={}, headers=CIMultiDict())


async def configz(mgr) -> dict:
    return orjson.loads((await mgr.kubelet_for("small-0").serve(GET, "/configz")).body)["kubeletconfig"]


async def test_a_kubelets_pod_writes_wait_for_its_token_bucket():
    async with api_on_manual_clock() as (s, clock):
        mgr = NodeManager(connector(s.rest), CLUSTER, clock,
                          client_limits={"api_limit": (1.0, 2), "event_limit": (1.0, 2)})
        await mgr.start()
        pods = s.client.resource("", "v1", "pods")
        try:
            assert {k: v for k, v in (await configz(mgr)).items() if "QPS" in k or "Burst" in k} == {
                "kubeAPIQPS": 1, "kubeAPIBurst": 2, "eventRecordQPS": 1, "eventBurst": 2}
            for i in range(4):
                await pods.create(bound(f"p{i}"))

            async def running() -> int:
                items, _ = await pods.list("default")
                return sum((p.get("status") or {}).get("phase") == "Running" for p in items)
            await asyncio.sleep(0.5)
            # a burst of two writes, then none while the clock stands: not all four can be reported
            assert await running() < 4
            for _ in range(40):
                if await running() == 4:
                    break
                await clock.advance(1)
                await asyncio.sleep(0.02)
            assert await running() == 4
        finally:
            await mgr.stop()


async def test_without_limits_the_kubelet_claims_none():
    """`nanokube simulate`'s agents apply none, so their /configz shows none; `up`'s the defaults."""
    async with api_on_manual_clock() as (s, clock):
        mgr = NodeManager(connector(s.rest), CLUSTER, clock)
        assert not {k for k in await configz(mgr) if "QPS" in k or "Burst" in k}
        assert KUBELET_CLIENT_LIMITS == {"api_limit": (50.0, 100), "event_limit": (50.0, 100)}
