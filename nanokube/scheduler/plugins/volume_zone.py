"""VolumeZone: a pod whose bound volumes carry zone or region labels fits only
nodes with the same labels (a label value may list zones joined by `__`)."""

from __future__ import annotations

from ..framework import NODE, SKIP, Action, ClusterEvent, Hint, Registration, unschedulable
from .volume_binding import PV, PVC, STORAGE_CLASS, claim_names, uses_claim

CONFLICT = "node(s) had no available volume zone"
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                   "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region")
_STATE = "VolumeZone"


class VolumeZone:
    name = "VolumeZone"

    def __init__(self, args: dict, handle) -> None:
        if handle is not None:
            self.claims = handle.informer("", "v1", "persistentvolumeclaims")
            self.volumes = handle.informer("", "v1", "persistentvolumes")

    def pre_filter(self, state, info):
        """The zone and region labels of the pod's bound volumes, as (label, allowed values)."""
        ns = info.pod["metadata"].get("namespace", "")
        wanted = []
        for name in claim_names(info.pod):
            pvc = self.claims.get(f"{ns}/{name}")
            volume = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = self.volumes.get(volume) if volume else None
            labels = ((pv or {}).get("metadata") or {}).get("labels") or {}
            wanted += [(k, set(labels[k].split("__"))) for k in TOPOLOGY_LABELS if k in labels]
        if not wanted:
            return None, SKIP
        state[_STATE] = wanted
        return None, None

    def filter(self, state, info, node):
        for key, values in state[_STATE]:
            if node.labels.get(key) not in values:
                return unschedulable(CONFLICT, resolvable=False)
        return None

    def events_to_register(self) -> list[Registration]:
        """As upstream's: a new StorageClass that binds on first consumer (its claims wait for
        the pod), a claim the pod mounts created or changed (bound to a volume), a volume created
        or its zone or region labels changed, a node arriving or relabelled."""
        def class_hint(pod: dict, old, new) -> Hint:
            return Hint.QUEUE if new.get("volumeBindingMode") == "WaitForFirstConsumer" else Hint.SKIP

        def claim_hint(pod: dict, old, new) -> Hint:
            return Hint.QUEUE if uses_claim(pod, new) else Hint.SKIP

        def volume_hint(pod: dict, old, new) -> Hint:
            return Hint.QUEUE if old is None or _topology(old) != _topology(new) else Hint.SKIP

        return [Registration(ClusterEvent(STORAGE_CLASS, Action.ADD), class_hint),
                Registration(ClusterEvent(PVC, Action.ADD | Action.UPDATE), claim_hint),
                Registration(ClusterEvent(PV, Action.ADD | Action.UPDATE), volume_hint),
                Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL))]


def _topology(pv: dict) -> dict:
    labels = (pv.get("metadata") or {}).get("labels") or {}
    return {k: labels[k] for k in TOPOLOGY_LABELS if k in labels}
