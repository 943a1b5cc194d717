"""resource.k8s.io: Dynamic Resource Allocation (DeviceClass, ResourceSlice,
ResourceClaim, ResourceClaimTemplate, DeviceTaintRule).

Storage is v1 for every kind: it is GA, and v1beta2 has the identical shape,
so only v1beta1 needs real conversion. v1beta1 differs in two places: a
DeviceRequest carries the `exactly` fields inline (absent when
`firstAvailable` is used), and a ResourceSlice device wraps its fields in
`basic`. DeviceTaintRule is served at v1, v1beta2 and v1alpha3, all identical.
"""

from __future__ import annotations

import copy
import time
from typing import Callable

from . import resource_validation as rv
from .base import AGE, RESET_DELETION, Column, Obj, Resource, Strategy, register
from .gated_fields import drop_claim_status_fields, drop_slice_fields
from ..clock import format_time
from ..machinery.validation import FieldError, immutable, template_object_meta

GROUP = "resource.k8s.io"
STORAGE = "v1"
#: fields of a v1 ExactDeviceRequest, inline in a v1beta1 DeviceRequest
EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity", "derivedAttributes")


def utc_now() -> str:
    """The wall clock's metav1.Time text, formatted once per second (clock.format_time): a node
    agent creates several slices a second, and a strftime each was ~4% of a slice's create."""
    return format_time(time.time())


# --- conversion -------------------------------------------------------------


#: the inline fields whose zero value reads as unset when deciding whether a v1beta1 request is exact
_SCALAR_ZEROS = {"deviceClassName": "", "allocationMode": "", "count": 0}


def _exact_fields_set(req: dict) -> bool:
    """hasAnyMainRequestFieldsSet: a non-empty class, mode or count, or any of the pointer and list
    fields present; the `deviceClassName: ""` every v1beta1 request decodes with (no omitempty) is none."""
    return any(req.get(k) is not None and (k not in _SCALAR_ZEROS or req[k] != _SCALAR_ZEROS[k]) for k in EXACT_FIELDS)


def request_to_v1(req: dict) -> dict:
    """v1beta1 DeviceRequest -> v1: inline fields move under `exactly` when any is set, else (a
    `firstAvailable` request) they are dropped."""
    out = {k: v for k, v in req.items() if k not in EXACT_FIELDS}
    if _exact_fields_set(req):
        out["exactly"] = {"deviceClassName": req.get("deviceClassName", "")} | {
            k: req[k] for k in EXACT_FIELDS if k in req and k != "deviceClassName"}
    return out


def request_from_v1(req: dict) -> dict:
    """v1 DeviceRequest -> v1beta1: `exactly`'s fields inline; deviceClassName, tagged without
    omitempty, is served `""` on a `firstAvailable` request."""
    out = {k: v for k, v in req.items() if k != "exactly"}
    out.update(req.get("exactly") or {})
    out.setdefault("deviceClassName", "")
    return out


def _claim_spec_requests(spec: dict | None, convert: Callable[[dict], dict]) -> None:
    """Each request converted; a null one (an apply configuration keeps it) as Go's zero request."""
    devices = (spec or {}).get("devices")
    if devices and devices.get("requests"):
        devices["requests"] = [convert(r or {}) for r in devices["requests"]]


def _convert_claim(obj: Obj, convert: Callable[[dict], dict]) -> Obj:
    out = copy.deepcopy(obj)
    _claim_spec_requests(out.get("spec"), convert)
    return out


def _convert_template(obj: Obj, convert: Callable[[dict], dict]) -> Obj:
    out = copy.deepcopy(obj)
    _claim_spec_requests((out.get("spec") or {}).get("spec"), convert)
    return out


def device_to_v1(dev: dict) -> dict:
    out = {k: v for k, v in dev.items() if k != "basic"}
    out.update(dev.get("basic") or {})
    return out


def device_from_v1(dev: dict) -> dict:
    basic = {k: v for k, v in dev.items() if k != "name"}
    return {"name": dev.get("name", ""), "basic": basic}


def _convert_slice(obj: Obj, convert: Callable[[dict], dict]) -> Obj:
    out = copy.deepcopy(obj)
    spec = out.get("spec") or {}
    if spec.get("devices"):
        spec["devices"] = [convert(d or {}) for d in spec["devices"]]
    return out


# --- defaulting -------------------------------------------------------------


def _default_exact(req: dict) -> None:
    req.setdefault("allocationMode", "ExactCount")
    if req["allocationMode"] == "ExactCount" and not req.get("count"):
        req["count"] = 1
    for t in req.get("tolerations") or []:
        t.setdefault("operator", "Equal")


def default_claim_spec(spec: dict | None, version: str) -> None:
    """SetDefaults_ExactDeviceRequest / DeviceSubRequest / DeviceToleration."""
    for req in ((spec or {}).get("devices") or {}).get("requests") or []:
        for sub in req.get("firstAvailable") or []:
            _default_exact(sub)
        if version == "v1beta1":
            if req.get("deviceClassName"):  # v1beta1's SetDefaults_DeviceRequest: a request without one has none
                _default_exact(req)
        elif req.get("exactly") is not None:
            _default_exact(req["exactly"])


def stamp_taints(taints: list | None, now: str, old: list | None = None) -> None:
    """Fill `timeAdded` of taints that lack it (keeping an unchanged taint's time)."""
    previous = {(t.get("key"), t.get("value"), t.get("effect")): t.get("timeAdded") for t in old or []}
    for t in taints or []:
        if not t.get("timeAdded"):
            t["timeAdded"] = previous.get((t.get("key"), t.get("value"), t.get("effect"))) or now


# --- strategies -------------------------------------------------------------


def _name(o: Obj) -> str:
    return o["metadata"]["name"]


NAME = Column("Name", "string", _name, "Name must be unique within a namespace.", format="name")
AGE_COLUMN = Column("Age", "string", AGE, "CreationTimestamp is a timestamp representing the server time when this object was created.")


class _ClockedStrategy(Strategy):
    def __init__(self, now: Callable[[], str] = utc_now):
        self.now = now


class DeviceClassStrategy(Strategy):
    return_deleted_object = True
    columns = [NAME, AGE_COLUMN]

    def validate(self, obj):
        return rv.class_spec(obj.get("spec") or {}, None)

    def validate_update(self, new, old):
        return rv.class_spec(new.get("spec") or {}, old.get("spec") or {})


def claim_state(obj: Obj) -> str:
    """The STATE column: deleted / pending / allocated / reserved / deallocating."""
    deleted = bool(obj["metadata"].get("deletionTimestamp"))
    status = obj.get("status") or {}
    states = ["deleted"] if deleted else []
    if status.get("allocation") is None:
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
        elif deleted:
            states.append("deallocating")
    return ",".join(states)


class ResourceClaimStrategy(Strategy):
    track_generation = False  # resourceclaimStrategy neither sets nor bumps it
    return_deleted_object = True  # DELETE answers with the claim (as the client's delete expects), not a Status
    status_metadata = ()  # ResetObjectMetaForStatus, which its reset fields do not name
    status_deletion_kept = RESET_DELETION
    status_owns_dropped_metadata = True
    columns = [NAME, Column("State", "string", claim_state, "A summary of the current state (allocated, pending, reserved, etc.)."), AGE_COLUMN]

    def default(self, obj, version):
        default_claim_spec(obj.get("spec"), version)

    def validate(self, obj):
        return rv.claim_spec(obj.get("spec") or {}, "spec")

    def validate_update(self, new, old):
        if new.get("spec") != old.get("spec"):
            return [immutable("spec", new.get("spec"))]
        return []

    def prepare_for_status_update(self, new, old):
        """dropDeallocatedStatusDevices: the status.devices entries of devices the write takes
        out of the allocation go with them; and the results' binding conditions while their gate is off."""
        def ids(status: dict) -> set:
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            return {(r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID")) for r in results}
        status = new.get("status") or {}
        drop_claim_status_fields(status, old.get("status"))
        freed = ids(old.get("status") or {}) - ids(status)
        devices = status.get("devices")
        if freed and devices:
            kept = [d for d in devices if (d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID")) not in freed]
            new["status"] = {k: v for k, v in status.items() if k != "devices"} | ({"devices": kept} if kept else {})

    def validate_status_update(self, new, old):
        names = rv.request_names((new.get("spec") or {}).get("devices") or {})
        deleting = bool(new["metadata"].get("deletionTimestamp"))
        return rv.claim_status(new.get("status") or {}, old.get("status") or {}, names, deleting)

    def to_storage(self, obj, version):
        return _convert_claim(obj, request_to_v1) if version == "v1beta1" else obj

    def from_storage(self, obj, version):
        return _convert_claim(obj, request_from_v1) if version == "v1beta1" else obj


class ResourceClaimTemplateStrategy(Strategy):
    track_generation = False  # resourceClaimTemplateStrategy neither sets nor bumps it
    return_deleted_object = True
    columns = [NAME, AGE_COLUMN]

    def default(self, obj, version):
        default_claim_spec((obj.get("spec") or {}).get("spec"), version)

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        errs += template_object_meta(spec.get("metadata") or {}, "spec.metadata")
        return errs + rv.claim_spec(spec.get("spec") or {}, "spec.spec")

    def validate_update(self, new, old):
        if new.get("spec") != old.get("spec"):
            return [immutable("spec", new.get("spec"))]
        return []

    def to_storage(self, obj, version):
        return _convert_template(obj, request_to_v1) if version == "v1beta1" else obj

    def from_storage(self, obj, version):
        return _convert_template(obj, request_from_v1) if version == "v1beta1" else obj


def _slice_node(o: Obj) -> str:
    return (o.get("spec") or {}).get("nodeName") or "<none>"


class ResourceSliceStrategy(_ClockedStrategy):
    return_deleted_object = True
    columns = [
        NAME,
        Column("Node", "string", _slice_node, "nodeName"),
        Column("Driver", "string", lambda o: (o.get("spec") or {}).get("driver", ""), "driver"),
        Column("Pool", "string", lambda o: ((o.get("spec") or {}).get("pool") or {}).get("name", ""), "pool"),
        AGE_COLUMN,
    ]
    field_selectors = {
        "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName", ""),
        "spec.driver": lambda o: (o.get("spec") or {}).get("driver", ""),
    }

    def unsupported_field_label(self, label: str, version: str) -> str:
        """Each resource.k8s.io version's conversion func names its GroupVersionKind."""
        return f"field label not supported for resource.k8s.io/{version}, Kind=ResourceSlice: {label}"

    def prepare_for_create(self, obj):
        now = self.now()
        drop_slice_fields(obj.get("spec") or {})
        for d in (obj.get("spec") or {}).get("devices") or []:
            stamp_taints(d.get("taints"), now)

    def prepare_for_update(self, new, old):
        now = self.now()
        drop_slice_fields(new.get("spec") or {}, old.get("spec"))
        old_devices = {d.get("name"): d for d in (old.get("spec") or {}).get("devices") or []}
        for d in (new.get("spec") or {}).get("devices") or []:
            stamp_taints(d.get("taints"), now, (old_devices.get(d.get("name")) or {}).get("taints"))

    def validate(self, obj):
        return rv.slice_spec(obj.get("spec") or {}, None)

    def validate_update(self, new, old):
        return rv.slice_spec(new.get("spec") or {}, old.get("spec") or {})

    def to_storage(self, obj, version):
        return _convert_slice(obj, device_to_v1) if version == "v1beta1" else obj

    def from_storage(self, obj, version):
        return _convert_slice(obj, device_from_v1) if version == "v1beta1" else obj


def _rule_taint(o: Obj) -> dict:
    return (o.get("spec") or {}).get("taint") or {}


class DeviceTaintRuleStrategy(_ClockedStrategy):
    status_metadata = ()  # ResetObjectMetaForStatus
    status_deletion_kept = RESET_DELETION
    columns = [
        NAME,
        Column("Effect", "string", lambda o: _rule_taint(o).get("effect", ""), "The effect of the taint."),
        Column("Key", "string", lambda o: _rule_taint(o).get("key", ""), "The key of the taint."),
        AGE_COLUMN,
    ]

    def returns_deleted_object(self, version):
        """Upstream's v1 storage answers DELETE with a Status; v1beta2's and v1alpha3's, which came
        first, with the rule."""
        return version != "v1"

    def prepare_for_create(self, obj):
        taint = (obj.get("spec") or {}).get("taint")
        if taint is not None and not taint.get("timeAdded"):
            taint["timeAdded"] = self.now()

    def prepare_for_update(self, new, old):
        taint, old_taint = (new.get("spec") or {}).get("taint"), _rule_taint(old)
        if taint is None:
            return
        if not taint.get("timeAdded"):
            taint["timeAdded"] = old_taint.get("timeAdded") or self.now()
        if taint.get("effect") != old_taint.get("effect") and taint.get("timeAdded") == old_taint.get("timeAdded"):
            taint["timeAdded"] = self.now()

    def validate(self, obj):
        return rv.taint_rule_spec(obj.get("spec") or {}, None)

    def validate_update(self, new, old):
        return rv.taint_rule_spec(new.get("spec") or {}, old.get("spec") or {})

    def validate_status_update(self, new, old):
        return rv.taint_rule_status(new.get("status") or {})


FULL = ["v1", "v1beta2", "v1beta1"]

register(
    Resource(GROUP, "deviceclasses", "DeviceClass", FULL, namespaced=False, storage_version=STORAGE, strategy=DeviceClassStrategy()),
    Resource(GROUP, "resourceslices", "ResourceSlice", FULL, namespaced=False, storage_version=STORAGE, strategy=ResourceSliceStrategy()),
    Resource(GROUP, "resourceclaims", "ResourceClaim", FULL, namespaced=True, storage_version=STORAGE, subresources=("status",), strategy=ResourceClaimStrategy()),
    Resource(GROUP, "resourceclaimtemplates", "ResourceClaimTemplate", FULL, namespaced=True, storage_version=STORAGE, strategy=ResourceClaimTemplateStrategy()),
    Resource(
        GROUP, "devicetaintrules", "DeviceTaintRule", ["v1", "v1beta2", "v1alpha3"], namespaced=False,
        storage_version=STORAGE, subresources=("status",), strategy=DeviceTaintRuleStrategy(),
    ),
)
