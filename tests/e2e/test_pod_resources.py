"""The kubelet's pod resources API on a node of `nanokube up`, read as dcgm-exporter or a DRA
driver reads it: a gRPC client of its own (upstream's method paths and messages) on
DATA_DIR/pods/NODE/pod-resources/kubelet.sock, the node's /var/lib/kubelet/pod-resources. The
cluster's one node has a GPU that claims share (consumable capacity) and a NIC; the scheduler
allocates what kubectl asks for, and the API lists each claim's devices with their share IDs, and
an external driver's devices with the CDI IDs its NodePrepareResources gave."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import grpc
import pytest

from nanokube.node.podresources.proto import podresources_pb2 as pb
from tests.e2e.conftest import running_cluster, wait_for
from tests.node.dra.plugin_driver import PluginDriver

NODE = "gpu-0"
CLUSTER = """\
pools:
  - name: gpu
    count: 1
    capacity: {cpu: "16", memory: 64Gi}
    gpus: {count: 1, model: L4, memory: 24Gi, architecture: Ada, driverVersion: 550.54.15, cudaVersion: "12.4",
           computeCapability: "8.9", numaNodes: 1, sharing: true}
    nics: {count: 1, model: ConnectX-7, bandwidth: 400G, rdma: true}
"""
BYO = "gpu.byo.example.com"
METHODS = {"List": (pb.ListPodResourcesRequest, pb.ListPodResourcesResponse),
           "Get": (pb.GetPodResourcesRequest, pb.GetPodResourcesResponse),
           "GetAllocatableResources": (pb.AllocatableResourcesRequest, pb.AllocatableResourcesResponse)}


class Client:
    """podresources v1 over the node's socket, as upstream's GetV1Client dials it."""

    def __init__(self, socket: Path):
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.call = {name: self.channel.unary_unary(f"/v1.PodResourcesLister/{name}",
                                                    request_serializer=req.SerializeToString,
                                                    response_deserializer=resp.FromString)
                     for name, (req, resp) in METHODS.items()}

    def list(self) -> dict[tuple[str, str], pb.PodResources]:
        return {(p.namespace, p.name): p for p in self.call["List"](pb.ListPodResourcesRequest(), timeout=10).pod_resources}

    def get(self, name: str, namespace: str = "default") -> pb.PodResources:
        return self.call["Get"](pb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace),
                                timeout=10).pod_resources


@pytest.fixture(scope="module")
def node():
    """The cluster, and a client on its node's pod resources socket."""
    with tempfile.TemporaryDirectory(prefix="nanokube-e2e-podres-file-") as d:
        path = Path(d) / "cluster.yaml"
        path.write_text(CLUSTER)
        with running_cluster("podres", ("--cluster", str(path))) as c:
            wait_for(lambda: json.loads(c.kubectl("get", "nodes", "-o", "json").stdout)["items"], what="the node")
            socket = c.data_dir / "pods" / NODE / "pod-resources" / "kubelet.sock"
            wait_for(socket.exists, what="the pod resources socket")
            prc = Client(socket)
            try:
                yield c, prc
            finally:
                prc.channel.close()


def devices(p: pb.PodResources) -> dict[str, list[tuple]]:
    """Each container's claims: (claim, driver, pool, device, CDI IDs, share ID or None if unset)."""
    return {c.name: [(r.claim_name, x.driver_name, x.pool_name, x.device_name, [i.name for i in x.cdi_devices],
                      x.share_id if x.HasField("share_id") else None)
                     for r in c.dynamic_resources for x in r.claim_resources] for c in p.containers}


def _claim(name: str, device_class: str, capacity: dict | None = None) -> dict:
    exactly = {"deviceClassName": device_class, **({"capacity": {"requests": capacity}} if capacity else {})}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}}}


def _pod(name: str, claims: list[str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                        "resources": {"claims": [{"name": c} for c in claims]}},
                       {"name": "logger", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}


def _running(c, name: str) -> None:
    wait_for(lambda: c.kubectl_json("get", "pod", name)["status"].get("phase") == "Running", 60, f"pod {name} Running")


def _results(c, claim: str) -> list[dict]:
    return c.kubectl_json("get", "resourceclaim", claim)["status"]["allocation"]["devices"]["results"]


def test_two_claims_share_the_gpu_under_their_own_share_ids_and_the_pod_leaves_the_list(node):
    """kubectl creates two claims for half the GPU each and one for the NIC, and a pod using all
    three; once it runs the node lists it with the scheduler's shareIDs for the GPU's two shares and
    none for the NIC, allocated whole. Deleting the pod takes it out of List."""
    c, prc = node
    half = {"milli": "500", "memory": "12Gi"}
    objs = [_claim("half-a", "gpu.nanokube.io", half), _claim("half-b", "gpu.nanokube.io", half),
            _claim("nic", "rdma.nanokube.io"), _pod("shares", ["half-a", "half-b", "nic"])]
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    _running(c, "shares")
    [a], [b], [nic] = (_results(c, n) for n in ("half-a", "half-b", "nic"))
    assert a["device"] == b["device"] == "gpu-0" and a["shareID"] != b["shareID"], (a, b)
    assert "shareID" not in nic

    got = prc.get("shares")
    assert (got.namespace, got.name) == ("default", "shares")
    assert devices(got) == {"main": [("half-a", "gpu.nanokube.io", NODE, "gpu-0", [], a["shareID"]),
                                     ("half-b", "gpu.nanokube.io", NODE, "gpu-0", [], b["shareID"]),
                                     ("nic", "nic.nanokube.io", NODE, nic["device"], [], None)],
                            "logger": []}
    assert prc.list()[("default", "shares")] == got
    # the devices of device plugins, exclusive CPUs and memory blocks: none on a simulated node; DRA
    # devices are the ResourceSlices', not the kubelet's inventory (upstream's too)
    assert prc.call["GetAllocatableResources"](pb.AllocatableResourcesRequest(), timeout=10) == \
        pb.AllocatableResourcesResponse()

    c.kubectl("delete", "pod", "shares", "--wait=false")
    wait_for(lambda: ("default", "shares") not in prc.list(), 60, "the deleted pod gone from List")
    c.kubectl("delete", "resourceclaims", "half-a", "half-b", "nic")


def test_an_external_drivers_devices_come_with_the_cdi_ids_it_prepared(node):
    """A driver's kubelet plugin of one's own registers with the node and publishes a device
    that claims share and one they do not; the claim's devices list the CDI IDs its
    NodePrepareResources returned, and the share ID it handed back for the shared one."""
    c, prc = node
    node_dir = c.data_dir / "pods" / NODE

    def results(namespace: str, name: str) -> list[tuple[str, ...]]:
        """As kubeletplugin's drivers do: the claim's results of this driver, each shareID handed back."""
        claim = json.loads(c.kubectl("get", "resourceclaim", name, "-n", namespace, "-o", "json").stdout)
        return [(r["request"], r["pool"], r["device"], *([r["shareID"]] if "shareID" in r else []))
                for r in claim["status"]["allocation"]["devices"]["results"] if r["driver"] == BYO]

    driver = PluginDriver(BYO, str(node_dir / "plugins_registry"), str(node_dir / "plugins"), str(node_dir / "cdi"),
                          results).start()
    try:
        wait_for(lambda: driver.statuses, what="registration")
        c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": BYO},
             "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{BYO}'"}}]}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{NODE}-{BYO}"},
             "spec": {"driver": BYO, "nodeName": NODE, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                      "devices": [{"name": "vf-0", "allowMultipleAllocations": True,
                                   "capacity": {"bandwidth": {"value": "100G"}}},
                                  {"name": "card-0"}]}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "byo", "namespace": "default"}, "spec": {"devices": {"requests": [
                 {"name": "vf", "exactly": {"deviceClassName": BYO, "selectors": [
                     {"cel": {"expression": "device.allowMultipleAllocations"}}]}},
                 {"name": "card", "exactly": {"deviceClassName": BYO, "selectors": [
                     {"cel": {"expression": "!device.allowMultipleAllocations"}}]}}]}}},
            _pod("byo", ["byo"])]}))
        _running(c, "byo")
        vf = next(r for r in _results(c, "byo") if r["device"] == "vf-0")
        assert vf.get("shareID"), vf
        want = [("byo", BYO, NODE, "vf-0", [f"{BYO}/device=vf-0"], vf["shareID"]),
                ("byo", BYO, NODE, "card-0", [f"{BYO}/device=card-0"], None)]
        assert devices(prc.get("byo")) == {"main": want, "logger": []}
        assert devices(prc.list()[("default", "byo")]) == {"main": want, "logger": []}

        c.kubectl("delete", "pod", "byo", "--wait=false")
        wait_for(lambda: ("default", "byo") not in prc.list(), 60, "the deleted pod gone from List")
        wait_for(lambda: driver.called("NodeUnprepareResources"), 60, "NodeUnprepareResources")
    finally:
        driver.stop()
