"""Is a CRD's openAPIV3Schema structural? (apiextensions-apiserver `schema/validation.go`)

apiextensions.k8s.io/v1 requires every version's schema to be structural: each
node says its `type` (unless it is int-or-string or preserves unknown fields),
arrays say their `items`, value validations (`allOf`/`anyOf`/`oneOf`/`not`)
add no structure, and the root is an object whose `metadata` restricts at most
`name` and `generateName`. Errors carry upstream's words and paths
(`...openAPIV3Schema.properties[spec].type: Required value: must not be empty for
specified object fields`) and come back sorted, as upstream sorts them.
"""

from __future__ import annotations

from typing import Any

from ...machinery import regex
from ...machinery.validation import FieldError, forbidden, invalid, required
from . import defaulting, validator

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")


def validate(schema: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(schema, dict):
        return [required(path, "")]
    t = schema.get("type")
    if not t and not _exempt(schema):
        errs.append(required(f"{path}.type", "must not be empty at the root"))
    elif t and t != "object":
        errs.append(invalid(f"{path}.type", t, "must be object at the root"))
    if schema.get("nullable"):
        errs.append(forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    if "additionalProperties" in schema:
        errs.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
    meta = (schema.get("properties") or {}).get("metadata")
    if isinstance(meta, dict) and not _only_name(meta):
        errs.append(forbidden(f"{path}.properties[metadata]",
                              "must not specify anything other than name and generateName, but metadata is implicitly specified"))
    _node(schema, path, errs, root=True)
    errs.sort(key=str)
    return errs


def _exempt(node: dict[str, Any]) -> bool:
    return bool(node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields"))


def _only_name(meta: dict[str, Any]) -> bool:
    allowed = {"type", "properties", "description"}
    if set(meta) - allowed or meta.get("type", "object") != "object":
        return False
    props = meta.get("properties") or {}
    return set(props) <= {"name", "generateName"} and all(
        isinstance(p, dict) and set(p) <= {"type", "pattern", "maxLength", "minLength", "description", "enum", "format"}
        for p in props.values())


def _node(node: dict[str, Any], path: str, errs: list[FieldError], root: bool = False) -> None:
    t = node.get("type")
    if t is not None and t not in _TYPES:
        errs.append(FieldError("FieldValueNotSupported", f"{path}.type", 'supported values: "array", "boolean", '
                               '"integer", "number", "object", "string"', t, True))
    if node.get("uniqueItems") is True:
        errs.append(forbidden(f"{path}.uniqueItems",
                              "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    props = node.get("properties")
    ap = node.get("additionalProperties")
    if props is not None and ap is not None and ap is not False:
        errs.append(forbidden(f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive"))
    if t == "array" and "items" not in node:
        errs.append(required(f"{path}.items", "must be specified"))
    if node.get("x-kubernetes-int-or-string"):
        for ext in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            if node.get(ext):
                errs.append(invalid(f"{path}.{ext}", node[ext], "must be false if x-kubernetes-int-or-string is true"))
    if node.get("x-kubernetes-embedded-resource"):
        if t != "object":
            errs.append(invalid(f"{path}.type", t or "", "must be object if x-kubernetes-embedded-resource is true"))
        if not props and not node.get("x-kubernetes-preserve-unknown-fields"):
            errs.append(required(f"{path}.properties",
                                 "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
    lt = node.get("x-kubernetes-list-type")
    if lt is not None:
        if t != "array":
            errs.append(invalid(f"{path}.type", t or "", "must be array if x-kubernetes-list-type is specified"))
        elif lt not in ("atomic", "set", "map"):
            errs.append(FieldError("FieldValueNotSupported", f"{path}.x-kubernetes-list-type",
                                   'supported values: "atomic", "set", "map"', lt, True))
        elif lt == "map" and not node.get("x-kubernetes-list-map-keys"):
            errs.append(required(f"{path}.x-kubernetes-list-map-keys",
                                 "must not be empty if x-kubernetes-list-type is map"))
    if node.get("x-kubernetes-list-map-keys") and lt != "map":
        errs.append(forbidden(f"{path}.x-kubernetes-list-type",
                              "must be map if x-kubernetes-list-map-keys is non-empty"))
    mt = node.get("x-kubernetes-map-type")
    if mt is not None and mt not in ("granular", "atomic"):
        errs.append(FieldError("FieldValueNotSupported", f"{path}.x-kubernetes-map-type",
                               'supported values: "granular", "atomic"', mt, True))
    if "default" in node and not root:
        _check_default(node, path, errs)
    _check_pattern(node, path, errs)
    for j in _JUNCTORS:
        if j in node:
            subs = node[j] if j != "not" else [node[j]]
            for i, s in enumerate(subs if isinstance(subs, list) else []):
                if isinstance(s, dict):
                    _value_validation(s, f"{path}.{j}[{i}]" if j != "not" else f"{path}.not", errs)
    if isinstance(props, dict):
        for name, sub in props.items():
            p = f"{path}.properties[{name}]"
            if not isinstance(sub, dict):
                continue
            if not sub.get("type") and not _exempt(sub):
                errs.append(required(f"{p}.type", "must not be empty for specified object fields"))
            _node(sub, p, errs)
    if isinstance(ap, dict):
        p = f"{path}.additionalProperties"
        if not ap.get("type") and not _exempt(ap):
            errs.append(required(f"{p}.type", "must not be empty for specified object fields"))
        _node(ap, p, errs)
    items = node.get("items")
    if isinstance(items, dict):
        p = f"{path}.items"
        if not items.get("type") and not _exempt(items):
            errs.append(required(f"{p}.type", "must not be empty for specified array items"))
        _node(items, p, errs)


_EMPTY = ("type", "title", "description", "x-kubernetes-list-map-keys")
_UNDEFINED = ("additionalProperties", "default", "x-kubernetes-list-type", "x-kubernetes-map-type")
_FALSE = ("nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
          "x-kubernetes-int-or-string")


def _value_validation(node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """Inside allOf/anyOf/oneOf/not only value validations may appear."""
    int_or_string = _is_int_or_string_pattern(node)
    for k in _EMPTY:
        if node.get(k) and not (int_or_string and k == "type"):
            errs.append(forbidden(f"{path}.{k}", "must be empty to be structural"))
    for k in _UNDEFINED:
        if k in node:
            errs.append(forbidden(f"{path}.{k}", "must be undefined to be structural"))
    for k in _FALSE:
        if node.get(k):
            errs.append(forbidden(f"{path}.{k}", "must be false to be structural"))
    if node.get("x-kubernetes-validations"):
        errs.append(forbidden(f"{path}.x-kubernetes-validations", "must be empty to be structural"))
    _check_pattern(node, path, errs)
    for name, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            _value_validation(sub, f"{path}.properties[{name}]", errs)
    if isinstance(node.get("items"), dict):
        _value_validation(node["items"], f"{path}.items", errs)
    for j in _JUNCTORS:
        if j in node:
            subs = node[j] if j != "not" else [node[j]]
            for i, s in enumerate(subs if isinstance(subs, list) else []):
                if isinstance(s, dict):
                    _value_validation(s, f"{path}.{j}[{i}]" if j != "not" else f"{path}.not", errs)


def _check_pattern(node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateValueValidation: a pattern must compile as Go's regexp.Compile (RE2; machinery/regex.py)."""
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            regex.compile_pattern(pattern)
        except regex.PatternError as e:
            errs.append(invalid(f"{path}.pattern", pattern, f"must be a valid regular expression, but isn't: {e}"))


def _is_int_or_string_pattern(node: dict[str, Any]) -> bool:
    return set(node) == {"type"} and node["type"] in ("integer", "string")


def _check_default(node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateStructuralDefaults: a default must survive pruning unchanged, and (either way) pass
    the node's own validation (validator.validate_default)."""
    import copy

    value = node["default"]
    if isinstance(value, (dict, list)) and defaulting.prune(copy.deepcopy(value), node, root=False):
        errs.append(invalid(f"{path}.default", value, "must not have unknown fields"))
    errs.extend(validator.validate_default(value, node, f"{path}.default"))
