"""Gang scheduling over the in-process API server: a PodGroup's pods are
placed all together or not at all, held until the group and minCount
members exist, and kept inside one topology domain when asked."""

from nanokube.clock import Clock
from nanokube.metrics.exposition import render
from nanokube.scheduler.framework import Code
from nanokube.scheduler.plugins.gang import GangScheduling
from nanokube.scheduler.podgroups import PodGroupIndex
from tests.controllers import eventually
from tests.scheduler import info, node, pod
from tests.scheduler.test_metrics import sample
from tests.scheduler.test_scheduler import add_node

RACK = "nanokube.io/rack"


def podgroup(name, min_count=None, topology=None, **spec):
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    spec = {"schedulingPolicy": policy, **spec}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def member(name, group, cpu="1", **spec):
    p = pod(name, cpu, schedulingGroup={"podGroupName": group}, **spec)
    del p["metadata"]["uid"]
    return p


def node_of(pods, name):
    async def check():
        return (await pods.get(name, "default"))["spec"].get("nodeName")
    return check


async def nodes_of(pods, names):
    return [(await pods.get(n, "default"))["spec"].get("nodeName") for n in names]


def condition(client, name):
    pgs = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")

    async def check():
        for c in ((await pgs.get(name, "default")).get("status") or {}).get("conditions") or []:
            if c["type"] == "PodGroupInitiallyScheduled":
                return c
        return None
    return check


async def failed_scheduling(client, name):
    items, _ = await client.resource("", "v1", "events").list("default")
    return [e for e in items if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == name]


async def gang(client, group: str, count: int):
    """A PodGroup of minCount `count` and its `count` members w-0..; returns the pods client and
    the members' names."""
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup(group, count))
    pods = client.resource("", "v1", "pods")
    names = [f"w-{i}" for i in range(count)]
    for n in names:
        await pods.create(member(n, group))
    return pods, names


async def test_gang_that_fits_is_bound_together(schedulers):
    client, start = schedulers
    await start(node("a", "2"), node("b", "2"))
    pods, names = await gang(client, "g", 4)
    for n in names:
        await eventually(node_of(pods, n))
    assert sorted(await nodes_of(pods, names)) == ["a", "a", "b", "b"]
    cond = await eventually(condition(client, "g"))
    # upstream writes the Success status's message, which is empty
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "Scheduled", "")


async def test_gang_that_does_not_fit_binds_nothing_and_keeps_no_reservation(schedulers):
    client, start = schedulers
    sched = await start(node("a", "2"), node("b", "1"))
    pods, names = await gang(client, "g", 4)
    cond = await eventually(condition(client, "g"))
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    # the group's failure, then (upstream's AppendReason) what workload-aware preemption said
    assert cond["message"] == ("minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, "
                               "pod group preemption: No preemption victims found for incoming preemptor")
    for n in names:
        assert await eventually(lambda n=n: failed_scheduling(client, n))
    assert await nodes_of(pods, names) == [None] * 4
    assert not sched.cache.assumed
    assert all(ni.requested.milli_cpu == 0 for ni in sched.cache.infos.values())
    lone = pod("lone", "2")
    del lone["metadata"]["uid"]
    await pods.create(lone)
    assert await eventually(node_of(pods, "lone")) == "a"
    assert await nodes_of(pods, names) == [None] * 4


async def test_a_gang_retried_with_the_same_failure_writes_nothing_per_attempt(schedulers):
    """Each member's PodScheduled=False is written once per distinct message, so the pod keeps its
    resourceVersion and its repeated FailedScheduling events fold into one series (the first
    attempt's Event regards the pod before that write, the next ones the pod after it)."""
    client, start = schedulers
    sched = await start(node("a", "2"))
    sched.api.clock = Ticking()  # attempts seconds apart, as retries are: a rewritten condition would differ
    pods, names = await gang(client, "g", 3)
    for n in names:
        await eventually(lambda n=n: failed_scheduling(client, n))
    entry = sched.queue.groups["default/g"]

    async def parked():
        return entry.key in sched.queue.unschedulable and all(
            any(c["type"] == "PodScheduled" for c in m.pod["status"].get("conditions") or [])
            for m in entry.members.values())

    await eventually(parked)
    versions = None
    for attempt in range(2, 6):
        tried = entry.attempts
        entry.backoff_expires = 0
        sched.queue.activate_group("default/g", "PodGroupMemberAdd")
        await eventually(lambda: _true(entry.attempts > tried))
        await eventually(parked)
        if attempt == 3:
            versions = [(await pods.get(n, "default"))["metadata"]["resourceVersion"] for n in names]
    assert [(await pods.get(n, "default"))["metadata"]["resourceVersion"] for n in names] == versions
    counts = {}
    for n in names:
        events = await eventually(lambda n=n: _two_one_a_series(failed_scheduling(client, n)))
        counts[n] = sorted((e.get("series") or {}).get("count", 1) for e in events)
    assert counts == {n: [1, 2] for n in names}  # written at the first repeat; the next two counted in memory
    await sched.api.broadcaster.refresh()
    for n in names:
        events = await failed_scheduling(client, n)
        assert sorted((e.get("series") or {}).get("count", 1) for e in events) == [1, 4]


class Ticking(Clock):
    """Each reading a second after the last."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def now(self) -> float:
        self.t += 1
        return self.t


async def _true(value):
    return value


async def _two_one_a_series(found):
    """Two Events, one of them a series: each is written on a task of its own, so the series' write
    (the first repeat's) can land after the other's create."""
    got = await found
    return got if len(got) == 2 and any("series" in e for e in got) else None


async def test_gang_schedules_once_capacity_is_added(schedulers):
    client, start = schedulers
    await start(node("a", "2"))
    pods, names = await gang(client, "g", 3)
    assert (await eventually(condition(client, "g")))["status"] == "False"
    await add_node(client, node("b", "2"))
    for n in names:
        await eventually(node_of(pods, n))
    assert (await eventually(condition(client, "g")))["status"] == "True"


async def test_group_is_held_until_podgroup_and_min_count_members_exist(schedulers):
    client, start = schedulers
    sched = await start(node("a", "8"))
    pods = client.resource("", "v1", "pods")
    await pods.create(member("w-0", "g"))
    await pods.create(member("w-1", "g"))
    gated = await eventually(lambda: _async(sched.queue.unschedulable.get("default/w-0")))
    assert gated.gated_by == "GangScheduling"
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 3))
    await eventually(lambda: _async(sched.podgroups.get("default/g")))
    assert sched.queue.unschedulable["default/w-1"].gated_by == "GangScheduling"
    assert await nodes_of(pods, ["w-0", "w-1"]) == [None, None]
    await pods.create(member("w-2", "g"))
    for n in ("w-0", "w-1", "w-2"):
        assert await eventually(node_of(pods, n)) == "a"


async def test_min_count_decrease_releases_the_group(schedulers):
    client, start = schedulers
    await start(node("a", "8"))
    pgs = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
    await pgs.create(podgroup("g", 3))
    pods = client.resource("", "v1", "pods")
    await pods.create(member("w-0", "g"))
    await pods.create(member("w-1", "g"))
    await pgs.patch("g", {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}, namespace="default")
    for n in ("w-0", "w-1"):
        assert await eventually(node_of(pods, n)) == "a"


async def test_a_gang_that_loses_a_member_waits_in_pre_enqueue_until_it_is_back(schedulers):
    """A member deleted after the group passed PreEnqueue leaves the rest short of minCount: they
    wait gated again (no attempt per backoff, each cut short before any pod), and the member's
    replacement lets the group in at once, as upstream's PreEnqueue on each move to activeQ."""
    client, start = schedulers
    sched = await start(node("a", "2"), node("b", "2"))
    pods = client.resource("", "v1", "pods")
    for b in ("blk-a", "blk-b"):
        blocker = pod(b, "2")
        del blocker["metadata"]["uid"]
        await pods.create(blocker)
        await eventually(node_of(pods, b))
    pods, names = await gang(client, "g", 3)
    assert (await eventually(condition(client, "g")))["status"] == "False"
    await pods.delete("w-2", "default", grace_period_seconds=0)
    for b in ("blk-a", "blk-b"):
        await pods.delete(b, "default", grace_period_seconds=0)

    async def gated():
        text = render(sched.metrics.registry).decode()
        return 'scheduler_pending_pods{queue="gated"} 2\n' in text and "default/g" not in sched.queue.groups
    await eventually(gated)
    tried = sample(render(sched.metrics.registry).decode(), 'scheduler_schedule_attempts_total{profile='
                   '"default-scheduler",result="unschedulable"}')
    assert {sched.queue.unschedulable[f"default/{n}"].gated_by for n in names[:2]} == {"GangScheduling"}
    await pods.create(member("w-2", "g"))
    for n in names:
        assert await eventually(node_of(pods, n))
    assert sample(render(sched.metrics.registry).decode(), 'scheduler_schedule_attempts_total{profile='
                  '"default-scheduler",result="unschedulable"}') == tried


async def test_a_gang_short_of_a_gated_member_waits_for_an_event_not_a_backoff(schedulers):
    """A member held by a scheduling gate still counts for PreEnqueue's minCount, so the others go
    to the cycle, which stops before trying any pod: the group waits in the unschedulable pool (as
    upstream's GangScheduling PlacementFeasible rejection), not in backoffQ as after an error, and
    the gate's removal lets all three in."""
    client, start = schedulers
    sched = await start(node("a", "8"))
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 3))
    pods = client.resource("", "v1", "pods")
    await pods.create(member("w-0", "g"))
    await pods.create(member("w-1", "g"))
    await pods.create(member("w-2", "g", schedulingGates=[{"name": "example.com/hold"}]))
    cond = await eventually(condition(client, "g"))
    assert cond["message"] == ("minCount (3) cannot be satisfied: 0 scheduled, 2 remaining, "
                               "pod group preemption: No preemption victims found for incoming preemptor")

    async def parked():
        entry = sched.queue.groups.get("default/g")
        return entry is not None and entry.key in sched.queue.unschedulable and entry
    entry = await eventually(parked)
    assert entry.unschedulable_plugins == {"GangScheduling"}
    await pods.patch("w-2", {"spec": {"schedulingGates": None}}, namespace="default")
    for n in ("w-0", "w-1", "w-2"):
        assert await eventually(node_of(pods, n)) == "a"


async def test_basic_group_places_what_fits(schedulers):
    client, start = schedulers
    await start(node("a", "2"))
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g"))
    pods = client.resource("", "v1", "pods")
    for i in range(3):
        await pods.create(member(f"w-{i}", "g"))
    for n in ("w-0", "w-1"):
        await eventually(node_of(pods, n))
    assert (await eventually(condition(client, "g")))["status"] == "True"
    assert await eventually(lambda: failed_scheduling(client, "w-2"))
    assert (await pods.get("w-2", "default"))["spec"].get("nodeName") is None


async def test_topology_constraint_keeps_the_gang_in_one_rack(schedulers):
    client, start = schedulers
    await start(*[node(f"n{i}", "2", labels={RACK: f"rack-{i // 2}"}) for i in range(6)])
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 4, topology=RACK))
    pods = client.resource("", "v1", "pods")
    names = [f"w-{i}" for i in range(4)]
    for n in names:
        await pods.create(member(n, "g"))
    for n in names:
        await eventually(node_of(pods, n))
    racks = {int(n[1:]) // 2 for n in await nodes_of(pods, names)}
    assert len(racks) == 1


async def test_priority_mismatch_is_a_scheduler_error(schedulers):
    client, start = schedulers
    await start(node("a", "8"))
    await client.resource("scheduling.k8s.io", "v1", "priorityclasses").create(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100})
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 2))
    pods = client.resource("", "v1", "pods")
    await pods.create(member("w-0", "g"))
    await pods.create(member("w-1", "g", priorityClassName="high"))
    cond = await eventually(condition(client, "g"))
    assert cond["reason"] == "SchedulerError"
    assert cond["message"] == ("all pods in a single pod group should match the priority of the pod group, "
                               "got: 100 and 0")
    assert await nodes_of(pods, ["w-0", "w-1"]) == [None, None]


async def _async(value):
    return value


class _Handle:
    def __init__(self):
        self.podgroups = PodGroupIndex()


def test_pre_enqueue_messages():
    handle = _Handle()
    plugin = GangScheduling({}, handle)
    p = member("w-0", "g")
    p["metadata"]["uid"] = "u0"
    assert plugin.pre_enqueue(info(pod("lone"))) is None
    st = plugin.pre_enqueue(info(p))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message() == 'waiting for pod\'s pod group "g" to appear in scheduling queue'
    handle.podgroups.set_group(podgroup("g", 2))
    handle.podgroups.observe_pod(p)
    assert plugin.pre_enqueue(info(p)).message() == "waiting for minCount pods from a gang to appear in scheduling queue"
    q = member("w-1", "g")
    q["metadata"]["uid"] = "u1"
    handle.podgroups.observe_pod(q)
    assert plugin.pre_enqueue(info(p)) is None


async def test_a_gang_asking_only_for_dra_backed_extended_resources_is_placed(schedulers):
    """Found by fuzz54: members of a PodGroup asking for a DRA-backed extended resource (a
    DeviceClass's extendedResourceName), with no resourceClaims of their own, failed DynamicResources'
    PreFilter with a KeyError at every attempt: the group never scheduled and nothing said why."""
    client, start = schedulers
    await start(node("a", "4"))
    driver = "fpga.example.com"
    await client.resource("resource.k8s.io", "v1", "deviceclasses").create({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "fpga"},
        "spec": {"extendedResourceName": "example.com/fpga",
                 "selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}})
    await client.resource("resource.k8s.io", "v1", "resourceslices").create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "a-fpgas"},
        "spec": {"driver": driver, "nodeName": "a", "pool": {"name": "a", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "fpga-0"}, {"name": "fpga-1"}]}})
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 2))
    pods = client.resource("", "v1", "pods")
    for n in ("w-0", "w-1"):
        body = member(n, "g")
        body["spec"]["containers"][0]["resources"] = {"requests": {"example.com/fpga": "1"},
                                                      "limits": {"example.com/fpga": "1"}}
        await pods.create(body)
    assert [await eventually(node_of(pods, n)) for n in ("w-0", "w-1")] == ["a", "a"]


async def test_a_broken_claim_fails_the_gang_with_the_plugins_error(schedulers):
    """A Filter error (here a claim of a DeviceClass that does not exist) fails the group's attempt as a
    SchedulerError with upstream's wrapped text, instead of ending the cycle with a logged traceback."""
    client, start = schedulers
    await start(node("a", "8"))
    await client.resource("resource.k8s.io", "v1", "resourceclaims").create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "nope"}}]}}})
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("g", 2))
    pods = client.resource("", "v1", "pods")
    for n in ("w-0", "w-1"):
        await pods.create(member(n, "g", resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]))
    cond = await eventually(condition(client, "g"))
    assert cond["reason"] == "SchedulerError"
    assert cond["message"] == ('running "DynamicResources" filter plugin: claim default/c, request gpu: could not '
                               'retrieve device class nope: deviceclass.resource.k8s.io "nope" not found')
    assert await nodes_of(pods, ["w-0", "w-1"]) == [None, None]
