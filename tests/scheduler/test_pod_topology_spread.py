"""PodTopologySpread Filter and Score over a small zoned cluster."""

import copy
from types import SimpleNamespace

from nanokube.scheduler.cache import Snapshot
from nanokube.scheduler.framework import Code, CycleState, Hint
from nanokube.scheduler.plugins.pod_topology_spread import (
    REASON,
    REASON_MISSING_LABEL,
    PodTopologySpread,
)
from nanokube.registry.core_pods import merge_label_keys
from tests.scheduler import info, node, node_info, pod, scores


def labelled(name, labels, **spec):
    p = pod(name, **spec)
    p["metadata"]["labels"] = labels
    return p


class Objects:
    """A stand-in informer over fixed objects."""

    def __init__(self, objs=()):
        self.objs = {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in objs}

    def list(self):
        return list(self.objs.values())

    def get(self, key):
        return self.objs.get(key)


def cluster(*infos, args=None, objects=()):
    snap = Snapshot()
    snap.nodes = list(infos)
    snap.infos = {n.name: n for n in infos}
    by_plural = {}
    for o in objects:
        by_plural.setdefault(o["kind"].lower() + "s", []).append(o)
    handle = SimpleNamespace(snapshot=snap, informer=lambda group, version, plural: Objects(by_plural.get(plural, ())))
    return PodTopologySpread(args or {}, handle), snap


def zoned(name, zone, *pods, **kw):
    return node_info(node(name, labels={"zone": zone, "kubernetes.io/hostname": name}, **kw), *pods)


def spread(key="zone", skew=1, when="DoNotSchedule", **extra):
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


def web(name):
    return labelled(name, {"app": "web"})


def filter_reasons(plugin, p, nodes):
    st = CycleState()
    _, s = plugin.pre_filter(st, info(p))
    assert s is None
    out = {}
    for n in nodes:
        r = plugin.filter(st, info(p), n)
        out[n.name] = None if r is None else r.reasons[0]
    return out


def test_do_not_schedule_rejects_the_crowded_zone_and_unlabelled_nodes():
    a1, b1 = zoned("a1", "a", web("w1"), web("w2")), zoned("b1", "b", web("w3"))
    bare = node_info(node("bare"))
    plugin, _ = cluster(a1, b1, bare)
    got = filter_reasons(plugin, labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()]), [a1, b1, bare])
    assert got == {"a1": REASON, "b1": None, "bare": REASON_MISSING_LABEL}


def test_missing_label_is_unresolvable_and_skew_is_not():
    a1, bare = zoned("a1", "a", web("w1"), web("w2")), node_info(node("bare"))
    plugin, _ = cluster(a1, zoned("b1", "b"), bare)
    st = CycleState()
    p = info(labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()]))
    plugin.pre_filter(st, p)
    assert plugin.filter(st, p, bare).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert plugin.filter(st, p, a1).code == Code.UNSCHEDULABLE


def test_pods_not_matching_the_selector_or_in_other_namespaces_do_not_count():
    other_ns = web("w9")
    other_ns["metadata"]["namespace"] = "other"
    a1 = zoned("a1", "a", labelled("db", {"app": "db"}), other_ns)
    plugin, _ = cluster(a1, zoned("b1", "b"))
    got = filter_reasons(plugin, labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()]), [a1])
    assert got == {"a1": None}


def test_incoming_pod_not_matching_its_selector_adds_no_self_match():
    a1, b1 = zoned("a1", "a", web("w1")), zoned("b1", "b")
    plugin, _ = cluster(a1, b1)
    assert filter_reasons(plugin, labelled("new", {"app": "other"}, topologySpreadConstraints=[spread()]), [a1]) == {"a1": None}
    assert filter_reasons(plugin, labelled("n", {"app": "web"}, topologySpreadConstraints=[spread(skew=0)]),
                          [b1]) == {"b1": REASON}


def test_min_domains_treats_missing_domains_as_empty():
    a1 = zoned("a1", "a", web("w1"))
    plugin, _ = cluster(a1)
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()])
    assert filter_reasons(plugin, p, [a1]) == {"a1": None}
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread(minDomains=2)])
    assert filter_reasons(plugin, p, [a1]) == {"a1": REASON}


def test_node_affinity_policy_excludes_domains_the_pod_cannot_reach():
    a1, b1 = zoned("a1", "a", web("w1")), zoned("b1", "b")
    plugin, _ = cluster(a1, b1)
    honor = labelled("new", {"app": "web"}, nodeSelector={"zone": "a"}, topologySpreadConstraints=[spread()])
    assert filter_reasons(plugin, honor, [a1]) == {"a1": None}
    ignore = labelled("new", {"app": "web"}, nodeSelector={"zone": "a"},
                      topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")])
    assert filter_reasons(plugin, ignore, [a1]) == {"a1": REASON}


def test_node_taints_policy_honor_excludes_untolerated_nodes():
    taint = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    a1, b1 = zoned("a1", "a", web("w1")), zoned("b1", "b", taints=taint)
    plugin, _ = cluster(a1, b1)
    ignore = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()])
    assert filter_reasons(plugin, ignore, [a1]) == {"a1": REASON}
    honor = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")])
    assert filter_reasons(plugin, honor, [a1]) == {"a1": None}


def test_match_label_keys_narrow_the_selector_to_the_pods_revision():
    """The API server merged matchLabelKeys into the selector when the pod was created; the
    scheduler reads the selector alone, so a label changed since does not move it."""
    old = labelled("w1", {"app": "web", "rev": "1"})
    a1, b1 = zoned("a1", "a", old, labelled("w2", {"app": "web", "rev": "1"})), zoned("b1", "b")
    plugin, _ = cluster(a1, b1)
    p = labelled("new", {"app": "web", "rev": "2"}, topologySpreadConstraints=[spread(matchLabelKeys=["rev"])])
    merge_label_keys(p["spec"], p["metadata"]["labels"])
    assert filter_reasons(plugin, p, [a1]) == {"a1": None}
    p["metadata"]["labels"]["rev"] = "1"  # relabelled after create: still counts revision 2 alone
    assert filter_reasons(plugin, p, [a1]) == {"a1": None}
    made_as_1 = labelled("new", {"app": "web", "rev": "1"}, topologySpreadConstraints=[spread(matchLabelKeys=["rev"])])
    merge_label_keys(made_as_1["spec"], made_as_1["metadata"]["labels"])
    made_as_1["metadata"]["labels"]["rev"] = "2"
    assert filter_reasons(plugin, made_as_1, [a1]) == {"a1": REASON}


def test_pre_filter_skips_without_hard_constraints():
    plugin, _ = cluster(zoned("a1", "a"))
    _, st = plugin.pre_filter(CycleState(), info(labelled("new", {"app": "web"},
                                                          topologySpreadConstraints=[spread(when="ScheduleAnyway")])))
    assert st.code == Code.SKIP


def test_schedule_anyway_prefers_emptier_zones_and_zeroes_unlabelled_nodes():
    a1, a2 = zoned("a1", "a", web("w1"), web("w2")), zoned("a2", "a", web("w3"))
    b1, bare = zoned("b1", "b", web("w4")), node_info(node("bare"))
    plugin, _ = cluster(a1, a2, b1, bare)
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread(when="ScheduleAnyway")])
    got = scores(plugin, p, [a1, a2, b1, bare])
    assert got[3] == 0
    assert got[2] == 100 and got[0] == got[1] < got[2]


def test_hostname_constraint_counts_each_node():
    n1, n2, n3 = zoned("n1", "a", web("w1"), web("w2")), zoned("n2", "a", web("w3")), zoned("n3", "a")
    plugin, _ = cluster(n1, n2, n3)
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread("kubernetes.io/hostname", when="ScheduleAnyway")])
    got = scores(plugin, p, [n1, n2, n3])
    assert got[0] < got[1] < got[2] == 100


def test_no_matching_pods_score_every_node_the_maximum():
    plugin, _ = cluster(zoned("a1", "a"), zoned("b1", "b"))
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread(when="ScheduleAnyway")])
    assert scores(plugin, p, list(plugin.handle.snapshot.nodes)) == [100, 100]


def test_queueing_hints_follow_selected_pods_and_topology_labels():
    plugin, _ = cluster()
    regs = {r.event.resource: r for r in plugin.events_to_register()}
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()])
    assert regs["Pod"].hint(p, web("gone"), None) == Hint.QUEUE
    assert regs["Pod"].hint(p, None, labelled("db", {"app": "db"})) == Hint.SKIP
    assert regs["Node"].hint(p, None, node("n", labels={"zone": "c"})) == Hint.QUEUE
    assert regs["Node"].hint(p, None, node("n")) == Hint.SKIP


def test_node_update_hint_queues_only_for_a_change_to_the_spreading_domains():
    """Upstream's isSchedulableAfterNodeChange for updates: a node entering the domains (gaining the
    topology key), moving between them or changing its taints may help; another label or a cordon
    does not."""
    plugin, _ = cluster()
    [hint] = [r.hint for r in plugin.events_to_register() if r.event.resource == "Node"]
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()])
    zoned_a = node("n", labels={"zone": "a"})
    assert hint(p, node("n"), zoned_a) == Hint.QUEUE
    assert hint(p, zoned_a, node("n", labels={"zone": "b"})) == Hint.QUEUE
    assert hint(p, zoned_a, node("n", labels={"zone": "a"}, taints=[{"key": "k", "effect": "NoSchedule"}])) == Hint.QUEUE
    assert hint(p, zoned_a, node("n", labels={"zone": "a", "rack": "r1"})) == Hint.SKIP
    assert hint(p, zoned_a, node("n", labels={"zone": "a"}, unschedulable=True)) == Hint.SKIP
    assert hint(p, node("n"), node("n", labels={"rack": "r1"})) == Hint.SKIP


def service(name, selector):
    return {"kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}


def owned(name, labels, kind="ReplicaSet", api="apps/v1"):
    p = labelled(name, labels)
    p["metadata"]["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": "rs", "controller": True}]
    return p


def hosts(*infos):
    return [node_info(node(n.name, labels={"kubernetes.io/hostname": n.name}), *[p.pod for p in n.pods.values()])
            for n in infos]


def test_system_defaults_spread_pods_of_a_service_over_hostnames_without_zones():
    n1, n2 = hosts(zoned("n1", "a", web("w1"), web("w2")), zoned("n2", "a"))
    plugin, _ = cluster(n1, n2, objects=[service("web", {"app": "web"})])
    got = scores(plugin, web("new"), [n1, n2])
    assert got[0] < got[1] == 100
    st = CycleState()
    plugin.pre_score(st, info(web("new")), [n1, n2])
    soft = st["PreScorePodTopologySpread"][0]
    assert [(c.key, c.max_skew, c.hard) for c in soft] == [
        ("kubernetes.io/hostname", 3, False), ("topology.kubernetes.io/zone", 5, False)]


def test_system_defaults_use_the_controlling_replica_set_selector():
    rs = {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    a1, b1 = zoned("a1", "a", web("w1")), zoned("b1", "b")
    plugin, _ = cluster(a1, b1, objects=[rs])
    got = scores(plugin, owned("new", {"app": "web"}), [a1, b1])
    assert got[0] < got[1] == 100
    _, st = plugin.pre_filter(CycleState(), info(owned("new", {"app": "web"})))
    assert st.code == Code.SKIP


def test_no_defaults_for_pods_outside_a_workload_or_with_their_own_constraints():
    a1, b1 = zoned("a1", "a", web("w1")), zoned("b1", "b")
    plugin, _ = cluster(a1, b1, objects=[service("db", {"app": "db"}), service("none", None)])
    assert scores(plugin, web("loose"), [a1, b1]) is None
    mine = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread("kubernetes.io/hostname",
                                                                              when="ScheduleAnyway")])
    st = CycleState()
    plugin.pre_score(st, info(mine), [a1, b1])
    assert [c.key for c in st["PreScorePodTopologySpread"][0]] == ["kubernetes.io/hostname"]


def test_list_defaulting_uses_the_configured_constraints():
    args = {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                              "whenUnsatisfiable": "DoNotSchedule"}]}
    a1, a2, b1 = zoned("a1", "a", web("w1")), zoned("a2", "a", web("w2")), zoned("b1", "b")
    plugin, _ = cluster(a1, a2, b1, args=args, objects=[service("web", {"app": "web"})])
    assert filter_reasons(plugin, web("new"), [a1, b1]) == {"a1": REASON, "b1": None}
    assert cluster(a1, args={"defaultingType": "List"})[0].selectors is None


def test_pod_hints_as_upstreams_selection_changes_and_own_tolerations():
    plugin, _ = cluster()
    regs = {(r.event.resource, r.event.action): r.hint for r in plugin.events_to_register()}
    [pod_hint] = [h for (res, _), h in regs.items() if res == "Pod"]
    [toleration_hint] = [h for (res, _), h in regs.items() if res == "UnscheduledPod"]
    p = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread()])
    relabelled = labelled("w", {"app": "web", "version": "2"})
    assert pod_hint(p, web("w"), relabelled) == Hint.SKIP  # selected before and after
    assert pod_hint(p, web("w"), labelled("w", {"app": "db"})) == Hint.QUEUE
    assert pod_hint(p, labelled("w", {"app": "db"}), web("w")) == Hint.QUEUE
    elsewhere = labelled("w", {"app": "web"})
    elsewhere["metadata"]["namespace"] = "other"
    assert pod_hint(p, None, elsewhere) == pod_hint(p, elsewhere, None) == Hint.SKIP
    # only DoNotSchedule constraints can turn a pod away
    soft = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread(when="ScheduleAnyway")])
    assert pod_hint(soft, web("gone"), None) == Hint.SKIP
    honor = labelled("new", {"app": "web"}, topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")])
    tolerant = copy.deepcopy(honor)
    tolerant["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    assert toleration_hint(honor, honor, tolerant) == Hint.QUEUE
    assert toleration_hint(p, p, {**p, "spec": {**p["spec"], "tolerations": tolerant["spec"]["tolerations"]}}) == Hint.SKIP
    other = labelled("other", {"app": "web"}, topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")],
                     tolerations=tolerant["spec"]["tolerations"])
    assert toleration_hint(honor, web("other"), other) == Hint.SKIP  # another pod's update
