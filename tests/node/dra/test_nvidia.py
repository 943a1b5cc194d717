"""The NVIDIA personality's ResourceSlices, checked against the scheduler's
allocator: MIG profiles of one A100-40GB share its counters as the hardware
shares memory slices and SMs, so 1g.5gb + 2g.10gb + 3g.20gb fit and more
does not; opaque GpuConfig validation answers with the driver's messages."""

import pytest

from nanokube.node.cluster import ClusterFileError, parse_cluster
from nanokube.node.dra import nvidia
from nanokube.scheduler.dra.allocator import AllocatedDevices, Allocator
from nanokube.scheduler.dra.pools import PoolIndex

DRIVER = nvidia.NVIDIA_DRIVER
CLUSTER = """
pools:
  - name: a100
    count: 1
    capacity: {cpu: "8", memory: 64Gi}
    gpus: {driver: nvidia, model: A100-SXM4-40GB, count: 1, mig: true}
"""
CLASSES = {name: {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expr}}]}}
           for name, expr in nvidia.DEVICE_CLASSES.items()}
NODE = {"metadata": {"name": "a100-0", "labels": {}}}


def slices():
    [node] = parse_cluster(CLUSTER).nodes()
    devices, sets = nvidia.gpu_entries(node.devices)
    pool = {"name": node.name, "generation": 1, "resourceSliceCount": 2}
    return [{"metadata": {"name": "counters"}, "spec": {"driver": DRIVER, "pool": pool, "nodeName": node.name,
                                                          "sharedCounters": sets}},
            {"metadata": {"name": "devices"}, "spec": {"driver": DRIVER, "pool": pool, "nodeName": node.name,
                                                         "devices": devices}}]


def mig(name, profile):
    return {"name": name, "exactly": {"deviceClassName": "mig.nvidia.com", "selectors": [
        {"cel": {"expression": f"device.attributes['{DRIVER}'].profile == '{profile}'"}}]}}


def allocate(*requests, allocated=None, same_gpu=True):
    claim = {"metadata": {"namespace": "default", "name": "c"}, "spec": {"devices": {
        "requests": list(requests), "constraints": [{"matchAttribute": f"{DRIVER}/parentUUID"}] if same_gpu else []}}}
    out = Allocator(CLASSES, PoolIndex(slices()), allocated or AllocatedDevices(),
                    new_share_id=lambda: "s").allocate(NODE, [claim])
    return out and [r["device"] for r in out[0]["devices"]["results"]]


def test_a_mig_capable_gpu_publishes_the_whole_gpu_and_every_placement_over_one_counter_set():
    [counters, devs] = slices()
    [cs] = counters["spec"]["sharedCounters"]
    assert cs["name"] == "gpu-0-counter-set"
    assert cs["counters"]["multiprocessors"] == {"value": "98"}
    assert [f"memory-slice-{i}" in cs["counters"] for i in range(8)] == [True] * 8
    by_name = {d["name"]: d for d in devs["spec"]["devices"]}
    assert len(by_name) == 1 + 7 + 7 + 4 + 3 + 2 + 1 + 1
    whole = by_name["gpu-0"]
    assert whole["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-40GB"}
    assert whole["attributes"]["cudaComputeCapability"] == {"version": "8.0.0"}
    assert whole["consumesCounters"][0]["counters"] == cs["counters"]
    small = by_name["gpu-0-mig-1g5gb-19-3"]
    assert small["attributes"]["profile"] == {"string": "1g.5gb"}
    assert small["attributes"]["parentUUID"] == whole["attributes"]["uuid"]
    assert small["capacity"]["memory"] == {"value": "4864Mi"}
    used = small["consumesCounters"][0]["counters"]
    assert [k for k in used if k.startswith("memory-slice")] == ["memory-slice-3"]
    assert "gpu-0-mig-1g5gb-me-20-0" in by_name and "gpu-0-mig-3g20gb-9-4" in by_name


def test_1g_2g_3g_fit_one_a100_and_over_allocating_fails():
    got = allocate(mig("a", "1g.5gb"), mig("b", "2g.10gb"), mig("c", "3g.20gb"))
    assert got and all(d.startswith("gpu-0-mig-") for d in got)
    # the quickstart's four devices use all 98 SMs and every memory slice
    assert allocate(mig("a", "1g.5gb"), mig("b", "1g.5gb"), mig("c", "2g.10gb"), mig("d", "3g.20gb"))
    assert allocate(mig("a", "3g.20gb"), mig("b", "3g.20gb"), mig("c", "1g.5gb")) is None
    assert allocate(mig("a", "4g.20gb"), mig("b", "3g.20gb"), mig("c", "1g.5gb")) is None
    whole = {"name": "w", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    assert allocate(whole, same_gpu=False) == ["gpu-0"]
    taken = AllocatedDevices({(DRIVER, "a100-0", "gpu-0-mig-1g5gb-19-0"): 1})
    assert allocate(whole, allocated=taken, same_gpu=False) is None


def test_static_mig_devices_are_placed_first_fit_and_published_with_uuids():
    text = CLUSTER.replace("count: 1, mig: true", "count: 2, mig: {gpus: 1, devices: [3g.20gb, 2g.10gb, 1g.5gb]}")
    [node] = parse_cluster(text).nodes()
    devices, counters = nvidia.gpu_entries(node.devices)
    assert counters == []
    assert [d["name"] for d in devices] == ["gpu-0-mig-3g20gb-9-0", "gpu-0-mig-2g10gb-14-4",
                                            "gpu-0-mig-1g5gb-19-6", "gpu-1"]
    small = devices[2]
    assert small["attributes"]["uuid"]["string"].startswith("MIG-")
    assert small["capacity"]["memorySlice6"] == {"value": "1"} and "memorySlice7" not in small["capacity"]
    # a 1g.5gb created before the 2g.10gb takes slice 4 and leaves the 2g.10gb no placement
    with pytest.raises(ClusterFileError, match="2g.10gb does not fit one A100-SXM4-40GB"):
        parse_cluster(CLUSTER.replace("mig: true", "mig: [3g.20gb, 1g.5gb, 2g.10gb]"))
    with pytest.raises(ClusterFileError, match="3g.20gb does not fit one A100-SXM4-40GB"):
        parse_cluster(CLUSTER.replace("mig: true", "mig: [4g.20gb, 3g.20gb, 3g.20gb]"))
    with pytest.raises(ClusterFileError, match="unknown MIG profile '2g.20gb'"):
        parse_cluster(CLUSTER.replace("mig: true", "mig: [2g.20gb]"))


def test_nvidia_pools_refuse_unknown_models_and_mig_on_gpus_without_it():
    with pytest.raises(ClusterFileError, match="unknown NVIDIA model 'B999'"):
        parse_cluster(CLUSTER.replace("A100-SXM4-40GB", "B999"))
    with pytest.raises(ClusterFileError, match="L4 does not support MIG"):
        parse_cluster(CLUSTER.replace("A100-SXM4-40GB", "L4"))
    with pytest.raises(ClusterFileError, match=r"gpus.mig.gpus: must be at most gpus.count \(1\), got 2"):
        parse_cluster(CLUSTER.replace("mig: true", "mig: {gpus: 2, devices: [7g.40gb]}"))
    with pytest.raises(ClusterFileError, match="gpus.migSlices: not with driver: nvidia"):
        parse_cluster(CLUSTER.replace("mig: true", "migSlices: 7"))
    with pytest.raises(ClusterFileError, match="gpus.mig: only with driver: nvidia"):
        parse_cluster(CLUSTER.replace("driver: nvidia, ", "memory: 40Gi, architecture: Ampere, driverVersion: '1', "
                                      "cudaVersion: '1', computeCapability: '8.0', "))


GPU0 = {"request": "gpu", "device": "gpu-0", "type": "gpu", "uuid": "GPU-0"}
MIG0 = {"request": "mig", "device": "gpu-1-mig-1g5gb-19-0", "type": "mig", "uuid": "MIG-0"}


def with_configs(*configs):
    return {"status": {"allocation": {"devices": {"config": [
        {"source": source, "requests": reqs, "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": nvidia.CONFIG_API, "kind": kind, **({"sharing": sharing} if sharing else {})}}}
        for source, reqs, kind, sharing in configs]}}}}


@pytest.mark.parametrize("sharing,error", [
    ({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}, None),
    ({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                                       "defaultPinnedDeviceMemoryLimit": "10Gi"}}, None),
    ({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}},
     "^error validating GPU config: unknown time-slice interval: Forever$"),
    ({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 150}},
     "^error validating GPU config: active thread percentage must not be greater than 100$"),
    ({"strategy": "Spatial"}, "^error validating GPU config: unknown GPU sharing strategy: Spatial$"),
    ({"strategy": "MPS", "timeSlicingConfig": {"interval": "Long"}},
     "cannot use TimeSlicingConfig with the 'MPS' strategy"),
    ({"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"3": "1Gi"}}},
     "invalid device: invalid device index: 3"),
    ({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "10Ki"}},
     "invalid limit: default value set too low: 10Ki"),
    ({"strategy": "TimeSlicing", "timeSliceConfig": {}},
     '^error getting opaque device configs: error decoding config parameters: strict decoding error: '
     'unknown field "sharing.timeSliceConfig"$'),
])
def test_gpu_config_is_decoded_validated_and_applied_as_the_driver_does(sharing, error):
    claim = with_configs(("FromClaim", ["gpu"], "GpuConfig", sharing))
    if error is None:
        [config] = nvidia.prepare_configs(claim, [GPU0])
        assert config["sharing"] == sharing
    else:
        with pytest.raises(nvidia.PrepareError, match=error):
            nvidia.prepare_configs(claim, [GPU0])


def test_config_precedence_defaults_and_device_types():
    assert nvidia.prepare_configs(with_configs(), [GPU0, MIG0]) == [
        {"apiVersion": nvidia.CONFIG_API, "kind": "GpuConfig",
         "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}},
        {"apiVersion": nvidia.CONFIG_API, "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}]
    short = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}
    long = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
    # a claim's config comes after the class's and wins; a config without requests skips other device types
    [gpu, mig] = nvidia.prepare_configs(with_configs(("FromClass", [], "GpuConfig", short),
                                                     ("FromClaim", [], "GpuConfig", long)), [GPU0, MIG0])
    assert gpu["sharing"] == long and mig["kind"] == "MigDeviceConfig"
    with pytest.raises(nvidia.PrepareError, match='^cannot apply GpuConfig to device "gpu-1-mig-1g5gb-19-0" of type '
                                                 '"mig" \\(request: mig\\)$'):
        nvidia.prepare_configs(with_configs(("FromClaim", ["mig"], "GpuConfig", long)), [MIG0])
    bad_kind = {"status": {"allocation": {"devices": {"config": [{"requests": [], "opaque": {
        "driver": DRIVER, "parameters": {"apiVersion": nvidia.CONFIG_API, "kind": "TpuConfig"}}}]}}}}
    with pytest.raises(nvidia.PrepareError, match='no kind "TpuConfig" is registered for version'):
        nvidia.prepare_configs(bad_kind, [])


async def test_node_driver_publishes_gpu_nvidia_com_and_a_fault_on_a_static_mig_gpu_taints_its_devices(stack):
    from nanokube.node.dra.deviceclasses import ensure_device_classes
    from nanokube.node.dra.driver import NodeDriver

    text = CLUSTER.replace("count: 1, mig: true", "count: 2, mig: {gpus: 1, devices: [3g.20gb, 3g.20gb]}")
    [spec] = parse_cluster(text).nodes()
    d = NodeDriver(stack.client, spec)
    await d.start("uid", {})
    await ensure_device_classes(stack.client, nvidia=True)
    items, _ = await stack.client.resource("resource.k8s.io", "v1", "resourceslices").list()
    [s] = items
    assert s["metadata"]["name"] == "a100-0-gpu.nvidia.com-0" and s["spec"]["driver"] == DRIVER
    assert [x["name"] for x in s["spec"]["devices"]] == ["gpu-0-mig-3g20gb-9-0", "gpu-0-mig-3g20gb-9-4", "gpu-1"]
    taint = await d.inject_fault("gpu-0", "xid")
    assert taint["key"] == f"{DRIVER}/xid"
    items, _ = await stack.client.resource("resource.k8s.io", "v1", "resourceslices").list()
    assert [bool(x.get("taints")) for x in items[0]["spec"]["devices"]] == [True, True, False]
    classes, _ = await stack.client.resource("resource.k8s.io", "v1", "deviceclasses").list()
    by_name = {c["metadata"]["name"]: c["spec"] for c in classes}
    assert {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"} <= set(by_name)
    assert by_name["gpu.nvidia.com"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in by_name["mig.nvidia.com"]


async def test_prepare_refuses_devices_the_node_does_not_publish_and_gives_mig_devices_uuids(stack):
    from nanokube.node.dra.prepare import ClaimPreparer, NotReady

    text = CLUSTER.replace("count: 1, mig: true", "count: 2, mig: {gpus: 1, devices: [7g.40gb]}")
    [spec] = parse_cluster(text).nodes()
    preparer = ClaimPreparer(stack.client, spec, [DRIVER])

    def claim(*devices):
        return {"metadata": {"namespace": "ns", "name": "c", "uid": "u1"}, "status": {"allocation": {"devices": {
            "results": [{"request": "r", "driver": DRIVER, "pool": spec.name, "device": d} for d in devices]}}}}

    [mig] = preparer._prepare_nvidia(claim("gpu-0-mig-7g40gb-0-0"))
    assert mig["type"] == "mig" and mig["profile"] == "7g.40gb" and mig["uuid"].startswith("MIG-")
    assert mig["config"]["kind"] == "MigDeviceConfig"
    for device in ("gpu-9", "gpu-0", "gpu-1-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-0"):
        with pytest.raises(NotReady, match=f"^prepare dynamic resources: NodePrepareResources failed for ResourceClaim "
                                           f"c: error preparing devices for claim ns/c:u1: prepare devices failed: "
                                           f"requested device is not allocatable: {device}$"):
            preparer._prepare_nvidia(claim(device))


async def test_a_claim_prepared_before_another_of_the_pod_failed_is_released_with_the_pod(stack):
    """A pod's first claim prepared, its second refused (a device the node does not publish): the
    first holds the pod, so the pod's end unprepares it; it was left prepared for good."""
    from nanokube.node.dra.metrics import ANY_DRIVER
    from nanokube.node.dra.prepare import ClaimPreparer, NotReady

    [spec] = parse_cluster(CLUSTER.replace("count: 1, mig: true", "count: 1")).nodes()
    preparer = ClaimPreparer(stack.client, spec, [DRIVER])
    claims = stack.client.resource("resource.k8s.io", "v1", "resourceclaims")
    pod = {"metadata": {"namespace": "default", "name": "p", "uid": "pod-1"},
           "spec": {"resourceClaims": [{"name": n, "resourceClaimName": n} for n in ("good", "bad")]}}
    for name, device in (("good", "gpu-0"), ("bad", "gpu-9")):
        c = await claims.create({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {
            "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
        await claims.update({**c, "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": spec.name, "device": device}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-1"}]}}, subresource="status")
    with pytest.raises(NotReady, match="requested device is not allocatable: gpu-9$"):
        await preparer.prepare(pod)
    assert preparer.is_prepared("default", "good") and not preparer.is_prepared("default", "bad")
    await preparer.unprepare("pod-1")
    assert not preparer.is_prepared("default", "good")
    assert preparer.claims_in_use() == {ANY_DRIVER: 0}
