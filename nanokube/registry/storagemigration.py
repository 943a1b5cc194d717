"""storagemigration.k8s.io v1 and v1beta1 StorageVersionMigration: a request
to rewrite every stored object of one resource in its current storage version
(controllers/storageversionmigrator.py does it). Validation follows
pkg/apis/storagemigration/validation."""

from __future__ import annotations

from .base import Column, Obj, Resource, Strategy, register
from ..machinery.validation import FieldError, dns1123_subdomain, immutable, invalid, required, validate_conditions

_TYPES = ("Running", "Succeeded", "Failed")


def _resource(gr: dict) -> str:
    return f"{gr.get('resource', '')}.{gr['group']}" if gr.get("group") else gr.get("resource", "")


def _true(status: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


class StorageVersionMigrationStrategy(Strategy):
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"]),
        Column("Resource", "string", lambda o: _resource((o.get("spec") or {}).get("resource") or {}),
               "Fully qualified resource to migrate"),
    ]

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {}

    def validate(self, obj):
        res = (obj.get("spec") or {}).get("resource")
        errs: list[FieldError] = []
        if not res or not res.get("resource"):
            errs.append(required("spec.resource.resource", "resource is required"))
        if res and res.get("group"):
            errs += [invalid("spec.resource.group", res["group"], m) for m in dns1123_subdomain(res["group"])]
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if (new.get("spec") or {}) != (old.get("spec") or {}):
            errs.append(immutable("spec", new.get("spec")))
        return errs

    def validate_status_update(self, new, old):
        status, ostatus = new.get("status") or {}, old.get("status") or {}
        errs = validate_conditions(status.get("conditions"), "status.conditions")
        if ostatus.get("resourceVersion") and status.get("resourceVersion") != ostatus["resourceVersion"]:
            errs.append(immutable("status.resourceVersion", status.get("resourceVersion")))
        if _true(status, "Succeeded") and _true(status, "Failed"):
            errs.append(invalid("status.conditions", "Succeeded",
                                "Both success and failed conditions cannot be true at the same time"))
        if _true(status, "Running") and (_true(status, "Succeeded") or _true(status, "Failed")):
            errs.append(invalid("status.conditions", "Running",
                                "Running condition cannot be true when success or failed conditions are true"))
        return errs


register(Resource("storagemigration.k8s.io", "storageversionmigrations", "StorageVersionMigration", ["v1", "v1beta1"],
                  namespaced=False, subresources=("status",), strategy=StorageVersionMigrationStrategy()))
