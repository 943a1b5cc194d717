"""ReplicationController controller: the ReplicaSet controller's logic over
core/v1 ReplicationControllers, whose selector is an equality map (upstream
runs the same code, wrapping each RC as a ReplicaSet)."""

from __future__ import annotations

from ..machinery.selectors import selector_from_object
from .replicaset import ReplicaSetController


class ReplicationControllerController(ReplicaSetController):
    name = "replicationcontroller-controller"
    queue_name = "replicationmanager"
    kind = "ReplicationController"
    api_version = "v1"
    resource = ("", "v1", "replicationcontrollers")
    component = "replication-controller"

    async def _terminating(self, rc: dict, pods: list[dict]) -> None:
        """An RC's status has no terminatingReplicas (upstream runs it with that feature off)."""
        return None

    def selector(self, rc: dict):
        """An empty map selects nothing here (validation refuses it anyway)."""
        sel = rc["spec"].get("selector")
        return selector_from_object({"matchLabels": sel}) if sel else None
