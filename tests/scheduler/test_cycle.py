"""The feasible-node search: filtering a chunk of nodes per plugin finds
the same nodes, records the same statuses in the same order and moves the
rotation start exactly as upstream's node-by-node search does."""

import pytest

from nanokube.scheduler.cache import Cache, Snapshot
from nanokube.scheduler.cycle import Algorithm, FitError, num_feasible_nodes_to_find
from nanokube.scheduler.framework import CycleState, Framework, Profile
from nanokube.scheduler.metrics import Metrics
from nanokube.scheduler.plugins.node_affinity import NodeAffinity
from nanokube.scheduler.plugins.node_resources_fit import NodeResourcesFit
from nanokube.scheduler.plugins.node_unschedulable import NodeUnschedulable
from nanokube.scheduler.plugins.priority_sort import PrioritySort
from nanokube.scheduler.plugins.taint_toleration import TaintToleration
from tests.scheduler import FakeClock, info, node, pod

TAINT = {"key": "k", "value": "v", "effect": "NoSchedule"}


def framework() -> Framework:
    plugins = [PrioritySort({}, None), NodeUnschedulable({}, None), TaintToleration({}, None), NodeAffinity({}, None),
               NodeResourcesFit({}, None)]
    return Framework(Profile(plugins=[p.name for p in plugins]), plugins, Metrics(), FakeClock())


def snapshot(count: int, full) -> Snapshot:
    """Nodes of which every 7th is unschedulable, every 5th tainted, every
    4th in zone b, and those `full` picks have 1 CPU."""
    cache, snap = Cache(), Snapshot()
    for i in range(count):
        cache.add_node(node(f"n{i}", "1" if full(i) else "4", taints=[TAINT] if i % 5 == 0 else None,
                            unschedulable=i % 7 == 0, labels={"zone": "b" if i % 4 == 0 else "a"}))
    cache.update_snapshot(snap)
    return snap


def node_by_node(fwk: Framework, state: CycleState, p, snap: Snapshot, start: int):
    """Upstream's findNodesThatPassFilters, one node and one plugin at a time."""
    nodes, want = snap.nodes, num_feasible_nodes_to_find(len(snap.nodes))
    feasible, statuses, processed = [], {}, 0
    for node_info in nodes[start:] + nodes[:start]:
        processed += 1
        for plugin in fwk.filters(state):
            st = plugin.filter(state, p, node_info)
            if st is not None:
                statuses[node_info.name] = (plugin.name, st.reasons)
                break
        else:
            feasible.append(node_info.name)
            if len(feasible) >= want:
                break
    return feasible, statuses, (start + processed) % len(nodes)


@pytest.mark.parametrize("count,full", [(300, lambda i: i % 3 == 0), (1000, lambda i: 100 <= i < 700)])
@pytest.mark.parametrize("selector", [None, {"zone": "a"}])
def test_chunked_search_matches_the_node_by_node_search(count, full, selector):
    fwk, snap, alg = framework(), snapshot(count, full), Algorithm()
    p = info(pod("p", "2", "1Gi", **({"nodeSelector": selector} if selector else {})))
    for _ in range(8):
        start = alg.next_start
        want_feasible, _, want_next = node_by_node(fwk, CycleState(), p, snap, start)
        got = alg.find_nodes(fwk, CycleState(), p, snap)
        assert [n.name for n in got] == want_feasible
        assert alg.next_start == want_next


@pytest.mark.parametrize("selector,message", [
    (None, "206 Insufficient cpu, 43 node(s) were unschedulable, 51 node(s) had untolerated taint {k: v}"),
    ({"zone": "b"}, ("154 node(s) didn't match Pod's node affinity/selector, 43 node(s) were unschedulable, "
                     "51 node(s) had untolerated taint {k: v}, 52 Insufficient cpu")),
])
def test_no_fit_records_every_status_in_search_order(selector, message):
    fwk, snap, alg = framework(), snapshot(300, lambda i: True), Algorithm()
    alg.next_start = 123
    p = info(pod("p", "2", "1Gi", **({"nodeSelector": selector} if selector else {})))
    _, want_statuses, _ = node_by_node(fwk, CycleState(), p, snap, 123)
    with pytest.raises(FitError) as e:
        alg.find_nodes(fwk, CycleState(), p, snap)
    got = [(name, (st.plugin, st.reasons)) for name, st in e.value.statuses.items()]
    assert got == list(want_statuses.items()) and len(got) == 300
    assert str(e.value) == f"0/300 nodes are available: {message}."


def _required(*terms) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize("spec", [
    {"nodeSelector": {"zone": "a", "disk": "ssd"}},
    {"affinity": _required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "c"]},
                                                 {"key": "cores", "operator": "Gt", "values": ["8"]}]},
                           {"matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}]})},
    {"affinity": _required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3", "n7"]}]},
                           {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]})},
    {"affinity": _required()},
])
def test_node_affinity_over_many_nodes_matches_node_by_node(spec):
    plugin, p = NodeAffinity({}, None), info(pod("p", **spec))
    cache, snap = Cache(), Snapshot()
    for i in range(40):
        labels = {"zone": "abc"[i % 3], "cores": str(4 * (i % 5))}
        if i % 4:
            labels["disk"] = "ssd"
        cache.add_node(node(f"n{i}", labels=labels))
    cache.update_snapshot(snap)
    want = [i for i, n in enumerate(snap.nodes) if plugin.filter(CycleState(), p, n) is not None]
    got = plugin.filter_nodes(CycleState(), p, snap.nodes)
    assert sorted(got) == want and 0 < len(want) <= 40
    assert {st.reasons[0] for st in got.values()} == {"node(s) didn't match Pod's node affinity/selector"}
