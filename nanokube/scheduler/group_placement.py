"""What the workload cycle and the composite cycle share: the outcome of
the default algorithm on one placement, the candidate placements of a
topology constraint, and the members' consistency check."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from .cache import NodeInfo
from .cycle import FitError
from .framework import CycleState, Framework, PodInfo
from ..machinery.podgroups import group_priority


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

    def undo(self, fwk: Framework) -> None:
        """Unreserves the kept reservations and takes the pods out of the snapshot."""
        infos = {n.name: n for n in self.nodes}
        for info, node, state in reversed(self.assigned):
            fwk.run_unreserve(state, info, node)
            infos[node].remove_pod(info.uid)


def scheduler_name_error(pending: list[PodInfo]) -> str:
    """Upstream's SchedulerError text when members disagree on schedulerName."""
    first = pending[0].spec.get("schedulerName") or "default-scheduler"
    for info in pending:
        name = info.spec.get("schedulerName") or "default-scheduler"
        if name != first:
            return f'all pods in a single pod group should have the same .spec.schedulerName set, got: "{first}" and "{name}"'
    return ""


def consistency_error(pg: dict, pending: list[PodInfo]) -> str:
    """Upstream's SchedulerError text when members disagree with each other
    on schedulerName or with the group on priority; empty when they agree."""
    err = scheduler_name_error(pending)
    if err:
        return err
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


def tightness(nodes: list[NodeInfo]) -> float:
    """Mean CPU and memory allocation ratio of the placement (from the
    NodeInfos' flat totals, summed in C: every trial placement pays it)."""
    cpu = sum(map(attrgetter("alloc_cpu"), nodes))
    mem = sum(map(attrgetter("alloc_memory"), nodes))
    used_cpu = sum(map(attrgetter("used_cpu"), nodes))
    used_mem = sum(map(attrgetter("used_memory"), nodes))
    return ((used_cpu / cpu if cpu else 0.0) + (used_mem / mem if mem else 0.0)) / 2
