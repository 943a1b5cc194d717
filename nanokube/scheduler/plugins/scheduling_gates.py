"""SchedulingGates: a pod with spec.schedulingGates stays out of activeQ
until every gate is removed."""

from __future__ import annotations

from ..framework import (
    UNSCHEDULED_POD,
    Action,
    ClusterEvent,
    Registration,
    own_update,
    unschedulable,
)


class SchedulingGates:
    name = "SchedulingGates"

    def __init__(self, args: dict, handle) -> None:
        pass

    def pre_enqueue(self, info):
        gates = info.spec.get("schedulingGates") or []
        if not gates:
            return None
        names = " ".join(g.get("name", "") for g in gates)
        return unschedulable(f"waiting for scheduling gates: [{names}]", resolvable=False)

    def events_to_register(self) -> list[Registration]:
        return [Registration(ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED), own_update)]
