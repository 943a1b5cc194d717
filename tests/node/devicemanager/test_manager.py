"""The device manager with the simulated device plugin: what it allocates a pod's containers,
what it frees, what it checkpoints, and the capacity it reports as devices fall ill."""

import json
import os

import pytest

from nanokube.node.cluster import default_cluster
from nanokube.node.devicemanager import checkpoint
from nanokube.node.devicemanager.manager import AllocationError, DeviceManager
from nanokube.node.devicemanager.plugin import SimulatedPlugin

GPU = "nvidia.com/gpu"


def gpu_pod(uid: str, *containers: tuple[str, int], inits: tuple = ()) -> dict:
    """A pod whose containers (name, GPUs) limit nvidia.com/gpu; `inits`: (name, GPUs, sidecar)."""
    def c(name, n, **extra):
        return {"name": name, "image": "cuda", "resources": {"limits": {GPU: str(n)} if n else {}}, **extra}
    return {"metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": {"initContainers": [c(n, g, **({"restartPolicy": "Always"} if side else {}))
                                        for n, g, side in inits],
                     "containers": [c(n, g) for n, g in containers]}}


def manager(tmp_path=None, count=4) -> tuple[DeviceManager, SimulatedPlugin]:
    m = DeviceManager(str(tmp_path) if tmp_path else "")
    plugin = SimulatedPlugin("node-a", GPU, count)
    m.register(plugin)
    return m, plugin


def ids(m: DeviceManager, uid: str, container: str) -> list[str]:
    return [i for r, group, _ in m.container_devices(uid, container) if r == GPU for i in group]


async def test_nvidia_plugin_names_gpus_by_uuid_and_allocate_sets_nvidia_visible_devices():
    m, plugin = manager()
    assert all(d.startswith("GPU-") and len(d) == 40 for d in plugin.devices)
    await m.allocate(gpu_pod("p1", ("a", 2), ("b", 1)), set())
    a, b = ids(m, "p1", "a"), ids(m, "p1", "b")
    assert len(a) == 2 and len(b) == 1 and not set(a) & set(b)
    assert m.environment("p1", "a") == {"NVIDIA_VISIBLE_DEVICES": ",".join(a)}
    assert m.environment("p1", "b") == {"NVIDIA_VISIBLE_DEVICES": b[0]}
    # the same plugin on another node names other GPUs
    assert not set(SimulatedPlugin("node-b", GPU, 4).devices) & set(plugin.devices)


async def test_the_nodes_described_gpus_lend_their_uuids_and_numa_nodes():
    spec = default_cluster().nodes()[0]
    gpus = [d for d in spec.devices if d.kind == "gpu"]
    m = DeviceManager()
    m.register(SimulatedPlugin(spec.name, GPU, 8, gpus))
    assert m.allocatable_devices() == sorted((GPU, g.attributes["uuid"], (g.attributes["numaNode"],)) for g in gpus)
    await m.allocate(gpu_pod("p1", ("a", 8)), set())
    # one group per NUMA node, as upstream's DevicesPerNUMA
    assert [(numa, len(group)) for _, group, numa in m.container_devices("p1", "a")] == [(0, 4), (1, 4)]


async def test_a_resource_without_a_plugin_is_not_the_device_managers():
    m, _ = manager()
    pod = gpu_pod("p1", ("a", 1))
    pod["spec"]["containers"][0]["resources"]["limits"]["example.com/fpga"] = "3"
    await m.allocate(pod, set())
    assert [r for r, _, _ in m.container_devices("p1", "a")] == [GPU]


async def test_too_few_devices_refuse_the_pod_with_upstreams_message_and_hold_none():
    m, _ = manager(count=4)
    await m.allocate(gpu_pod("p1", ("a", 3)), set())
    with pytest.raises(AllocationError) as e:
        await m.allocate(gpu_pod("p2", ("a", 1), ("b", 1)), {"p1"})
    assert str(e.value) == f"requested number of devices unavailable for {GPU}. Requested: 1, Available: 0"
    assert m.container_devices("p2", "a") == []  # its first container's device was given back
    await m.allocate(gpu_pod("p3", ("a", 1)), {"p1"})
    assert len(ids(m, "p3", "a")) == 1


async def test_devices_of_pods_no_longer_active_are_freed_at_the_next_allocation():
    m, _ = manager(count=2)
    await m.allocate(gpu_pod("p1", ("a", 2)), set())
    held = ids(m, "p1", "a")
    await m.allocate(gpu_pod("p2", ("a", 2)), set())  # p1 ended
    assert ids(m, "p2", "a") == held and m.container_devices("p1", "a") == []


async def test_a_container_keeps_its_devices_and_may_not_change_their_count():
    m, _ = manager()
    pod = gpu_pod("p1", ("a", 2))
    await m.allocate(pod, set())
    held = ids(m, "p1", "a")
    await m.allocate(pod, {"p1"})  # admitted again (a restarted agent)
    assert ids(m, "p1", "a") == held
    with pytest.raises(AllocationError, match="pod 'p1' container 'a' changed request for resource "
                                              "'nvidia.com/gpu' from 2 to 3"):
        await m.allocate(gpu_pod("p1", ("a", 3)), {"p1"})


async def test_app_containers_reuse_init_containers_devices_but_not_a_sidecars():
    m, _ = manager(count=4)
    await m.allocate(gpu_pod("p1", ("a", 2), ("b", 1), inits=[("side", 1, True), ("init", 2, False)]), set())
    side, init, a, b = (ids(m, "p1", c) for c in ("side", "init", "a", "b"))
    assert a == init and not set(side) & set(init)
    # the init container's devices went to `a`; `b` gets the one left, not the sidecar's, which runs on
    assert not set(b) & {*a, *side} and len({*a, *b, *side}) == 4


async def test_unhealthy_devices_leave_allocatable_and_are_not_allocated():
    m, plugin = manager(count=2)
    assert m.capacity() == ({GPU: "2"}, {GPU: "2"})
    sick = sorted(plugin.devices)[0]
    plugin.set_health(sick, False)
    assert m.capacity() == ({GPU: "2"}, {GPU: "1"})
    assert sick not in [d for _, d, _ in m.allocatable_devices()]
    await m.allocate(gpu_pod("p1", ("a", 1)), set())
    assert ids(m, "p1", "a") != [sick]
    with pytest.raises(AllocationError, match="Requested: 1, Available: 0"):
        await m.allocate(gpu_pod("p2", ("a", 1)), {"p1"})
    plugin.set_health(sick, True)
    assert m.capacity() == ({GPU: "2"}, {GPU: "2"})


async def test_allocations_survive_a_new_manager_on_the_same_directory(tmp_path):
    m, _ = manager(tmp_path)
    await m.allocate(gpu_pod("p1", ("a", 2)), set())
    held, env = ids(m, "p1", "a"), m.environment("p1", "a")
    path = tmp_path / "device-plugins" / "kubelet_internal_checkpoint"
    doc = json.loads(path.read_text())
    [entry] = doc["Data"]["PodDeviceEntries"]
    assert (entry["PodUID"], entry["ContainerName"], entry["ResourceName"], entry["DeviceIDs"]) == \
        ("p1", "a", GPU, {"-1": held})
    assert doc["Data"]["RegisteredDevices"] == {GPU: sorted(m.devices[GPU])}

    again, _ = manager(tmp_path)
    assert ids(again, "p1", "a") == held and again.environment("p1", "a") == env
    await again.allocate(gpu_pod("p2", ("a", 2)), {"p1"})  # p1's devices are still taken
    assert not set(ids(again, "p2", "a")) & set(held)


async def test_a_corrupt_checkpoint_is_refused_whole(tmp_path):
    m, _ = manager(tmp_path)
    await m.allocate(gpu_pod("p1", ("a", 1)), set())
    path = os.path.join(tmp_path, "device-plugins", "kubelet_internal_checkpoint")
    doc = json.loads(open(path).read())
    doc["Data"]["PodDeviceEntries"][0]["ContainerName"] = "b"
    open(path, "w").write(json.dumps(doc))
    with pytest.raises(checkpoint.CorruptCheckpoint):
        checkpoint.read(path)
    again, _ = manager(tmp_path)
    assert again.pod_devices == {}


async def test_the_nvidia_plugin_prefers_gpus_of_one_numa_node():
    """GetPreferredAllocation as NVIDIA's plugin answers it: in the kubelet's (sorted) order the
    described node's GPUs alternate between its two NUMA nodes, yet a pod's GPUs share one."""
    spec = default_cluster().nodes()[0]
    gpus = [d for d in spec.devices if d.kind == "gpu"]
    numa = {g.attributes["uuid"]: g.attributes["numaNode"] for g in gpus}
    m = DeviceManager()
    m.register(SimulatedPlugin(spec.name, GPU, 8, gpus))
    first = sorted(numa)
    assert len({numa[i] for i in first[:2]}) == 2  # what the plain order would give: across both
    await m.allocate(gpu_pod("p1", ("a", 2)), set())
    a = ids(m, "p1", "a")
    assert a[0] == first[0] and len({numa[i] for i in a}) == 1
    await m.allocate(gpu_pod("p2", ("a", 4)), {"p1"})
    b = ids(m, "p2", "a")
    assert len({numa[i] for i in b}) == 1 and numa[b[0]] != numa[a[0]]
    # another vendor's plugin offers no preference
    assert await SimulatedPlugin(spec.name, "example.com/fpga", 2).preferred(["fpga-0", "fpga-1"], [], 1) is None
