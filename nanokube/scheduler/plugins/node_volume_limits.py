"""NodeVolumeLimits (upstream's CSILimits): each CSI driver on a node may hold only as many volumes
as its CSINode entry's allocatable.count says; a pod whose claims would take a driver past it there
does not fit (`node(s) exceed max volume count`). Volumes are counted once per node by driver and
handle: those of the pods on the node, those VolumeAttachments still hold there after their pods
went, and the pod's own new ones; a claim not bound yet counts as a new volume of its class's
provisioner. A migrated in-tree volume (an awsElasticBlockStore PersistentVolume, a class of
`kubernetes.io/aws-ebs`) counts for its CSI driver (volume/migration.py). A node without a
CSINode, or whose drivers give no count, has no limit. A pod that mounts no claim is skipped
before its PreFilter (`claims_only`): the framework's one test of its volumes, shared with
VolumeRestrictions and VolumeBinding, is all such a pod meets.

The queueing hints, as upstream's: a CSINode added, or one whose driver's count grew; a pod with a
claim volume that was on a node deleted; a claim the pod mounts created; a VolumeAttachment
deleted, for a pod mounting a claim."""

from __future__ import annotations

import secrets
from collections import Counter

from ..framework import ASSIGNED_POD, SKIP, Action, ClusterEvent, Hint, Registration, Status, Code, unschedulable
from ...volume.attachment import uses_claims
from ...volume.migration import csi_volume, provisioner_driver
from .volume_binding import PVC, pod_claims, uses_claim

MAX_VOLUME_COUNT = "node(s) exceed max volume count"
CSI_NODE, VOLUME_ATTACHMENT = "CSINode", "VolumeAttachment"
_STATE = "PreFilterNodeVolumeLimits"
_NODE = "nodeName"


def _limits(csinode: dict | None) -> dict[str, int]:
    """Driver -> its allocatable.count on the node (getVolumeLimits)."""
    out = {}
    for d in ((csinode or {}).get("spec") or {}).get("drivers") or ():
        count = (d.get("allocatable") or {}).get("count")
        if count is not None:
            out[d.get("name", "")] = count
    return out


class NodeVolumeLimits:
    name = "NodeVolumeLimits"
    #: its PreFilter skips a pod mounting no claim: the framework skips it for such a pod unasked
    claims_only = True

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        #: an unbound claim's stand-in handle starts with this, so it never equals a real volume's
        self.prefix = secrets.token_hex(16)
        if handle is None:
            return
        self.claims = handle.informer("", "v1", "persistentvolumeclaims")
        self.volumes = handle.informer("", "v1", "persistentvolumes")
        self.classes = handle.informer("storage.k8s.io", "v1", "storageclasses")
        self.csinodes = handle.informer("storage.k8s.io", "v1", "csinodes")
        self.attachments = handle.informer("storage.k8s.io", "v1", "volumeattachments")
        self.attachments.add_index(_NODE, lambda va: (va.get("spec") or {}).get("nodeName"))
        self.csinodes.add_handlers(lambda o: self._event(CSI_NODE, Action.ADD, None, o),
                                   lambda old, new: self._event(CSI_NODE, Action.UPDATE, old, new))
        self.attachments.add_handlers(on_delete=lambda o: self._event(VOLUME_ATTACHMENT, Action.DELETE, o, None))

    def _event(self, kind: str, action: Action, old, new) -> None:
        self.handle.queue.on_event(ClusterEvent(kind, action, f"{kind}{action.name.title()}"), old, new)

    def pre_filter(self, state, info):
        """The pod's own CSI volumes (unique name -> driver), or Skip for a pod mounting no claim."""
        if not uses_claims(info.pod):
            return None, SKIP
        new: dict[str, str] = {}
        missing = self._count(info.pod, new, True)
        if missing is None and not new:  # no CSI volume among its claims: every node fits (Filter's first exit)
            return None, SKIP
        state[_STATE] = (new, missing)
        return None, None

    def filter(self, state, info, node):
        new, missing = state[_STATE]
        if missing is not None:
            return missing
        limits = _limits(self.csinodes.get(node.name))
        if not limits:
            return None
        held: dict[str, str] = {}
        for placed in node.pods.values():
            if uses_claims(placed.pod):
                self._count(placed.pod, held, False)
        counts = Counter(held.values())
        for va in self.attachments.by_index(_NODE, node.name):
            spec = va.get("spec") or {}
            pv = self.volumes.get((spec.get("source") or {}).get("persistentVolumeName") or "")
            driver, handle = csi_volume(pv) if pv is not None else ("", "")
            if driver and spec.get("attacher") and f"{spec['attacher']}/{handle}" not in held:
                counts[spec["attacher"]] += 1
        wanted = Counter(driver for unique, driver in new.items() if unique not in held)
        if any(driver in limits and counts[driver] + n > limits[driver] for driver, n in wanted.items()):
            return unschedulable(MAX_VOLUME_COUNT)
        return None

    def _count(self, pod: dict, out: dict[str, str], new: bool) -> Status | None:
        """filterAttachableVolumes: the pod's claims' CSI volumes into `out` as `driver/handle` ->
        driver; a claim missing is the new pod's unresolvable status, another pod's is not counted."""
        ns = pod["metadata"].get("namespace", "")
        for name, _ephemeral in pod_claims(pod):
            pvc = self.claims.get(f"{ns}/{name}")
            if pvc is None:
                if new:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  [f'looking up PVC {ns}/{name}: persistentvolumeclaim "{name}" not found'])
                continue
            driver, handle = self._driver(pvc)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return None

    def _driver(self, pvc: dict) -> tuple[str, str]:
        """getCSIDriverInfo: a bound claim's volume's driver and handle (a migrated in-tree volume's
        translated; none for another volume not of a CSI driver); an unbound one, or one whose
        volume is not there, its class's provisioner's driver with a stand-in handle. Migration
        needs the node's CSINode, which a node whose count binds has."""
        spec = pvc.get("spec") or {}
        pv = self.volumes.get(spec.get("volumeName") or "")
        if pv is not None:
            return csi_volume(pv)
        sc = self.classes.get(spec.get("storageClassName") or "") if spec.get("storageClassName") else None
        driver = provisioner_driver(sc.get("provisioner", "")) if sc is not None else ""
        if not driver:
            return "", ""
        md = pvc["metadata"]
        return driver, f"{self.prefix}-{md.get('namespace', '')}/{md['name']}"

    def events_to_register(self) -> list[Registration]:
        def csinode_hint(pod: dict, old, new) -> Hint:
            before = _limits(old)
            return Hint.QUEUE if any(n > before.get(d, 0) for d, n in _limits(new).items()) else Hint.SKIP

        def pod_deleted_hint(pod: dict, old, new) -> Hint:
            spec = old.get("spec") or {}
            if not spec.get("nodeName") and not (old.get("status") or {}).get("nominatedNodeName"):
                return Hint.SKIP
            return Hint.QUEUE if uses_claims(old) else Hint.SKIP

        def claim_hint(pod: dict, old, new) -> Hint:
            return Hint.QUEUE if uses_claim(pod, new) else Hint.SKIP

        def attachment_hint(pod: dict, old, new) -> Hint:
            volumes = (pod.get("spec") or {}).get("volumes") or ()
            return Hint.QUEUE if any("persistentVolumeClaim" in v for v in volumes) else Hint.SKIP

        return [Registration(ClusterEvent(CSI_NODE, Action.ADD)),
                Registration(ClusterEvent(CSI_NODE, Action.UPDATE), csinode_hint),
                Registration(ClusterEvent(ASSIGNED_POD, Action.DELETE), pod_deleted_hint),
                Registration(ClusterEvent(PVC, Action.ADD), claim_hint),
                Registration(ClusterEvent(VOLUME_ATTACHMENT, Action.DELETE), attachment_hint)]
