"""One scheduling cycle: find feasible nodes (stopping at upstream's
adaptive percentageOfNodesToScore), score them, pick the best, assume the
pod in the cache, Reserve and Permit, then bind asynchronously."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from .cache import Snapshot
from .framework import Code, CycleState, Framework, NodeToStatus, PodInfo, Status

MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
NO_NODES = "no nodes available to schedule pods"


def num_feasible_nodes_to_find(num_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring: all of a small
    cluster, else max(5, 50 - n/125)% (or the configured percentage), never
    fewer than 100."""
    if num_nodes < MIN_FEASIBLE_NODES:
        return num_nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_PERCENTAGE, 50 - num_nodes // 125)
    if percentage >= 100:
        return num_nodes
    return max(num_nodes * percentage // 100, MIN_FEASIBLE_NODES)


class PluginError(RuntimeError):
    """A plugin's error (not a rejection) in PreFilter, Filter or PreScore: the attempt fails as a
    SchedulerError with upstream's wrapped text (`running "DynamicResources" filter plugin: ...`)."""


@dataclass
class FitError(Exception):
    """No node fits; the message is upstream's FitError text."""

    num_nodes: int
    statuses: dict[str, Status] = field(default_factory=NodeToStatus)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    #: how many nodes the search went through (its start moves modulo that), 0 for none, None when it never
    #: began (PreFilter turned the pod away): what `Algorithm.repeat_failure` replays
    searched: int | None = None

    def plugins(self) -> set[str]:
        found = {s.plugin for s in self.statuses.values() if s.plugin} if self.statuses else set()
        absent = getattr(self.statuses, "absent", None)
        if absent is not None and absent.plugin:
            found.add(absent.plugin)
        return found

    def __str__(self) -> str:
        if self.num_nodes == 0 and self.pre_filter_msg == NO_NODES:
            return NO_NODES
        msg = f"0/{self.num_nodes} nodes are available:"
        absent = getattr(self.statuses, "absent", None)
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        elif not self.statuses and absent is not None and len(absent.reasons) == 1:
            msg += f" {self.statuses.num_absent} {absent.reasons[0]}."  # PreFilter left out every node
        else:
            counts = Counter(r for s in self.statuses.values() for r in s.reasons) if self.statuses else {}
            if absent is not None:
                for r in absent.reasons:
                    counts[r] = counts.get(r, 0) + self.statuses.num_absent
            msg += " " + ", ".join(sorted(f"{n} {r}" for r, n in counts.items())) + "."
        if self.post_filter_msg:
            msg += " " + self.post_filter_msg
        return msg


def _rejections(plugin, state: CycleState, info: PodInfo, nodes: list) -> dict[int, Status]:
    """Position -> status of the nodes a Filter plugin rejects, through its
    `filter_nodes` where it has one (a tight loop over the nodes), else one
    `filter` call per node."""
    batch = getattr(plugin, "filter_nodes", None)
    if batch is not None:
        return batch(state, info, nodes)
    fn = plugin.filter
    return {i: s for i, node in enumerate(nodes) if (s := fn(state, info, node)) is not None}


def _statuses(rejections: list[tuple[str, list, dict[int, Status]]], searched: list,
              absent: Status | None, num_absent: int) -> NodeToStatus:
    """Each rejected node's status, attributed to its plugin, in the order
    the nodes were searched, as a node-by-node search records them; the
    nodes PreFilter left out share `absent`."""
    failed: dict[str, Status] = {}
    for plugin, nodes, rejected in rejections:
        for pos, st in rejected.items():
            st.plugin = plugin
            failed[nodes[pos].name] = st
    return NodeToStatus(((node.name, failed[node.name]) for node in searched if node.name in failed),
                        absent, num_absent)


def _absent_status(fwk: Framework, state: CycleState) -> Status:
    """What the nodes a PreFilter result left out are marked with: the Filter verdict of the one
    plugin that narrowed them where it names one (so messages read as if every node was
    filtered), else upstream's `node(s) didn't satisfy plugin(s) [...]`."""
    names = state.narrowed_by
    reason = getattr(fwk.plugins.get(names[0]), "absent_reason", None) if len(names) == 1 else None
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                  [reason or f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(names))}]"],
                  names[0] if len(names) == 1 else "")


@dataclass(slots=True)
class Failure:
    """An attempt that found no node for the pod (PostFilter nominated none either), kept on its
    PodInfo so that a retry of the same pod over the same cluster, which upstream runs in full
    every 5 minutes while the pod waits, repeats the outcome instead of filtering every node
    and searching for preemption victims again: the same FailedScheduling message, the same
    rejecting plugins, the search's start moved as the search moves it, and the preemption
    attempts PostFilter counted. `key` is what the attempt read: see Scheduler._failure_key."""

    pod: dict
    key: tuple
    message: str
    plugins: set[str]
    searched: int | None
    preemption_attempts: float


class Algorithm:
    """The synchronous part of a cycle, over a snapshot."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.next_start = 0
        self.rng = rng or random.Random()

    def find_nodes(self, fwk: Framework, state: CycleState, info: PodInfo, snap: Snapshot) -> list:
        state.snapshot = snap
        narrowed, st = fwk.run_pre_filter(state, info)
        nodes = snap.nodes
        if st is not None:
            if st.code == Code.ERROR:
                raise PluginError(f'running PreFilter plugin "{st.plugin}": {st.message()}')
            raise FitError(len(nodes), NodeToStatus(absent=st, num_absent=len(nodes)), pre_filter_msg=st.message())
        absent, num_absent = None, 0
        if narrowed is not None:
            index = snap.index
            nodes = sorted((snap.infos[n] for n in narrowed if n in snap.infos), key=lambda i: index[i.name]) \
                if narrowed else []
            num_absent = len(snap.nodes) - len(nodes)
            if num_absent:
                absent = _absent_status(fwk, state)
            if not nodes:  # none to search (a nodeSelector no node carries): what the search below ends with
                self.next_start = 0
                raise FitError(len(snap.nodes), NodeToStatus(absent=absent, num_absent=num_absent), searched=0)
        filters = fwk.filters(state)
        nominated = (info.pod.get("status") or {}).get("nominatedNodeName")
        if nominated:
            # upstream's evaluateNominatedNode: the node a preemption made room on is tried
            # first, and taken without scoring when every Filter passes there
            ni = snap.infos.get(nominated)
            if ni is not None and (narrowed is None or nominated in narrowed) and not any(
                    _rejections(p, state, info, [ni]) for p in filters):
                return [ni]
        n = len(nodes)
        want = num_feasible_nodes_to_find(n, fwk.profile.percentage_of_nodes_to_score)
        feasible: list = []
        #: (plugin, nodes it filtered, position -> status), turned into FitError's statuses only when nothing fits
        rejections: list[tuple[str, list, dict[int, Status]]] = []
        start = self.next_start % n if n else 0
        processed = 0
        # Nodes go through the filters a chunk at a time, each plugin over the
        # chunk's survivors of the plugins before it; a chunk is only as long
        # as the feasible nodes still wanted, so exactly the (node, plugin)
        # pairs of a node-by-node search run, and the search stops where it would.
        while processed < n and len(feasible) < want:
            size = min(want - len(feasible), n - processed)
            at = (start + processed) % n
            chunk = nodes[at:at + size]
            if len(chunk) < size:
                chunk += nodes[:size - len(chunk)]
            processed += size
            for p in filters:
                rejected = _rejections(p, state, info, chunk)
                if not rejected:
                    continue
                for s in rejected.values():
                    if s.code == Code.ERROR:
                        raise PluginError(f'running "{p.name}" filter plugin: {s.message()}')
                rejections.append((p.name, chunk, rejected))
                chunk = [node for pos, node in enumerate(chunk) if pos not in rejected] \
                    if len(rejected) < len(chunk) else []
                if not chunk:
                    break
            feasible += chunk
        self.next_start = (start + processed) % n if n else 0
        if not feasible:
            raise FitError(len(snap.nodes), _statuses(rejections, nodes[start:] + nodes[:start], absent, num_absent),
                           searched=n)
        return feasible

    def schedule(self, fwk: Framework, state: CycleState, info: PodInfo, snap: Snapshot) -> tuple[str, int, int]:
        """(chosen node, nodes evaluated, feasible nodes) or FitError."""
        if not snap.nodes:
            raise FitError(0, pre_filter_msg=NO_NODES)
        feasible = self.find_nodes(fwk, state, info, snap)
        if len(feasible) == 1:
            return feasible[0].name, 1, 1
        st = fwk.run_pre_score(state, info, feasible)
        if st is not None:
            raise PluginError(f'running PreScore plugin "{st.plugin}": {st.message()}')
        totals = fwk.run_score(state, info, feasible)
        return self.select_host(feasible, totals), len(feasible), len(feasible)

    def repeat_failure(self, searched: int | None) -> None:
        """Moves the search's start as a search that ended in `FitError(searched=...)` does: one
        through every one of n nodes leaves it where it began (modulo n), one of none at 0."""
        if searched is not None:
            self.next_start = self.next_start % searched if searched else 0

    def select_host(self, nodes: list, totals: list[int]) -> str:
        """The highest score; ties broken uniformly at random: the r-th of them in order, found
        by stepping `list.index` from one to the next (C-level scans; testing every total
        through `top.__eq__` cost a slot-wrapper call per node)."""
        top = max(totals)
        i = totals.index(top)
        ties = totals.count(top)
        if ties > 1:
            index = totals.index
            for _ in range(self.rng.randrange(ties)):
                i = index(top, i + 1)
        return nodes[i].name
