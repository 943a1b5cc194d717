"""What the scheduler tells the queue when nodes and pods change, and how
the framework reports PostFilter verdicts."""

import copy

from nanokube.scheduler.framework import (
    ASSIGNED_POD,
    NODE,
    Action,
    ClusterEvent,
    Code,
    CycleState,
    Framework,
    Profile,
    Status,
)
from nanokube.scheduler.metrics import Metrics
from nanokube.scheduler.plugins.default_preemption import DefaultPreemption
from nanokube.scheduler.scheduler import node_update_events, pod_update_events
from tests.scheduler import FakeClock, info, node, pod
from tests.scheduler.test_queue import make_queue


def labels_of(events):
    return [(e.resource, e.action, e.label) for e in events]


def test_a_heartbeat_is_no_node_event():
    old = node("n")
    old["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]
    new = copy.deepcopy(old)
    new["status"]["conditions"][0].update(lastHeartbeatTime="2026-01-01T00:00:40Z", message="kubelet is posting")
    assert node_update_events(old, new) == []
    new["status"]["conditions"][0]["status"] = "False"
    assert labels_of(node_update_events(old, new)) == [(NODE, Action.UPDATE_NODE_CONDITION, "NodeConditionChange")]


def test_node_update_is_split_by_what_changed():
    old = node("n", "4", taints=[{"key": "k", "effect": "NoSchedule"}])
    new = node("n", "8", labels={"zone": "a"}, unschedulable=True)
    changes = [
        (NODE, Action.UPDATE_NODE_ALLOCATABLE, "NodeAllocatableChange"),
        (NODE, Action.UPDATE_NODE_LABEL, "NodeLabelChange"),
        (NODE, Action.UPDATE_NODE_TAINT, "NodeTaintChange"),
    ]
    assert labels_of(node_update_events(old, new)) == changes
    # an uncordon may let pods in; a cordon cannot (upstream's nodeSpecUnschedulableChanged)
    assert labels_of(node_update_events(new, old)) == [
        (NODE, Action.UPDATE_NODE_TAINT, "NodeSpecUnschedulableChange"), *changes]
    assert node_update_events(node("n"), node("n", unschedulable=True)) == []


def test_pod_update_names_each_change_or_other():
    old = pod("p", "2", "1Gi")
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"app": "web"}
    shrunk = pod("p", "1", "1Gi")
    grown = pod("p", "3", "1Gi")
    assert labels_of(pod_update_events(ASSIGNED_POD, old, relabelled)) == [
        (ASSIGNED_POD, Action.UPDATE_POD_LABEL, "PodLabelChange")]
    assert labels_of(pod_update_events(ASSIGNED_POD, old, shrunk)) == [
        (ASSIGNED_POD, Action.UPDATE_POD_SCALE_DOWN, "PodRequestScaledDown")]
    assert labels_of(pod_update_events(ASSIGNED_POD, old, grown)) == [
        (ASSIGNED_POD, Action.UPDATE_POD_OTHER, "PodUpdate")]
    assert pod_update_events(ASSIGNED_POD, pod("p", "1"), pod("p"))[0].action == Action.UPDATE_POD_SCALE_DOWN


async def test_an_event_nobody_registered_for_does_not_send_pods_in_flight_to_backoff():
    q, _ = make_queue()
    q.add(pod("a", "8"))
    a = await q.pop()
    q.on_event(ClusterEvent(ASSIGNED_POD, Action.UPDATE_POD_OTHER, "PodUpdate"), pod("x"), pod("x"))
    a.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(a)
    assert "default/a" in q.unschedulable
    q.add(pod("b", "8"))
    b = await q.pop()
    q.on_event(ClusterEvent(ASSIGNED_POD, Action.DELETE, "AssignedPodDelete"), pod("x"), None)
    b.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable(b)
    assert "default/b" in q.backoff


class Verdict:
    def __init__(self, name, status, nominated=None):
        self.name, self.status, self.nominated = name, status, nominated

    def post_filter(self, state, info, statuses):
        return self.nominated, self.status


class Sorter:
    name = "PrioritySort"

    def sort_key(self, info):
        return 0


def framework(*plugins):
    return Framework(Profile(), [*plugins, Sorter()], Metrics(), FakeClock())


def run(fwk):
    return fwk.run_post_filter(CycleState(), info(pod("p")), {})


def test_post_filter_joins_unschedulable_messages_under_the_first_rejector():
    fwk = framework(Verdict("A", Status(Code.UNSCHEDULABLE, ["no new claims to deallocate"])),
                    Verdict("B", Status(Code.UNSCHEDULABLE, ["preemption: not eligible"])))
    nominated, st = run(fwk)
    assert nominated is None
    assert (st.code, st.plugin, st.message()) == (Code.UNSCHEDULABLE, "A",
                                                 "no new claims to deallocate, preemption: not eligible")


def test_post_filter_stops_at_success_or_an_unresolvable_verdict():
    assert run(framework(Verdict("A", Status(Code.UNSCHEDULABLE, ["x"])), Verdict("B", None, "n1"))) == ("n1", None)
    nominated, st = run(framework(Verdict("A", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["stop"])),
                                  Verdict("B", None, "n1")))
    assert nominated is None and (st.code, st.plugin, st.message()) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "A", "stop")
    assert run(framework()) == (None, None)


def test_default_preemption_rejects_as_unschedulable_with_its_message():
    plugin = DefaultPreemption({}, None)
    _, st = plugin.post_filter(CycleState(), info(pod("p", preemptionPolicy="Never")), {})
    assert st.code == Code.UNSCHEDULABLE and st.message() == "preemption: not eligible due to preemptionPolicy=Never."
