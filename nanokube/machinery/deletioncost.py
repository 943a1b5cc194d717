"""The controller.kubernetes.io/pod-deletion-cost annotation (PodDeletionCost, on by default): the
API server rejects a pod write whose cost is no int32, and the ReplicaSet controller scales down the
pods of lower cost first."""

import re

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

_COST = re.compile(r"-?[0-9]+\Z")


def parse_deletion_cost(value: str) -> int | None:
    """GetDeletionCostFromPodAnnotations' parse: a 32-bit integer without '+' or leading zeros;
    None when `value` is not one."""
    if not _COST.match(value) or (value.startswith("0") and value != "0"):
        return None
    cost = int(value)
    return cost if -(1 << 31) <= cost < 1 << 31 else None


def pod_deletion_cost(annotations: dict | None) -> int:
    """A pod's cost as the controller reads it: 0 when absent or invalid (an old pod may keep a cost
    written before the API server checked it)."""
    value = (annotations or {}).get(POD_DELETION_COST)
    return (parse_deletion_cost(value) or 0) if isinstance(value, str) else 0
