"""internal.apiserver.k8s.io/v1alpha1 StorageVersion: which version each API
server writes a resource in (`<group>.<resource>`, core as `core`). The API
server publishes its own (apiserver/storageversion.py); validation follows
pkg/apis/apiserverinternal/validation."""

from __future__ import annotations

from .apps import age_column, name_column
from .base import RESET_DELETION, Column, Obj, Resource, Strategy, register
from ..machinery.validation import (
    FieldError,
    dns1035_label,
    dns1123_subdomain,
    duplicate,
    invalid,
    qualified_name,
    required,
)


def storage_version_name(name: str) -> list[str]:
    group, dot, resource = name.rpartition(".")
    if not dot:
        return ["name must be in the form of <group>.<resource>"]
    return ["the group segment " + m for m in dns1123_subdomain(group)] + \
           ["the resource segment " + m for m in dns1035_label(resource)]


#: isValidAPIVersion's message for a value with more than one '/'
_API_VERSION_FORM = (
    "an apiVersion is a DNS-1035 label, which must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?') with an optional DNS subdomain prefix and '/' (e.g. "
    "'example.com/MyVersion')"
)


def api_version(value: str) -> list[str]:
    """isValidAPIVersion: a DNS-1035 label version, with an optional DNS-subdomain group and '/'."""
    parts = value.split("/")
    if len(parts) > 2:
        return [_API_VERSION_FORM]
    errs: list[str] = []
    if len(parts) == 2:
        group = parts[0]
        errs += ["group part: " + m for m in dns1123_subdomain(group)] if group else ["group part: must be non-empty"]
    version = parts[-1]
    return errs + (["version part: " + m for m in dns1035_label(version)] if version else ["version part: must be non-empty"])


def _go_strings(values: list) -> str:
    """A []string as Go's %s prints it."""
    return "[" + " ".join(values) + "]"


def _server_storage_version(sv: dict, p: str) -> list[FieldError]:
    """validateServerStorageVersion."""
    sid, enc = sv.get("apiServerID", ""), sv.get("encodingVersion", "")
    errs = [invalid(f"{p}.apiServerID", sid, m) for m in dns1123_subdomain(sid)]
    if msgs := api_version(enc):
        errs.append(invalid(f"{p}.encodingVersion", enc, ",".join(msgs)))
    decodable = sv.get("decodableVersions") or []
    for i, v in enumerate(decodable):
        if msgs := api_version(v):
            errs.append(invalid(f"{p}.decodableVersions[{i}]", v, ",".join(msgs)))
    if enc not in decodable:
        errs.append(invalid(f"{p}.decodableVersions", decodable, f"decodableVersions must include encodingVersion {enc}"))
    for i, v in enumerate(sv.get("servedVersions") or []):
        if msgs := api_version(v):
            errs.append(invalid(f"{p}.servedVersions[{i}]", v, ",".join(msgs)))
        if v not in decodable:
            errs.append(invalid(f"{p}.servedVersions[{i}]", v, f"individual served version : {v} must be included in "
                                                                f"decodableVersions : {_go_strings(decodable)}"))
    return errs


def _common_version(status: dict) -> list[FieldError]:
    """validateCommonVersion: commonEncodingVersion is the servers' one encoding version, else unset."""
    encodings = [sv.get("encodingVersion", "") for sv in status.get("storageVersions") or []]
    actual = encodings[0] if encodings and all(e == encodings[0] for e in encodings) else None
    declared, p = status.get("commonEncodingVersion"), "status.commonEncodingVersion"
    if actual is None and declared is not None:
        return [invalid(p, declared, "should be nil if servers do not agree on the same encoding version, or if there "
                                     "is no server reporting the supported versions yet")]
    if actual is not None and declared is None:
        return [invalid(p, None, f"the common encoding version is {actual}")]
    if actual is not None and declared != actual:
        return [invalid(p, declared, f"the actual common encoding version is {actual}")]
    return []


def validate_status(status: dict) -> list[FieldError]:
    """validateStorageVersionStatus. Condition errors are at status[i], not status.conditions[i], as upstream's are."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, sv in enumerate(status.get("storageVersions") or []):
        p = f"status.storageVersions[{i}]"
        sid = sv.get("apiServerID", "")
        if sid in seen:
            errs.append(duplicate(f"{p}.apiServerID", sid))
        seen.add(sid)
        errs += _server_storage_version(sv, p)
    errs += _common_version(status)
    types: dict[str, int] = {}
    for i, c in enumerate(status.get("conditions") or []):
        p, kind, state = f"status[{i}]", c.get("type", ""), c.get("status", "")
        if kind in types:
            errs.append(invalid(f"{p}.type", kind, f"the type of the condition is not unique, it also appears in "
                                                   f"conditions[{types[kind]}]"))
        types[kind] = i
        errs += [invalid(f"{p}.type", kind, m) for m in qualified_name(kind)]
        errs += [invalid(f"{p}.status", state, m) for m in qualified_name(state)]
        if not c.get("reason"):
            errs.append(required(f"{p}.reason", "reason cannot be empty"))
        if not c.get("message"):
            errs.append(required(f"{p}.message", "message cannot be empty"))
    return errs


def _storage_versions(versions: list | None) -> str:
    """formatStorageVersions: up to three `<server>=<version>`, then `+ N more...`."""
    items = [f"{v.get('apiServerID', '')}={v.get('encodingVersion', '')}" for v in versions or []]
    text = ",".join(items[:3])
    return text + (f" + {len(items) - 3} more..." if len(items) > 3 else "")


class StorageVersionStrategy(Strategy):
    status_metadata = ()  # ResetObjectMetaForStatus
    status_deletion_kept = RESET_DELETION
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
