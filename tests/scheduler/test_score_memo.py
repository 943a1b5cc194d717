"""Results kept per node for pods of one shape: a node's change (a pod added
or removed in place, its allocatable updated) or a different pod shape is
filtered and scored afresh, and every kept score equals the one computed
from scratch."""

from nanokube.scheduler.cache import ShapeMemo
from nanokube.scheduler.framework import Code, CycleState
from nanokube.scheduler.plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation,
    balanced_score,
)
from nanokube.scheduler.plugins.node_resources_fit import NodeResourcesFit
from tests.scheduler import info, node, node_info, pod


def fresh(p, nodes) -> tuple[list[int], list[int]]:
    """(LeastAllocated, BalancedAllocation) computed without any kept score."""
    fit = NodeResourcesFit({}, None)
    vector = fit.scorer.pod_vector(p)
    least = [fit.scorer.score(vector, n) for n in nodes]
    cpu, memory = p.requests.milli_cpu, p.requests.memory
    balanced = [balanced_score([min((n.requested.milli_cpu + cpu) / n.allocatable.milli_cpu, 1.0),
                                min((n.requested.memory + memory) / n.allocatable.memory, 1.0)]) for n in nodes]
    return least, balanced


def scored(fit, balanced, p, nodes) -> tuple[list[int], list[int]]:
    st = CycleState()
    fit.pre_score(st, p, nodes)
    balanced.pre_score(st, p, nodes)
    return fit.score_nodes(st, p, nodes), balanced.score_nodes(st, p, nodes)


def test_kept_scores_follow_node_changes_and_pod_shapes():
    fit, balanced = NodeResourcesFit({}, None), NodeResourcesBalancedAllocation({}, None)
    nodes = [node_info(node("a", "4", "8Gi")), node_info(node("b", "8", "8Gi"), pod("x", "2", "1Gi"))]
    small, big = info(pod("s", "500m", "1Gi")), info(pod("b", "2", "6Gi"))
    first = scored(fit, balanced, small, nodes)
    assert first == fresh(small, nodes) and nodes[0].least_shape is not None and nodes[0].balanced_shape is not None
    assert scored(fit, balanced, small, nodes) == first
    assert scored(fit, balanced, big, nodes) == fresh(big, nodes) != first
    nodes[0].add_pod(info(pod("y", "3", "4Gi")))
    assert nodes[0].least_shape is nodes[0].balanced_shape is nodes[0].fits_shape is None
    assert scored(fit, balanced, small, nodes) == fresh(small, nodes) != first
    nodes[0].remove_pod("uid-y")
    assert scored(fit, balanced, small, nodes) == first
    copy = nodes[1].clone()
    copy.add_pod(info(pod("z", "1")))
    assert nodes[1].least_shape is not None and copy.least_shape is None
    assert scored(fit, balanced, small, [copy]) == fresh(small, [copy])
    nodes[1].set_node(node("b", "16", "8Gi"))
    assert scored(fit, balanced, small, nodes) == fresh(small, nodes) != first


def test_memo_keys_are_never_reused():
    memo = ShapeMemo()
    memo.MAX_SHAPES = 2
    keys = [memo.key((1,)), memo.key((2,)), memo.key((1,))]
    assert keys[0] == keys[2]
    again = memo.key((3,))
    assert again not in keys and memo.key((1,)) not in keys + [again]


def test_kept_fit_is_dropped_when_the_node_fills():
    fit = NodeResourcesFit({}, None)
    nodes = [node_info(node("a", "2", "4Gi")), node_info(node("b", "2", "4Gi", pods="1"))]
    p = info(pod("p", "1", "1Gi"))
    assert fit.filter_nodes(CycleState(), p, nodes) == {} and nodes[0].fits_shape is nodes[1].fits_shape is not None
    assert fit.filter_nodes(CycleState(), p, nodes) == {}
    nodes[0].add_pod(info(pod("x", "1500m")))
    nodes[1].add_pod(info(pod("y")))
    got = fit.filter_nodes(CycleState(), p, nodes)
    assert {i: st.reasons for i, st in got.items()} == {0: ["Insufficient cpu"], 1: ["Too many pods"]}


def test_kept_rejections_match_the_full_check_and_follow_node_changes():
    fit = NodeResourcesFit({}, None)
    nodes = [node_info(node("a", "1", "1Gi")), node_info(node("b", "1", "8Gi")),
             node_info(node("c", "1", "1Gi")), node_info(node("d", "4", "8Gi", pods="1"), pod("x", "1"))]
    p = info(pod("p", "2", "2Gi"))

    def full():
        return {i: (st.code, st.reasons) for i, n in enumerate(nodes)
                if (st := fit.filter(CycleState(), p, n)) is not None}

    got = fit.filter_nodes(CycleState(), p, nodes)
    unresolvable, resolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.UNSCHEDULABLE
    assert {i: (st.code, st.reasons) for i, st in got.items()} == full() == {
        0: (unresolvable, ["Insufficient cpu", "Insufficient memory"]), 1: (unresolvable, ["Insufficient cpu"]),
        2: (unresolvable, ["Insufficient cpu", "Insufficient memory"]), 3: (resolvable, ["Too many pods"])}
    assert got[0] is got[2] and nodes[0].unfit_shape is not None
    again = fit.filter_nodes(CycleState(), p, nodes)
    assert all(again[i] is got[i] for i in got)
    nodes[1].set_node(node("b", "4", "8Gi"))
    nodes[3].remove_pod("uid-x")
    assert nodes[1].unfit_shape is None
    assert fit.filter_nodes(CycleState(), p, nodes).keys() == full().keys() == {0, 2}
    other = info(pod("q", "500m", "2Gi"))
    assert {i: st.reasons for i, st in fit.filter_nodes(CycleState(), other, nodes).items()} == {
        0: ["Insufficient memory"], 2: ["Insufficient memory"]}
    # short of the same things, but on a node where evicting could make room: not the kept Status
    nodes.append(node_info(node("e", "4", "4Gi"), pod("y", "3", "3Gi")))
    got = fit.filter_nodes(CycleState(), p, nodes)
    assert got[4].reasons == got[0].reasons and (got[4].code, got[0].code) == (resolvable, unresolvable)
