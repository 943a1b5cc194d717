"""NodePorts: a pod's host ports must be free on the node; ports clash on
the same protocol and port when either host IP is the wildcard or both
are equal."""

from __future__ import annotations

from ...machinery.scheduling import host_ports, ports_conflict
from ..framework import (
    ASSIGNED_POD,
    NODE,
    SKIP,
    Action,
    ClusterEvent,
    Hint,
    Registration,
    unschedulable,
)

REASON = "node(s) didn't have free ports for the requested pod ports"
_KEY = "PreFilterNodePorts"


class NodePorts:
    name = "NodePorts"

    def __init__(self, args: dict, handle) -> None:
        pass

    def pre_filter(self, state, info):
        ports = host_ports(info.pod)
        if not ports:
            return None, SKIP
        state[_KEY] = ports
        return None, None

    def filter(self, state, info, node):
        if node.ports and ports_conflict(state[_KEY], node.ports):
            return unschedulable(REASON)
        return None

    def events_to_register(self) -> list[Registration]:
        """As upstream with queueing hints: a node's arrival (no node update frees a port), and the
        deletion of a pod holding a port this pod wants."""
        def freed_hint(pod: dict, old, new) -> Hint:
            used = host_ports(old)
            return Hint.QUEUE if used and ports_conflict(host_ports(pod), used) else Hint.SKIP

        return [Registration(ClusterEvent(ASSIGNED_POD, Action.DELETE), freed_hint),
                Registration(ClusterEvent(NODE, Action.ADD))]
