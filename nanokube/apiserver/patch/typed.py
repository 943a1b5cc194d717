"""Typing an apply configuration as structured-merge-diff's ObjectToTyped does.

Upstream's field manager never decodes an apply body into Go structs: it types the unstructured
object against the kind's schema, so a wrong value type or a field the schema does not declare is
reported in the merge library's words and paths (`.spec.replicas: expected numeric (int or float),
got string`, `.spec.template.spec.containers[name="app"].foo: field not declared in schema`), all
of them at once, not the JSON decoder's first `cannot unmarshal`. The values are printed as Go's
fmt prints the library's value wrapper (`&{...}`, `&value.valueUnstructured{Value:...}`), which is
what a user sees in the message."""

from __future__ import annotations

from typing import Any

from nanokube import schema as sch
from nanokube.machinery import gofmt
from nanokube.apiserver.patch import fieldpath as fp
from nanokube.apiserver.patch.apply import _OBJECT_META, _item_element, _shape, _Shape, _TypeError
from nanokube.apiserver.patch.fieldpath import Path

#: definitions the library types as any value (raw JSON kept as sent)
_DEDUCED = frozenset(sch.REF_PREFIX + name for name in (
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
))


#: marks a list item's place in a path until a message needs its element
_ITEM = object()

#: what an x-kubernetes-embedded-resource object has whether its schema says so or not
_EMBEDDED = frozenset({"apiVersion", "kind", "metadata"})


def problems(applied: dict[str, Any], raw: dict[str, Any]) -> list[str]:
    """The validation errors of `applied` against the kind's schema `raw`, in document order
    (upstream walks Go maps, in no fixed order); a CR's metadata is ObjectMeta whatever its CRD
    says, as in upstream's CR type converter."""
    out: list[str] = []
    props = sch.resolve(raw).get("properties") or {}
    if "metadata" in props and props["metadata"] is not _OBJECT_META:
        raw = {**sch.resolve(raw), "properties": {**props, "metadata": _OBJECT_META}}
    _walk(applied, raw, (), out)
    return out


def _walk(v: Any, raw: dict[str, Any] | None, path: Path, out: list[str]) -> None:
    if v is None or not raw or raw.get("$ref") in _DEDUCED:
        return
    node = sch.resolve(raw)
    kinds = sch.types(node)
    if node.get("x-kubernetes-int-or-string") or (
            not kinds and "properties" not in node and "items" not in node and ("oneOf" in node or "anyOf" in node)):
        if isinstance(v, (dict, list)):  # IntOrString, Quantity: an untyped scalar
            out.append(_at(path, f"expected any scalar, got &{{{gofmt.value(v)}}}"))
        return
    if "properties" in node or "object" in kinds:
        _walk_map(v, node, path, out)
    elif "items" in node or "array" in kinds:
        _walk_list(v, raw, node, path, out)
    elif "string" in kinds:
        if not isinstance(v, str):
            out.append(_at(path, f"expected string, got &value.valueUnstructured{{Value:{_go_sharp_v(v)}}}"))
    elif kinds & {"integer", "number"}:
        if type(v) not in (int, float):
            out.append(_at(path, f"expected numeric (int or float), got {_go_type(v)}"))
    elif "boolean" in kinds and type(v) is not bool:
        out.append(_at(path, f"expected boolean, got &{{{gofmt.value(v)}}}"))


def _walk_map(v: Any, node: dict[str, Any], path: Path, out: list[str]) -> None:
    props = node.get("properties")
    elem = sch.additional(node)
    if props is None and elem is None and (node.get("x-kubernetes-preserve-unknown-fields")
                                           or node.get("additionalProperties") is True):
        return
    if not isinstance(v, dict):
        out.append(_at(path, f"expected map, got &{{{gofmt.value(v)}}}"))
        return
    props = props or {}
    open_ = node.get("x-kubernetes-preserve-unknown-fields") or node.get("additionalProperties") is True
    embedded = node.get("x-kubernetes-embedded-resource")
    for name, child in v.items():
        p = path + (fp.field(name),)
        if embedded and name in _EMBEDDED and name not in props:
            continue
        if name in props:
            _walk(child, props[name], p, out)
        elif elem is not None:
            _walk(child, elem, p, out)
        elif not open_:
            out.append(_at(p, "field not declared in schema"))


def _walk_list(v: Any, raw: dict[str, Any], node: dict[str, Any], path: Path, out: list[str]) -> None:
    if not isinstance(v, list):
        out.append(_at(path, f"expected list, got &{{{gofmt.value(v)}}}"))
        return
    shape = _shape(raw, v)
    for i, item in enumerate(v):
        problem = _item_problem(shape, item)
        if problem:  # no path to name the rest by: the library gives up on the list
            out.append(_at(path, f"element {i}: {problem}"))
            return
        _walk(item, node.get("items"), path + ((_ITEM, shape, item, i),), out)


def _item_problem(shape: _Shape, item: Any) -> str | None:
    """Why an associative list's item has no path element (listItemToPathElement)."""
    if shape.keys:
        if item is None:
            return "associative list with keys may not have a null element"
        if not isinstance(item, dict):
            return "associative list with keys may not have non-map elements"
        for name in shape.keys:
            if name not in item and name not in shape.key_defaults and name not in shape.optional_keys:
                return f"associative list with keys has an element that omits key field {fp.encode_json(name)} " \
                       "(and doesn't have default value)"
    elif shape.list_type == "set":
        if isinstance(item, dict):
            return "associative list without keys has an element that's a map type"
        if isinstance(item, list):
            return "not supported: associative list with lists as elements"
        if item is None:
            return "associative list without keys has an element that's an explicit null"
    return None


def _at(path: Path, message: str) -> str:
    return f"{fp.path_string(tuple(_element(pe) for pe in path))}: {message}"


def _element(pe: tuple) -> fp.PathElement:
    """A path element; a list item's is worked out only for a message (by key, value or index)."""
    if pe[0] is not _ITEM:
        return pe
    _, shape, item, i = pe
    try:
        return _item_element(shape, item) if shape.keys or shape.list_type == "set" else fp.index(i)
    except (_TypeError, TypeError):
        return fp.index(i)


# ---------------------------------------------------------------- Go's fmt of unstructured values


def _go_sharp_v(v: Any) -> str:
    """fmt's %#v of a decoded JSON value (an interface{} in a map or slice)."""
    if v is None:
        return "interface {}(nil)"
    if isinstance(v, str):
        return fp.encode_json(v)
    if isinstance(v, list):
        return "[]interface {}{" + ", ".join(_go_sharp_v(x) for x in v) + "}"
    if isinstance(v, dict):
        return "map[string]interface {}{" + ", ".join(
            f"{fp.encode_json(k)}:{_go_sharp_v(v[k])}" for k in sorted(v)) + "}"
    return gofmt.value(v)


def _go_type(v: Any) -> str:
    """fmt's %T of a decoded JSON value."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "[]interface {}"
    if isinstance(v, dict):
        return "map[string]interface {}"
    return "int64" if isinstance(v, int) else "float64"
