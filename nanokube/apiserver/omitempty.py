"""Which fields of a built-in type decode as unset when sent as their zero or empty (json `omitempty`).

kube-apiserver decodes a body into Go structs and encodes them back: a value scalar tagged
`omitempty` holding its zero (`""`, `0`, `false`) is the same as one never sent, so a client's
`paused: false` is neither stored nor served, and so is an omitempty list, map or []byte sent
empty (`args: []`, `labels: {}`, `caBundle: ""`). A pointer keeps its zero (`replicas: 0`), and
so does a field without `omitempty` (a PodDisruptionBudget's `disruptionsAllowed: 0`, a
condition's `status`); a list or map without it is encoded even when nil, as `null`, and is nil
once stored whether it was sent empty or not at all (etcd's protobuf keeps no empty repeated
field): upstream serves a Role's `rules: null`, an EndpointSlice's `endpoints: null` (`nulled`).
So is a pointer without it, left out: an APIService's `service: null`, a PVC dataSource's
`apiGroup: null`; always inside its parent struct, which is there: a struct held by value is
always encoded, left out it is its zero (`structs`: a Node's `spec: {}`).

Which fields are omitempty is a json tag (machinery/jsontags.py): a value scalar is omitempty
when the protobuf table, read from kubectl 1.37's Go types, flags it "o", or jsontags lists it for
a type outside k8s.io/api; a list or map is omitempty when the schema does not require it, less
KEEP_EMPTY, and a required one is not, less REQUIRED_OMITEMPTY (a LimitRange's `limits: null`).
Only the types of the reviewed kinds (jsontags.ROOTS and all they refer to) are normalized; other
kinds keep what they are sent.

Empty lists and maps go on decode, before validation, as the zeros do: validation and the
field manager then compare an update with the stored object as upstream's do (apimachinery's
semantic equality and the unstructured converter read an empty omitempty list as none). The few
a create's validation reads empty (jsontags.VALIDATED_EMPTY: validateWindows' supplementalGroups)
are held through it and dropped after it (`drop`); so is a required list tagged without omitempty
sent empty, which validation prints as sent (`Invalid value: []`) and which is then nil (`Nil`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from nanokube import schema as k8s
from nanokube.machinery.jsontags import (
    KEEP_EMPTY,
    NIL_POINTERS,
    NOT_OMITEMPTY,
    OMITEMPTY_SCALARS,
    REQUIRED_OMITEMPTY,
    ROOTS,
    VALIDATED_EMPTY,
)


def fields(name: str) -> frozenset[str]:
    """The omitempty value scalars of built-in definition `name`; none outside the reviewed types."""
    return _fields().get(name, frozenset())


def kept(name: str) -> frozenset[str]:
    """The optional value scalars of built-in definition `name` tagged without omitempty: a zero
    there is a value, encoded and compared as one."""
    return NOT_OMITEMPTY.get(name, frozenset()) if name in _scope() else frozenset()


def nulled(name: str) -> dict[str, type | None]:
    """The optional lists (`list`), maps (`dict`), pointers (None) and value scalars (`str`, `int`,
    `bool`) of built-in definition `name` tagged without omitempty, by field: left out, one is
    served as `null`, a scalar as its zero (a StatefulSet's `serviceName: ""`, a PriorityClass's
    `value: 0`); a list or map sent empty is `null` too (jsontags.KEEP_EMPTY, NIL_POINTERS,
    NOT_OMITEMPTY). And the required lists (None; no required map is tagged without omitempty),
    which validation may allow left out (a LimitRange's `limits: null`); one sent empty is null
    too, once validation read it as sent (`held`)."""
    return _empties()[1].get(name, {})


def required(name: str) -> dict[str, type]:
    """The required value scalars of built-in definition `name` tagged without omitempty, by field
    (`str`, `int`, `bool`): left out of the object that holds them, one decodes as its zero, which
    upstream stores and serves (a container status's `restartCount: 0`, `imageID: ""`, a
    condition's `message: ""`). None outside the reviewed types."""
    return _required().get(name, {})


def structs(name: str) -> frozenset[str]:
    """The fields of built-in definition `name` whose Go type is a struct held by value, not a
    pointer. encoding/json writes such a field whatever its tag says (`omitempty` never leaves out
    a struct, and 1.37 tags none of them `omitzero`, ObjectMeta's creationTimestamp aside), so a
    Node sent without `spec` is served `spec: {}` and its status
    `daemonEndpoints: {kubeletEndpoint: {Port: 0}}`: the struct's zero, its own fields tagged
    without omitempty at theirs. A resource.Quantity held by value is one too, written "0" when
    zero (a resourceFieldRef's `divisor: "0"`). Required ones are too: upstream's validation reads
    the zero (a RoleBinding without roleRef fails at `roleRef.kind`, not `roleRef`), and where it
    accepts it the zero is served (a preferred scheduling term's `preference: {}`, a counter's
    `value: "0"`). None outside the reviewed types."""
    return _structs().get(name, frozenset())


def empties(name: str) -> dict[str, type]:
    """The omitempty lists (`list`), maps (`dict`) and byte strings (`str`: base64 of a []byte) of
    built-in definition `name`, by field: sent empty, one is unset. None outside the reviewed types."""
    return _empties()[0].get(name, {})


def held(name: str) -> frozenset[str]:
    """The lists of built-in definition `name` validation reads as sent when empty: the omitempty
    ones a create's validation reads (left out once it passed), and the required ones tagged
    without omitempty (`nulled`'s None lists: nil once it passed)."""
    return _held().get(name, frozenset())


class Nil(tuple):
    """A held (parent, key) of a required list tagged without omitempty: sent empty, it is stored
    nil, as etcd's protobuf keeps no empty repeated field (a LimitRange's `limits: []` is served
    `limits: null`), once validation read it as sent (`Invalid value: []`)."""

    __slots__ = ()


def drop(found: list[tuple[dict, str]]) -> None:
    """Leave out the held empty lists and maps a create's decoding found (`held`), where the object
    still holds them empty once validated; a required one (`Nil`) is null."""
    for entry in found:
        parent, key = entry
        value = parent.get(key)
        if not value and type(value) in (list, dict):
            if type(entry) is Nil:
                parent[key] = None
            else:
                del parent[key]


def validated(held: list[tuple[dict, str]] | None, obj: dict, validate: Callable[[], list]) -> list:
    """An update's validation errors as upstream's: its validation reads the empty lists the
    decoding found (`held`, dropped from `obj`) as set, while what compares the update with the
    stored object (immutability, spec diffs) reads them as none, as apimachinery's semantic
    equality does. So `validate` runs without them and, when there were any, again with them put
    back. Upstream's errors are the second run's at a held field, and those both runs report (the
    second's rendering: ValidateIngressSpec's `Invalid value: []` at spec), then the first's that
    the second lacks; the second's others only compared `[]` with none."""
    errs = validate()
    if not held:
        return errs
    paths = {f"{p}.{key}" if p else key for parent, key in held if (p := _path_of(obj, parent)) is not None}
    for parent, key in held:
        if parent.get(key) is None:
            parent[key] = []
    try:
        with_empties = validate()
    finally:
        drop(held)
    first, second = {_key(e) for e in errs}, {_key(e) for e in with_empties}
    return ([e for e in with_empties if e.field in paths or _key(e) in first]
            + [e for e in errs if e.field not in paths and _key(e) not in second])


def _key(e) -> tuple:
    """A validation error but for the value it shows."""
    return e.reason, e.field, e.detail


def _path_of(obj: Any, target: dict, path: str = "") -> str | None:
    """The field path of dict `target` inside `obj` (found by identity), or None."""
    if obj is target:
        return path
    items = obj.items() if type(obj) is dict else enumerate(obj) if type(obj) is list else ()
    for k, v in items:
        if type(v) in (dict, list):
            found = _path_of(v, target, f"{path}[{k}]" if type(k) is int else f"{path}.{k}" if path else k)
            if found is not None:
                return found
    return None


@functools.cache
def _fields() -> dict[str, frozenset[str]]:
    from .protobuf import TABLE

    out = {}
    for name in _scope():
        table = TABLE.get("k8s.io." + name.removeprefix("io.k8s."))
        if table:
            omit = frozenset(json_name for json_name, _type, flags in table.values() if flags == "o")
            out[name] = omit - NOT_OMITEMPTY.get(name, frozenset())
        elif name in OMITEMPTY_SCALARS:
            out[name] = OMITEMPTY_SCALARS[name]
    return out


@functools.cache
def _held() -> dict[str, frozenset[str]]:
    defs, out = k8s.definitions(), {}
    for name, null in _empties()[1].items():
        required = set(defs[name].get("required") or ())
        lists = frozenset(k for k, kind in null.items() if kind is None and k in required)
        if lists:
            out[name] = lists
    for name, lists in VALIDATED_EMPTY.items():
        if name in _scope():
            out[name] = out.get(name, frozenset()) | lists
    return out


@functools.cache
def _required() -> dict[str, dict[str, type]]:
    from .protobuf import TABLE

    defs, out = k8s.definitions(), {}
    for name in _scope():
        table = TABLE.get("k8s.io." + name.removeprefix("io.k8s."))
        props, wanted = defs[name].get("properties") or {}, set(defs[name].get("required") or ())
        if not table or not wanted:
            continue
        found = {}
        for json_name, _type, flags in table.values():
            prop = props.get(json_name) or {}
            kind = _SCALAR_ZEROS.get(prop.get("type")) if isinstance(prop.get("type"), str) else None
            if json_name in wanted and flags == "" and kind is not None and prop.get("format") not in ("byte", "date-time"):
                found[json_name] = kind
        if found:
            out[name] = found
    return out


#: the types with a JSON form of their own: not written as a struct's fields (a Time's zero is null:
#: structural.py's value times). An IntOrString's zero is `0` and a RawExtension's `null`, but none
#: held by value is served zero: a ServicePort's targetPort is defaulted, a probe's port (`0`) and a
#: ControllerRevision's data or an opaque device configuration's parameters fail validation
_OWN_JSON = frozenset({"k8s.io.apimachinery.pkg.apis.meta.v1.Time", "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
                       "k8s.io.apimachinery.pkg.util.intstr.IntOrString", "k8s.io.apimachinery.pkg.runtime.RawExtension"})
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
#: the packages outside k8s.io/api whose types protobuf.TABLE names as k8s.io/api's
_OUTSIDE = ("io.k8s.apiextensions-apiserver.pkg.apis.", "io.k8s.kube-aggregator.pkg.apis.")


def _table(name: str) -> dict | None:
    """The Go fields of definition `name` (protobuf.TABLE: json name, type, flags), or None."""
    from .protobuf import TABLE

    for prefix in _OUTSIDE:
        if name.startswith(prefix):
            return TABLE.get("k8s.io.api." + name.removeprefix(prefix))
    return TABLE.get("k8s.io." + name.removeprefix("io.k8s."))


@functools.cache
def _structs() -> dict[str, frozenset[str]]:
    defs, out = k8s.definitions(), {}
    for name in _scope():
        table = _table(name)
        if not table:
            continue
        props = defs[name].get("properties") or {}
        found = frozenset(json_name for json_name, ftype, flags in table.values()
                          if flags == "" and ftype not in _OWN_JSON
                          and (ftype == _QUANTITY or _is_struct(defs, props.get(json_name))))
        if found:
            out[name] = found
    return out


def _is_struct(defs: dict, prop: dict | None) -> bool:
    """Whether a property refers to a definition that is an object of named fields (or of none: a
    StorageVersion's spec), not a map."""
    ref = (prop or {}).get("$ref")
    target = defs.get(ref[len(k8s.REF_PREFIX):]) if type(ref) is str else None
    if target is None or "additionalProperties" in target or target.get("x-kubernetes-preserve-unknown-fields"):
        return False
    types = target.get("type")
    return "object" in ([types] if isinstance(types, str) else types or ())


#: not a tag: the field manager reads `managedFields: []` as a request to reset the owners
_FIELD_MANAGER_READS = ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "managedFields")
_SCALAR_ZEROS = {"string": str, "integer": int, "boolean": bool}


@functools.cache
def _empties() -> tuple[dict[str, dict[str, type]], dict[str, dict[str, type | None]]]:
    """(`empties` and `nulled` of every reviewed definition)."""
    defs = k8s.definitions()
    out, nulls = {}, {}
    for name in _scope():
        d = defs[name]
        required = set(d.get("required") or ())
        keep = KEEP_EMPTY.get(name, frozenset())
        found: dict[str, type] = {}
        null: dict[str, type | None] = dict.fromkeys(NIL_POINTERS.get(name, ()))
        props = d.get("properties") or {}
        for k in NOT_OMITEMPTY.get(name, ()):
            types = props[k].get("type")
            kind = next((_SCALAR_ZEROS[t] for t in ([types] if isinstance(types, str) else types or ())
                         if t in _SCALAR_ZEROS), None)
            if kind is not None:
                null[k] = kind
        for k, prop in (d.get("properties") or {}).items():
            if (name, k) == _FIELD_MANAGER_READS:
                continue
            types = prop.get("type")
            types = {types} if isinstance(types, str) else set(types or ())
            if "array" in types:
                kind: type = list
            elif "object" in types and isinstance(prop.get("additionalProperties"), dict):
                kind = dict
            elif "string" in types and prop.get("format") == "byte":
                kind = str
            else:
                continue
            if k in required:
                # tagged without omitempty (bar REQUIRED_OMITEMPTY's): left out, it is null; one
                # sent empty too, once validation read it as sent (`held`)
                if kind is not str and k not in REQUIRED_OMITEMPTY.get(name, ()):
                    null[k] = None
            elif k not in keep:
                found[k] = kind
            elif kind is not str:
                null[k] = kind
        if found:
            out[name] = found
        if null:
            nulls[name] = null
    return out, nulls


@functools.cache
def _scope() -> frozenset[str]:
    """The ROOTS definitions and those they refer to, directly or not."""
    defs = k8s.definitions()
    seen: set[str] = set()
    todo = [root if root.startswith("io.k8s.") else "io.k8s.api." + root for root in ROOTS]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        stack: list[Any] = [defs[name]]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if type(node.get("$ref")) is str:  # (JSONSchemaProps has a property named "$ref")
                    todo.append(node["$ref"][len(k8s.REF_PREFIX):])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return frozenset(seen)
