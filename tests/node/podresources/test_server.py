"""The pod resources API of a simulated node (podresources v1), asked over its unix socket by a
gRPC client as dcgm-exporter or a DRA driver asks a kubelet: the method paths and messages are
upstream's (package v1, service PodResourcesLister), written out here rather than taken from
the server's module."""

import os
import shutil
import socket
import tempfile
import uuid
from types import SimpleNamespace

import grpc
import pytest
from multidict import CIMultiDict

from nanokube.apiserver.loopback import connector
from nanokube.node import kubelet_socket
from nanokube.node.cluster import default_cluster, parse_cluster
from nanokube.node.kubelet_socket import KubeletSocket
from nanokube.node.manager import NodeManager
from nanokube.node.podresources.proto import podresources_pb2 as pb
from nanokube.node.podresources.server import PodResourcesServer
from tests.controllers import eventually, make_stack
from tests.node import ManualClock
from tests.node.dra.plugin_driver import PluginDriver
from tests.node.dra.test_plugin_registration import DRIVER, NODE, _claimed_pod, registered
from tests.node.dra.test_prepare import claim_body, phase, pod_body, running_trainer
from tests.node.test_lifecycle import node_agents, phase_is, pod

METHODS = {"List": (pb.ListPodResourcesRequest, pb.ListPodResourcesResponse),
           "GetAllocatableResources": (pb.AllocatableResourcesRequest, pb.AllocatableResourcesResponse),
           "Get": (pb.GetPodResourcesRequest, pb.GetPodResourcesResponse)}


class Client:
    """A v1 PodResourcesLister client on a node's socket (upstream's GetV1Client)."""

    def __init__(self, socket_path: str):
        self.channel = grpc.aio.insecure_channel("unix://" + socket_path)
        self.calls = {name: self.channel.unary_unary(f"/v1.PodResourcesLister/{name}",
                                                     request_serializer=req.SerializeToString,
                                                     response_deserializer=resp.FromString)
                      for name, (req, resp) in METHODS.items()}

    async def list(self) -> dict[tuple[str, str], pb.PodResources]:
        resp = await self.calls["List"](pb.ListPodResourcesRequest(), timeout=10)
        return {(p.namespace, p.name): p for p in resp.pod_resources}

    async def get(self, name: str, namespace: str = "default") -> pb.PodResources:
        resp = await self.calls["Get"](pb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace), timeout=10)
        return resp.pod_resources

    async def allocatable(self) -> pb.AllocatableResourcesResponse:
        return await self.calls["GetAllocatableResources"](pb.AllocatableResourcesRequest(), timeout=10)


def socket_of(mgr, node=NODE) -> str:
    return os.path.join(mgr.pods_dir, node, "pod-resources", "kubelet.sock")


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        drivers: list[PluginDriver] = []
        client = Client(socket_of(mgr))

        def driver(results=lambda ns, n: [("gpu", NODE, "gpu-0")]) -> PluginDriver:
            a = mgr.agents[NODE]
            d = PluginDriver(DRIVER, a.plugins_registry, f"{mgr.pods_dir}/{NODE}/plugins", a.cdi_dir, results)
            drivers.append(d)
            return d.start()

        yield s.client, clock, mgr, client, driver
        await client.channel.close()
        for d in drivers:
            d.stop()


def claim_resources(c: pb.ContainerResources) -> list[tuple]:
    """Each claim of a container with its devices: (driver, pool, device, CDI device names)."""
    return [(r.claim_namespace, r.claim_name,
             [(x.driver_name, x.pool_name, x.device_name, [i.name for i in x.cdi_devices]) for x in r.claim_resources])
            for r in c.dynamic_resources]


async def test_list_shows_the_gpu_an_external_driver_prepared_with_its_cdi_device(env):
    client, clock, mgr, prc, driver = env
    d = driver()
    await registered(clock, mgr, d)
    await _claimed_pod(client, "trainer", "train")
    pods = client.resource("", "v1", "pods")
    await eventually(phase(pods, "trainer", "Running", clock))
    listed = await prc.list()
    trainer = listed[("default", "trainer")]
    assert [c.name for c in trainer.containers] == ["app", "side"]
    app, side = trainer.containers
    assert claim_resources(app) == [("default", "train", [(DRIVER, NODE, "gpu-0", [f"{DRIVER}/device=gpu-0"])])]
    assert list(side.dynamic_resources) == []
    # no device plugins, no exclusive CPUs or memory blocks on a simulated node
    assert (list(app.devices), list(app.cpu_ids), list(app.memory)) == ([], [], [])
    assert await prc.get("trainer") == trainer
    # another node's socket knows nothing of it
    other = Client(socket_of(mgr, "gpu-1"))
    try:
        assert ("default", "trainer") not in await other.list()
    finally:
        await other.channel.close()


def shares(c: pb.ContainerResources) -> list[tuple]:
    """Each claim's devices of a container: (claim, device, its share ID or None where unset)."""
    return [(r.claim_name, x.device_name, x.share_id if x.HasField("share_id") else None)
            for r in c.dynamic_resources for x in r.claim_resources]


def _allocated(claim: dict, pod: dict, results: list[dict]) -> dict:
    """The claim with the status the scheduler's PreBind writes: `results`, reserved for `pod`."""
    return {**claim, "status": {"allocation": {"devices": {"results": results}}, "reservedFor": [
        {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]}}


async def test_an_external_drivers_share_ids_are_listed_for_the_devices_it_shares(env):
    """A device allocated with consumable capacity (allowMultipleAllocations, KEP-5075) carries
    the allocation result's shareID, which the driver's NodePrepareResources hands back
    (Device.share_id, as kubeletplugin's Device.ShareID) and the API lists as ClaimResource.share_id;
    a device allocated whole has none, not an empty one."""
    client, clock, mgr, prc, driver = env
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    share = str(uuid.uuid4())
    # as a real driver does: the results of its devices in the claim's allocation
    given: dict[tuple[str, str], list[tuple]] = {}
    d = driver(lambda ns, n: given[(ns, n)])
    await registered(clock, mgr, d)
    c = await claims.create({"metadata": {"name": "mixed", "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "part", "exactly": {"deviceClassName": "example"}},
        {"name": "whole", "exactly": {"deviceClassName": "example"}}]}}})
    p = await pods.create(pod_body("mixed", "mixed"))
    results = [{"request": "part", "driver": DRIVER, "pool": NODE, "device": "gpu-0", "shareID": share,
                "consumedCapacity": {"memory": "10Gi"}},
               {"request": "whole", "driver": DRIVER, "pool": NODE, "device": "gpu-1"}]
    c = await claims.update(_allocated(c, p, results), subresource="status")
    given[("default", "mixed")] = [(r["request"], r["pool"], r["device"], *([r["shareID"]] if "shareID" in r else []))
                                   for r in c["status"]["allocation"]["devices"]["results"]]
    await eventually(phase(pods, "mixed", "Running", clock))
    [app] = (await prc.get("mixed")).containers
    assert shares(app) == [("mixed", "gpu-0", share), ("mixed", "gpu-1", None)]
    assert claim_resources(app) == [("default", "mixed", [(DRIVER, NODE, "gpu-0", [f"{DRIVER}/device=gpu-0"]),
                                                          (DRIVER, NODE, "gpu-1", [f"{DRIVER}/device=gpu-1"])])]
    assert (await prc.list())[("default", "mixed")].containers[0] == app


SHARED_GPU_NODE = """\
pools:
  - name: gpu
    count: 1
    capacity: {cpu: "16", memory: 64Gi}
    gpus: {count: 1, model: L4, memory: 24Gi, architecture: Ada, driverVersion: 550.54.15, cudaVersion: "12.4",
           computeCapability: "8.9", numaNodes: 1, sharing: true}
    nics: {count: 1, model: ConnectX-7, bandwidth: 400G, rdma: true}
"""


async def test_two_claims_sharing_a_built_in_gpu_list_their_own_share_ids_and_a_nic_none():
    """A node whose GPU allows multiple allocations (`sharing`): two claims each hold a share of
    gpu-0 under the shareID the scheduler gave it; the NIC, allocated whole, lists none."""
    clock = ManualClock()
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    s.rest.clock = clock
    mgr = NodeManager(connector(s.rest), parse_cluster(SHARED_GPU_NODE), clock)
    await mgr.start()
    prc = Client(socket_of(mgr))
    try:
        claims, pods = s.client.resource("resource.k8s.io", "v1", "resourceclaims"), s.client.resource("", "v1", "pods")
        body = {"metadata": {"name": "pair", "namespace": "default"}, "spec": {
            "resourceClaims": [{"name": n, "resourceClaimName": n} for n in ("half-a", "half-b", "net")],
            "nodeName": NODE, "containers": [{"name": "app", "image": "busybox", "resources": {
                "claims": [{"name": n} for n in ("half-a", "half-b", "net")]}}]}}
        p = await pods.create(body)
        ids = {}
        for name in ("half-a", "half-b"):
            c = await claims.create({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io",
                                                         "capacity": {"requests": {"milli": "500", "memory": "12Gi"}}}}]}}})
            ids[name] = str(uuid.uuid4())
            await claims.update(_allocated(c, p, [{
                "request": "gpu", "driver": "gpu.nanokube.io", "pool": NODE, "device": "gpu-0", "shareID": ids[name],
                "consumedCapacity": {"milli": "500", "memory": "12Gi"}}]), subresource="status")
        c = await claims.create({"metadata": {"name": "net", "namespace": "default"}, "spec": {"devices": {
            "requests": [{"name": "nic", "exactly": {"deviceClassName": "rdma.nanokube.io"}}]}}})
        await claims.update(_allocated(c, p, [{"request": "nic", "driver": "nic.nanokube.io", "pool": NODE,
                                               "device": "nic-0"}]), subresource="status")
        await eventually(phase(pods, "pair", "Running", clock))
        [app] = (await prc.get("pair")).containers
        assert shares(app) == [("half-a", "gpu-0", ids["half-a"]), ("half-b", "gpu-0", ids["half-b"]),
                               ("net", "nic-0", None)]
        assert ids["half-a"] != ids["half-b"]
    finally:
        await prc.channel.close()
        await mgr.stop()
        await s.close()


async def test_built_in_devices_are_listed_per_claim_and_go_with_the_pod(env):
    client, clock, mgr, prc, _ = env
    await running_trainer(client, clock)
    [app] = (await prc.get("trainer")).containers
    assert claim_resources(app) == [("default", "train", [
        ("gpu.nanokube.io", NODE, "gpu-0", []), ("gpu.nanokube.io", NODE, "gpu-1", []),
        ("nic.nanokube.io", NODE, "nic-1", [])])]
    pods = client.resource("", "v1", "pods")
    await pods.delete("trainer", "default", grace_period_seconds=0)

    async def gone():
        await clock.advance(1)
        return ("default", "trainer") not in await prc.list()
    await eventually(gone)


async def test_a_claim_not_prepared_yet_lists_no_dynamic_resources(env):
    client, clock, mgr, prc, _ = env
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    await claims.create(claim_body("later"))
    await pods.create(pod_body("waits", "later"))

    async def listed():
        return (await prc.list()).get(("default", "waits"))
    waits = await eventually(listed)  # Pending: an active pod
    assert [(c.name, list(c.dynamic_resources)) for c in waits.containers] == [("app", [])]


async def test_the_extended_resource_claim_goes_to_the_containers_its_requests_map_to(env):
    """A claim the scheduler made for an extended resource backed by DRA (DRAExtendedResource):
    the pod names it in status.extendedResourceClaimStatus, not in its spec."""
    client, clock, mgr, prc, _ = env
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    p = await pods.create(pod("ext", node=None, containers=("gpu", "cpu")))
    uid, request, name = p["metadata"]["uid"], "container-0-request-0", "ext-extended-resources-x"
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "ext", "uid": uid, "controller": True}
    c = await claims.create({"metadata": {"name": name, "namespace": "default", "ownerReferences": [owner]},
                             "spec": {"devices": {"requests": [
                                 {"name": request, "exactly": {"deviceClassName": "gpu.nanokube.io"}}]}}})
    result = {"request": request, "driver": "gpu.nanokube.io", "pool": NODE, "device": "gpu-3"}
    await claims.update({**c, "status": {"allocation": {"devices": {"results": [result]}},
                                         "reservedFor": [{"resource": "pods", "name": "ext", "uid": uid}]}},
                        subresource="status")
    mapping = {"containerName": "gpu", "resourceName": "example.com/gpu", "requestName": request}
    await pods.patch("ext", {"status": {"extendedResourceClaimStatus": {"resourceClaimName": name,
                                                                        "requestMappings": [mapping]}}},
                     namespace="default", subresource="status")
    await pods.create_subresource("ext", "binding", {"metadata": {"name": "ext"},
                                                     "target": {"kind": "Node", "name": NODE}}, "default")
    await eventually(phase(pods, "ext", "Running", clock))
    gpu, cpu = (await prc.get("ext")).containers
    assert claim_resources(gpu) == [("default", name, [("gpu.nanokube.io", NODE, "gpu-3", [])])]
    assert list(cpu.dynamic_resources) == []


async def test_sidecars_come_first_and_plain_init_containers_are_left_out(env):
    client, clock, mgr, prc, _ = env
    pods = client.resource("", "v1", "pods")
    body = pod("sidecars", containers=("main",))
    body["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"},
                                      {"name": "proxy", "image": "busybox:1.36", "restartPolicy": "Always"}]
    await pods.create(body)
    await eventually(phase_is(pods, "sidecars", "Running"))
    got = await prc.get("sidecars")
    assert (got.name, got.namespace, [c.name for c in got.containers]) == ("sidecars", "default", ["proxy", "main"])


async def test_get_of_a_pod_the_node_does_not_run_fails_as_upstreams(env):
    client, clock, mgr, prc, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("elsewhere", node="gpu-1"))
    await eventually(phase_is(pods, "elsewhere", "Running"))
    for name, ns in (("nope", "default"), ("elsewhere", "default"), ("elsewhere", "kube-system")):
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await prc.get(name, ns)
        # server_v1.go returns a plain error, which gRPC sends as Unknown
        assert (e.value.code(), e.value.details()) == (grpc.StatusCode.UNKNOWN,
                                                       f"pod {name} in namespace {ns} not found")


async def test_list_leaves_out_ended_pods_that_get_still_finds(env):
    client, clock, mgr, prc, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("done", annotations={"sim.nanokube.io/run-seconds": "1"}, restart="Never"))
    await pods.create(pod("runs"))
    await eventually(phase_is(pods, "done", "Running"))
    await clock.advance(2)
    await eventually(phase_is(pods, "done", "Succeeded"))

    async def listed_without_done():
        names = {n for _, n in await prc.list()}
        return "runs" in names and "done" not in names
    await eventually(listed_without_done)
    assert (await prc.get("done")).name == "done"


async def test_get_allocatable_resources_is_empty_without_device_plugins(env):
    """The inventory of device plugins and the CPU and memory managers: a simulated node has no
    device plugin and their `none` policies; its DRA GPUs are in ResourceSlices, as upstream's."""
    client, clock, mgr, prc, _ = env
    got = await prc.allocatable()
    assert got == pb.AllocatableResourcesResponse()
    assert got.SerializeToString() == b""


async def test_calls_past_the_rate_limit_are_refused_until_tokens_come_back(env):
    """Upstream's defaults: a burst of 10, then 100 calls a second (one per 10 ms)."""
    client, clock, mgr, prc, _ = env
    for _ in range(10):
        await prc.allocatable()
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await prc.list()
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
    await clock.advance(0.01)
    await prc.list()
    with pytest.raises(grpc.aio.AioRpcError):
        await prc.allocatable()


async def test_the_nodes_metrics_count_the_calls_served(env):
    """kubelet_pod_resources_endpoint_*{server_api_version="v1"} on the node's /metrics, named as
    client_golang exposes them; a call refused by the rate limit is not counted, as upstream's
    interceptor refuses it before the server's handler."""
    client, clock, mgr, prc, _ = env
    kubelet = mgr.kubelet_for(NODE)

    async def scrape() -> dict[str, float]:
        text = (await kubelet.serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/metrics")).text
        return {line.split("{")[0]: float(line.split()[-1]) for line in text.splitlines()
                if line.startswith("kubelet_pod_resources_endpoint_")}

    assert await scrape() == {}  # no series before a call
    await prc.list()
    await prc.allocatable()
    with pytest.raises(grpc.aio.AioRpcError):
        await prc.get("nope")
    for _ in range(7):
        await prc.list()
    with pytest.raises(grpc.aio.AioRpcError):  # the 11th call at once
        await prc.list()
    prefix = "kubelet_pod_resources_endpoint_"
    assert await scrape() == {prefix + "errors_get": 1, prefix + "requests_get": 1,
                              prefix + "requests_get_allocatable": 1, prefix + "requests_list": 8,
                              prefix + "requests_total": 10}


async def test_a_data_directory_too_long_for_a_socket_path_still_serves():
    """Past 107 bytes the node binds through /proc/self/fd; a client reaches it through a symlink."""
    clock = ManualClock()
    s = await make_stack()
    tmp = tempfile.mkdtemp(prefix="prs-")
    long_dir = os.path.join(tmp, "d" * 100)
    link = os.path.join(tmp, "kubelet.sock")
    mgr = NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=long_dir)
    path = socket_of(mgr)
    try:
        try:
            await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
            await mgr.start()
            assert len(path) > 107 and os.path.exists(path)
            os.symlink(path, link)
            prc = Client(link)
            try:
                assert await prc.allocatable() == pb.AllocatableResourcesResponse()
            finally:
                await prc.channel.close()
        finally:
            await mgr.stop()
            await s.close()
        assert not os.path.exists(path)  # the node removes its socket when it stops
    finally:
        shutil.rmtree(tmp)


async def test_the_grpc_server_starts_with_the_first_client_and_counts_against_the_open_files_budget(monkeypatch):
    """Thousands of nodes in one process: until a client connects a node holds only its listening
    socket (a previous run's replaced); the gRPC server behind it starts with the first call, and
    both count against the budget the node servers share (half the open files limit), past which
    no socket is made."""
    tmp = tempfile.mkdtemp(prefix="prs-")
    held = KubeletSocket.files
    server = PodResourcesServer(tmp, lambda: [], None, node="n1")
    try:
        os.makedirs(os.path.dirname(server.path))
        with socket.socket(socket.AF_UNIX) as stale:
            stale.bind(server.path)
        await server.start()
        assert KubeletSocket.files == held + 1
        client = Client(server.path)
        try:
            assert await client.list() == {}
            assert KubeletSocket.files == held + 2
            assert await client.allocatable() == pb.AllocatableResourcesResponse()
            assert KubeletSocket.files == held + 2 and server.counts["requests_total"] == 2
        finally:
            await client.channel.close()
        await server.stop()
        assert not os.path.exists(server.path) and KubeletSocket.files == held

        monkeypatch.setattr(kubelet_socket, "file_budget", lambda: held)
        await server.start()
        assert not os.path.exists(server.path) and KubeletSocket.files == held
    finally:
        await server.stop()
        shutil.rmtree(tmp)
