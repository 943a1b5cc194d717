"""Is a CRD's openAPIV3Schema structural? (apiextensions-apiserver `schema/validation.go`)

apiextensions.k8s.io/v1 requires every version's schema to be structural: each
node says its `type` (unless it is int-or-string or preserves unknown fields),
arrays say their `items`, value validations (`allOf`/`anyOf`/`oneOf`/`not`)
add no structure, and the root is an object whose `metadata` restricts at most
`name` and `generateName`. Errors carry upstream's words and paths
(`...openAPIV3Schema.properties[spec].type: Required value: must not be empty for
specified object fields`).

They come in validateCustomResourceDefinitionValidation's order: a nullable root,
then ValidateStructural's errors sorted as it sorts them, or, only when there are
none, the defaults' (validateStructuralDefaults); then the OpenAPI schema checks of
ValidateCustomResourceDefinitionOpenAPISchema, each node's after its children's.
CEL rules are compiled only for a schema that passed the first two (`Checked.cel`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...machinery import regex
from ...machinery.validation import FieldError, forbidden, invalid, not_supported, required
from . import defaulting, validator

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
#: the node's place, which words a missing type (validateStructuralInvariants' level)
_ROOT, _ITEMS, _FIELD = "at the root", "for specified array items", "for specified object fields"


@dataclass
class Checked:
    errors: list[FieldError]
    #: structural with valid defaults: upstream builds the CEL context only then
    cel: bool


@dataclass
class _Walk:
    structural: list[FieldError] = field(default_factory=list)
    openapi: list[FieldError] = field(default_factory=list)
    defaults: list[FieldError] = field(default_factory=list)


def check(schema: Any, path: str) -> Checked:
    if not isinstance(schema, dict):
        return Checked([required(path, "")], False)
    w = _Walk()
    head = [forbidden(f"{path}.nullable", "nullable cannot be true at the root")] if schema.get("nullable") else []
    _node(schema, path, w, _ROOT)
    w.structural.sort(key=str)
    gate = w.structural
    if not gate:
        _defaults(schema, path, w.defaults, root=True)
        gate = w.defaults
    return Checked(head + gate + w.openapi, not gate)


def validate(schema: Any, path: str) -> list[FieldError]:
    return check(schema, path).errors


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


def _required_or_invalid(path: str, value: str, detail: str) -> FieldError:
    return invalid(path, value, detail) if value else required(path, detail)


def _node(node: dict[str, Any], path: str, w: _Walk, level: str) -> None:
    t = node.get("type")
    s = w.structural
    # validateStructuralInvariants (sorted afterwards, so their order here is free)
    if t == "array" and "items" not in node:
        s.append(required(f"{path}.items", "must be specified"))
    if node.get("x-kubernetes-int-or-string"):
        for ext in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            if node.get(ext):
                s.append(invalid(f"{path}.{ext}", node[ext], "must be false if x-kubernetes-int-or-string is true"))
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    if embedded and t != "object":
        s.append(_required_or_invalid(f"{path}.type", t or "", "must be object if x-kubernetes-embedded-resource is true"))
    elif not t and not _exempt(node):
        s.append(required(f"{path}.type", f"must not be empty {level}"))
    props = node.get("properties")
    ap = node.get("additionalProperties")
    if level == _ROOT:
        if t and t != "object":
            s.append(invalid(f"{path}.type", t, "must be object at the root"))
        if "additionalProperties" in node:
            s.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        meta = (props or {}).get("metadata")
        if isinstance(meta, dict) and not _only_name(meta):
            s.append(forbidden(f"{path}.properties[metadata]", "must not specify anything other than name and "
                               "generateName, but metadata is implicitly specified"))
    if embedded and not props and not node.get("x-kubernetes-preserve-unknown-fields"):
        s.append(required(f"{path}.properties",
                          "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
    _check_pattern(node, path, s)
    for j in _JUNCTORS:
        if j in node:
            subs = node[j] if j != "not" else [node[j]]
            for i, sub in enumerate(subs if isinstance(subs, list) else []):
                if isinstance(sub, dict):
                    _value_validation(sub, f"{path}.{j}[{i}]" if j != "not" else f"{path}.not", s)
    # ValidateCustomResourceDefinitionOpenAPISchema, in its order: the node, its children, then its lists and maps
    o = w.openapi
    if t is not None and t not in _TYPES:
        o.append(not_supported(f"{path}.type", t, _TYPES))
    if node.get("uniqueItems") is True:
        o.append(forbidden(f"{path}.uniqueItems",
                           "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    if props and ap is not None and ap is not True:
        o.append(forbidden(f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive"))
    if isinstance(ap, dict):
        _node(ap, f"{path}.additionalProperties", w, _FIELD)
    if isinstance(props, dict):
        for name, sub in props.items():
            if isinstance(sub, dict):
                _node(sub, f"{path}.properties[{name}]", w, _FIELD)
    items = node.get("items")
    if isinstance(items, dict):
        _node(items, f"{path}.items", w, _ITEMS)
    _lists_and_maps(node, path, o)


def _lists_and_maps(node: dict[str, Any], path: str, o: list[FieldError]) -> None:
    t = node.get("type") or ""
    if node.get("x-kubernetes-preserve-unknown-fields") is False:
        o.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined"))
    mt, lt, keys = node.get("x-kubernetes-map-type"), node.get("x-kubernetes-list-type"), node.get("x-kubernetes-list-map-keys")
    if mt is not None and t != "object":
        o.append(_required_or_invalid(f"{path}.type", t, "must be object if x-kubernetes-map-type is specified"))
    if mt is not None and mt not in ("atomic", "granular"):
        o.append(not_supported(f"{path}.x-kubernetes-map-type", mt, ("atomic", "granular")))
    items = node.get("items") if isinstance(node.get("items"), dict) else None
    if lt is not None and t != "array":
        o.append(_required_or_invalid(f"{path}.type", t, "must be array if x-kubernetes-list-type is specified"))
    elif lt == "set" and items is not None:
        if items.get("type") == "array" and items.get("x-kubernetes-list-type", "atomic") != "atomic":
            o.append(invalid(f"{path}.items.x-kubernetes-list-type", items["x-kubernetes-list-type"],
                             "must be atomic as item of a list with x-kubernetes-list-type=set"))
        elif items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            # upstream hands the items' list type (unset: null) as the value
            o.append(invalid(f"{path}.items.x-kubernetes-map-type", items.get("x-kubernetes-list-type"),
                             "must be atomic as item of a list with x-kubernetes-list-type=set"))
    if lt is not None and lt not in ("atomic", "set", "map"):
        o.append(not_supported(f"{path}.x-kubernetes-list-type", lt, ("atomic", "set", "map")))
    if keys:
        if lt is None:
            o.append(required(f"{path}.x-kubernetes-list-type", "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif lt != "map":
            o.append(invalid(f"{path}.x-kubernetes-list-type", lt, "must be map if x-kubernetes-list-map-keys is non-empty"))
    if lt == "map":
        if not keys:
            o.append(required(f"{path}.x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type is map"))
        if items is None:
            o.append(required(f"{path}.items", "must have a schema if x-kubernetes-list-type is map"))
        elif items.get("type") != "object":
            o.append(invalid(f"{path}.items.type", items.get("type") or "",
                             "must be object if parent array's x-kubernetes-list-type is map"))
        else:
            item_props, seen = items.get("properties") or {}, set()
            for k in keys or []:
                if k in item_props:
                    if (item_props[k] or {}).get("type") in ("array", "object"):
                        o.append(invalid(f"{path}.items.properties[{k}].type", "object",
                                         "must be a scalar type if parent array's x-kubernetes-list-type is map"))
                else:
                    o.append(invalid(f"{path}.x-kubernetes-list-map-keys", keys, "entries must all be names of item properties"))
                if k in seen:
                    o.append(invalid(f"{path}.x-kubernetes-list-map-keys", keys, "must not contain duplicate entries"))
                seen.add(k)
    if lt in ("set", "map") and items is not None:
        if items.get("nullable"):
            o.append(forbidden(f"{path}.items.nullable", f"cannot be nullable when x-kubernetes-list-type is {lt}"))
        if lt == "map":
            needed, item_props = set(items.get("required") or ()), items.get("properties") or {}
            for k in keys or []:
                prop = item_props.get(k)
                if not isinstance(prop, dict):
                    continue
                if k not in needed and "default" not in prop:
                    o.append(required(f"{path}.items.properties[{k}].default", "this property is in "
                                      "x-kubernetes-list-map-keys, so it must have a default or be a required property"))
                if prop.get("nullable"):
                    o.append(forbidden(f"{path}.items.properties[{k}].nullable",
                                       "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))


def _defaults(node: dict[str, Any], path: str, errs: list[FieldError], root: bool = False) -> None:
    """validateStructuralDefaults' walk: a node's default, then its items', then its properties'
    (additionalProperties may hold none)."""
    if "default" in node and not root:
        _check_default(node, path, errs)
    items = node.get("items")
    if isinstance(items, dict):
        _defaults(items, f"{path}.items", errs)
    for name, sub in (node.get("properties") or {}).items():
        if isinstance(sub, dict):
            _defaults(sub, f"{path}.properties[{name}]", errs)


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
    value = node["default"]
    if isinstance(value, (dict, list)) and defaulting.prune(value, node, root=False, drop=False):
        errs.append(invalid(f"{path}.default", value, "must not have unknown fields"))
    errs.extend(validator.validate_default(value, node, f"{path}.default"))
