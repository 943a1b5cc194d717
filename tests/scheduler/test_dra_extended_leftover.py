"""DRA-backed extended resources (DRAExtendedResource) across a scheduler restart: the claim an
earlier scheduler's PreBind created for a pod (annotated, controlled by the pod, allocated and
reserved for it) while the pod never got bound is found by the next scheduler's PreFilter;
Filter refuses every node for it ("cannot schedule extended resource claim") and PostFilter
deletes it ("deletion of ResourceClaim completed"), whose deletion retries the pod: its next
cycle allocates anew with the device the leftover held."""

from nanokube.dra.extended_resources import ANNOTATION
from nanokube.dra.resourceclaim import FINALIZER
from nanokube.machinery.errors import APIError
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import becomes, eventually, make_stack
from tests.scheduler import node, pod
from tests.scheduler.test_scheduler import add_node

R, DRIVER = "resource.k8s.io", "fpga.example.com"


async def fpga_class(client) -> None:
    """DeviceClass fpga: the extended resource example.com/fpga, backed by DRIVER's devices."""
    await client.resource(R, "v1", "deviceclasses").create({
        "apiVersion": f"{R}/v1", "kind": "DeviceClass", "metadata": {"name": "fpga"},
        "spec": {"extendedResourceName": "example.com/fpga",
                 "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})


def fpga_pod() -> dict:
    """Pod p asking for one example.com/fpga (no uid: the server gives it one)."""
    body = pod("p")
    del body["metadata"]["uid"]
    body["spec"]["containers"][0]["resources"] = {"requests": {"example.com/fpga": "1"},
                                                  "limits": {"example.com/fpga": "1"}}
    return body


async def fpga_node(client) -> None:
    """Node n with one of DRIVER's devices (fpga-0) in its ResourceSlice, and the fpga class."""
    await add_node(client, node("n"))
    await fpga_class(client)
    await client.resource(R, "v1", "resourceslices").create({
        "apiVersion": f"{R}/v1", "kind": "ResourceSlice", "metadata": {"name": "n-fpgas"},
        "spec": {"driver": DRIVER, "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "fpga-0"}]}})


async def test_a_leftover_extended_resource_claim_is_deleted_and_the_pod_schedules():
    s = await make_stack()
    client = s.client
    await fpga_node(client)
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    p = await pods.create(fpga_pod())
    # what an earlier scheduler's PreBind left when it stopped before the binding: the only
    # device allocated to the pod's claim, reserved for the pod
    left = await claims.create({"apiVersion": f"{R}/v1", "kind": "ResourceClaim", "metadata": {
        "name": "p-extended-resources-old", "namespace": "default", "finalizers": [FINALIZER],
        "annotations": {ANNOTATION: "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": p["metadata"]["uid"],
                             "controller": True}]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 1}}]}}})
    await claims.update({**left, "status": {
        "allocation": {"devices": {"results": [{"request": "container-0-request-0", "driver": DRIVER, "pool": "n",
                                                "device": "fpga-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": p["metadata"]["uid"]}]}}, subresource="status")

    sched = Scheduler(client, seed=1)
    await sched.start()
    try:
        async def bound():
            return (await pods.get("p", "default"))["spec"].get("nodeName")
        assert await eventually(bound) == "n"
        try:
            await claims.get("p-extended-resources-old", "default")
            raise AssertionError("the leftover claim is still there")
        except APIError as e:
            assert e.code == 404
        status = (await pods.get("p", "default"))["status"]["extendedResourceClaimStatus"]
        new = await claims.get(status["resourceClaimName"], "default")
        [r] = new["status"]["allocation"]["devices"]["results"]
        assert r["device"] == "fpga-0" and new["status"]["reservedFor"][0]["uid"] == p["metadata"]["uid"]

        async def failed():  # the scheduler writes its Events from a queue
            items, _ = await client.resource("", "v1", "events").list(namespace="default")
            return [e.get("note") or e.get("message") for e in items if e["reason"] == "FailedScheduling"]
        await becomes(failed, ["0/1 nodes are available: 1 cannot schedule extended resource claim. "
                               "deletion of ResourceClaim completed, preemption: 0/1 nodes are available: "
                               "1 Preemption is not helpful for scheduling."])
    finally:
        await sched.stop()
        await s.close()


async def test_a_pod_with_dra_backed_resources_is_nominated_before_prebind_even_where_the_node_serves_them():
    """Upstream's PreBindPreFlight counts the in-memory extended resource claim among the pod's
    claims: a pod asking for a DRA-backed resource is nominated before PreBind even on a node whose
    device plugin serves it (no claim is made there), then bound, the binding clearing it."""
    s = await make_stack()
    client = s.client
    await add_node(client, node("n", extra={"example.com/fpga": "4"}))
    await fpga_class(client)
    pods = client.resource("", "v1", "pods")
    await pods.create(fpga_pod())
    sched = Scheduler(client, seed=1)
    await sched.start()
    try:
        async def bound():
            return (await pods.get("p", "default"))["spec"].get("nodeName") and await pods.get("p", "default")
        p = await eventually(bound)
        assert p["spec"]["nodeName"] == "n" and "nominatedNodeName" not in p["status"]
        assert "extendedResourceClaimStatus" not in p["status"]
        assert [m for m in p["metadata"]["managedFields"] if m["manager"] == "kube-scheduler"
                and "f:nominatedNodeName" in (m.get("fieldsV1") or {}).get("f:status", {})]
    finally:
        await sched.stop()
        await s.close()
