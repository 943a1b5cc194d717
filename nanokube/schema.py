"""Release-1.37 API schema, as data.

`kubernetes-validate` ships the OpenAPI definitions of every built-in type as
JSON Schema (`$defs`, nullable types as `["string", "null"]`), with the
Kubernetes extensions intact: group-version-kind, patch merge keys and
strategies, list types and list-map keys. Structural validation, patch
semantics and OpenAPI serving are all derived from this one file.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import orjson

REF_PREFIX = "#/$defs/"


@functools.cache
def builtin_definitions() -> dict[str, dict[str, Any]]:
    """The release-1.37 definitions as shipped: every built-in kind, nothing defined at run time."""
    # found, not imported: the package's __init__ imports jsonschema and its dependencies (~60 ms of
    # every server start), none of which is used here
    package = Path(importlib.util.find_spec("kubernetes_validate").submodule_search_locations[0])
    root = package / "kubernetes-json-schema" / "v1.37.0-local"
    return orjson.loads((root / "_definitions.json").read_bytes())["$defs"]


@functools.cache
def definitions() -> dict[str, dict[str, Any]]:
    """The built-in definitions plus those `define` adds while serving custom resources."""
    return dict(builtin_definitions())


@functools.cache
def _gvk_index() -> dict[tuple[str, str, str], str]:
    idx: dict[tuple[str, str, str], str] = {}
    for name, d in definitions().items():
        for gvk in d.get("x-kubernetes-group-version-kind", ()):
            idx.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return idx


def definition_name(group: str, version: str, kind: str) -> str | None:
    """The `$defs` name of a kind, e.g. ('', 'v1', 'Pod') -> 'io.k8s.api.core.v1.Pod'."""
    return _gvk_index().get((group, version, kind))


def resolve(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Follow `$ref` (possibly repeatedly) to the definition it names."""
    while schema and "$ref" in schema:
        schema = definitions()[schema["$ref"][len(REF_PREFIX):]]
    return schema or {}


def types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if t is None:
        return set()
    return {t} if isinstance(t, str) else set(t) - {"null"}


def field(schema: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """Schema of property `name` of an object schema; the property's own
    extensions (merge key, list type) live on the unresolved property."""
    s = resolve(schema)
    return (s.get("properties") or {}).get(name)


def items(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    return resolve(schema).get("items") if schema else None


def additional(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    ap = resolve(schema).get("additionalProperties") if schema else None
    return ap if isinstance(ap, dict) else None


def list_semantics(schema: dict[str, Any] | None) -> tuple[str | None, list[str], str | None, str | None]:
    """(list-type, list-map-keys, patch-strategy, patch-merge-key) of a list property."""
    if not schema:
        return None, [], None, None
    return (
        schema.get("x-kubernetes-list-type"),
        schema.get("x-kubernetes-list-map-keys") or [],
        schema.get("x-kubernetes-patch-strategy"),
        schema.get("x-kubernetes-patch-merge-key"),
    )


def kind_schema(group: str, version: str, kind: str) -> dict[str, Any] | None:
    name = definition_name(group, version, kind)
    return definitions()[name] if name else None


def define(defs: dict[str, dict[str, Any]]) -> None:
    """Add definitions served at run time (custom resources' kinds), indexed by their
    `x-kubernetes-group-version-kind` like the built-in ones."""
    all_defs, idx = definitions(), _gvk_index()
    for name, d in defs.items():
        all_defs[name] = d
        for gvk in d.get("x-kubernetes-group-version-kind", ()):
            idx[(gvk["group"], gvk["version"], gvk["kind"])] = name


def forget(names: list[str]) -> None:
    """Remove definitions added by `define` (a CRD deleted or a version no longer served)."""
    all_defs, idx = definitions(), _gvk_index()
    for name in names:
        d = all_defs.pop(name, None)
        for gvk in (d or {}).get("x-kubernetes-group-version-kind", ()):
            if idx.get((gvk["group"], gvk["version"], gvk["kind"])) == name:
                del idx[(gvk["group"], gvk["version"], gvk["kind"])]
