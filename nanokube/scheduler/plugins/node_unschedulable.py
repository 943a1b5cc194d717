"""NodeUnschedulable: nodes with spec.unschedulable take only pods that
tolerate the node.kubernetes.io/unschedulable:NoSchedule taint."""

from __future__ import annotations

from operator import attrgetter

from ..framework import NODE, UNSCHEDULED_POD, Action, ClusterEvent, Hint, Registration, own_update, unschedulable
from ...machinery.scheduling import tolerates

REASON = "node(s) were unschedulable"
_UNSCHEDULABLE = attrgetter("unschedulable")
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _node_hint(pod: dict, old, new) -> Hint:
    """Upstream's isSchedulableAfterNodeChange: a schedulable node arrived, or a node was uncordoned."""
    if new is None or (new.get("spec") or {}).get("unschedulable"):
        return Hint.SKIP
    return Hint.QUEUE if old is None or (old.get("spec") or {}).get("unschedulable") else Hint.SKIP


def _toleration_hint(pod: dict, old, new) -> Hint:
    """The pod's own new toleration helps only if it tolerates the unschedulable taint."""
    if own_update(pod, old, new) is Hint.SKIP:
        return Hint.SKIP
    return Hint.QUEUE if any(tolerates(t, TAINT) for t in (new.get("spec") or {}).get("tolerations") or []) else Hint.SKIP


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def __init__(self, args: dict, handle) -> None:
        pass

    def filter(self, state, info, node):
        if not node.unschedulable:
            return None
        if any(tolerates(t, TAINT) for t in info.spec.get("tolerations") or []):
            return None
        return unschedulable(REASON, resolvable=False)

    def filter_nodes(self, state, info, nodes) -> dict:
        """`filter` over many nodes: only unschedulable ones can fail (and usually none is, which
        the searched snapshot's count says without a walk)."""
        snap = getattr(state, "snapshot", None)
        if snap is not None and snap.none_unschedulable() or not any(map(_UNSCHEDULABLE, nodes)):
            return {}
        return {i: st for i, n in enumerate(nodes) if n.unschedulable and (st := self.filter(state, info, n)) is not None}

    def events_to_register(self) -> list[Registration]:
        return [Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_TAINT), _node_hint),
                Registration(ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_TOLERATIONS), _toleration_hint)]
