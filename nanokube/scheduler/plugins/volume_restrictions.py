"""VolumeRestrictions: a claim with the ReadWriteOncePod access mode serves
one pod: a pod naming one that a scheduled, running pod already uses waits
(preemption may free it), with upstream's reason."""

from __future__ import annotations

from ..framework import ASSIGNED_POD, NODE, SKIP, Action, ClusterEvent, Hint, Registration, unschedulable
from .volume_binding import PVC, claim_names, uses_claim

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
        """As upstream's: the deletion of a pod of the namespace that mounted a claim this pod
        mounts (its ReadWriteOncePod claim may be free now), any node's arrival (no hint, as
        upstream's), a claim the pod mounts created."""
        def freed_hint(pod: dict, old, new) -> Hint:
            if old["metadata"].get("namespace") != pod["metadata"].get("namespace"):
                return Hint.SKIP
            return Hint.QUEUE if set(claim_names(old)) & set(claim_names(pod)) else Hint.SKIP

        def claim_hint(pod: dict, old, new) -> Hint:
            return Hint.QUEUE if uses_claim(pod, new) else Hint.SKIP

        return [Registration(ClusterEvent(ASSIGNED_POD, Action.DELETE), freed_hint),
                Registration(ClusterEvent(NODE, Action.ADD)),
                Registration(ClusterEvent(PVC, Action.ADD), claim_hint)]
