"""Binding persistent volumes to claims: the annotations and finalizers the PV
controller, provisioners and the scheduler write, and upstream's matching rule
(FindMatchingVolume): the smallest available volume of the claim's class and
volume attributes class that offers its access modes, volume mode, size and
selector, and, when a node is given, may be used there."""

from __future__ import annotations

from fractions import Fraction

from ..machinery.quantity import QuantityError, parse_quantity
from ..machinery.scheduling import selector_matches
from ..machinery.selectors import matches_labels, selector_from_object
from .classes import claim_class, volume_class

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
STORAGE_PROVISIONER_BETA = "volume.beta.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
VAC_PROTECTION = "kubernetes.io/vac-protection"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_SHORT_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def access_modes_string(modes: list[str] | None) -> str:
    """GetAccessModesAsString: RWO,ROX,RWX,RWOP in that order, each once."""
    have = set(modes or [])
    return ",".join(_SHORT_MODES[m] for m in ACCESS_MODES if m in have)


def storage(resources: dict | None) -> Fraction:
    try:
        return parse_quantity(str((resources or {}).get("storage", "0")))
    except QuantityError:
        return Fraction(0)


def claim_request(pvc: dict) -> Fraction:
    return storage(((pvc.get("spec") or {}).get("resources") or {}).get("requests"))


def claim_ref_matches(pv: dict, pvc: dict) -> bool:
    """Whether the volume's claimRef names this claim (and, when it has one, its uid)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    md = pvc["metadata"]
    if not ref or ref.get("name") != md["name"] or ref.get("namespace") != md.get("namespace"):
        return False
    return not ref.get("uid") or ref["uid"] == md.get("uid")


def node_affinity_matches(pv: dict, node: dict) -> bool:
    """The volume's required node affinity admits the node (no affinity: every node)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if not (required or {}).get("nodeSelectorTerms"):
        return True
    return selector_matches(required, (node.get("metadata") or {}).get("labels") or {}, node["metadata"]["name"])


def volume_mismatch(pv: dict, pvc: dict) -> str:
    """checkVolumeSatisfyClaim: why the volume cannot serve the claim ('' when it can), in
    upstream's order and words (the reason of a VolumeMismatch event)."""
    spec, cspec = pv.get("spec") or {}, pvc.get("spec") or {}
    if pv["metadata"].get("deletionTimestamp"):
        return f'the volume is marked for deletion "{pv["metadata"]["name"]}"'
    if storage(spec.get("capacity")) < claim_request(pvc):
        return "requested PV is too small"
    if volume_class(pv) != claim_class(pvc):
        return "storageClassName does not match"
    if (spec.get("volumeAttributesClassName") or "") != (cspec.get("volumeAttributesClassName") or ""):
        return "volumeAttributesClassName does not match"
    if (spec.get("volumeMode") or "Filesystem") != (cspec.get("volumeMode") or "Filesystem"):
        return "incompatible volumeMode"
    if not set(cspec.get("accessModes") or []) <= set(spec.get("accessModes") or []):
        return "incompatible accessMode"
    return ""


def _same_mode(pv: dict, pvc: dict) -> bool:
    return ((pv.get("spec") or {}).get("volumeMode") or "Filesystem") == \
        ((pvc.get("spec") or {}).get("volumeMode") or "Filesystem")


def _fits(pv: dict, pvc: dict, node: dict | None) -> bool:
    if volume_mismatch(pv, pvc):
        return False
    selector = (pvc.get("spec") or {}).get("selector")
    if selector and not matches_labels(selector_from_object(selector), (pv.get("metadata") or {}).get("labels")):
        return False
    return node is None or node_affinity_matches(pv, node)


def find_matching_volume(pvc: dict, volumes: list[dict], node: dict | None = None,
                         delayed: bool = False, taken: set[str] = frozenset()) -> dict | None:
    """The volume to bind the claim to: one pre-bound to it wins; else the
    smallest fitting Available volume. With `delayed` (WaitForFirstConsumer and
    no node yet) only pre-bound volumes are taken. `taken`: volume names already
    promised to other claims in this pass."""
    wanted = (pvc.get("spec") or {}).get("volumeName")
    best = None
    for pv in volumes:
        name = pv["metadata"]["name"]
        if name in taken or (wanted and name != wanted) or pv["metadata"].get("deletionTimestamp"):
            continue
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref:  # IsVolumeBoundToClaim: a volume made for the claim is its own, whatever its size or classes
            if claim_ref_matches(pv, pvc) and _same_mode(pv, pvc) and (node is None or node_affinity_matches(pv, node)):
                return pv
            continue
        if delayed or (pv.get("status") or {}).get("phase") not in ("Available", "Pending", None, ""):
            continue
        if _fits(pv, pvc, node) and (best is None or storage(pv["spec"].get("capacity"))
                                     < storage(best["spec"].get("capacity"))):
            best = pv
    return best
