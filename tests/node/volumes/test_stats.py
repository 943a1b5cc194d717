"""The kubelet's volume stats (/stats/summary) on the simulated runtime, through a node agent's
kubelet endpoints on a virtual clock: an emptyDir's files, which live in the pod's memory, are
counted as du would count them on the node's filesystem, and each volume's measurement stands for
the volume stats aggregation period (volumeStatsAggPeriod, 1 minute), as upstream's volume stat
calculator serves its latest one."""

from types import SimpleNamespace

import orjson
import pytest
from multidict import CIMultiDict

from tests.controllers import eventually
from tests.node import ManualClock
from tests.node.test_lifecycle import node_agents, phase_is

GET = SimpleNamespace(method="GET", query={}, headers=CIMultiDict())
#: writes 5000 bytes into the emptyDir at once, another file 30 s later, then runs on
SCRIPT = "printf '%5000s' x > /cache/a && sleep 30 && echo b > /cache/b && sleep 3600"


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        yield s.client.resource("", "v1", "pods"), mgr.kubelet_for("gpu-0"), clock


async def _volumes(kubelet) -> dict[str, dict]:
    summary = orjson.loads((await kubelet.serve(GET, "/stats/summary")).body)
    return {v["name"]: v for p in summary["pods"] if p["podRef"]["name"] == "trainer" for v in p.get("volume") or ()}


async def test_a_simulated_emptydir_is_measured_and_each_measurement_stands_a_minute(env):
    pods, kubelet, clock = env
    await pods.create({"metadata": {"name": "trainer", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", SCRIPT],
                                             "volumeMounts": [{"name": "cache", "mountPath": "/cache"},
                                                              {"name": "ram", "mountPath": "/ram"}]}],
        "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "ram", "emptyDir": {"medium": "Memory"}}]}})
    await eventually(phase_is(pods, "trainer", "Running"))
    first = (await _volumes(kubelet))["cache"]
    # the volume's directory and a file of 5000 bytes in two 4 KiB blocks
    assert (first["usedBytes"], first["inodesUsed"]) == (4096 + 8192, 2)
    assert first["capacityBytes"] >= first["availableBytes"] > 0 and first["inodes"] >= first["inodesFree"] > 0
    assert "pvcRef" not in first and first["time"] == clock.rfc3339()
    ram = (await _volumes(kubelet))["ram"]
    assert (ram["usedBytes"], ram["inodesUsed"]) == (0, 1), "a Memory emptyDir is measured too (du of its tmpfs: its directory takes no page)"

    for _ in range(31):
        await clock.advance(1)
    assert (await _volumes(kubelet))["cache"] == first, "the measurement stands for the aggregation period"
    for _ in range(29):
        await clock.advance(1)
    later = (await _volumes(kubelet))["cache"]
    assert (later["usedBytes"], later["inodesUsed"]) == (first["usedBytes"] + 4096, 3)
    assert later["time"] == clock.rfc3339() != first["time"]
