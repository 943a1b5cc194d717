"""WorkloadWithJob over the in-process API server: a Job with spec.scheduling
gets a Workload, then a PodGroup, then pods naming that group; objects are
found again by name, foreign ones block pod creation, minCount follows the Job,
and the scheduler places the resulting gang all-or-nothing."""

import pytest

from nanokube.controllers.garbagecollector import GarbageCollector
from nanokube.controllers.job import JobController
from nanokube.controllers.job_workload import (
    TEMPLATE,
    build_pod_group,
    build_workload,
    pod_group_name,
    pod_group_template,
    scheduling_policy,
    uses_workload,
    workload_name,
)
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.controllers.test_replicaset import stop
from tests.scheduler import node

SCHED = ("scheduling.k8s.io", "v1beta1")


def job(name="train", scheduling=None, cpu="1", uid=None, **spec):
    md = {"name": name, "namespace": "default", **({"uid": uid} if uid else {})}
    tmpl = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}
    body = {"parallelism": 3, "completions": 3, **spec, "template": tmpl}
    if scheduling is not None:
        body["scheduling"] = scheduling
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": body}


GANG = {"schedulingPolicy": {"gang": {}}}


# --- pure building ---------------------------------------------------------------


def test_gang_min_count_defaults_to_parallelism_and_explicit_value_wins():
    assert scheduling_policy(job(scheduling=GANG, parallelism=4)) == {"gang": {"minCount": 4}}
    assert scheduling_policy(job(scheduling={"schedulingPolicy": {"gang": {"minCount": 2}}})) == {"gang": {"minCount": 2}}
    assert scheduling_policy(job(scheduling=GANG, parallelism=0)) == {"gang": {"minCount": 1}}


def test_scheduling_without_policy_is_basic():
    assert scheduling_policy(job(scheduling={})) == {"basic": {}}
    assert scheduling_policy(job(scheduling={"schedulingPolicy": {"basic": {}}})) == {"basic": {}}


def test_only_jobs_with_scheduling_and_no_user_group_use_a_workload():
    assert uses_workload(job(scheduling=GANG))
    assert not uses_workload(job())
    own = job(scheduling=GANG)
    own["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
    assert not uses_workload(own)


def test_template_copies_constraints_disruption_and_claims():
    sched = {**GANG, "schedulingConstraints": {"topology": [{"key": "rack"}]}, "disruptionMode": {"all": {}},
             "resourceClaims": [{"name": "shared", "resourceClaimName": "c"}]}
    t = pod_group_template(job(scheduling=sched))
    assert t == {"name": TEMPLATE, "schedulingPolicy": {"gang": {"minCount": 3}},
                 "schedulingConstraints": {"topology": [{"key": "rack"}]}, "disruptionMode": {"all": {}},
                 "resourceClaims": [{"name": "shared", "resourceClaimName": "c"}]}


def test_names_depend_on_the_job_uid():
    a, b = job(scheduling=GANG, uid="u-1"), job(scheduling=GANG, uid="u-2")
    assert workload_name(a).startswith("train-") and workload_name(a) != workload_name(b)
    assert pod_group_name(a) == f"{workload_name(a)}-{TEMPLATE}"


def test_pod_group_is_instantiated_from_the_workload_template():
    j = job(scheduling=GANG, uid="u-1")
    wl = {**build_workload(j), "metadata": {**build_workload(j)["metadata"], "uid": "w-1"}}
    assert wl["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": "train"}
    pg = build_pod_group(j, wl)
    assert pg["spec"] == {"workloadRef": {"workloadName": workload_name(j), "templateName": TEMPLATE},
                          "schedulingPolicy": {"gang": {"minCount": 3}}}
    job_ref, wl_ref = pg["metadata"]["ownerReferences"]
    assert job_ref["uid"] == "u-1" and job_ref["controller"]
    assert wl_ref["uid"] == "w-1" and wl_ref["kind"] == "Workload" and not wl_ref["controller"]


# --- the controller ----------------------------------------------------------------


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = JobController(s.client)
    await ctrl.start()
    yield s.client, ctrl
    await stop(ctrl)
    await s.close()


async def listed(client, *gv_plural):
    items, _ = await client.resource(*gv_plural).list("default")
    return items


async def pods_of(client, n):
    items = await listed(client, "", "v1", "pods")
    return items if len(items) == n else None


async def test_creates_workload_then_pod_group_then_grouped_pods(env):
    client, _ = env
    created = await client.resource("batch", "v1", "jobs").create(job(scheduling=GANG))
    pods = await eventually(lambda: pods_of(client, 3))
    [wl] = await listed(client, *SCHED, "workloads")
    [pg] = await listed(client, *SCHED, "podgroups")
    uid = created["metadata"]["uid"]
    for obj in (wl, pg, *pods):
        ref = next(r for r in obj["metadata"]["ownerReferences"] if r["controller"])
        assert ref["kind"] == "Job" and ref["uid"] == uid
    assert wl["metadata"]["name"] == workload_name(created)
    # schedulingConstraints, a pointer tagged without omitempty, is served null when unset
    assert wl["spec"]["podGroupTemplates"] == [{"name": TEMPLATE, "schedulingPolicy": {"gang": {"minCount": 3}},
                                                "schedulingConstraints": None}]
    assert pg["spec"]["workloadRef"] == {"workloadName": wl["metadata"]["name"], "templateName": TEMPLATE}
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {pg["metadata"]["name"]}
    order = sorted((o["metadata"]["creationTimestamp"], int(o["metadata"]["resourceVersion"]), o["kind"])
                   for o in (wl, pg, pods[0]))
    assert [k for *_, k in order] == ["Workload", "PodGroup", "Pod"]


async def test_job_without_scheduling_creates_no_scheduling_objects(env):
    client, _ = env
    await client.resource("batch", "v1", "jobs").create(job())
    pods = await eventually(lambda: pods_of(client, 3))
    assert all("schedulingGroup" not in p["spec"] for p in pods)
    assert await listed(client, *SCHED, "workloads") == []
    assert await listed(client, *SCHED, "podgroups") == []


async def test_existing_owned_objects_are_adopted_not_duplicated(env):
    client, ctrl = env
    await stop(ctrl)
    created = await client.resource("batch", "v1", "jobs").create(job(scheduling=GANG))
    wl = await client.resource(*SCHED, "workloads").create(build_workload(created))
    await client.resource(*SCHED, "podgroups").create(build_pod_group(created, wl))
    again = JobController(client)
    await again.start()
    try:
        pods = await eventually(lambda: pods_of(client, 3))
    finally:
        await stop(again)
    assert len(await listed(client, *SCHED, "workloads")) == 1
    assert len(await listed(client, *SCHED, "podgroups")) == 1
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {pod_group_name(created)}


async def test_foreign_workload_of_the_same_name_blocks_pods(env):
    client, ctrl = env
    await stop(ctrl)
    created = await client.resource("batch", "v1", "jobs").create(job(scheduling=GANG))
    foreign = build_workload(created)
    foreign["metadata"].pop("ownerReferences")
    await client.resource(*SCHED, "workloads").create(foreign)
    again = JobController(client)
    await again.start()
    try:
        await again.sync("default/train")
    finally:
        await stop(again)
    assert await listed(client, "", "v1", "pods") == []
    assert await listed(client, *SCHED, "podgroups") == []


async def test_min_count_follows_parallelism(env):
    client, _ = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job(scheduling=GANG, completions=None))
    await eventually(lambda: pods_of(client, 3))
    # a patch, as `kubectl patch` sends it: the controller writes the Job's status meanwhile,
    # so a get-then-update would race it into a 409
    await jobs.patch("train", {"spec": {"parallelism": 5}}, namespace="default")

    async def groups_at_five():
        [wl] = await listed(client, *SCHED, "workloads")
        [pg] = await listed(client, *SCHED, "podgroups")
        return (wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 5}}
                and pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 5}})
    assert await eventually(groups_at_five)
    assert len(await eventually(lambda: pods_of(client, 5))) == 5


async def test_deleting_the_job_cascades_to_workload_and_pod_group(env):
    client, _ = env
    gc = GarbageCollector(client)
    await gc.start()
    try:
        jobs = client.resource("batch", "v1", "jobs")
        await jobs.create(job(scheduling=GANG))
        await eventually(lambda: pods_of(client, 3))
        await jobs.delete("train", "default")

        async def gone():
            return not await listed(client, *SCHED, "workloads") and not any(
                not p["metadata"].get("deletionTimestamp") for p in await listed(client, *SCHED, "podgroups"))
        assert await eventually(gone)
    finally:
        await stop(gc)


async def test_scheduler_places_the_job_gang_together_or_not_at_all(env):
    client, _ = env
    nodes = client.resource("", "v1", "nodes")
    for n in (node("a", cpu="64"), node("b", cpu="64")):
        made = await nodes.create(n)
        await nodes.update({**made, "status": n["status"]}, subresource="status")
    sched = Scheduler(client, seed=1)
    await sched.start()
    try:
        jobs = client.resource("batch", "v1", "jobs")
        await jobs.create(job("fits", scheduling=GANG, cpu="1"))
        await jobs.create(job("huge", scheduling=GANG, cpu="40"))

        async def fits_bound():
            pods = [p for p in await listed(client, "", "v1", "pods") if p["metadata"]["name"].startswith("fits-")]
            return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)
        await eventually(fits_bound)

        async def huge_refused():
            [pg] = [g for g in await listed(client, *SCHED, "podgroups") if g["metadata"]["name"].startswith("huge-")]
            conds = (pg.get("status") or {}).get("conditions") or []
            return any(c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "False" for c in conds)
        await eventually(huge_refused)
        huge = [p for p in await listed(client, "", "v1", "pods") if p["metadata"]["name"].startswith("huge-")]
        assert len(huge) == 3 and not any(p["spec"].get("nodeName") for p in huge)
    finally:
        await sched.stop()
