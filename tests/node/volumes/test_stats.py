"""The kubelet's volume stats (/stats/summary) on the simulated runtime, through a node agent's
kubelet endpoints on a virtual clock: an emptyDir's files, which live in the pod's memory, are
counted as du would count them on the node's filesystem, and each volume's measurement stands for
the volume stats aggregation period (volumeStatsAggPeriod, 1 minute), as upstream's volume stat
calculator serves its latest one."""

from types import SimpleNamespace

import orjson
import pytest
from multidict import CIMultiDict

from nanokube.node.storage import CSI_DRIVER
from nanokube.node.storage.provisioner import csi_driver_object
from tests.controllers import eventually
from tests.node import ManualClock
from tests.node.test_lifecycle import node_agents, phase_is
from tests.node.volumes.test_persistent import pod_on_static_claim

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


async def test_a_block_claim_is_measured_as_a_device_its_capacity_alone(tmp_path):
    """A Block claim is measured as upstream's MetricsBlock measures a device: its size as the
    capacity, nothing else; the simulated runtime's device is an empty stand-in (it reads a file
    whole), so the disk's size is its PersistentVolume's capacity."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        await s.client.resource("storage.k8s.io", "v1", "csidrivers").create(csi_driver_object())
        (tmp_path / "disk").mkdir()
        await pod_on_static_claim(s.client, "trainer", {"csi": {
            "driver": CSI_DRIVER, "volumeHandle": "disk", "volumeAttributes": {"path": str(tmp_path / "disk")}}},
            "Block", {"volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}]})
        await eventually(phase_is(s.client.resource("", "v1", "pods"), "trainer", "Running"))
        got = (await _volumes(mgr.kubelet_for("gpu-0")))["data"]
        assert {k: v for k, v in got.items() if k != "time"} == {
            "availableBytes": 0, "capacityBytes": 1 << 30, "usedBytes": 0, "inodesFree": 0, "inodes": 0,
            "inodesUsed": 0, "name": "data", "pvcRef": {"name": "trainer", "namespace": "default"}}, got
