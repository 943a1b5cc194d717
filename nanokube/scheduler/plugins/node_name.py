"""NodeName: a pod that names its node fits only that node."""

from __future__ import annotations

from ..framework import NODE, SKIP, Action, ClusterEvent, Registration, unschedulable

REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = "NodeName"

    def __init__(self, args: dict, handle) -> None:
        pass

    def pre_filter(self, state, info):
        """Pods that name no node (nearly all) skip the per-node Filter."""
        return None, None if info.spec.get("nodeName") else SKIP

    def filter(self, state, info, node):
        want = info.spec.get("nodeName")
        if want and want != node.name:
            return unschedulable(REASON, resolvable=False)
        return None

    def events_to_register(self) -> list[Registration]:
        """Only a node's arrival (upstream with queueing hints): no update renames a node."""
        return [Registration(ClusterEvent(NODE, Action.ADD))]
