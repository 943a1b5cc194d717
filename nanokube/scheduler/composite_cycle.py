"""The workload cycle of a CompositePodGroup tree: when any of its leaf
PodGroups is popped, the pending members of every leaf are taken from the
queue and placed together in one snapshot. Children are tried in a fixed
order, greedily: a leaf keeps its reservations when it reaches its
minCount (on its best topology placement), a composite when minGroupCount
of its children succeed; a composite that falls short rolls back its whole
subtree. If the root succeeds every kept placement is bound at once,
otherwise nothing is placed and every member gets FailedScheduling. A tree
the runtime check refuses gets the Invalid condition on its root."""

from __future__ import annotations

from dataclasses import dataclass, field

from .composites import CONDITION, INVALID, Member
from .framework import Framework, PodInfo
from .group_placement import Attempt, consistency_error, placements, scheduler_name_error
from .plugins.gang import GangScheduling
from ..machinery.podgroups import topology_keys
from .queue import QueuedPodGroupInfo

COMPOSITE = "compositepodgroup"
UNSCHEDULABLE, SCHEDULER_ERROR = "Unschedulable", "SchedulerError"


@dataclass
class Plan:
    """Kept placements per leaf and the composites satisfied so far."""

    kept: dict[str, Attempt] = field(default_factory=dict)
    satisfied: set[str] = field(default_factory=set)
    failures: dict[str, Attempt] = field(default_factory=dict)


class CompositeCycle:
    def __init__(self, wc, entry: QueuedPodGroupInfo, pg: dict) -> None:
        self.wc = wc
        self.s = wc.s
        self.entry = entry
        self.pg = pg
        self.entries: dict[str, QueuedPodGroupInfo] = {entry.group: entry}

    def run(self) -> tuple[str, str] | None:
        tree = self.wc.composites.tree(self.pg)
        if tree.root is None:
            if tree.culprit is not None:
                self.s.spawn(self.wc.set_condition(tree.culprit, "False", INVALID, tree.invalid, CONDITION,
                                                    composite=True))
            self._reject_all(UNSCHEDULABLE, tree.invalid or tree.waiting)
            return "unschedulable", COMPOSITE
        root = tree.root
        self._gather(root)
        pending = [i for e in self.entries.values() for i in e.members.values()]
        if not pending:
            for e in self.entries.values():
                self.s.queue.group_done(e)
            return None
        err = scheduler_name_error(pending) or next(
            (msg for leaf in root.leaves() if (e := self.entries.get(leaf.key)) and e.members
             for msg in [consistency_error(leaf.obj, list(e.members.values()))] if msg), "")
        if err:
            self.s.spawn(self.wc.set_condition(root.obj, "False", SCHEDULER_ERROR, err, CONDITION, composite=True))
            self._reject_all(SCHEDULER_ERROR, err, error=True)
            return "error", COMPOSITE
        fwk = self.s.frameworks[pending[0].spec.get("schedulerName") or "default-scheduler"]
        self.s.cache.update_snapshot(self.s.snapshot)
        start = self.s.clock.monotonic()
        plan = Plan()
        ok, message = self._place(fwk, root, plan)
        for att in plan.kept.values():
            att.undo(fwk)
        self.s.metrics.podgroup_algorithm_duration.labels(fwk.profile.scheduler_name, COMPOSITE).observe(
            self.s.clock.monotonic() - start)
        if ok:
            parts = [(e, self._leaf_obj(root, key), plan.kept[key].assigned)
                     for key, e in self.entries.items() if key in plan.kept]
            if not self.wc.commit(fwk, parts):
                for key, e in self.entries.items():
                    if key not in plan.kept:
                        self._finish(e, self._leaf_obj(root, key), "the composite pod group could not be reserved")
                return "unschedulable", COMPOSITE
            for key, e in self.entries.items():
                if key not in plan.kept:
                    att = plan.failures.get(key)
                    self._finish(e, self._leaf_obj(root, key), att.message if att else "no pods were schedulable",
                                 att.failures if att else {})
            for comp in root.composites():
                if comp.key in plan.satisfied:
                    self.s.spawn(self.wc.set_condition(comp.obj, "True", "Scheduled", "", CONDITION,
                                                        composite=True))
            return "scheduled", COMPOSITE
        self.s.spawn(self.wc.set_condition(root.obj, "False", UNSCHEDULABLE, message, CONDITION, composite=True))
        for key, e in self.entries.items():
            att = plan.failures.get(key)
            self._finish(e, self._leaf_obj(root, key), message if att is None else f"{message}; {att.message}",
                         att.failures if att else {}, gang=True)
        return "unschedulable", COMPOSITE

    def _finish(self, e: QueuedPodGroupInfo, pg: dict, message: str, failures: dict | None = None,
                reason: str = UNSCHEDULABLE, error: bool = False, gang: bool = False) -> None:
        """Rejects the entry's members, or hands an emptied entry back. With
        `gang` (the tree refused), a leaf with no pod rejected by a plugin
        (never tried, or cut short) was rejected by GangScheduling: it waits
        for a member or group event, or for another leaf's retry to gather
        it, not a backoff as after an error."""
        if e.members:
            self.wc.reject(e, pg, reason, message, failures or {}, error=error,
                           plugins=(GangScheduling.name,) if gang and not failures and not error else ())
        else:
            self.s.queue.group_done(e)

    def _leaf_obj(self, root: Member, key: str) -> dict:
        return next(leaf.obj for leaf in root.leaves() if leaf.key == key)

    def _gather(self, root: Member) -> None:
        """Takes the queued entries of the tree's other leaves out of the
        queue: this cycle schedules them and hands them back when done."""
        q = self.s.queue
        for leaf in root.leaves():
            e = q.groups.get(leaf.key)
            if e is None or e is self.entry:
                continue
            q.active_keys.pop(e.key, None)
            q.backoff.pop(e.key, None)
            q.unschedulable.pop(e.key, None)
            q.in_flight[e.key] = e
            self.wc.prune(e)
            self.entries[leaf.key] = e

    def _reject_all(self, reason: str, message: str, error: bool = False) -> None:
        for key, e in self.entries.items():
            self._finish(e, self.s.podgroups.get(key) or self.pg, message, reason=reason, error=error, gang=True)

    def _place(self, fwk: Framework, node: Member, plan: Plan) -> tuple[bool, str]:
        if not node.composite:
            return self._place_leaf(fwk, node, plan)
        need, scheduled, remaining = node.need, 0, len(node.children)
        for child in node.children:
            remaining -= 1
            ok, _ = self._place(fwk, child, plan)
            scheduled += ok
            if scheduled + remaining < need:
                break
        if scheduled >= need:
            plan.satisfied.add(node.key)
            return True, ""
        for leaf in node.leaves():
            att = plan.kept.pop(leaf.key, None)
            if att is not None:
                att.undo(fwk)
        plan.satisfied -= {c.key for c in node.composites()}
        return False, f"minGroupCount ({need}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"

    def _place_leaf(self, fwk: Framework, leaf: Member, plan: Plan) -> tuple[bool, str]:
        """The leaf's best feasible placement, kept in the snapshot; a leaf
        with nothing pending succeeds when its placed members suffice."""
        e = self.entries.get(leaf.key)
        pending: list[PodInfo] = sorted(e.members.values(), key=lambda i: i.timestamp) if e else []
        placed = self.wc.placed(leaf.key, pending)
        if not pending:
            return len(placed) >= leaf.need, ""
        keys = topology_keys(leaf.obj) if self.wc.topology else []
        domains = placements(self.s.snapshot.nodes, keys, set(placed.values()))
        attempts = [self.wc.try_placement(fwk, nodes, pending, leaf.need, len(placed)) for nodes in domains]
        feasible = [a for a in attempts if a.feasible]
        if not feasible:
            if attempts:
                plan.failures[leaf.key] = max(attempts, key=lambda a: len(a.assigned))
            return False, ""
        best = max(feasible, key=Attempt.score)
        kept = self.wc.try_placement(fwk, best.nodes, pending, leaf.need, len(placed), keep=True)
        if not kept.feasible:  # scoring ties broke differently: nothing is kept
            kept.undo(fwk)
            plan.failures[leaf.key] = kept
            return False, ""
        plan.kept[leaf.key] = kept
        return True, ""
