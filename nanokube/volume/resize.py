"""What the external resizer and the kubelet share about expanding a claim's volume
(RecoverVolumeExpansionFailure, GA since 1.34): the claim's sizes, its
`status.allocatedResourceStatuses["storage"]` and the resize conditions, as
upstream's pkg/volume/util/resize_util.go and the external-resizer's util keep
them. Each writer returns a new status and leaves the given one (an informer's
cached object) alone."""

from __future__ import annotations

from fractions import Fraction

from ..machinery.quantity import QuantityError, parse_quantity

#: ClaimResourceStatus values of allocatedResourceStatuses["storage"]
CONTROLLER_RESIZE_IN_PROGRESS = "ControllerResizeInProgress"
CONTROLLER_RESIZE_INFEASIBLE = "ControllerResizeInfeasible"
NODE_RESIZE_PENDING = "NodeResizePending"
NODE_RESIZE_IN_PROGRESS = "NodeResizeInProgress"
NODE_RESIZE_INFEASIBLE = "NodeResizeInfeasible"

#: PersistentVolumeClaimConditionType values of a resize
RESIZING = "Resizing"
FILE_SYSTEM_RESIZE_PENDING = "FileSystemResizePending"
CONTROLLER_RESIZE_ERROR = "ControllerResizeError"
NODE_RESIZE_ERROR = "NodeResizeError"
RESIZE_CONDITIONS = frozenset({RESIZING, FILE_SYSTEM_RESIZE_PENDING, CONTROLLER_RESIZE_ERROR, NODE_RESIZE_ERROR})

FS_RESIZE_PENDING_MESSAGE = "Waiting for user to (re-)start a pod to finish file system resize of volume on node."


def _storage(mapping: dict | None) -> Fraction | None:
    value = (mapping or {}).get("storage")
    try:
        return parse_quantity(str(value)) if value is not None else None
    except QuantityError:
        return None


def requested(pvc: dict) -> Fraction | None:
    return _storage(((pvc.get("spec") or {}).get("resources") or {}).get("requests"))


def capacity(pvc: dict) -> Fraction | None:
    return _storage((pvc.get("status") or {}).get("capacity"))


def allocated(pvc: dict) -> Fraction | None:
    return _storage((pvc.get("status") or {}).get("allocatedResources"))


def volume_capacity(pv: dict) -> Fraction | None:
    return _storage((pv.get("spec") or {}).get("capacity"))


def resize_status(pvc: dict) -> str:
    return ((pvc.get("status") or {}).get("allocatedResourceStatuses") or {}).get("storage", "")


def merge_conditions(old: list[dict] | None, new: list[dict], keep_old: bool) -> list[dict]:
    """MergeResizeConditionsOfPVC: conditions other than a resize's stay; a resize condition of a
    type in `new` is replaced by it, the others stay only with `keep_old`; the rest of `new` is added."""
    pending = {c["type"]: c for c in new}
    out = []
    for c in old or []:
        if c.get("type") not in RESIZE_CONDITIONS:
            out.append(c)
        elif c["type"] in pending:
            out.append(pending.pop(c["type"]))
        elif keep_old:
            out.append(c)
    return out + list(pending.values())


def with_storage_status(status: dict, value: str | None) -> dict:
    """`status` with allocatedResourceStatuses["storage"] set to `value`, or removed for None (the
    map goes when it empties)."""
    statuses = dict(status.get("allocatedResourceStatuses") or {})
    if value is None:
        statuses.pop("storage", None)
    else:
        statuses["storage"] = value
    out = {k: v for k, v in status.items() if k != "allocatedResourceStatuses"}
    return out | {"allocatedResourceStatuses": statuses} if statuses else out


def condition(ctype: str, now: str, message: str = "") -> dict:
    c = {"type": ctype, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
    return c | {"message": message} if message else c


def resize_finished(status: dict, size: str) -> dict:
    """MarkFSResizeFinished / markOverallExpansionAsFinished: the capacity is the new size, no resize
    condition or storage resize status is left."""
    out = with_storage_status(status, None)
    out["capacity"] = {**(status.get("capacity") or {}), "storage": size}
    conditions = merge_conditions(status.get("conditions"), [], keep_old=False)
    if conditions:
        out["conditions"] = conditions
    else:
        out.pop("conditions", None)
    return out
