"""A node whose cluster file advertises `nvidia.com/gpu` runs the simulated device plugin: its
Node's capacity and allocatable come from the plugin's devices, a pod is allocated its GPUs at
admission (or rejected when they are gone), the pod resources API lists them, and a restarted
node agent gives its running pods the same ones."""

import contextlib
import os

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import parse_cluster
from nanokube.node.manager import NodeManager
from nanokube.node.podresources.proto import podresources_pb2 as pb
from tests.controllers import becomes, eventually
from tests.node import api_on_manual_clock
from tests.node.podresources.test_server import Client
from tests.node.test_lifecycle import phase_is

GPU = "nvidia.com/gpu"
NODE = "plugin-0"
CLUSTER = parse_cluster("""\
pools:
  - name: plugin
    count: 1
    capacity: {cpu: "8", memory: 32Gi, nvidia.com/gpu: 4}
""")


def gpu_pod(name: str, gpus: int) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": NODE, "terminationGracePeriodSeconds": 0, "containers": [
        {"name": "cuda", "image": "cuda:12", "resources": {"limits": {GPU: str(gpus)}}}]}}


@contextlib.asynccontextmanager
async def node(s, clock, pods_dir):
    mgr = NodeManager(connector(s.rest), CLUSTER, clock, pods_dir=str(pods_dir))
    await mgr.start()
    client = Client(os.path.join(pods_dir, NODE, "pod-resources", "kubelet.sock"))
    try:
        yield mgr, client
    finally:
        await client.channel.close()
        await mgr.stop()


def devices(c: pb.ContainerResources) -> list[tuple[str, list[str]]]:
    return [(d.resource_name, list(d.device_ids)) for d in c.devices]


async def test_a_pods_gpus_are_allocated_from_the_plugin_and_listed_by_the_pod_resources_api(node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        nodes, pods = s.client.resource("", "v1", "nodes"), s.client.resource("", "v1", "pods")
        status = (await nodes.get(NODE))["status"]
        assert (status["capacity"][GPU], status["allocatable"][GPU]) == ("4", "4")
        allocatable = (await prc.allocatable()).devices
        gpus = sorted(d.device_ids[0] for d in allocatable)
        assert len(gpus) == 4 and {d.resource_name for d in allocatable} == {GPU}
        assert all(g.startswith("GPU-") and not d.HasField("topology") for g, d in zip(gpus, allocatable))

        await pods.create(gpu_pod("two", 2))
        await eventually(phase_is(pods, "two", "Running"))
        [cuda] = (await prc.get("two")).containers
        [(resource, two)] = devices(cuda)
        assert resource == GPU and len(two) == 2 and set(two) <= set(gpus)
        assert (await prc.list())[("default", "two")].containers[0] == cuda

        await pods.create(gpu_pod("rest", 2))
        await eventually(phase_is(pods, "rest", "Running"))
        [(_, rest)] = devices((await prc.get("rest")).containers[0])
        assert sorted(two + rest) == gpus


async def test_a_pod_asking_more_gpus_than_are_left_is_rejected_at_admission(node_dir):
    """The scheduler counts GPUs, but a pod bound by name is admitted by the node alone: with
    too few left its predicates fail (the device plugin's resource is in the node's allocatable),
    as upstream's kubelet rejects it before the device manager allocates, and it holds none."""
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
        await pods.create(gpu_pod("three", 3))
        await eventually(phase_is(pods, "three", "Running"))
        await pods.create(gpu_pod("greedy", 2))
        p = await eventually(phase_is(pods, "greedy", "Failed"))
        message = f"Node didn't have enough resource: {GPU}, requested: 2, used: 3, capacity: 4"
        assert (p["status"]["reason"], p["status"]["message"]) == (f"OutOf{GPU}", "Pod was rejected: " + message)
        assert "containerStatuses" not in p["status"]

        async def rejection():
            items, _ = await events.list("default")
            return [(e["type"], e["message"]) for e in items
                    if e["involvedObject"]["name"] == "greedy" and e["reason"] == f"OutOf{GPU}"]
        await becomes(rejection, [("Warning", message)])
        assert ("default", "greedy") not in await prc.list()
        # its deletion goes through as any ended pod's
        await pods.delete("greedy", "default")
        await eventually(gone(pods, "greedy"))


def gone(pods, name: str):
    async def check():
        items, _ = await pods.list("default")
        return name not in [i["metadata"]["name"] for i in items]
    return check


async def test_a_restarted_node_agent_keeps_the_pods_gpus(node_dir):
    """From its checkpoint: the GPUs a fresh allocation would pick first were another pod's."""
    async with api_on_manual_clock() as (s, clock):
        pods = s.client.resource("", "v1", "pods")
        async with node(s, clock, node_dir) as (mgr, prc):
            await pods.create(gpu_pod("one", 1))
            await eventually(phase_is(pods, "one", "Running"))
            await pods.create(gpu_pod("two", 2))
            await eventually(phase_is(pods, "two", "Running"))
            before = devices((await prc.get("two")).containers[0])
            await pods.delete("one", "default")
            await eventually(gone(pods, "one"))
        async with node(s, clock, node_dir) as (mgr, prc):
            async def listed():
                return ("default", "two") in await prc.list()
            await eventually(listed)
            assert devices((await prc.get("two")).containers[0]) == before
            # the two others go to the next pod
            await pods.create(gpu_pod("next", 2))
            await eventually(phase_is(pods, "next", "Running"))
            [(_, got)] = devices((await prc.get("next")).containers[0])
            assert not set(got) & set(before[0][1])


async def test_a_faulty_gpu_leaves_the_nodes_allocatable_at_the_next_status_post(node_dir):
    """A fault on a plugin GPU (the Node's `sim.nanokube.io/fault` annotation, as `nanokube fault
    gpu NODE GPU-...` writes it) makes the plugin report it Unhealthy, as NVIDIA's does on an XID
    error; taking the fault off heals it."""
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        nodes = s.client.resource("", "v1", "nodes")
        sick = sorted(d.device_ids[0] for d in (await prc.allocatable()).devices)[0]

        async def annotate(value):
            await nodes.patch(NODE, {"metadata": {"annotations": {"sim.nanokube.io/fault": value}}})
        await annotate(f"gpu:{sick}:xid,gpu:{sick}:ecc")

        async def gpus():
            await clock.advance(10)
            st = (await nodes.get(NODE))["status"]
            return st["capacity"][GPU], st["allocatable"][GPU]
        await becomes(gpus, ("4", "3"))
        assert sick not in [d.device_ids[0] for d in (await prc.allocatable()).devices]
        await annotate(f"gpu:{sick}:ecc")  # one fault of two healed: still unhealthy
        await clock.advance(10)
        assert await gpus() == ("4", "3")
        await annotate(None)
        await becomes(gpus, ("4", "4"))


async def test_a_pods_gpu_health_shows_in_its_container_status(node_dir):
    """KEP-4680's allocatedResourcesStatus for a device plugin's resource: each GPU the container
    holds by its ID, Unhealthy while a fault is on it; the status is written again when the
    plugin lists the change, with no other change to the pod."""
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        pods, nodes = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "nodes")
        await pods.create(gpu_pod("two", 2))
        await eventually(phase_is(pods, "two", "Running"))
        [(_, held)] = devices((await prc.get("two")).containers[0])

        async def health():
            [c] = (await pods.get("two", "default"))["status"]["containerStatuses"]
            return [(r["name"], [(d["resourceID"], d["health"]) for d in r["resources"]])
                    for r in c.get("allocatedResourcesStatus") or []]
        assert await health() == [(GPU, [(g, "Healthy") for g in held])]

        await nodes.patch(NODE, {"metadata": {"annotations": {"sim.nanokube.io/fault": f"gpu:{held[1]}:xid"}}})
        await becomes(health, [(GPU, [(held[0], "Healthy"), (held[1], "Unhealthy")])])
        await nodes.patch(NODE, {"metadata": {"annotations": {"sim.nanokube.io/fault": None}}})
        await becomes(health, [(GPU, [(g, "Healthy") for g in held])])
