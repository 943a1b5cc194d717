"""The cache's NodeTree orders the snapshot as upstream's nodeTree.list(): the zones in the
order first seen, taken in turn, each node once; a zone relabel moves the node last in its
new zone, and a zone left empty comes back last."""

from nanokube.scheduler.cache import Cache, Snapshot
from nanokube.scheduler.node_tree import BETA_REGION, BETA_ZONE, REGION, ZONE, zone_key
from tests.scheduler import node


def _order(cache: Cache, snap: Snapshot) -> list[str]:
    cache.update_snapshot(snap)
    assert snap.index == {n.name: i for i, n in enumerate(snap.nodes)}
    return [n.name for n in snap.nodes]


def _in(z: str, region: str = "r1") -> dict:
    return {REGION: region, ZONE: z}


def test_zone_key_reads_region_and_zone_the_beta_labels_first():
    assert zone_key({}) == "" and zone_key({"rack": "r"}) == ""
    assert zone_key({ZONE: "z"}) == ":\x00:z" and zone_key({REGION: "r"}) == "r:\x00:"
    assert zone_key({REGION: "r", ZONE: "z", BETA_REGION: "old-r", BETA_ZONE: "old-z"}) == "old-r:\x00:old-z"
    # a beta label present but empty still wins, as upstream's map lookup has it
    assert zone_key({REGION: "r", ZONE: "z", BETA_ZONE: ""}) == "r:\x00:"
    # the same zone name in two regions is two zones
    assert zone_key(_in("z", "r1")) != zone_key(_in("z", "r2"))


def test_three_zones_of_uneven_sizes_are_taken_in_turn():
    """Zone a has 5 nodes, b 2, c 3, added interleaved with one another; once a zone runs out
    the others go on in turn. Nodes with no zone labels, or a region only, are zones too."""
    cache, snap = Cache(), Snapshot()
    for name, z in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("c1", "c"), ("a3", "a"), ("c2", "c"),
                    ("b2", "b"), ("a4", "a"), ("c3", "c"), ("a5", "a")):
        cache.add_node(node(name, labels=_in(z)))
    assert _order(cache, snap) == ["a1", "b1", "c1", "a2", "b2", "c2", "a3", "c3", "a4", "a5"]
    # upstream's own shape: unlabelled, region only, zone only, then full labels in two regions
    cache, snap = Cache(), Snapshot()
    for name, labels in (("n0", {}), ("n1", {REGION: "r1"}), ("n2", {ZONE: "z2"}), ("n3", _in("z2")),
                         ("n4", _in("z2")), ("n5", _in("z3")), ("n6", _in("z2", "r2")),
                         ("n7", _in("z2", "r2")), ("n8", _in("z2", "r2"))):
        cache.add_node(node(name, labels=labels))
    assert _order(cache, snap) == ["n0", "n1", "n2", "n3", "n5", "n6", "n4", "n7", "n8"]


def test_nodes_and_zones_coming_and_going():
    cache, snap = Cache(), Snapshot()
    for name, z in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b"), ("c1", "c"), ("a3", "a")):
        cache.add_node(node(name, labels=_in(z)))
    assert _order(cache, snap) == ["a1", "b1", "c1", "a2", "b2", "a3"]
    layout = snap.layout
    # an update in the same zone, or of a node the tree does not hold, moves nothing
    cache.update_node(node("a2", cpu="8", labels=_in("a")))
    cache.remove_node("never-seen")
    assert _order(cache, snap) == ["a1", "b1", "c1", "a2", "b2", "a3"] and snap.layout == layout
    # a node added goes last in its zone
    cache.add_node(node("c2", labels=_in("c")))
    assert _order(cache, snap) == ["a1", "b1", "c1", "a2", "b2", "c2", "a3"] and snap.layout == layout + 1
    # zone b emptied is dropped; seen again it comes after c
    cache.remove_node("b1")
    cache.remove_node("b2")
    assert _order(cache, snap) == ["a1", "c1", "a2", "c2", "a3"]
    cache.add_node(node("b3", labels=_in("b")))
    assert _order(cache, snap) == ["a1", "c1", "b3", "a2", "c2", "a3"]
    # a node deleted and re-created goes last in its zone
    cache.remove_node("a1")
    cache.add_node(node("a1", labels=_in("a")))
    assert _order(cache, snap) == ["a2", "c1", "b3", "a3", "c2", "a1"]
    for name in ("a1", "a2", "a3", "b3", "c1", "c2"):
        cache.remove_node(name)
    assert _order(cache, snap) == [] and not snap.infos and not cache.tree.zones


def test_a_zone_label_change_moves_the_node_last_in_its_new_zone():
    cache, snap = Cache(), Snapshot()
    for name, z in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b")):
        cache.add_node(node(name, labels=_in(z)))
    assert _order(cache, snap) == ["a1", "b1", "a2", "b2", "a3"]
    layout = snap.layout
    cache.update_node(node("a1", labels=_in("b")))
    assert _order(cache, snap) == ["a2", "b1", "a3", "b2", "a1"] and snap.layout == layout + 1
    # the deprecated label takes precedence: a1 moves to zone "old" (a new, third zone)
    cache.update_node(node("a1", labels={**_in("b"), BETA_REGION: "r1", BETA_ZONE: "old"}))
    assert _order(cache, snap) == ["a2", "b1", "a1", "a3", "b2"]
    # another region is another zone even with the same zone name; an emptied zone is dropped
    cache.update_node(node("a1", labels=_in("a", "r2")))
    assert _order(cache, snap) == ["a2", "b1", "a1", "a3", "b2"] and list(cache.tree.zones) == [
        zone_key(_in("a")), zone_key(_in("b")), zone_key(_in("a", "r2"))]
    # the node's other labels follow it into the snapshot as any update's
    assert snap.nodes_with_labels({REGION: "r2"}) == {"a1"}


def _three_zones() -> list[dict]:
    """150 nodes, named (and so listed) zone by zone: a has 80, b 50, and c 20 nodes twice as big."""
    return [node(f"{z}-{i:02}", cpu, mem, labels=_in(z))
            for z, count, cpu, mem in (("a", 80, "4", "32Gi"), ("b", 50, "4", "32Gi"), ("c", 20, "8", "64Gi"))
            for i in range(count)]


def test_a_search_cut_short_by_percentage_of_nodes_to_score_meets_every_zone():
    """10% of 150 nodes is under upstream's floor of 100 feasible nodes: the search stops after
    100. Listed zone by zone those would be a's 80 and 20 of b's; taken in turn they are 40 of
    a, 40 of b and all 20 of c. The next search starts where this one stopped: the last 50 of the
    list (40 of a, 10 of b) and, wrapping round, its first 50 (17 of a, 17 of b, 16 of c)."""
    from nanokube.scheduler.cycle import Algorithm
    from nanokube.scheduler.framework import CycleState, Framework, Profile
    from nanokube.scheduler.metrics import Metrics
    from nanokube.scheduler.plugins.node_resources_fit import NodeResourcesFit
    from nanokube.scheduler.plugins.priority_sort import PrioritySort
    from tests.scheduler import FakeClock, info, pod

    cache, snap = Cache(), Snapshot()
    for n in _three_zones():
        cache.add_node(n)
    cache.update_snapshot(snap)
    plugins = [PrioritySort({}, None), NodeResourcesFit({}, None)]
    fwk = Framework(Profile(plugins=[p.name for p in plugins], percentage_of_nodes_to_score=10), plugins, Metrics(),
                    FakeClock())
    alg = Algorithm()
    for start in (0, 100):
        feasible = alg.find_nodes(fwk, CycleState(), info(pod("p", "1", "1Gi")), snap)
        zones = [n.name[0] for n in feasible]
        assert feasible[0] is snap.nodes[start] and alg.next_start == (start + 100) % 150
        assert {z: zones.count(z) for z in "abc"} == ({"a": 40, "b": 40, "c": 20} if start == 0 else
                                                      {"a": 57, "b": 27, "c": 16})


async def test_a_pod_reaches_the_zone_an_unzoned_order_would_not_search():
    """Through the API: with percentageOfNodesToScore 10 the scheduler searches 100 of the 150
    nodes; zone c's bigger nodes score best, and they are among those 100 only because the
    search takes the zones in turn (in name order, the first 100 hold none of them)."""
    from nanokube.scheduler.config import parse
    from nanokube.scheduler.scheduler import Scheduler
    from tests.controllers import eventually, make_stack
    from tests.scheduler import pod
    from tests.scheduler.test_scheduler import add_node, bound, strip_uid

    s = await make_stack()
    config = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                    "percentageOfNodesToScore": 10})
    sched = Scheduler(s.client, seed=1, config=config)
    try:
        for n in _three_zones():
            await add_node(s.client, n)
        await sched.start()
        pods = s.client.resource("", "v1", "pods")
        for name in ("p0", "p1", "p2"):
            await pods.create(strip_uid(pod(name, "1", "1Gi")))
        placed = [await eventually(bound(pods, name)) for name in ("p0", "p1", "p2")]
        assert all(p.startswith("c-") for p in placed) and len(set(placed)) == 3, placed
    finally:
        await sched.stop()
        await s.close()
