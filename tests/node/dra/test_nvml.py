import os
from types import SimpleNamespace

import pynvml
import pytest

from nanokube.node.cluster import parse_cluster
from nanokube.node.dra import nvml
from nanokube.node.dra.driver import gpu_entries, nic_entries

# Two GPUs on different PCIe root complexes and NUMA nodes; the second in MIG mode.
GPUS = [
    {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1c7a53a6-77e4-4a0f-9f4b-3a3d1b6f0e11", "bus": b"00000000:1B:00.0",
     "root": "pci0000:16", "numa": "0\n", "cc": (9, 0), "total": 85520809984, "mig": [0, 0]},
    {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9e2f0c44-1b2d-4c8e-8d1a-5f6e7a8b9c0d", "bus": b"00000000:9A:00.0",
     "root": "pci0000:97", "numa": "1\n", "cc": (9, 0), "total": 85520809984, "mig": [1, 1]},
]


@pytest.fixture
def sysfs(tmp_path):
    """A /sys where each GPU hangs below its root complex, as on real hosts."""
    devices = tmp_path / "bus" / "pci" / "devices"
    devices.mkdir(parents=True)
    for g in GPUS:
        addr = nvml.sysfs_address(g["bus"].decode())
        real = tmp_path / "devices" / g["root"] / f"{g['root'][3:]}:01.0" / addr
        real.mkdir(parents=True)
        (real / "numa_node").write_text(g["numa"])
        os.symlink(real, devices / addr)
    return str(tmp_path)


@pytest.fixture
def fake_nvml(monkeypatch):
    """pynvml with the calls discovery makes answered like a two-GPU host."""
    calls = []

    def fn(name, impl):
        monkeypatch.setattr(pynvml, name, impl)

    fn("nvmlInit", lambda: calls.append("init"))
    fn("nvmlShutdown", lambda: calls.append("shutdown"))
    fn("nvmlSystemGetDriverVersion", lambda: "550.90.07")
    fn("nvmlSystemGetCudaDriverVersion", lambda: 12040)
    fn("nvmlDeviceGetCount", lambda: len(GPUS))
    fn("nvmlDeviceGetHandleByIndex", lambda i: GPUS[i])
    fn("nvmlDeviceGetName", lambda h: h["name"])
    fn("nvmlDeviceGetUUID", lambda h: h["uuid"])
    fn("nvmlDeviceGetPciInfo", lambda h: SimpleNamespace(busId=h["bus"]))
    fn("nvmlDeviceGetCudaComputeCapability", lambda h: h["cc"])
    fn("nvmlDeviceGetMemoryInfo", lambda h: SimpleNamespace(total=h["total"], free=h["total"], used=0))
    fn("nvmlDeviceGetMigMode", lambda h: h["mig"])
    fn("nvmlDeviceGetMaxMigDeviceCount", lambda h: 7)
    return calls


def failing(code):
    def raise_(*_):
        raise pynvml.NVMLError(code)
    return raise_


def test_discovered_gpus_carry_the_simulated_attribute_names(fake_nvml, sysfs):
    a, b = nvml.discover(sysfs)
    assert a.kind == "gpu" and a.name == "gpu-0" and b.name == "gpu-1"
    assert a.attributes == {
        "model": "NVIDIA-H100-80GB-HBM3", "architecture": "Hopper", "driverVersion": "550.90.07",
        "cudaVersion": "12.4", "computeCapability": "9.0", "uuid": GPUS[0]["uuid"], "index": 0,
        "pcieRoot": "pci0000:16", "numaNode": 0,
    }
    assert a.capacity == {"memory": "81559Mi"}
    assert b.attributes["pcieRoot"] == "pci0000:97" and b.attributes["numaNode"] == 1
    assert b.attributes["migSlices"] == 7 and "migSlices" not in a.attributes
    assert fake_nvml == ["init", "shutdown"]


def test_without_sysfs_the_root_falls_back_to_the_devices_own_bus(fake_nvml, tmp_path):
    a, _ = nvml.discover(str(tmp_path))
    assert a.attributes["pcieRoot"] == "pci0000:1b" and a.attributes["numaNode"] == 0


def test_mig_unsupported_gpus_are_whole_gpus(fake_nvml, sysfs, monkeypatch):
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMigMode", failing(pynvml.NVML_ERROR_NOT_SUPPORTED))
    assert all("migSlices" not in d.attributes for d in nvml.discover(sysfs))


def test_architecture_follows_compute_capability():
    assert [nvml.architecture(*cc) for cc in [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (99, 0)]] == \
        ["Volta", "Turing", "Ampere", "Ampere", "Ada", "Hopper", "Blackwell", "Unknown"]


@pytest.mark.parametrize("code, words", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found (is the NVIDIA driver installed?)"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded (is the nvidia kernel module loaded?)"),
])
def test_no_library_or_driver_is_a_refusal_naming_the_cause(fake_nvml, monkeypatch, code, words):
    monkeypatch.setattr(pynvml, "nvmlInit", failing(code))
    with pytest.raises(nvml.NvmlUnavailable) as e:
        nvml.discover()
    assert str(e.value) == f"NVML: {words}"


def test_a_failing_call_after_init_still_shuts_nvml_down(fake_nvml, monkeypatch):
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", failing(pynvml.NVML_ERROR_GPU_IS_LOST))
    with pytest.raises(nvml.NvmlUnavailable, match="GPU is lost"):
        nvml.discover()
    assert fake_nvml == ["init", "shutdown"]


def test_a_machine_with_no_gpus_is_refused(fake_nvml, monkeypatch):
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: 0)
    with pytest.raises(nvml.NvmlUnavailable, match="found no GPUs"):
        nvml.discover()


def test_missing_bindings_are_named(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    with pytest.raises(nvml.NvmlUnavailable, match="nvidia-ml-py is not installed"):
        nvml.discover()


SIMULATED = """\
pools:
  - name: sim
    count: 1
    capacity: {cpu: "8", memory: 64Gi}
    gpus: {count: 2, model: NVIDIA-H100, memory: 80Gi, architecture: Hopper, driverVersion: 550.54.15,
           cudaVersion: "12.4", computeCapability: "9.0", numaNodes: 2, migSlices: 7}
    nics: {count: 2, model: ConnectX-7, bandwidth: 400G}
"""
REAL = """\
pools:
  - name: real
    count: 1
    capacity: {cpu: "8", memory: 64Gi}
    gpus: {discover: nvml}
    nics: {count: 2, model: ConnectX-7, bandwidth: 400G}
"""


def typed(entries):
    """Each slice entry's attribute and capacity names with their value types."""
    return {e["name"]: ({k: set(v) for k, v in e["attributes"].items()}, set(e["capacity"])) for e in entries}


def test_published_slice_entries_match_a_simulated_gpus_names_and_types(fake_nvml, sysfs, monkeypatch):
    discover = nvml.discover
    monkeypatch.setattr(nvml, "discover", lambda: discover(sysfs))
    real = parse_cluster(REAL).nodes()[0]
    sim = parse_cluster(SIMULATED).nodes()[0]
    real_gpus, real_sets = gpu_entries([d for d in real.devices if d.kind == "gpu"])
    sim_gpus, sim_sets = gpu_entries([d for d in sim.devices if d.kind == "gpu"])
    assert typed(real_gpus)["gpu-0"] == typed(sim_gpus)["gpu-0"]
    assert typed(real_gpus)["gpu-1-mig-0"] == typed(sim_gpus)["gpu-1-mig-0"]
    assert len(real_gpus) == 1 + 1 + 7 and len(real_sets) == 1
    assert set(real_sets[0]["counters"]) == set(sim_sets[0]["counters"]) == {"memory", "slices"}
    assert real_gpus[0]["capacity"] == {"memory": {"value": "81559Mi"}}
    nics = {n["name"]: n["attributes"] for n in nic_entries([d for d in real.devices if d.kind == "nic"])}
    assert nics["nic-1"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:97"}
    assert nics["nic-1"]["numaNode"] == {"int": 1}


def _real_gpu_problem() -> str | None:
    try:
        nvml.discover()
    except nvml.NvmlUnavailable as e:
        return str(e)
    return None


REAL_GPU_PROBLEM = _real_gpu_problem()


@pytest.mark.skipif(REAL_GPU_PROBLEM is not None,
                    reason=f"NO NVIDIA GPU HERE, real NVML discovery not run: {REAL_GPU_PROBLEM}")
def test_real_discovery_on_this_machine():
    devices = nvml.discover()
    entries, _ = gpu_entries(devices)
    for d in devices:
        assert d.attributes["uuid"].startswith("GPU-") and d.attributes["pcieRoot"].startswith("pci")
        assert d.attributes["architecture"] != "Unknown"
    assert {e["name"] for e in entries} >= {d.name for d in devices}
