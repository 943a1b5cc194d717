"""CompositePodGroup trees over the in-process API server: the tree is one
unit (every child group placed per the min counts, or nothing), PreEnqueue
waits for the root to be ready, and a tree with a cycle, too deep or over
several Workloads is refused with the Invalid condition."""

import pytest

from nanokube.scheduler.composites import NOT_READY
from tests.controllers import eventually
from tests.scheduler import node, pod
from tests.scheduler.test_gang import failed_scheduling

S = "scheduling.k8s.io"


def composite(name, min_groups=None, parent=None, workload="train"):
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups else {"basic": {}}
    spec = {"workloadRef": {"workloadName": workload, "templateName": name}, "schedulingPolicy": policy}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": f"{S}/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def leaf(name, parent, min_count=2, workload="train"):
    return {"apiVersion": f"{S}/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "parentCompositePodGroupName": parent,
                     "workloadRef": {"workloadName": workload, "templateName": name}}}


def member(name, group, cpu="1"):
    p = pod(name, cpu, schedulingGroup={"podGroupName": group})
    del p["metadata"]["uid"]
    return p


async def create(client, *objs):
    for o in objs:
        group, version = o["apiVersion"].rsplit("/", 1) if "/" in o["apiVersion"] else ("", o["apiVersion"])
        plural = {"CompositePodGroup": "compositepodgroups", "PodGroup": "podgroups", "Pod": "pods"}[o["kind"]]
        await client.resource(group, version, plural).create(o)


def bound_names(client, names):
    async def check():
        pods = client.resource("", "v1", "pods")
        got = {n: (await pods.get(n, "default"))["spec"].get("nodeName") for n in names}
        return got if all(got.values()) else None
    return check


def composite_condition(client, name):
    async def check():
        obj = await client.resource(S, "v1alpha3", "compositepodgroups").get(name, "default")
        return next((c for c in (obj.get("status") or {}).get("conditions") or []
                     if c["type"] == "CompositePodGroupInitiallyScheduled"), None)
    return check


def pods_of(*groups):
    return [f"{g}-{i}" for g in groups for i in range(2)]


async def test_tree_is_placed_whole(schedulers):
    client, start = schedulers
    sched = await start(node("n1", "4"))
    await create(client, composite("root", 2), leaf("a", "root"), leaf("b", "root"),
                 *[member(n, n[0]) for n in pods_of("a", "b")])
    assert set((await eventually(bound_names(client, pods_of("a", "b")))).values()) == {"n1"}
    cond = await eventually(composite_condition(client, "root"))
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Scheduled", "")
    metric = sched.metrics.registry.get_sample_value
    assert metric("scheduler_podgroup_schedule_attempts_total",
                  {"result": "scheduled", "profile": "default-scheduler", "type": "compositepodgroup"}) >= 1


async def test_tree_that_does_not_fit_places_nothing(schedulers):
    client, start = schedulers
    await start(node("n1", "3"))
    await create(client, composite("root", 2), leaf("a", "root"), leaf("b", "root"),
                 *[member(n, n[0]) for n in pods_of("a", "b")])

    async def refused():
        c = await composite_condition(client, "root")()
        return c if c and c["status"] == "False" else None
    cond = await eventually(refused)
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == "minGroupCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
    pods = client.resource("", "v1", "pods")
    assert [(await pods.get(n, "default"))["spec"].get("nodeName") for n in pods_of("a", "b")] == [None] * 4
    assert await eventually(lambda: failed_scheduling(client, "a-0"))


async def test_a_tree_short_of_a_gated_member_waits_for_an_event_not_a_backoff(schedulers):
    """A leaf whose gated member still counts toward minCount makes the root ready, and the tree's
    cycle is cut short: its leaves wait in the unschedulable pool under GangScheduling (not in
    backoffQ as after an error, retried forever), and the gate's removal places the tree."""
    client, start = schedulers
    sched = await start(node("n1", "8"))
    gated = pod("b-1", "1", schedulingGroup={"podGroupName": "b"}, schedulingGates=[{"name": "example.com/hold"}])
    del gated["metadata"]["uid"]
    await create(client, composite("root", 2), leaf("a", "root"), leaf("b", "root"),
                 member("a-0", "a"), member("a-1", "a"), member("b-0", "b"), gated)
    cond = await eventually(composite_condition(client, "root"))
    assert (cond["status"], cond["message"]) == ("False", "minGroupCount (2) cannot be satisfied: 1 scheduled, 0 remaining")
    q = sched.queue

    async def parked():
        entries = [q.groups.get(k) for k in ("default/a", "default/b")]
        return all(e is not None and e.key in q.unschedulable for e in entries) and entries
    for e in await eventually(parked):
        assert e.unschedulable_plugins == {"GangScheduling"}
    await client.resource("", "v1", "pods").patch("b-1", {"spec": {"schedulingGates": None}}, namespace="default")
    assert set((await eventually(bound_names(client, pods_of("a", "b")))).values()) == {"n1"}


async def test_min_group_count_one_places_the_groups_that_fit(schedulers):
    client, start = schedulers
    await start(node("n1", "3"))
    await create(client, composite("root", 1), leaf("a", "root"), leaf("b", "root"),
                 *[member(n, n[0]) for n in pods_of("a", "b")])
    await eventually(bound_names(client, pods_of("a")))
    await eventually(lambda: failed_scheduling(client, "b-0"))
    pods = client.resource("", "v1", "pods")
    assert [(await pods.get(n, "default"))["spec"].get("nodeName") for n in pods_of("b")] == [None, None]


async def test_pods_wait_until_the_root_is_ready(schedulers):
    client, start = schedulers
    sched = await start(node("n1", "4"))
    await create(client, composite("root", 2), leaf("a", "root"), leaf("b", "root"),
                 *[member(n, "a") for n in pods_of("a")])

    async def gated():  # once the scheduler's informer has seen both members
        info = sched.queue.unschedulable.get("default/a-0")
        gated = info is not None and info.gated_by == "GangScheduling"
        return info if gated and sched.podgroups.member_count("default/a") == 2 else None
    await eventually(gated)
    assert sched.podgroups.member_count("default/a") == 2
    assert sched.frameworks["default-scheduler"].run_pre_enqueue(sched.queue.unschedulable["default/a-0"]).message() \
        == NOT_READY
    await create(client, *[member(n, "b") for n in pods_of("b")])
    await eventually(bound_names(client, pods_of("a", "b")))


async def test_pods_wait_for_a_missing_parent(schedulers):
    client, start = schedulers
    sched = await start(node("n1", "4"))
    await create(client, leaf("a", "root"), *[member(n, "a") for n in pods_of("a")])

    async def gated():
        info = sched.queue.unschedulable.get("default/a-0")
        return info if info is not None and info.gated_by == "GangScheduling" else None
    info = await eventually(gated)
    assert sched.frameworks["default-scheduler"].run_pre_enqueue(info).message() == \
        'waiting for pod group\'s parent composite pod group "root" to appear in scheduling queue'
    await create(client, composite("root", 1))
    await eventually(bound_names(client, pods_of("a")))


@pytest.mark.parametrize("objs, culprit, message", [
    ([composite("root", 1), leaf("a", "root", workload="other")], "root",
     'the composite pod group hierarchy spans more than one Workload: "other", "train"'),
    ([composite("c1", 1), composite("c2", 1, "c1"), composite("c3", 1, "c2"), composite("c4", 1, "c3"),
      leaf("a", "c4")], "c1", "the composite pod group hierarchy is deeper than 4 levels"),
    ([composite("c1", 1, "c2"), composite("c2", 1, "c1"), leaf("a", "c1")], "c1",
     'the composite pod group hierarchy has a cycle through "c1"'),
])
async def test_invalid_hierarchy_is_refused(schedulers, objs, culprit, message):
    client, start = schedulers
    await start(node("n1", "4"))
    await create(client, *objs, *[member(n, "a") for n in pods_of("a")])

    async def invalid():
        c = await composite_condition(client, culprit)()
        return c if c and c["reason"] == "Invalid" else None
    cond = await eventually(invalid)
    assert (cond["status"], cond["message"]) == ("False", message)
    pods = client.resource("", "v1", "pods")
    assert [(await pods.get(n, "default"))["spec"].get("nodeName") for n in pods_of("a")] == [None, None]
