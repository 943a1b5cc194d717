"""The cache's per-node index of pods with inter-pod terms, the snapshot's
lists of nodes holding such pods and its counts of unschedulable and
tainted nodes, the reuse of an assumed pod's PodInfo once its binding
is seen, and the per-window columns Filter and Score keep their results in."""

from nanokube.scheduler.cache import Cache, KeptColumns, NodeInfo, Snapshot
from nanokube.scheduler.framework import CycleState, PodInfo
from nanokube.scheduler.plugins.node_unschedulable import NodeUnschedulable
from nanokube.scheduler.plugins.taint_toleration import TaintToleration
from tests.scheduler import info, node, node_info, pod

ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]}}
PREFERRED = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "zone"}}]}}


def test_node_info_indexes_pods_with_affinity_terms():
    ni = node_info(node("n"), pod("plain"), pod("anti", affinity=ANTI), pod("pref", affinity=PREFERRED))
    assert set(ni.affinity_pods) == {"uid-anti", "uid-pref"}
    assert set(ni.anti_affinity_pods) == {"uid-anti"}
    copy = ni.clone()
    ni.remove_pod("uid-anti")
    assert set(ni.affinity_pods) == {"uid-pref"} and not ni.anti_affinity_pods
    assert set(copy.anti_affinity_pods) == {"uid-anti"}


def test_node_info_clone_copies_every_slot_and_owns_its_containers():
    ni = node_info(node("n", taints=[{"key": "k", "effect": "NoSchedule"}]), pod("a", cpu="1"),
                   pod("anti", affinity=ANTI))
    ni.fits_shape, ni.least_shape, ni.least_score = 7, 8, 42
    copy = ni.clone()
    for s in NodeInfo.__slots__:
        assert getattr(copy, s) == getattr(ni, s), s
    owned = ("requested", "nonzero", "pods", "affinity_pods", "anti_affinity_pods", "ports")
    assert all(getattr(copy, s) is not getattr(ni, s) for s in owned)


def test_node_info_without_some_or_most_pods_matches_taking_them_off_one_by_one():
    ports = [{"containerPort": 80, "hostPort": 8080}]
    ni = node_info(node("n", cpu="8"), pod("a", cpu="1"), pod("b", cpu="2", ports=ports),
                   pod("anti", cpu="1", affinity=ANTI), pod("d", cpu="500m"))
    ni.fits_shape = 7
    epoch = NodeInfo.change_epoch
    for gone in ({"uid-b"}, {"uid-a", "uid-b", "uid-anti"}, {"uid-a", "uid-b", "uid-anti", "uid-d", "uid-x"}):
        # one pod off is taken off; most of them (or all) is a copy rebuilt from the rest
        expected = ni.clone()
        for uid in gone:
            expected.remove_pod(uid)
        got = ni.without(gone)
        for s in NodeInfo.__slots__:
            assert getattr(got, s) == getattr(expected, s), (gone, s)
        assert (got.free_cpu, got.used_cpu, got.free_pods, got.fits_shape) == (
            expected.free_cpu, expected.used_cpu, expected.free_pods, None)
    assert len(ni.pods) == 4 and ni.used_cpu == 4500 and ni.ports and ni.fits_shape == 7
    assert NodeInfo.change_epoch > epoch


def _names(nodes) -> set[str]:
    return {n.name for n in nodes}


def test_snapshot_lists_nodes_with_affinity_pods_through_cache_and_in_place_changes():
    cache, snap = Cache(), Snapshot()
    for name in ("a", "b", "c"):
        cache.add_node(node(name))
    cache.assume(info(pod("anti", affinity=ANTI)), "a")
    cache.add_pod(info(pod("pref", affinity=PREFERRED)), "b")
    cache.add_pod(info(pod("plain")), "c")
    cache.update_snapshot(snap)
    assert _names(snap.have_pods_with_affinity()) == {"a", "b"}
    assert _names(snap.have_pods_with_required_anti_affinity()) == {"a"}
    # the workload cycle's trial placements change the snapshot's NodeInfos in place
    trial = info(pod("trial", affinity=ANTI))
    snap.infos["c"].add_pod(trial)
    assert _names(snap.have_pods_with_required_anti_affinity()) == {"a", "c"}
    assert {n.name: n for n in snap.have_pods_with_required_anti_affinity()}["c"] is snap.infos["c"]
    snap.infos["c"].remove_pod(trial.uid)
    assert _names(snap.have_pods_with_required_anti_affinity()) == {"a"}
    # the cache's own changes arrive as freshly cloned nodes
    cache.remove_pod("uid-anti")
    cache.assume(info(pod("anti2", affinity=ANTI)), "b")
    cache.update_snapshot(snap)
    assert _names(snap.have_pods_with_required_anti_affinity()) == {"b"}
    assert {n.name: n for n in snap.have_pods_with_affinity()}["b"] is snap.infos["b"]
    cache.remove_node("b")
    cache.update_snapshot(snap)
    assert not snap.have_pods_with_affinity() and not snap.have_pods_with_required_anti_affinity()
    # a view over some of the nodes lists only those
    view = Snapshot()
    view.nodes = [snap.infos["a"], snap.infos["c"]]
    snap.infos["a"].add_pod(info(pod("anti3", affinity=ANTI)))
    assert _names(view.have_pods_with_required_anti_affinity()) == {"a"}


def test_binding_seen_reuses_the_assumed_pod_info_unless_requests_changed():
    cache = Cache()
    cache.add_node(node("n"))
    assumed = info(pod("p", "1", "1Gi"))
    cache.assume(assumed, "n")
    assert cache.assumed_info("uid-p") is assumed
    bound = pod("p", "1", "1Gi", nodeName="n")
    assert assumed.same_requests(bound)
    resized = pod("p", "2", "1Gi", nodeName="n")
    assert not assumed.same_requests(resized)
    other = info(pod("p", "1", "1Gi"))
    other.update(resized)
    assert other.requests.milli_cpu == 2000
    cache.add_pod(PodInfo(bound, 0.0), "n")
    assert cache.assumed_info("uid-p") is None and cache.infos["n"].requested.milli_cpu == 1000


def test_pod_info_follows_a_resize_and_a_status_write_keeps_what_the_spec_gave():
    """Requests are parsed when first read and again after a resize; a write that keeps the spec
    object (a status patch through the watch cache) keeps them, the key, uid and group, but not the
    values plugins derived from the old pod; a pod recreated with the same spec is another uid."""
    group = {"podGroupName": "g"}
    i = info(pod("p", "1", "1Gi", schedulingGroup=group))
    assert i.requests.milli_cpu == 1000 and i.nonzero.milli_cpu == 1000 and i.group == "default/g"
    i.update(pod("p", "2", "1Gi", schedulingGroup=group))
    assert i.requests.milli_cpu == 2000 and i.nonzero.milli_cpu == 2000
    seen = []
    i.derived("probe", seen.append)
    written = {**i.pod, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    i.update(written)
    assert (i.pod, i.key, i.uid, i.group, i.requests.milli_cpu) == (written, "default/p", "uid-p", "default/g", 2000)
    i.derived("probe", seen.append)
    assert len(seen) == 2 and seen[1] is written
    i.update({**written, "metadata": {**written["metadata"], "uid": "uid-p2"}})
    assert i.uid == "uid-p2"


def test_confirming_an_assumed_pod_with_its_own_info_changes_no_node():
    cache, snap = Cache(), Snapshot()
    cache.add_node(node("n"))
    assumed = info(pod("p", "1", "1Gi"))
    cache.assume(assumed, "n")
    cache.update_snapshot(snap)
    assumed.update(pod("p", "1", "1Gi", nodeName="n"), same_requests=True)
    cache.add_pod(assumed, "n")
    assert not cache.is_assumed("uid-p") and cache.pod_nodes["uid-p"] == "n"
    assert snap.generation == cache.generation  # nothing to clone into the next snapshot
    assert cache.infos["n"].requested.milli_cpu == 1000 and list(cache.infos["n"].pods) == ["uid-p"]
    cache.remove_pod("uid-p")
    assert cache.infos["n"].requested.milli_cpu == 0 and not cache.infos["n"].pods


def test_node_info_flat_totals_follow_pods_and_node_updates():
    ni = node_info(node("n", "4", "8Gi", pods="3"), pod("a", "1", "1Gi"), pod("b"))
    assert (ni.alloc_cpu, ni.alloc_memory, ni.used_cpu, ni.used_memory) == (4000, 8 << 30, 1000, 1 << 30)
    assert (ni.nonzero_cpu, ni.nonzero_memory) == (1100, (1 << 30) + 200 * 1024 * 1024)
    assert (ni.free_cpu, ni.free_memory, ni.free_pods) == (3000, 7 << 30, 1)
    copy = ni.clone()
    ni.remove_pod("uid-a")
    assert (ni.free_cpu, ni.free_memory, ni.free_pods, ni.nonzero_cpu) == (4000, 8 << 30, 2, 100)
    assert (copy.free_cpu, copy.free_pods) == (3000, 1)
    ni.set_node(node("n", "2", "8Gi", pods="1"))
    assert (ni.alloc_cpu, ni.free_cpu, ni.free_pods) == (2000, 2000, 0)


def test_snapshot_lists_nodes_in_the_order_the_cache_got_them():
    """The search order (and so the placements) does not depend on the process's string hashing."""
    cache, snap = Cache(), Snapshot()
    names = [f"node-{i * 37 % 101}" for i in range(101)]
    for name in names:
        cache.add_node(node(name))
    cache.update_snapshot(snap)
    assert [n.name for n in snap.nodes] == names


def test_snapshot_counts_unschedulable_and_tainted_nodes_for_the_filters():
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    cache, snap = Cache(), Snapshot()
    for i in range(4):
        cache.add_node(node(f"n{i}"))
    cache.update_snapshot(snap)
    assert snap.none_unschedulable() and snap.none_tainted()
    cache.update_node(node("n1", taints=[taint]))
    cache.update_node(node("n2", unschedulable=True))
    cache.update_snapshot(snap)
    assert (snap.num_unschedulable, snap.num_tainted) == (1, 1)
    state, p = CycleState(), info(pod("p"))
    state.snapshot = snap
    assert list(TaintToleration({}, None).filter_nodes(state, p, snap.nodes)) == [1]
    assert list(NodeUnschedulable({}, None).filter_nodes(state, p, snap.nodes)) == [2]
    cache.update_node(node("n1"))
    cache.remove_node("n2")
    cache.update_snapshot(snap)
    assert snap.none_unschedulable() and snap.none_tainted()
    # a view's nodes are set directly: nothing is known without a walk
    view = Snapshot()
    view.nodes = [node_info(node("v", taints=[taint], unschedulable=True))]
    state.snapshot = view
    assert not view.none_tainted() and list(TaintToleration({}, None).filter_nodes(state, p, view.nodes)) == [0]
    assert list(NodeUnschedulable({}, None).filter_nodes(state, p, view.nodes)) == [0]


def test_kept_columns_follow_replaced_nodes_wrapped_windows_and_in_place_changes():
    """A window's values are taken from the column only where its node was not replaced or
    changed since; every answer equals working each node out afresh."""
    cache, snap = Cache(), Snapshot()
    for i in range(6):
        cache.add_node(node(f"n{i}"))
    cache.update_snapshot(snap)
    kept, computed = KeptColumns(), []

    def pods(n):
        computed.append(n.name)
        return len(n.pods)

    def window(p, k):
        return [snap.nodes[(p + i) % len(snap.nodes)] for i in range(k)]

    assert kept.values(1, snap, window(0, 4), pods) == [0, 0, 0, 0] and len(computed) == 4
    computed.clear()
    assert kept.values(1, snap, window(0, 4), pods) == [0, 0, 0, 0] and computed == []
    cache.assume(info(pod("a")), "n1")
    cache.add_pod(info(pod("b")), "n5")
    cache.update_snapshot(snap)
    assert kept.values(1, snap, window(0, 4), pods) == [0, 1, 0, 0] and computed == ["n1"]
    computed.clear()
    # a window wrapping around the end: n4 and n5 never worked out, n0 and n1 kept
    assert kept.values(1, snap, window(4, 4), pods) == [0, 1, 0, 1] and computed == ["n4", "n5"]
    computed.clear()
    # another shape has a column of its own; a list that is no window is left to the plugin
    assert kept.values(2, snap, window(1, 2), pods) == [1, 0] and computed == ["n1", "n2"]
    computed.clear()
    assert kept.values(1, snap, [snap.nodes[0], snap.nodes[2]], pods) is None and computed == []
    # a NodeInfo changed in place (a trial placement) drops every column
    snap.nodes[2].add_pod(info(pod("c")))
    assert kept.values(1, snap, window(0, 4), pods) == [0, 1, 1, 0] and len(computed) == 4
    snap.nodes[2].remove_pod("uid-c")
    computed.clear()
    # a node added moves positions: the columns start over
    cache.add_node(node("n6"))
    cache.update_snapshot(snap)
    assert kept.values(1, snap, window(0, 7), pods) == [0, 1, 0, 0, 0, 1, 0] and len(computed) == 7


def test_node_updates_keep_the_order_and_columns_only_the_tree_changing_moves_them():
    """A kubelet's status post or an allocatable change replaces the node in its place: columns
    recompute that node alone. A zone relabel moves the node in the tree, and a node added,
    deleted, or deleted and seen again changes the tree too: each lists the order again."""
    zone = "topology.kubernetes.io/zone"
    cache, snap, kept, computed = Cache(), Snapshot(), KeptColumns(), []
    for i in range(4):
        cache.add_node(node(f"n{i}", labels={zone: "a"}))
    cache.update_snapshot(snap)

    def free_cpu(n):
        computed.append(n.name)
        return n.free_cpu

    assert kept.values(1, snap, snap.nodes, free_cpu) == [4000] * 4
    layout, computed[:] = snap.layout, []
    beat = node("n1", labels={zone: "a"})
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:10Z"}]
    cache.update_node(beat)
    cache.update_node(node("n2", labels={zone: "a", "rack": "r2"}))
    cache.update_node(node("n3", cpu="2", labels={zone: "a"}))
    cache.update_snapshot(snap)
    assert snap.layout == layout and [n.name for n in snap.nodes] == ["n0", "n1", "n2", "n3"]
    assert snap.nodes[1].node is beat and snap.nodes_with_labels({"rack": "r2"}) == {"n2"}
    assert kept.values(1, snap, snap.nodes, free_cpu) == [4000, 4000, 4000, 2000]
    assert computed == ["n1", "n2", "n3"]
    # the heartbeat kept the node's totals, and the results kept for them, in the cache's NodeInfo
    cache.infos["n1"].fits_shape = 7
    cache.update_node(beat)
    assert cache.infos["n1"].fits_shape == 7
    cache.update_node(node("n1", cpu="3", labels={zone: "a"}))
    assert cache.infos["n1"].fits_shape is None and cache.infos["n1"].free_cpu == 3000
    cache.update_snapshot(snap)
    assert snap.layout == layout
    computed.clear()
    # n2 moves to zone b: zones a (n0 n1 n3) and b (n2) in turn
    cache.update_node(node("n2", labels={zone: "b"}))
    cache.update_snapshot(snap)
    assert snap.layout == layout + 1 and [n.name for n in snap.nodes] == ["n0", "n2", "n1", "n3"]
    assert snap.nodes_with_labels({zone: "b"}) == {"n2"}
    assert kept.values(1, snap, snap.nodes, free_cpu) == [4000, 4000, 3000, 2000] and len(computed) == 4
    # a node without a zone is in zone "", seen third
    cache.add_node(node("n4"))
    cache.update_snapshot(snap)
    assert snap.layout == layout + 2 and [n.name for n in snap.nodes] == ["n0", "n2", "n4", "n1", "n3"]
    cache.remove_node("n0")
    cache.update_snapshot(snap)
    assert snap.layout == layout + 3 and [n.name for n in snap.nodes] == ["n1", "n2", "n4", "n3"]
    cache.add_node(node("n0", labels={zone: "a"}))
    cache.update_snapshot(snap)
    assert snap.layout == layout + 4 and [n.name for n in snap.nodes] == ["n1", "n2", "n4", "n3", "n0"]
    assert snap.index == {"n1": 0, "n2": 1, "n4": 2, "n3": 3, "n0": 4}


def test_pods_of_a_node_not_in_the_snapshot_change_nothing_there():
    """Pods bound to a node deleted before them (the pod GC's work), or to one not seen yet, are
    held by the cache but leave the snapshot's nodes as they are; the node appearing adds it."""
    cache, snap = Cache(), Snapshot()
    cache.add_node(node("a"))
    cache.add_node(node("b"))
    cache.add_pod(info(pod("p1")), "b")
    cache.add_pod(info(pod("p2")), "b")
    cache.update_snapshot(snap)
    cache.remove_node("b")
    cache.update_snapshot(snap)
    layout = snap.layout
    cache.remove_pod("uid-p1")
    cache.add_pod(info(pod("q1")), "c")
    cache.update_snapshot(snap)
    cache.add_pod(info(pod("q2")), "c")
    cache.remove_pod("uid-p2")
    cache.update_snapshot(snap)
    assert snap.layout == layout and [n.name for n in snap.nodes] == ["a"] and set(snap.infos) == {"a"}
    assert "b" not in cache.infos and set(cache.infos["c"].pods) == {"uid-q1", "uid-q2"}
    cache.add_node(node("c"))
    cache.update_snapshot(snap)
    assert snap.layout == layout + 1 and [n.name for n in snap.nodes] == ["a", "c"]
    assert snap.nodes[1].nonzero_cpu == 200 and snap.nodes[1].free_pods == 108
