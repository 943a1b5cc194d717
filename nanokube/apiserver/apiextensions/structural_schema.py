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
ValidateCustomResourceDefinitionOpenAPISchema (a node's own, its children's, its
list and map extensions'). A schema NewStructural cannot convert (`$ref`, `id`,
`definitions`, a list of `items`...) skips the first two. CEL rules are compiled
only for a schema that passed them (`Checked.cel`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...machinery import regex
from ...machinery.validation import FieldError, forbidden, invalid, not_supported, required
from . import defaulting, internal, validator

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
#: the node's place, which words a missing type (validateStructuralInvariants' level)
_ROOT, _ITEMS, _FIELD = "at the root", "for specified array items", "for specified object fields"


@dataclass
class Checked:
    errors: list[FieldError]
    #: structural with valid defaults: upstream builds the CEL context only then
    cel: bool


@dataclass(frozen=True)
class _Ssv:
    """specStandardValidatorV3's state along the walk: why defaults are forbidden here (None: they
    are allowed), and whether the node lies inside a resource's metadata, kind or apiVersion."""
    no_defaults: str | None = None
    in_meta: bool = False


def check(schema: Any, path: str) -> Checked:
    if not isinstance(schema, dict):
        return Checked([required(path, "")], False)
    head = [forbidden(f"{path}.nullable", "nullable cannot be true at the root")] if schema.get("nullable") else []
    # NewStructural refuses what the OpenAPI checks forbid; then neither ValidateStructural nor the
    # defaults run, and its own error shows only when nothing else was found
    unsupported = _unsupported(schema)
    gate: list[FieldError] = []
    if unsupported is None:
        _structural(schema, path, gate, _ROOT)
        _complete(schema, schema, path, path, gate)
        gate.sort(key=str)
        if not gate:
            _defaults(schema, path, gate, root=True)
    openapi: list[FieldError] = []
    _openapi(schema, path, openapi, _Ssv(), root=True)
    errors = head + gate + openapi
    if not errors and unsupported is not None:
        errors = [invalid(path, "", unsupported)]
    return Checked(errors, unsupported is None and not gate)


def validate(schema: Any, path: str) -> list[FieldError]:
    return check(schema, path).errors


def _exempt(node: dict[str, Any]) -> bool:
    return bool(node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields"))


_UNSUPPORTED = (("id", "id"), ("$schema", "schema"), ("$ref", "$ref"), ("patternProperties", "patternProperties"),
                ("dependencies", "dependencies"))


def _unsupported(node: dict[str, Any]) -> str | None:
    """NewStructural's error for the node or the first one below it, in its order; None if it converts."""
    for key, name in _UNSUPPORTED:
        if node.get(key):
            return f"OpenAPIV3Schema '{name}' is not supported"
    if node.get("additionalItems") is not None:
        return "OpenAPIV3Schema 'additionalItems' is not supported"
    if node.get("definitions"):
        return "OpenAPIV3Schema 'definitions' is not supported"
    subs = [node.get("not")] + [s for j in ("allOf", "anyOf", "oneOf") for s in node.get(j) or ()]
    subs.append(node.get("additionalProperties"))
    for sub in subs:
        found = _unsupported(sub) if isinstance(sub, dict) else None
        if found:
            return found
    if node.get("x-kubernetes-preserve-unknown-fields") is False:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    items = node.get("items")
    if isinstance(items, list) and items:
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    for sub in [items] + list((node.get("properties") or {}).values()):
        found = _unsupported(sub) if isinstance(sub, dict) else None
        if found:
            return found
    return None


def _required_or_invalid(path: str, value: str, detail: str) -> FieldError:
    return invalid(path, value, detail) if value else required(path, detail)


_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_META_FIELDS = ("metadata", "kind", "apiVersion")


def _structural(node: dict[str, Any], path: str, s: list[FieldError], level: str) -> None:
    """validateStructuralInvariants (its errors are sorted afterwards, so their order here is free)."""
    t = node.get("type") or ""
    props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    ap = node.get("additionalProperties")
    items = node.get("items")
    if t == "array" and items is None:
        s.append(required(f"{path}.items", "must be specified"))
    if isinstance(items, dict):
        _structural(items, f"{path}.items", s, _ITEMS)
    for name, sub in props.items():
        if isinstance(sub, dict):
            _structural(sub, f"{path}.properties[{name}]", s, _FIELD)
    if ap is not None:
        if level == _ROOT:
            s.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(ap, dict):
            _structural(ap, f"{path}.additionalProperties", s, _FIELD)
    if node.get("x-kubernetes-int-or-string"):
        for ext in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            if node.get(ext):
                s.append(invalid(f"{path}.{ext}", node[ext], "must be false if x-kubernetes-int-or-string is true"))
    all_of = node.get("allOf")
    first = all_of[0] if isinstance(all_of, list) and all_of and isinstance(all_of[0], dict) else {}
    _value_validation(node, path, s, node.get("anyOf") == _INT_OR_STRING, first.get("anyOf") == _INT_OR_STRING)
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    if embedded and t != "object":
        s.append(_required_or_invalid(f"{path}.type", t, "must be object if x-kubernetes-embedded-resource is true"))
    elif not t and not _exempt(node):
        s.append(required(f"{path}.type", f"must not be empty {level}"))
    if embedded and ap is not None:
        s.append(forbidden(f"{path}.additionalProperties", "must not be used if x-kubernetes-embedded-resource is set"))
    if level == _ROOT and t and t != "object":
        s.append(invalid(f"{path}.type", t, "must be object at the root"))
    check_meta = level == _ROOT or embedded
    for name in ("kind", "apiVersion"):
        sub = props.get(name)
        if check_meta and isinstance(sub, dict) and sub.get("type") != "string":
            s.append(invalid(f"{path}.properties[{name}].type", sub.get("type") or "", "must be string"))
    meta = props.get("metadata")
    if isinstance(meta, dict):
        _metadata(meta, check_meta, level, f"{path}.properties[metadata]", s)
    if embedded and not node.get("x-kubernetes-preserve-unknown-fields") and not props:
        s.append(required(f"{path}.properties",
                          "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))


#: what NewStructural keeps of a node, and the keys whose empty list it keeps too (not dropped as unset)
_KEPT = frozenset((
    "type", "description", "title", "nullable", "default", "additionalProperties", "format", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "multipleOf", "maxProperties", "minProperties", "required", "enum", "not", "allOf", "anyOf",
    "oneOf", "properties", "items", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields"))
_EMPTY_KEPT = frozenset(("required", "x-kubernetes-list-map-keys", "x-kubernetes-validations"))


def _metadata(meta: dict[str, Any], check_meta: bool, level: str, path: str, s: list[FieldError]) -> None:
    """validateStructuralMetadataInvariants: an object; at the root it may restrict name and
    generateName alone (type and default aside: API validation checks the default)."""
    if check_meta and meta.get("type") != "object":
        s.append(invalid(f"{path}.type", meta.get("type") or "", "must be object"))
    if level != _ROOT:
        return
    props = meta.get("properties") or {}
    only_names = bool(props) and set(props) <= {"name", "generateName"}
    for k, v in meta.items():
        if k in ("type", "default") or (k == "properties" and only_names) or k not in _KEPT:
            continue
        if v is None or v is False or v == "" or (v in ([], {}) and k not in _EMPTY_KEPT):
            continue
        s.append(forbidden(path, "must not specify anything other than name and generateName, "
                                 "but metadata is implicitly specified"))
        return


def _complete(v: dict[str, Any], node: dict[str, Any] | None, spath: str, vpath: str, s: list[FieldError]) -> None:
    """validateStructuralCompleteness: a field or items that a junctor below the root names is also
    specified in the structural schema."""
    if node is None:
        s.append(required(spath, f"because it is defined in {vpath}"))
        return
    subs = [("not", v.get("not"))] + [(f"{j}[{i}]", sub) for j in ("allOf", "anyOf", "oneOf")
                                      for i, sub in enumerate(v.get(j) or ())]
    for where, sub in subs:
        if isinstance(sub, dict):
            _complete_nested(sub, node, spath, f"{vpath}.{where}", s)


def _complete_nested(v: dict[str, Any], node: dict[str, Any], spath: str, vpath: str, s: list[FieldError]) -> None:
    _complete(v, node, spath, vpath, s)
    items = v.get("items")
    if isinstance(items, dict):
        sitems = node.get("items")
        if isinstance(sitems, dict):
            _complete_nested(items, sitems, f"{spath}.items", f"{vpath}.items", s)
        else:
            s.append(required(f"{spath}.items", f"because it is defined in {vpath}.items"))
    sprops = node.get("properties") or {}
    for name, sub in (v.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        if isinstance(sprops.get(name), dict):
            _complete_nested(sub, sprops[name], f"{spath}.properties[{name}]", f"{vpath}.properties[{name}]", s)
        else:
            s.append(required(f"{spath}.properties[{name}]", f"because it is defined in {vpath}.properties[{name}]"))


def _openapi(node: dict[str, Any], path: str, o: list[FieldError], ssv: _Ssv, root: bool = False) -> None:
    """ValidateCustomResourceDefinitionOpenAPISchema, in its order: the node, its children (junctors,
    definitions and dependencies included), then its lists and maps."""
    _standard(node, path, o, ssv)
    if node.get("uniqueItems") is True:
        o.append(forbidden(f"{path}.uniqueItems",
                           "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    ap = node.get("additionalProperties")
    if ap is not None:
        if props and ap is not True:
            o.append(forbidden(f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive"))
        if isinstance(ap, dict):
            sub_ssv = replace(ssv, no_defaults="inside additionalProperties applying to object metadata") if ssv.in_meta else ssv
            _openapi(ap, f"{path}.additionalProperties", o, sub_ssv)
    resource = root or bool(node.get("x-kubernetes-embedded-resource"))
    for name, sub in props.items():
        sub_ssv = ssv
        if resource and name in _META_FIELDS:
            sub_ssv = replace(sub_ssv, in_meta=True)
            if root:
                sub_ssv = replace(sub_ssv, no_defaults=f"in top-level {name}")
        if isinstance(sub, dict):
            _openapi(sub, f"{path}.properties[{name}]", o, sub_ssv)
    if isinstance(node.get("not"), dict):
        _openapi(node["not"], f"{path}.not", o, ssv)
    for j in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(node.get(j) or ()):
            if isinstance(sub, dict):
                _openapi(sub, f"{path}.{j}[{i}]", o, ssv)
    for name, sub in (node.get("definitions") or {}).items():
        if isinstance(sub, dict):
            _openapi(sub, f"{path}.definitions[{name}]", o, ssv)
    items = node.get("items")
    if isinstance(items, dict):
        _openapi(items, f"{path}.items", o, ssv)
    elif isinstance(items, list):
        for i, sub in enumerate(items):
            if isinstance(sub, dict):
                _openapi(sub, f"{path}.items[{i}]", o, ssv)
    for name, sub in (node.get("dependencies") or {}).items():
        if isinstance(sub, dict):
            _openapi(sub, f"{path}.dependencies[{name}]", o, ssv)
    _lists_and_maps(node, path, o)


def _standard(node: dict[str, Any], path: str, o: list[FieldError], ssv: _Ssv) -> None:
    """specStandardValidatorV3.validate: what OpenAPI v3 allows that CRD schemas do not."""
    t = node.get("type")
    if t and t not in _TYPES:
        o.append(not_supported(f"{path}.type", t, _TYPES))
    if node.get("default") is not None and ssv.no_defaults is not None:
        o.append(forbidden(f"{path}.default", f"must not be set {ssv.no_defaults}".rstrip()))
    if node.get("id"):
        o.append(forbidden(f"{path}.id", "id is not supported"))
    for key, present in (("additionalItems", node.get("additionalItems") is not None),
                         ("patternProperties", bool(node.get("patternProperties"))),
                         ("definitions", bool(node.get("definitions"))),
                         ("dependencies", node.get("dependencies") is not None),
                         ("$ref", node.get("$ref") is not None)):
        if present:
            o.append(forbidden(f"{path}.{key}", f"{key} is not supported"))
    if t == "null":
        o.append(forbidden(f"{path}.type", "type cannot be set to null, use nullable as an alternative"))
    if isinstance(node.get("items"), list) and node["items"]:
        o.append(forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if ssv.in_meta and node.get("x-kubernetes-embedded-resource"):
        o.append(forbidden(f"{path}.x-kubernetes-embedded-resource", "must not be used inside of resource meta"))


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
        if node.get("items") is None:
            o.append(required(f"{path}.items", "must have a schema if x-kubernetes-list-type is map"))
        elif items is None:
            o.append(invalid(f"{path}.items", internal.or_array(node["items"]),
                             "must only have a single schema if x-kubernetes-list-type is map"))
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


def _value_validation(node: dict[str, Any], path: str, errs: list[FieldError], skip_any_of: bool,
                      skip_first_all_of_any_of: bool) -> None:
    """validateValueValidation: the junctors' clauses (an int-or-string `anyOf: [integer, string]`,
    alone or first in `allOf`, exempt) and the pattern."""
    clauses = [] if skip_any_of else [(f"anyOf[{i}]", sub, False) for i, sub in enumerate(node.get("anyOf") or ())]
    clauses += [(f"allOf[{i}]", sub, skip_first_all_of_any_of and i == 0) for i, sub in enumerate(node.get("allOf") or ())]
    clauses += [(f"oneOf[{i}]", sub, False) for i, sub in enumerate(node.get("oneOf") or ())]
    clauses.append(("not", node.get("not"), False))
    for where, sub, skip in clauses:
        if isinstance(sub, dict):
            _nested(sub, f"{path}.{where}", errs, skip)
    _check_pattern(node, path, errs)


_EMPTY = ("type", "title", "description")
_UNDEFINED = ("additionalProperties", "default", "externalDocs")
_FALSE = ("nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
          "x-kubernetes-int-or-string")


def _nested(node: dict[str, Any], path: str, errs: list[FieldError], skip_any_of: bool) -> None:
    """validateNestedValueValidation: inside allOf/anyOf/oneOf/not only value validations may appear."""
    _value_validation(node, path, errs, skip_any_of, False)
    if isinstance(node.get("items"), dict):
        _nested(node["items"], f"{path}.items", errs, False)
    props = node.get("properties") or {}
    for name, sub in props.items():
        if isinstance(sub, dict):
            _nested(sub, f"{path}.properties[{name}]", errs, False)
    for k in _EMPTY:
        if node.get(k):
            errs.append(forbidden(f"{path}.{k}", "must be empty to be structural"))
    for k in _UNDEFINED:
        if node.get(k) is not None:
            errs.append(forbidden(f"{path}.{k}", "must be undefined to be structural"))
    for k in _FALSE:
        if node.get(k):
            errs.append(forbidden(f"{path}.{k}", "must be false to be structural"))
    if node.get("x-kubernetes-list-map-keys"):
        errs.append(forbidden(f"{path}.x-kubernetes-list-map-keys", "must be empty to be structural"))
    for k in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
        if node.get(k) is not None:
            errs.append(forbidden(f"{path}.{k}", "must be undefined to be structural"))
    if node.get("x-kubernetes-validations"):
        errs.append(forbidden(f"{path}.x-kubernetes-validations", "must be empty to be structural"))
    if "metadata" in props:
        errs.append(forbidden(f"{path}.properties[metadata]", "must not be specified in a nested context"))


def _check_pattern(node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateValueValidation: a pattern must compile as Go's regexp.Compile (RE2; machinery/regex.py)."""
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            regex.compile_pattern(pattern)
        except regex.PatternError as e:
            errs.append(invalid(f"{path}.pattern", pattern, f"must be a valid regular expression, but isn't: {e}"))


def _check_default(node: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateStructuralDefaults: a default must survive pruning unchanged, and (either way) pass
    the node's own validation (validator.validate_default)."""
    value = node["default"]
    if isinstance(value, (dict, list)) and defaulting.prune(value, node, root=False, drop=False):
        errs.append(invalid(f"{path}.default", value, "must not have unknown fields"))
    errs.extend(validator.validate_default(value, node, f"{path}.default"))
