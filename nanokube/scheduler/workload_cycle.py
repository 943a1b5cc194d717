"""The workload scheduling cycle: a PodGroup's pending pods are placed
together in one snapshot. Each pod runs the normal Filter/Score and is
tentatively reserved in the snapshot only; if fewer than minCount members
(counting those already placed) fit, every reservation is rolled back and
the group is rejected as a whole, so a gang never holds capacity it cannot
use. A feasible group goes to binding at once. With a topology constraint
each distinct value of the label is one candidate placement. A group that
fails runs the PodGroupPostFilter plugins once (workload-aware
preemption); after a preemption its next cycle may not preempt again, and
its nominated pods hold their nodes against groups of no higher priority
(upstream's nominator, for groups) until it is placed or gives up."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .cache import NodeInfo, Snapshot
from .cycle import FitError
from .framework import Code, CycleState, Framework, PodInfo
from .plugins.workload_preemption import GroupPreemptor
from .podgroups import group_priority, min_count, topology_keys
from .queue import QueuedPodGroupInfo

log = logging.getLogger(__name__)

CONDITION = "PodGroupInitiallyScheduled"
UNSCHEDULABLE, SCHEDULER_ERROR = "Unschedulable", "SchedulerError"


@dataclass
class Attempt:
    """What the default algorithm achieved on one placement (already rolled back)."""

    nodes: list[NodeInfo]
    assigned: list[tuple[PodInfo, str, CycleState]] = field(default_factory=list)
    failures: dict[str, FitError] = field(default_factory=dict)
    message: str = ""
    tightness: float = 0.0

    @property
    def feasible(self) -> bool:
        return not self.message

    def score(self) -> tuple:
        """PodGroupPodsCount (more pods) first, then NodeResourcesFit's tightest fit."""
        return len(self.assigned), self.tightness


def consistency_error(pg: dict, pending: list[PodInfo]) -> str:
    """Upstream's SchedulerError text when members disagree with each other
    on schedulerName or with the group on priority; empty when they agree."""
    first = pending[0].spec.get("schedulerName") or "default-scheduler"
    for info in pending:
        name = info.spec.get("schedulerName") or "default-scheduler"
        if name != first:
            return f'all pods in a single pod group should have the same .spec.schedulerName set, got: "{first}" and "{name}"'
    want = group_priority(pg)
    for info in pending:
        if info.priority != want:
            return f"all pods in a single pod group should match the priority of the pod group, got: {info.priority} and {want}"
    return ""


def placements(nodes: list[NodeInfo], keys: list[str], placed_nodes: set[str]) -> list[list[NodeInfo]]:
    """Candidate node subsets: all nodes, or one per distinct value of the
    topology label(s); only those holding every already-placed member."""
    if not keys:
        return [nodes]
    by_value: dict[tuple, list[NodeInfo]] = {}
    for n in nodes:
        value = tuple(n.labels.get(k) for k in keys)
        if None not in value:
            by_value.setdefault(value, []).append(n)
    out = []
    for value in sorted(by_value):
        names = {n.name for n in by_value[value]}
        if placed_nodes <= names:
            out.append(by_value[value])
    return out


def _tightness(nodes: list[NodeInfo]) -> float:
    """Mean CPU and memory allocation ratio of the placement."""
    cpu = sum(n.allocatable.milli_cpu for n in nodes)
    mem = sum(n.allocatable.memory for n in nodes)
    used_cpu = sum(n.requested.milli_cpu for n in nodes)
    used_mem = sum(n.requested.memory for n in nodes)
    return ((used_cpu / cpu if cpu else 0.0) + (used_mem / mem if mem else 0.0)) / 2


class WorkloadCycle:
    """Runs a popped group entry against the scheduler's cache, queue and API."""

    def __init__(self, sched) -> None:
        self.s = sched
        for fwk in sched.frameworks.values():
            for name, plugin in fwk.plugins.items():
                if hasattr(plugin, "post_filter") and not hasattr(plugin, "pod_group_post_filter"):
                    log.error("plugin %s implements PostFilter but not PodGroupPostFilter: "
                              "it takes no part when a pod group fails", name)
        self.scheduled_uids: set[str] = set()  # PodGroups already set True: never revert
        self.preempted: set[str] = set()  # groups whose retry may not start new preemptions
        self.nominated: dict[str, list[tuple[PodInfo, str]]] = {}  # group -> its pods' nominated nodes

    def schedule_group(self, entry: QueuedPodGroupInfo) -> None:
        s = self.s
        cycle = s.queue.scheduling_cycle
        pg = s.podgroups.get(entry.group)
        if pg is None:
            self.nominated.pop(entry.group, None)
            s.queue.dissolve_group(entry)
            return
        for key, info in list(entry.members.items()):
            if info.pod["metadata"].get("deletionTimestamp") or s.cache.is_assumed(info.uid):
                del entry.members[key]
        if not entry.members:
            s.queue.group_done(entry, cycle)
            return
        pending = sorted(entry.members.values(), key=lambda i: i.timestamp)
        err = consistency_error(pg, pending)
        if err:
            self._reject(entry, pg, SCHEDULER_ERROR, err, {}, cycle, error=True)
            return
        fwk = s.frameworks[pending[0].spec.get("schedulerName") or "default-scheduler"]
        s.cache.update_snapshot(s.snapshot)
        pending_uids = {i.uid for i in pending}
        placed = {p["metadata"].get("uid", ""): p["spec"]["nodeName"] for p in s.podgroups.assigned(entry.group)}
        for p in s.podgroups.members.get(entry.group, {}).values():
            uid = p["metadata"].get("uid", "")
            if uid not in pending_uids and s.cache.is_assumed(uid):
                placed[uid] = s.cache.assumed[uid]
        need = min_count(pg) or 1
        held = self._held_for_others(entry.group, group_priority(pg))
        domains = placements(s.snapshot.nodes, topology_keys(pg), set(placed.values()))
        attempts = [self._try(fwk, nodes, pending, need, len(placed), held) for nodes in domains]
        feasible = [a for a in attempts if a.feasible]
        if feasible:
            self.preempted.discard(entry.group)
            self.nominated.pop(entry.group, None)
            self._commit(fwk, entry, pg, max(feasible, key=Attempt.score), cycle)
            return
        if not attempts:
            msg = f'no placement satisfies the topology constraint of pod group "{entry.group.split("/", 1)[1]}"'
            self._reject(entry, pg, UNSCHEDULABLE, msg, {}, cycle)
            return
        best = max(attempts, key=lambda a: len(a.assigned))
        preemptor = GroupPreemptor(entry.group, pg, pending, domains, fwk,
                                   lambda nodes: self._try(fwk, nodes, pending, need, len(placed), held), held)
        post = self._post_filter(preemptor)
        self._reject(entry, pg, UNSCHEDULABLE, best.message, best.failures, cycle, post)

    def _post_filter(self, g: GroupPreemptor) -> str:
        """Runs the PodGroupPostFilter plugins in order until one succeeds,
        unless the group preempted on its previous cycle. Returns the
        plugins' Unschedulable reasons (empty after a preemption)."""
        if g.key in self.preempted:
            self.preempted.discard(g.key)
            return ""
        reasons: list[str] = []
        for plugin in g.fwk.plugins.values():
            if not hasattr(plugin, "pod_group_post_filter"):
                continue
            nominated, st = plugin.pod_group_post_filter(g)
            if st.code == Code.SUCCESS:
                self.preempted.add(g.key)
                self.nominated[g.key] = [(i, nominated[i.uid]) for i in g.pods if i.uid in nominated]
                return ""
            reasons.extend(st.reasons)
        self.nominated.pop(g.key, None)
        self._clear_nominations(g.pods)
        return ", ".join(reasons)

    def _clear_nominations(self, pods: list[PodInfo]) -> None:
        """A rejected group keeps no stale nominatedNodeName."""
        for info in pods:
            if (info.pod.get("status") or {}).get("nominatedNodeName"):
                md = info.pod["metadata"]
                self.s.spawn(self.s._write(self.s.api.pods.patch(
                    md["name"], {"status": {"nominatedNodeName": None}}, namespace=md.get("namespace"),
                    subresource="status", field_manager="kube-scheduler")))

    def _held_for_others(self, group: str, priority: int) -> list[tuple[PodInfo, str]]:
        """Nominated pods, still pending, of other groups of at least
        `priority`: the space their preemptions freed. Groups that left the
        queue (their pods deleted) hold nothing any more."""
        held = []
        for key in list(self.nominated):
            entry = self.s.queue.groups.get(key)
            if entry is None:
                del self.nominated[key]
                self.preempted.discard(key)
                continue
            if key == group or group_priority(self.s.podgroups.get(key) or {}) < priority:
                continue
            pending = {info.uid for info in entry.members.values()}
            held += [(info, node) for info, node in self.nominated[key] if info.uid in pending]
        return held

    def _try(self, fwk: Framework, nodes: list[NodeInfo], pending: list[PodInfo], need: int, already: int,
             held: list[tuple[PodInfo, str]] = ()) -> Attempt:
        """The default algorithm on one placement, with `held` pods counted
        on their nominated nodes: each pod that fits is added to the
        snapshot and Reserved (so the next pods see its node resources and
        devices taken); all of it is rolled back before returning."""
        view = Snapshot()
        view.nodes = list(nodes)
        view.infos = {n.name: n for n in nodes}
        view.index = {n.name: i for i, n in enumerate(nodes)}
        att = Attempt(nodes)
        scheduled, remaining = already, len(pending)
        holding = [(view.infos[node], info) for info, node in held
                   if node in view.infos and info.uid not in view.infos[node].pods]
        for ni, info in holding:
            ni.add_pod(info)
        try:
            for info in pending:
                if scheduled + remaining < need:
                    break
                remaining -= 1
                state = CycleState()
                try:
                    node, _, _ = self.s.algorithm.schedule(fwk, state, info, view)
                except FitError as e:
                    att.failures[info.key] = e
                    continue
                if fwk.run_reserve(state, info, node) is not None:
                    fwk.run_unreserve(state, info, node)
                    continue
                view.infos[node].add_pod(info)
                att.assigned.append((info, node, state))
                scheduled += 1
            att.tightness = _tightness(nodes)
        finally:
            for info, node, state in reversed(att.assigned):
                fwk.run_unreserve(state, info, node)
                view.infos[node].remove_pod(info.uid)
            for ni, info in holding:
                ni.remove_pod(info.uid)
        if scheduled < need:
            att.message = f"minCount ({need}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
        elif not att.assigned:
            att.message = "no pods were schedulable"
        return att

    def _commit(self, fwk: Framework, entry: QueuedPodGroupInfo, pg: dict, att: Attempt, cycle: int) -> None:
        """Assumes and reserves every placed pod for real, then binds them all."""
        s = self.s
        start = s.clock.monotonic()
        done: list[tuple[PodInfo, str, CycleState]] = []
        for info, node, state in att.assigned:
            s.cache.assume(info, node)
            st = fwk.run_reserve(state, info, node)
            if st is None:
                st = fwk.run_permit(state, info, node)
            if st is not None and st.code != Code.WAIT:
                fwk.run_unreserve(state, info, node)
                s.cache.forget(info)
                for i, n, stt in done:
                    fwk.run_unreserve(stt, i, n)
                    s.cache.forget(i)
                reason = UNSCHEDULABLE if st.unschedulable else SCHEDULER_ERROR
                self._reject(entry, pg, reason, st.message(), {}, cycle, error=not st.unschedulable)
                return
            done.append((info, node, state))
        for info, node, state in done:
            del entry.members[info.key]
            s.queue.in_flight[info.key] = info
            s.spawn(s._bind(fwk, state, info, node, cycle, start))
        s.spawn(self._set_condition(pg, "True", "Scheduled", f"{len(done)} pod(s) of the group were scheduled"))
        s.queue.group_done(entry, cycle)

    def _reject(self, entry: QueuedPodGroupInfo, pg: dict, reason: str, message: str, failures: dict[str, FitError],
                cycle: int, post: str = "", error: bool = False) -> None:
        """Every member gets FailedScheduling and PodScheduled=False (with
        the PostFilter verdict, if any); the group waits for an event its
        members' rejecting plugins registered."""
        s = self.s
        prof = next(iter(entry.members.values())).spec.get("schedulerName") or "default-scheduler"
        s.metrics.schedule_attempts.labels("error" if error else "unschedulable", prof).inc(len(entry.members))
        entry.unschedulable_plugins = {p for e in failures.values() for p in e.plugins()}
        for info in entry.members.values():
            fit = failures.get(info.key)
            text = f"{message}; {fit}" if fit else message
            s.spawn(s._report_failure(info.pod, reason, f"{text} {post}" if post else text))
        s.spawn(self._set_condition(pg, "False", reason, message))
        s.queue.group_done(entry, cycle, error=error)

    async def _set_condition(self, pg: dict, status: str, reason: str, message: str) -> None:
        """Writes PodGroupInitiallyScheduled through podgroups/status; once
        True it never goes back, and the transition time only moves on a
        status change."""
        md = pg["metadata"]
        uid = md.get("uid", "")
        if uid in self.scheduled_uids:
            return
        if status == "True":
            self.scheduled_uids.add(uid)
        current = self.s.podgroups.get(f"{md.get('namespace', '')}/{md['name']}") or pg
        conds = (current.get("status") or {}).get("conditions") or []
        old = next((c for c in conds if c.get("type") == CONDITION), None)
        if old and (old.get("status") == "True"
                    or (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message)):
            return
        same = old is not None and old.get("status") == status
        cond = {"type": CONDITION, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": old["lastTransitionTime"] if same else self.s.clock.rfc3339()}
        if md.get("generation"):
            cond["observedGeneration"] = md["generation"]
        body = {"status": {"conditions": [c for c in conds if c.get("type") != CONDITION] + [cond]}}
        await self.s._write(self.s.podgroup_client.patch(md["name"], body, "application/merge-patch+json",
                                                         namespace=md.get("namespace"), subresource="status",
                                                         field_manager="kube-scheduler"))
