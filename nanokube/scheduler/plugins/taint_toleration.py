"""TaintToleration: Filter rejects nodes with an untolerated NoSchedule or
NoExecute taint; Score prefers nodes with fewer untolerated
PreferNoSchedule taints."""

from __future__ import annotations

from operator import attrgetter

from ..framework import (
    NODE,
    SKIP,
    UNSCHEDULED_POD,
    Action,
    ClusterEvent,
    Hint,
    Registration,
    own_update,
    unschedulable,
)
from ...machinery.scheduling import tolerates, untolerated
from .normalize import default_normalize

_KEY = "PreScoreTaintToleration"
_TAINTS = attrgetter("taints")
_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")


def _untainted(state, nodes) -> bool:
    """Whether none of `nodes` is tainted: known from the searched snapshot's count when it has
    no tainted node at all, else by a walk."""
    snap = getattr(state, "snapshot", None)
    return snap is not None and snap.none_tainted() or not any(map(_TAINTS, nodes))


def reason(taint: dict) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


class TaintToleration:
    name = "TaintToleration"
    default_weight = 3

    def __init__(self, args: dict, handle) -> None:
        pass

    def filter(self, state, info, node):
        if not node.taints:
            return None
        t = untolerated(node.taints, info.spec.get("tolerations") or [], _DO_NOT_SCHEDULE)
        return None if t is None else unschedulable(reason(t), resolvable=False)

    def filter_nodes(self, state, info, nodes) -> dict:
        """`filter` over many nodes: only tainted ones can fail (and often none is, which the
        searched snapshot's count says without a walk)."""
        if _untainted(state, nodes):
            return {}
        return {i: st for i, n in enumerate(nodes) if n.taints and (st := self.filter(state, info, n)) is not None}

    def pre_score(self, state, info, nodes):
        """Skips Score where no node is tainted: every node would score the same (the most), which
        moves no node's rank."""
        if _untainted(state, nodes):
            return SKIP
        state[_KEY] = [t for t in info.spec.get("tolerations") or [] if (t.get("effect") or "PreferNoSchedule") == "PreferNoSchedule"]

    def score_nodes(self, state, info, nodes) -> list[int]:
        """Untolerated PreferNoSchedule taints per node."""
        tols = state[_KEY]
        return [sum(1 for t in n.taints if t.get("effect") == "PreferNoSchedule" and not any(tolerates(x, t) for x in tols))
                if n.taints else 0 for n in nodes]

    def normalize_score(self, state, info, scores: list[int]) -> None:
        default_normalize(scores, reverse=True)

    def events_to_register(self) -> list[Registration]:
        def hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterNodeChange: the node went from an untolerated taint to
            none (a node the pod tolerated already did not reject it)."""
            if new is None:
                return Hint.SKIP
            tols = (pod.get("spec") or {}).get("tolerations") or []
            if untolerated((new.get("spec") or {}).get("taints") or [], tols, _DO_NOT_SCHEDULE):
                return Hint.SKIP
            was = old is None or untolerated((old.get("spec") or {}).get("taints") or [], tols, _DO_NOT_SCHEDULE)
            return Hint.QUEUE if was else Hint.SKIP

        return [Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_TAINT), hint),
                Registration(ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_TOLERATIONS), own_update)]
