import re
import uuid

import pytest

from nanokube.node.cluster import (
    NVLINK_LABEL,
    RACK_LABEL,
    ZONE_LABEL,
    ClusterFileError,
    default_cluster,
    load_cluster,
    parse_cluster,
)

GOOD = """\
pools:
  - name: dgx
    count: 4
    capacity: {cpu: "224", memory: 2Ti, pods: "110", ephemeral-storage: 30Ti}
    labels: {nvidia.com/gpu.product: H100}
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    topology: {zone: us-east-1a, nodesPerRack: 2, nodesPerNVLinkDomain: 4}
    gpus: {count: 8, model: H100, memory: 80Gi, architecture: Hopper, driverVersion: 550.54.15,
           cudaVersion: "12.4", computeCapability: "9.0", numaNodes: 2}
    nics: {count: 8, model: ConnectX-7, bandwidth: 400G}
  - name: cpu
    count: 2
    capacity: {cpu: "32", memory: 128Gi}
"""


def test_pools_expand_into_nodes_with_topology_and_devices():
    nodes = parse_cluster(GOOD).nodes()
    assert [n.name for n in nodes] == ["dgx-0", "dgx-1", "dgx-2", "dgx-3", "cpu-0", "cpu-1"]
    assert [n.index for n in nodes] == list(range(6))
    d2 = nodes[2]
    assert d2.labels[ZONE_LABEL] == "us-east-1a" and d2.labels[RACK_LABEL] == "dgx-rack-1"
    assert d2.labels[NVLINK_LABEL] == "dgx-nvl-0" and d2.labels["nvidia.com/gpu.product"] == "H100"
    assert d2.taints == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert d2.capacity == {"cpu": "224", "memory": "2Ti", "pods": "110", "ephemeral-storage": "30Ti"}
    gpus = [d for d in d2.devices if d.kind == "gpu"]
    nics = [d for d in d2.devices if d.kind == "nic"]
    assert len(gpus) == 8 and len(nics) == 8
    assert gpus[3].attributes["pcieRoot"] == nics[3].attributes["pcieRoot"]
    assert gpus[0].attributes["numaNode"] == 0 and gpus[7].attributes["numaNode"] == 1
    assert len({g.attributes["uuid"] for g in gpus}) == 8
    assert gpus[0].attributes["uuid"] == parse_cluster(GOOD).nodes()[2].devices[0].attributes["uuid"]
    assert nics[0].attributes["rdma"] is True and nics[0].capacity == {"bandwidth": "400G"}
    assert nodes[4].devices == [] and nodes[4].capacity["pods"] == "110"


def test_device_identities_are_name_based_uuids_stable_across_releases():
    """GPU UUIDs and NIC MACs are uuid5s of the node and device name in a fixed namespace."""
    d2 = parse_cluster(GOOD).nodes()[2]
    ns = uuid.UUID("6b1d3c1e-5f0a-4c8e-9a57-6e616e6f6b75")
    gpus = [d for d in d2.devices if d.kind == "gpu"]
    nics = [d for d in d2.devices if d.kind == "nic"]
    assert [g.attributes["uuid"] for g in gpus] == [f"GPU-{uuid.uuid5(ns, f'dgx-2/gpu-{i}')}" for i in range(8)]
    assert [n.attributes["hardwareAddress"] for n in nics] == [
        ":".join(f"{b:02x}" for b in (2, *uuid.uuid5(ns, f"dgx-2/nic-{i}").bytes[:5])) for i in range(8)]


def test_default_cluster_is_two_gpu_nodes():
    nodes = default_cluster().nodes()
    assert len(nodes) == 2
    assert all(sum(d.kind == "gpu" for d in n.devices) == 8 for n in nodes)
    assert all(sum(d.kind == "nic" and d.attributes["rdma"] for d in n.devices) == 8 for n in nodes)


@pytest.mark.parametrize("text, where", [
    ("pools: []\n", "f.yaml:1: pools: must be a non-empty list"),
    ("pools:\n  - name: a\n    count: two\n    capacity: {cpu: 1, memory: 1Gi}\n", "f.yaml:3: pools[0].count:"),
    ("pools:\n  - name: a\n    count: 1\n    capacity:\n      cpu: 1\n      memory: lots\n",
     "f.yaml:6: pools[0].capacity.memory: invalid quantity 'lots'"),
    ("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1}\n", "f.yaml:4: pools[0].capacity.memory: required"),
    ("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi}\n    colour: red\n",
     "f.yaml:5: pools[0].colour: unknown field"),
    ("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi}\n    taints:\n      - {key: k, effect: Sometimes}\n",
     "f.yaml:6: pools[0].taints[0].effect: must be one of"),
    ("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi}\n    labels: {'bad key!': x}\n",
     "f.yaml:5: pools[0].labels.bad key!: invalid label key"),
    ("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi}\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi}\n",
     "f.yaml:5: pools[1].name: duplicate pool name"),
    ("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi}\n    gpus: {count: 8}\n",
     "f.yaml:5: pools[0].gpus.model: required"),
    ("pools: [\n", "f.yaml:2: not valid YAML"),
])
def test_malformed_files_name_line_and_field(text, where):
    with pytest.raises(ClusterFileError) as e:
        parse_cluster(text, "f.yaml")
    assert str(e.value).startswith(where), str(e.value)


@pytest.mark.parametrize("name, count", [("default.yaml", 2), ("dgx-pool.yaml", 16), ("mixed.yaml", None),
                                         ("large-1000.yaml", 1000), ("large-5000.yaml", 5000)])
def test_example_files_load(name, count):
    nodes = load_cluster(f"examples/clusters/{name}").nodes()
    assert len({n.name for n in nodes}) == len(nodes)
    if count is not None:
        assert len(nodes) == count
    else:
        assert any(n.devices for n in nodes) and any(not n.devices for n in nodes)


def test_default_example_matches_builtin_default():
    assert load_cluster("examples/clusters/default.yaml").nodes() == default_cluster().nodes()


def test_a_pool_advertises_extended_resources_as_a_device_plugin_does():
    pool = parse_cluster("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi, nvidia.com/gpu: 8}\n"
                         "    allocatable: {nvidia.com/gpu: 7}\n").pools[0]
    assert pool.capacity["nvidia.com/gpu"] == "8" and pool.allocatable["nvidia.com/gpu"] == "7"
    for value, problem in (("gpus: 8", "capacity.gpus: unknown field"),
                           ("kubernetes.io/gpu: 1", "capacity.kubernetes.io/gpu: unknown field"),
                           ("nvidia.com/gpu: 1.5", "capacity.nvidia.com/gpu: must be a whole number of devices, got '1.5'"),
                           ("nvidia.com/gpu: -1", "capacity.nvidia.com/gpu: must be a whole number of devices, got '-1'")):
        with pytest.raises(ClusterFileError, match=re.escape(f"f.yaml:4: pools[0].{problem}")):
            parse_cluster(f"pools:\n  - name: a\n    count: 1\n    capacity: {{cpu: 1, memory: 1Gi, {value}}}\n", "f.yaml")


def test_up_refuses_a_malformed_cluster_file(tmp_path, capsys):
    from nanokube.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi, gpus: 8}\n")
    assert main(["up", "--cluster", str(bad), "--data-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4: pools[0].capacity.gpus: unknown field" in err


REAL_GPUS = "pools:\n  - name: local\n    count: {count}\n    capacity: {{cpu: 1, memory: 1Gi}}\n    gpus: {gpus}\n" \
    "    nics: {{count: 3, model: ConnectX-7, bandwidth: 400G}}\n"


@pytest.fixture
def two_real_gpus(monkeypatch):
    from nanokube.node.devices import Device
    from nanokube.node.dra import nvml

    def gpu(i, root, numa):
        attrs = {"model": "NVIDIA-A100-SXM4-40GB", "architecture": "Ampere", "driverVersion": "550.54.15",
                 "cudaVersion": "12.4", "computeCapability": "8.0", "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
                 "index": i, "pcieRoot": root, "numaNode": numa}
        return Device("gpu", f"gpu-{i}", attrs, {"memory": "40Gi"})

    calls = []
    monkeypatch.setattr(nvml, "discover", lambda: calls.append(1) or [gpu(0, "pci0000:07", 0), gpu(1, "pci0000:85", 1)])
    return calls


def test_discovered_gpus_replace_the_pools_gpus_and_nics_sit_next_to_them(two_real_gpus):
    cluster = parse_cluster(REAL_GPUS.format(count=1, gpus="{discover: nvml}"))
    (node,) = cluster.nodes()
    gpus = [d for d in node.devices if d.kind == "gpu"]
    nics = [d for d in node.devices if d.kind == "nic"]
    assert [g.attributes["uuid"][-1] for g in gpus] == ["0", "1"]
    assert [n.attributes.get("pcieRoot") for n in nics] == ["pci0000:07", "pci0000:85", None]
    assert [n.attributes["numaNode"] for n in nics[:2]] == [0, 1]
    assert cluster.nodes() == [node] and two_real_gpus == [1]


def test_the_nvml_example_loads_where_nvml_answers(two_real_gpus):
    (node,) = load_cluster("examples/clusters/nvml.yaml").nodes()
    assert len(node.devices) == 2


@pytest.mark.parametrize("count, gpus, where", [
    (1, "{discover: dcgm}", "f.yaml:5: pools[0].gpus.discover: must be nvml, got 'dcgm'"),
    (1, "{discover: nvml, model: H100}", "f.yaml:5: pools[0].gpus.model: cannot be combined with discover"),
    (2, "{discover: nvml}", "f.yaml:3: pools[0].count: must be 1 with gpus.discover"),
])
def test_malformed_discover_options_name_line_and_field(two_real_gpus, count, gpus, where):
    with pytest.raises(ClusterFileError) as e:
        parse_cluster(REAL_GPUS.format(count=count, gpus=gpus), "f.yaml")
    assert str(e.value).startswith(where), str(e.value)
    assert two_real_gpus == []


def test_up_refuses_when_nvml_is_unavailable_naming_the_cause(tmp_path, capsys, monkeypatch):
    from nanokube.cli import main
    from nanokube.node.dra import nvml

    def unavailable():
        raise nvml.NvmlUnavailable("NVML: Driver Not Loaded (is the nvidia kernel module loaded?)")

    monkeypatch.setattr(nvml, "discover", unavailable)
    f = tmp_path / "real.yaml"
    f.write_text(REAL_GPUS.format(count=1, gpus="\n      discover: nvml"))
    assert main(["up", "--cluster", str(f), "--data-dir", str(tmp_path / "d")]) == 2
    assert f"{f}:6: pools[0].gpus.discover: cannot discover this machine's GPUs: NVML: Driver Not Loaded" \
        in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_a_pools_preloaded_images_are_on_its_nodes_and_malformed_ones_are_refused():
    text = "pools:\n  - name: a\n    count: 2\n    capacity: {cpu: 1, memory: 1Gi}\n    images: [app:dev, nginx]\n"
    assert [n.images for n in parse_cluster(text).nodes()] == [("app:dev", "nginx")] * 2
    for images, where in (("app:dev", "f.yaml:5: pools[0].images: must be a list"),
                          ("['a b']", "f.yaml:5: pools[0].images[0]: must be an image reference without spaces")):
        with pytest.raises(ClusterFileError) as e:
            parse_cluster(text.replace("[app:dev, nginx]", images), "f.yaml")
        assert str(e.value).startswith(where), str(e.value)
