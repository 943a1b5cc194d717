"""storagemigration.k8s.io v1 and v1beta1 StorageVersionMigration: a request
to rewrite every stored object of one resource in its current storage version
(controllers/storageversionmigrator.py does it). Validation follows
pkg/apis/storagemigration/validation; the spec and conditions an error prints are
written as json.Marshal writes upstream's structs."""

from __future__ import annotations

import datetime

from .base import RESET_DELETION, Column, Resource, Strategy, register
from ..machinery.conditions import find_condition
from ..machinery.gofmt import Struct
from ..machinery.validation import (
    FieldError,
    dns1035_label,
    dns1123_subdomain,
    immutable,
    invalid,
    required,
    validate_conditions,
)

def _resource(gr: dict) -> str:
    return f"{gr.get('resource', '')}.{gr['group']}" if gr.get("group") else gr.get("resource", "")


def _group_resource(spec: dict) -> tuple[str, str]:
    gr = spec.get("resource") or {}
    return gr.get("group") or "", gr.get("resource") or ""


def _true(status: dict, kind: str) -> bool:
    """meta.FindStatusCondition: the first condition of the type, and whether it is True."""
    found = find_condition(status.get("conditions"), kind)
    return found is not None and found.get("status") == "True"


def _json_time(ts: str | None) -> str | None:
    """A metav1.Time as its MarshalJSON writes it: RFC 3339 in UTC, null when unset."""
    if not ts:
        return None
    t = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(conditions: list) -> list[Struct]:
    """[]metav1.Condition as field.Error prints it (json.Marshal: its JSON tags, in its order)."""
    out = []
    for c in conditions:
        fields = Struct(type=c.get("type") or "", status=c.get("status") or "")
        if c.get("observedGeneration"):
            fields["observedGeneration"] = c["observedGeneration"]
        fields.update(lastTransitionTime=_json_time(c.get("lastTransitionTime")), reason=c.get("reason") or "",
                      message=c.get("message") or "")
        out.append(fields)
    return out


def _spec(spec: dict) -> Struct:
    """The internal StorageVersionMigrationSpec (Go field names) holding a metav1.GroupResource."""
    group, resource = _group_resource(spec)
    return Struct(Resource=Struct(group=group, resource=resource))


def _well_formed(rv: str) -> bool:
    """resourceversion.CompareResourceVersion's test: digits without a leading zero (so not empty)."""
    return rv.isascii() and rv.isdigit() and rv[0] != "0"


class StorageVersionMigrationStrategy(Strategy):
    status_metadata = ()  # ResetObjectMetaForStatus
    status_deletion_kept = RESET_DELETION
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"]),
        Column("Resource", "string", lambda o: _resource((o.get("spec") or {}).get("resource") or {}),
               "Fully qualified resource to migrate"),
    ]

    def validate(self, obj):
        """The resource is required and a DNS-1035 label, the group (if any) a DNS subdomain, each
        with its messages joined by commas."""
        group, resource = _group_resource(obj.get("spec") or {})
        errs: list[FieldError] = []
        if not resource:
            errs.append(required("spec.resource.resource", "resource is required to be set"))
        elif msgs := dns1035_label(resource):
            errs.append(invalid("spec.resource.resource", resource, ",".join(msgs)))
        if group and (msgs := dns1123_subdomain(group)):
            errs.append(invalid("spec.resource.group", group, ",".join(msgs)))
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        spec = new.get("spec") or {}
        if _group_resource(spec) != _group_resource(old.get("spec") or {}):
            errs.append(immutable("spec", _spec(spec)))
        return errs

    def validate_status_update(self, new, old):
        """ValidateStorageVersionMigrationStatusUpdate, in its order. Every status write needs a
        well-formed resourceVersion, an empty one included (CompareResourceVersion refuses it), so
        no condition can be written before the resourceVersion is recorded."""
        status, ostatus = new.get("status") or {}, old.get("status") or {}
        errs: list[FieldError] = []
        rv = status.get("resourceVersion") or ""
        if not _well_formed(rv):
            errs.append(invalid("status.resourceVersion", rv, f"resource version is not well formed: {rv}"))
        errs += validate_conditions(status.get("conditions"), "status.conditions")
        if ostatus.get("resourceVersion") and rv != ostatus["resourceVersion"]:
            errs.append(immutable("status.resourceVersion", rv))
        succeeded, failed, running = (_true(status, k) for k in ("Succeeded", "Failed", "Running"))
        rules = (
            (succeeded and failed, "Both success and failed conditions cannot be true at the same time"),
            (succeeded and running, "Running condition cannot be true when success condition is true"),
            (failed and running, "Running condition cannot be true when failed condition is true"),
            (_true(ostatus, "Succeeded") and not succeeded, "Success condition cannot be set to false once it is true"),
            (_true(ostatus, "Failed") and not failed, "Failed condition cannot be set to false once it is true"),
        )
        for broken, message in rules:
            if broken:
                errs.append(invalid("status.conditions", _conditions(status.get("conditions") or []), message))
        return errs


register(Resource("storagemigration.k8s.io", "storageversionmigrations", "StorageVersionMigration", ["v1", "v1beta1"],
                  namespaced=False, subresources=("status",), strategy=StorageVersionMigrationStrategy()))
