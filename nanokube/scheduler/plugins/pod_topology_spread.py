"""PodTopologySpread: DoNotSchedule constraints reject nodes whose domain
would exceed maxSkew over the least-loaded eligible domain; ScheduleAnyway
constraints prefer domains holding fewer matching pods. Counts per
topology value are taken once per cycle in PreFilter/PreScore. A pod
without constraints of its own gets the profile's default constraints
(upstream's system defaults unless PodTopologySpreadArgs list others),
selecting the pods of its workload."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...machinery.selectors import Requirement, matches_labels, selector_from_object
from ..framework import (
    ASSIGNED_POD,
    MAX_NODE_SCORE,
    NODE,
    SKIP,
    UNSCHEDULED_POD,
    Action,
    ClusterEvent,
    Hint,
    Registration,
    own_update,
    unschedulable,
)
from ...machinery.scheduling import untolerated
from .default_selector import DefaultSelectors
from .node_affinity import pod_matches_node

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
#: upstream's systemDefaultConstraints, used when defaultingType is System
SYSTEM_DEFAULTS = ({"topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
                   {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5})
REASON = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = f"{REASON} (missing required label)"
_FILTER_KEY, _SCORE_KEY = "PreFilterPodTopologySpread", "PreScorePodTopologySpread"
_CONSTRAINTS_KEY = "PodTopologySpreadConstraints"


@dataclass(frozen=True, slots=True)
class Constraint:
    """One topologySpreadConstraint with its selector compiled (the API server merged
    matchLabelKeys into it when the pod was created)."""

    max_skew: int
    key: str
    hard: bool
    selector: list[Requirement] | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    def eligible(self, pod: dict, node) -> bool:
        """nodeAffinityPolicy / nodeTaintsPolicy: whether `node` counts as a domain member."""
        if self.honor_affinity and not pod_matches_node(pod, node.labels, node.name):
            return False
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        return not (self.honor_taints and untolerated(node.taints, tolerations, ("NoSchedule", "NoExecute")))

    def matching(self, node, namespace: str) -> int:
        """Non-terminating pods on `node` in `namespace` that the selector picks."""
        n = 0
        for p in node.pods.values():
            md = p.pod["metadata"]
            if md.get("namespace") == namespace and not md.get("deletionTimestamp") and \
                    matches_labels(self.selector, md.get("labels")):
                n += 1
        return n


def _constraint(c: dict, selector: list[Requirement] | None) -> Constraint:
    return Constraint(c.get("maxSkew", 1), c.get("topologyKey", ""), c.get("whenUnsatisfiable") != "ScheduleAnyway",
                      selector, c.get("minDomains") or 1, c.get("nodeAffinityPolicy", "Honor") == "Honor",
                      c.get("nodeTaintsPolicy", "Ignore") == "Honor")


def constraints(pod: dict) -> list[Constraint]:
    """The pod's own topologySpreadConstraints."""
    return [_constraint(c, selector_from_object(c.get("labelSelector")))
            for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []]


def _has_keys(labels: dict, cs: list[Constraint]) -> bool:
    return all(c.key in labels for c in cs)


class PodTopologySpread:
    name = "PodTopologySpread"
    default_weight = 2

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        self.system_defaulted = (args.get("defaultingType") or "System") == "System"
        self.defaults = list(SYSTEM_DEFAULTS) if self.system_defaulted else list(args.get("defaultConstraints") or [])
        # built without a scheduler (queue tests), no cycle ever runs
        self.selectors = DefaultSelectors(handle) if self.defaults and handle is not None else None

    def _all_constraints(self, pod: dict, own: list[Constraint]) -> tuple[list[Constraint], bool]:
        """(the pod's constraints, whether they are the defaults): the
        defaults apply only to a pod without any that belongs to a workload."""
        if own or self.selectors is None:
            return own, False
        sel = self.selectors.selector(pod)
        return ([_constraint(c, sel) for c in self.defaults], True) if sel else ([], False)

    def _constraints(self, state, info, hard: bool) -> tuple[list[Constraint], bool]:
        """The pod's constraints of one kind; the defaults' selector (every
        Service checked) is looked up once per cycle."""
        found = state.get(_CONSTRAINTS_KEY)
        if found is None:
            found = state[_CONSTRAINTS_KEY] = self._all_constraints(info.pod, info.derived(self.name, constraints))
        cs, defaulted = found
        return [c for c in cs if c.hard == hard], defaulted

    def pre_filter(self, state, info):
        hard, _ = self._constraints(state, info, True)
        if not hard:
            return None, SKIP
        ns = info.pod["metadata"].get("namespace", "")
        counts: list[dict[str, int]] = [{} for _ in hard]
        for node in self.handle.snapshot.nodes:
            if not _has_keys(node.labels, hard):
                continue
            for c, cnt in zip(hard, counts):
                if c.eligible(info.pod, node):
                    v = node.labels[c.key]
                    cnt[v] = cnt.get(v, 0) + c.matching(node, ns)
        mins = [0 if len(cnt) < c.min_domains else min(cnt.values(), default=0) for c, cnt in zip(hard, counts)]
        state[_FILTER_KEY] = (hard, counts, mins)
        return None, None

    def filter(self, state, info, node):
        hard, counts, mins = state[_FILTER_KEY]
        labels = info.pod["metadata"].get("labels")
        for c, cnt, lowest in zip(hard, counts, mins):
            v = node.labels.get(c.key)
            if v is None:
                return unschedulable(REASON_MISSING_LABEL, resolvable=False)
            self_match = 1 if matches_labels(c.selector, labels) else 0
            if cnt.get(v, 0) + self_match - lowest > c.max_skew:
                return unschedulable(REASON)
        return None

    def pre_score(self, state, info, nodes):
        soft, defaulted = self._constraints(state, info, False)
        if not soft or not nodes:
            return SKIP
        # system defaults do not make nodes lacking one of their keys count as ignored
        require_all = not (defaulted and self.system_defaulted)
        ignored = [require_all and not _has_keys(n.labels, soft) for n in nodes]
        domains = [{n.labels[c.key] for n, ig in zip(nodes, ignored) if not ig and c.key in n.labels} for c in soft]
        counts = [dict.fromkeys(d, 0) for d in domains]
        ns = info.pod["metadata"].get("namespace", "")
        for node in self.handle.snapshot.nodes:
            if require_all and not _has_keys(node.labels, soft):
                continue
            for c, cnt in zip(soft, counts):
                v = node.labels.get(c.key)
                if c.key != HOSTNAME and v in cnt and c.eligible(info.pod, node):
                    cnt[v] += c.matching(node, ns)
        weights = [math.log(len(d) + 2) for d in domains]
        state[_SCORE_KEY] = (soft, counts, weights, ignored)
        return None

    def score_nodes(self, state, info, nodes) -> list[int]:
        soft, counts, weights, _ = state[_SCORE_KEY]
        ns = info.pod["metadata"].get("namespace", "")
        out = []
        for node in nodes:
            total = 0.0
            for c, cnt, w in zip(soft, counts, weights):
                v = node.labels.get(c.key)
                if v is not None:
                    n = c.matching(node, ns) if c.key == HOSTNAME else cnt.get(v, 0)
                    total += n * w + c.max_skew - 1
            out.append(int(total + 0.5))
        return out

    def normalize_score(self, state, info, scores: list[int]) -> None:
        """Fewest matching pods scores highest; nodes lacking a key score 0."""
        ignored = state[_SCORE_KEY][3]
        kept = [s for s, ig in zip(scores, ignored) if not ig]
        lo, hi = min(kept, default=0), max(kept, default=0)
        for i, (s, ig) in enumerate(zip(scores, ignored)):
            scores[i] = 0 if ig else MAX_NODE_SCORE if hi == 0 else MAX_NODE_SCORE * (hi + lo - s) // hi

    def _hard(self, pod: dict) -> list[Constraint]:
        """The constraints that can turn the pod away (upstream's hints read only DoNotSchedule ones)."""
        cs, _ = self._all_constraints(pod, constraints(pod))
        return [c for c in cs if c.hard]

    def events_to_register(self) -> list[Registration]:
        def pod_hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterPodChange: an assigned pod of the namespace that a
            constraint selects arrived or left, or a label change made it enter or leave a
            constraint's selection (a change that leaves every selection as it was cannot help)."""
            ns = pod["metadata"].get("namespace", "")
            if (new or old)["metadata"].get("namespace", "") != ns:
                return Hint.SKIP
            cs = self._hard(pod)
            if old is not None and new is not None:
                before, after = old["metadata"].get("labels"), new["metadata"].get("labels")
                return Hint.QUEUE if any(matches_labels(c.selector, before) != matches_labels(c.selector, after)
                                         for c in cs) else Hint.SKIP
            labels = (new or old)["metadata"].get("labels")
            return Hint.QUEUE if any(matches_labels(c.selector, labels) for c in cs) else Hint.SKIP

        def toleration_hint(pod: dict, old, new) -> Hint:
            """The pod's own new toleration can widen the domains a constraint with nodeTaintsPolicy
            Honor counts."""
            if own_update(pod, old, new) is Hint.SKIP:
                return Hint.SKIP
            return Hint.QUEUE if any(c.honor_taints for c in self._hard(new)) else Hint.SKIP

        def node_hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterNodeChange: a node entering or leaving the constraints'
            domains (it carries every topology key), or one in them whose topology values or
            taints changed; other label changes and a cordon leave the spreading as it was."""
            cs = self._hard(pod)
            before = ((old.get("metadata") or {}).get("labels") or {}) if old is not None else None
            after = ((new.get("metadata") or {}).get("labels") or {}) if new is not None else None
            was = before is not None and _has_keys(before, cs)
            now = after is not None and _has_keys(after, cs)
            if before is None or after is None or was != now:
                return Hint.QUEUE if was or now else Hint.SKIP
            if now and (any(before[c.key] != after[c.key] for c in cs)
                        or ((old.get("spec") or {}).get("taints") or []) != ((new.get("spec") or {}).get("taints") or [])):
                return Hint.QUEUE
            return Hint.SKIP

        return [Registration(ClusterEvent(ASSIGNED_POD, Action.ADD | Action.DELETE | Action.UPDATE_POD_LABEL), pod_hint),
                Registration(ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_TOLERATIONS), toleration_hint),
                Registration(ClusterEvent(NODE, Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT),
                             node_hint)]
