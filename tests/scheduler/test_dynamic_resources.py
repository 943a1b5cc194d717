"""DynamicResources over the in-process API server: pods with GPU claims are
bound only where a free device exists, allocations are written with the
finalizer and reservedFor, devices are never shared, device taints steer
placement, and a missing claim or class keeps the pod pending with a reason."""

import pytest

from nanokube.clock import REAL

from nanokube.client.informer import InformerFactory
from nanokube.controllers.resourceclaim import ResourceClaimController
from nanokube.scheduler.framework import CycleState
from nanokube.dra.resourceclaim import FINALIZER
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import info, node, pod, unschedulable
from tests.scheduler.test_scheduler import add_node

NO_DEVICE = ("0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, "
             "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")

DRIVER = "gpu.example.com"
R = "resource.k8s.io"


def device_class(name="gpu"):
    return {"apiVersion": f"{R}/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}}


def gpu_slice(node_name, count, taints=None):
    devices = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(count)]
    if taints:
        for d in devices:
            d["taints"] = taints
    return {"apiVersion": f"{R}/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name, "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def request(tolerations=None):
    exactly = {"deviceClassName": "gpu"}
    if tolerations:
        exactly["tolerations"] = tolerations
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def claim(name, tolerations=None, klass="gpu"):
    spec = request(tolerations)
    spec["devices"]["requests"][0]["exactly"]["deviceClassName"] = klass
    return {"apiVersion": f"{R}/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def claim_pod(name, claim_name=None, template=None):
    p = pod(name)
    del p["metadata"]["uid"]
    ref = {"name": "gpu", **({"resourceClaimName": claim_name} if claim_name else {"resourceClaimTemplateName": template})}
    p["spec"]["resourceClaims"] = [ref]
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return p


async def create_gpu_template(client) -> None:
    """The ResourceClaimTemplate gpu-tmpl (one GPU) in default."""
    await client.resource(R, "v1", "resourceclaimtemplates").create({
        "apiVersion": f"{R}/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu-tmpl", "namespace": "default"},
        "spec": {"spec": request()}})


@pytest.fixture
async def env():
    s = await make_stack()
    for n in ("one-gpu", "two-gpus", "no-gpu"):
        await add_node(s.client, node(n))
    await s.client.resource(R, "v1", "deviceclasses").create(device_class())
    slices = s.client.resource(R, "v1", "resourceslices")
    await slices.create(gpu_slice("one-gpu", 1))
    await slices.create(gpu_slice("two-gpus", 2))
    sched = Scheduler(s.client, seed=3)
    ctrl = ResourceClaimController(s.client)
    await sched.start()
    await ctrl.start()
    yield s.client, sched
    await ctrl.stop()
    await sched.stop()
    await s.close()


def bound(pods, name):
    async def check():
        return (await pods.get(name, "default"))["spec"].get("nodeName")
    return check


async def claim_pods(claims, pods, n):
    """Pods p0..p{n-1}, each with its own claim c0..c{n-1}."""
    for i in range(n):
        await claims.create(claim(f"c{i}"))
        await pods.create(claim_pod(f"p{i}", f"c{i}"))


async def test_gpu_pods_land_where_devices_are_free_and_never_share_one(env):
    client, _ = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claim_pods(claims, pods, 4)
    placed = {}
    for i in range(3):
        placed[f"p{i}"] = await eventually(bound(pods, f"p{i}"))
    assert sorted(placed.values()) == ["one-gpu", "two-gpus", "two-gpus"]
    assert await eventually(unschedulable(pods, "p3")) == NO_DEVICE
    devices = set()
    for i in range(3):
        c = await claims.get(f"c{i}", "default")
        assert FINALIZER in c["metadata"]["finalizers"]
        alloc = c["status"]["allocation"]
        assert alloc["allocationTimestamp"]
        assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [placed[f"p{i}"]]
        [result] = alloc["devices"]["results"]
        assert result["pool"] == placed[f"p{i}"]
        devices.add((result["pool"], result["device"]))
        p = await pods.get(f"p{i}", "default")
        assert c["status"]["reservedFor"] == [{"resource": "pods", "name": f"p{i}", "uid": p["metadata"]["uid"]}]
    assert len(devices) == 3
    assert "allocation" not in (await claims.get("c3", "default")).get("status", {})


async def test_deleting_a_pod_frees_its_device_for_a_waiting_pod(env):
    client, _ = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claim_pods(claims, pods, 4)
    for i in range(3):
        await eventually(bound(pods, f"p{i}"))
    await eventually(unschedulable(pods, "p3"))
    freed_node = (await pods.get("p0", "default"))["spec"]["nodeName"]
    await pods.delete("p0", "default", grace_period_seconds=0)

    async def released():
        c = await claims.get("c0", "default")
        return not c["metadata"].get("finalizers") and "allocation" not in c.get("status", {}) and c
    c0 = await eventually(released)
    assert not c0["status"].get("reservedFor")
    assert await eventually(bound(pods, "p3")) == freed_node


async def test_shared_claim_puts_both_pods_on_its_node(env):
    client, _ = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claims.create(claim("shared"))
    await pods.create(claim_pod("a", "shared"))
    first = await eventually(bound(pods, "a"))
    await pods.create(claim_pod("b", "shared"))
    assert await eventually(bound(pods, "b")) == first
    c = await claims.get("shared", "default")
    assert [r["name"] for r in c["status"]["reservedFor"]] == ["a", "b"]


async def test_template_yields_a_generated_claim_that_is_allocated(env):
    client, _ = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await create_gpu_template(client)
    await pods.create(claim_pod("tp", template="gpu-tmpl"))
    assert await eventually(bound(pods, "tp")) in ("one-gpu", "two-gpus")
    p = await pods.get("tp", "default")
    [st] = p["status"]["resourceClaimStatuses"]
    c = await claims.get(st["resourceClaimName"], "default")
    assert st["resourceClaimName"].startswith("tp-gpu-")
    assert c["status"]["reservedFor"][0]["uid"] == p["metadata"]["uid"]


async def test_pod_waits_in_pre_enqueue_until_its_claim_exists(env):
    client, sched = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await pods.create(claim_pod("early", "later"))

    async def gated():
        info = sched.queue.unschedulable.get("default/early")
        return info is not None and info.gated_by == "DynamicResources"
    await eventually(gated)
    await claims.create(claim("later"))
    assert await eventually(bound(pods, "early"))


async def test_device_taint_rule_is_avoided_unless_tolerated(env):
    client, _ = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await client.resource(R, "v1", "devicetaintrules").create({
        "apiVersion": f"{R}/v1", "kind": "DeviceTaintRule", "metadata": {"name": "maintenance"},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": "two-gpus"},
                 "taint": {"key": "maintenance", "value": "soon", "effect": "NoSchedule"}}})
    await claims.create(claim("plain"))
    await pods.create(claim_pod("plain", "plain"))
    assert await eventually(bound(pods, "plain")) == "one-gpu"
    await claims.create(claim("plain2"))
    await pods.create(claim_pod("plain2", "plain2"))
    assert await eventually(unschedulable(pods, "plain2")) == NO_DEVICE
    tol = [{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]
    await claims.create(claim("tolerant", tolerations=tol))
    await pods.create(claim_pod("tolerant", "tolerant"))
    assert await eventually(bound(pods, "tolerant")) == "two-gpus"
    result = (await claims.get("tolerant", "default"))["status"]["allocation"]["devices"]["results"][0]
    assert result["tolerations"] == tol


async def test_missing_device_class_fails_scheduling_with_a_reason(env):
    client, _ = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claims.create(claim("orphan", klass="nope"))
    await pods.create(claim_pod("orphan", "orphan"))
    msg = await eventually(unschedulable(pods, "orphan"))
    assert msg == ('running "DynamicResources" filter plugin: claim default/orphan, request gpu: could not retrieve '
                   'device class nope: deviceclass.resource.k8s.io "nope" not found'), msg


async def test_unreserve_rolls_back_the_in_flight_allocation(env):
    client, sched = env
    claims = client.resource(R, "v1", "resourceclaims")
    await claims.create(claim("manual"))
    p = claim_pod("manual", "manual")
    p["metadata"]["uid"] = "uid-manual"
    p["spec"]["schedulerName"] = "someone-else"
    plugin = sched.frameworks["default-scheduler"].plugins["DynamicResources"]

    async def seen():
        return plugin.dra.claims.get("default/manual")
    await eventually(seen)

    i, state = info(p), CycleState()
    assert plugin.pre_filter(state, i) == (None, None)
    assert plugin.filter(state, i, _node_info(sched, "one-gpu")) is None
    assert plugin.reserve(state, i, "one-gpu") is None
    assert set(plugin.dra.in_flight) == {plugin.dra.claims.get("default/manual")["metadata"]["uid"]}
    other = CycleState()
    plugin.pre_filter(other, i)
    # the in-flight claim now counts as allocated: only its node remains
    assert plugin.filter(other, i, _node_info(sched, "two-gpus")).message() == "resourceclaim not available on the node"
    plugin.unreserve(state, i, "one-gpu")
    assert plugin.dra.in_flight == {}


def _node_info(sched, name):
    sched.cache.update_snapshot(sched.snapshot)
    return sched.snapshot.infos[name]


async def test_filter_follows_allocations_and_releases_as_the_full_search_does(env):
    """Filter over all nodes at once reads each node's free devices, kept as
    claims are allocated and released; each verdict is the full search's."""
    client, sched = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    plugin = sched.frameworks["default-scheduler"].plugins["DynamicResources"]
    await claims.create(claim("waiting"))
    probe = claim_pod("probe", "waiting")
    probe["metadata"]["uid"] = "uid-probe"
    probe["spec"]["schedulerName"] = "someone-else"

    async def verdicts():
        uid = (plugin.dra.claims.get("default/waiting") or {}).get("metadata", {}).get("uid")
        if uid is None:
            return None
        sched.cache.update_snapshot(sched.snapshot)
        infos = [sched.snapshot.infos[n] for n in ("one-gpu", "two-gpus", "no-gpu")]
        state = CycleState()
        plugin.pre_filter(state, info(probe))
        rejected = plugin.filter_nodes(state, info(probe), infos)
        cyc = state["DynamicResources"]
        searched = [cyc.allocator._search(n.node, cyc.pending, plugin.dra.index().for_node(n.node), n.name)
                    for n in infos]
        assert [i not in rejected for i in range(3)] == [s is not None for s in searched]
        assert {st.message() for st in rejected.values()} <= {"cannot allocate all claims"}
        return [n.name for i, n in enumerate(infos) if i not in rejected]

    assert await eventually(verdicts) == ["one-gpu", "two-gpus"]
    await claim_pods(claims, pods, 3)
    for i in range(3):
        await eventually(bound(pods, f"p{i}"))
    assert await verdicts() == []
    freed = (await pods.get("p1", "default"))["spec"]["nodeName"]
    await pods.delete("p1", "default", grace_period_seconds=0)

    async def released():
        return await verdicts() == [freed]
    await eventually(released)


async def test_claim_events_requeue_only_the_pods_naming_the_claim_or_after_a_deallocation(env):
    client, sched = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claim_pods(claims, pods, 4)
    await eventually(unschedulable(pods, "p3"))
    [reg] = [r for r in sched.queue.registrations["DynamicResources"] if r.event.resource == "ResourceClaim"]
    hint = reg.hint
    waiting = sched.pods.get("default/p3")
    own, other = await claims.get("c3", "default"), await claims.get("c0", "default")
    assert hint(waiting, None, own).name == "QUEUE"
    assert hint(waiting, own, own).name == "SKIP"  # its status as it was (a label, a finalizer)
    reserved = {**own, "status": {"reservedFor": [{"resource": "pods", "name": "p3", "uid": "u"}]}}
    assert hint(waiting, own, reserved).name == "QUEUE"
    assert hint(waiting, own, None).name == "SKIP"  # its deletion cannot let it in
    assert hint(waiting, None, other).name == "SKIP"
    assert hint(waiting, other, other).name == "SKIP"  # another pod's claim, still allocated
    freed = {**other, "status": {}}
    assert hint(waiting, other, freed).name == "QUEUE"
    elsewhere = {**own, "metadata": {**own["metadata"], "namespace": "other"}}
    assert hint(waiting, None, elsewhere).name == "SKIP"
    # the queue asks the hint only of the pods its targets name (None: of every pod)
    assert reg.targets(other, freed) is None
    for old, new in ((None, own), (own, own), (own, reserved), (own, None), (None, other), (other, other),
                     (None, elsewhere)):
        queued = {f"default/{p['metadata']['name']}" for p in sched.pods.list() if hint(p, old, new).name == "QUEUE"}
        assert queued == set(reg.targets(old, new)), (old, new)
    assert set(reg.targets(None, own)) == {"default/p3"}


async def test_an_allocation_changes_its_pool_once_however_many_objects_carry_it(env):
    """Reserve counts the in-flight allocation; PreBind's written claim and the informer's copy carry
    the same devices and change nothing, so kept answers of the node's pool are not worked out again."""
    client, sched = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    plugin = sched.frameworks["default-scheduler"].plugins["DynamicResources"]
    await claim_pods(claims, pods, 2)
    for i in range(2):
        await eventually(bound(pods, f"p{i}"))

    async def settled():
        return not plugin.dra.in_flight and all(
            (plugin.dra.claims.get(f"default/c{i}") or {}).get("status", {}).get("allocation") for i in range(2))
    await eventually(settled)
    held = plugin.dra.allocated
    assert len(held.changes) == 2
    assert set(held.exclusive) == {(DRIVER, r["pool"], r["device"]) for i in range(2)
                                   for r in plugin.dra.claims.get(f"default/c{i}")["status"]["allocation"]["devices"]["results"]}
    await pods.delete("p0", "default", grace_period_seconds=0)

    async def released():
        return len(held.exclusive) == 1
    await eventually(released)
    assert len(held.changes) == 3


async def test_the_claim_controller_can_share_the_schedulers_informers_which_their_owner_stops():
    """scheduler_perf's shape: the ResourceClaim controller is handed the scheduler's informer factory,
    so one pod and one claim watch serve both, and stopping the scheduler leaves them to the factory."""
    s = await make_stack()
    await add_node(s.client, node("n"))
    await s.client.resource(R, "v1", "deviceclasses").create(device_class())
    await s.client.resource(R, "v1", "resourceslices").create(gpu_slice("n", 1))
    await create_gpu_template(s.client)
    factory = InformerFactory()
    sched = Scheduler(s.client, seed=3, informers=factory)
    ctrl = ResourceClaimController(s.client, informers=factory)
    plugin = sched.frameworks["default-scheduler"].plugins["DynamicResources"]
    assert ctrl.pods is sched.pods and ctrl.claims is plugin.dra.claims
    before = s.cache.watcher_count
    try:
        await sched.start()
        running = before + len(factory._tasks)  # one watch per informer, opened once its list synced it
        assert running > before

        async def watching():
            return s.cache.watcher_count == running
        await eventually(watching)
        await ctrl.start()
        pods = s.client.resource("", "v1", "pods")
        await pods.create(claim_pod("tp", template="gpu-tmpl"))
        assert await eventually(bound(pods, "tp")) == "n"
        assert s.cache.watcher_count == running, "the controller opens no watch of its own"
        await ctrl.stop()
        await sched.stop()
        assert s.cache.watcher_count == running, "the factory's owner stops the shared informers"
        await factory.stop()
        assert s.cache.watcher_count == before
    finally:
        await ctrl.stop()
        await sched.stop()
        await factory.stop()
        await s.close()


async def allocate_on(claims, name: str, node_name: str, reserved_for=()) -> dict:
    """Claim `name` as an earlier attempt left it: gpu-0 of `node_name` allocated (with the
    finalizer), reserved for `reserved_for` (consumer references) only."""
    created = await claims.create({**claim(name), "metadata": {"name": name, "namespace": "default", "finalizers": [FINALIZER]}})
    alloc = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node_name, "device": "gpu-0"}]},
             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                 {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
             "allocationTimestamp": REAL.rfc3339()}
    status = {"allocation": alloc, **({"reservedFor": list(reserved_for)} if reserved_for else {})}
    return await claims.update({**created, "status": status}, subresource="status")


@pytest.mark.parametrize("unusable", ["deleted", "tainted"])
async def test_an_allocation_nobody_holds_on_an_unusable_node_is_dropped_and_made_again_elsewhere(env, unusable):
    """Upstream's PostFilter: the claim was allocated on one-gpu for an attempt whose binding never
    happened; with that node gone (or tainted NoSchedule) no node fits, so the scheduler
    deallocates the claim and the next attempt allocates it on two-gpus."""
    client, _ = env
    pods, claims, nodes = (client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims"),
                           client.resource("", "v1", "nodes"))
    await allocate_on(claims, "stuck", "one-gpu")
    if unusable == "deleted":
        await nodes.delete("one-gpu")
    else:
        await nodes.patch("one-gpu", {"spec": {"taints": [{"key": "drain", "effect": "NoSchedule"}]}})
    await pods.create(claim_pod("stuck", "stuck"))
    assert await eventually(bound(pods, "stuck")) == "two-gpus"
    c = await claims.get("stuck", "default")
    [result] = c["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == "two-gpus"
    assert c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["two-gpus"]
    p = await pods.get("stuck", "default")
    assert c["status"]["reservedFor"] == [{"resource": "pods", "name": "stuck", "uid": p["metadata"]["uid"]}]

    async def deallocation_reported():  # the broadcaster writes it from its queue, maybe after the binding
        events, _ = await client.resource("", "v1", "events").list(namespace="default")
        return any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "stuck" and
                   "resourceclaim not available on the node. deallocation of ResourceClaim completed" in e["message"]
                   for e in events)
    assert await eventually(deallocation_reported)


async def test_an_allocation_another_pod_holds_is_left_alone(env):
    """A claim reserved for a running pod is in use: PostFilter must not deallocate it, however
    unusable its node is for a newcomer."""
    client, _ = env
    pods, claims, nodes = (client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims"),
                           client.resource("", "v1", "nodes"))
    holder = claim_pod("holder", "held")
    holder["spec"]["nodeName"] = "one-gpu"
    holder = await pods.create(holder)
    await allocate_on(claims, "held", "one-gpu",
                      [{"resource": "pods", "name": "holder", "uid": holder["metadata"]["uid"]}])
    await nodes.patch("one-gpu", {"spec": {"taints": [{"key": "drain", "effect": "NoSchedule"}]}})
    await pods.create(claim_pod("newcomer", "held"))
    msg = await eventually(unschedulable(pods, "newcomer"))
    assert msg == ("0/3 nodes are available: 1 node(s) had untolerated taint {drain: }, "
                   "2 resourceclaim not available on the node. still not schedulable, "
                   "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    c = await claims.get("held", "default")
    assert c["status"]["allocation"]["devices"]["results"][0]["pool"] == "one-gpu"
    assert [r["name"] for r in c["status"]["reservedFor"]] == ["holder"]
