"""DefaultPreemption: when no node fits, PostFilter looks for a node where
evicting strictly lower-priority pods lets the pod fit, keeps as many of
those pods as still allows it (PodDisruptionBudgets honoured where
possible), picks the node by upstream's ordering, nominates it and deletes
the victims, each first marked with a DisruptionTarget condition. For a
whole PodGroup that failed, PodGroupPostFilter does the same at workload
level (workload_preemption.py)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from ...machinery.conditions import find_condition, transition_time
from ...machinery.errors import APIError
from ...machinery.selectors import matches_labels, selector_from_object
from ...machinery.conditions import observed_generation
from ..api import SCHEDULER_FIELD_MANAGER, reference
from ..cache import NodeInfo
from ..framework import Code, CycleState, PodInfo, Status, unschedulable
from ...machinery.podgroups import group_key
from .workload_preemption import GroupPreemptor, PodGroupPreemption, disruption_all, terminating_by_preemption

log = logging.getLogger(__name__)

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
#: shifts priorities so the sum used to rank candidates stays positive (upstream's MaxInt32 + 1)
PRIORITY_SHIFT = 2**31


@dataclass
class Candidate:
    node: str
    victims: list[PodInfo]  # most important first
    pdb_violations: int


def _start_time(info: PodInfo) -> str:
    """RFC 3339 start time (or creation time) as a sortable string."""
    return (info.pod.get("status") or {}).get("startTime") or info.pod["metadata"].get("creationTimestamp") or ""


def _importance(info: PodInfo) -> tuple:
    """Sort key: higher priority first, then the pod running longer first."""
    return (-info.priority, _start_time(info))


class DefaultPreemption:
    name = "DefaultPreemption"

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        # built without a scheduler (queue tests), the plugin is never asked to preempt
        self.pdbs = handle.informer("policy", "v1", "poddisruptionbudgets") if handle is not None else None
        self.workload = PodGroupPreemption(self)
        #: the priorities of every pod the informer has (uid -> priority, and how many pods have each): a
        #: superset of the snapshot's pods, so a pod no other outranks it from below has no victim anywhere
        self._priority: dict[str, int] = {}
        self._priorities: Counter = Counter()
        if handle is not None:
            handle.pods.add_handlers(self._pod_added, self._pod_updated, self._pod_deleted)
            for pod in handle.pods.list():
                self._pod_added(pod)

    def _pod_added(self, pod: dict) -> None:
        uid = pod["metadata"].get("uid", "")
        prio = (pod.get("spec") or {}).get("priority") or 0
        before = self._priority.get(uid)
        if before == prio:
            return
        if before is not None:
            self._pod_deleted(pod)
        self._priority[uid] = prio
        self._priorities[prio] += 1

    def _pod_updated(self, old: dict, new: dict) -> None:
        """The priority is the spec's: a status write (the watch cache hands it the same spec) changes nothing."""
        if new.get("spec") is not old.get("spec"):
            self._pod_added(new)

    def _pod_deleted(self, pod: dict) -> None:
        prio = self._priority.pop(pod["metadata"].get("uid", ""), None)
        if prio is not None:
            self._priorities[prio] -= 1
            if not self._priorities[prio]:
                del self._priorities[prio]

    def post_filter(self, state: CycleState, info: PodInfo, statuses: dict[str, Status]) -> tuple[str | None, Status | None]:
        if self.handle is not None:  # every PostFilter run counts, as upstream's deferred Inc
            self.handle.metrics.preemption_attempts.inc()
        if info.group:
            return None, unschedulable()
        eligible, why = self._eligible(info, statuses)
        if not eligible:
            return None, unschedulable(f"preemption: {why}")
        snap = self.handle.snapshot
        if getattr(statuses, "all_unresolvable", None) is not None and statuses.all_unresolvable():
            # a selector mismatch or the like: evicting pods cannot help on any node
            if (info.pod.get("status") or {}).get("nominatedNodeName"):
                self._nominate(info, None)
            n = len(snap.nodes)
            return None, Status(Code.UNSCHEDULABLE, [f"preemption: 0/{n} nodes are available: {n} {NOT_HELPFUL}."])
        if min(self._priorities, default=info.priority) >= info.priority:
            # no pod of lower priority anywhere: every node's search would find no victim, and the
            # nodes' statuses are only counted (a pod that fits nowhere in a cluster of equals visited
            # every node here on each attempt)
            hopeless = _unresolvable(statuses)
            counts = Counter({NOT_HELPFUL: hopeless, NO_VICTIMS: len(snap.nodes) - hopeless})
            return None, self._none_found(info, len(snap.nodes), +counts)
        fwk = self.handle.frameworks[info.spec.get("schedulerName") or "default-scheduler"]
        reasons: dict[str, str] = {}
        candidates: list[Candidate] = []
        pdbs = self._pdbs(info)
        for node in snap.nodes:
            st = statuses.get(node.name)
            if st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                reasons[node.name] = NOT_HELPFUL
                continue
            cand, reason = self._select_victims(fwk, state, info, node, pdbs)
            if cand is None:
                reasons[node.name] = reason
            else:
                candidates.append(cand)
        if not candidates:
            return None, self._none_found(info, len(snap.nodes), Counter(reasons.values()))
        best = pick_one(candidates)
        self._nominate(info, best.node)
        self.handle.metrics.preemption_victims.observe(len(best.victims))
        self.handle.spawn(self._preempt(info, best))
        # upstream's success message (kubernetes#140180), kept in the FailedScheduling event and
        # PodScheduled condition until the preemptor lands
        return best.node, Status(Code.SUCCESS, [f"preemption: found a potential placement for pod on node "
                                                f"{best.node}, preempting {len(best.victims)} victims"])

    def _none_found(self, info: PodInfo, n: int, counts: Counter) -> Status:
        """No candidate on any of the `n` nodes (`counts`: how many for each reason): the pod's
        nomination goes, and the status says why, reasons in upstream's order."""
        self._nominate(info, None)
        detail = ", ".join(sorted(f"{k} {r}" for r, k in counts.items()))
        return unschedulable(f"preemption: 0/{n} nodes are available: {detail}.")

    def pod_group_post_filter(self, group: GroupPreemptor) -> tuple[dict[str, str] | None, Status]:
        """Workload-aware preemption for a failed group: (preemptor pod uid ->
        nominated node, Success) or (None, why not)."""
        return self.workload.run(group)

    @staticmethod
    def split_by_pdb(pods: list[PodInfo], pdbs) -> tuple[list[PodInfo], list[PodInfo]]:
        return split_by_pdb(pods, pdbs)

    def _eligible(self, info: PodInfo, statuses) -> tuple[bool, str]:
        """Upstream's PodEligibleToPreemptOthers: not with preemptionPolicy
        Never; not while a lower-priority pod on the node the pod is
        nominated to is terminating by preemption (its earlier victims are
        still going), unless that node can no longer take it at all
        (UnschedulableAndUnresolvable there). A pod being deleted for any
        other reason holds nothing back."""
        if info.spec.get("preemptionPolicy") == "Never":
            return False, POLICY_NEVER
        nominated = (info.pod.get("status") or {}).get("nominatedNodeName")
        if not nominated:
            return True, ""
        st = statuses.get(nominated)
        if st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        node = self.handle.snapshot.infos.get(nominated)
        if node is not None and any(p.priority < info.priority and terminating_by_preemption(p.pod)
                                    for p in node.pods.values()):
            return False, TERMINATING
        return True, ""

    def _pdbs(self, info: PodInfo) -> list[tuple[str, list, int, set]]:
        """(namespace, compiled selector, disruptions allowed, already disrupted pod names) per PDB."""
        out = []
        for pdb in self.pdbs.list():
            sel = (pdb.get("spec") or {}).get("selector")
            if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
                continue
            st = pdb.get("status") or {}
            out.append((pdb["metadata"].get("namespace"), selector_from_object(sel), st.get("disruptionsAllowed", 0),
                        set(st.get("disruptedPods") or {})))
        return out

    def _select_victims(self, fwk, state: CycleState, info: PodInfo, node: NodeInfo, pdbs) -> tuple[Candidate | None, str]:
        """Upstream's selectVictimsOnNode over a copy of the node: remove
        every lower-priority pod, then reprieve them most important first
        (PDB-violating ones before the rest) while the pod still fits. A
        pod of a `disruptionMode: all` PodGroup goes or stays with its
        whole group (KEP-5710's preemption unit): reprieved together, and
        evicted together, its members on other nodes too."""
        lower = sorted((p for p in node.pods.values() if p.priority < info.priority), key=_importance)
        if not lower:
            return None, NO_VICTIMS
        trial = node.clone()
        for p in lower:
            trial.remove_pod(p.uid)
        reason = self._fits(fwk, state, info, trial)
        if reason is not None:
            return None, reason
        violating, fine = split_by_pdb(lower, pdbs)
        victims: list[PodInfo] = []
        violations = 0
        units = self._units(lower)
        decided: set[str] = set()
        for group, counts in ((violating, True), (fine, False)):
            for p in group:
                if p.uid in decided:
                    continue
                unit = units.get(p.uid, [p])
                here = [m for m in unit if m.uid in node.pods]
                decided.update(m.uid for m in here)
                for m in here:
                    trial.add_pod(m)
                if self._fits(fwk, state, info, trial) is not None:
                    for m in here:
                        trial.remove_pod(m.uid)
                    victims.extend(unit)
                    violations += counts
        if not victims:
            return None, NO_VICTIMS
        victims.sort(key=_importance)
        return Candidate(node.name, victims, violations), ""

    def _units(self, pods: list[PodInfo]) -> dict[str, list[PodInfo]]:
        """Pod uid -> the running members of its `disruptionMode: all`
        PodGroup on every node, for the pods in such a group."""
        h = self.handle
        units: dict[str, list[PodInfo]] = {}
        for p in pods:
            if p.uid in units or not ((p.pod.get("spec") or {}).get("schedulingGroup")):
                continue
            key = group_key(p.pod)
            if not key or not disruption_all(h.podgroups.get(key)):
                continue
            unit = []
            for member in h.podgroups.members.get(key, {}).values():
                uid = member["metadata"].get("uid", "")
                ni = h.snapshot.infos.get(h.cache.pod_nodes.get(uid, ""))
                held = ni.pods.get(uid) if ni is not None else None
                if held is not None and not held.pod["metadata"].get("deletionTimestamp"):
                    unit.append(held)
            for m in unit:
                units[m.uid] = unit
        return units

    @staticmethod
    def _fits(fwk, state: CycleState, info: PodInfo, node: NodeInfo) -> str | None:
        """The first Filter rejection's message on `node`, or None when the pod fits."""
        for p in fwk.filters(state):
            st = p.filter(state, info, node)
            if st is not None:
                return st.message()
        return None

    def _nominate(self, info: PodInfo, node: str | None) -> None:
        """Sets (or clears, when there was one) the pod's status.nominatedNodeName."""
        current = (info.pod.get("status") or {}).get("nominatedNodeName")
        if node is None and not current:
            return
        md = info.pod["metadata"]
        pods = self.handle.api.pods
        self.handle.spawn(self._quiet(pods.patch(md["name"], {"status": {"nominatedNodeName": node}},
                                                 namespace=md.get("namespace"), subresource="status",
                                                 field_manager=SCHEDULER_FIELD_MANAGER)))

    async def _preempt(self, info: PodInfo, cand: Candidate) -> None:
        """Marks each victim (and each victim `all` PodGroup) with
        DisruptionTarget, records the Preempted event and deletes it. A
        victim already terminating (an earlier cycle's, or its user's) gets
        none of that, as upstream's executor skips a victim with a
        deletionTimestamp: a second cycle never evicts it twice."""
        api = self.handle.api
        scheduler = info.spec.get("schedulerName") or "default-scheduler"
        for key in dict.fromkeys(k for v in cand.victims if (k := group_key(v.pod)) and
                                 disruption_all(self.handle.podgroups.get(k))):
            await self.workload.mark_group(key, scheduler, "pod")
        for v in cand.victims:
            md = v.pod["metadata"]
            if md.get("deletionTimestamp"):
                continue
            old = find_condition((v.pod.get("status") or {}).get("conditions"), "DisruptionTarget")
            cond = {"type": "DisruptionTarget", **observed_generation(v.pod), "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": f"{scheduler}: preempting to accommodate a higher priority pod",
                    "lastTransitionTime": transition_time(old, "True", self.handle.clock.rfc3339())}
            await self._quiet(api.pods.patch(md["name"], {"status": {"conditions": [cond]}},
                                             "application/strategic-merge-patch+json", namespace=md.get("namespace"),
                                             subresource="status", field_manager=SCHEDULER_FIELD_MANAGER))
            await self._quiet(api.pods.delete(md["name"], md.get("namespace"), preconditions={"uid": md.get("uid")}))
            await self._quiet(api.event(v.pod, "Normal", "Preempted",
                                        f"Preempted by pod {info.uid} on node {cand.node}", related=reference(info.pod)))

    @staticmethod
    async def _quiet(coro) -> None:
        """An API write whose failure (the victim already gone) only gets logged."""
        try:
            await coro
        except APIError as e:
            log.info("preemption write failed: %s", e.message)


def _unresolvable(statuses) -> int:
    """How many nodes `statuses` (this cycle's, one per node the search rejected, the rest
    sharing NodeToStatus.absent) marks UnschedulableAndUnresolvable."""
    hopeless = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    n = sum(st.code == hopeless for st in dict.values(statuses))
    absent = getattr(statuses, "absent", None)
    if absent is not None and absent.code == hopeless:
        n += statuses.num_absent
    return n


def split_by_pdb(pods: list[PodInfo], pdbs) -> tuple[list[PodInfo], list[PodInfo]]:
    """Upstream's filterPodsWithPDBViolation: walking pods in order, each
    one a PDB covers uses up one of its allowed disruptions; a pod that
    takes any PDB below zero is violating. Order is kept in both lists."""
    allowed = [a for _, _, a, _ in pdbs]
    violating, fine = [], []
    for p in pods:
        md = p.pod["metadata"]
        labels = md.get("labels") or {}
        breaks = False
        for i, (ns, sel, _, disrupted) in enumerate(pdbs):
            if ns != md.get("namespace") or not matches_labels(sel, labels) or md["name"] in disrupted:
                continue
            allowed[i] -= 1
            breaks = breaks or allowed[i] < 0
        (violating if breaks else fine).append(p)
    return violating, fine


def pick_one(candidates: list[Candidate]) -> Candidate:
    """Upstream's pickOneNodeForPreemption: fewest PDB violations, then the
    lowest highest-priority victim, the smallest sum of priorities, the
    fewest victims, and the latest start among the most important victims."""
    def key(c: Candidate):
        top = c.victims[0].priority
        earliest = min(_start_time(v) for v in c.victims if v.priority == top)
        return (c.pdb_violations, top, sum(v.priority + PRIORITY_SHIFT for v in c.victims), len(c.victims),
                _negate(earliest))
    return min(candidates, key=key)


def _negate(stamp: str) -> tuple:
    """Sorts RFC 3339 stamps latest first inside a min()."""
    return tuple(-ord(ch) for ch in stamp)
