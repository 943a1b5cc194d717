"""internal.apiserver.k8s.io/v1alpha1 StorageVersion: which version each API
server writes a resource in (`<group>.<resource>`, core as `core`). The API
server publishes its own (apiserver/storageversion.py); validation follows
pkg/apis/apiserverinternal/validation."""

from __future__ import annotations

from .apps import age_column, name_column
from .base import Column, Obj, Resource, Strategy, register
from ..machinery.validation import (
    FieldError,
    dns1035_label,
    dns1123_subdomain,
    duplicate,
    invalid,
    not_supported,
    required,
)


def storage_version_name(name: str) -> list[str]:
    group, dot, resource = name.rpartition(".")
    if not dot:
        return ["name must be in the form of <group>.<resource>"]
    return ["the group segment " + m for m in dns1123_subdomain(group)] + \
           ["the resource segment " + m for m in dns1035_label(resource)]


def validate_status(status: dict) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, sv in enumerate(status.get("storageVersions") or []):
        p = f"status.storageVersions[{i}]"
        sid = sv.get("apiServerID", "")
        if not sid:
            errs.append(required(f"{p}.apiServerID", ""))
        elif sid in seen:
            errs.append(duplicate(f"{p}.apiServerID", sid))
        seen.add(sid)
        enc = sv.get("encodingVersion", "")
        if not enc:
            errs.append(required(f"{p}.encodingVersion", ""))
        decodable = sv.get("decodableVersions") or []
        if enc and enc not in decodable:
            errs.append(invalid(f"{p}.decodableVersions", decodable, f"decodableVersions must include encodingVersion {enc}"))
        for j, v in enumerate(sv.get("servedVersions") or []):
            if v not in decodable:
                errs.append(invalid(f"{p}.servedVersions[{j}]", v,
                                    "individual served version : " + v + " must be included in decodableVersions : "
                                    + str(decodable)))
    types: set[str] = set()
    for i, c in enumerate(status.get("conditions") or []):
        p = f"status.conditions[{i}]"
        if c.get("type") in types:
            errs.append(duplicate(f"{p}.type", c.get("type")))
        types.add(c.get("type"))
        if c.get("status") not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{p}.status", c.get("status", ""), ("False", "True", "Unknown")))
        if not c.get("reason"):
            errs.append(required(f"{p}.reason", ""))
    return errs


def _storage_versions(versions: list | None) -> str:
    """formatStorageVersions: up to three `<server>=<version>`, then `+ N more...`."""
    items = [f"{v.get('apiServerID', '')}={v.get('encodingVersion', '')}" for v in versions or []]
    text = ",".join(items[:3])
    return text + (f" + {len(items) - 3} more..." if len(items) > 3 else "")


class StorageVersionStrategy(Strategy):
    name_validator = staticmethod(storage_version_name)
    track_generation = False
    columns = [
        name_column(),
        Column("CommonEncodingVersion", "string",
               lambda o: (o.get("status") or {}).get("commonEncodingVersion") or "<unset>",
               "The encoding version every API server shares, if they share one."),
        Column("StorageVersions", "string", lambda o: _storage_versions((o.get("status") or {}).get("storageVersions")),
               "The encoding version each API server writes."),
        age_column(),
    ]

    def prepare_for_create(self, obj: Obj) -> None:
        obj.setdefault("status", {})

    def validate(self, obj):
        return validate_status(obj.get("status") or {})

    def validate_status_update(self, new, old):
        return validate_status(new.get("status") or {})


register(Resource("internal.apiserver.k8s.io", "storageversions", "StorageVersion", ["v1alpha1"], namespaced=False,
                  subresources=("status",), strategy=StorageVersionStrategy()))
