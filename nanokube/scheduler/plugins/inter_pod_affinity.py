"""InterPodAffinity: required pod (anti-)affinity terms of the incoming pod,
and existing pods' required anti-affinity against it, filter nodes by
topology domain; preferred terms (both ways) and existing pods' required
affinity weight the score. Matches per topology pair are counted once per
cycle over the snapshot's pods."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ...machinery.selectors import Requirement, matches_labels, selector_from_object
from ..framework import (
    ASSIGNED_POD,
    MAX_NODE_SCORE,
    NODE,
    SKIP,
    Action,
    ClusterEvent,
    Hint,
    Registration,
    unschedulable,
)

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_FILTER_KEY, _SCORE_KEY = "PreFilterInterPodAffinity", "PreScoreInterPodAffinity"

NamespaceLabels = Callable[[str], dict]


@dataclass(frozen=True, slots=True)
class Term:
    """A PodAffinityTerm compiled against its owning pod (default namespace; the API server
    merged matchLabelKeys/mismatchLabelKeys into the selector at create); weight is negative
    for anti-affinity."""

    selector: list[Requirement] | None
    namespaces: frozenset[str]
    ns_selector: list[Requirement] | None
    key: str
    weight: int = 0

    def matches(self, pod: dict, ns_labels: NamespaceLabels) -> bool:
        md = pod["metadata"]
        ns = md.get("namespace", "")
        if ns not in self.namespaces and (self.ns_selector is None or not matches_labels(self.ns_selector, ns_labels(ns))):
            return False
        return matches_labels(self.selector, md.get("labels"))


@dataclass(frozen=True, slots=True)
class Terms:
    affinity: list[Term]
    anti: list[Term]
    preferred: list[Term]


def _term(t: dict, pod: dict, weight: int = 0) -> Term:
    md = pod["metadata"]
    sel = selector_from_object(t.get("labelSelector"))
    namespaces, ns_sel = t.get("namespaces") or [], t.get("namespaceSelector")
    if not namespaces and ns_sel is None:
        namespaces = [md.get("namespace", "")]
    return Term(sel, frozenset(namespaces), selector_from_object(ns_sel), t.get("topologyKey", ""), weight)


#: the terms of a pod without inter-pod affinity (most pods), shared
NO_TERMS = Terms([], [], [])


def terms(pod: dict) -> Terms:
    affinity = ((pod.get("spec") or {}).get("affinity")) or {}
    pa, paa = affinity.get("podAffinity") or {}, affinity.get("podAntiAffinity") or {}
    if not (pa or paa):
        return NO_TERMS

    def required(a: dict) -> list[Term]:
        return [_term(t, pod) for t in a.get("requiredDuringSchedulingIgnoredDuringExecution") or []]

    def preferred(a: dict, sign: int) -> list[Term]:
        return [_term(w.get("podAffinityTerm") or {}, pod, sign * w.get("weight", 0))
                for w in a.get("preferredDuringSchedulingIgnoredDuringExecution") or []]

    return Terms(required(pa), required(paa), preferred(pa, 1) + preferred(paa, -1))


class InterPodAffinity:
    name = "InterPodAffinity"
    default_weight = 2

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        self.hard_weight = args.get("hardPodAffinityWeight", 1)
        # built without a scheduler (queue tests), no cycle ever runs
        self.namespaces = handle.informer("", "v1", "namespaces") if handle is not None else None

    def _ns_labels(self) -> NamespaceLabels:
        """Namespace labels for namespaceSelector, looked up once per cycle."""
        seen: dict[str, dict] = {}

        def get(ns: str) -> dict:
            if ns not in seen:
                obj = self.namespaces.get(ns) or {}
                seen[ns] = (obj.get("metadata") or {}).get("labels") or {}
            return seen[ns]

        return get

    def pre_filter(self, state, info):
        mine: Terms = info.derived(self.name, terms)
        snap = self.handle.snapshot
        if not mine.affinity and not mine.anti:
            # only existing pods' required anti-affinity can matter: walk just the nodes with those pods
            holding = snap.have_pods_with_required_anti_affinity()
            if not holding:
                return None, SKIP
        ns_labels = self._ns_labels()
        existing, affinity, anti = Counter(), Counter(), Counter()
        pod = info.pod
        if not mine.affinity and not mine.anti:
            for node in holding:
                self._count_existing(node, pod, ns_labels, existing)
            if not existing:
                return None, SKIP
        else:
            for node in snap.nodes:
                labels = node.labels
                if node.anti_affinity_pods:
                    self._count_existing(node, pod, ns_labels, existing)
                for p in node.pods.values():
                    if mine.affinity and all(t.matches(p.pod, ns_labels) for t in mine.affinity):
                        for t in mine.affinity:
                            if t.key in labels:
                                affinity[t.key, labels[t.key]] += 1
                    for t in mine.anti:
                        if t.key in labels and t.matches(p.pod, ns_labels):
                            anti[t.key, labels[t.key]] += 1
        self_match = all(t.matches(pod, ns_labels) for t in mine.affinity)
        state[_FILTER_KEY] = (mine, existing, affinity, anti, self_match)
        return None, None

    def _count_existing(self, node, pod: dict, ns_labels: NamespaceLabels, existing: Counter) -> None:
        """Counts, per topology pair, the node's pods whose required anti-affinity selects `pod`."""
        labels = node.labels
        for p in node.anti_affinity_pods.values():
            for t in p.derived(self.name, terms).anti:
                if t.key in labels and t.matches(pod, ns_labels):
                    existing[t.key, labels[t.key]] += 1

    def filter(self, state, info, node):
        mine, existing, affinity, anti, self_match = state[_FILTER_KEY]
        labels = node.labels
        if any(t.key not in labels for t in mine.affinity):
            return unschedulable(REASON_AFFINITY, resolvable=False)
        # the first pod of a group with affinity to itself may go anywhere with the keys
        if not all(affinity[t.key, labels[t.key]] > 0 for t in mine.affinity) and (affinity or not self_match):
            return unschedulable(REASON_AFFINITY, resolvable=False)
        if any(t.key in labels and anti[t.key, labels[t.key]] > 0 for t in mine.anti):
            return unschedulable(REASON_ANTI_AFFINITY)
        if existing and any(existing.get((k, v), 0) > 0 for k, v in labels.items()):
            return unschedulable(REASON_EXISTING_ANTI_AFFINITY)
        return None

    def pre_score(self, state, info, nodes):
        mine: Terms = info.derived(self.name, terms)
        ns_labels = self._ns_labels()
        scores: dict[str, Counter] = {}

        def add(key: str, labels: dict, weight: int) -> None:
            if key in labels:
                scores.setdefault(key, Counter())[labels[key]] += weight

        snap = self.handle.snapshot
        # without preferred terms of its own, only pods with terms can add to the score
        walk = snap.nodes if mine.preferred else snap.have_pods_with_affinity()
        for node in walk:
            for p in (node.pods if mine.preferred else node.affinity_pods).values():
                for t in mine.preferred:
                    if t.matches(p.pod, ns_labels):
                        add(t.key, node.labels, t.weight)
                if not p.has_affinity:
                    continue
                theirs: Terms = p.derived(self.name, terms)
                for t in theirs.preferred:
                    if t.matches(info.pod, ns_labels):
                        add(t.key, node.labels, t.weight)
                if self.hard_weight:
                    for t in theirs.affinity:
                        if t.matches(info.pod, ns_labels):
                            add(t.key, node.labels, self.hard_weight)
        if not scores:
            return SKIP
        state[_SCORE_KEY] = scores
        return None

    def score_nodes(self, state, info, nodes) -> list[int]:
        by_key = state[_SCORE_KEY].items()
        return [sum(by_value.get(n.labels.get(key), 0) for key, by_value in by_key) for n in nodes]

    def normalize_score(self, state, info, scores: list[int]) -> None:
        """Min-max scaling: sums may be negative (anti-affinity)."""
        lo, hi = min(scores, default=0), max(scores, default=0)
        for i, s in enumerate(scores):
            scores[i] = MAX_NODE_SCORE * (s - lo) // (hi - lo) if hi > lo else 0

    def events_to_register(self) -> list[Registration]:
        """Upstream 1.37's hints: an assigned pod's change queues the pods whose own required terms
        it may now satisfy, or whose rejection it may lift; a node's only when it can change a
        domain those terms use."""
        def pod_hint(pod: dict, old, new) -> Hint:
            mine = terms(pod)
            ns_labels = self._ns_labels()

            def all_affinity(obj: dict) -> bool:
                return bool(mine.affinity) and all(t.matches(obj, ns_labels) for t in mine.affinity)

            def any_anti(obj: dict) -> bool:
                return any(t.matches(obj, ns_labels) for t in mine.anti)

            if old is not None and new is not None:  # it came to satisfy the affinity, or left the anti-affinity
                return Hint.QUEUE if (not all_affinity(old) and all_affinity(new)
                                      or any_anti(old) and not any_anti(new)) else Hint.SKIP
            if new is not None:
                return Hint.QUEUE if all_affinity(new) else Hint.SKIP
            # a deleted pod the pod's anti-affinity hated, or whose own anti-affinity hated the pod
            # (upstream #135325); or maybe the last match of a pod matching its own affinity, which
            # then may go anywhere (the first pod of a group, upstream issue 141354)
            if any_anti(old) or any(t.matches(pod, ns_labels) for t in terms(old).anti):
                return Hint.QUEUE
            return Hint.QUEUE if all_affinity(old) and all_affinity(pod) else Hint.SKIP

        def node_hint(pod: dict, old, new) -> Hint:
            """A node carrying an affinity term's key arrived, gained it or moved to another of its
            domains; any node arrived for anti-affinity (one without the key takes the pod), or one
            lost an anti-affinity term's key or moved. A pod with no required terms of its own was
            turned away by other pods' anti-affinity, whose keys the hint does not know: any node
            arrival or label change may help it (upstream skips it, and it waits for the flush)."""
            if new is None:
                return Hint.SKIP
            mine = terms(pod)
            after = (new.get("metadata") or {}).get("labels") or {}
            if old is None:
                return Hint.QUEUE if (mine.anti or not mine.affinity
                                      or any(t.key in after for t in mine.affinity)) else Hint.SKIP
            before = (old.get("metadata") or {}).get("labels") or {}
            if not mine.affinity and not mine.anti:
                return Hint.QUEUE if before != after else Hint.SKIP
            if any(t.key in after and before.get(t.key) != after[t.key] for t in mine.affinity):
                return Hint.QUEUE
            if any(t.key in before and before[t.key] != after.get(t.key) for t in mine.anti):
                return Hint.QUEUE
            return Hint.SKIP

        return [Registration(ClusterEvent(ASSIGNED_POD, Action.ADD | Action.DELETE | Action.UPDATE_POD_LABEL), pod_hint),
                Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL), node_hint)]
