"""InterPodAffinity Filter and Score: required terms both ways, namespace
selection and preferred-term weights."""

from types import SimpleNamespace

from nanokube.scheduler.cache import Snapshot
from nanokube.scheduler.framework import Code, CycleState, Hint
from nanokube.scheduler.plugins.inter_pod_affinity import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
)
from nanokube.registry.core_pods import merge_label_keys
from tests.scheduler import info, node, node_info, pod, scores

NAMESPACES = {"default": {"metadata": {"name": "default", "labels": {"team": "blue"}}},
              "other": {"metadata": {"name": "other", "labels": {"team": "red"}}}}


def labelled(name, labels, ns="default", **spec):
    p = pod(name, **spec)
    p["metadata"].update(labels=labels, namespace=ns)
    return p


def zoned(name, zone, *pods):
    return node_info(node(name, labels={"zone": zone, "kubernetes.io/hostname": name}), *pods)


def plugin_for(*infos, **args):
    snap = Snapshot()
    snap.nodes = list(infos)
    handle = SimpleNamespace(snapshot=snap, informer=lambda *gvr: SimpleNamespace(get=NAMESPACES.get))
    return InterPodAffinity(args, handle)


def term(labels, key="zone", **extra):
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def required(kind, *terms):
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def filter_reasons(plugin, p, nodes):
    st = CycleState()
    _, s = plugin.pre_filter(st, info(p))
    if s is not None:
        assert s.code == Code.SKIP
        return dict.fromkeys(n.name for n in nodes)
    out = {}
    for n in nodes:
        r = plugin.filter(st, info(p), n)
        out[n.name] = None if r is None else r.reasons[0]
    return out


def test_affinity_needs_a_matching_pod_in_the_same_zone():
    a1, a2, b1 = zoned("a1", "a", labelled("db", {"app": "db"})), zoned("a2", "a"), zoned("b1", "b")
    bare = node_info(node("bare"))
    plugin = plugin_for(a1, a2, b1, bare)
    p = labelled("web", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"})))
    assert filter_reasons(plugin, p, [a1, a2, b1, bare]) == {
        "a1": None, "a2": None, "b1": REASON_AFFINITY, "bare": REASON_AFFINITY}


def test_first_pod_of_a_self_affine_group_may_go_anywhere_with_the_key():
    a1, bare = zoned("a1", "a"), node_info(node("bare"))
    plugin = plugin_for(a1, bare)
    p = labelled("web", {"app": "web"}, affinity=required("podAffinity", term({"app": "web"})))
    st = CycleState()
    plugin.pre_filter(st, info(p))
    assert plugin.filter(st, info(p), a1) is None
    rejected = plugin.filter(st, info(p), bare)
    assert rejected.reasons == [REASON_AFFINITY] and rejected.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    other = labelled("web", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"})))
    assert filter_reasons(plugin, other, [a1]) == {"a1": REASON_AFFINITY}


def test_anti_affinity_keeps_out_of_zones_with_matching_pods():
    a1, a2, b1 = zoned("a1", "a", labelled("w1", {"app": "web"})), zoned("a2", "a"), zoned("b1", "b")
    plugin = plugin_for(a1, a2, b1)
    p = labelled("w2", {"app": "web"}, affinity=required("podAntiAffinity", term({"app": "web"})))
    assert filter_reasons(plugin, p, [a1, a2, b1]) == {"a1": REASON_ANTI_AFFINITY, "a2": REASON_ANTI_AFFINITY, "b1": None}
    st = CycleState()
    plugin.pre_filter(st, info(p))
    assert plugin.filter(st, info(p), a2).code == Code.UNSCHEDULABLE


def test_existing_pods_anti_affinity_repels_the_incoming_pod():
    guard = labelled("guard", {"app": "guard"},
                     affinity=required("podAntiAffinity", term({"app": "web"}, "kubernetes.io/hostname")))
    n1, n2 = zoned("n1", "a", guard), zoned("n2", "a")
    plugin = plugin_for(n1, n2)
    assert filter_reasons(plugin, labelled("w", {"app": "web"}), [n1, n2]) == {"n1": REASON_EXISTING_ANTI_AFFINITY, "n2": None}
    assert filter_reasons(plugin, labelled("d", {"app": "db"}), [n1, n2]) == {"n1": None, "n2": None}


def test_terms_match_their_own_namespace_unless_namespaces_or_selector_say_otherwise():
    a1, b1 = zoned("a1", "a", labelled("db", {"app": "db"}, ns="other")), zoned("b1", "b")
    plugin = plugin_for(a1, b1)
    plain = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"})))
    assert filter_reasons(plugin, plain, [a1]) == {"a1": REASON_AFFINITY}
    listed = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"}, namespaces=["other"])))
    assert filter_reasons(plugin, listed, [a1, b1]) == {"a1": None, "b1": REASON_AFFINITY}
    by_label = labelled("w", {"app": "web"}, affinity=required(
        "podAffinity", term({"app": "db"}, namespaceSelector={"matchLabels": {"team": "red"}})))
    assert filter_reasons(plugin, by_label, [a1, b1]) == {"a1": None, "b1": REASON_AFFINITY}
    everywhere = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"}, namespaceSelector={})))
    assert filter_reasons(plugin, everywhere, [a1]) == {"a1": None}


def test_mismatch_label_keys_exclude_the_pods_own_value():
    a1, b1 = zoned("a1", "a", labelled("w1", {"app": "web", "tenant": "x"})), zoned("b1", "b")
    plugin = plugin_for(a1, b1)
    p = labelled("w2", {"app": "web", "tenant": "x"},
                 affinity=required("podAntiAffinity", term({"app": "web"}, mismatchLabelKeys=["tenant"])))
    assert filter_reasons(plugin, p, [a1]) == {"a1": REASON_ANTI_AFFINITY}  # the scheduler reads the selector alone
    merge_label_keys(p["spec"], p["metadata"]["labels"])  # as the API server stores the pod
    assert filter_reasons(plugin, p, [a1]) == {"a1": None}


def test_pre_filter_skips_when_nothing_constrains():
    plugin = plugin_for(zoned("a1", "a", labelled("db", {"app": "db"})))
    _, st = plugin.pre_filter(CycleState(), info(labelled("w", {"app": "web"})))
    assert st.code == Code.SKIP


def preferred(kind, weight, t):
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": t}]}}


def test_preferred_terms_weight_zones_both_ways():
    a1, b1, c1 = zoned("a1", "a", labelled("db", {"app": "db"})), zoned("b1", "b", labelled("w1", {"app": "web"})), zoned("c1", "c")
    plugin = plugin_for(a1, b1, c1)
    p = labelled("w2", {"app": "web"}, affinity={**preferred("podAffinity", 10, term({"app": "db"})),
                                                 **preferred("podAntiAffinity", 5, term({"app": "web"}))})
    assert scores(plugin, p, [a1, b1, c1]) == [100, 0, 33]


def test_existing_pods_terms_score_the_incoming_pod():
    fan = labelled("fan", {"app": "fan"}, affinity=preferred("podAffinity", 4, term({"app": "web"})))
    sticky = labelled("sticky", {"app": "s"}, affinity=required("podAffinity", term({"app": "web"})))
    a1, b1, c1 = zoned("a1", "a", fan), zoned("b1", "b", sticky), zoned("c1", "c")
    assert scores(plugin_for(a1, b1, c1), labelled("w", {"app": "web"}), [a1, b1, c1]) == [100, 25, 0]
    assert scores(plugin_for(a1, b1, c1, hardPodAffinityWeight=0), labelled("w", {"app": "web"}), [a1, b1, c1]) == [100, 0, 0]
    assert scores(plugin_for(a1, b1, c1), labelled("x", {"app": "x"}), [a1, b1, c1]) is None


def test_queueing_hints_requeue_for_matching_pods_and_departing_guards():
    plugin = plugin_for()
    regs = {r.event.resource: r for r in plugin.events_to_register()}
    p = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"})))
    assert regs["Pod"].hint(p, None, labelled("db", {"app": "db"})) == Hint.QUEUE
    assert regs["Pod"].hint(p, None, labelled("x", {"app": "x"})) == Hint.SKIP
    guard = labelled("g", {"app": "g"}, affinity=required("podAntiAffinity", term({"app": "web"})))
    assert regs["Pod"].hint(labelled("w", {"app": "web"}), guard, None) == Hint.QUEUE


async def test_scheduler_spreads_anti_affine_replicas_over_hosts():
    from nanokube.scheduler.scheduler import Scheduler
    from tests.controllers import eventually, make_stack
    from tests.scheduler.test_scheduler import add_node

    s = await make_stack()
    for name in ("h1", "h2"):
        await add_node(s.client, node(name, labels={"kubernetes.io/hostname": name}))
    sched = Scheduler(s.client, seed=1)
    await sched.start()
    try:
        pods = s.client.resource("", "v1", "pods")
        anti = required("podAntiAffinity", term({"app": "web"}, "kubernetes.io/hostname"))
        for name in ("w1", "w2", "w3"):
            p = labelled(name, {"app": "web"}, affinity=anti)
            del p["metadata"]["uid"]
            await pods.create(p)

        async def placed():
            items, _ = await pods.list("default")
            hosts = sorted(p["spec"].get("nodeName") or "" for p in items)
            return hosts if hosts.count("") == 1 and all(h for h in hosts[1:]) else None

        assert await eventually(placed) == ["", "h1", "h2"]

        async def failed():
            items, _ = await s.client.resource("", "v1", "events").list("default")
            return [e["message"] for e in items if e["reason"] == "FailedScheduling"]

        assert "2 node(s) didn't match pod anti-affinity rules" in (await eventually(failed))[0]
    finally:
        await sched.stop()
        await s.close()


def test_node_hint_queues_only_for_changes_of_the_terms_topology_keys():
    [hint] = [r.hint for r in plugin_for().events_to_register() if r.event.resource == "Node"]
    affine = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"})))
    anti = labelled("s", {"app": "s"}, affinity=required("podAntiAffinity", term({"app": "db"})))
    bystander = labelled("b", {"app": "b"})  # turned away by other pods' anti-affinity only
    bare, a, a_rack, b = node("n"), node("n", labels={"zone": "a"}), node("n", labels={"zone": "a", "rack": "1"}), \
        node("n", labels={"zone": "b"})
    cases = [  # pod, old, new, queued
        (affine, None, bare, False), (affine, None, a, True), (affine, bare, a, True), (affine, a, b, True),
        (affine, a, a_rack, False), (affine, a, bare, False),
        (anti, None, bare, True), (anti, a, bare, True), (anti, a, b, True), (anti, bare, a, False),
        (anti, a, a_rack, False),
        (bystander, None, bare, True), (bystander, a, a_rack, True), (bystander, a, a, False),
    ]
    for p, old, new, queued in cases:
        assert (hint(p, old, new) == Hint.QUEUE) is queued, (p["metadata"]["name"], old, new)


def test_pod_hint_follows_upstreams_matching_rules():
    [hint] = [r.hint for r in plugin_for().events_to_register() if r.event.resource == "Pod"]
    affine = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "db"}), term({"tier": "1"})))
    db, db1 = labelled("db", {"app": "db"}), labelled("db", {"app": "db", "tier": "1"})
    assert hint(affine, None, db) == Hint.SKIP  # a pod must match every affinity term
    assert hint(affine, None, db1) == Hint.QUEUE
    assert hint(affine, db, db1) == Hint.QUEUE and hint(affine, db1, db1) == Hint.SKIP
    assert hint(affine, db1, None) == Hint.SKIP  # one fewer match cannot help
    anti = labelled("s", {"app": "s"}, affinity=required("podAntiAffinity", term({"app": "db"}), term({"tier": "1"})))
    assert hint(anti, None, db1) == Hint.SKIP  # one more hated pod cannot help
    assert hint(anti, db, None) == Hint.QUEUE  # hated by any one term
    assert hint(anti, db1, db) == Hint.SKIP and hint(anti, db, labelled("db", {"app": "x"})) == Hint.QUEUE
    # the last pod a self-affine pod matches going lets it go anywhere (the first of its group)
    self_affine = labelled("w", {"app": "web"}, affinity=required("podAffinity", term({"app": "web"})))
    assert hint(self_affine, labelled("w0", {"app": "web"}), None) == Hint.QUEUE
    assert hint(affine, labelled("w0", {"app": "web"}), None) == Hint.SKIP
