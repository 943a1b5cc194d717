"""CEL types for OpenAPI v3 structural schemas, and schema values as CEL sees
them (upstream's apiserver/pkg/cel/common and model packages).

Property names are escaped the way upstream escapes them (`x-y` is read as
`self.x__dash__y`); strings with format date-time, duration and byte become
timestamps, durations and bytes; numbers are doubles. Unbounded sizes are
what fits in one request, after upstream's estimates.
"""

from __future__ import annotations

import base64
import datetime
import re
from typing import Any

from .. import schema as definitions
from ..machinery import goduration
from .cost import extent
from .types import (
    BOOL, DOUBLE, DURATION, DYN, INT, MAX_REQUEST_SIZE, STRING, TIMESTAMP, Type, list_of, map_of,
)

_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
    "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_ACCESSIBLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")
#: upstream's MaxDurationSizeJSON, JSONDateSize, MaxDatetimeSizeJSON
_FORMAT_SIZES = {"duration": 32, "date": 12, "date-time": 64}
_META = {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}


def normalize(s: dict | None) -> dict | None:
    """A built-in kind's schema as a structural one: `$ref` (alone or as the
    only allOf) followed, a nullable type list read as its one type."""
    if not s:
        return s
    if "$ref" in s:
        s = definitions.resolve(s)
    elif len(s.get("allOf") or ()) == 1 and "$ref" in s["allOf"][0]:
        s = {**definitions.resolve(s["allOf"][0]), **{k: v for k, v in s.items() if k != "allOf"}}
    t = s.get("type")
    if isinstance(t, list):
        kinds = [x for x in t if x != "null"]
        s = {**s, "type": kinds[0] if len(kinds) == 1 else None}
    return s


def escape(name: str) -> str | None:
    """The CEL identifier for a property name, or None when CEL cannot
    address it."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ACCESSIBLE.match(name):
        return None
    return (name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
            .replace("/", "__slash__"))


def _min_size(s: dict | None) -> int:
    s = normalize(s) or {}
    if s.get("nullable"):
        return 4
    t = s.get("type")
    return {"string": 2, "array": 2, "object": 2, "boolean": 4}.get(t, 1)


def _string_size(s: dict) -> int:
    if s.get("x-kubernetes-int-or-string"):
        return MAX_REQUEST_SIZE - 2
    if "maxLength" in s:
        return s["maxLength"] * 4 if not s.get("format") else s["maxLength"]
    if s.get("enum"):
        return max((len(e) for e in s["enum"] if isinstance(e, str)), default=0)
    return _FORMAT_SIZES.get(s.get("format", ""), MAX_REQUEST_SIZE - 2)


def items_bound(s: dict) -> int:
    """maxItems, or how many of the smallest item fit in a request."""
    if "maxItems" in s:
        return s["maxItems"]
    return (MAX_REQUEST_SIZE - 2) // (_min_size(s.get("items")) + 1)


def properties_bound(s: dict) -> int:
    """maxProperties, or how many of the smallest entry fit in a request."""
    if "maxProperties" in s:
        return s["maxProperties"]
    add = s.get("additionalProperties")
    return (MAX_REQUEST_SIZE - 2) // (_min_size(add if isinstance(add, dict) else None) + 6)


def schema_type(s: dict | None, root: bool = False) -> Type:
    """The CEL type of values of schema `s` (root: a resource, whose
    apiVersion, kind and metadata.name/generateName are readable)."""
    s = normalize(s)
    if not s or s.get("x-kubernetes-int-or-string"):
        return Type("dyn", max_size=MAX_REQUEST_SIZE - 2)
    t = s.get("type")
    if t == "object":
        add = s.get("additionalProperties")
        if isinstance(add, dict) and not s.get("properties"):
            return map_of(STRING, schema_type(add), properties_bound(s))
        if not s.get("properties") and s.get("x-kubernetes-preserve-unknown-fields") and not (
                root or s.get("x-kubernetes-embedded-resource")):
            return DYN
        return Type("object", max_size=properties_bound(s), schema=(s, root or bool(s.get(
            "x-kubernetes-embedded-resource"))))
    if t == "array":
        return list_of(schema_type(s.get("items")), items_bound(s))
    if t == "string":
        fmt = s.get("format")
        if fmt == "date-time":
            return TIMESTAMP
        if fmt == "duration":
            return DURATION
        if fmt == "byte":
            return Type("bytes", max_size=_string_size(s))
        return Type("string", max_size=_string_size(s))
    if t == "integer":
        return INT
    if t == "number":
        return DOUBLE
    if t == "boolean":
        return BOOL
    return DYN


def _properties(obj: Type) -> dict[str, dict]:
    s, resource = obj.schema
    props = dict(s.get("properties") or {})
    if resource:
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props["metadata"] = _META
    return props


def field_type(obj: Type, name: str) -> Type | None:
    """The declared field `name` (escaped form) of a schema object type."""
    for prop, ps in _properties(obj).items():
        if escape(prop) == name:
            return schema_type(ps)
    s, _ = obj.schema
    if s.get("x-kubernetes-preserve-unknown-fields"):
        return DYN
    return None


def to_cel(value: Any, s: dict | None, root: bool = False, sizes: list[int] | None = None) -> Any:
    """`value` (decoded JSON) as CEL reads it under schema `s`. `sizes`: [largest collection,
    longest string] so far, raised to cost.extent of what this returns as the walk meets them (a
    large object's rules walked it a second time for those: ~0.45 s of 1.45 at 300,000 values)."""
    if sizes is None:
        sizes = [1, 1]
    s = normalize(s)
    if value is None or not s or s.get("x-kubernetes-int-or-string"):
        return _measured(value, sizes)
    t = s.get("type")
    if t == "object" and isinstance(value, dict):
        props = s.get("properties")
        add = s.get("additionalProperties")
        if isinstance(add, dict) and not props:
            if len(value) > sizes[0]:
                sizes[0] = len(value)
            out = {}
            for k, v in value.items():
                if len(k) > sizes[1]:
                    sizes[1] = len(k)
                out[k] = to_cel(v, add, False, sizes)
            return out
        if props or root or s.get("x-kubernetes-embedded-resource"):
            out = {}
            for k, v in value.items():
                name = escape(k)
                if name is None:
                    continue
                if len(name) > sizes[1]:
                    sizes[1] = len(name)
                if root and k == "metadata" and isinstance(v, dict):
                    out[name] = _measured({f: v[f] for f in ("name", "generateName") if f in v}, sizes)
                else:
                    out[name] = to_cel(v, (props or {}).get(k), False, sizes)
            if len(out) > sizes[0]:
                sizes[0] = len(out)
            return out
        return _measured(value, sizes)
    if t == "array" and isinstance(value, list):
        if len(value) > sizes[0]:
            sizes[0] = len(value)
        items = s.get("items")
        return [to_cel(v, items, False, sizes) for v in value]
    if t == "string" and isinstance(value, str):
        fmt = s.get("format")
        try:
            if fmt == "date-time":
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            if fmt == "duration":
                return _duration(value)
            if fmt == "byte":
                return _measured(base64.b64decode(value), sizes)
        except ValueError:
            pass
        return _measured(value, sizes)
    if t == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if t == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return _measured(value, sizes)


def _measured(value: Any, sizes: list[int]) -> Any:
    """`value`, as to_cel returns it unconverted, its extent raising `sizes`."""
    if isinstance(value, (str, bytes)):
        if len(value) > sizes[1]:
            sizes[1] = len(value)
    elif isinstance(value, (dict, list)):
        n, longest = extent(value)
        sizes[0], sizes[1] = max(sizes[0], n), max(sizes[1], longest)
    return value


def _duration(s: str) -> datetime.timedelta:
    return datetime.timedelta(seconds=goduration.parse(s))
