"""Server-side apply and managedFields bookkeeping, as kube-apiserver does them.

This follows structured-merge-diff (the merge, compare, prune and ownership
rules) and the apiserver's field manager stack around it (stripping metadata
that nobody owns, reset fields, per-manager timestamps, entry order). Objects
are walked against the release schema from `nanokube.schema`: list and map
topology comes from `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
`x-kubernetes-map-type` and, for lists without a list type, the strategic
merge key. Parts of an object the schema does not describe are "deduced":
maps are granular, lists atomic.
"""

from __future__ import annotations

import functools
import json
from contextvars import ContextVar
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import datetime
from itertools import repeat
from typing import Any, Callable

import orjson

from nanokube import schema as sch
from nanokube.machinery import encoded as json_memo
from nanokube.machinery import shape
from nanokube.machinery.validation import managed_fields_errors
from nanokube.apiserver.patch import PatchError, json_copy
from nanokube.apiserver.patch import fieldpath as fp
from nanokube.apiserver.patch.fieldpath import Path
from nanokube.apiserver.patch.value_fields import kept, omitted, structs

MISSING: Any = object()

# Paths nobody owns: upstream's stripMeta set (plus deletionTimestamp, which
# only the server writes).
_STRIPPED = {
    fp.make_path(*p)
    for p in (
        ("apiVersion",),
        ("kind",),
        ("metadata",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "creationTimestamp"),
        ("metadata", "deletionTimestamp"),
        ("metadata", "selfLink"),
        ("metadata", "uid"),
        ("metadata", "generation"),
        ("metadata", "managedFields"),
        ("metadata", "resourceVersion"),
    )
}

# List-map key fields that upstream's OpenAPI gives a `default`, which
# kubernetes-validate's schema drops; an item omitting one is keyed by it.
_KEY_DEFAULTS = {
    "io.k8s.api.core.v1.ContainerPort": {"protocol": "TCP"},
    "io.k8s.api.core.v1.ServicePort": {"protocol": "TCP"},
}

_OBJECT_META = {
    "$ref": sch.REF_PREFIX + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
}

# Untyped objects still have typed metadata, as CRD schemas always do.
_UNTYPED_ROOT = {
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": _OBJECT_META,
    }
}


class ApplyConflict(PatchError):
    """409: the apply would change fields other managers own.

    `conflicts` lists (manager description, field path) pairs, e.g.
    ('"kubectl" using apps/v1', '.spec.replicas'); `details` holds the
    `FieldManagerConflict` causes upstream returns.
    """

    def __init__(self, conflicts: list[tuple[str, str]], message: str):
        Exception.__init__(self, message)
        self.code = 409
        self.reason = "Conflict"
        self.status_message = message
        self.conflicts = conflicts
        self.details = {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": f"conflict with {who}",
                    "field": path,
                }
                for who, path in conflicts
            ]
        }


class _TypeError(Exception):
    """The object does not fit its schema's list keys."""


# ---------------------------------------------------------------- schema shapes


@dataclass(frozen=True)
class _Shape:
    kind: str  # "struct", "map", "list" or "leaf"
    atomic: bool = False
    fields: dict[str, Any] = dc_field(default_factory=dict)
    elem: dict[str, Any] | None = None
    list_type: str = "atomic"
    keys: tuple[str, ...] = ()
    key_defaults: dict[str, Any] = dc_field(default_factory=dict)
    #: keys an item may leave out (neither required nor defaulted: a ResourceClaim's status.devices[].shareID),
    #: whose items are keyed by the others, as the library's optional map keys
    optional_keys: frozenset[str] = frozenset()
    #: a struct's omitempty value fields (value_fields.py), whose zeros an Update's comparison leaves out
    omit: tuple[str, ...] = ()
    #: its value fields tagged without omitempty, whose zeros the empty struct a create is compared with holds
    kept: tuple[str, ...] = ()
    #: its optional fields that are structs held by value, which that empty struct holds at their zero
    structs: frozenset[str] = frozenset()


_LEAF = _Shape("leaf")


def _ext(raw: dict[str, Any], resolved: dict[str, Any], name: str) -> Any:
    return raw.get(name) or resolved.get(name)


def _list_shape(raw: dict[str, Any], resolved: dict[str, Any]) -> _Shape:
    list_type, keys, strategy, merge_key = sch.list_semantics(raw)
    items = resolved.get("items")
    if list_type is None and strategy and "merge" in strategy.split(","):
        list_type, keys = ("map", [merge_key]) if merge_key else ("set", [])
    if list_type not in ("map", "set"):
        return _Shape("list", atomic=True)
    ref = (items or {}).get("$ref", "")
    defaults = _KEY_DEFAULTS.get(ref[len(sch.REF_PREFIX) :])
    item = sch.resolve(items)
    if defaults is None:  # a CRD's schema keeps its defaults, as the library's schema does
        props = item.get("properties") or {}
        defaults = {k: props[k]["default"] for k in keys if "default" in (props.get(k) or {})}
    required = item.get("required") or ()
    return _Shape(
        "list", elem=items, list_type=list_type, keys=tuple(keys), key_defaults=defaults,
        optional_keys=frozenset(k for k in keys if k not in required and k not in defaults),
    )


_DEDUCED_MAP = _Shape("map")
_ATOMIC_LIST = _Shape("list", atomic=True)
_DEDUCED = {"dict": _DEDUCED_MAP, "list": _ATOMIC_LIST, "none": _LEAF, "other": _LEAF}
_VALUE_CLASS = {dict: "dict", list: "list", type(None): "none"}

# Compiled shapes by schema node identity; each entry keeps its node alive so
# the id cannot be reused while cached.
_COMPILED: dict[int, tuple[dict[str, Any], dict[Any, _Shape]]] = {}
_COMPILED_LIMIT = 20000


def _value_class(v: Any) -> str:
    cls = _VALUE_CLASS.get(type(v))
    if cls is not None:
        return cls
    if v is MISSING:
        return "none"
    if isinstance(v, dict):
        return "dict"
    return "list" if isinstance(v, list) else "other"


def _compile(raw: dict[str, Any]) -> dict[str, _Shape]:
    """The shape of a schema node for each class of value, worked out once:
    values that contradict the schema are leaves."""
    r = sch.resolve(raw)
    kinds = sch.types(r)
    if "properties" in r or sch.additional(r) is not None or "object" in kinds:
        container = _Shape(
            "struct" if "properties" in r else "map",
            atomic=_ext(raw, r, "x-kubernetes-map-type") == "atomic",
            fields=r.get("properties") or {},
            elem=sch.additional(r),
            omit=omitted(r) if "properties" in r else (),
            kept=kept(r) if "properties" in r else (),
            structs=structs(r) if "properties" in r else frozenset(),
        )
        return {"dict": container, "none": container, "list": _LEAF, "other": _LEAF}
    if "items" in r or "array" in kinds:
        container = _list_shape(raw, r)
        return {"list": container, "none": container, "dict": _LEAF, "other": _LEAF}
    if not kinds:
        return _DEDUCED
    return {"dict": _LEAF, "list": _LEAF, "none": _LEAF, "other": _LEAF}


def _shape(raw: dict[str, Any] | None, v: Any) -> _Shape:
    """How a value at a schema node is walked; values that contradict the
    schema (or have none) are walked as deduced. Equal shapes of one node
    are the same object."""
    if raw is None:
        return _DEDUCED[_value_class(v)]
    entry = _COMPILED.get(id(raw))
    if entry is None or entry[0] is not raw:
        if len(_COMPILED) >= _COMPILED_LIMIT:
            _COMPILED.clear()
        entry = _COMPILED[id(raw)] = (raw, _by_type(_compile(raw)))
    shape = entry[1].get(type(v))
    return shape if shape is not None else entry[1][_value_class(v)]


def _by_type(shapes: dict[str, _Shape]) -> dict[Any, _Shape]:
    """`shapes` also keyed by the exact types of JSON values, so the walks
    (a lookup per value) skip `_value_class`."""
    by_type: dict[Any, _Shape] = dict(shapes)
    for t, cls in _TYPE_CLASS:
        by_type[t] = shapes[cls]
    return by_type


_TYPE_CLASS = ((dict, "dict"), (list, "list"), (type(None), "none"), (str, "other"), (int, "other"),
               (float, "other"), (bool, "other"))


def _child(shape: _Shape, name: str) -> tuple[dict[str, Any] | None, bool]:
    """(schema, declared) of a map entry."""
    if shape.kind == "struct" and name in shape.fields:
        return shape.fields[name], True
    return shape.elem, False


def _item_element(shape: _Shape, item: Any) -> fp.PathElement:
    if shape.list_type == "set":
        return fp.value(item)
    if not isinstance(item, dict):
        raise _TypeError("associative list with keys has an element that is not a map")
    k = {}
    for name in shape.keys:
        if item.get(name) is not None:
            k[name] = item[name]
        elif name in shape.key_defaults:
            k[name] = shape.key_defaults[name]
    return fp.key(k)


def _refuse_duplicates(v: Any, raw: dict[str, Any] | None) -> None:
    """An apply configuration may not list a key of an associative list (or a set's value) twice, at any
    depth: structured-merge-diff refuses it when it types the patch, whether or not the live object has the
    list (merge meets only the lists both sides have; a live object's duplicates are tolerated)."""
    shape = _shape(raw, v)
    if shape.kind == "leaf" or shape.atomic or not v:
        return
    if shape.kind == "list":
        seen: set[fp.PathElement] = set()
        for item in v:
            pe = _item_element(shape, item)
            if pe in seen:
                raise _TypeError(f"duplicate entries for key {fp.element_string(pe)}")
            seen.add(pe)
            _refuse_duplicates(item, shape.elem)
        return
    for k, child in v.items():
        _refuse_duplicates(child, _child(shape, k)[0])


def _empty(v: Any) -> bool:
    return v is MISSING or v is None or v == {} or v == []


# ---------------------------------------------------------------- typed walks


def field_set(v: Any, raw: dict[str, Any] | None) -> set[Path]:
    """The fields a value sets (structured-merge-diff's ToFieldSet): leaves, list items, a map's
    entries and a struct's fields set to null or to an empty object (`resources: {}`)."""
    out: set[Path] = set()
    _to_set(v, raw, (), out)
    return out


def _to_set(v: Any, raw: dict[str, Any] | None, path: Path, out: set[Path]) -> None:
    shape = _shape(raw, v)
    if shape.kind == "leaf" or shape.atomic:
        out.add(path)
        return
    if not v:
        return
    if shape.kind == "list":
        for item in v:
            p = path + (_item_element(shape, item),)
            _to_set(item, shape.elem, p, out)
            out.add(p)
        return
    for k, child in v.items():
        child_raw, declared = _child(shape, k)
        p = path + (fp.field(k),)
        _to_set(child, child_raw, p, out)
        if not declared or child is None or child == {}:
            out.add(p)


@dataclass
class _Comparison:
    added: set[Path] = dc_field(default_factory=set)
    modified: set[Path] = dc_field(default_factory=set)
    removed: set[Path] = dc_field(default_factory=set)

    def exclude(self, prefixes: set[Path]) -> _Comparison:
        if not prefixes:
            return self
        return _Comparison(
            *(
                fp.without_prefixes(s, prefixes)
                for s in (self.added, self.modified, self.removed)
            )
        )


def _items(shape: _Shape, v: Any, decoded: bool = False) -> dict[fp.PathElement, Any]:
    """List items by path element; later duplicates are ignored. `decoded`: each item less its
    omitempty value fields' zeros (`compare`), so a key field's zero reads as unset."""
    out: dict[fp.PathElement, Any] = {}
    omit = _shape(shape.elem, _NO_FIELDS).omit if decoded else ()
    for item in v if isinstance(v, list) else ():
        if omit and type(item) is dict:
            item = _unset_zeros(item, omit)
        out.setdefault(_item_element(shape, item), item)
    return out


def compare(lhs: Any, rhs: Any, raw: dict[str, Any] | None, decoded: bool = False) -> _Comparison:
    """Fields added, modified and removed going from lhs to rhs. `decoded`: both read as an Update's
    decoded Go structs do, where an omitempty value field's zero is no field (value_fields.py)."""
    res = _Comparison()
    if lhs is MISSING:
        _one_sided(rhs, raw, (), res.added, decoded)
    elif rhs is MISSING:
        _one_sided(lhs, raw, (), res.removed, decoded)
    elif not (lhs is rhs or lhs == rhs):
        _compare(lhs, rhs, raw, (), res, decoded)
    return res


def _compare(
    lhs: Any, rhs: Any, raw: dict[str, Any] | None, path: Path, res: _Comparison, decoded: bool
) -> None:
    """Both sides are present and differ. Callers skip equal children without
    a call (most of an object is unchanged) and walk keys in the order of
    {**lhs, **rhs}, so the first malformed list found is the same. `decoded`
    leaves out zeros only in the structs this walk reaches: parts equal as
    they are need no look."""
    shape = _shape(raw, rhs)
    if (
        shape.kind == "leaf"
        or shape.atomic
        or _shape(raw, lhs) is not shape
        or not (lhs or rhs)  # both empty: of one container shape, each is a dict, a list or None
    ):
        if not (decoded and shape.atomic and _decoded(lhs, raw) == _decoded(rhs, raw)):
            res.modified.add(path)
        return
    if shape.kind == "list":
        left, right = _items(shape, lhs, decoded), _items(shape, rhs, decoded)
        elem = shape.elem
        for pe, lv in left.items():
            rv = right.get(pe, MISSING)
            if rv is MISSING:
                _one_sided(lv, elem, path + (pe,), res.removed, decoded)
            elif not (lv is rv or lv == rv):
                _compare(lv, rv, elem, path + (pe,), res, decoded)
        for pe, rv in right.items():
            if pe not in left:
                _one_sided(rv, elem, path + (pe,), res.added, decoded)
        return
    left = lhs if isinstance(lhs, dict) else {}
    right = rhs if isinstance(rhs, dict) else {}
    if decoded and shape.omit:
        left, right = _unset_zeros(left, shape.omit), _unset_zeros(right, shape.omit)
    struct = shape.kind == "struct"
    fields, elem = (shape.fields, shape.elem) if struct else (_NO_FIELDS, shape.elem)
    for k, lv in left.items():
        rv = right.get(k, MISSING)
        if lv is rv or lv == rv:
            continue
        if rv is MISSING:
            if not (lv is None and struct and _null_is_unset(fields.get(k))):
                _one_sided(lv, fields.get(k, elem), path + (("f", k),), res.removed, decoded)
        else:
            _compare(lv, rv, fields.get(k, elem), path + (("f", k),), res, decoded)
    for k, rv in right.items():
        if k not in left and not (rv is None and struct and _null_is_unset(fields.get(k))):
            _one_sided(rv, fields.get(k, elem), path + (("f", k),), res.added, decoded)


#: an absent field's stand-in when looking for a zero: not one
_PRESENT = repeat(True)


def _unset_zeros(obj: dict[str, Any], omit: tuple[str, ...]) -> dict[str, Any]:
    """`obj` (a struct with omitempty value fields `omit`) less those at their zero or null: itself
    where it holds none, as it mostly does (that look stays in C)."""
    if all(map(obj.get, omit, _PRESENT)):
        return obj
    return {k: v for k, v in obj.items() if not (k in omit and (v is None or (not v and type(v) in _SCALARS)))}


def _decoded(v: Any, raw: dict[str, Any] | None) -> Any:
    """`v` less the zeros `_unset_zeros` leaves out, at any depth: an atomic value is compared whole."""
    shape = _shape(raw, v)
    if shape.kind == "leaf" or not v:
        return v
    if shape.kind == "list":  # (an atomic list's shape names no items)
        elem = shape.elem if shape.elem is not None else sch.items(raw)
        return [_decoded(x, elem) for x in v]
    if shape.omit:
        v = _unset_zeros(v, shape.omit)
    fields = shape.fields if shape.kind == "struct" else _NO_FIELDS
    return {k: _decoded(x, fields.get(k, shape.elem)) for k, x in v.items()}


def _null_is_unset(raw: dict[str, Any] | None) -> bool:
    """Whether a struct field sent as null reads as one not sent: a typed object holds either as
    its zero value (an unset time is null both ways), and a custom resource's decoder drops the
    nulls of fields that are not nullable."""
    return raw is None or not sch.resolve(raw).get("nullable")


def _one_sided(v: Any, raw: dict[str, Any] | None, path: Path, out: set[Path], decoded: bool = False) -> None:
    """_compare against a missing side: `v` and everything in it is added
    (or removed)."""
    shape = _shape(raw, v)
    if shape.kind == "leaf" or shape.atomic or v is MISSING or not v:  # a container shape's value: dict, list or None
        out.add(path)
        return
    if shape.kind == "list":
        for pe, item in _items(shape, v, decoded).items():
            _one_sided(item, shape.elem, path + (pe,), out, decoded)
    else:
        fields, elem = (shape.fields, shape.elem) if shape.kind == "struct" else (_NO_FIELDS, shape.elem)
        if decoded and shape.omit:
            v = _unset_zeros(v, shape.omit)
        for k, child in v.items():
            _one_sided(child, fields.get(k, elem), path + (("f", k),), out, decoded)
    out.add(path)


def merge(lhs: Any, rhs: Any, raw: dict[str, Any] | None) -> Any:
    """Apply's merge: rhs wins on leaves, granular maps and lists merge by key."""
    if rhs is MISSING:
        return lhs
    if lhs is MISSING:
        return json_copy(rhs)
    shape = _shape(raw, rhs)
    if (
        shape.kind == "leaf"
        or shape.atomic
        or _shape(raw, lhs) is not shape
        or (_empty(lhs) and _empty(rhs))
    ):
        return json_copy(rhs)
    if shape.kind == "list":
        right: dict[fp.PathElement, Any] = {}
        for item in rhs or ():
            pe = _item_element(shape, item)
            if pe in right:
                raise _TypeError(f"duplicate entries for key {fp.element_string(pe)}")
            right[pe] = item
        return _merge_items(_items(shape, lhs), right, shape.elem)
    left, right = lhs or {}, rhs or {}
    return {
        k: merge(left.get(k, MISSING), right.get(k, MISSING), _child(shape, k)[0])
        for k in {**left, **right}
    }


def _merge_items(left: dict[fp.PathElement, Any], right: dict[fp.PathElement, Any],
                 elem: dict[str, Any] | None) -> list[Any]:
    """structured-merge-diff's list merge order: the applied (right) items in their order, each
    shared item merged with its live twin; a live item the applied list does not name stays
    where it was, before the next shared item the applied order reaches."""
    lkeys, rkeys = list(left), list(right)
    shared = iter([pe for pe in rkeys if pe in left])
    next_shared = next(shared, None)
    out: list[Any] = []
    done: set[fp.PathElement] = set()
    li = ri = 0
    while li < len(lkeys) or ri < len(rkeys):
        if li < len(lkeys) and ri < len(rkeys):
            pe = lkeys[li]
            if pe == rkeys[ri]:
                out.append(merge(left[pe], right[pe], elem))
                done.add(pe)
                li, ri = li + 1, ri + 1
                next_shared = next(shared, None)
                continue
            if pe in right and pe != next_shared:  # shared, but its turn comes later
                li += 1
                continue
        if li < len(lkeys):
            pe = lkeys[li]
            if pe not in right:
                out.append(left[pe])
                li += 1
                continue
            if pe in done:
                li += 1
                continue
        if ri < len(rkeys):
            pe = rkeys[ri]
            out.append(merge(left.get(pe, MISSING), right[pe], elem))
            done.add(pe)
            ri += 1
            if pe == next_shared:
                next_shared = next(shared, None)
    return out


def remove_items(v: Any, raw: dict[str, Any] | None, paths: set[Path]) -> Any:
    """`v` less the fields, map entries and list items named in `paths`;
    containers emptied by the removal disappear (MISSING)."""
    shape = _shape(raw, v)
    if shape.kind == "leaf" or shape.atomic or not v or not paths:
        return v
    if shape.kind == "list":
        out = []
        for item in v:
            pe = _item_element(shape, item)
            if (pe,) not in paths:
                item = _remove_below(item, shape.elem, paths, pe)
                if item is not MISSING:
                    out.append(item)
        return out or MISSING
    result = {}
    for k, child in v.items():
        pe = fp.field(k)
        if (pe,) not in paths:
            child = _remove_below(child, _child(shape, k)[0], paths, pe)
            if child is not MISSING:
                result[k] = child
    return result or MISSING


def _remove_below(
    v: Any, raw: dict[str, Any] | None, paths: set[Path], pe: fp.PathElement
) -> Any:
    sub = fp.with_prefix(paths, pe)
    return remove_items(v, raw, sub) if sub else v


#: set while a custom resource's apply is written: its merged object keeps the nulls the manager sent
#: (unstructured, as upstream's is), so defaulting fills those with defaults and validation sees the rest
APPLIED: ContextVar[bool] = ContextVar("custom_resource_applied", default=False)


def _drop_nulls(v: Any) -> Any:
    """Applied nulls mean "unset": typed objects cannot hold them."""
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def _schema_at(
    raw: dict[str, Any] | None, pe: fp.PathElement
) -> tuple[dict[str, Any] | None, bool]:
    """(schema below `pe`, whether `pe` is a declared struct field)."""
    if raw is None:
        return None, False
    r = sch.resolve(raw)
    if pe[0] == "f":
        props = r.get("properties") or {}
        if pe[1] in props:
            return props[pe[1]], True
        return sch.additional(r), False
    return r.get("items"), False


def _with_named_fields(paths: set[Path], raw: dict[str, Any] | None) -> set[Path]:
    """Also make struct fields that have owned children members (upstream's
    EnsureNamedFieldsAreMembers), so pruning can drop a whole struct."""
    out = set(paths)
    for path in paths:
        node = raw
        for i, pe in enumerate(path[:-1]):
            node, declared = _schema_at(node, pe)
            if declared:
                out.add(path[: i + 1])
    return out


def _zero_like(v: Any, raw: dict[str, Any] | None, decoded: bool = False) -> Any:
    """Stand-in for the Go zero value upstream compares a create against.

    The zero value holds non-pointer structs as `{}` and required (not
    omitempty) lists and maps as null, so creating them does not own the
    node itself. Non-empty structs reached through struct fields, and
    required lists and maps, approximate that. A field sent as null decodes
    to its zero value, which the zero object holds alike (an unset time is
    null in both, an unset pointer absent from both): nobody owns it.
    `decoded`: a struct holding only omitempty zeros is empty (`compare`),
    one tagged without omitempty holds its zero as the value sent (`kept`), and a
    struct held by value is there even empty (`structs`)."""
    shape = _shape(raw, v)
    out: dict[str, Any] = {}
    if shape.kind != "struct" or shape.atomic:
        return out
    required = set(sch.resolve(raw).get("required") or ())
    for k, child in v.items():
        if child is None:
            out[k] = None
            continue
        child_raw, declared = _child(shape, k)
        child_shape = _shape(child_raw, child) if declared else _LEAF
        kind = child_shape.kind
        if decoded and child_shape.omit:
            child = _unset_zeros(child, child_shape.omit)
        if kind == "struct" and (child or (decoded and k in shape.structs)):
            out[k] = _zero_like(child, child_raw, decoded)
        elif decoded and k in shape.structs and child == "0":  # a Quantity held by value, at its zero
            out[k] = child
        elif decoded and k in shape.kept and not child and type(child) in _SCALARS:
            out[k] = child
        elif kind in ("list", "map") and k in required:
            out[k] = None
    return out


# ---------------------------------------------------------------- managers


@dataclass
class _Manager:
    manager: str
    operation: str
    api_version: str
    subresource: str
    fields: set[Path] | frozenset[Path]  # frozen when decoded (shared), replaced rather than changed
    time: str | None = None
    #: (size, FieldsV1 object) of the canonical entry `fields` was read from: after decoding a
    #: manager's set only loses paths, so while its size is unchanged that object still encodes it
    #: (shared with the stored object, which nobody mutates)
    source: tuple[int, dict[str, Any]] | None = None

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return _ident(self.manager, self.operation, self.api_version, self.subresource)

    def describe(self) -> str:
        """How conflict messages name this manager."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def sort_key(self) -> tuple:
        return (
            self.operation,
            _unix(self.time),
            self.manager,
            self.api_version,
            self.subresource,
        )

    def unchanged(self) -> bool:
        return self.source is not None and len(self.fields) == self.source[0]

    def encode(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = self.source[1] if self.unchanged() else fp.to_fields_v1(self.fields)
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def _ident(
    manager: str, operation: str, api_version: str, subresource: str
) -> tuple[str, str, str, str]:
    """Appliers are one manager across versions; updaters are per version."""
    return (
        manager,
        operation,
        "" if operation == "Apply" else api_version,
        subresource,
    )


def _ident_text(m: _Manager) -> str:
    """Upstream's JSON manager identifier, which orders multi-manager messages."""
    d = {"manager": m.manager, "operation": m.operation}
    if m.operation != "Apply" and m.api_version:
        d["apiVersion"] = m.api_version
    if m.subresource:
        d["subresource"] = m.subresource
    return json.dumps(d, separators=(",", ":"))


@functools.lru_cache(maxsize=1024)
def _unix(t: str | None) -> int:
    """Seconds of a manager's timestamp (entries of one second share it, so it is parsed once)."""
    if not t:
        return 0
    return int(datetime.fromisoformat(t).timestamp())


def _decode(obj: dict[str, Any] | None) -> dict[tuple, _Manager]:
    """The managers of an object; raises MalformedFields on malformed entries."""
    out: dict[tuple, _Manager] = {}
    entries = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    for e in entries:
        if not isinstance(e, dict):
            raise fp.MalformedFields("managedFields entries must be objects")
        if e.get("fieldsType", "FieldsV1") != "FieldsV1" and e:
            raise fp.MalformedFields(f"unknown fieldsType {e.get('fieldsType')!r}")
        _unix(e.get("time"))
        fields_v1 = e.get("fieldsV1") or {}
        fields, canonical = fp.decode_fields_v1(fields_v1)
        m = _Manager(
            e.get("manager", ""),
            e.get("operation", ""),
            e.get("apiVersion", ""),
            e.get("subresource", ""),
            fields,
            e.get("time"),
            (len(fields), fields_v1) if canonical else None,
        )
        prev = out.get(m.ident)
        if prev:
            m.fields = m.fields | prev.fields
            m.source = None
        out[m.ident] = m
    return out


def managed_fields_problem(entries: Any) -> str | None:
    """Why managedFields entries are not valid as upstream's managedfields.ValidateManagedFields judges
    them, or None: their validation's errors (aggregated), else why DecodeManagedFields cannot read them
    (which, unlike `_decode`, also wants each entry's operation, apiVersion and fieldsType)."""
    if entries is None:
        return None
    if errs := [str(e) for e in managed_fields_errors(entries, "metadata.managedFields")]:
        return errs[0] if len(errs) == 1 else "[" + ", ".join(dict.fromkeys(errs)) + "]"
    problem = _entries_problem(entries)
    if problem is not None:
        return problem
    try:
        _decode({"metadata": {"managedFields": entries}})
    except ValueError as e:
        return f"error decoding set: {e}"
    return None


def _entries_problem(entries: Any) -> str | None:
    """`managed_fields_problem` short of decoding the entries' fields."""
    if type(entries) is not list:
        return "managedFields must be a list"
    for i, e in enumerate(entries):
        if type(e) is not dict:
            return f"managed fields entry {i} is not an object"
        if e.get("operation") not in ("Apply", "Update"):
            return "operation must be `Apply` or `Update`"
        if not e.get("apiVersion"):
            return "apiVersion must not be empty"
        if not e.get("fieldsType"):
            return f"missing fieldsType in managed fields entry {i}"
        if e["fieldsType"] != "FieldsV1":
            return f"invalid fieldsType {json.dumps(e['fieldsType'])} in managed fields entry {i}"
    return None


def _sent_managers(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[tuple, _Manager] | None:
    """decodeLiveOrNew's reading of the managedFields a main-resource write sent: none (a reset) for an
    empty list or a single empty entry; None, standing for the stored ones, where none were sent, where
    upstream's DecodeManagedFields refuses them (an operation, apiVersion or fieldsType it lacks, fields
    that do not decode) or where they name no manager."""
    md = new.get("metadata")
    sent = md.get("managedFields") if isinstance(md, dict) else None
    if sent is None:
        return None
    if type(sent) is list and (not sent or len(sent) == 1 and _zero_entry(sent[0])):
        return {}
    if _entries_problem(sent) is not None:
        return None
    return _decode_or_empty(_sender_of_entries(old, new)) or None  # (fields that do not decode: none)


def _zero_entry(e: Any) -> bool:
    """The entry is Go's zero ManagedFieldsEntry once decoded (null, or every field empty)."""
    return e is None or (isinstance(e, dict) and e.get("time") is None and e.get("fieldsV1") is None
                         and all(e.get(k) in (None, "") for k in ("manager", "operation", "apiVersion", "fieldsType",
                                                                   "subresource")))


def _decode_or_empty(obj: dict[str, Any] | None) -> dict[tuple, _Manager]:
    """Undecodable managedFields count as none, so a bad entry cannot wedge writes."""
    try:
        return _decode(obj)
    except ValueError:
        return {}


def _encode(obj: dict[str, Any], managers: dict[tuple, _Manager]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    live = sorted((m for m in managers.values() if m.fields), key=_Manager.sort_key)
    if live:
        meta["managedFields"] = [m.encode() for m in live]
    else:
        meta.pop("managedFields", None)
    return obj


def _less_managed_fields(md: dict[str, Any]) -> dict[str, Any]:
    """A copy of the metadata `md` without managedFields, in its order: copied in C and the one
    field dropped (a comprehension stepped through every field in Python, on every write)."""
    out = dict(md)
    out.pop("managedFields", None)
    return out


def _view_without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` less managedFields, sharing everything else with it: for reading
    only."""
    md = obj.get("metadata")
    if not isinstance(md, dict) or "managedFields" not in md:
        return obj
    return {**obj, "metadata": _less_managed_fields(md)}


def _own_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` less managedFields, with a metadata dict of its own (one copy, not a view and a copy
    of it) and everything else shared."""
    md = obj.get("metadata")
    if isinstance(md, dict):
        return {**obj, "metadata": _less_managed_fields(md)}
    return {**obj, "metadata": dict(md or {})}


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    return json_copy(_view_without_managed_fields(obj))


def _ignored(ignore_status: bool, subresource: str) -> frozenset[Path]:
    """Reset fields: a main-resource write does not own status, a status write does not own spec."""
    if not ignore_status:
        return _NOTHING
    return _SPEC if subresource == "status" else _STATUS


_NOTHING: frozenset[Path] = frozenset()
_SPEC = frozenset({fp.make_path("spec")})
_STATUS = frozenset({fp.make_path("status")})
#: the top-level fields of each reset-field set (`_outside`)
_TOPS = {_NOTHING: frozenset(), _SPEC: frozenset({"spec"}), _STATUS: frozenset({"status"})}


def _root_schema(raw: dict[str, Any] | None) -> dict[str, Any]:
    return raw if raw is not None else _UNTYPED_ROOT


def _reassign(
    live: Any,
    new: Any,
    raw: dict[str, Any],
    managers: dict[tuple, _Manager],
    self_id: tuple,
    force: bool,
    ignored: set[Path],
    api_version: str = "",
    convert: Convert | None = None,
    decoded: bool = False,
    forgiven: Callable[[], set[Path]] | None = None,
) -> _Comparison:
    """Take changed fields from other managers and drop removed ones (upstream's
    Updater.update); raises ApplyConflict when not forced. With `convert`, a manager
    recorded at another apiVersion than the write's (`api_version`) loses what changed
    as its own version shows the objects, and one whose version no longer shows the
    kind is dropped. `decoded`: `compare`'s. `forgiven`: the paths whose conflicts do not
    count (`_last_applied_fields`): when they are all the conflicts the write is forced,
    otherwise the others are the conflicts reported."""
    diff = compare(live, new, raw, decoded).exclude(ignored)
    own = (diff.added | diff.modified, diff.removed)
    views: dict[str, tuple[set[Path], set[Path]] | None] = {api_version: own}
    conflicts = {}
    for mid, m in managers.items():
        if mid != self_id:
            view = own if convert is None else views.get(m.api_version, MISSING)
            if view is MISSING:
                view = views[m.api_version] = _version_diff(live, new, m.api_version, convert, ignored, decoded)
            if view is None:
                continue
            taken = m.fields & view[0]
            if taken:
                conflicts[mid] = taken
    if conflicts and not force and forgiven is not None:
        allowed = forgiven()
        left = {mid: paths - allowed for mid, paths in conflicts.items() if paths - allowed}
        if left:
            conflicts = left
        else:
            force = True
    if conflicts and not force:
        raise _conflict_error(
            [(managers[mid], paths) for mid, paths in conflicts.items()]
        )
    for mid, m in managers.items():
        if mid != self_id:
            view = own if convert is None else views[m.api_version]
            if view is None:
                m.fields = frozenset()
                continue
            # a decoded set is shared (frozenset): replaced only when it loses paths
            removed = view[1]
            gone = conflicts[mid] | removed if mid in conflicts else removed
            if gone and not m.fields.isdisjoint(gone):
                m.fields = m.fields - gone
    for mid in [mid for mid, m in managers.items() if not m.fields]:
        del managers[mid]
    return diff


#: how a field manager sees a kind whose versions differ in shape: `convert(obj, api_version, at)` is
#: (that version's schema, `obj` as that version shows it), `obj` being at version `at` (an
#: apiVersion; the write's version when left out); None where the kind is not served at
#: `api_version` (upstream's IsMissingVersionError)
Convert = Callable[..., "tuple[dict[str, Any] | None, dict[str, Any]] | None"]


def _version_diff(
    live: Any, new: Any, api_version: str, convert: Convert, ignored: set[Path], decoded: bool = False
) -> tuple[set[Path], set[Path]] | None:
    """(changed, removed) going from `live` to `new` as `api_version` shows them, or None."""
    before, after = convert(live, api_version), convert(new, api_version)
    if before is None or after is None:
        return None
    diff = compare(before[1], after[1], _root_schema(before[0]), decoded).exclude(ignored)
    return diff.added | diff.modified, diff.removed


def _conflict_error(found: list[tuple[_Manager, set[Path]]]) -> ApplyConflict:
    found.sort(key=lambda mp: _ident_text(mp[0]))
    pairs = [
        (m.describe(), fp.path_string(p))
        for m, paths in found
        for p in fp.iterate(paths)
    ]
    if len(pairs) == 1:
        who, path = pairs[0]
        return ApplyConflict(
            pairs, f"Apply failed with 1 conflict: conflict with {who}: {path}"
        )
    lines = []
    for m, paths in found:
        lines.append(f"conflicts with {m.describe()}:")
        lines += [f"- {fp.path_string(p)}" for p in fp.iterate(paths)]
    return ApplyConflict(
        pairs, f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    )


def _keep_times_on_noop(
    live: dict[str, Any] | None, result: dict[str, Any]
) -> dict[str, Any]:
    """A write that changes nothing keeps the old timestamps, so it stays a no-op
    (upstream's IgnoreManagedFieldsTimestampsTransformer)."""
    if live is None or _view_without_managed_fields(live) != _view_without_managed_fields(result):
        return result
    old = (live.get("metadata") or {}).get("managedFields") or []
    new = (result.get("metadata") or {}).get("managedFields") or []

    def untimed(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "time"} for e in entries]

    if untimed(old) == untimed(new) and old:
        result["metadata"]["managedFields"] = json_copy(old)
    return result


# ---------------------------------------------------------------- entry points


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    schema: dict[str, Any] | None,
    now: str,
    api_version: str,
    subresource: str = "",
    ignore_status: bool = False,
    convert: Convert | None = None,
    keep_nulls: bool = False,
) -> dict[str, Any]:
    """Server-side apply of `applied` (the manager's full intent) onto `live`
    (None to create). Returns the new object with updated managedFields;
    `convert` shows the objects to managers of other versions (`_reassign`);
    `keep_nulls`: an unstructured kind's, whose object holds the nulls applied.

    Raises ApplyConflict (409) when fields owned by others would change and
    `force` is false, and PatchError (400) for an unusable configuration."""
    if ((applied.get("metadata") or {}).get("managedFields")) is not None:
        raise PatchError("metadata.managedFields must be nil", 400)
    if applied.get("apiVersion") != api_version:
        raise PatchError(
            "Incorrect version specified in apply patch. "
            f"Specified patch version: {applied.get('apiVersion')}, expected: {api_version}",
            400,
        )
    raw = _root_schema(schema)
    ignored = _ignored(ignore_status, subresource)
    managers = _decode_or_empty(live)
    current = _without_managed_fields(live) if live is not None else {}
    self_id = _ident(manager, "Apply", api_version, subresource)
    try:
        _refuse_duplicates(applied, raw)
        merged = merge(current, applied, raw)
        previous = managers.get(self_id)
        mine = fp.without_prefixes(field_set(applied, raw), ignored) - _STRIPPED
        managers[self_id] = _Manager(
            manager, "Apply", api_version, subresource, mine, now
        )
        if previous and previous.fields:
            if convert is not None and previous.api_version != api_version:
                merged = _prune_across(merged, raw, managers, previous, api_version, convert)
            else:
                merged = _prune(merged, raw, managers, previous.fields)
        _reassign(
            current if live is not None else _zero_like(merged, raw),
            merged,
            raw,
            managers,
            self_id,
            force,
            ignored,
            api_version,
            convert,
            forgiven=(lambda: _last_applied_fields(current, raw, api_version)) if manager == KUBECTL else None,
        )
    except _TypeError as e:
        raise PatchError(f"failed to create typed patch object: {e}", 400) from e
    if manager == KUBECTL:
        merged = _sync_last_applied(merged, applied)
    result = _encode(merged if keep_nulls else _drop_nulls(merged), managers)
    return _keep_times_on_noop(live, result)


# ---------------------------------------------------------------- from client-side apply

#: the only applier whose conflicts the last-applied annotation settles, and whose applies keep it
#: current (upstream's lastAppliedManager and lastAppliedUpdater; another manager opts out)
KUBECTL = "kubectl"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: ValidateAnnotationsSize's limit: a last-applied that would exceed it is dropped instead
_ANNOTATIONS_LIMIT = 256 * 1024


def _last_applied(obj: dict[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations")
    value = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) and value else None


def _last_applied_fields(live: dict[str, Any], raw: dict[str, Any], api_version: str) -> set[Path]:
    """The fields `kubectl apply` (client-side) last applied that the live object still holds
    as applied: `kubectl apply --server-side` taking them over from their client-side owner is no
    conflict. Nothing where the annotation is missing, unreadable or of another version."""
    text = _last_applied(live)
    try:
        last = json.loads(text) if text else None
    except ValueError:
        return set()
    if not isinstance(last, dict) or last.get("apiVersion") != api_version:
        return set()
    try:
        diff = compare(last, live, raw)
        return field_set(last, raw) - diff.modified - diff.added - diff.removed
    except _TypeError:
        return set()


def _sync_last_applied(merged: dict[str, Any], applied: dict[str, Any]) -> dict[str, Any]:
    """An object that carries a last-applied annotation gets the configuration `kubectl` just
    applied there (less that annotation), as Go encodes it (sorted keys, HTML escaped, a final
    newline), so a later client-side apply diffs against it; dropped where the annotations
    would outgrow their limit."""
    if _last_applied(merged) is None:
        return merged
    config = dict(applied)
    meta = config.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
        meta = config["metadata"] = dict(meta)
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED}
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    annotations = {**merged["metadata"]["annotations"], LAST_APPLIED: text + "\n"}
    if sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items() if isinstance(v, str)) > _ANNOTATIONS_LIMIT:
        del annotations[LAST_APPLIED]
    return {**merged, "metadata": {**merged["metadata"], "annotations": annotations}}


def _prune(
    merged: Any, raw: dict[str, Any], managers: dict[tuple, _Manager], last: set[Path]
) -> Any:
    """Remove what the applier set last time, no longer sets, and nobody
    else owns (upstream's prune with its add-back passes)."""
    last_n = _with_named_fields(last, raw)
    # the stripped paths (metadata.name, namespace, uid, ...) belong to no manager but are never pruned:
    # removing a manager's only metadata field (its one label) must not take the object's name with it
    owned = _with_named_fields(set().union(*(m.fields for m in managers.values())) | _STRIPPED, raw)
    merged_n = _with_named_fields(field_set(merged, raw), raw)

    def fields_of(v: Any) -> set[Path]:
        return _with_named_fields(field_set(v if v is not MISSING else {}, raw), raw)

    pruned = remove_items(merged, raw, last_n)
    pruned = remove_items(merged, raw, merged_n - (fields_of(pruned) | owned))
    result = remove_items(merged, raw, (merged_n - fields_of(pruned)) & last_n)
    return result if result is not MISSING else {}


def _prune_across(
    merged: Any, raw: dict[str, Any], managers: dict[tuple, _Manager], last: _Manager, api_version: str,
    convert: Convert,
) -> Any:
    """`_prune` of an applier whose last apply was at another version: what it set then and no
    longer sets goes as that version shows the object, what others own comes back as each
    manager's version shows it, and the result is shown at the write's version again (upstream's
    Updater.prune converting between its passes)."""
    schemas = {api_version: raw}

    def shown(obj: Any, at: str, version: str) -> Any:
        if at == version:
            return obj
        out = convert(obj if obj is not MISSING else {}, version, at)
        if out is None:
            raise LookupError(version)
        schemas[version] = _root_schema(out[0])
        return out[1]

    def named(v: Any, version: str) -> set[Path]:
        return _with_named_fields(field_set(v if v is not MISSING else {}, schemas[version]), schemas[version])

    lv = last.api_version
    try:
        merged_l = shown(merged, api_version, lv)
    except LookupError:  # that version no longer shows the kind: nothing to prune
        return merged
    last_n = _with_named_fields(set(last.fields), schemas[lv])
    pruned, at = remove_items(merged_l, schemas[lv], last_n), lv
    for version in dict.fromkeys(m.api_version for m in managers.values()):
        try:
            merged_v, pruned_v = shown(merged, api_version, version), shown(pruned, at, version)
        except LookupError:
            continue
        owned = set().union(*(m.fields for m in managers.values() if m.api_version == version)) | _STRIPPED
        kept = named(pruned_v, version) | _with_named_fields(owned, schemas[version])
        pruned, at = remove_items(merged_v, schemas[version], named(merged_v, version) - kept), version
    # the passes only remove: a value that reads otherwise once shown at `lv` again is the
    # conversion's own (a default it fills in), so that field was not kept
    back = shown(pruned, at, lv)
    kept = named(back, lv) - compare(merged_l, back if back is not MISSING else {}, schemas[lv]).modified
    dangling = (named(merged_l, lv) - kept) & last_n
    result = shown(remove_items(merged_l, schemas[lv], dangling), lv, api_version)
    return result if result is not MISSING else {}


def update_managed_fields(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    operation: str = "Update",
    schema: dict[str, Any] | None = None,
    now: str = "",
    api_version: str = "",
    subresource: str = "",
    ignore_status: bool = False,
    convert: Convert | None = None,
    decoded: bool = False,
    create_key: tuple | None = None,
) -> dict[str, Any]:
    """Record a create/update/patch in `new`'s managedFields: the fields this
    write changed go to `manager` and are taken from everyone else (each
    seeing the change in its own version, through `convert`). `decoded`: the
    objects read as upstream's decoded structs (`compare`), as an Update's do.

    Managed fields sent with a main-resource write replace the stored ones
    (an empty list or a single empty entry clears them); ones upstream's
    decoder refuses are ignored, as if none were sent.
    An object that does not fit its schema loses its managedFields, as
    upstream's UpdateNoErrors does. The result shares nested values with
    `new` (it is read, not mutated); creates of one shape reuse the field
    set computed for the first of them (`create_key`: the key of this create
    that `create_managed_fields` looked up already, or `_UNKEYED` where it
    skipped it)."""
    raw = _root_schema(schema)
    ignored = _ignored(ignore_status, subresource)
    sent = None if subresource else _sent_managers(old, new)
    managers = sent or {}
    if not managers and old is None:
        base = (id(raw), manager, operation, api_version, subresource, ignore_status, decoded)
        plain = None if create_key is _UNKEYED else create_key or (*base, _create_key(new))
        entries = _CREATES.get(plain, MISSING) if plain is not None else MISSING
        if entries is MISSING:
            if len(_CREATES) >= _CREATES_LIMIT:
                _CREATES.clear()
            typed = None
            misses = _TYPED_MISSES.get(base, 0)
            if misses < _TYPED_TRIES or misses % _TYPED_TRIES == 0:
                typed = (*base, b"typed:" + _typed_create_shape(new, raw))
                entries = _CREATES.get(typed, MISSING)
            if len(_TYPED_MISSES) >= _CREATES_LIMIT:
                _TYPED_MISSES.clear()
            _TYPED_MISSES[base] = misses + 1 if entries is MISSING else 0
            if entries is MISSING:
                tracked = _track(None, _without_managed_fields(new), raw, managers, manager, operation, now,
                                 api_version, subresource, ignored, convert, decoded)
                entries = (tracked.get("metadata") or {}).get("managedFields")
                if plain is not None:
                    _CREATES[plain] = entries
                if typed is not None:
                    _CREATES[typed] = entries
                return tracked
            if plain is not None:
                _CREATES[plain] = entries
        result = _own_metadata(new)
        if entries is not None:
            result["metadata"]["managedFields"] = _stamped(entries, now)
        return result
    result = _own_metadata(new)
    if ignored is _SPEC:
        return _status_write(old, result, raw, manager, operation, now, api_version, subresource, convert, decoded)
    if sent is None:
        managers = _decode_or_empty(old)
    return _track(old, result, raw, managers, manager, operation, now, api_version, subresource, ignored, convert,
                  decoded)


#: the Scale's replicas, which a write through /scale owns as its parent's replicas path
_SCALE_REPLICAS = fp.make_path("spec", "replicas")


def scale_write(
    parent: dict[str, Any], replicas_at: Callable[[str], Path | None], parent_version: str, old_scale: dict[str, Any],
    sent: dict[str, Any], manager: str, now: str, applied: bool = False, force: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """A write through /scale (upstream's ScaleHandler around the Scale's field manager): the Scale
    it leaves, and the parent's managedFields. The managers of the parent's replicas own the
    Scale's spec.replicas, each manager's replicas path read at its own apiVersion (`replicas_at`:
    a custom resource's versions may each name another; None, a version without one, owns
    none); the write is tracked on the Scale (`sent` is the new Scale), or applied
    (`sent` is the configuration; raises ApplyConflict; an update's Scale is decoded, `compare`, so
    its replicas at 0 is no field); then a parent manager loses `replicas`
    where it lost it on the Scale, and each new owner gets an entry at `parent_version` timed as
    its identity was on the parent (an Update's is looked up under the Scale's apiVersion, so it
    has none)."""
    raw = _root_schema(sch.kind_schema("autoscaling", "v1", "Scale"))
    parents = _decode_or_empty(parent)
    paths = {m.api_version: replicas_at(m.api_version) for m in parents.values()}
    owners = {mid: _Manager(m.manager, m.operation, m.api_version, m.subresource, frozenset({_SCALE_REPLICAS}),
                            m.time) for mid, m in parents.items() if paths[m.api_version] in m.fields}
    live = _encode(_without_managed_fields(old_scale), owners)
    if applied:
        result = apply(live, sent, manager, force, raw, now, "autoscaling/v1", "scale", ignore_status=True)
    else:
        result = _track(live, _own_metadata(sent), raw, _decode_or_empty(live), manager, "Update", now,
                        "autoscaling/v1", "scale", _STATUS, decoded=True)
    scaled = _decode_or_empty(result)
    kept: dict[tuple, _Manager] = {}
    for mid, m in parents.items():
        if (path := paths[m.api_version]) in m.fields and mid not in scaled:  # taken through the Scale
            m.fields = m.fields - {path}
        kept[mid] = m
    replicas = replicas_at(parent_version)
    for mid, m in scaled.items():
        if mid not in parents and _SCALE_REPLICAS in m.fields and replicas is not None:
            kept[mid] = _Manager(m.manager, m.operation, parent_version, m.subresource, frozenset({replicas}))
    return result, _encode({}, kept)["metadata"].get("managedFields")


def create_managed_fields(
    new: dict[str, Any],
    manager: str,
    schema: dict[str, Any] | None = None,
    now: str = "",
    api_version: str = "",
    ignore_status: bool = False,
    convert: Convert | None = None,
    decoded: bool = False,
    known: tuple[dict, tuple | None] | None = None,
) -> list[dict[str, Any]] | None:
    """The managedFields `update_managed_fields` records for a create of `new` (an Update of the
    main resource, no old object), or None for none; a create of a shape seen before takes them
    from memory without copying `new` (every create's object was copied for them, then dropped).
    `known`: a map of `new`'s top level and its shape.signature, taken already."""
    raw = _root_schema(schema)
    key: Any = None
    if not _sent_managers(None, new):
        base = (id(raw), manager, "Update", api_version, "", ignore_status, decoded)
        misses = _PLAIN_MISSES.get(base, 0)
        if known is None and misses >= _PLAIN_TRIES and misses % _PLAIN_TRIES:
            _PLAIN_MISSES[base] = misses + 1
            key = _UNKEYED
        else:
            key = (*base, _create_key(new, known))
            entries = _CREATES.get(key, MISSING)
            if entries is not MISSING:
                if misses:
                    _PLAIN_MISSES[base] = 0
                return _stamped(entries, now) if entries is not None else None
            if len(_PLAIN_MISSES) >= _CREATES_LIMIT:
                _PLAIN_MISSES.clear()
            _PLAIN_MISSES[base] = misses + 1
    tracked = update_managed_fields(None, new, manager, "Update", schema, now, api_version,
                                    ignore_status=ignore_status, convert=convert, decoded=decoded, create_key=key)
    return (tracked.get("metadata") or {}).get("managedFields")


def _stamped(entries: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """Remembered entries of a create, each a dict of its own, at the write's time."""
    return [{**e, "time": now} if "time" in e else dict(e) for e in entries]


def _sender_of_entries(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """The object whose managedFields stand for the ones a main-resource write sent: the stored
    object when they are equal, as when a client updates what it read. Equal entries decode
    alike, and the stored ones' decodings are remembered by identity (a request's copies are
    parsed again: ~0.7% of the openb simulation, the scheduler's claim updates)."""
    sent = (new.get("metadata") or {}).get("managedFields")
    if sent and old is not None and sent == (old.get("metadata") or {}).get("managedFields"):
        return old
    return new


def _status_write(
    old: dict[str, Any],
    result: dict[str, Any],
    raw: dict[str, Any],
    manager: str,
    operation: str,
    now: str,
    api_version: str,
    subresource: str,
    convert: Convert | None = None,
    decoded: bool = False,
) -> dict[str, Any]:
    """`_track` of a status write, remembered: its managedFields are a function of the old
    entries, the status before and after and the write's manager and time, once the rest
    (metadata, apiVersion, kind) is unchanged. A scheduler marking many pods unschedulable in one
    second writes the same condition over the same entries (each pod's create shares its
    FieldsV1 objects), and tracking it was ~20% of that patch. A writer whose statuses keep
    missing (a kubelet's carry each pod's IP) stops building the key as creates do. The writes
    that hit share one list of entries (stored objects are never changed in place), whose JSON
    is remembered for their stored encoding (machinery/encoded.py)."""
    base = (id(raw), manager, operation, api_version, subresource, decoded)
    misses = _STATUS_MISSES.get(base, 0)
    key = None
    if misses < _TYPED_TRIES or misses % _TYPED_TRIES == 0:
        key = _status_key(old, result, base, now)
    if key is not None:
        hit = _STATUS_WRITES.get(key)
        if hit is not None:
            _STATUS_MISSES[base] = 0
            if hit[1] is not None:
                result["metadata"]["managedFields"] = hit[1]
                json_memo.fragment(hit[1])  # its JSON remembered again if it was let go
            return result
    if len(_STATUS_MISSES) >= _CREATES_LIMIT:
        _STATUS_MISSES.clear()
    _STATUS_MISSES[base] = misses + 1
    tracked = _track(old, result, raw, _decode_or_empty(old), manager, operation, now, api_version, subresource, _SPEC,
                     convert, decoded)
    if key is not None:
        if len(_STATUS_WRITES) >= _CREATES_LIMIT:
            _STATUS_WRITES.clear()
        entries = tracked["metadata"].get("managedFields")
        # the old entries are held so that the ids of their FieldsV1 objects in the key stay theirs
        shared = [dict(e) for e in entries] if entries else None
        _STATUS_WRITES[key] = (old["metadata"].get("managedFields"), shared)
        if shared is not None:
            json_memo.fragment(shared)
    return tracked


def _status_key(old: dict[str, Any], result: dict[str, Any], base: tuple, now: str) -> tuple | None:
    """What a status write's managedFields depend on, or None when more than the status changed
    or something cannot be a key. Old entries are keyed by what `_decode` reads of them, their
    FieldsV1 by identity (stored objects share them and never change them)."""
    om, rm = old.get("metadata"), result.get("metadata")
    if type(om) is not dict or type(rm) is not dict or "managedFields" in rm:
        return None
    # the same metadata less managedFields: sizes, then every item of one found in the other (in C)
    if len(rm) != len(om) - ("managedFields" in om) or not rm.items() <= om.items():
        return None
    same = 0  # the other top-level fields (apiVersion, kind), each equal on both sides and nothing more
    for k, v in old.items():
        if k not in _STATUS_WRITE_FREE:
            if not (k in result and (result[k] is v or result[k] == v)):
                return None
            same += 1
    if same != len(result) - len(result.keys() & _STATUS_WRITE_FREE):
        return None
    entries = om.get("managedFields") or ()
    if type(entries) is not list and entries != ():
        return None
    held = []
    for e in entries:
        if type(e) is not dict:
            return None
        g = e.get
        held.append((g("manager"), g("operation"), g("apiVersion"), g("subresource"), g("time"), g("fieldsType"),
                     len(e), id(g("fieldsV1"))))
    try:  # the JSON of a remembered status patch's status is known (machinery/encoded.py)
        before = (json_memo.known(old["status"]) or orjson.dumps(old["status"])) if "status" in old else None
        after = (json_memo.known(result["status"]) or orjson.dumps(result["status"])) if "status" in result else None
    except TypeError:
        return None
    return (*base, now, tuple(held), before, after)


#: managedFields of status writes by `_status_key`: (the old entries, held; the new ones or None)
_STATUS_WRITES: dict[tuple, tuple[Any, list[dict[str, Any]] | None]] = {}
#: status-write keys that missed in a row, by writer (as `_TYPED_MISSES`)
_STATUS_MISSES: dict[tuple, int] = {}
#: the top-level fields a status write's key leaves to the status comparison (spec is not tracked)
_STATUS_WRITE_FREE = frozenset({"metadata", "status", "spec"})


#: managedFields of a create, by the create's shape (`_create_key`, and on a miss the
#: schema-aware `_typed_create_shape`); the creates of one shape share the entries' FieldsV1 objects, as
#: stored objects are never changed in place
_CREATES: dict[tuple, list[dict[str, Any]] | None] = {}
_CREATES_LIMIT = 4096
#: schema-aware lookups that missed in a row, by writer: creates whose list-map keys are unique
#: (claims keyed by their owner pod's uid) stop paying for that key after this many, trying it
#: again only once every as many creates
_TYPED_MISSES: dict[tuple, int] = {}
_TYPED_TRIES = 32
#: `_create_key` lookups that missed in a row, by writer: creates that share a shape but never a
#: signature (pods of many templates, each spec new: ~83 k instructions a pod) go straight to
#: the schema-aware key after this many, trying the signature again once every as many creates
_PLAIN_MISSES: dict[tuple, int] = {}
_PLAIN_TRIES = 32
#: `create_key` of a create whose `_create_key` was not taken
_UNKEYED = ("unkeyed",)


def _create_key(obj: dict[str, Any], known: tuple[dict, tuple | None] | None = None) -> tuple | bytes:
    """What a create's managedFields are remembered by: the object's `shape.signature` (finer than
    `_create_shape`, which it stands for, and built mostly in C), or `_create_shape` where the
    object holds something that is not JSON."""
    key = shape.signature(obj, known)
    return key if key is not None else _create_shape(obj)


def _create_shape(obj: dict[str, Any]) -> bytes:
    """A cheap key of what a create's field set depends on: map keys, list
    contents and where containers and nulls are. Other scalars only show by
    their presence and whether they are zeros (an Update's field set leaves an
    omitempty value field's out), so their values are blanked: pods of one
    ReplicaSet, a scheduler's events and a node's certificate requests share
    one shape."""
    md = obj.get("metadata")
    if isinstance(md, dict) and "managedFields" in md:
        obj = {**obj, "metadata": _less_managed_fields(md)}
    return orjson.dumps(_blank_scalars(obj), option=orjson.OPT_SORT_KEYS)


def _typed_create_shape(obj: dict[str, Any], raw: dict[str, Any]) -> bytes:
    """`_create_shape` walked against the schema, so list contents count only
    where they name fields (list-map item keys, set values): an atomic list
    shows only by being empty or not, other scalars in list items not at all.
    Pods that differ only in images, env values or args share it."""
    md = obj.get("metadata")
    if isinstance(md, dict) and "managedFields" in md:
        obj = {**obj, "metadata": _less_managed_fields(md)}
    return orjson.dumps(_blank(obj, raw), option=orjson.OPT_SORT_KEYS)


def _blank(v: Any, raw: dict[str, Any] | None) -> Any:
    """`v` blanked for `_typed_create_shape` (a container; scalars are blanked in place, to whether they
    are zeros: an Update's field set leaves some of those out). Plain loops: a comprehension or a
    generator is a frame of its own, and they were a quarter of a pod's walk."""
    shape = _shape(raw, v)
    if shape.kind == "leaf":
        return _blank_scalars(v)
    if not v:
        return v
    if shape.kind == "list":
        if shape.atomic:
            return [0]
        if shape.list_type == "set":
            return v
        keys, elem = shape.keys, shape.elem
        out = []
        for item in v:
            if type(item) is dict:
                blanked = _blank(item, elem)
                if type(blanked) is dict:
                    for k in keys:
                        if k in item:
                            blanked[k] = item[k]
                item = blanked
            out.append(item)
        return out
    if shape.atomic:
        return _blank_scalars(v)
    fields = shape.fields if shape.kind == "struct" else _NO_FIELDS
    elem = shape.elem
    blanked_map: dict[str, Any] = {}
    for k, x in v.items():
        blanked_map[k] = _blank(x, fields.get(k, elem)) if isinstance(x, _CONTAINERS) else None if x is None else bool(x)
    return blanked_map


_NO_FIELDS: dict[str, Any] = {}
_CONTAINERS = (dict, list)
_SCALARS = frozenset({str, int, float, bool})


def _blank_scalars(v: Any) -> Any:
    if isinstance(v, dict):
        # scalars inline, told by their exact type (one test for most values; a value of any other
        # type is kept as it is, which can only make the key finer)
        return {k: bool(x) if type(x) in _SCALARS else _blank_scalars(x) if isinstance(x, dict) else x
                for k, x in v.items()}
    if isinstance(v, list) or v is None:
        return v
    return bool(v)


def _outside(obj: Any, ignored: set[Path]) -> Any:
    """`obj` less the top-level fields a write does not own (status for a
    main-resource write, spec for a status write), so diffs skip them."""
    tops = _TOPS.get(ignored) if type(ignored) is frozenset else None
    if tops is None:
        tops = {p[0][1] for p in ignored if len(p) == 1}
    if not tops or not isinstance(obj, dict) or not tops & obj.keys():
        return obj
    return {k: v for k, v in obj.items() if k not in tops}


def _track(
    old: dict[str, Any] | None,
    result: dict[str, Any],
    raw: dict[str, Any],
    managers: dict[tuple, _Manager],
    manager: str,
    operation: str,
    now: str,
    api_version: str,
    subresource: str,
    ignored: set[Path],
    convert: Convert | None = None,
    decoded: bool = False,
) -> dict[str, Any]:
    """Record an Update (or a write through /scale) of `old` (None: a create) to `result` for
    `manager`; `decoded`: `compare`'s."""
    current = (
        _view_without_managed_fields(old) if old is not None else _zero_like(result, raw, decoded)
    )
    marker = ("", "", "", "current-operation")
    try:
        # `_ignored` names top-level fields only, which `_outside` already
        # took from both sides: the diff holds nothing left to exclude
        diff = _reassign(_outside(current, ignored), _outside(result, ignored), raw, managers, marker, True, set(),
                         api_version, convert, decoded)
    except _TypeError:
        return result
    mine = (diff.added | diff.modified) - diff.removed - _STRIPPED
    if mine:
        mid = _ident(manager, operation, api_version, subresource)
        previous = managers.get(mid)
        owned = mine | (previous.fields if previous else set())
        source = previous.source if previous and previous.unchanged() and len(owned) == len(previous.fields) else None
        managers[mid] = _Manager(
            manager, operation, api_version, subresource, owned, now, source
        )
    return _encode(result, managers)
