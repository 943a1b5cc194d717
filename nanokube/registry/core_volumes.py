"""core/v1 PersistentVolume and PersistentVolumeClaim: defaults, upstream's
validation messages (pkg/apis/core/validation), the claim's immutability
rules and `kubectl get` columns. Binding is the PV controller's job."""

from __future__ import annotations

import math
import os

import orjson

from ..machinery.quantity import QuantityError, parse_quantity
from ..machinery.validation import (
    FieldError,
    dns1123_subdomain,
    forbidden,
    immutable,
    invalid,
    not_supported,
    qualified_name,
    required,
    validate_label_selector,
    validate_node_selector,
)
from ..volume.binding import ACCESS_MODES, access_modes_string
from ..volume.classes import claim_class, volume_class
from ..volume.resize import (
    CONTROLLER_RESIZE_IN_PROGRESS,
    CONTROLLER_RESIZE_INFEASIBLE,
    NODE_RESIZE_IN_PROGRESS,
    NODE_RESIZE_INFEASIBLE,
    NODE_RESIZE_PENDING,
)
from .base import AGE, Column, Resource, Strategy, register
from .core_printing import AGE_DOC, NAME_DOC, doc
from . import kind_warnings

#: every PersistentVolumeSource member, in the order upstream checks them: exactly one must be set
VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd",
                  "quobyte", "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume",
                  "photonPersistentDisk", "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi")
#: where upstream's "more than 1 volume type" error points for sources whose path differs from the field
_SOURCE_PATHS = {"cephfs": "cephFS"}
HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
VOLUME_MODES = ("Block", "Filesystem")
PV_PHASES = ("Pending", "Available", "Bound", "Released", "Failed")
PVC_PHASES = ("Pending", "Bound", "Lost")
#: ClaimResourceStatus values allocatedResourceStatuses may hold, sorted as upstream lists them
RESIZE_STATUSES = sorted((CONTROLLER_RESIZE_IN_PROGRESS, CONTROLLER_RESIZE_INFEASIBLE, NODE_RESIZE_PENDING,
                          NODE_RESIZE_IN_PROGRESS, NODE_RESIZE_INFEASIBLE))
_SORTED_MODES = sorted(ACCESS_MODES)
_NAME = Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name")
_AGE = Column("Age", "string", AGE, AGE_DOC)


def _spec(o: dict) -> dict:
    return o.get("spec") or {}


def _status(o: dict) -> dict:
    return o.get("status") or {}


def _phase(o: dict) -> str:
    return "Terminating" if o["metadata"].get("deletionTimestamp") else _status(o).get("phase", "")


def _vac(name: str | None) -> str:
    return name or "<unset>"


def validate_access_modes(modes: list | None, path: str, claim: bool) -> list[FieldError]:
    if not modes:
        return [required(path, "at least 1 access mode is required" if claim else "")]
    errs = [not_supported(path, m, _SORTED_MODES) for m in modes if m not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errs.append(forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return errs


def _quantity(value, path: str) -> tuple[object, list[FieldError]]:
    try:
        return parse_quantity(str(value)), []
    except QuantityError as e:
        return None, [invalid(path, value, str(e))]


def _basic_resource(value, path: str) -> list[FieldError]:
    """validateBasicResource: a parsable quantity whose Quantity.Value() (rounded away from 0) is not negative."""
    q, errs = _quantity(value, path)
    if q is not None and q < 0:
        errs.append(invalid(path, -math.ceil(-q), "must be a valid resource quantity"))
    return errs


def _positive(q, value, path: str) -> list[FieldError]:
    """ValidatePositiveQuantityValue (the decoder has already put `value` in Quantity.String()'s form)."""
    return [invalid(path, value, "must be greater than zero")] if q is not None and q <= 0 else []


def _class_name(name: str | None, path: str) -> list[FieldError]:
    return [invalid(path, name, m) for m in dns1123_subdomain(name)] if name else []


def _volume_mode(mode: str | None, path: str) -> list[FieldError]:
    return [not_supported(path, mode, VOLUME_MODES)] if mode is not None and mode not in VOLUME_MODES else []


# --- PersistentVolume --------------------------------------------------------------


class PersistentVolumeStrategy(Strategy):
    return_deleted_object = True
    track_generation = False
    columns = [
        _NAME,
        Column("Capacity", "string", lambda o: (_spec(o).get("capacity") or {}).get("storage", "0"),
               doc("PersistentVolumeSpec", "capacity")),
        Column("Access Modes", "string", lambda o: access_modes_string(_spec(o).get("accessModes")),
               doc("PersistentVolumeSpec", "accessModes")),
        Column("Reclaim Policy", "string", lambda o: _spec(o).get("persistentVolumeReclaimPolicy", ""),
               doc("PersistentVolumeSpec", "persistentVolumeReclaimPolicy")),
        Column("Status", "string", _phase, doc("PersistentVolumeStatus", "phase")),
        Column("Claim", "string", lambda o: f"{_spec(o)['claimRef'].get('namespace', '')}/{_spec(o)['claimRef'].get('name', '')}"
               if _spec(o).get("claimRef") else "", doc("PersistentVolumeSpec", "claimRef")),
        Column("StorageClass", "string", volume_class, "StorageClass of the pv"),
        Column("VolumeAttributesClass", "string", lambda o: _vac(_spec(o).get("volumeAttributesClassName")),
               "VolumeAttributesClass of the pv"),
        Column("Reason", "string", lambda o: _status(o).get("reason", ""), doc("PersistentVolumeStatus", "reason")),
        _AGE,
        Column("VolumeMode", "string", lambda o: _spec(o).get("volumeMode") or "<unset>",
               doc("PersistentVolumeSpec", "volumeMode"), priority=1),
    ]

    def default(self, obj, version):
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        if isinstance(spec.get("hostPath"), dict):  # SetDefaults_HostPathVolumeSource, as in a pod's volumes
            spec["hostPath"].setdefault("type", "")

    def prepare_for_create(self, obj):
        obj["status"] = {"phase": "Pending"}

    def warnings_on_create(self, obj):
        return kind_warnings.pv_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.pv_warnings(new)

    def validate(self, obj):
        """ValidatePersistentVolumeSpec, in upstream's order."""
        spec = _spec(obj)
        errs = validate_access_modes(spec.get("accessModes"), "spec.accessModes", claim=False)
        cap = spec.get("capacity") or {}
        if not cap:
            errs.append(required("spec.capacity"))
        if "storage" not in cap or len(cap) > 1:
            errs.append(not_supported("spec.capacity", spec.get("capacity"), ["storage"]))
        for k, v in cap.items():
            q, bad = _quantity(v, f"spec.capacity[{k}]")
            errs += bad or _basic_resource(v, f"spec.capacity[{k}]")
            errs += _positive(q, v, f"spec.capacity[{k}]")
        policy = spec.get("persistentVolumeReclaimPolicy")
        if policy and policy not in RECLAIM_POLICIES:
            errs.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, RECLAIM_POLICIES))
        affinity = spec.get("nodeAffinity")
        if affinity is not None:  # validateVolumeNodeAffinity
            if affinity.get("required") is None:
                errs.append(required("spec.nodeAffinity.required", "must specify required node constraints"))
            else:
                errs += validate_node_selector(affinity["required"], "spec.nodeAffinity.required")
        count = 0
        for source in VOLUME_SOURCES:
            if spec.get(source) is None:
                continue
            if count and source != "flexVolume":
                errs.append(forbidden(f"spec.{_SOURCE_PATHS.get(source, source)}", "may not specify more than 1 volume type"))
                continue
            count += 1
            errs += _source_errors(source, spec[source] or {})
            if source == "local" and not (affinity or {}).get("required"):
                errs.append(required("spec.nodeAffinity", "Local volume requires node affinity"))
        if not count:
            errs.append(required("spec", "must specify a volume type"))
        if spec.get("hostPath") is not None and os.path.normpath((spec["hostPath"] or {}).get("path") or ".") == "/" \
                and policy == "Recycle":
            errs.append(forbidden("spec.persistentVolumeReclaimPolicy", "may not be 'recycle' for a hostPath mount of '/'"))
        errs += _class_name(spec.get("storageClassName"), "spec.storageClassName")
        errs += _volume_mode(spec.get("volumeMode"), "spec.volumeMode")
        vac = spec.get("volumeAttributesClassName")
        if vac is not None:
            if not vac:
                errs.append(required("spec.volumeAttributesClassName", "an empty string is disallowed"))
            else:
                errs += _class_name(vac, "spec.volumeAttributesClassName")
            if spec.get("csi") is None:
                errs.append(required("spec.csi", "has to be specified when using volumeAttributesClassName"))
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        ns, os_ = _spec(new), _spec(old)
        old_src = {s: os_[s] for s in VOLUME_SOURCES if os_.get(s) is not None}
        new_src = {s: ns[s] for s in VOLUME_SOURCES if ns.get(s) is not None}
        if old_src != new_src:
            errs.append(forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after "
                                  f"creation\n{_spec_diff(old_src, new_src)}"))
        if ns.get("volumeMode") != os_.get("volumeMode"):
            errs.append(immutable("volumeMode", ns.get("volumeMode")))
        if os_.get("nodeAffinity") is not None and ns.get("nodeAffinity") != os_.get("nodeAffinity"):
            errs.append(immutable("nodeAffinity", ns.get("nodeAffinity")))
        return errs

    def validate_status_update(self, new, old):
        phase = _status(new).get("phase")
        if phase is not None and phase not in PV_PHASES:
            return [not_supported("status.phase", phase, PV_PHASES)]
        return []


def _descending(path: str, field: str) -> list[FieldError]:
    """validateLocalDescendingPath: no '..' element."""
    return [invalid(field, path, "must not contain '..'")] if ".." in path.split("/") else []


def _source_errors(source: str, src: dict) -> list[FieldError]:
    """The checks of the sources nodes here can serve, and the required fields of the common others."""
    p = f"spec.{source}"
    errs: list[FieldError] = []
    if source in ("hostPath", "local"):
        if not src.get("path"):
            errs.append(required(f"{p}.path"))
        else:
            errs += _descending(src["path"], f"{p}.path")
        if source == "hostPath" and src.get("type") not in (None, "") and src["type"] not in HOST_PATH_TYPES:
            errs.append(not_supported(f"{p}.type", src["type"], HOST_PATH_TYPES))
    elif source == "nfs":
        if not src.get("server"):
            errs.append(required(f"{p}.server"))
        if not src.get("path"):
            errs.append(required(f"{p}.path"))
        elif not src["path"].startswith("/"):
            errs.append(invalid(f"{p}.path", src["path"], "must be an absolute path"))
    elif source == "csi":
        if not src.get("driver"):
            errs.append(required(f"{p}.driver"))
        if not src.get("volumeHandle"):
            errs.append(required(f"{p}.volumeHandle"))
    return errs


# --- PersistentVolumeClaim ----------------------------------------------------------


def _spec_diff(old: dict, new: dict) -> str:
    """The fields that differ, one `-`/`+` pair each (upstream prints a cmp.Diff)."""
    lines = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            if k in old:
                lines.append(f"-\t{k}: {orjson.dumps(old[k]).decode()}")
            if k in new:
                lines.append(f"+\t{k}: {orjson.dumps(new[k]).decode()}")
    return "\n".join(lines)


class PersistentVolumeClaimStrategy(Strategy):
    return_deleted_object = True
    track_generation = False
    columns = [
        _NAME,
        Column("Status", "string", _phase, doc("PersistentVolumeClaimStatus", "phase")),
        Column("Volume", "string", lambda o: _spec(o).get("volumeName", ""), doc("PersistentVolumeClaimSpec", "volumeName")),
        Column("Capacity", "string", lambda o: (_status(o).get("capacity") or {}).get("storage", "0")
               if _spec(o).get("volumeName") else "", doc("PersistentVolumeClaimStatus", "capacity")),
        Column("Access Modes", "string", lambda o: access_modes_string(_status(o).get("accessModes"))
               if _spec(o).get("volumeName") else "", doc("PersistentVolumeClaimStatus", "accessModes")),
        Column("StorageClass", "string", claim_class, "StorageClass of the pvc"),
        Column("VolumeAttributesClass", "string", lambda o: _vac(_spec(o).get("volumeAttributesClassName")),
               "VolumeAttributesClass of the pvc"),
        _AGE,
        Column("VolumeMode", "string", lambda o: _spec(o).get("volumeMode") or "<unset>",
               doc("PersistentVolumeClaimSpec", "volumeMode"), priority=1),
    ]

    def default(self, obj, version):
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")

    def prepare_for_create(self, obj):
        obj["status"] = {"phase": "Pending"}
        drop_data_sources(_spec(obj), {})
        normalize_data_sources(_spec(obj))

    def prepare_for_update(self, new, old):
        drop_data_sources(_spec(new), _spec(old))

    def warnings_on_create(self, obj):
        return kind_warnings.pvc_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.pvc_warnings(new)

    def validate(self, obj):
        return validate_claim_spec(_spec(obj), "spec")

    def validate_update(self, new, old):
        # (ValidationOptionsForPersistentVolumeClaim: a stored selector's invalid label values stay allowed)
        errs = validate_claim_spec(_spec(new), "spec", bool(validate_label_selector(_spec(old).get("selector"), "")))
        ns, os_ = dict(_spec(new)), dict(_spec(old))
        if not os_.get("volumeName"):
            os_.pop("volumeName", None)
            ns.pop("volumeName", None)
        if os_.get("storageClassName") is None and ns.get("storageClassName"):
            ns.pop("storageClassName")
        ns.pop("volumeAttributesClassName", None)
        os_.pop("volumeAttributesClassName", None)
        if _status(new).get("phase") == "Bound" and (ns.get("resources") or {}).get("requests") is not None:
            ns["resources"] = {**ns["resources"], "requests": {
                **ns["resources"]["requests"], "storage": ((os_.get("resources") or {}).get("requests") or {}).get("storage")}}
            if ns["resources"]["requests"]["storage"] is None:
                del ns["resources"]["requests"]["storage"]
        if ns != os_:
            errs.append(forbidden("spec", "spec is immutable after creation except resources.requests and "
                                  f"volumeAttributesClassName for bound claims\n{_spec_diff(os_, ns)}"))
        old_size = _storage(_spec(old))
        new_size = _storage(_spec(new))
        status_size = _storage({"resources": {"requests": _status(old).get("capacity") or {}}})
        if old_size is not None and new_size is not None and new_size < old_size \
                and new_size <= (status_size if status_size is not None else 0):
            # RecoverVolumeExpansionFailure: shrinking back towards status.capacity is allowed, not below it
            errs.append(forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"))
        if _spec(new).get("volumeMode") != _spec(old).get("volumeMode"):
            errs.append(immutable("volumeMode", _spec(new).get("volumeMode")))
        old_vac, new_vac = _spec(old).get("volumeAttributesClassName"), _spec(new).get("volumeAttributesClassName")
        if old_vac is not None and new_vac is None:
            errs.append(forbidden("spec.volumeAttributesClassName", "update from non-nil value to nil is forbidden"))
        elif old_vac is not None and new_vac == "":
            errs.append(forbidden("spec.volumeAttributesClassName", "update from non-nil value to an empty string is forbidden"))
        return errs

    def prepare_for_status_update(self, new, old):
        """DropDisabledFieldsFromStatus: healthStatus (CSIVolumeHealth, alpha, off) only where the stored
        claim has it already."""
        status = _status(new)
        if "healthStatus" in status and "healthStatus" not in _status(old):
            new["status"] = {k: v for k, v in status.items() if k != "healthStatus"}

    def validate_status_update(self, new, old):
        """ValidatePersistentVolumeClaimStatusUpdate, RecoverVolumeExpansionFailure on (GA in 1.34). Upstream
        walks Go maps, so the order of several errors is not fixed there; here it is the object's."""
        status = _status(new)
        phase = status.get("phase")
        errs = [not_supported("status.phase", phase, PVC_PHASES)] if phase is not None and phase not in PVC_PHASES else []
        for name, value in (status.get("capacity") or {}).items():
            errs += _basic_resource(value, f"status.capacity[{name}]")
        path = "status.allocatedResourceStatus"  # sic: upstream's path drops the plural
        for name, state in (status.get("allocatedResourceStatuses") or {}).items():
            errs += _claim_resource_key(name, path)
            if state not in RESIZE_STATUSES:
                errs.append(not_supported(path, name, RESIZE_STATUSES))
        path = "status.allocatedResources"
        for name, value in (status.get("allocatedResources") or {}).items():
            # ValidateResourceQuantityValue after it adds nothing for `storage`: the sign is checked already
            errs += _claim_resource_key(name, path) or _basic_resource(value, f"{path}[{name}]")
        return errs


def _claim_resource_key(name: str, path: str) -> list[FieldError]:
    """validatePersistentVolumeClaimResourceKey: a qualified name; of the native ones (unprefixed or
    under kubernetes.io) only `storage`."""
    if msgs := qualified_name(name):
        return [invalid(path, name, m) for m in msgs]
    if ("/" not in name or "kubernetes.io/" in name) and name != "storage":
        return [not_supported(path, name, ["storage"])]
    return []


def drop_data_sources(spec: dict, old_spec: dict) -> None:
    """DropDisabledFields and EnforceDataSourceBackwardsCompatibility, unless the stored claim has one
    already: a dataSourceRef into another namespace goes (CrossNamespaceVolumeDataSource is alpha, off),
    and so does a dataSource other than a claim or a VolumeSnapshot sent without a dataSourceRef, as
    clients before 1.22 had it ignored."""
    ref = spec.get("dataSourceRef")
    if ref is not None and ref.get("namespace") and old_spec.get("dataSourceRef") is None:
        del spec["dataSourceRef"]
    if old_spec.get("dataSource") is not None or old_spec.get("dataSourceRef") is not None:
        return
    src = spec.get("dataSource")
    if src is not None and spec.get("dataSourceRef") is None and \
            (src.get("apiGroup") or "", src.get("kind")) not in (("", "PersistentVolumeClaim"),
                                                                 ("snapshot.storage.k8s.io", "VolumeSnapshot")):
        del spec["dataSource"]


def normalize_data_sources(spec: dict) -> None:
    """NormalizeDataSources (AnyVolumeDataSource, GA): on create a claim that names only one of dataSource
    and dataSourceRef gets the other as a copy, except a dataSourceRef into another namespace, which
    dataSource cannot express. Updates leave both as they are."""
    src, ref = spec.get("dataSource"), spec.get("dataSourceRef")
    if src is not None and ref is None:
        spec["dataSourceRef"] = _typed_copy(src)
    elif ref is not None and src is None and not ref.get("namespace"):
        spec["dataSource"] = _typed_copy(ref)


def _typed_copy(ref: dict) -> dict:
    """Both reference types tag apiGroup without omitempty: nil in the copy is stored, and served, null."""
    return {"apiGroup": ref.get("apiGroup"), "kind": ref.get("kind", ""), "name": ref.get("name", "")}


def validate_claim_spec(spec: dict, path: str, allow_invalid_selector_values: bool = False) -> list[FieldError]:
    """ValidatePersistentVolumeClaimSpec (also an ephemeral volume's claim template): the selector is judged
    after a missing access mode and before the modes given, as upstream orders them."""
    modes = validate_access_modes(spec.get("accessModes"), f"{path}.accessModes", claim=True)
    selector = validate_label_selector(spec.get("selector"), f"{path}.selector", allow_invalid_selector_values)
    errs = modes + selector if not spec.get("accessModes") else selector + modes
    requests = (spec.get("resources") or {}).get("requests") or {}
    if "storage" not in requests:
        errs.append(required(f"{path}.resources[storage]"))
    else:
        q, bad = _quantity(requests["storage"], f"{path}.resources[storage]")
        errs += bad + _positive(q, requests["storage"], f"{path}.resources[storage]")
    errs += _class_name(spec.get("storageClassName"), f"{path}.storageClassName")
    errs += _volume_mode(spec.get("volumeMode"), f"{path}.volumeMode")
    for f in ("dataSource", "dataSourceRef"):
        if spec.get(f) is not None:
            errs += _data_source(spec[f], f"{path}.{f}")
    ref, src = spec.get("dataSourceRef"), spec.get("dataSource")
    if ref and ref.get("namespace"):
        if src is not None:
            errs.append(invalid(path, f"{path}.dataSource", "may not be specified when dataSourceRef.namespace is specified"))
    elif ref is not None and src is not None and (src.get("apiGroup"), src.get("kind"), src.get("name")) != \
            (ref.get("apiGroup"), ref.get("kind"), ref.get("name")):
        errs.append(invalid(path, f"{path}.dataSource", "must match dataSourceRef"))
    errs += _class_name(spec.get("volumeAttributesClassName"), f"{path}.volumeAttributesClassName")
    return errs


def _data_source(ref: dict, path: str) -> list[FieldError]:
    errs = [required(f"{path}.{f}") for f in ("name", "kind") if not ref.get(f)]
    group = ref.get("apiGroup") or ""
    if not group and ref.get("kind") != "PersistentVolumeClaim":
        errs.append(invalid(path, ref.get("kind", ""), "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
    errs += [invalid(f"{path}.apiGroup", group, m) for m in dns1123_subdomain(group)] if group else []
    return errs


def _storage(spec: dict):
    value = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return parse_quantity(str(value)) if value is not None else None
    except QuantityError:
        return None


register(
    Resource("", "persistentvolumes", "PersistentVolume", ["v1"], namespaced=False, short_names=("pv",),
             subresources=("status",), strategy=PersistentVolumeStrategy()),
    Resource("", "persistentvolumeclaims", "PersistentVolumeClaim", ["v1"], namespaced=True, short_names=("pvc",),
             subresources=("status",), strategy=PersistentVolumeClaimStrategy()),
)
