"""Workload-aware preemption over the in-process API server: a failed gang
evicts whole lower-priority `all` groups (never part of one), the fewest
and least important victims, single pods one by one; `Never` and equal
priority are respected; victims are marked DisruptionTarget, preemptors
are nominated, and a retry while the victims terminate waits on that
preemption instead of starting another."""

import asyncio

import pytest

from nanokube.scheduler.cache import NodeInfo
from nanokube.scheduler.framework import PodInfo
from nanokube.scheduler.plugins.workload_preemption import Plan, Unit, victim_units
from nanokube.scheduler.podgroups import PodGroupIndex
from tests.controllers import becomes, eventually
from tests.scheduler import at_priority, node, pod

HOLD = ["test/hold"]


async def add_node(client, n):
    nodes = client.resource("", "v1", "nodes")
    created = await nodes.create(n)
    await nodes.update({**created, "status": n["status"]}, subresource="status")


def podgroup(name, min_count=None, priority=0, mode="single", preemptionPolicy="PreemptLowerPriority", **spec):
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": policy, **at_priority(priority, preemptionPolicy),
                     "disruptionMode": {mode: {}}, **spec}}


def member(name, group, priority=0, cpu="1", on=None, preemptionPolicy="PreemptLowerPriority", **spec):
    p = pod(name, cpu, schedulingGroup={"podGroupName": group}, terminationGracePeriodSeconds=0,
            **at_priority(priority, preemptionPolicy), **({"nodeName": on} if on else {}), **spec)
    del p["metadata"]["uid"]
    if on:
        p["metadata"]["finalizers"] = list(HOLD)
    return p


def lone(name, priority, on, cpu="1"):
    p = pod(name, cpu, nodeName=on, terminationGracePeriodSeconds=0, **at_priority(priority))
    del p["metadata"]["uid"]
    p["metadata"]["finalizers"] = list(HOLD)
    return p


@pytest.fixture
async def env(stack):
    client, sched = stack

    async def start(nodes, groups, pods):
        for n in nodes:
            await add_node(client, n)
        for g in groups:
            await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(g)
        for p in pods:
            await client.resource("", "v1", "pods").create(p)
        await sched.start()
        return client.resource("", "v1", "pods")

    return client, sched, start


async def gang_of(client, name, size, priority, mode="single", **spec):
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(
        podgroup(name, size, priority, mode, **spec))
    for i in range(size):
        await client.resource("", "v1", "pods").create(member(f"{name}-{i}", name, priority))


async def doomed(pods):
    """Names of pods marked DisruptionTarget (at their generation) and being deleted."""
    out = set()
    for p in (await pods.list("default"))[0]:
        conds = [c for c in p["status"].get("conditions", []) if c["type"] == "DisruptionTarget"]
        if p["metadata"].get("deletionTimestamp") and conds:
            assert (conds[0]["reason"], conds[0]["observedGeneration"]) == ("PreemptionByScheduler", 1)
            out.add(p["metadata"]["name"])
    return out


async def release(pods, names):
    for n in names:
        p = await pods.get(n, "default")
        await pods.update({**p, "metadata": {**p["metadata"], "finalizers": []}})


async def test_gang_preempts_one_whole_all_group_not_pods_of_several(env):
    client, sched, start = env
    # two 2-CPU nodes; groups a and b each hold one CPU on both nodes
    pods = await start([node("n1", "2"), node("n2", "2")],
                       [podgroup("a", 2, 10, "all"), podgroup("b", 2, 10, "all")],
                       [member("a-0", "a", 10, on="n1"), member("a-1", "a", 10, on="n2"),
                        member("b-0", "b", 10, on="n1"), member("b-1", "b", 10, on="n2")])
    await gang_of(client, "hi", 2, 100)

    async def victims():
        got = await doomed(pods)
        return got if len(got) >= 2 else None
    got = await eventually(victims)
    assert got in ({"a-0", "a-1"}, {"b-0", "b-1"})
    group = next(iter(got))[0]
    pg = await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").get(group, "default")
    cond = next(c for c in pg["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")

    async def nominated():
        got = [(await pods.get(f"hi-{i}", "default"))["status"].get("nominatedNodeName") for i in range(2)]
        return got if all(got) else None
    assert sorted(await eventually(nominated)) == ["n1", "n2"]
    # the preemptor group's condition says a placement was found (upstream's AppendReason, kubernetes#140311)
    async def hi_condition():
        hi = await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").get("hi", "default")
        return next((c for c in (hi.get("status") or {}).get("conditions", [])
                     if c["type"] == "PodGroupInitiallyScheduled"), None)
    cond = await eventually(hi_condition)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
        "pod group preemption: found a placement for podgroup, preempting 2 victims")
    await release(pods, sorted(got))

    async def bound():
        got = [(await pods.get(f"hi-{i}", "default"))["spec"].get("nodeName") for i in range(2)]
        return got if all(got) else None
    assert sorted(await eventually(bound)) == ["n1", "n2"]
    assert await doomed(pods) == set()
    survivors = {p["metadata"]["name"] for p in (await pods.list("default"))[0]}
    assert survivors == {"hi-0", "hi-1"} | ({"a-0", "a-1", "b-0", "b-1"} - got)

    async def victims():  # the scheduler writes its Events from a queue
        events, _ = await client.resource("", "v1", "events").list("default")
        return {e["involvedObject"]["name"] for e in events if e["reason"] == "Preempted"}
    await becomes(victims, got)
    events, _ = await client.resource("", "v1", "events").list("default")
    preempted = [e for e in events if e["reason"] == "Preempted"]
    assert all("pod group default/hi" in e["message"] for e in preempted)
    assert {(e["related"]["kind"], e["related"]["apiVersion"], e["related"]["name"]) for e in preempted} == {
        ("PodGroup", "scheduling.k8s.io/v1beta1", "hi")}
    metric = sched.metrics.registry.get_sample_value
    # every PodGroupPostFilter run is counted (retries answering "ongoing" too), one chose victims
    assert metric("scheduler_workload_preemption_attempts_total", {"result": "Success"}) >= 1
    assert metric("scheduler_workload_preemption_victims_count") == 1
    assert metric("scheduler_workload_preemption_victims_sum") == 2  # pods
    assert metric("scheduler_preemption_workload_disruptions_sum", {"preemptor": "podgroup"}) == 1  # one unit
    group_attempt = {"profile": "default-scheduler", "type": "podgroup"}
    # its retries while the victims terminate wait on the same preemption
    assert metric("scheduler_podgroup_schedule_attempts_total", {"result": "waiting_on_preemption", **group_attempt}) >= 1
    assert metric("scheduler_podgroup_schedule_attempts_total", {"result": "scheduled", **group_attempt}) == 1
    assert metric("scheduler_podgroup_scheduling_attempt_duration_seconds_count",
                  {"result": "scheduled", **group_attempt}) == 1


async def test_a_lone_pod_preempting_a_member_of_an_all_group_evicts_the_whole_group(env):
    """KEP-5710's preemption unit holds for a lone preemptor too: a member of a `disruptionMode:
    all` group goes with its members on other nodes, which the node's candidate counts."""
    client, _sched, start = env
    pods = await start([node("n1", "2"), node("n2", "2")], [podgroup("a", 2, 10, "all")],
                       [member("a-0", "a", 10, cpu="2", on="n1"), member("a-1", "a", 10, on="n2"),
                        lone("mid", 50, "n2")])
    solo = pod("solo", "2", terminationGracePeriodSeconds=0, **at_priority(100))
    del solo["metadata"]["uid"]
    await pods.create(solo)

    async def victims():
        got = await doomed(pods)
        return got if len(got) >= 2 else None
    assert await eventually(victims) == {"a-0", "a-1"}
    pg = await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").get("a", "default")
    cond = next(c for c in pg["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")
    async def nominated():
        return (await pods.get("solo", "default"))["status"].get("nominatedNodeName")
    assert await eventually(nominated) == "n1"
    await release(pods, ["a-0", "a-1"])

    async def bound():
        return (await pods.get("solo", "default"))["spec"].get("nodeName")
    assert await eventually(bound) == "n1"
    assert "mid" not in await doomed(pods)


async def test_lowest_priority_unit_goes_and_single_mode_members_go_one_by_one(env):
    client, _sched, start = env
    # n1: two pods of a single-mode group (priority 5); n2: a lone pod (priority 1) and one of priority 50
    pods = await start([node("n1", "2"), node("n2", "2")], [podgroup("s", None, 5)],
                       [member("s-0", "s", 5, on="n1"), member("s-1", "s", 5, on="n1"),
                        lone("cheap", 1, "n2"), lone("dear", 50, "n2")])
    await gang_of(client, "hi", 2, 100)

    async def victims():
        got = await doomed(pods)
        return got if len(got) >= 2 else None
    # the cheap lone pod and one single-mode member are enough for two 1-CPU pods
    got = await eventually(victims)
    assert "cheap" in got and len(got & {"s-0", "s-1"}) == 1 and "dear" not in got


async def test_pdb_steers_the_choice_to_the_unguarded_group(env):
    client, _sched, start = env
    pdbs = client.resource("policy", "v1", "poddisruptionbudgets")
    pdb = await pdbs.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "guard", "namespace": "default"},
                             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}})
    await pdbs.update({**pdb, "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2,
                                         "expectedPods": 2, "observedGeneration": 1}}, subresource="status")
    guarded = [member(f"g-{i}", "g", 5, on=f"n{i + 1}") for i in range(2)]
    for p in guarded:
        p["metadata"]["labels"] = {"app": "guarded"}
    # without the PDB the guarded group would go first: its priority is the lower one
    pods = await start([node("n1", "2"), node("n2", "2")], [podgroup("g", 2, 5, "all"), podgroup("o", 2, 8, "all")],
                       guarded + [member("o-0", "o", 8, on="n1"), member("o-1", "o", 8, on="n2")])
    await gang_of(client, "hi", 2, 100)

    async def victims():
        got = await doomed(pods)
        return got if len(got) >= 2 else None
    assert await eventually(victims) == {"o-0", "o-1"}


async def test_topology_domains_pick_the_cheaper_rack(env):
    client, _sched, start = env
    rack = "nanokube.io/rack"
    nodes = [node(f"n{i}", "1", labels={rack: f"rack-{i // 2}"}) for i in range(4)]
    pods = await start(nodes, [], [lone("r0-a", 5, "n0"), lone("r0-b", 5, "n1"),
                                   lone("r1-a", 1, "n2"), lone("r1-b", 1, "n3")])
    await gang_of(client, "hi", 2, 100, schedulingConstraints={"topology": [{"key": rack}]})

    async def victims():
        got = await doomed(pods)
        return got if len(got) >= 2 else None
    assert await eventually(victims) == {"r1-a", "r1-b"}

    async def nominated():
        got = [(await pods.get(f"hi-{i}", "default"))["status"].get("nominatedNodeName") for i in range(2)]
        return got if all(got) else None
    assert sorted(await eventually(nominated)) == ["n2", "n3"]


async def test_preemption_policy_never_does_not_preempt(env):
    client, sched, start = env
    pods = await start([node("n1", "2")], [podgroup("low", 2, 1, "all")],
                       [member("low-0", "low", 1, on="n1"), member("low-1", "low", 1, on="n1")])
    await gang_of(client, "polite", 2, 100, preemptionPolicy="Never")

    async def failed():
        pg = await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").get("polite", "default")
        c = [c for c in (pg.get("status") or {}).get("conditions", []) if c["type"] == "PodGroupInitiallyScheduled"]
        return c and c[0]["status"] == "False" and c[0]
    cond = await eventually(failed)
    assert cond["message"] == ("minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
                               "pod group preemption: not eligible due to preemptionPolicy=Never.")
    # polite-1, never tried (the attempt stopped at polite-0), has the group's message without the verdict
    p = await pods.get("polite-1", "default")
    [scheduled] = [c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert scheduled["message"] == "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    assert await doomed(pods) == set()
    metric = sched.metrics.registry.get_sample_value
    assert metric("scheduler_workload_preemption_attempts_total", {"result": "Unschedulable"}) >= 1
    assert metric("scheduler_workload_preemption_victims_count") == 0
    assert metric("scheduler_podgroup_schedule_attempts_total",
                  {"result": "unschedulable", "profile": "default-scheduler", "type": "podgroup"}) >= 1


async def test_equal_priority_and_hopeless_groups_preempt_nothing(env):
    client, _sched, start = env
    pods = await start([node("n1", "2")], [podgroup("peer", 2, 100, "all")],
                       [member("peer-0", "peer", 100, on="n1"), member("peer-1", "peer", 100, on="n1")])
    await gang_of(client, "same", 2, 100)
    await gang_of(client, "huge", 3, 1000)

    groups = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")

    async def both_failed():
        out = []
        for n in ("same", "huge"):
            c = [c for c in ((await groups.get(n, "default")).get("status") or {}).get("conditions", [])
                 if c["type"] == "PodGroupInitiallyScheduled"]
            out.append(c and c[0]["status"] == "False" and c[0]["message"])
        return out if all(out) else None
    same, huge = await eventually(both_failed)
    # as upstream: nothing of lower priority to remove, or the group's failure with all of it removed
    assert same == ("minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
                    "pod group preemption: No preemption victims found for incoming preemptor")
    assert huge == ("minCount (3) cannot be satisfied: 0 scheduled, 2 remaining, "
                    "pod group preemption: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining")
    assert await doomed(pods) == set()


async def test_two_gangs_preempting_at_once_each_get_their_own_victims(env):
    client, sched, start = env
    pods = await start([node("n1", "2"), node("n2", "2")],
                       [podgroup("a", 2, 10, "all"), podgroup("b", 2, 10, "all")],
                       [member("a-0", "a", 10, on="n1"), member("a-1", "a", 10, on="n2"),
                        member("b-0", "b", 10, on="n1"), member("b-1", "b", 10, on="n2")])
    await gang_of(client, "h1", 2, 100)
    await gang_of(client, "h2", 2, 100)

    async def victims():
        got = await doomed(pods)
        return got if len(got) == 4 else None
    await eventually(victims)
    held = sched.workload_cycle.nominated
    assert set(held) == {"default/h1", "default/h2"}
    per_node = {}
    for noms in held.values():
        for _, n in noms:
            per_node[n] = per_node.get(n, 0) + 1
    assert per_node == {"n1": 2, "n2": 2}
    await release(pods, ["a-0", "a-1", "b-0", "b-1"])

    async def bound():
        got = [(await pods.get(f"{g}-{i}", "default"))["spec"].get("nodeName") for g in ("h1", "h2") for i in range(2)]
        return got if all(got) else None
    assert sorted(await eventually(bound)) == ["n1", "n1", "n2", "n2"]
    assert sched.workload_cycle.nominated == {}


ONGOING = "minCount (3) cannot be satisfied: {}, pod group preemption: ongoing preemption on nominated nodes"
#: n1 full of group low (its pods slow to go: a finalizer); n2 one CPU free beside a pod no gang
#: may evict; n3 full of lone low pods, which would make room too but cost more than low
CLUSTER = [node("n1", "2"), node("n2", "2"), node("n3", "2")]
OCCUPANTS = [member("low-0", "low", 1, on="n1"), member("low-1", "low", 1, on="n1"), lone("busy", 1000, "n2"),
             lone("spare-0", 1, "n3"), lone("spare-1", 1, "n3")]
GANG = ["hi-0", "hi-1", "hi-2"]


async def _nominated(pods):
    """The gang's nominations once every member has one."""
    got = {n: (await pods.get(n, "default"))["status"].get("nominatedNodeName") for n in GANG}
    return got if all(got.values()) else None


async def _waiting_on_ongoing(client, pods, nominated, counts):
    """The gang's retry, its victims still terminating, said it waits on them (upstream's
    kubernetes#140641) in the group's condition and in the condition and FailedScheduling event of
    the member that fitted; every member kept its nomination."""
    async def said():
        hi = await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").get("hi", "default")
        cond = next((c for c in (hi.get("status") or {}).get("conditions", [])
                     if c["type"] == "PodGroupInitiallyScheduled"), {})
        if cond.get("message") != ONGOING.format(counts):
            return False
        events, _ = await client.resource("events.k8s.io", "v1", "events").list("default")
        return {e["regarding"]["name"] for e in events
                if e["reason"] == "FailedScheduling" and e["note"] == ONGOING.format(counts)}
    told = await eventually(said)

    async def condition():
        got = await pods.get(next(iter(told)), "default")
        cond = next(c for c in got["status"]["conditions"] if c["type"] == "PodScheduled")
        return (cond["status"], cond["reason"], cond["message"], cond.get("observedGeneration")) == (
            "False", "Unschedulable", ONGOING.format(counts), 1)
    await eventually(condition)
    assert await _nominated(pods) == nominated


async def test_a_retry_while_the_victims_terminate_waits_on_the_ongoing_preemption(env):
    client, sched, start = env
    pods = await start(CLUSTER, [podgroup("low", 2, 1, "all")], OCCUPANTS)
    await gang_of(client, "hi", 3, 100)
    await eventually(lambda: _len2(doomed(pods)))
    assert await doomed(pods) == {"low-0", "low-1"}
    nominated = await eventually(lambda: _nominated(pods))
    # a node with room for one member: the group is tried again while low's pods terminate,
    # and still does not fit
    await add_node(client, node("n4", "1"))
    await _waiting_on_ongoing(client, pods, nominated, "2 scheduled, 0 remaining")
    assert await doomed(pods) == {"low-0", "low-1"}
    metric = sched.metrics.registry.get_sample_value
    assert metric("scheduler_workload_preemption_victims_count") == 1  # one preemption, however many tries
    await release(pods, ["low-0", "low-1"])

    async def bound():
        got = {n: (await pods.get(n, "default"))["spec"].get("nodeName") for n in GANG}
        return got if all(got.values()) else None
    await eventually(bound)
    assert {p["metadata"]["name"] for p in (await pods.list("default"))[0]} == {*GANG, "busy", "spare-0", "spare-1"}


async def test_a_restarted_scheduler_sees_the_ongoing_preemption_in_the_api(schedulers):
    """A scheduler that did not make the preemption knows it only from the API: the
    members' nominatedNodeName and the victims terminating there, marked DisruptionTarget."""
    client, start = schedulers
    await client.resource("scheduling.k8s.io", "v1beta1", "podgroups").create(podgroup("low", 2, 1, "all"))
    pods = client.resource("", "v1", "pods")
    for p in OCCUPANTS:
        await pods.create(p)
    first = await start(*CLUSTER)
    await gang_of(client, "hi", 3, 100)
    await eventually(lambda: _len2(doomed(pods)))
    nominated = await eventually(lambda: _nominated(pods))
    await first.stop()
    second = await start()
    await _waiting_on_ongoing(client, pods, nominated, "1 scheduled, 1 remaining")
    assert await doomed(pods) == {"low-0", "low-1"}
    metric = second.metrics.registry.get_sample_value
    assert metric("scheduler_workload_preemption_attempts_total", {"result": "Success"}) >= 1
    assert not metric("scheduler_workload_preemption_victims_count")


async def _len2(coro):
    return len(await coro) == 2


# --- pure pieces -------------------------------------------------------------


def _pi(name, priority, group=None, start="2026-01-01T00:00:00Z"):
    p = pod(name, "1", priority=priority, **({"schedulingGroup": {"podGroupName": group}} if group else {}))
    p["status"] = {"startTime": start}
    return PodInfo(p, 0.0)


def _node(name, *pods):
    ni = NodeInfo(name)
    ni.set_node(node(name, "8"))
    for p in pods:
        ni.add_pod(p)
    return ni


def test_victim_units_group_all_mode_pods_across_nodes_and_skip_own_and_higher():
    groups = PodGroupIndex()
    groups.set_group(podgroup("whole", 2, 5, "all"))
    groups.set_group(podgroup("each", 2, 5, "single"))
    groups.set_group(podgroup("mine", 2, 9, "single"))
    n1 = _node("n1", _pi("w0", 5, "whole"), _pi("e0", 5, "each"), _pi("m0", 9, "mine"), _pi("big", 50))
    n2 = _node("n2", _pi("w1", 5, "whole"), _pi("e1", 5, "each"))
    units = victim_units([n1], [n1, n2], 10, "default/mine", groups)
    by = {tuple(sorted(p.pod["metadata"]["name"] for p in u.pods)): u for u in units}
    assert set(by) == {("w0", "w1"), ("e0",)}
    assert by[("w0", "w1")].group == "default/whole" and by[("e0",)].group == ""


def test_units_order_groups_before_pods_at_equal_priority_and_plans_cost_like_upstream():
    g = Unit([_pi("g", 5)], 5, "default/g", "2026-01-02T00:00:00Z")
    p = Unit([_pi("p", 5)], 5, "", "2026-01-01T00:00:00Z")
    hi = Unit([_pi("h", 7)], 7, "", "2026-01-03T00:00:00Z")
    assert sorted([p, g, hi], key=Unit.importance) == [hi, g, p]
    one_group = Plan([Unit([_pi("a", 3), _pi("b", 3)], 3, "default/x")])
    two_pods = Plan([Unit([_pi("c", 3)], 3), Unit([_pi("d", 4)], 4)])
    assert min([two_pods, one_group], key=Plan.cost) is one_group
    assert min([Plan([hi], pdb_violations=0), Plan([p], pdb_violations=1)], key=Plan.cost).victims == [hi]
    # at equal priority, fewer groups before fewer pods
    assert min([two_units := Plan([Unit([_pi("e", 3)], 3), Unit([_pi("f", 3)], 3)]),
                Plan([Unit([_pi("i", 3), _pi("j", 3), _pi("k", 3)], 3, "default/y")])], key=Plan.cost) is not two_units


def test_a_post_filter_without_pod_group_post_filter_is_logged_at_start(caplog):
    from types import SimpleNamespace

    from nanokube.scheduler.workload_cycle import check_post_filters

    class PodOnly:
        def post_filter(self, state, info, statuses):
            return None, None

    class Both(PodOnly):
        def pod_group_post_filter(self, group):
            return None, None

    frameworks = {"default-scheduler": SimpleNamespace(plugins={"PodOnly": PodOnly(), "Both": Both()})}
    with caplog.at_level("ERROR"):
        check_post_filters(frameworks)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "plugin PodOnly implements PostFilter but not PodGroupPostFilter"]


async def test_a_nominated_group_whose_pods_are_deleted_holds_nothing(env):
    client, sched, start = env
    pods = await start([node("n1", "2")], [podgroup("low", 2, 1, "all")],
                       [member("low-0", "low", 1, on="n1"), member("low-1", "low", 1, on="n1")])
    await gang_of(client, "hi", 2, 100)
    await eventually(lambda: _len2(doomed(pods)))
    assert [n for _, n in sched.workload_cycle.nominated["default/hi"]] == ["n1", "n1"]
    for i in range(2):
        await pods.delete(f"hi-{i}", "default")
    await release(pods, ["low-0", "low-1"])
    await gang_of(client, "mid", 2, 50)

    async def bound():
        got = [(await pods.get(f"mid-{i}", "default"))["spec"].get("nodeName") for i in range(2)]
        return got if all(got) else None
    assert await eventually(bound) == ["n1", "n1"]
    assert "default/hi" not in sched.workload_cycle.nominated


def test_pod_group_post_filter_point_runs_in_order_until_one_succeeds():
    from nanokube.scheduler.framework import Code, Framework, Profile, Status, unschedulable
    from nanokube.scheduler.metrics import Metrics
    from tests.scheduler import FakeClock

    calls = []

    class Sort:
        name = "Sort"

        def sort_key(self, info):
            return 0

    class No:
        name = "No"

        def post_filter(self, state, info, statuses):
            return None, None

        def pod_group_post_filter(self, group):
            calls.append(self.name)
            return None, unschedulable("no room")

    class Yes(No):
        name = "Yes"

        def pod_group_post_filter(self, group):
            calls.append(self.name)
            return {"u1": "n1"}, Status(Code.SUCCESS)

    class After(No):
        name = "After"

    fwk = Framework(Profile(), [Sort(), No(), Yes(), After()], Metrics(), FakeClock())
    assert fwk.run_pod_group_post_filter(None) == ({"u1": "n1"}, None)
    assert calls == ["No", "Yes"]
    nominated, st = Framework(Profile(), [Sort(), No(), After()], Metrics(), FakeClock()).run_pod_group_post_filter(None)
    assert nominated is None and (st.code, st.reasons) == (Code.UNSCHEDULABLE, ["no room", "no room"])
    configured = Profile(points={"sort_key": ["Sort"], "post_filter": ["After", "Yes"]})
    fwk = Framework(configured, [Sort(), No(), Yes(), After()], Metrics(), FakeClock())
    assert [p.name for p in fwk.points["pod_group_post_filter"]] == ["After", "Yes"]
    assert Framework(Profile(), [Sort()], Metrics(), FakeClock()).run_pod_group_post_filter(None) == (None, None)


async def test_partial_success_of_a_running_gang_preempts_before_binding(env):
    client, sched, start = env
    # n1 (3 CPUs): hi-0 of the gang and a low lone pod run; one CPU is free for the two new members
    pods = await start([node("n1", "3")], [podgroup("hi", 2, 100)],
                       [member("hi-0", "hi", 100, on="n1"), lone("low", 1, "n1"),
                        member("hi-1", "hi", 100), member("hi-2", "hi", 100)])

    async def victims():
        return await doomed(pods) or None
    assert await eventually(victims) == {"low"}

    async def nominated():
        got = [(await pods.get(f"hi-{i}", "default"))["status"].get("nominatedNodeName") for i in (1, 2)]
        return got if all(got) else None
    assert await eventually(nominated) == ["n1", "n1"]
    assert [(await pods.get(f"hi-{i}", "default"))["spec"].get("nodeName") for i in (1, 2)] == [None, None]
    await release(pods, ["low"])

    async def bound():
        got = [(await pods.get(f"hi-{i}", "default"))["spec"].get("nodeName") for i in (1, 2)]
        return got if all(got) else None
    assert await eventually(bound) == ["n1", "n1"]
    assert sched.metrics.registry.get_sample_value(
        "scheduler_podgroup_schedule_attempts_total",
        {"result": "waiting_on_preemption", "profile": "default-scheduler", "type": "podgroup"}) == 1


async def test_a_nomination_goes_out_with_the_failure_once_the_victims_are_evicted(env):
    """The preemptor's nominatedNodeName arrives in the same status write as
    its PodScheduled=False (as upstream's updatePod writes both), only after
    its victim is marked and deleted, and before its binding: a report
    landing after the binding would leave the bound pod PodScheduled=False."""
    client, _sched, start = env
    victim = member("a-0", "a", 10, on="n1")
    del victim["metadata"]["finalizers"]
    pods = await start([node("n1", "1")], [podgroup("a", 1, 10, "all")], [victim])
    seen: list[tuple[str, str, dict]] = []

    async def follow(stream):
        async for typ, obj in stream:
            seen.append((typ, obj["metadata"]["name"], obj))
    follower = asyncio.create_task(follow(await pods.watch("default")))
    events = client.resource("events.k8s.io", "v1", "events")

    async def settled():
        """hi-0 bound and its Scheduled event recorded: every write of both cycles has landed."""
        got = await pods.get("hi-0", "default")
        reasons = {e["reason"] for e in (await events.list("default"))[0] if e["regarding"]["name"] == "hi-0"}
        return got["spec"].get("nodeName") and "Scheduled" in reasons
    try:
        await gang_of(client, "hi", 1, 100)
        await eventually(settled)
    finally:
        follower.cancel()

    def scheduled(obj):
        return next((c for c in obj["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)
    mine = [(i, obj) for i, (_, name, obj) in enumerate(seen) if name == "hi-0"]
    at, first = next((i, obj) for i, obj in mine if scheduled(obj) or obj["status"].get("nominatedNodeName"))
    assert first["status"].get("nominatedNodeName") == "n1"
    assert (scheduled(first)["status"], scheduled(first)["reason"]) == ("False", "Unschedulable")
    gone = next(i for i, (typ, name, _) in enumerate(seen) if (typ, name) == ("DELETED", "a-0"))
    assert gone < at
    last = mine[-1][1]
    assert last["spec"]["nodeName"] == "n1" and scheduled(last)["status"] == "True"


async def test_partial_success_of_a_basic_group_binds_without_preempting(env):
    _client, _sched, start = env
    pods = await start([node("n1", "3")], [podgroup("b", None, 100)],
                       [member("b-0", "b", 100, on="n1"), lone("low", 1, "n1"),
                        member("b-1", "b", 100), member("b-2", "b", 100)])

    async def one_bound():
        got = [(await pods.get(f"b-{i}", "default"))["spec"].get("nodeName") for i in (1, 2)]
        return got if any(got) else None
    assert sorted(await eventually(one_bound), key=str) == [None, "n1"]
    # bound in the same cycle, with no preemption first (the leftover pod may preempt after its backoff)
    assert await doomed(pods) == set()


async def test_a_placement_other_than_the_first_evicts_fewer_groups(env):
    """Two full 2-CPU nodes: group a (running longest, so reprieved first)
    holds a CPU on each, b and c one CPU each. Upstream's single placement
    (everything removed, then the greedy reprieve keeps a) evicts b and c;
    the candidate that removes a alone evicts one group."""
    client, sched, start = env
    pods = await start([node("n1", "2"), node("n2", "2")],
                       [podgroup("a", 2, 10, "all"), podgroup("b", 1, 10, "all"), podgroup("c", 1, 10, "all")],
                       [member("a-0", "a", 10, on="n1"), member("a-1", "a", 10, on="n2"),
                        member("b-0", "b", 10, on="n1"), member("c-0", "c", 10, on="n2")])
    await gang_of(client, "hi", 2, 100)

    async def nominated():
        got = [(await pods.get(f"hi-{i}", "default"))["status"].get("nominatedNodeName") for i in range(2)]
        return got if all(got) else None
    assert sorted(await eventually(nominated)) == ["n1", "n2"]
    assert await doomed(pods) == {"a-0", "a-1"}
    metric = sched.metrics.registry.get_sample_value
    assert metric("scheduler_preemption_workload_disruptions_sum", {"preemptor": "podgroup"}) == 1
