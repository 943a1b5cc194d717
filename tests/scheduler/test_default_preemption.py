"""DefaultPreemption over the in-process API server: a higher-priority pod
evicts the cheapest victims, marked DisruptionTarget, and lands on the
nominated node; Never, equal priority and PDBs are respected."""

import pytest

from nanokube.scheduler.framework import Code, CycleState, NodeToStatus, Status
from nanokube.scheduler.plugins.default_preemption import Candidate, pick_one, split_by_pdb
from tests.controllers import becomes, eventually
from tests.scheduler import at_priority, info, node, pod


async def add_node(client, n):
    nodes = client.resource("", "v1", "nodes")
    created = await nodes.create(n)
    await nodes.update({**created, "status": n["status"]}, subresource="status")


def running(name, on, priority, cpu="1", labels=None, finalizers=None):
    p = pod(name, cpu, nodeName=on, terminationGracePeriodSeconds=0, **at_priority(priority))
    del p["metadata"]["uid"]
    p["metadata"]["labels"] = labels or {}
    if finalizers:
        p["metadata"]["finalizers"] = finalizers
    return p


def pending(name, priority, cpu="1", preemptionPolicy="PreemptLowerPriority", **spec):
    p = pod(name, cpu, **at_priority(priority, preemptionPolicy), **spec)
    del p["metadata"]["uid"]
    return p


async def start(client, sched, nodes, pods):
    for n in nodes:
        await add_node(client, n)
    for p in pods:
        await client.resource("", "v1", "pods").create(p)
    await sched.start()


async def scheduled_condition(pods, name):
    async def check():
        c = [c for c in (await pods.get(name, "default")).get("status", {}).get("conditions", [])
             if c["type"] == "PodScheduled"]
        return c and c[0]["status"] == "False" and c[0]
    return await eventually(check)


async def test_high_priority_pod_preempts_lowest_victim_then_schedules_there(stack):
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "2", "8Gi")],
                [running("low", "n1", 1, finalizers=["test/hold"]), running("mid", "n1", 5)])
    await pods.create(pending("high", 10))

    async def marked():
        p = await pods.get("low", "default")
        conds = [c for c in p["status"].get("conditions", []) if c["type"] == "DisruptionTarget"]
        return p["metadata"].get("deletionTimestamp") and conds and conds[0]
    cond = await eventually(marked)
    assert cond["status"] == "True" and cond["reason"] == "PreemptionByScheduler"
    assert cond["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    assert cond["observedGeneration"] == 1  # the victim's generation, as upstream's executor writes it

    async def nominated():
        return (await pods.get("high", "default")).get("status", {}).get("nominatedNodeName")
    assert await eventually(nominated) == "n1"
    assert not (await pods.get("mid", "default"))["metadata"].get("deletionTimestamp")

    low = await pods.get("low", "default")
    await pods.update({**low, "metadata": {**low["metadata"], "finalizers": []}})

    async def bound():
        return (await pods.get("high", "default"))["spec"].get("nodeName")
    assert await eventually(bound) == "n1"
    names = {p["metadata"]["name"] for p in (await pods.list("default"))[0]}
    assert names == {"mid", "high"}

    async def preempted_events():  # the broadcaster writes them from its queue
        return [e for e in (await client.resource("", "v1", "events").list("default"))[0] if e["reason"] == "Preempted"]
    [preempted] = await eventually(preempted_events)
    assert preempted["message"].endswith("on node n1")
    high = await pods.get("high", "default")
    # the preemptor is the Event's related object, as upstream's Eventf(victim, preemptor, ...)
    assert (preempted["related"]["kind"], preempted["related"]["name"], preempted["related"]["uid"]) == (
        "Pod", "high", high["metadata"]["uid"])


async def test_preemptor_waiting_for_its_victims_says_where_it_will_go(stack):
    """Until the victims are gone the preemptor's PodScheduled condition (and
    FailedScheduling event) names the node and the victim count, as upstream's
    DefaultPreemption success message (kubernetes#140180)."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "2", "8Gi")],
                [running("a", "n1", 1, finalizers=["test/hold"]), running("b", "n1", 1, finalizers=["test/hold"])])
    await pods.create(pending("big", 10, cpu="2"))
    cond = await scheduled_condition(pods, "big")
    assert cond["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                               "preemption: found a potential placement for pod on node n1, preempting 2 victims")

    async def failures():  # the scheduler writes its Events from a queue, maybe after the condition
        events, _ = await client.resource("", "v1", "events").list("default")
        return [e["message"] for e in events if e["reason"] == "FailedScheduling"]
    await becomes(failures, [cond["message"]])


async def nominated_to(pods, name, priority, node_name, cpu):
    """A pending pod already nominated to `node_name` (held by a gate while its status is written)."""
    await pods.create(pending(name, priority, cpu=cpu, schedulingGates=[{"name": "test/hold"}]))
    await pods.patch(name, {"status": {"nominatedNodeName": node_name}}, namespace="default", subresource="status")
    p = await pods.get(name, "default")
    await pods.update({**p, "spec": {**p["spec"], "schedulingGates": []}})


async def terminating_by_preemption(pods, name):
    """`name` as an earlier preemption left it: DisruptionTarget PreemptionByScheduler, deleted
    (its finalizer keeps it terminating)."""
    await pods.patch(name, {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}},
        namespace="default", subresource="status")
    await pods.delete(name, "default")


async def test_a_pod_deleted_by_its_user_on_the_nominated_node_does_not_hold_preemption_back(stack):
    """Upstream's PodEligibleToPreemptOthers waits only for pods terminating by preemption
    (DisruptionTarget PreemptionByScheduler): one its user deleted is not an earlier victim."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "2", "8Gi")],
                [running("leaving", "n1", 1, finalizers=["test/hold"]),
                 running("staying", "n1", 1, finalizers=["test/hold"])])
    await pods.delete("leaving", "default")
    await nominated_to(pods, "big", 10, "n1", "2")

    async def marked():
        p = await pods.get("staying", "default")
        return p["metadata"].get("deletionTimestamp") and any(
            c["type"] == "DisruptionTarget" for c in p["status"].get("conditions", []))
    assert await eventually(marked)


async def test_a_victim_already_terminating_is_not_evicted_again(stack):
    """A victim with a deletionTimestamp still frees its room for the preemptor, but upstream's
    executor skips it: no DisruptionTarget, no second delete, no Preempted event."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    # "leaving" outranks "staying": a victim list runs most important first, so its Event would come first
    await start(client, sched, [node("n1", "2", "8Gi")],
                [running("leaving", "n1", 2, finalizers=["test/hold"]),
                 running("staying", "n1", 1, finalizers=["test/hold"])])
    await pods.delete("leaving", "default")
    await pods.create(pending("big", 10, cpu="2"))

    async def preempted():
        events, _ = await client.resource("", "v1", "events").list("default")
        return sorted(e["involvedObject"]["name"] for e in events if e["reason"] == "Preempted")
    await becomes(preempted, ["staying"])
    leaving = await pods.get("leaving", "default")
    assert not [c for c in leaving["status"].get("conditions", []) if c["type"] == "DisruptionTarget"]
    assert (await pods.get("big", "default"))["status"].get("nominatedNodeName") == "n1"


async def test_a_victim_terminating_on_the_nominated_node_holds_preemption_back(stack):
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    victim = running("victim", "n1", 1, finalizers=["test/hold"])
    await start(client, sched, [node("n1", "2", "8Gi")], [victim, running("staying", "n1", 1)])
    await terminating_by_preemption(pods, "victim")
    await nominated_to(pods, "big", 10, "n1", "2")

    async def judged():
        c = [c for c in (await pods.get("big", "default"))["status"].get("conditions", []) if c["type"] == "PodScheduled"]
        return c and c[0].get("reason") == "Unschedulable" and c[0]["message"]
    assert await eventually(judged) == ("0/1 nodes are available: 1 Insufficient cpu. "
                                        "preemption: not eligible due to a terminating pod on the nominated node.")
    assert not (await pods.get("staying", "default"))["metadata"].get("deletionTimestamp")


async def test_a_nominated_node_that_can_no_longer_take_the_pod_does_not_hold_preemption_back(stack):
    """Its earlier victims still terminate on n1, but n1 now has a taint the pod does not
    tolerate (UnschedulableAndUnresolvable there): the pod may preempt elsewhere."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    await start(client, sched, [node("n1", "2", "8Gi", taints=taint), node("n2", "2", "8Gi")],
                [running("victim", "n1", 1, finalizers=["test/hold"]),
                 running("other", "n2", 1, finalizers=["test/hold"]), running("more", "n2", 1, finalizers=["test/hold"])])
    await terminating_by_preemption(pods, "victim")
    await nominated_to(pods, "big", 10, "n1", "2")

    async def nominated_elsewhere():
        return (await pods.get("big", "default"))["status"].get("nominatedNodeName") == "n2"
    assert await eventually(nominated_elsewhere)

    async def doomed():
        return {p["metadata"]["name"] for p in (await pods.list("default"))[0]
                if p["metadata"].get("deletionTimestamp")} == {"victim", "other", "more"}
    assert await eventually(doomed)


async def test_preemption_policy_never_does_not_preempt(stack):
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "1", "8Gi")], [running("low", "n1", 1)])
    await pods.create(pending("polite", 10, preemptionPolicy="Never"))
    cond = await scheduled_condition(pods, "polite")
    assert cond["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                               "preemption: not eligible due to preemptionPolicy=Never.")
    assert not (await pods.get("low", "default"))["metadata"].get("deletionTimestamp")


async def test_equal_priority_is_not_preempted(stack):
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "1", "8Gi")], [running("peer", "n1", 5)])
    await pods.create(pending("same", 5))
    cond = await scheduled_condition(pods, "same")
    assert cond["message"].endswith(
        " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    assert not (await pods.get("peer", "default"))["metadata"].get("deletionTimestamp")
    assert not (await pods.get("same", "default")).get("status", {}).get("nominatedNodeName")


async def test_a_lower_priority_pod_seen_after_a_failed_attempt_is_preempted(stack):
    """With no pod of lower priority anywhere the search finds no victim on any node without
    looking; one bound later (and its node) makes preemption possible again."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "1", "8Gi")], [running("peer", "n1", 5)])
    await pods.create(pending("same", 5))
    cond = await scheduled_condition(pods, "same")
    assert cond["message"].endswith(" 1 No preemption victims found for incoming pod.")
    await pods.create(running("late", "n2", 1, finalizers=["test/hold"]))
    await add_node(client, node("n2", "1", "8Gi"))

    async def marked():
        return (await pods.get("late", "default"))["metadata"].get("deletionTimestamp")
    assert await eventually(marked)
    assert not (await pods.get("peer", "default"))["metadata"].get("deletionTimestamp")


async def test_pdb_steers_victim_choice_to_another_node(stack):
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    pdbs = client.resource("policy", "v1", "poddisruptionbudgets")
    pdb = await pdbs.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "guard", "namespace": "default"},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    await pdbs.update({**pdb, "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                                         "expectedPods": 1, "observedGeneration": 1}}, subresource="status")
    # without the PDB, n1 would win: its victim has the lower priority
    await start(client, sched, [node("n1", "1", "8Gi"), node("n2", "1", "8Gi")],
                [running("guarded", "n1", 1, labels={"app": "guarded"}), running("plain", "n2", 2)])
    await pods.create(pending("high", 10))

    async def bound():
        return (await pods.get("high", "default"))["spec"].get("nodeName")
    assert await eventually(bound) == "n2"
    assert not (await pods.get("guarded", "default"))["metadata"].get("deletionTimestamp")


def _victim(name, priority, start="2026-01-01T00:00:00Z", labels=None):
    p = pod(name, "1", priority=priority)
    p["metadata"]["labels"] = labels or {}
    p["status"] = {"startTime": start}
    return info(p)


@pytest.mark.parametrize("cands,want", [
    ([Candidate("a", [_victim("x", 1)], 1), Candidate("b", [_victim("y", 9)], 0)], "b"),
    ([Candidate("a", [_victim("x", 5)], 0), Candidate("b", [_victim("y", 3)], 0)], "b"),
    ([Candidate("a", [_victim("x", 3), _victim("z", 2)], 0), Candidate("b", [_victim("y", 3), _victim("w", 1)], 0)], "b"),
    ([Candidate("a", [_victim("x", 3), _victim("z", 0), _victim("v", 0)], 0),
      Candidate("b", [_victim("y", 3), _victim("w", 0)], 0)], "b"),
    ([Candidate("a", [_victim("x", 3, "2026-01-01T00:00:00Z")], 0),
      Candidate("b", [_victim("y", 3, "2026-01-02T00:00:00Z")], 0)], "b"),
])
def test_pick_one_follows_upstream_order(cands, want):
    assert pick_one(cands).node == want


def test_split_by_pdb_uses_up_allowed_disruptions_in_order():
    from nanokube.machinery.selectors import selector_from_object
    sel = selector_from_object({"matchLabels": {"app": "db"}})
    pods = [_victim("a", 1, labels={"app": "db"}), _victim("b", 1, labels={"app": "db"}),
            _victim("c", 1, labels={"app": "web"})]
    violating, fine = split_by_pdb(pods, [("default", sel, 1, set())])
    assert [p.pod["metadata"]["name"] for p in violating] == ["b"]
    assert [p.pod["metadata"]["name"] for p in fine] == ["a", "c"]


async def test_a_nominated_pod_goes_to_its_nominated_node_when_it_fits_there(stack):
    """Upstream's evaluateNominatedNode: the node named in status.nominatedNodeName
    (where a preemption made room) is tried first and taken without scoring,
    though the emptier node would score higher."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "4", "8Gi"), node("n2", "4", "8Gi")], [running("busy", "n2", 0, cpu="3")])
    created = await pods.create(pending("p", 10, schedulingGates=[{"name": "test/hold"}]))
    await pods.update({**created, "status": {**created.get("status", {}), "nominatedNodeName": "n2"}},
                      subresource="status")
    p = await pods.get("p", "default")
    await pods.update({**p, "spec": {**p["spec"], "schedulingGates": []}})

    async def bound():
        return (await pods.get("p", "default"))["spec"].get("nodeName")
    assert await eventually(bound) == "n2"


async def test_a_pod_among_equals_is_told_per_reason_without_a_visit_per_node(stack):
    """With no pod of lower priority anywhere, PostFilter only counts how many nodes are past helping
    (UnschedulableAndUnresolvable: the tainted ones) and how many have no victim: it reads no node's
    status one by one (it did, for each attempt of a pod that fits nowhere, on every node)."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    await start(client, sched, [node("n1", "1", "8Gi"), node("t1", "8", "8Gi", taints=taint),
                                node("t2", "8", "8Gi", taints=taint)], [running("peer", "n1", 5)])
    await pods.create(pending("same", 5))
    cond = await scheduled_condition(pods, "same")
    assert cond["message"] == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling.")

    class Counted(NodeToStatus):
        reads = 0

        def get(self, name, default=None):
            Counted.reads += 1
            return super().get(name, default)
    plugin = sched.frameworks["default-scheduler"].plugins["DefaultPreemption"]
    hopeless = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["tainted"])
    statuses = Counted({"n1": Status(Code.UNSCHEDULABLE, ["Insufficient cpu"])}, absent=hopeless, num_absent=2)
    _, st = plugin.post_filter(CycleState(), info(pending("same", 5)), statuses)
    assert st.message() == ("preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
                            "2 Preemption is not helpful for scheduling.")
    assert Counted.reads <= 1  # the nominated node's, where the pod has one
