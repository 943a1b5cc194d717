"""GangScheduling (PreEnqueue): a pod of a PodGroup waits outside the queue
until its PodGroup exists and, for a gang, until at least minCount members
(pending or assigned) have been observed. A PodGroup inside a
CompositePodGroup tree waits instead until the tree's root is ready:
minGroupCount of its children ready, recursively (a basic composite needs
one). The queue re-runs this check on PodGroup add, member add, minCount
decrease and CompositePodGroup add."""

from __future__ import annotations

from ..composites import NOT_READY, parent_name
from ..framework import unschedulable
from ...machinery.podgroups import group_name, min_count


class GangScheduling:
    name = "GangScheduling"
    #: PreEnqueue's verdict depends only on the pod's group, so the queue checks one member per event
    group_wide = True

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle

    def pre_enqueue(self, info):
        key = info.group
        if key is None:
            return None
        index = self.handle.podgroups
        pg = index.get(key)
        if pg is None:
            return unschedulable(f'waiting for pod\'s pod group "{group_name(info.pod)}" to appear in scheduling queue',
                                 resolvable=False)
        if parent_name(pg) and "CompositePodGroups" in self.handle.shared:  # the CompositePodGroup gate's index
            return self._composite(pg)
        need = min_count(pg)
        if need is not None and index.member_count(key) < need:
            return unschedulable("waiting for minCount pods from a gang to appear in scheduling queue",
                                 resolvable=False)
        return None

    def _composite(self, pg: dict):
        """Waits for the parents and the root's readiness; an invalid tree
        goes on to the workload cycle, which marks it Invalid."""
        composites = self.handle.shared["CompositePodGroups"]
        tree = composites.tree(pg)
        if tree.waiting:
            return unschedulable(tree.waiting, resolvable=False)
        if tree.root is not None and not composites.ready(tree.root):
            return unschedulable(NOT_READY, resolvable=False)
        return None
