"""storagemigration.k8s.io v1 and v1beta1 StorageVersionMigration: a request
to rewrite every stored object of one resource in its current storage version
(controllers/storageversionmigrator.py does it). Validation follows
pkg/apis/storagemigration/validation; a value upstream prints with Go's %#v
(the spec, the conditions) is written here as Go writes it."""

from __future__ import annotations

import datetime

import orjson

from .base import Column, Obj, Resource, Strategy, register
from ..machinery.validation import (
    FieldError,
    GoSyntax,
    dns1035_label,
    dns1123_subdomain,
    immutable,
    invalid,
    required,
    validate_conditions,
)

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _resource(gr: dict) -> str:
    return f"{gr.get('resource', '')}.{gr['group']}" if gr.get("group") else gr.get("resource", "")


def _group_resource(spec: dict) -> tuple[str, str]:
    gr = spec.get("resource") or {}
    return gr.get("group") or "", gr.get("resource") or ""


def _true(status: dict, kind: str) -> bool:
    """meta.FindStatusCondition: the first condition of the type, and whether it is True."""
    found = next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)
    return found is not None and found.get("status") == "True"


def _go(s: object) -> str:
    return orjson.dumps(s if isinstance(s, str) else "").decode()


def _go_time(ts: str | None) -> str:
    """A metav1.Time as %#v prints it (time.Time's GoString), read from JSON into time.Local
    (UTC here)."""
    if not ts:
        return "time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)"
    t = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(datetime.timezone.utc)
    return (f"time.Date({t.year}, time.{_MONTHS[t.month - 1]}, {t.day}, {t.hour}, {t.minute}, {t.second}, "
            f"{t.microsecond * 1000}, time.Local)")


def _go_conditions(conditions: list) -> GoSyntax:
    """[]metav1.Condition as %#v prints it."""
    items = (f'v1.Condition{{Type:{_go(c.get("type"))}, Status:{_go(c.get("status"))}, '
             f'ObservedGeneration:{c.get("observedGeneration") or 0}, '
             f'LastTransitionTime:{_go_time(c.get("lastTransitionTime"))}, Reason:{_go(c.get("reason"))}, '
             f'Message:{_go(c.get("message"))}}}' for c in conditions)
    return GoSyntax("[]v1.Condition{" + ", ".join(items) + "}")


def _go_spec(spec: dict) -> GoSyntax:
    """The internal StorageVersionMigrationSpec as %#v prints it."""
    group, resource = _group_resource(spec)
    return GoSyntax(f"storagemigration.StorageVersionMigrationSpec{{Resource:v1.GroupResource{{Group:{_go(group)}, "
                    f"Resource:{_go(resource)}}}}}")


def _well_formed(rv: str) -> bool:
    """resourceversion.CompareResourceVersion's test: digits without a leading zero."""
    return rv.isascii() and rv.isdigit() and rv[0] != "0"


class StorageVersionMigrationStrategy(Strategy):
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"]),
        Column("Resource", "string", lambda o: _resource((o.get("spec") or {}).get("resource") or {}),
               "Fully qualified resource to migrate"),
    ]

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {}

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
            errs.append(immutable("spec", _go_spec(spec)))
        return errs

    def validate_status_update(self, new, old):
        """ValidateStorageVersionMigrationStatusUpdate, in its order. An empty resourceVersion is
        let through (upstream's check refuses it, and with it the Failed condition a migration of
        an unknown resource is given before it has one)."""
        status, ostatus = new.get("status") or {}, old.get("status") or {}
        errs: list[FieldError] = []
        rv = status.get("resourceVersion") or ""
        if rv and not _well_formed(rv):
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
                errs.append(invalid("status.conditions", _go_conditions(status.get("conditions") or []), message))
        return errs


register(Resource("storagemigration.k8s.io", "storageversionmigrations", "StorageVersionMigration", ["v1", "v1beta1"],
                  namespaced=False, subresources=("status",), strategy=StorageVersionMigrationStrategy()))
