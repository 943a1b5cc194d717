import pytest

from nanokube.machinery.errors import APIError
from tests.controllers import eventually
from tests.node import ManualClock
from tests.node.test_lifecycle import SERVER, node_agents


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        yield s.client, clock, mgr


def claim_body(name):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": "gpu.nanokube.io", "count": 2}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.nanokube.io"}}]}}}


def pod_body(name, claim, node="gpu-0", image="busybox", **extra):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "acc", "resourceClaimName": claim}],
                     "containers": [{"name": "app", "image": image, "command": list(SERVER),
                                     "resources": {"claims": [{"name": "acc"}]}}],
                     **extra}}


async def allocate(claims, name, *pods, node="gpu-0"):
    """What the scheduler's PreBind writes: allocation and reservedFor at once."""
    c = {**await claims.get(name, "default")}  # only status is set: a shallow copy keeps the cache's as it is
    results = [{"request": "gpus", "driver": "gpu.nanokube.io", "pool": node, "device": "gpu-0"},
               {"request": "gpus", "driver": "gpu.nanokube.io", "pool": node, "device": "gpu-1"},
               {"request": "nic", "driver": "nic.nanokube.io", "pool": node, "device": "nic-1"}]
    c["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods]}
    return await claims.update(c, subresource="status")


def phase(pods, name, want, clock=None):
    """Poll for the phase; with a clock, time moves on a second per poll so
    workers blocked on their claims get to re-check them."""
    async def check():
        if clock is not None:
            await clock.advance(1)
        try:
            p = await pods.get(name, "default")
        except APIError:
            return None
        return p if (p.get("status") or {}).get("phase") == want else None
    return check


async def running_trainer(client, clock, image="busybox") -> None:
    """Claim `train` allocated to pod `trainer` (of `image`) on the built-in devices, and the pod Running."""
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    await claims.create(claim_body("train"))
    pod = await pods.create(pod_body("trainer", "train", image=image))
    await allocate(claims, "train", pod)
    await eventually(phase(pods, "trainer", "Running", clock))


async def test_allocated_claim_lets_the_pod_start_and_nic_gets_network_data(env):
    client, clock, mgr = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    await running_trainer(client, clock)
    c = await claims.get("train", "default")
    [dev] = c["status"]["devices"]
    assert (dev["driver"], dev["pool"], dev["device"]) == ("nic.nanokube.io", "gpu-0", "nic-1")
    assert [(x["type"], x["status"]) for x in dev["conditions"]] == [("Ready", "True")]
    nic = next(d for d in mgr.agents["gpu-0"].spec.devices if d.name == "nic-1")
    assert dev["networkData"] == {"interfaceName": "ib1", "ips": ["100.65.0.1/16"],
                                  "hardwareAddress": nic.attributes["hardwareAddress"]}
    assert mgr.agents["gpu-0"].claims.is_prepared("default", "train")

    await pods.delete("trainer", "default", grace_period_seconds=0)

    async def unprepared():
        c = await claims.get("train", "default")
        return not (c["status"].get("devices")) and not mgr.agents["gpu-0"].claims.is_prepared("default", "train")
    await eventually(unprepared)


async def test_unallocated_claim_keeps_the_pod_creating_with_a_warning(env):
    client, clock, mgr = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    events = client.resource("", "v1", "events")
    await claims.create(claim_body("late"))
    pod = await pods.create(pod_body("waiter", "late"))

    async def warned():
        items, _ = await events.list("default")
        return [e for e in items if e["reason"] == "FailedPrepareDynamicResources"]
    [ev] = await eventually(warned)
    assert ev["type"] == "Warning" and ev["involvedObject"]["name"] == "waiter"
    late = await claims.get("late", "default")
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: pod waiter "
                             f"({pod['metadata']['uid']}) is not allowed to use ResourceClaim late ({late['metadata']['uid']})")
    assert ev["source"] == {"component": "kubelet", "host": "gpu-0"}
    await clock.advance(5)
    p = await pods.get("waiter", "default")
    assert p["status"]["phase"] == "Pending"
    assert p["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert not mgr.agents["gpu-0"].claims.prepared

    await allocate(claims, "late", pod)
    await eventually(phase(pods, "waiter", "Running", clock))


async def test_claim_reserved_for_another_pod_blocks_this_one(env):
    client, clock, _ = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    events = client.resource("", "v1", "events")
    await claims.create(claim_body("theirs"))
    owner = await pods.create(pod_body("owner", "theirs", node="gpu-1"))
    await allocate(claims, "theirs", owner, node="gpu-0")
    intruder = await pods.create(pod_body("intruder", "theirs"))

    async def refused():
        items, _ = await events.list("default")
        return [e for e in items if e["involvedObject"]["name"] == "intruder"]
    [ev] = await eventually(refused)
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: pod intruder "
                             f"({intruder['metadata']['uid']}) is not allowed to use ResourceClaim theirs "
                             f"({(await claims.get('theirs', 'default'))['metadata']['uid']})")
    await clock.advance(3)
    assert (await pods.get("intruder", "default"))["status"]["phase"] == "Pending"


async def test_shared_claim_is_unprepared_only_after_the_last_pod_ends(env):
    client, clock, mgr = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    await claims.create(claim_body("shared"))
    a = await pods.create(pod_body("a", "shared"))
    b = await pods.create(pod_body("b", "shared", restartPolicy="Never"))
    await allocate(claims, "shared", a, b)
    await eventually(phase(pods, "a", "Running", clock))
    await eventually(phase(pods, "b", "Running", clock))
    await pods.delete("a", "default", grace_period_seconds=0)

    async def a_gone():
        return "a" not in {w.name for w in mgr.agents["gpu-0"].workers.values()}
    await eventually(a_gone)
    assert mgr.agents["gpu-0"].claims.is_prepared("default", "shared")
    assert (await claims.get("shared", "default"))["status"]["devices"]


async def test_a_device_of_a_driver_no_plugin_serves_on_the_node_keeps_the_pod_creating(env):
    """Upstream's kubelet asks each result's driver for its kubelet plugin: a driver that never
    registered on the node fails NodePrepareResources, and the pod waits in ContainerCreating."""
    client, clock, mgr = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    events = client.resource("", "v1", "events")
    await claims.create({"metadata": {"name": "fpga", "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "fpga", "exactly": {"deviceClassName": "fpga.example.com"}}]}}})
    pod = await pods.create(pod_body("fpga-user", "fpga"))
    c = {**await claims.get("fpga", "default")}
    c["status"] = {"allocation": {"devices": {"results": [
        {"request": "fpga", "driver": "fpga.example.com", "pool": "gpu-0", "device": "fpga-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "fpga-user", "uid": pod["metadata"]["uid"]}]}
    await claims.update(c, subresource="status")

    async def warned():
        items, _ = await events.list("default")
        return [e for e in items if e["reason"] == "FailedPrepareDynamicResources"
                and e["involvedObject"]["name"] == "fpga-user"]
    [ev] = await eventually(warned)
    assert ev["type"] == "Warning"
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: "
                             "DRA driver fpga.example.com is not registered")
    await clock.advance(5)
    p = await pods.get("fpga-user", "default")
    assert p["status"]["phase"] == "Pending"
    assert p["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert not mgr.agents["gpu-0"].claims.prepared


async def test_a_missing_or_ungenerated_claim_is_named_as_the_kubelet_names_it(env):
    client, clock, _ = env
    pods = client.resource("", "v1", "pods")
    events = client.resource("", "v1", "events")
    await pods.create(pod_body("ghostly", "ghost"))
    templated = pod_body("templated", "unused")
    templated["spec"]["resourceClaims"] = [{"name": "acc", "resourceClaimTemplateName": "gpus"}]
    await pods.create(templated)

    async def warned():
        items, _ = await events.list("default")
        got = {e["involvedObject"]["name"]: e["message"] for e in items if e["reason"] == "FailedPrepareDynamicResources"}
        return got if len(got) == 2 else None
    assert await eventually(warned) == {
        "ghostly": "Failed to prepare dynamic resources: prepare dynamic resources: fetch ResourceClaim ghost: "
                   'resourceclaims.resource.k8s.io "ghost" not found',
        "templated": 'Failed to prepare dynamic resources: prepare dynamic resources: pod "default/templated": '
                     "ResourceClaim not created yet"}


async def test_a_generated_claim_another_pod_owns_is_not_prepared(env):
    """The kubelet checks the owner of a claim the pod names through its status (resourceclaim
    IsForPod): a claim recorded for a template entry but controlled by another pod is refused,
    even reserved for this one, as it was not made for it."""
    client, clock, mgr = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    events = client.resource("", "v1", "events")
    owner = await pods.create(pod_body("owner", "unused", node="gpu-1"))
    body = claim_body("owner-acc")
    body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner",
                                            "uid": owner["metadata"]["uid"], "controller": True}]
    await claims.create(body)
    taker = pod_body("taker", "unused")
    taker["spec"]["resourceClaims"] = [{"name": "acc", "resourceClaimTemplateName": "gpus"}]
    taker = await pods.create(taker)
    await allocate(claims, "owner-acc", owner, taker)
    await pods.patch("taker", {"status": {"resourceClaimStatuses": [{"name": "acc", "resourceClaimName": "owner-acc"}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="status")

    async def refused():
        await clock.advance(1)  # the worker re-checks the pod's claims on its retry
        items, _ = await events.list("default")
        return [e for e in items if e["involvedObject"]["name"] == "taker" and "owner" in e["message"]]
    [ev] = await eventually(refused)
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: ResourceClaim "
                             "default/owner-acc was not created for pod default/taker (pod is not owner)")
    await clock.advance(3)
    assert (await pods.get("taker", "default"))["status"]["phase"] == "Pending"
    assert not mgr.agents["gpu-0"].claims.is_prepared("default", "owner-acc")


async def test_a_claim_recreated_under_its_old_name_waits_for_the_old_one_to_be_released(env):
    """The force-deleted-pod case: a claim is deleted and created again while the node still holds
    the old one for a pod it has not torn down; upstream's kubelet refuses the new claim (its cache
    is keyed by namespace/name) until the old one is unprepared."""
    client, clock, mgr = env
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    events = client.resource("", "v1", "events")
    await running_trainer(client, clock)
    old = await claims.get("train", "default")
    await claims.delete("train", "default")
    await claims.create(claim_body("train"))
    successor = await pods.create(pod_body("successor", "train"))
    await allocate(claims, "train", successor)

    async def refused():
        items, _ = await events.list("default")
        return [e for e in items if e["involvedObject"]["name"] == "successor"
                and e["reason"] == "FailedPrepareDynamicResources"]
    ev = (await eventually(refused))[0]
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: old ResourceClaim with "
                             f"same name train and different UID {old['metadata']['uid']} still exists "
                             "(previous pod force-deleted?!)")
    await clock.advance(3)
    assert (await pods.get("successor", "default"))["status"]["phase"] == "Pending"

    await pods.delete("trainer", "default", grace_period_seconds=0)
    await eventually(phase(pods, "successor", "Running", clock))
    new_uid = (await claims.get("train", "default"))["metadata"]["uid"]
    assert set(mgr.agents["gpu-0"].claims.prepared) == {new_uid}
