import copy

import pytest

from nanokube.node.cluster import parse_cluster
from nanokube.node.dra.deviceclasses import ensure_device_classes
from nanokube.node.dra.driver import NodeDriver, nic_address, semver
from tests.node import ManualClock

CLUSTER = """\
pools:
  - name: {name}
    count: 1
    capacity: {{cpu: "64", memory: 512Gi, pods: "110"}}
    gpus: {{count: {gpus}, model: H100-SXM5-80GB, memory: 80Gi, architecture: Hopper,
           driverVersion: 550.54.15, cudaVersion: "12.4", computeCapability: "9.0", numaNodes: 2{mig}}}
    nics: {{count: 2, model: ConnectX-7, bandwidth: 400G, rdma: true}}
"""


def node(name="n", gpus=2, mig=0):
    text = CLUSTER.format(name=name, gpus=gpus, mig=f", migSlices: {mig}" if mig else "")
    return parse_cluster(text).nodes()[0]


async def slices_of(client, node_name):
    items, _ = await client.resource("resource.k8s.io", "v1", "resourceslices").list()
    return {s["metadata"]["name"]: s for s in items if s["spec"].get("nodeName") == node_name}


def test_versions_become_semver_and_nic_addresses_are_per_rail_cidrs():
    assert semver("12.4") == "12.4.0" and semver("550.54.15") == "550.54.15" and semver("9.0") == "9.0.0"
    assert nic_address(0, 0) == "100.64.0.1/16" and nic_address(3, 2) == "100.66.0.4/16"


async def test_one_pool_per_driver_with_typed_attributes_and_capacity(stack):
    spec = node()
    d = NodeDriver(stack.client, spec)
    await d.start("node-uid", {})
    got = await slices_of(stack.client, "n-0")
    assert set(got) == {"n-0-gpu.nanokube.io-0", "n-0-nic.nanokube.io-0"}
    gpu = got["n-0-gpu.nanokube.io-0"]["spec"]
    assert gpu["driver"] == "gpu.nanokube.io" and gpu["nodeName"] == "n-0"
    assert gpu["pool"] == {"name": "n-0", "generation": 1, "resourceSliceCount": 1}
    assert [x["name"] for x in gpu["devices"]] == ["gpu-0", "gpu-1"]
    a = gpu["devices"][1]["attributes"]
    assert a["model"] == {"string": "H100-SXM5-80GB"} and a["architecture"] == {"string": "Hopper"}
    assert a["driverVersion"] == {"version": "550.54.15"} and a["cudaVersion"] == {"version": "12.4.0"}
    assert a["computeCapability"] == {"version": "9.0.0"} and a["numaNode"] == {"int": 1}
    assert a["uuid"]["string"].startswith("GPU-") and a["uuid"] != gpu["devices"][0]["attributes"]["uuid"]
    assert a["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:11"}
    assert gpu["devices"][1]["capacity"] == {"memory": {"value": "80Gi"}}
    nic = got["n-0-nic.nanokube.io-0"]["spec"]
    n1 = nic["devices"][1]
    assert n1["attributes"]["rdma"] == {"bool": True} and n1["capacity"] == {"bandwidth": {"value": "400G"}}
    assert n1["attributes"]["resource.kubernetes.io/pcieRoot"] == a["resource.kubernetes.io/pcieRoot"]
    owner = got["n-0-nic.nanokube.io-0"]["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Node" and owner["uid"] == "node-uid"


async def test_mig_partitions_share_counters_with_their_gpu(stack):
    d = NodeDriver(stack.client, node(gpus=1, mig=4))
    await d.start("u", {})
    got = await slices_of(stack.client, "n-0")
    counters, devices = got["n-0-gpu.nanokube.io-0"]["spec"], got["n-0-gpu.nanokube.io-1"]["spec"]
    assert counters["pool"]["resourceSliceCount"] == devices["pool"]["resourceSliceCount"] == 2
    assert "devices" not in counters
    assert counters["sharedCounters"] == [{"name": "gpu-0-counters", "counters": {
        "memory": {"value": "80Gi"}, "slices": {"value": "4"}}}]
    by_name = {x["name"]: x for x in devices["devices"]}
    assert set(by_name) == {"gpu-0", "gpu-0-mig-0", "gpu-0-mig-1", "gpu-0-mig-2", "gpu-0-mig-3"}
    whole = by_name["gpu-0"]["consumesCounters"][0]["counters"]
    assert whole == {"memory": {"value": "80Gi"}, "slices": {"value": "4"}}
    mig = by_name["gpu-0-mig-2"]
    assert mig["consumesCounters"][0] == {"counterSet": "gpu-0-counters",
                                          "counters": {"memory": {"value": "20Gi"}, "slices": {"value": "1"}}}
    assert mig["attributes"]["profile"] == {"string": "1g.20gb"}
    assert mig["attributes"]["parentUUID"] == by_name["gpu-0"]["attributes"]["uuid"]
    assert mig["attributes"]["uuid"]["string"].startswith("MIG-")


async def test_restart_adopts_unchanged_slices_and_bumps_generation_on_change(stack):
    d = NodeDriver(stack.client, node())
    await d.start("u", {})
    before = await slices_of(stack.client, "n-0")
    existing = {"gpu.nanokube.io": [before["n-0-gpu.nanokube.io-0"]], "nic.nanokube.io": [before["n-0-nic.nanokube.io-0"]]}
    again = NodeDriver(stack.client, node())
    await again.start("u", existing)
    after = await slices_of(stack.client, "n-0")
    assert after["n-0-gpu.nanokube.io-0"]["metadata"]["resourceVersion"] == \
        before["n-0-gpu.nanokube.io-0"]["metadata"]["resourceVersion"]
    bigger = NodeDriver(stack.client, node(gpus=3))
    await bigger.start("u", existing)
    gpu = (await slices_of(stack.client, "n-0"))["n-0-gpu.nanokube.io-0"]["spec"]
    assert gpu["pool"]["generation"] == 2 and len(gpu["devices"]) == 3


async def test_growing_past_one_slice_splits_the_pool_and_shrinking_deletes_leftovers(stack):
    d = NodeDriver(stack.client, node(gpus=10, mig=7))
    await d.start("u", {})
    got = await slices_of(stack.client, "n-0")
    gpu = [s["spec"] for n, s in got.items() if n.startswith("n-0-gpu")]
    assert len(gpu) == 4 and {s["pool"]["resourceSliceCount"] for s in gpu} == {4}
    assert sum(len(s.get("devices", [])) for s in gpu) == 80
    assert all(len(s.get("devices", [])) <= 64 and len(s.get("sharedCounters", [])) <= 8 for s in gpu)
    devices, sets = d.gpu.devices[:8], d.gpu.counter_sets[:1]
    await d.gpu.set_devices(devices, sets)
    got = await slices_of(stack.client, "n-0")
    gpu = [s["spec"] for n, s in got.items() if n.startswith("n-0-gpu")]
    assert len(gpu) == 2 and {(s["pool"]["generation"], s["pool"]["resourceSliceCount"]) for s in gpu} == {(2, 2)}


async def test_fault_taints_the_device_and_its_partitions_until_recovery(stack):
    clock = ManualClock()
    d = NodeDriver(stack.client, node(gpus=2, mig=2), clock)
    await d.start("u", {})
    taint = await d.inject_fault("gpu-1", "xid", "79")
    assert taint["effect"] == "NoExecute" and taint["key"] == "gpu.nanokube.io/xid"
    spec = (await slices_of(stack.client, "n-0"))["n-0-gpu.nanokube.io-1"]["spec"]
    tainted = {x["name"]: x["taints"] for x in spec["devices"] if x.get("taints")}
    assert set(tainted) == {"gpu-1", "gpu-1-mig-0", "gpu-1-mig-1"}
    assert tainted["gpu-1"] == [{"key": "gpu.nanokube.io/xid", "value": "79", "effect": "NoExecute",
                                 "timeAdded": clock.rfc3339()}]
    assert spec["pool"]["generation"] == 1
    await d.inject_fault("gpu-1", "ecc")
    spec = (await slices_of(stack.client, "n-0"))["n-0-gpu.nanokube.io-1"]["spec"]
    effects = [t["effect"] for t in next(x for x in spec["devices"] if x["name"] == "gpu-1")["taints"]]
    assert effects == ["NoExecute", "NoSchedule"]
    await d.clear_fault("gpu-1")
    spec = (await slices_of(stack.client, "n-0"))["n-0-gpu.nanokube.io-1"]["spec"]
    assert not any(x.get("taints") for x in spec["devices"])


async def test_unknown_fault_kind_or_device_is_refused(stack):
    d = NodeDriver(stack.client, node())
    await d.start("u", {})
    with pytest.raises(ValueError, match="unknown fault kind"):
        await d.inject_fault("gpu-0", "meltdown")
    with pytest.raises(KeyError, match="no device"):
        await d.inject_fault("gpu-9")


async def test_device_classes_select_by_driver_and_keep_admin_edits(stack):
    classes = stack.client.resource("resource.k8s.io", "v1", "deviceclasses")
    await ensure_device_classes(stack.client)
    rdma = await classes.get("rdma.nanokube.io")
    assert "nic.nanokube.io" in rdma["spec"]["selectors"][0]["cel"]["expression"]
    gpu = copy.deepcopy(await classes.get("gpu.nanokube.io"))  # the loopback client's objects are the cache's
    assert gpu["spec"]["selectors"] == [{"cel": {"expression": "device.driver == 'gpu.nanokube.io'"}}]
    gpu["spec"]["selectors"].append({"cel": {"expression": "device.attributes['gpu.nanokube.io'].type == 'gpu'"}})
    await classes.update(gpu)
    await ensure_device_classes(stack.client)
    assert len((await classes.get("gpu.nanokube.io"))["spec"]["selectors"]) == 2
