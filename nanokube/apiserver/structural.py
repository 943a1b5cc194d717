"""Decoding checks: what the API server's JSON decoder rejects before any
semantic validation runs.

Upstream decodes a request body into Go structs. A value of the wrong JSON type
cannot be stored and fails the request (400, `... cannot be handled as a Pod:
json: cannot unmarshal ...`); a field the struct does not have is an *unknown
field*: dropped always, and reported according to `fieldValidation`. When the
client sends no `fieldValidation` the server uses `Warn` (one
`unknown field "spec.foo"` warning each); kubectl sends `Strict` by default
(`--validate=strict`), which turns them into a 400 `strict decoding error`;
`Ignore` drops them silently.

Null is accepted everywhere and decodes as Go does: a null list item or map
value is the zero value of its type (`{}`, `""`, `0`, `false`), so
`volumes: [null]` is a volume without a name and `data: {"a": null}` is
`{"a": ""}`; a null struct field is unset (the key is dropped) unless it is a
scalar tagged without omitempty, which Go keeps as its zero value (`value: null` is `0`), as
it does one left out of an object sent (a container status without `restartCount` is served
`restartCount: 0`: omitempty.required; a required one tagged omitempty goes, as any), or
a time, which Go encodes as null either way (but ObjectMeta's creationTimestamp,
omitzero since 1.33: a template's `creationTimestamp: null` is dropped). A built-in's
metav1.Time is kept as Go marshals it once parsed: UTC to the second, and the zero time
(`0001-01-01T00:00:00Z`, a zero MicroTime too) as null, or left out where null is; a time
field that is a Go value, not a pointer, is null when left out too (a condition's
`lastProbeTime: null`, a running container's `startedAt: null`).
Likewise an omitempty value field of a built-in type, sent as its zero
(`hostNetwork: false`, `nodeName: ""`, `paused: false`), and an omitempty list
or map sent empty (`args: []`, `labels: {}`) decode as unset, while a list or
map tagged without omitempty, left out or empty, is null (omitempty.py). A struct held by
value (not a pointer), left out or null, is its zero, which encoding/json always writes: a
Node sent without `spec` has `spec: {}` (omitempty.structs).

A schema is compiled once into a tree of closures (cached per definition), so
the per-request cost is one walk of the object. Paths are built only when
something is wrong.
"""

from __future__ import annotations

import binascii
import datetime
import functools
import re
from typing import Any, Callable

import orjson

from nanokube import schema as k8s
from nanokube.machinery import gojson, quantity

from .omitempty import Nil

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_RFC3339_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
_RFC3339 = "2006-01-02T15:04:05Z07:00"
#: metav1.MicroTime's layout: exactly six fraction digits (Time takes any number, or none)
_RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
_MICRO_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(?:Z|[+-]\d{2}:\d{2})")
_B64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")

#: definitions whose Go type keeps raw JSON of any shape
_ARBITRARY = frozenset({
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
})
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_CRD_SCHEMA = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
_SCHEMA_OR_BOOL, _SCHEMA_OR_ARRAY, _SCHEMA_OR_STRINGS = (_CRD_SCHEMA + "OrBool", _CRD_SCHEMA + "OrArray",
                                                         _CRD_SCHEMA + "OrStringArray")
#: what a time checker returns for the zero time: Go's Time and MicroTime marshal it as null
_ZERO = object()
_ZERO_SECOND = "0001-01-01T00:00:00Z"
_ZERO_MICRO = "0001-01-01T00:00:00.000000Z"

# A path is a linked tuple (parent, segment, struct): segment is a field name
# (str), a list index (int) or a map key (1-tuple); struct is the Go struct
# name owning a field segment.
Path = tuple | None
Checker = Callable[[Any, Path, "_Result"], None]


class _Result:
    __slots__ = ("errors", "unknown", "strict", "nulls", "held")

    def __init__(self, strict: bool, nulls: bool = True, held: list | None = None) -> None:
        self.errors: list[str] = []
        self.unknown: list[str] = []
        self.strict = strict
        self.nulls = nulls  # replace nulls by Go's zero values
        self.held = held  # where the empty lists validation reads are (omitempty.held)

    def mismatch(self, value: Any, go_type: str, path: Path, literal: bool = False, custom: bool = False) -> None:
        """`custom`: the Go type decodes itself (UnmarshalJSON), so a value reaches it whole."""
        self.errors.append(Mismatch(_type_error(gojson.value_kind(value, literal), go_type, path), value, go_type, custom, path))


def _type_error(value: str, go_type: str, path: Path) -> str:
    fields: list[str] = []
    struct = ""
    p = path
    while p is not None:
        p, seg, owner = p
        if type(seg) is str:
            fields.append(seg)
            struct = struct or owner
    if not fields:
        return f"json: cannot unmarshal {value} into Go value of type {go_type}"
    return f"json: cannot unmarshal {value} into Go struct field {struct}.{'.'.join(reversed(fields))} of type {go_type}"


def field_path(path: Path) -> str:
    """A path as upstream's strict decoder prints it: `spec.containers[0].foo`."""
    parts: list[str] = []
    p = path
    while p is not None:
        p, seg, _ = p
        if type(seg) is int:
            parts.append(f"[{seg}]")
        else:
            parts.append(("." if p is not None else "") + (seg if type(seg) is str else str(seg[0])))
    return "".join(reversed(parts))


# --- compilation --------------------------------------------------------------


def _go_name(def_name: str) -> str:
    pkg, _, name = def_name.rpartition(".")
    return f"{pkg.rpartition('.')[2]}.{name}"


def _types(node: dict[str, Any]) -> set[str]:
    t = node.get("type")
    if t is None:
        return set()
    return {t} if isinstance(t, str) else set(t) - {"null"}


class _Compiler:
    def __init__(self) -> None:
        self.defs: dict[str, tuple[Checker, str]] = {}

    def ref(self, name: str) -> tuple[Checker, str]:
        if name not in self.defs:
            late: list[Checker] = []
            placeholder = lambda v, p, r: late[0](v, p, r)  # noqa: E731 - recursive types
            placeholder.zero = lambda: late[0].zero()  # type: ignore[attr-defined]
            self.defs[name] = (placeholder, _go_name(name))
            late.append(self.definition(name))
            self.defs[name] = (late[0], self.defs[name][1])
        return self.defs[name]

    def definition(self, name: str) -> Checker:
        if name in _ARBITRARY:
            return _accept
        if name == _INT_OR_STRING:
            return _zero(_int_or_string, lambda: 0)
        if name == _QUANTITY:
            return _zero(_quantity, lambda: "0")
        if name == _MICRO_TIME:
            return _go_micro_time
        if name == _TIME:
            return _go_time
        if name in (_SCHEMA_OR_BOOL, _SCHEMA_OR_ARRAY, _SCHEMA_OR_STRINGS):
            return _schema_or(name, self.ref(_CRD_SCHEMA)[0])
        from . import omitempty

        checker = self.node(k8s.definitions()[name], _go_name(name), omitempty.fields(name), omitempty.empties(name),
                            omitempty.held(name), {**omitempty.nulled(name), **omitempty.required(name)},
                            _time_fields(name), omitempty.structs(name))[0]
        return _remembering_clean(checker) if name in _REMEMBERED else checker

    def node(self, node: dict[str, Any], struct: str = "", omit: frozenset[str] = frozenset(),
             empty: dict[str, type] | None = None, hold: frozenset[str] = frozenset(),
             null: dict[str, type | None] | None = None,
             times: dict[str, bool] | None = None, structs: frozenset[str] = frozenset()) -> tuple[Checker, str]:
        """A checker for a schema node, and the Go type name errors show for it; `omit`: a Go
        struct's omitempty value fields (a zero one decodes as unset), `empty`: its omitempty lists
        and maps, by field (list or dict: an empty one decodes as unset), `hold`: those of them a
        create's validation reads and its required lists, which validation reads as sent
        (omitempty.held), `null`: its lists, maps and pointers tagged without omitempty, by field (list, dict or None: left out, one decodes as null, what upstream serves once
        stored; a list or map sent empty too), `times`: its metav1.Time and MicroTime fields, whether
        each is a pointer, where the Go type is known (`_time_fields`), `structs`: its optional
        fields that are Go structs held by value (left out or null, one decodes as its zero)."""
        if "$ref" in node:
            return self.ref(node["$ref"][len(k8s.REF_PREFIX):])
        if node.get("x-kubernetes-int-or-string"):
            return _zero(_int_or_string, lambda: 0), "intstr.IntOrString"
        types = _types(node)
        fmt = node.get("format")
        if types == {"string"}:
            if fmt == "byte":
                return _zero(_base64, str), "[]uint8"
            if fmt == "date-time":
                return _date_time, "string"
            return _zero(_of_type(str, "string"), str), "string"
        if types == {"boolean"}:
            return _zero(_of_type(bool, "bool"), bool), "bool"
        if types == {"integer"}:
            go = "int32" if fmt == "int32" else "int64"
            return _zero(_integer(go, _INT32 if fmt == "int32" else _INT64), int), go
        if types == {"number"}:
            return _zero(_number, int), "float64"
        if types == {"array"}:
            item, item_go = self.node(node.get("items") or {})
            return _array(item, "[]" + item_go), "[]" + item_go
        if types == {"object"}:
            ap = node.get("additionalProperties")
            if isinstance(ap, dict):
                value, value_go = self.node(ap)
                return _zero(_map(value, "map[string]" + value_go), dict), "map[string]" + value_go
            props = node.get("properties")
            if props is None and (node.get("x-kubernetes-preserve-unknown-fields") or ap is True):
                return _accept, "map[string]interface {}"
            open_ = bool(node.get("x-kubernetes-preserve-unknown-fields"))
            go = struct or "struct"
            fields = {k: self.node(v) for k, v in (props or {}).items()}
            required = set(node.get("required") or ())
            return _zero(_object(fields, go.rpartition(".")[2], go, open_, required, omit, empty or {},
                                 hold, null, times, structs), dict), go
        return _accept, "interface {}"


def _schema_or(name: str, schema: Checker) -> Checker:
    """A CRD schema's JSONSchemaPropsOr{Bool,Array,StringArray}: each decodes itself (marshal.go), a
    schema by a json.Unmarshal of its own, so a type error in it names the JSONSchemaProps field from
    there. OrBool takes a bool or an object and refuses anything else; the other two take an object or
    a list (of schemas, of strings) and decode anything else as empty, served as null."""
    strings = _array(_of_type(str, "string"), "[]string")

    def check(v: Any, path: Path, res: _Result) -> Any:
        t = type(v)
        if t is dict:
            schema(v, None, res)
        elif t is bool and name == _SCHEMA_OR_BOOL:
            pass
        elif name == _SCHEMA_OR_BOOL:
            res.errors.append("boolean or JSON schema expected")
        elif t is list:
            (strings if name == _SCHEMA_OR_STRINGS else _array(schema, "[]v1.JSONSchemaProps"))(v, None, res)
        else:
            return _ZERO
        return None
    return check


#: definitions whose values repeat whole from object to object: every pod of a template (a
#: ReplicaSet's, a Job's) and every template of a kind's updates sends one PodSpec
_REMEMBERED = frozenset({"io.k8s.api.core.v1.PodSpec"})
#: values remembered clean per definition, and the misses in a row after which only one value in
#: as many is looked up (specs that never repeat: each pod with env of its own)
_CLEAN_LIMIT = 1024
_CLEAN_TRIES = 256


def _remembering_clean(checker: Checker) -> Checker:
    """`checker`, skipping a value of a JSON it found clean before under the same flags: no error,
    no unknown field, nothing held and nothing changed (no null replaced, no zero dropped, no
    quantity put in canonical form), so the walk would leave it and the result as they are. A
    value whose JSON holds a null is checked every time (orjson writes NaN as null too), and so
    is one orjson cannot encode (an out-of-range number's marker, an integer past 64 bits)."""
    clean: set[tuple] = set()
    misses = 0

    def check(v: Any, path: Path, res: _Result) -> Any:
        nonlocal misses
        if type(v) is not dict or (misses >= _CLEAN_TRIES and (misses := misses + 1) % _CLEAN_TRIES):
            return checker(v, path, res)
        try:
            encoded = orjson.dumps(v)
        except orjson.JSONEncodeError:
            return checker(v, path, res)
        if b"null" in encoded:
            return checker(v, path, res)
        key = (res.strict, res.nulls, encoded)
        if key in clean:
            misses = 0
            return None
        misses += 1
        found = len(res.errors), len(res.unknown), len(res.held) if res.held is not None else 0
        r = checker(v, path, res)
        if r is None and found == (len(res.errors), len(res.unknown), len(res.held) if res.held is not None else 0) \
                and orjson.dumps(v) == encoded:
            if len(clean) >= _CLEAN_LIMIT:
                clean.clear()
            clean.add(key)
        return r

    check.zero = checker.zero  # type: ignore[attr-defined]
    return check


def _accept(v: Any, path: Path, res: _Result) -> None:
    return None


def _zero(checker: Checker, value: Callable[[], Any]) -> Checker:
    """`checker`, knowing what Go decodes a null list item or map value of its type as."""
    checker.zero = value  # type: ignore[attr-defined]
    return checker


def _zero_of(checker: Checker) -> Any:
    z = getattr(checker, "zero", None)
    return z() if z is not None else None


_zero(_accept, lambda: None)


def _of_type(t: type, go: str) -> Checker:
    def check(v: Any, path: Path, res: _Result) -> None:
        if type(v) is not t:
            res.mismatch(v, go, path)
    check.simple = t  # type: ignore[attr-defined]
    return check


def _integer(go: str, bounds: tuple[int, int]) -> Checker:
    lo, hi = bounds

    def check(v: Any, path: Path, res: _Result) -> None:
        if type(v) is int:
            if not lo <= v <= hi:
                res.mismatch(v, go, path, literal=True)
        elif type(v) is float:
            res.mismatch(v, go, path, literal=True)
        else:
            res.mismatch(v, go, path, literal=type(v) is gojson.OutOfRange)
    return check


def _number(v: Any, path: Path, res: _Result) -> None:
    if type(v) is not float and type(v) is not int:
        res.mismatch(v, "float64", path, literal=type(v) is gojson.OutOfRange)


def _int_or_string(v: Any, path: Path, res: _Result) -> None:
    """Upstream's IntOrString decodes a non-string into an int32, so errors name int32."""
    t = type(v)
    if t is str or (t is int and _INT32[0] <= v <= _INT32[1]):
        return
    res.mismatch(v, "int32", path, literal=t in (int, float), custom=True)


def _quantity(v: Any, path: Path, res: _Result) -> str | None:
    """Quantity.UnmarshalJSON: a string (spaces trimmed) or a number, kept in
    canonical form; returns the canonical text when it differs."""
    t = type(v)
    if t is str:
        text = v.strip()
    elif (t is int or t is float) and res.nulls:
        text = repr(v)
    else:
        if t is not int and t is not float:
            res.errors.append(quantity.FORMAT_WRONG)
        return None
    try:
        canon = quantity.canonical(text)
    except quantity.QuantityError as e:
        res.errors.append(str(e))
        return None
    return canon if canon != v and res.nulls else None


def _date_time(v: Any, path: Path, res: _Result) -> None:
    if type(v) is not str:
        res.mismatch(v, "string", path, custom=True)
    elif v in _GOOD_TIMES:
        return
    elif _RFC3339_RE.fullmatch(v) is None:
        res.errors.append(f'parsing time "{v}" as "{_RFC3339}": cannot parse "{v}" as "2006"')
    else:
        # a well-formed UTC time is in range when its second is: an Event's eventTime (a MicroTime,
        # each one new) is remembered by its second, not added to the set one by one
        second = v[:19] + "Z" if v[-1] == "Z" else v
        if second in _GOOD_TIMES:
            return
        problem = _out_of_range(v)
        if problem:
            res.errors.append(f'parsing time "{v}": {problem} out of range')
        else:
            if len(_GOOD_TIMES) >= 4096:
                _GOOD_TIMES.clear()
            _GOOD_TIMES.add(second)


def _go_time(v: Any, path: Path, res: _Result) -> str | object | None:
    """A metav1.Time: checked as an RFC 3339 time, then (decoding) what Go serves for it once parsed:
    MarshalJSON writes UTC to the second (a fraction is cut, an offset applied), and the zero time as
    null (`_ZERO`); None where that is the value as sent."""
    errors = len(res.errors)
    _date_time(v, path, res)
    if type(v) is not str or not res.nulls or len(res.errors) > errors:
        return None
    if len(v) == 20 and v[19] == "Z":  # UTC, whole seconds: as sent unless zero
        return _ZERO if v == _ZERO_SECOND else None
    zone = v[19:].lstrip(".0123456789")
    if zone == "Z":
        served = v[:19] + "Z"
    else:
        try:
            t = datetime.datetime.fromisoformat(v[:19] + zone).astimezone(datetime.timezone.utc)
        except (ValueError, OverflowError):  # year 0000 and its neighbours: kept as sent
            return None
        served = t.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
    if served == _ZERO_SECOND:
        return _ZERO
    return None if served == v else served


def _go_micro_time(v: Any, path: Path, res: _Result) -> str | object | None:
    """A metav1.MicroTime (`_micro_time`), the zero one null as Go serves it (`_ZERO`)."""
    r = _micro_time(v, path, res)
    return _ZERO if res.nulls and (v if r is None else r) == _ZERO_MICRO else r


def _micro_time(v: Any, path: Path, res: _Result) -> str | None:
    """MicroTime.UnmarshalJSON parses with RFC3339Micro: the fraction must have six digits.
    Returns the UTC form (what MicroTime marshals) of a good time written in another zone."""
    if type(v) is not str or _MICRO_RE.fullmatch(v) is not None:
        errors = len(res.errors)
        _date_time(v, path, res)
        if type(v) is not str or v[-1] == "Z" or not res.nulls or len(res.errors) > errors:
            return None
        return datetime.datetime.fromisoformat(v).astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if _RFC3339_RE.fullmatch(v) is None:
        res.errors.append(f'parsing time "{v}" as "{_RFC3339_MICRO}": cannot parse "{v}" as "2006"')
        return None
    # Go reports a field out of range as it reaches it, before the fraction (the day is checked last)
    problem = _out_of_range(v)
    if problem in ("month", "hour", "minute", "second"):
        res.errors.append(f'parsing time "{v}": {problem} out of range')
        return None
    rest = v[19:]
    if len(rest) - len(rest.lstrip(".0123456789")) < 7:
        res.errors.append(f'parsing time "{v}" as "{_RFC3339_MICRO}": cannot parse "{rest}" as ".000000"')
    else:
        res.errors.append(f'parsing time "{v}" as "{_RFC3339_MICRO}": cannot parse "{rest[7:]}" as "Z07:00"')
    return None


#: recent valid times (a fractional UTC time by its second): the writes of one second
#: (conditions, managedFields, events) share them
_GOOD_TIMES: set[str] = set()


_RANGES = (("month", 5, 7, 1, 12), ("hour", 11, 13, 0, 23), ("minute", 14, 16, 0, 59), ("second", 17, 19, 0, 59))


def _out_of_range(v: str) -> str:
    """Which part of an RFC 3339 time Go's time.Parse finds out of range ('' when none)."""
    for name, a, b, lo, hi in _RANGES[:1]:
        if not lo <= int(v[a:b]) <= hi:
            return name
    year, month, day = int(v[:4]), int(v[5:7]), int(v[8:10])
    days = 29 if month == 2 and (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else \
        (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    if not 1 <= day <= days:
        return "day"
    for name, a, b, lo, hi in _RANGES[1:]:
        if not lo <= int(v[a:b]) <= hi:
            return name
    zone = v[19:].lstrip(".0123456789")
    if zone not in ("Z", "z") and (int(zone[1:3]) > 23 or int(zone[4:6]) > 59):
        return "time zone offset"
    return ""


def _base64(v: Any, path: Path, res: _Result) -> None:
    if type(v) is not str:
        res.mismatch(v, "[]uint8", path)
        return
    try:
        binascii.a2b_base64(v, strict_mode=True)
    except (binascii.Error, ValueError):  # ValueError: not ASCII
        data = v.encode()
        bad = next((i for i, c in enumerate(data) if c not in _B64_ALPHABET), len(data) - len(data) % 4)
        res.errors.append(f"illegal base64 data at input byte {bad}")


def _array(item: Checker, go: str) -> Checker:
    simple = getattr(item, "simple", None)

    def check(v: Any, path: Path, res: _Result) -> None:
        if type(v) is not list:
            res.mismatch(v, go, path)
            return
        for i, x in enumerate(v):
            if x is None:
                if res.nulls:
                    v[i] = _zero_of(item)
            elif type(x) is not simple:
                r = item(x, (path, i, None), res)
                if r is not None:
                    v[i] = None if r is _ZERO else r
    return check


def _map(value: Checker, go: str) -> Checker:
    simple = getattr(value, "simple", None)

    def check(v: Any, path: Path, res: _Result) -> Any:
        if type(v) is not dict:
            res.mismatch(v, go, path)
            return None
        nulls = None
        prev, ordered = "", True
        for k, x in v.items():
            if k < prev:
                ordered = False
            prev = k
            if x is None:
                nulls = (nulls or []) + [k]
            elif type(x) is not simple:
                r = value(x, (path, (k,), None), res)
                if r is not None:
                    v[k] = None if r is _ZERO else r
        if nulls and res.nulls:
            for k in nulls:
                v[k] = _zero_of(value)
        # json.Marshal writes a map's keys sorted: so they are stored and served
        return None if ordered else {k: v[k] for k in sorted(v)}
    return check


def _object(fields: dict[str, tuple[Checker, str]], struct: str, go: str, open_: bool, required: set[str],
            omit: frozenset[str] = frozenset(), empty: dict[str, type] | None = None,
            hold: frozenset[str] = frozenset(), null: dict[str, type | None] | None = None,
            times: dict[str, bool] | None = None, structs: frozenset[str] = frozenset()) -> Checker:
    empty, null = empty or {}, null or {}
    null_fields = tuple(null)  # lists, maps, pointers and scalars tagged without omitempty: null or zero when nil
    # a time that is a Go value (not a pointer) is encoded as null when zero: sent null, as the zero
    # time or not at all, it is null (a pod condition's `lastProbeTime: null`); a pointer sent null is
    # nil, left out (omitempty). One sent as the zero time points at it, which Go serves as null: kept
    # as a null key, which its printers tell from nil (a CronJob's Last Schedule `<unknown>`, not
    # `<none>`) and protobuf writes as an empty Timestamp. ObjectMeta's creationTimestamp is omitzero
    # since 1.33 (kubernetes#130989): a zero one is left out
    created = go == "v1.ObjectMeta"
    value_times = frozenset(k for k, pointer in (times or {}).items()
                            if not pointer and not (created and k == "creationTimestamp"))
    null_fields += tuple(sorted(value_times - null.keys()))  # a value time left out is zero too
    simple = {k: c.simple for k, (c, _) in fields.items() if hasattr(c, "simple")}
    nested = {k: c for k, (c, _) in fields.items()}
    # what a null field becomes: a required scalar's zero value (or an optional one's tagged without
    # omitempty), a time's null, else nothing; ObjectMeta's creationTimestamp is omitzero since 1.34
    # (kubernetes#130989): a zero one is left out
    zeros = {k: c.zero for k, (c, _) in fields.items()
             if (k in required or null.get(k) in (str, int, bool)) and getattr(c, "zero", None) in (str, int, bool)}
    keep_null = value_times if times is not None else {
        k for k, (c, _) in fields.items() if c in _TIMES and not (created and k == "creationTimestamp")}
    zero_dropped = frozenset(("creationTimestamp",)) if created else frozenset()
    # a struct held by value is always encoded: left out or null, it is its zero, whose own fields
    # tagged without omitempty its checker fills (omitempty.structs); a Quantity's zero is "0".
    # Each zero is the same every time: filled once, kept as its JSON (a status patch's view of a
    # pod, without its spec, is filled a zero PodSpec each time)
    value_structs = tuple((k, nested[k]) for k in sorted(structs) if k in nested)
    filled: dict[str, bytes] = {}

    def check(v: Any, path: Path, res: _Result) -> None:
        if type(v) is not dict:
            res.mismatch(v, go, path)
            return
        nulls = None
        for k, x in v.items():
            t = simple.get(k)
            if t is not None and type(x) is t:
                if not x and k in omit:  # an omitempty field's zero ("" or false) is unset
                    nulls = (nulls or []) + [k]
                continue
            c = nested.get(k)
            if c is None:
                if res.strict and not open_:
                    res.unknown.append(field_path((path, k, struct)))
            elif x is None:
                nulls = (nulls or []) + [k]
            else:
                r = c(x, (path, k, struct), res)
                if r is _ZERO:
                    if k in zero_dropped:
                        nulls = (nulls or []) + [k]
                    else:
                        v[k] = None
                elif r is not None:
                    v[k] = r  # a value in canonical form (same key: safe while iterating)
                elif x == 0 and type(x) is int and k in omit:
                    nulls = (nulls or []) + [k]
                elif not x and type(x) is empty.get(k):  # an omitempty list or map sent empty
                    if k in hold and res.held is not None:
                        res.held.append((v, k))
                    else:
                        nulls = (nulls or []) + [k]
                elif not x and type(x) is null.get(k):  # a list or map sent empty is nil
                    nulls = (nulls or []) + [k]
                elif not x and k in hold and type(x) is list:  # a required one: nil once validated
                    if res.held is not None:
                        res.held.append(Nil((v, k)))
                    else:
                        nulls = (nulls or []) + [k]
        if nulls and res.nulls:
            for k in nulls:
                if k in omit:
                    del v[k]
                elif k in zeros:
                    v[k] = zeros[k]()
                elif k in null:
                    v[k] = None
                elif k not in keep_null:
                    del v[k]
        if null_fields and res.nulls:
            for k in null_fields:
                if k not in v:
                    v[k] = zeros[k]() if k in zeros else None
        if value_structs and res.nulls:
            for k, c in value_structs:
                if v.get(k) is None:
                    zero = filled.get(k)
                    if zero is None:
                        first = c.zero()
                        if type(first) is dict:
                            c(first, (path, k, struct), _Result(False))
                        zero = filled[k] = orjson.dumps(first)
                    v[k] = orjson.loads(zero)
    return check


#: the time checkers whose null a struct keeps where its Go type is not known (`_object`)
_TIMES = (_date_time, _go_time)
_TIME_TYPES = ("k8s.io.apimachinery.pkg.apis.meta.v1.Time", "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime")


def _time_fields(name: str) -> dict[str, bool] | None:
    """The metav1.Time and MicroTime fields of built-in definition `name` and whether each is a
    pointer, from the Go types kubectl 1.37 carries and kube-aggregator's (protobuf.TABLE); None
    where they are not known."""
    from .protobuf import TABLE

    aggregator = "io.k8s.kube-aggregator.pkg.apis."  # kube-aggregator's messages are named as k8s.io/api's
    table = TABLE.get("k8s.io.api." + name.removeprefix(aggregator) if name.startswith(aggregator)
                      else "k8s.io." + name.removeprefix("io.k8s."))
    if table is None:
        return None
    return {json_name: flags == "p" for json_name, ftype, flags in table.values()
            if ftype in _TIME_TYPES and flags in ("", "p")}


_COMPILER = _Compiler()
_BY_ID: dict[int, tuple[dict[str, Any], Checker]] = {}


@functools.cache
def _def_names() -> dict[int, str]:
    return {id(d): n for n, d in k8s.definitions().items()}


def compiled(schema: dict[str, Any]) -> Checker:
    """The checker for a schema: a `$defs` definition (compiled once, by name)
    or any other structural schema (a CRD's, compiled once per dict)."""
    entry = _BY_ID.get(id(schema))
    if entry is None or entry[0] is not schema:
        name = _def_names().get(id(schema))
        fn = _COMPILER.ref(name)[0] if name else _COMPILER.node(schema)[0]
        entry = _BY_ID[id(schema)] = (schema, fn)  # holding the dict keeps its id unique
    return entry[1]


# --- public API ---------------------------------------------------------------


def check(obj: dict[str, Any], schema: dict[str, Any], strict: bool, nulls: bool = True,
          held: list | None = None) -> tuple[list[str], list[str]]:
    """(decoding errors, unknown field paths) of `obj` against `schema`.

    `strict` collects unknown fields (fieldValidation Strict or Warn); with
    Ignore pass False. `nulls` replaces nulls in `obj` as Go's decoder does
    (pass False to check a value whose nulls mean something, an apply
    configuration). `held` (a create's body): where the empty lists its
    validation reads are, left in `obj` for it (omitempty.drop). Errors are in
    document order; upstream reports the first.
    """
    res = _Result(strict, nulls, held)
    compiled(schema)(obj, None, res)
    return res.errors, res.unknown


def left_out(schema: dict[str, Any], field: str) -> Any:
    """What `field` of an object of built-in `schema` decodes as when left out, a copy of its own:
    a struct held by value is its zero (a DaemonSet's status with its counts tagged without
    omitempty at 0, a Service's `status: {loadBalancer: {}}`), what a strategy that resets it
    (upstream's PrepareForCreate, `Status = XStatus{}`) leaves; None where the field is no such
    struct (a custom resource's status)."""
    entry = _EMPTY.get(id(schema))
    if entry is None or entry[0] is not schema:
        empty: dict[str, Any] = {}
        compiled(schema)(empty, None, _Result(False))
        entry = _EMPTY[id(schema)] = (schema, orjson.dumps(empty))
    value = orjson.loads(entry[1]).get(field)
    return value if type(value) is dict else None


#: an empty object of each schema as decoded (`left_out`), by the schema's identity
_EMPTY: dict[int, tuple[dict[str, Any], bytes]] = {}


class Mismatch(str):
    """A type error's message, with the JSON value, the Go type it names and where it is."""

    def __new__(cls, message: str, value: Any, go_type: str, custom: bool, path: Path = None) -> Mismatch:
        self = super().__new__(cls, message)
        self.value, self.go_type, self.custom, self.path = value, go_type, custom, path
        return self


def convert_number(err: str, obj: Any) -> bool:
    """What the unstructured converter takes where the JSON decoder refuses: an integer of int64's
    range into an int32 field by Go's conversion (it wraps: 2147483648 is -2147483648), and a float
    without a fraction into an integer field. Sets that value in `obj` where `err` found the
    number; False for any other error."""
    if not isinstance(err, Mismatch) or err.custom or err.go_type not in ("int32", "int64") or err.path is None:
        return False
    v = err.value
    if type(v) is float and v.is_integer():
        v = int(v)
    if type(v) is not int or not _INT64[0] <= v <= _INT64[1]:
        return False
    if err.go_type == "int32":
        v = (v + 2**31) % 2**32 - 2**31
    keys, p = [], err.path
    while p is not None:
        p, seg, _ = p
        keys.append(seg[0] if type(seg) is tuple else seg)
    target = obj
    for k in reversed(keys[1:]):
        target = target[k]
    target[keys[0]] = v
    return True


def _reflect_kind(v: Any) -> str:
    """The reflect.Kind of a decoded JSON value, as the unstructured converter names it."""
    t = type(v)
    return ("map" if t is dict else "slice" if t is list else "string" if t is str else "bool" if t is bool
            else "int64" if t is int else "float64")


def unstructured_error(err: str) -> str:
    """`err` as runtime.DefaultUnstructuredConverter words it: a strategic merge patch's result is
    converted from its map into the Go type, not decoded from JSON (applyPatchToObject). A type
    that decodes itself still gets the value's JSON (Go's message, without the field); the
    converter's own wording otherwise. Where the converter takes what the JSON decoder refuses
    (see convert_number; numbers into []byte) the decoder's message stands."""
    if not isinstance(err, Mismatch):
        return err
    v, go = err.value, err.go_type
    if err.custom:
        return _type_error(gojson.value_kind(v, go != "string" and type(v) in (int, float)), go, None)
    kind = _reflect_kind(v)
    if go == "[]uint8" and kind == "slice":
        return err
    if go.startswith("[]"):
        return f"cannot restore slice from {kind}"
    if go.startswith("map["):
        return f"cannot restore map from {kind}"
    if go in ("int32", "int64", "float64"):
        if kind == "int64" or (kind == "float64" and (go == "float64" or float(v).is_integer())):
            return err
        return f"cannot convert float64 to {go}" if kind == "float64" else f"unrecognized type: {go}"
    if go in ("string", "bool"):
        return "cannot convert int64 to string" if (kind, go) == ("int64", "string") else f"unrecognized type: {go}"
    return f"cannot restore struct from: {kind}"


def decode_error_message(kind: str, version: str, err: str) -> str:
    """The message of the 400 a body that cannot be decoded earns."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {err}'


def strict_error(unknown: list[str]) -> str:
    """The decoding error for unknown fields under fieldValidation=Strict."""
    return "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown)


def unknown_field_warnings(unknown: list[str]) -> list[str]:
    """One warning text per unknown field under fieldValidation=Warn."""
    return [f'unknown field "{p}"' for p in unknown]


def prune(obj: Any, schema: dict[str, Any]) -> Any:
    """A copy of `obj` without the fields its schema does not know; shares
    unchanged subtrees. Upstream drops these whatever fieldValidation says."""
    node = k8s.resolve(schema) if "$ref" in schema else schema
    if type(obj) is dict:
        name = _def_names().get(id(node))
        if name in _ARBITRARY or name in (_INT_OR_STRING, _QUANTITY):
            return obj
        ap = node.get("additionalProperties")
        if isinstance(ap, dict):
            return {k: prune(v, ap) for k, v in obj.items()}
        props = node.get("properties")
        if props is None and (ap is True or node.get("x-kubernetes-preserve-unknown-fields")
                              or not _types(node)):
            return obj
        keep = node.get("x-kubernetes-preserve-unknown-fields")
        props = props or {}
        return {k: prune(v, props[k]) if k in props else v for k, v in obj.items() if keep or k in props}
    if type(obj) is list and "items" in node:
        return [prune(x, node["items"]) for x in obj]
    return obj


def definition_errors(obj: Any, definition: str) -> list[str]:
    """Decoding errors of `obj` as the Go type of `$defs` definition `definition`
    (a subresource's or an options body), its nulls decoded as Go does."""
    errs, _ = check(obj, k8s.definitions()[definition], False)
    return errs
