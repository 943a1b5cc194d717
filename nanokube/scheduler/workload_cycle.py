"""The workload scheduling cycle: a PodGroup's pending pods are placed
together in one snapshot. Each pod runs the normal Filter/Score and is
tentatively reserved in the snapshot only; if fewer than minCount members
(counting those already placed) fit, every reservation is rolled back and
the group is rejected as a whole, so a gang never holds capacity it cannot
use. A feasible group goes to binding at once. With a topology constraint
each distinct value of the label is one candidate placement. A group that
fails runs the PodGroupPostFilter plugins once (workload-aware
preemption); while its victims are still terminating its next cycles
start no new preemption (the plugin answers that one is ongoing), and its
nominated pods hold their nodes against groups of no higher priority
(upstream's nominator, for groups) until it is placed or gives up.

A PodGroup inside a CompositePodGroup tree is scheduled with its whole tree
(composite_cycle.py): the pending members of every leaf, in one snapshot,
all placed or none. Each cycle is counted in the podgroup metrics by
result (scheduled, unschedulable, waiting_on_preemption, error)."""

from __future__ import annotations

import asyncio
import logging

from ..machinery.conditions import observed_generation
from ..machinery.featuregates import enabled
from .api import SCHEDULER_FIELD_MANAGER
from .cache import NodeInfo, Snapshot
from .composite_cycle import CompositeCycle
from .composites import API as COMPOSITE_API
from .composites import composite_index, parent_name
from .cycle import FitError, PluginError
from .framework import Code, CycleState, Framework, PodInfo
from .group_placement import Attempt, consistency_error, placements, tightness
from .plugins.gang import GangScheduling
from .plugins.workload_preemption import GroupPreemptor
from ..machinery.conditions import find_condition, remove_condition, transition_time
from ..machinery.podgroups import group_priority, min_count, topology_keys
from .queue import QueuedPodGroupInfo

log = logging.getLogger(__name__)

CONDITION = "PodGroupInitiallyScheduled"
UNSCHEDULABLE, SCHEDULER_ERROR = "Unschedulable", "SchedulerError"
SCHEDULED, WAITING_ON_PREEMPTION = "scheduled", "waiting_on_preemption"
PODGROUP = "podgroup"


def check_post_filters(frameworks: dict[str, Framework]) -> None:
    """Logs, as upstream does at start, each plugin with PostFilter but no
    PodGroupPostFilter: it takes no part when a whole group fails."""
    for fwk in frameworks.values():
        for name, plugin in fwk.plugins.items():
            if hasattr(plugin, "post_filter") and not hasattr(plugin, "pod_group_post_filter"):
                log.error("plugin %s implements PostFilter but not PodGroupPostFilter: "
                          "it takes no part when a pod group fails", name)


class WorkloadCycle:
    """Runs a popped group entry against the scheduler's cache, queue and API."""

    def __init__(self, sched) -> None:
        self.s = sched
        check_post_filters(sched.frameworks)
        #: CompositePodGroup: trees of groups; off, no CompositePodGroup is read and a group's parent is ignored
        self.composites = composite_index(sched) if enabled("CompositePodGroup") else None
        self.composite_client = sched.client.resource(*COMPOSITE_API) if self.composites else None
        #: TopologyAwareWorkloadScheduling: a group placed within one domain of its topology keys; off, anywhere
        self.topology = enabled("TopologyAwareWorkloadScheduling")
        self.scheduled_uids: set[str] = set()  # groups already set True: never revert
        self.nominated: dict[str, list[tuple[PodInfo, str]]] = {}  # group -> its pods' nominated nodes
        #: group -> set once its members' failure reports waiting on a preemption are written;
        #: its binds and later reports wait for it
        self.reporting: dict[str, asyncio.Event] = {}

    def schedule_group(self, entry: QueuedPodGroupInfo) -> None:
        """Runs one cycle for the entry's group (or its whole composite
        tree) and counts it in the podgroup metrics."""
        s = self.s
        start = s.clock.monotonic()
        profile = entry.pod.get("spec", {}).get("schedulerName") or "default-scheduler" if entry.members else ""
        outcome = self._schedule(entry)
        if outcome is not None:
            result, entity = outcome
            s.metrics.podgroup_attempt(result, profile, entity, s.clock.monotonic() - start)

    def prune(self, entry: QueuedPodGroupInfo) -> None:
        """Drops members being deleted or already assumed on a node."""
        for key, info in list(entry.members.items()):
            if info.pod["metadata"].get("deletionTimestamp") or self.s.cache.is_assumed(info.uid):
                del entry.members[key]

    def placed(self, group: str, pending: list[PodInfo]) -> dict[str, str]:
        """Members already bound or assumed (uid -> node), `pending` left out."""
        s = self.s
        pending_uids = {i.uid for i in pending}
        placed = {p["metadata"].get("uid", ""): p["spec"]["nodeName"] for p in s.podgroups.assigned(group)}
        for p in s.podgroups.members.get(group, {}).values():
            uid = p["metadata"].get("uid", "")
            if uid not in pending_uids and s.cache.is_assumed(uid):
                placed[uid] = s.cache.assumed[uid]
        return placed

    def _schedule(self, entry: QueuedPodGroupInfo) -> tuple[str, str] | None:
        """(result, entity) of the cycle; None when there was nothing to try."""
        s = self.s
        pg = s.podgroups.get(entry.group)
        if pg is None:
            self.nominated.pop(entry.group, None)
            s.queue.dissolve_group(entry)
            return None
        self.prune(entry)
        if not entry.members:
            s.queue.group_done(entry)
            return None
        if self.composites is not None and parent_name(pg):
            return CompositeCycle(self, entry, pg).run()
        pending = sorted(entry.members.values(), key=lambda i: i.timestamp)
        need = min_count(pg)
        if need is not None and len(pending) + len(self.placed(entry.group, pending)) < need and \
                s.queue.regate_group(entry):
            return None
        err = consistency_error(pg, pending)
        if err:
            self.reject(entry, pg, SCHEDULER_ERROR, err, {}, error=True)
            return "error", PODGROUP
        fwk = s.frameworks[pending[0].spec.get("schedulerName") or "default-scheduler"]
        s.cache.update_snapshot(s.snapshot)
        algorithm_start = s.clock.monotonic()
        placed = self.placed(entry.group, pending)
        need = need or 1
        held = self._held_for_others(entry.group, group_priority(pg))
        domains = placements(s.snapshot.nodes, topology_keys(pg) if self.topology else [], set(placed.values()))
        try:
            attempts = [self.try_placement(fwk, nodes, pending, need, len(placed), held) for nodes in domains]
        except PluginError as e:
            self.reject(entry, pg, SCHEDULER_ERROR, str(e), {}, error=True)
            return "error", PODGROUP
        feasible = [a for a in attempts if a.feasible]
        s.metrics.podgroup_algorithm_duration.labels(fwk.profile.scheduler_name, PODGROUP).observe(
            s.clock.monotonic() - algorithm_start)
        if feasible:
            best = max(feasible, key=Attempt.score)
            if placed and len(best.assigned) < len(pending) and min_count(pg) is not None:
                # PartialSuccess: a running gang whose new pods do not all fit tries preemption first
                everyone = len(placed) + len(pending)
                preemptor = GroupPreemptor(entry.group, pg, pending, domains, fwk, lambda nodes: self.try_placement(
                    fwk, nodes, pending, everyone, len(placed), held), held, self._own_nominations(entry.group))
                preempted, _ = self._post_filter(preemptor)
                if preempted:
                    self.reject(entry, pg, UNSCHEDULABLE, f"{len(pending) - len(best.assigned)} pod(s) of the "
                                 "group did not fit; waiting for preemption to make room for all of them",
                                 best.failures, preemptor=preemptor)
                    return WAITING_ON_PREEMPTION, PODGROUP
            self.nominated.pop(entry.group, None)
            ok = self.commit(fwk, [(entry, pg, best.assigned)])
            return (SCHEDULED if ok else "unschedulable"), PODGROUP
        if not attempts:
            msg = f'no placement satisfies the topology constraint of pod group "{entry.group.split("/", 1)[1]}"'
            self.reject(entry, pg, UNSCHEDULABLE, msg, {})
            return "unschedulable", PODGROUP
        best = max(attempts, key=lambda a: len(a.assigned))
        preemptor = GroupPreemptor(entry.group, pg, pending, domains, fwk,
                                   lambda nodes: self.try_placement(fwk, nodes, pending, need, len(placed), held), held,
                                   self._own_nominations(entry.group))
        preempted, post = self._post_filter(preemptor)
        # an attempt cut short before any pod was tried (a member gated or gone) is GangScheduling's
        # PlacementFeasible verdict: the group waits for a member event, not a backoff as after an error
        self.reject(entry, pg, UNSCHEDULABLE, best.message, best.failures, post, preemptor=preemptor if preempted else None,
                    fitted={info.key for info, _, _ in best.assigned},
                    plugins=() if best.failures else (GangScheduling.name,))
        return (WAITING_ON_PREEMPTION if preempted else "unschedulable"), PODGROUP

    def _own_nominations(self, group: str) -> dict[str, str]:
        """The group's nominations from its last preemption, pod uid -> node."""
        return {info.uid: node for info, node in self.nominated.get(group, ())}

    def _post_filter(self, g: GroupPreemptor) -> tuple[bool, str]:
        """Runs the PodGroupPostFilter plugins in order until one succeeds.
        Returns whether the group waits on a preemption (victims chosen now,
        or an earlier preemption still ongoing), and what the plugins said
        (the placement found, that one is ongoing, or their Unschedulable
        reasons)."""
        nominated, st = g.fwk.run_pod_group_post_filter(g)
        if nominated is not None:
            self.nominated[g.key] = [(i, nominated[i.uid]) for i in g.pods if i.uid in nominated]
            return True, st.message() if st is not None else ""
        self.nominated.pop(g.key, None)
        self._clear_nominations(g.pods)
        return False, st.message() if st is not None else ""

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
                continue
            if key == group or group_priority(self.s.podgroups.get(key) or {}) < priority:
                continue
            pending = {info.uid for info in entry.members.values()}
            held += [(info, node) for info, node in self.nominated[key] if info.uid in pending]
        return held

    def try_placement(self, fwk: Framework, nodes: list[NodeInfo], pending: list[PodInfo], need: int, already: int,
             held: list[tuple[PodInfo, str]] = (), keep: bool = False) -> Attempt:
        """The default algorithm on one placement, with `held` pods counted
        on their nominated nodes: each pod that fits is added to the
        snapshot and Reserved (so the next pods see its node resources and
        devices taken); all of it is rolled back before returning, unless
        `keep` (a composite's later groups must see it; Attempt.undo)."""
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
                state = self.s.cycle_state()
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
            att.tightness = tightness(nodes)
        finally:
            if not keep:
                att.undo(fwk)
            for ni, info in holding:
                ni.remove_pod(info.uid)
        if scheduled < need:
            att.message = f"minCount ({need}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
        elif not att.assigned:
            att.message = "no pods were schedulable"
        return att

    def commit(self, fwk: Framework, parts: list[tuple[QueuedPodGroupInfo, dict, list]]) -> bool:
        """Assumes and reserves every placed pod of every part (entry,
        PodGroup, placements) for real, then binds them all; if any pod
        fails Reserve or Permit, none is kept and every part is rejected."""
        s = self.s
        start = s.clock.monotonic()
        done: list[tuple[PodInfo, str, CycleState]] = []
        for _, _, assigned in parts:
            for info, node, state in assigned:
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
                    for entry, pg, _ in parts:
                        self.reject(entry, pg, reason, st.message(), {}, error=not st.unschedulable)
                    return False
                done.append((info, node, state))
        for entry, pg, assigned in parts:
            reported = self.reporting.get(entry.group)
            for info, node, state in assigned:
                del entry.members[info.key]
                s.queue.in_flight[info.key] = info
                s.spawn(s._bind(fwk, state, info, node, start) if reported is None
                        else self._bind_after(reported, fwk, state, info, node, start))
            if assigned:  # upstream's message is its Success status's: none
                s.spawn(self.set_condition(pg, "True", "Scheduled", ""))
            s.queue.group_done(entry)
        return True

    def reject(self, entry: QueuedPodGroupInfo, pg: dict, reason: str, message: str, failures: dict[str, FitError],
               post: str = "", error: bool = False, preemptor: GroupPreemptor | None = None,
               fitted: frozenset[str] | set[str] = frozenset(), plugins: tuple[str, ...] = ()) -> None:
        """Every member gets FailedScheduling and PodScheduled=False, as
        upstream's submitPodGroupResult: a member that did not fit its own
        FitError; one that fitted (`fitted`) the group's message with the
        PodGroupPostFilter's verdict appended (AppendReason, joined by ", "),
        which the group's condition carries too; one never tried (the
        attempt stopped early) the group's message as it was before that
        verdict. The group waits for an event its members' rejecting
        plugins (and `plugins`) registered. After a preemption
        (`preemptor`), each member's nomination goes in the same status
        patch, as upstream's updatePod writes it, once the victims are
        evicted."""
        s = self.s
        prof = next(iter(entry.members.values())).spec.get("schedulerName") or "default-scheduler"
        s.metrics.schedule_attempts.labels("error" if error else "unschedulable", prof).inc(len(entry.members))
        entry.unschedulable_plugins = {p for e in failures.values() for p in e.plugins()} | set(plugins)
        nominated = {info.uid: node for info, node in self.nominated[entry.group]} if preemptor else {}
        verdict = f"{message}, {post}" if post else message
        reports = []
        for info in entry.members.values():
            fit = failures.get(info.key)
            text = str(fit) if fit else verdict if info.key in fitted else message
            reports.append((info.pod, reason, text, nominated.get(info.uid)))
        waits = [e for e in (self.reporting.get(entry.group), preemptor and preemptor.evicted) if e is not None]
        if waits:
            done = self.reporting[entry.group] = asyncio.Event()
            s.spawn(self._reports_after(entry.group, waits, reports, done))
        else:
            for report in reports:
                s.spawn(self._report(*report))
        s.spawn(self.set_condition(pg, "False", reason, verdict))
        s.queue.group_done(entry, error=error)

    async def _report(self, pod: dict, reason: str, message: str, node: str | None) -> None:
        """FailedScheduling, then PodScheduled=False with the nomination to
        `node` when the pod is not nominated there yet."""
        s = self.s
        md = pod["metadata"]
        if node is None or (pod.get("status") or {}).get("nominatedNodeName") == node:
            await s._report_failure(pod, reason, message)
            return
        await s._write(s.api.event(pod, "Warning", "FailedScheduling", message))
        cond = {"type": "PodScheduled", **observed_generation(pod), "status": "False", "reason": reason,
                "message": message, "lastProbeTime": None, "lastTransitionTime": s.clock.rfc3339()}
        await s._write(s.api.pods.patch(md["name"], {"status": {"conditions": [cond], "nominatedNodeName": node}},
                                        "application/strategic-merge-patch+json", namespace=md.get("namespace"),
                                        subresource="status", field_manager=SCHEDULER_FIELD_MANAGER))

    async def _reports_after(self, group: str, waits: list[asyncio.Event], reports: list[tuple], done: asyncio.Event) -> None:
        """Writes a group's failure reports once its victims are evicted and
        its earlier reports written, then sets `done`."""
        try:
            for e in waits:
                await e.wait()
            await asyncio.gather(*(self._report(*report) for report in reports))
        finally:
            done.set()
            if self.reporting.get(group) is done:
                del self.reporting[group]

    async def _bind_after(self, reported: asyncio.Event, fwk: Framework, state: CycleState, info: PodInfo, node: str,
                          start: float) -> None:
        """Binds once the group's failure reports are written: a
        PodScheduled=False landing after the binding would mark a bound pod
        unschedulable (upstream writes a failure before its next cycle)."""
        await reported.wait()
        await self.s._bind(fwk, state, info, node, start)

    async def set_condition(self, pg: dict, status: str, reason: str, message: str, condition: str = CONDITION,
                             composite: bool = False) -> None:
        """Writes PodGroupInitiallyScheduled (or a CompositePodGroup's
        condition) through the group's status; once True it never goes
        back, and the transition time only moves on a status change."""
        md = pg["metadata"]
        uid = md.get("uid", "")
        if uid in self.scheduled_uids:
            return
        if status == "True":
            self.scheduled_uids.add(uid)
        key = f"{md.get('namespace', '')}/{md['name']}"
        current = (self.composites.get(key) if composite else self.s.podgroups.get(key)) or pg
        conds = (current.get("status") or {}).get("conditions") or []
        old = find_condition(conds, condition)
        if old and (old.get("status") == "True"
                    or (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message)):
            return
        cond = {"type": condition, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": transition_time(old, status, self.s.clock.rfc3339())}
        if md.get("generation"):
            cond["observedGeneration"] = md["generation"]
        body = {"status": {"conditions": remove_condition(conds, condition) + [cond]}}
        client = self.composite_client if composite else self.s.podgroup_client
        await self.s._write(client.patch(md["name"], body, "application/merge-patch+json",
                                         namespace=md.get("namespace"), subresource="status",
                                         field_manager="kube-scheduler"))
