"""PodGroup resourceClaims over the in-process API server: a gang's pods that
name their group's claim share one allocation, reserved for the PodGroup
(not each pod), generated once per group from a template and recorded in
the PodGroup and pod statuses; a pod claim that does not match the group's
entry stays the pod's own."""

import pytest

from nanokube.controllers.resourceclaim import ResourceClaimController
from nanokube.dra.podgroup_claims import PODGROUP_CLAIM_ANNOTATION, consumer, group_entry
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node
from tests.scheduler.test_dynamic_resources import R, allocate_on, claim, device_class, gpu_slice
from tests.scheduler.test_gang import member, podgroup
from tests.scheduler.test_scheduler import add_node

S = "scheduling.k8s.io"


@pytest.fixture
async def env():
    s = await make_stack()
    for n in ("one-gpu", "two-gpus"):
        await add_node(s.client, node(n))
    await s.client.resource(R, "v1", "deviceclasses").create(device_class())
    slices = s.client.resource(R, "v1", "resourceslices")
    await slices.create(gpu_slice("one-gpu", 1))
    await slices.create(gpu_slice("two-gpus", 2))
    sched = Scheduler(s.client, seed=3)
    ctrl = ResourceClaimController(s.client)
    await sched.start()
    await ctrl.start()
    yield s.client
    await ctrl.stop()
    await sched.stop()
    await s.close()


def gpu_member(name, group, source):
    p = member(name, group, cpu="100m")
    p["spec"]["resourceClaims"] = [{"name": "gpu", **source}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return p


def group_with_claim(name, source, min_count=2):
    return podgroup(name, min_count, resourceClaims=[{"name": "gpu", **source}])


def all_bound(pods, names):
    async def check():
        got = [(await pods.get(n, "default"))["spec"].get("nodeName") for n in names]
        return got if all(got) else None
    return check


def test_group_entry_matches_name_and_source_exactly():
    pg = group_with_claim("g", {"resourceClaimTemplateName": "t"})
    assert group_entry(pg, {"name": "gpu", "resourceClaimTemplateName": "t"}) is not None
    assert group_entry(pg, {"name": "gpu", "resourceClaimTemplateName": "other"}) is None
    assert group_entry(pg, {"name": "other", "resourceClaimTemplateName": "t"}) is None
    assert group_entry(None, {"name": "gpu", "resourceClaimTemplateName": "t"}) is None


def test_consumer_is_the_group_for_a_shared_claim():
    pg = {**podgroup("g", 2), "metadata": {"name": "g", "namespace": "default", "uid": "u-g"}}
    p = {"metadata": {"name": "p", "uid": "u-p"}}
    assert consumer(p, pg) == {"apiGroup": S, "resource": "podgroups", "name": "g", "uid": "u-g"}
    assert consumer(p, None) == {"resource": "pods", "name": "p", "uid": "u-p"}


async def test_gang_shares_a_named_claim_reserved_for_the_podgroup(env):
    client = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    pgs = client.resource(S, "v1beta1", "podgroups")
    await claims.create(claim("shared"))
    pg = await pgs.create(group_with_claim("g", {"resourceClaimName": "shared"}))
    for i in range(2):
        await pods.create(gpu_member(f"m{i}", "g", {"resourceClaimName": "shared"}))
    placed = await eventually(all_bound(pods, ["m0", "m1"]))
    assert placed[0] == placed[1]
    c = await claims.get("shared", "default")
    assert len(c["status"]["allocation"]["devices"]["results"]) == 1
    assert c["status"]["reservedFor"] == [{"apiGroup": S, "resource": "podgroups", "name": "g",
                                           "uid": pg["metadata"]["uid"]}]


async def test_template_claim_is_generated_once_for_the_group(env):
    client = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    pgs = client.resource(S, "v1beta1", "podgroups")
    await client.resource(R, "v1", "resourceclaimtemplates").create(
        {"apiVersion": f"{R}/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "default"},
         "spec": {"spec": claim("x")["spec"]}})
    pg = await pgs.create(group_with_claim("g", {"resourceClaimTemplateName": "t"}, min_count=3))
    for i in range(3):
        await pods.create(gpu_member(f"m{i}", "g", {"resourceClaimTemplateName": "t"}))
    placed = await eventually(all_bound(pods, ["m0", "m1", "m2"]))
    assert len(set(placed)) == 1
    items, _ = await claims.list("default")
    [generated] = items
    md = generated["metadata"]
    assert md["name"].startswith("g-gpu-")
    assert md["annotations"][PODGROUP_CLAIM_ANNOTATION] == "gpu"
    assert md["ownerReferences"] == [{"apiVersion": f"{S}/v1beta1", "kind": "PodGroup", "name": "g",
                                      "uid": pg["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert (await pgs.get("g", "default"))["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": md["name"]}]
    for i in range(3):
        p = await pods.get(f"m{i}", "default")
        assert p["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": md["name"]}]
    assert [r["resource"] for r in generated["status"]["reservedFor"]] == ["podgroups"]


async def test_a_pod_claim_not_matching_the_group_entry_stays_the_pods_own(env):
    client = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await claims.create(claim("shared"))
    await claims.create(claim("mine"))
    await client.resource(S, "v1beta1", "podgroups").create(
        group_with_claim("g", {"resourceClaimName": "shared"}, min_count=1))
    await pods.create(gpu_member("m0", "g", {"resourceClaimName": "mine"}))
    await eventually(all_bound(pods, ["m0"]))
    c = await claims.get("mine", "default")
    assert [r["resource"] for r in c["status"]["reservedFor"]] == ["pods"]


async def test_a_gang_member_claim_allocated_for_nobody_on_an_unusable_node_is_deallocated(env):
    """PodGroupPostFilter: m0's claim was left allocated on one-gpu for nobody; with that node
    tainted the gang cannot be placed, so the scheduler deallocates the claim and the group's next
    cycle puts both members, each with its own GPU, on two-gpus."""
    client = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    await allocate_on(claims, "c0", "one-gpu")
    await claims.create(claim("c1"))
    await client.resource("", "v1", "nodes").patch("one-gpu", {"spec": {"taints": [{"key": "drain", "effect": "NoSchedule"}]}})
    await client.resource(S, "v1beta1", "podgroups").create(podgroup("g", 2))
    for i in range(2):
        await pods.create(gpu_member(f"m{i}", "g", {"resourceClaimName": f"c{i}"}))
    assert await eventually(all_bound(pods, ["m0", "m1"])) == ["two-gpus", "two-gpus"]
    results = [(await claims.get(f"c{i}", "default"))["status"]["allocation"]["devices"]["results"] for i in range(2)]
    assert {r["pool"] for [r] in results} == {"two-gpus"}
    assert len({r["device"] for [r] in results}) == 2


async def test_a_group_claim_reserved_for_its_idle_group_on_an_unusable_node_is_deallocated(env):
    """The group's own claim, reserved for the PodGroup while none of its pods is bound, on a node
    since tainted: PodGroupPostFilter deallocates it and the gang lands on two-gpus, the claim
    allocated there and reserved for the group again."""
    client = env
    pods, claims = client.resource("", "v1", "pods"), client.resource(R, "v1", "resourceclaims")
    pg = await client.resource(S, "v1beta1", "podgroups").create(group_with_claim("g", {"resourceClaimName": "shared"}))
    ref = {"apiGroup": S, "resource": "podgroups", "name": "g", "uid": pg["metadata"]["uid"]}
    await allocate_on(claims, "shared", "one-gpu", [ref])
    await client.resource("", "v1", "nodes").patch("one-gpu", {"spec": {"taints": [{"key": "drain", "effect": "NoSchedule"}]}})
    for i in range(2):
        await pods.create(gpu_member(f"m{i}", "g", {"resourceClaimName": "shared"}))
    assert await eventually(all_bound(pods, ["m0", "m1"])) == ["two-gpus", "two-gpus"]
    c = await claims.get("shared", "default")
    assert [r["pool"] for r in c["status"]["allocation"]["devices"]["results"]] == ["two-gpus"]
    assert c["status"]["reservedFor"] == [ref]
