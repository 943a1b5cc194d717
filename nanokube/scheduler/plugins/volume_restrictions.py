"""VolumeRestrictions: a claim with the ReadWriteOncePod access mode serves
one pod: a pod naming one that a scheduled, running pod already uses waits
(preemption may free it), with upstream's reason."""

from __future__ import annotations

from ..framework import ASSIGNED_POD, SKIP, Action, ClusterEvent, Registration, unschedulable
from .volume_binding import PVC, claim_names

RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"


def _active(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class VolumeRestrictions:
    name = "VolumeRestrictions"

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        if handle is not None:
            self.claims = handle.informer("", "v1", "persistentvolumeclaims")

    def pre_filter(self, state, info):
        names = claim_names(info.pod)
        if not names:
            return None, SKIP
        ns = info.pod["metadata"].get("namespace", "")
        exclusive = set()
        for name in names:
            pvc = self.claims.get(f"{ns}/{name}")
            if pvc is not None and "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or []):
                exclusive.add(name)
        if not exclusive:
            return None, SKIP
        for other in self.handle.pods.list():
            md = other["metadata"]
            if md.get("namespace") != ns or md.get("uid") == info.uid or not _active(other):
                continue
            if exclusive & set(claim_names(other)):
                return None, unschedulable(RWOP_CONFLICT)
        return None, None

    def events_to_register(self) -> list[Registration]:
        return [Registration(ClusterEvent(ASSIGNED_POD, Action.DELETE)),
                Registration(ClusterEvent(PVC, Action.ADD | Action.UPDATE))]
