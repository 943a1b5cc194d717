import pytest

from nanokube.scheduler.cycle import FitError, num_feasible_nodes_to_find
from nanokube.scheduler.framework import (
    ASSIGNED_POD,
    NODE,
    UNSCHEDULED_POD,
    Action,
    Code,
    CycleState,
    Hint,
    NodeToStatus,
    Status,
)
from nanokube.scheduler.plugins.node_affinity import NodeAffinity
from nanokube.scheduler.plugins.node_name import NodeName
from nanokube.scheduler.plugins.node_ports import NodePorts
from nanokube.scheduler.plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation,
)
from nanokube.scheduler.plugins.node_resources_fit import NodeResourcesFit
from nanokube.scheduler.plugins.node_unschedulable import NodeUnschedulable
from nanokube.scheduler.plugins.normalize import default_normalize
from nanokube.scheduler.plugins.scheduling_gates import SchedulingGates
from nanokube.scheduler.plugins.taint_toleration import TaintToleration
from nanokube.scheduler.plugins.volume_binding import VolumeBinding
from nanokube.scheduler.plugins.volume_restrictions import VolumeRestrictions
from nanokube.scheduler.plugins.volume_zone import VolumeZone
from nanokube.machinery import podresources
from nanokube.machinery.podresources import QUANTITIES
from nanokube.scheduler.resources import pod_limits, pod_requests, pod_requests_pair
from tests.scheduler import info, node, node_info, pod


def reasons(plugin, p, ni):
    st = CycleState()
    if hasattr(plugin, "pre_filter"):
        _, s = plugin.pre_filter(st, info(p))
        if s is not None and s.code == Code.SKIP:
            return []
    s = plugin.filter(st, info(p), ni)
    return [] if s is None else s.reasons


@pytest.mark.parametrize("p,ni,want", [
    (pod("a", "1", "1Gi"), node_info(node("n", "2", "4Gi")), []),
    (pod("a", "3"), node_info(node("n", "4"), pod("b", "2")), ["Insufficient cpu"]),
    (pod("a", "1", "5Gi"), node_info(node("n", "500m", "4Gi")), ["Insufficient cpu", "Insufficient memory"]),
    (pod("a"), node_info(node("n", pods="1"), pod("b")), ["Too many pods"]),
    (pod("a"), node_info(node("n", "0", "0")), []),
])
def test_node_resources_fit_filter(p, ni, want):
    assert reasons(NodeResourcesFit({}, None), p, ni) == want


@pytest.mark.parametrize("p,ni,code", [
    # more than is free, but evicting pods could make room: preemption may help
    (pod("a", "3"), node_info(node("n", "4"), pod("b", "2")), Code.UNSCHEDULABLE),
    (pod("a"), node_info(node("n", pods="1"), pod("b")), Code.UNSCHEDULABLE),
    # more than the node has at all (any one resource): no eviction helps, as upstream's Unresolvable
    (pod("a", "5"), node_info(node("n", "4")), Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    (pod("a", "1", "5Gi"), node_info(node("n", "2", "4Gi"), pod("b", "2")), Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
])
def test_node_resources_fit_unresolvable_beyond_allocatable(p, ni, code):
    assert NodeResourcesFit({}, None).filter(CycleState(), info(p), ni).code == code


def test_extended_resources_and_ignored_groups():
    p = pod("a")
    p["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "2"}}
    ni = node_info(node("n", extra={"example.com/gpu": "1"}))
    assert reasons(NodeResourcesFit({}, None), p, ni) == ["Insufficient example.com/gpu"]
    assert reasons(NodeResourcesFit({"ignoredResourceGroups": ["example.com"]}, None), p, ni) == []
    st = NodeResourcesFit({}, None).filter(CycleState(), info(p), ni)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # 2 GPUs asked of a node with 1


def test_pod_requests_init_sidecars_and_overhead():
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
                               {"name": "init", "resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"cpu": "10m"}}
    assert pod_requests(spec).milli_cpu == 1210  # max(100+200, 1000+200) + overhead
    assert pod_requests({"containers": [{"name": "a"}]}, nonzero=True).milli_cpu == 100
    limits = pod_limits({"containers": [{"name": "a", "resources": {"limits": {"cpu": "0", "memory": "1Gi"}}}],
                         "overhead": {"cpu": "250m", "memory": "64Mi"}})
    assert (limits.milli_cpu, limits.memory) == (0, (1024 + 64) * 2**20)  # overhead only on a limit that is set, not zero
    huge = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "2Mi"}}}],
            "resources": {"requests": {"memory": "1Gi", "hugepages-2Mi": "6Mi"}}}
    assert pod_requests(huge).scalars == {"hugepages-2Mi": 6 * 2**20}  # pod-level hugepages count over the containers'


@pytest.mark.parametrize("spec", [
    {"containers": [{"name": "a"}]},
    {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "b", "resources": {"requests": {"memory": "1Gi", "example.com/gpu": "2"}}}]},
    {"containers": [{"name": "a", "resources": {"requests": {"cpu": "0", "memory": "0", "pods": "1"}}}]},
    {"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]},
    {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1500m", "memory": "1G"}, "limits": {"cpu": "2"}}}],
     "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"},
                                                                              "limits": {"memory": "2Gi"}}},
                        {"name": "i", "resources": {"requests": {"cpu": "2500m", "ephemeral-storage": "1Gi"}}}],
     "overhead": {"cpu": "250m", "memory": "120Mi"}},
    {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}], "resources": {"requests": {"cpu": "3"}}},
    {"containers": [{"name": "a", "resources": {"limits": {"cpu": "0", "memory": "1Gi"}}}],
     "overhead": {"cpu": "250m", "memory": "64Mi"}},
])
def test_pod_requests_pair_is_both_totals_and_quota_counts_the_same(spec):
    """One computation (machinery.podresources) in two kinds of numbers: the scheduler's integers
    are quota's exact quantities, CPU in thousandths and the rest rounded up."""
    assert pod_requests_pair(spec) == (pod_requests(spec), pod_requests(spec, nonzero=True))
    for mine, exact in ((pod_requests(spec), podresources.pod_requests(spec, QUANTITIES)),
                        (pod_limits(spec), podresources.pod_limits(spec, QUANTITIES))):
        assert {name: mine.get(name) for name in exact if name != "pods"} == {
            name: q.milli() if name == "cpu" else q.ceil() for name, q in exact.items() if name != "pods"}


def test_least_allocated_score_counts_node_and_pod_requests():
    fit = NodeResourcesFit({}, None)
    ni = node_info(node("n", "4", "32Gi"), pod("b", "1", "512Mi"))
    cpu = (4000 - 2000) * 100 // 4000
    mem = (32 * 1024 - 1024) * 100 // (32 * 1024)
    assert fit.score_nodes(CycleState(), info(pod("a", "1", "512Mi")), [ni])[0] == (cpu + mem) // 2


def test_most_allocated_and_requested_to_capacity_ratio():
    ni = node_info(node("n", "4", "4Gi"), pod("b", "1", "1Gi"))
    p = info(pod("a", "1", "1Gi"))
    most = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated"}}, None)
    assert most.score_nodes(CycleState(), p, [ni])[0] == 50
    ratio = NodeResourcesFit({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}}, None)
    assert ratio.score_nodes(CycleState(), p, [ni])[0] == 50
    weighted = NodeResourcesFit({"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}}, None)
    ni2 = node_info(node("n", "4", "8Gi"), pod("b", "3", "1Gi"))
    assert weighted.score_nodes(CycleState(), p, [ni2])[0] == (100 * 3 + 25) // 4


def test_balanced_allocation():
    ba = NodeResourcesBalancedAllocation({}, None)
    p = info(pod("a", "1", "1Gi"))
    assert ba.score_nodes(CycleState(), p, [node_info(node("n", "4", "4Gi"))])[0] == 100
    assert ba.score_nodes(CycleState(), p, [node_info(node("n", "2", "4Gi"))])[0] == int((1 - 0.25 / 2) * 100)
    assert ba.pre_score(CycleState(), info(pod("be")), []).code == Code.SKIP


@pytest.mark.parametrize("taints,tolerations,want", [
    ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [], ["node(s) had untolerated taint {k: v}"]),
    ([{"key": "k", "value": "v", "effect": "NoSchedule"}], [{"key": "k", "operator": "Equal", "value": "v"}], []),
    ([{"key": "k", "value": "v", "effect": "NoExecute"}], [{"operator": "Exists"}], []),
    ([{"key": "k", "effect": "NoExecute"}], [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
     ["node(s) had untolerated taint {k: }"]),
    ([{"key": "k", "effect": "PreferNoSchedule"}], [], []),
])
def test_taint_toleration_filter(taints, tolerations, want):
    assert reasons(TaintToleration({}, None), pod("a", tolerations=tolerations), node_info(node("n", taints=taints))) == want


def test_taint_toleration_score_prefers_fewer_prefer_no_schedule_taints():
    tt = TaintToleration({}, None)
    st = CycleState()
    p = info(pod("a", tolerations=[{"key": "ok", "operator": "Exists", "effect": "PreferNoSchedule"}]))
    nodes = [node_info(node("n0")),
             node_info(node("n1", taints=[{"key": "x", "effect": "PreferNoSchedule"}])),
             node_info(node("n2", taints=[{"key": "x", "effect": "PreferNoSchedule"}, {"key": "y", "effect": "PreferNoSchedule"},
                                          {"key": "ok", "effect": "PreferNoSchedule"}]))]
    tt.pre_score(st, p, nodes)
    scores = tt.score_nodes(st, p, nodes)
    assert scores == [0, 1, 2]
    tt.normalize_score(st, p, scores)
    assert scores == [100, 50, 0]


def test_taint_toleration_skips_score_where_no_node_is_tainted():
    tt = TaintToleration({}, None)
    nodes = [node_info(node("n0")), node_info(node("n1"))]
    assert tt.pre_score(CycleState(), info(pod("a")), nodes).code == Code.SKIP
    nodes.append(node_info(node("n2", taints=[{"key": "x", "effect": "NoSchedule"}])))
    assert tt.pre_score(CycleState(), info(pod("a")), nodes) is None


AFF = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]}]}}}


@pytest.mark.parametrize("spec,n,fits", [
    ({"nodeSelector": {"disk": "ssd"}}, node("n", labels={"disk": "ssd"}), True),
    ({"nodeSelector": {"disk": "ssd"}}, node("n", labels={"disk": "hdd"}), False),
    ({"affinity": AFF}, node("n", labels={"zone": "b"}), True),
    ({"affinity": AFF}, node("n", labels={"zone": "c"}), False),
    ({"affinity": AFF}, node("special"), True),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}, {"key": "old", "operator": "DoesNotExist"}]}]}}}},
     node("n", labels={"gen": "4"}), True),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}},
     node("n"), False),
])
def test_node_affinity_filter(spec, n, fits):
    got = reasons(NodeAffinity({}, None), pod("a", **spec), node_info(n))
    assert got == ([] if fits else ["node(s) didn't match Pod's node affinity/selector"])


def test_node_affinity_score_sums_preferred_weights_then_normalises():
    na = NodeAffinity({}, None)
    aff = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 30, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]}}
    p = info(pod("a", affinity=aff))
    nodes = [node_info(node("n0", labels={"zone": "a"})), node_info(node("n1", labels={"zone": "a", "gpu": "1"})),
             node_info(node("n2"))]
    st = CycleState()
    assert na.pre_score(st, p, nodes) is None
    scores = na.score_nodes(st, p, nodes)
    assert scores == [10, 40, 0]
    na.normalize_score(st, p, scores)
    assert scores == [25, 100, 0]


def test_node_ports():
    used = pod("b", ports=[{"containerPort": 80, "hostPort": 8080}])
    ni = node_info(node("n"), used)
    np = NodePorts({}, None)
    clash = "node(s) didn't have free ports for the requested pod ports"
    assert reasons(np, pod("a", ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}]), ni) == [clash]
    assert reasons(np, pod("a", ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]), ni) == []
    assert reasons(np, pod("a", ports=[{"containerPort": 80, "hostPort": 8081}]), ni) == []
    assert reasons(np, pod("a"), ni) == []


def test_node_unschedulable_and_node_name():
    cordoned = node_info(node("n", unschedulable=True))
    assert reasons(NodeUnschedulable({}, None), pod("a"), cordoned) == ["node(s) were unschedulable"]
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert reasons(NodeUnschedulable({}, None), pod("a", tolerations=tol), cordoned) == []
    assert reasons(NodeName({}, None), pod("a", nodeName="other"), cordoned) == ["node(s) didn't match the requested node name"]


def test_scheduling_gates_pre_enqueue():
    sg = SchedulingGates({}, None)
    st = sg.pre_enqueue(info(pod("a", schedulingGates=[{"name": "x"}, {"name": "y"}])))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ["waiting for scheduling gates: [x y]"]
    assert sg.pre_enqueue(info(pod("a"))) is None


def test_default_normalize_and_feasible_node_count():
    s = [0, 0]
    default_normalize(s, reverse=True)
    assert s == [100, 100]
    assert num_feasible_nodes_to_find(50) == 50
    assert num_feasible_nodes_to_find(5000) == 500
    assert num_feasible_nodes_to_find(200) == 100
    assert num_feasible_nodes_to_find(1000, 30) == 300


def test_fit_error_message_counts_sorted_reasons():
    e = FitError(3, {"a": Status(Code.UNSCHEDULABLE, ["Insufficient cpu"]), "b": Status(Code.UNSCHEDULABLE, ["Insufficient cpu"]),
                     "c": Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint {k: v}"])})
    assert str(e) == "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu."


def test_shared_statuses_count_once_per_node():
    """Nodes rejected for the same reasons share one Status: each node still counts in the message,
    and one resolvable status among the shared ones keeps preemption possible."""
    cpu = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient cpu", "Insufficient memory"])
    also_cpu = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient cpu"])
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint {k: v}"])
    statuses = NodeToStatus([(f"n{i}", cpu) for i in range(5)] + [("m", also_cpu), ("t", taint)],
                            absent=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) didn't match Pod's node affinity/selector"]),
                            num_absent=3)
    assert str(FitError(10, statuses)) == ("0/10 nodes are available: 1 node(s) had untolerated taint {k: v}, "
                                           "3 node(s) didn't match Pod's node affinity/selector, 5 Insufficient memory, "
                                           "6 Insufficient cpu.")
    assert statuses.all_unresolvable()
    statuses["r"] = Status(Code.UNSCHEDULABLE, ["Insufficient cpu"])
    assert not statuses.all_unresolvable()
    assert str(FitError(11, statuses)).startswith("0/11 nodes are available: 1 node(s) had untolerated taint {k: v}, "
                                                  "3 node(s) didn't match Pod's node affinity/selector, "
                                                  "5 Insufficient memory, 7 Insufficient cpu.")


def test_node_matcher_agrees_with_selector_matches():
    from nanokube.machinery.scheduling import NodeMatcher, selector_matches

    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                                   {"key": "gpu", "operator": "DoesNotExist"}]},
             {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]},
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
             {}]
    required = {"nodeSelectorTerms": terms}
    cases = [({"zone": "a"}, "n1"), ({"zone": "a", "gpu": "x"}, "n1"), ({"zone": "c", "cores": "16"}, "n1"),
             ({"cores": "4"}, "n1"), ({}, "n9"), ({}, "n1")]
    got = [NodeMatcher({}, required).matches(labels, name) for labels, name in cases]
    assert got == [selector_matches(required, labels, name) for labels, name in cases]
    assert got == [True, False, True, False, True, False]
    assert not NodeMatcher({"disk": "ssd"}, None).matches({"zone": "a"}, "n1")
    assert NodeMatcher({"disk": "ssd"}, None).matches({"disk": "ssd"}, "n1")
    assert not NodeMatcher({}, {"nodeSelectorTerms": [{}]}).matches({"zone": "a"}, "n1")


def _hints(plugin, resource):
    """The plugin's queueing hints for the events of `resource`, by the action each registered."""
    return {r.event.action: r.hint for r in plugin.events_to_register() if r.event.resource == resource}


def test_node_hints_queue_only_for_a_change_that_can_undo_the_rejection():
    """Upstream's isSchedulableAfterNodeChange of each plugin: a node that did not reject the pod
    before an update (it matched, was tolerated, had the room) cannot help by being updated."""
    [affinity] = _hints(NodeAffinity({}, None), NODE).values()
    p = pod("p", nodeSelector={"pool": "gpu"})
    gpu, cpu = node("n", labels={"pool": "gpu"}), node("n", labels={"pool": "cpu"})
    relabelled = node("n", labels={"pool": "gpu", "rack": "r1"})
    assert affinity(p, None, gpu) == Hint.QUEUE and affinity(p, cpu, gpu) == Hint.QUEUE
    assert affinity(p, gpu, relabelled) == Hint.SKIP and affinity(p, gpu, cpu) == Hint.SKIP

    [taints] = _hints(TaintToleration({}, None), NODE).values()
    t = [{"key": "k", "effect": "NoSchedule"}]
    assert taints(pod("p"), node("n", taints=t), node("n")) == Hint.QUEUE
    assert taints(pod("p"), node("n", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), node("n")) == Hint.SKIP
    assert taints(pod("p"), node("n"), node("n", taints=t)) == Hint.SKIP

    [cordon] = _hints(NodeUnschedulable({}, None), NODE).values()
    assert cordon(pod("p"), node("n", unschedulable=True), node("n")) == Hint.QUEUE
    assert cordon(pod("p"), node("n"), node("n", unschedulable=True)) == Hint.SKIP
    assert cordon(pod("p"), node("n", labels={"a": "b"}), node("n")) == Hint.SKIP
    assert cordon(pod("p"), None, node("n")) == Hint.QUEUE

    fit = _hints(NodeResourcesFit({}, None), NODE)[Action.ADD | Action.UPDATE_NODE_ALLOCATABLE]
    wants_cpu = pod("p", "6")
    assert fit(wants_cpu, None, node("n", "8")) == Hint.QUEUE and fit(wants_cpu, None, node("n", "4")) == Hint.SKIP
    assert fit(wants_cpu, node("n", "4"), node("n", "8")) == Hint.QUEUE
    assert fit(wants_cpu, node("n", "8", "16Gi"), node("n", "8", "32Gi")) == Hint.SKIP  # more of what it does not ask
    assert fit(pod("p"), node("n", pods="1"), node("n", pods="2")) == Hint.QUEUE


def test_node_name_and_node_ports_wait_for_a_node_to_arrive_not_for_updates():
    assert list(_hints(NodeName({}, None), NODE)) == [Action.ADD]
    assert list(_hints(NodePorts({}, None), NODE)) == [Action.ADD]


def test_assigned_pod_hints_queue_for_what_frees_this_pods_resources_or_ports():
    [freed] = _hints(NodePorts({}, None), ASSIGNED_POD).values()
    web = pod("web", ports=[{"containerPort": 80, "hostPort": 8080}])
    assert freed(web, pod("old", ports=[{"containerPort": 80, "hostPort": 8080}]), None) == Hint.QUEUE
    assert freed(web, pod("old", ports=[{"containerPort": 80, "hostPort": 9090}]), None) == Hint.SKIP
    assert freed(web, pod("old"), None) == Hint.SKIP

    [fit] = _hints(NodeResourcesFit({}, None), ASSIGNED_POD).values()
    wants_cpu = pod("p", "2")
    assert fit(wants_cpu, pod("old", "1", "1Gi"), None) == Hint.QUEUE
    assert fit(wants_cpu, pod("old", "2", "1Gi"), pod("old", "1", "1Gi")) == Hint.QUEUE
    assert fit(wants_cpu, pod("old", "2", "2Gi"), pod("old", "2", "1Gi")) == Hint.SKIP


def test_hints_for_a_pods_own_update_queue_only_that_pod():
    """An UnscheduledPod event is the pod's own update; recorded while pods are in flight, it
    reaches the hints of every pod that failed meanwhile, which must skip it."""
    tolerant = pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    other = pod("q", tolerations=tolerant["spec"]["tolerations"])
    for plugin, action in ((SchedulingGates({}, None), Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                           (TaintToleration({}, None), Action.UPDATE_POD_TOLERATIONS),
                           (NodeUnschedulable({}, None), Action.UPDATE_POD_TOLERATIONS),
                           (NodeResourcesFit({}, None), Action.UPDATE_POD_SCALE_DOWN)):
        hint = _hints(plugin, UNSCHEDULED_POD)[action]
        assert hint(pod("p"), pod("p"), tolerant) == Hint.QUEUE, plugin.name
        assert hint(pod("p"), pod("q"), other) == Hint.SKIP, plugin.name
    # NodeUnschedulable: only a toleration of its taint helps
    hint = _hints(NodeUnschedulable({}, None), UNSCHEDULED_POD)[Action.UPDATE_POD_TOLERATIONS]
    assert hint(pod("p"), pod("p"), pod("p", tolerations=[{"key": "gpu", "operator": "Exists"}])) == Hint.SKIP


def test_volume_hints_queue_for_the_pods_own_claims_and_topology_changes():
    """Upstream's hints of VolumeBinding (a new class or new allowedTopologies), VolumeZone (a new
    WaitForFirstConsumer class, a claim the pod mounts, a new volume or new zone labels) and VolumeRestrictions (a pod that
    mounted one of its claims deleted, any new node, one of its claims created)."""
    mounts = pod("p")
    mounts["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    data, other = ({"metadata": {"name": n, "namespace": "default"}, "spec": {}} for n in ("data", "other"))
    elsewhere = {"metadata": {"name": "data", "namespace": "other"}, "spec": {}}

    binding = _hints(VolumeBinding({}, None), "StorageClass")[Action.ADD | Action.UPDATE]
    sc = {"metadata": {"name": "fast"}, "provisioner": "x"}
    zoned = {**sc, "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]}
    assert binding(mounts, None, sc) == Hint.QUEUE and binding(mounts, sc, zoned) == Hint.QUEUE
    assert binding(mounts, sc, {**sc, "metadata": {"name": "fast", "labels": {"a": "b"}}}) == Hint.SKIP

    zone = _hints(VolumeZone({}, None), "PersistentVolumeClaim")[Action.ADD | Action.UPDATE]
    assert zone(mounts, None, data) == Hint.QUEUE
    assert zone(mounts, None, other) == zone(mounts, None, elsewhere) == Hint.SKIP
    pv_hint = _hints(VolumeZone({}, None), "PersistentVolume")[Action.ADD | Action.UPDATE]
    pv = {"metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "a"}}}
    moved = {"metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "b"}}}
    tagged = {"metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "a", "team": "x"}}}
    assert pv_hint(mounts, None, pv) == pv_hint(mounts, pv, moved) == Hint.QUEUE
    assert pv_hint(mounts, pv, tagged) == Hint.SKIP
    [new_class] = _hints(VolumeZone({}, None), "StorageClass").values()
    assert new_class(mounts, None, {**sc, "volumeBindingMode": "WaitForFirstConsumer"}) == Hint.QUEUE
    assert new_class(mounts, None, sc) == new_class(mounts, None, {**sc, "volumeBindingMode": "Immediate"}) == Hint.SKIP

    restrictions = VolumeRestrictions({}, None)
    [freed] = _hints(restrictions, ASSIGNED_POD).values()
    holder, bystander = pod("holder"), pod("bystander")
    holder["spec"]["volumes"] = mounts["spec"]["volumes"]
    assert freed(mounts, holder, None) == Hint.QUEUE and freed(mounts, bystander, None) == Hint.SKIP
    holder["metadata"]["namespace"] = "other"
    assert freed(mounts, holder, None) == Hint.SKIP
    [created] = _hints(restrictions, "PersistentVolumeClaim").values()
    assert created(mounts, None, data) == Hint.QUEUE and created(mounts, None, other) == Hint.SKIP
    assert _hints(restrictions, NODE) == {Action.ADD: None}  # any new node, as upstream registers it
