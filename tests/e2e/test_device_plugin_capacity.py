"""A node pool that advertises an extended resource in its capacity, as NVIDIA's device plugin
does (`nvidia.com/gpu: 2`): the Node reports it, NodeResourcesFit counts it (no DRA claim), and
a pod asking for more than is left is 'Insufficient nvidia.com/gpu'. The node's device manager
hands the pod two of the simulated plugin's GPUs: NVIDIA_VISIBLE_DEVICES in the container's
environment, and the pod resources API lists them; `nanokube fault gpu` on one makes the plugin
report it unhealthy, out of the Node's allocatable until healed. A device plugin of one's own, a
process of its own, registers on the node's device-plugins/kubelet.sock as on a kubelet's."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path

import pytest

from nanokube.node.podresources.proto import podresources_pb2 as pb
from tests.e2e.conftest import running_cluster, wait_for
from tests.e2e.test_pod_resources import Client

CLUSTER = """\
pools:
  - name: plugin
    count: 1
    capacity: {cpu: "8", memory: 32Gi, nvidia.com/gpu: 2}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "cluster.yaml"
    path.write_text(CLUSTER)
    # the kubelet posts a plugin's changed devices with its next status update (nodeStatusUpdateFrequency,
    # 10 s by default): each 1 s here
    with running_cluster("device-plugin", ("--cluster", str(path)), env={"NANOKUBE_NODE_RENEW_INTERVAL": "1"}) as c:
        yield c


def gpu_pod(name: str, count: int) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources:
      limits: {{nvidia.com/gpu: {count}}}
"""


def test_an_advertised_extended_resource_is_counted_by_the_scheduler(cluster):
    node = cluster.kubectl_json("get", "node", "plugin-0")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "2"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    cluster.kubectl("apply", "-f", "-", input=gpu_pod("two", 2))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "two")["status"].get("phase") == "Running", what="two running")
    pod = cluster.kubectl_json("get", "pod", "two")
    assert pod["spec"]["nodeName"] == "plugin-0" and "extendedResourceClaimStatus" not in pod["status"]
    assert cluster.kubectl_json("get", "resourceclaims", "-A")["items"] == []

    cluster.kubectl("apply", "-f", "-", input=gpu_pod("three", 1))
    [event] = wait_for(lambda: cluster.kubectl_json("get", "events", "--field-selector",
                                                    "involvedObject.name=three,reason=FailedScheduling")["items"],
                       what="FailedScheduling")
    assert "Insufficient nvidia.com/gpu" in event["message"]


def test_the_device_plugins_gpus_are_the_containers_and_the_pod_resources_api_lists_them(cluster):
    cluster.kubectl("apply", "-f", "-", input=gpu_pod("two", 2))  # unchanged if the test above made it
    wait_for(lambda: cluster.kubectl_json("get", "pod", "two")["status"].get("phase") == "Running", what="two running")
    out = cluster.kubectl("exec", "two", "--", "env").stdout
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    gpus = env["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(set(gpus)) == 2 and all(g.startswith("GPU-") for g in gpus)

    node_dir = cluster.data_dir / "pods" / "plugin-0"
    prc = Client(node_dir / "pod-resources" / "kubelet.sock")
    try:
        [cuda] = prc.get("two").containers
        assert [(d.resource_name, list(d.device_ids)) for d in cuda.devices] == [("nvidia.com/gpu", gpus)]
        allocatable = prc.call["GetAllocatableResources"](pb.AllocatableResourcesRequest(), timeout=10).devices
        assert sorted(i for d in allocatable for i in d.device_ids) == sorted(gpus)
    finally:
        prc.channel.close()
    # checkpointed where a kubelet keeps it, for the node agent's next start
    saved = json.loads((node_dir / "device-plugins" / "kubelet_internal_checkpoint").read_text())["Data"]
    assert [(e["ContainerName"], e["ResourceName"], e["DeviceIDs"]) for e in saved["PodDeviceEntries"]] == \
        [("cuda", "nvidia.com/gpu", {"-1": gpus})]


def test_a_faulty_plugin_gpu_leaves_the_nodes_allocatable_until_healed(cluster):
    """...and shows Unhealthy in the container status of the pod holding it (KEP-4680's
    allocatedResourcesStatus), as the kubelet writes it for a device plugin's resource."""
    cluster.kubectl("apply", "-f", "-", input=gpu_pod("two", 2))  # unchanged if a test above made it
    wait_for(lambda: cluster.kubectl_json("get", "pod", "two")["status"].get("phase") == "Running", what="two running")
    prc = Client(cluster.data_dir / "pods" / "plugin-0" / "pod-resources" / "kubelet.sock")
    try:
        gpu = sorted(i for d in prc.call["GetAllocatableResources"](pb.AllocatableResourcesRequest(), timeout=10).devices
                     for i in d.device_ids)[0]
    finally:
        prc.channel.close()

    def fault(*extra: str) -> None:
        r = subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", "gpu", "plugin-0", gpu, *extra,
                            "--kubeconfig", cluster.kubeconfig], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr

    def gpus() -> tuple[str, str]:
        st = cluster.kubectl_json("get", "node", "plugin-0")["status"]
        return st["capacity"]["nvidia.com/gpu"], st["allocatable"]["nvidia.com/gpu"]
    def health() -> dict[str, str]:
        [c] = cluster.kubectl_json("get", "pod", "two")["status"]["containerStatuses"]
        return {d["resourceID"]: d["health"] for r in c.get("allocatedResourcesStatus") or []
                if r["name"] == "nvidia.com/gpu" for d in r["resources"]}
    [other] = set(health()) - {gpu}
    assert health() == {gpu: "Healthy", other: "Healthy"}
    fault("--kind", "xid")
    wait_for(lambda: gpus() == ("2", "1"), what="allocatable 1", timeout=60)
    wait_for(lambda: health() == {gpu: "Unhealthy", other: "Healthy"}, what="the pod's GPU Unhealthy", timeout=60)
    fault("--clear")
    wait_for(lambda: gpus() == ("2", "2"), what="allocatable 2 again", timeout=60)
    wait_for(lambda: health() == {gpu: "Healthy", other: "Healthy"}, what="the pod's GPU Healthy", timeout=60)


FPGA = "example.com/fpga"


def registered(plugin: subprocess.Popen, timeout: float = 20) -> str:
    """The plugin's first line: "registered", or why the kubelet refused it (within `timeout`)."""
    sel = selectors.DefaultSelector()
    sel.register(plugin.stdout, selectors.EVENT_READ)
    ready = sel.select(timeout)
    sel.close()
    assert ready, f"the plugin neither registered nor was refused within {timeout} s"
    return plugin.stdout.readline().strip()


def test_an_external_device_plugin_process_registers_and_its_devices_are_allocated(cluster):
    """The Registration socket under `nanokube up` (uvloop), dialled by a plugin process with
    grpcio, as NVIDIA's or an FPGA vendor's plugin dials /var/lib/kubelet/device-plugins/kubelet.sock."""
    node_dir = cluster.data_dir / "pods" / "plugin-0"
    plugins = node_dir / "device-plugins"
    wait_for(lambda: (plugins / "kubelet.sock").exists(), what="the Registration socket")
    root = Path(__file__).resolve().parents[2]
    plugin = subprocess.Popen([sys.executable, "-m", "tests.e2e.external_device_plugin", str(plugins), FPGA,
                               "fpga-0", "fpga-1"], cwd=root, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              text=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert registered(plugin) == "registered"
        path = "{.status.%s.example\\.com/fpga}"
        wait_for(lambda: [cluster.kubectl("get", "node", "plugin-0", "-o", "jsonpath=" + path % field).stdout
                          for field in ("capacity", "allocatable")] == ["2", "2"], what="fpga capacity 2")
        cluster.kubectl("apply", "-f", "-", input=f"""
apiVersion: v1
kind: Pod
metadata: {{name: fpga}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: registry.example.com/fpga-app:1
    resources:
      limits: {{{FPGA}: 1}}
""")
        wait_for(lambda: cluster.kubectl_json("get", "pod", "fpga")["status"].get("phase") == "Running",
                 what="fpga running")
        out = cluster.kubectl("exec", "fpga", "--", "env").stdout
        env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        assert env["FPGA_DEVICES"] in ("fpga-0", "fpga-1")  # the plugin's Allocate answer

        prc = Client(node_dir / "pod-resources" / "kubelet.sock")
        try:
            [app] = prc.get("fpga").containers
            assert [(d.resource_name, list(d.device_ids)) for d in app.devices] == [(FPGA, [env["FPGA_DEVICES"]])]
            allocatable = prc.call["GetAllocatableResources"](pb.AllocatableResourcesRequest(), timeout=10).devices
            assert sorted(i for d in allocatable if d.resource_name == FPGA for i in d.device_ids) == \
                ["fpga-0", "fpga-1"]
        finally:
            prc.channel.close()
    finally:
        plugin.terminate()
        try:
            plugin.wait(10)
        except subprocess.TimeoutExpired:
            plugin.kill()
            plugin.wait()
        plugin.stdout.close()
