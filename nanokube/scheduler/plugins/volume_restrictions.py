"""VolumeRestrictions: a claim with the ReadWriteOncePod access mode serves
one pod: a pod naming one that a pod placed on a node (not yet finished) uses
fits no node, with upstream's reason. PreFilter finds the pods holding such claims;
Filter rejects every node while one of them is still in place, so preemption,
which takes pods off a trial copy of a node, frees the claim by evicting its
holder there."""

from __future__ import annotations

from ..framework import ASSIGNED_POD, NODE, SKIP, Action, ClusterEvent, Hint, Registration, unschedulable
from .volume_binding import PVC, claim_names, pod_claims, uses_claim

RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
_STATE = "PreFilterVolumeRestrictions"


class VolumeRestrictions:
    name = "VolumeRestrictions"
    #: its PreFilter skips a pod mounting no claim: the framework skips it for such a pod unasked
    claims_only = True

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        if handle is not None:
            self.claims = handle.informer("", "v1", "persistentvolumeclaims")

    def pre_filter(self, state, info):
        """The holders of the pod's ReadWriteOncePod claims as (uid, node name): the snapshot's
        pods, those assumed on a node included (upstream's IsPVCUsedByPods); Skip without any."""
        names = [name for name, ephemeral in pod_claims(info.pod) if not ephemeral]
        if not names:
            return None, SKIP
        ns = info.pod["metadata"].get("namespace", "")
        exclusive = set()
        for name in names:
            pvc = self.claims.get(f"{ns}/{name}")
            if pvc is None:
                return None, unschedulable(f'persistentvolumeclaim "{name}" not found', resolvable=False)
            if "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or []):
                exclusive.add(name)
        if not exclusive:
            return None, SKIP
        holders = [(uid, n.name) for n in state.snapshot.nodes for uid, held in n.pods.items()
                   if uid != info.uid and held.pod["metadata"].get("namespace") == ns
                   and exclusive & set(claim_names(held.pod))]
        if not holders:
            return None, SKIP
        state[_STATE] = holders
        return None, None

    def filter(self, state, info, node):
        """A holder elsewhere, or one still on this node, keeps the claim: no node fits
        (upstream's count of conflicting claims, which RemovePod lowers)."""
        if any(where != node.name or uid in node.pods for uid, where in state[_STATE]):
            return unschedulable(RWOP_CONFLICT)
        return None

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
