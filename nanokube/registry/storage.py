"""storage.k8s.io/v1: StorageClass, CSIDriver, CSINode, VolumeAttachment,
CSIStorageCapacity and VolumeAttributesClass, with upstream's defaults,
validation messages (pkg/apis/storage/validation) and `kubectl get` columns."""

from __future__ import annotations

from .. import schema
from ..machinery.quantity import QuantityError, parse_quantity
from ..machinery.validation import (
    FieldError,
    dns1123_subdomain,
    duplicate,
    forbidden,
    immutable,
    invalid,
    label_value,
    not_supported,
    qualified_name,
    required,
    too_long,
    validate_label_selector,
)
from ..volume.classes import IMMEDIATE, WAIT_FOR_FIRST_CONSUMER, is_default
from .base import AGE, RESET_DELETION, Column, Resource, Strategy, register
from .core_printing import AGE_DOC, NAME_DOC
from . import kind_warnings

GROUP = "storage.k8s.io"
_NAME = Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name")
_AGE = Column("Age", "string", AGE, AGE_DOC)
_MAX_PARAMETERS = 256 * 1024
_MAX_PARAMETER_KEYS = 512


def doc(definition: str, field: str) -> str:
    props = schema.definitions()[f"io.k8s.api.storage.v1.{definition}"].get("properties") or {}
    return (props.get(field) or {}).get("description", "")


def csi_driver_name(value: str, path: str) -> list[FieldError]:
    """ValidateCSIDriverName: required, 63 bytes at most, and a DNS subdomain once lowercased, each
    checked whatever the others found."""
    errs = [required(path)] if not value else []
    if len(value.encode()) > 63:
        errs.append(too_long(path, 63))
    return errs + [invalid(path, value, m) for m in dns1123_subdomain(value.lower())]


def _parameters(params: dict | None, allow_empty: bool, path: str = "parameters") -> list[FieldError]:
    """validateParameters: at most 512 keys, none empty, 256 KiB in all; VolumeAttributesClasses need one."""
    params = params or {}
    if len(params) > _MAX_PARAMETER_KEYS:
        return [too_long(path, _MAX_PARAMETER_KEYS)]
    errs = [invalid(path, k, "field can not be empty.") for k in params if not k]
    if sum(len(k) + len(v or "") for k, v in params.items()) > _MAX_PARAMETERS:
        errs.append(too_long(path, _MAX_PARAMETERS))
    if not allow_empty and not params:
        errs.append(required(path, "must contain at least one key/value pair"))
    return errs


def _provisioner(value: str, path: str) -> list[FieldError]:
    """validateProvisioner (also a VolumeAttributesClass's driverName)."""
    if not value:
        return [required(path)]
    return [invalid(path, value, m) for m in qualified_name(value.lower())]


# --- StorageClass ------------------------------------------------------------


def _topology_term(term: dict, path: str) -> tuple[dict[str, frozenset], list[FieldError]]:
    """ValidateTopologySelectorTerm: each expression has values (no duplicates) and a label key
    (no duplicates); an empty term is allowed here. Returns the term as {key: values}."""
    errs: list[FieldError] = []
    keys: dict[str, frozenset] = {}
    for j, e in enumerate(term.get("matchLabelExpressions") or []):
        p = f"{path}.matchLabelExpressions[{j}]"
        values = e.get("values") or []
        if not values:
            errs.append(required(f"{p}.values"))
        earlier: set = set()
        for k, v in enumerate(values):
            if v in earlier:
                errs.append(duplicate(f"{p}.values[{k}]", v))
            earlier.add(v)
        key = e.get("key") or ""
        errs += [invalid(f"{p}.key", key, m) for m in qualified_name(key)]
        if key in keys:
            errs.append(duplicate(f"{p}.key", key))
        keys[key] = frozenset(values)
    return keys, errs


def _allowed_topologies(terms: list) -> list[FieldError]:
    """validateAllowedTopologies: valid terms, none equal to another. Upstream also compares each
    term with len(terms) empty ones (its list is made with that length, then appended to), so a
    term without expressions is a duplicate (reported once: upstream's message lists it once)."""
    errs: list[FieldError] = []
    seen: set[frozenset] = {frozenset()}  # (each term as its {key: values} items: one set look-up, not a compare with each)
    for i, term in enumerate(terms):
        keys, more = _topology_term(term or {}, f"allowedTopologies[{i}]")
        errs += more
        items = frozenset(keys.items())
        if items in seen:
            errs.append(duplicate(f"allowedTopologies[{i}].matchLabelExpressions", ""))
        seen.add(items)
    return errs



class StorageClassStrategy(Strategy):
    return_deleted_object = True
    track_generation = False
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"] + (" (default)" if is_default(o) else ""),
               NAME_DOC, format="name"),
        Column("Provisioner", "string", lambda o: o.get("provisioner", ""), doc("StorageClass", "provisioner")),
        Column("ReclaimPolicy", "string", lambda o: o.get("reclaimPolicy") or "Delete",
               doc("StorageClass", "reclaimPolicy")),
        Column("VolumeBindingMode", "string", lambda o: o.get("volumeBindingMode") or IMMEDIATE,
               doc("StorageClass", "volumeBindingMode")),
        Column("AllowVolumeExpansion", "string", lambda o: bool(o.get("allowVolumeExpansion")),
               doc("StorageClass", "allowVolumeExpansion")),
        _AGE,
    ]

    def default(self, obj, version):
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", IMMEDIATE)

    def warnings_on_create(self, obj):
        return kind_warnings.storage_class_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.storage_class_warnings(new)

    def validate(self, obj):
        errs: list[FieldError] = []
        errs += _provisioner(obj.get("provisioner") or "", "provisioner")
        errs += _parameters(obj.get("parameters"), True)
        policy = obj.get("reclaimPolicy")
        if policy not in ("Delete", "Retain"):
            errs.append(not_supported("reclaimPolicy", policy, ["Delete", "Retain"]))
        mode = obj.get("volumeBindingMode")
        if not mode:
            errs.append(required("volumeBindingMode"))
        elif mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
            errs.append(not_supported("volumeBindingMode", mode, [IMMEDIATE, WAIT_FOR_FIRST_CONSUMER]))
        return errs + _allowed_topologies(obj.get("allowedTopologies") or [])

    def validate_update(self, new, old):
        errs = self.validate(new)
        if (new.get("parameters") or {}) != (old.get("parameters") or {}):
            errs.append(forbidden("parameters", "updates to parameters are forbidden."))
        if new.get("provisioner") != old.get("provisioner"):
            errs.append(forbidden("provisioner", "updates to provisioner are forbidden."))
        if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
            errs.append(forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
        if new.get("volumeBindingMode") != old.get("volumeBindingMode"):
            errs.append(immutable("volumeBindingMode", new.get("volumeBindingMode")))
        return errs


# --- CSIDriver -----------------------------------------------------------------


def _csi_modes(o: dict) -> str:
    return ",".join((o.get("spec") or {}).get("volumeLifecycleModes") or []) or "<none>"


def _token_audiences(o: dict) -> str:
    reqs = (o.get("spec") or {}).get("tokenRequests") or []
    return ",".join(r.get("audience", "") for r in reqs) or "<unset>"


_FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")


class CSIDriverStrategy(Strategy):
    return_deleted_object = True
    columns = [
        _NAME,
        Column("AttachRequired", "boolean", lambda o: (o.get("spec") or {}).get("attachRequired", True),
               doc("CSIDriverSpec", "attachRequired")),
        Column("PodInfoOnMount", "boolean", lambda o: bool((o.get("spec") or {}).get("podInfoOnMount")),
               doc("CSIDriverSpec", "podInfoOnMount")),
        Column("StorageCapacity", "boolean", lambda o: bool((o.get("spec") or {}).get("storageCapacity")),
               doc("CSIDriverSpec", "storageCapacity")),
        Column("TokenRequests", "string", _token_audiences, doc("CSIDriverSpec", "tokenRequests")),
        Column("RequiresRepublish", "boolean", lambda o: bool((o.get("spec") or {}).get("requiresRepublish")),
               doc("CSIDriverSpec", "requiresRepublish")),
        Column("Modes", "string", _csi_modes, doc("CSIDriverSpec", "volumeLifecycleModes")),
        _AGE,
    ]

    def default(self, obj, version):
        spec = obj.setdefault("spec", {})
        spec.setdefault("attachRequired", True)
        spec.setdefault("podInfoOnMount", False)
        spec.setdefault("storageCapacity", False)
        spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
        spec.setdefault("requiresRepublish", False)
        spec.setdefault("seLinuxMount", False)
        if not spec.get("volumeLifecycleModes"):
            spec["volumeLifecycleModes"] = ["Persistent"]

    def validate(self, obj):
        errs: list[FieldError] = []
        spec = obj.get("spec") or {}
        if spec.get("attachRequired") is None:  # upstream's path has this spelling
            errs.append(required("spec.attachedRequired"))
        if spec.get("podInfoOnMount") is None:
            errs.append(required("spec.podInfoOnMount"))
        if spec.get("storageCapacity") is None:
            errs.append(required("spec.storageCapacity"))
        policy = spec.get("fsGroupPolicy")
        if policy is not None and policy not in _FS_GROUP_POLICIES:
            errs.append(not_supported("spec.fsGroupPolicy", policy, _FS_GROUP_POLICIES))
        seen = set()
        for i, tr in enumerate(spec.get("tokenRequests") or []):
            aud = tr.get("audience", "")
            if aud in seen:
                errs.append(FieldError("FieldValueDuplicate", f"spec.tokenRequests[{i}].audience", "", aud, True))
                continue
            seen.add(aud)
            expiry = tr.get("expirationSeconds")
            if expiry is not None and expiry < 600:
                errs.append(invalid(f"spec.tokenRequests[{i}].expirationSeconds", expiry,
                                    "may not specify a duration less than 10 minutes"))
            if expiry is not None and expiry > 1 << 32:
                errs.append(invalid(f"spec.tokenRequests[{i}].expirationSeconds", expiry,
                                    "may not specify a duration larger than 2^32 seconds"))
        for mode in spec.get("volumeLifecycleModes") or []:
            if mode not in ("Persistent", "Ephemeral"):
                errs.append(not_supported("spec.volumeLifecycleModes", mode, ["Persistent", "Ephemeral"]))
        period = spec.get("nodeAllocatableUpdatePeriodSeconds")
        if period is not None and period < 10:
            errs.append(invalid("spec.nodeAllocatableUpdatePeriodSeconds", period,
                                "must be greater than or equal to 10 seconds"))
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        ns, os_ = new.get("spec") or {}, old.get("spec") or {}
        for f, path in (("attachRequired", "spec.attachedRequired"), ("volumeLifecycleModes", "spec.volumeLifecycleModes")):
            if ns.get(f) != os_.get(f):
                errs.append(immutable(path, ns.get(f)))
        return errs


# --- CSINode ---------------------------------------------------------------------


def _topology_keys(keys: list, path: str) -> list[FieldError]:
    """validateCSINodeDriver's topologyKeys: each set, once, a qualified name; reported (as upstream
    reports them) at the driver's path."""
    errs: list[FieldError] = []
    earlier: set = set()
    for key in keys:
        if not key:
            errs.append(required(path))
        if key in earlier:
            errs.append(FieldError("FieldValueDuplicate", path, "", key, True))
        earlier.add(key)
        errs += [invalid(path, key, m) for m in qualified_name(key)]
    return errs


class CSINodeStrategy(Strategy):
    return_deleted_object = True
    track_generation = False  # csiNodeStrategy neither sets nor bumps it
    columns = [
        _NAME,
        Column("Drivers", "integer", lambda o: len((o.get("spec") or {}).get("drivers") or []),
               doc("CSINodeSpec", "drivers")),
        _AGE,
    ]

    def validate(self, obj):
        errs: list[FieldError] = []
        seen = set()
        for i, d in enumerate((obj.get("spec") or {}).get("drivers") or []):
            p = f"spec.drivers[{i}]"
            errs += csi_driver_name(d.get("name", ""), f"{p}.name")
            if not d.get("nodeID"):
                errs.append(required(f"{p}.nodeID"))
            elif len(d["nodeID"]) > 192:
                errs.append(invalid(f"{p}.nodeID", d["nodeID"], "must be 192 characters or less"))
            count = (d.get("allocatable") or {}).get("count")
            if count is not None and count < 0:
                errs.append(invalid(f"{p}.allocatable.count", count, "must be greater than or equal to 0"))
            if d.get("name") in seen:
                errs.append(FieldError("FieldValueDuplicate", f"{p}.name", "", d.get("name"), True))
            seen.add(d.get("name"))
            errs += _topology_keys(d.get("topologyKeys") or [], p)
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        olds = {d.get("name"): d for d in (old.get("spec") or {}).get("drivers") or []}
        for d in (new.get("spec") or {}).get("drivers") or []:
            o = olds.get(d.get("name"))
            # MutableCSINodeAllocatableCount: only a driver's allocatable may change
            if o is not None and {**o, "allocatable": None} != {**d, "allocatable": None}:
                errs.append(immutable("spec.drivers", d))
        return errs


# --- VolumeAttachment --------------------------------------------------------------


class VolumeAttachmentStrategy(Strategy):
    track_generation = False  # volumeAttachmentStrategy neither sets nor bumps it
    status_metadata = ()  # ResetObjectMetaForStatus
    status_deletion_kept = RESET_DELETION
    return_deleted_object = True
    columns = [
        _NAME,
        Column("Attacher", "string", lambda o: (o.get("spec") or {}).get("attacher", ""),
               doc("VolumeAttachmentSpec", "attacher")),
        Column("PV", "string", lambda o: ((o.get("spec") or {}).get("source") or {}).get("persistentVolumeName", ""),
               doc("VolumeAttachmentSource", "persistentVolumeName")),
        Column("Node", "string", lambda o: (o.get("spec") or {}).get("nodeName", ""),
               doc("VolumeAttachmentSpec", "nodeName")),
        Column("Attached", "boolean", lambda o: bool((o.get("status") or {}).get("attached")),
               doc("VolumeAttachmentStatus", "attached")),
        _AGE,
    ]

    def validate(self, obj):
        errs: list[FieldError] = []
        spec = obj.get("spec") or {}
        attacher = spec.get("attacher") or ""
        if not attacher:
            errs.append(required("spec.attacher"))
        source = spec.get("source") or {}
        pv, inline = source.get("persistentVolumeName"), source.get("inlineVolumeSpec")
        exactly_one = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
        if pv is None and inline is None:
            errs.append(required("spec.source", exactly_one))
        elif pv is not None and inline is not None:
            errs.append(forbidden("spec.source", exactly_one))
        elif pv is not None and not pv:
            errs.append(required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"))
        node = spec.get("nodeName") or ""
        errs += [invalid("spec.nodeName", node, m) for m in dns1123_subdomain(node)]
        # ValidateVolumeAttachmentV1: the attacher is a CSI driver name (required again), the volume a PV name
        errs += csi_driver_name(attacher, "spec.attacher")
        if pv:
            errs += [invalid("spec.source.persistentVolumeName", pv, m) for m in dns1123_subdomain(pv)]
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if new.get("spec") != old.get("spec"):
            errs.append(invalid("spec", new.get("spec"), "field is immutable"))
        return errs

    def validate_status_update(self, new, old):
        status = new.get("status") or {}
        errs = []
        metadata = status.get("attachmentMetadata") or {}
        if sum(len(k) + len(v or "") for k, v in metadata.items()) > _MAX_PARAMETERS:
            errs.append(too_long("status.attachmentMetadata", _MAX_PARAMETERS))
        for f in ("attachError", "detachError"):
            error = status.get(f) or {}
            if len(error.get("message") or "") > 1024:
                errs.append(too_long(f"status.{f}.message", _MAX_PARAMETERS))  # upstream reports the metadata limit
            code = error.get("errorCode")
            if code is not None and code < 0:
                errs.append(invalid(f"status.{f}.errorCode", code, "must be between 0 and 2147483647, inclusive"))
        return errs


# --- CSIStorageCapacity -----------------------------------------------------------


class CSIStorageCapacityStrategy(Strategy):
    track_generation = False
    columns = [
        _NAME,
        Column("StorageClassName", "string", lambda o: o.get("storageClassName", ""),
               doc("CSIStorageCapacity", "storageClassName")),
        Column("Capacity", "string", lambda o: o.get("capacity") or "<unset>", doc("CSIStorageCapacity", "capacity")),
    ]

    def warnings_on_create(self, obj):
        return kind_warnings.csi_storage_capacity_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.csi_storage_capacity_warnings(new)

    def validate(self, obj, allow_invalid_values: bool = False):
        """ValidateCSIStorageCapacity: nodeTopology (a label selector), class name, capacity."""
        errs = validate_label_selector(obj.get("nodeTopology"), "nodeTopology", allow_invalid_values)
        name = obj.get("storageClassName") or ""
        errs += [invalid("storageClassName", name, m) for m in dns1123_subdomain(name)]
        if obj.get("capacity") is not None:
            try:
                if parse_quantity(str(obj["capacity"])) < 0:
                    errs.append(invalid("capacity", obj["capacity"], "must be greater than or equal to 0"))
            except QuantityError as e:
                errs.append(invalid("capacity", obj["capacity"], str(e)))
        return errs

    def validate_update(self, new, old):
        """Invalid label values the stored selector already had stay allowed (upstream's ratcheting)."""
        topology = old.get("nodeTopology") or {}
        ratchet = any(label_value(v) for req in topology.get("matchExpressions") or [] for v in req.get("values") or [])
        errs = self.validate(new, ratchet)
        for f in ("nodeTopology", "storageClassName"):
            if new.get(f) != old.get(f):
                errs.append(immutable(f, new.get(f)))
        return errs


# --- VolumeAttributesClass ---------------------------------------------------------


class VolumeAttributesClassStrategy(Strategy):
    return_deleted_object = True
    track_generation = False
    columns = [
        _NAME,
        Column("DriverName", "string", lambda o: o.get("driverName", ""), doc("VolumeAttributesClass", "driverName")),
        _AGE,
    ]

    def validate(self, obj):
        return _provisioner(obj.get("driverName") or "", "driverName") + _parameters(obj.get("parameters"), False)

    def validate_update(self, new, old):
        errs = []
        if new.get("driverName") != old.get("driverName"):
            errs.append(forbidden("driverName", "updates to driverName are forbidden."))
        if (new.get("parameters") or {}) != (old.get("parameters") or {}):
            errs.append(forbidden("parameters", "updates to parameters are forbidden."))
        return errs + self.validate(new)


register(
    Resource(GROUP, "storageclasses", "StorageClass", ["v1"], namespaced=False, short_names=("sc",),
             strategy=StorageClassStrategy()),
    Resource(GROUP, "csidrivers", "CSIDriver", ["v1"], namespaced=False, strategy=CSIDriverStrategy()),
    Resource(GROUP, "csinodes", "CSINode", ["v1"], namespaced=False, strategy=CSINodeStrategy()),
    Resource(GROUP, "volumeattachments", "VolumeAttachment", ["v1"], namespaced=False, subresources=("status",),
             strategy=VolumeAttachmentStrategy()),
    Resource(GROUP, "csistoragecapacities", "CSIStorageCapacity", ["v1"], namespaced=True,
             strategy=CSIStorageCapacityStrategy()),
    Resource(GROUP, "volumeattributesclasses", "VolumeAttributesClass", ["v1"], namespaced=False,
             short_names=("vac",), strategy=VolumeAttributesClassStrategy()),
)
