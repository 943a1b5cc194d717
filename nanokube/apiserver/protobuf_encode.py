"""Encode JSON-form objects as Kubernetes protobuf (application/vnd.kubernetes.protobuf), the inverse
of protobuf.decode over the same field table.

What go-to-protobuf's generated marshallers write, and so what Go clients (client-go with
ContentType protobuf, kube-controller-manager, the scheduler) read: fields in field-number order;
a value scalar always, its zero too (json's omitempty plays no part); a pointer ("p") or a
`[]byte` only when set; a value struct always, empty or not; repeated fields unpacked, one tag per
element; map entries sorted by key. Time and MicroTime are Timestamp{seconds, nanos} (Time keeps no
nanos) and empty when zero (a pointer at the zero time, stored as a null key, too); Quantity is its
string; IntOrString {type, intVal, strVal}; Duration its nanoseconds; RawExtension and FieldsV1 the
JSON bytes. A top-level object is `k8s\\x00` +
runtime.Unknown{typeMeta, raw, contentEncoding, contentType}; a watch event is meta.v1.WatchEvent,
unwrapped and length-prefixed (the raw serializer and framer of the stream), whose object is a
wrapped one.
"""

from __future__ import annotations

import base64
import math
import struct
from collections import OrderedDict
from datetime import UTC, datetime

from ..machinery import goduration, gotime
from ..machinery.responses import dumps
from .protobuf import (_FIXED, _SCALARS, _WIRE, APIEXTENSIONS, ARRAY_WRAPPERS, MAGIC, META, TABLE, ProtobufError,
                       message_name)

_ZIGZAG = {"sint32", "sint64"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Go's zero time (0001-01-01T00:00:00Z), which Time and MicroTime encode as no timestamp at all
_GO_ZERO = -62135596800
_SCALAR_ZERO = {"bool": False, "string": "", "float": 0.0, "double": 0.0}
#: pointer fields whose null (a key held null, not left out) points at the zero time (structural)
_TIMES = frozenset((META + "Time", META + "MicroTime"))

# how a field is written: a value field always, a pointer when set (both one value), the others
_VALUE, _POINTER, _REPEATED, _MAP, _INLINE = range(5)


class NotMarshalable(ProtobufError):
    """An object with no protobuf message (a custom resource, a Table): upstream's errNotMarshalable."""


def _key(num: int, wire: int) -> bytes:
    return _varint(num << 3 | wire)


def _varint_slow(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int32 or int64 is its two's complement: ten bytes
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: the varints of the lengths and numbers most fields hold, made once (by concatenating bytes, 1 ms,
#: not by _varint_slow, 60 ms of every server start): one byte below 128; below 16384, the low seven
#: bits with the continuation bit, then the rest
_BYTES = [bytes((b,)) for b in range(256)]
_SMALL = _BYTES[:0x80] + [low + high for high in _BYTES[1:0x80] for low in _BYTES[0x80:]]


def _varint(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 16384 else _varint_slow(n)


# what a field's value is, for the encoder's inlined cases
_STRING, _INT, _OTHER, _MESSAGE = range(4)


def _compile(name: str) -> list[tuple]:
    """(json name, proto type, how it is written, what its value is, key bytes, the bytes of its zero
    (a value field's, which is written when the object lacks it) or of a map entry's value key) for
    each field of message `name`, in field-number order."""
    fields = TABLE.get(name)
    if fields is None:
        raise ProtobufError(f"no protobuf schema for message {name}")
    out = []
    for num in sorted(fields):
        jname, ftype, flags = fields[num]
        scalar = ftype in _SCALARS
        if flags == "r":
            how = _REPEATED
        elif flags == "m":
            how = _MAP
        elif flags == "i":
            how = _INLINE
        elif flags == "p" or ftype == "bytes" or ftype in ARRAY_WRAPPERS:
            how = _POINTER  # a pointer, a []byte or a named slice: written when not nil
        else:
            how = _VALUE
        if not scalar:
            what = _MESSAGE
        elif ftype == "string":
            what = _STRING
        elif ftype in ("int32", "int64", "uint32", "uint64"):
            what = _INT
        else:
            what = _OTHER
        key = _key(num, _WIRE[ftype] if scalar else 2)
        extra = None
        if how == _MAP:
            key, extra = _key(num, 2), _key(2, _WIRE[ftype] if scalar else 2)
        elif how == _VALUE:  # Go structs hold no value struct of their own type: this recursion ends
            zero = _scalar(ftype, _SCALAR_ZERO.get(ftype, 0)) if scalar else None
            if zero is None:
                body = message(None, ftype)
                zero = _varint(len(body)) + body
            extra = key + zero
        out.append((jname, ftype, how, what, key, extra))
    return out


_COMPILED: dict[str, list[tuple]] = {}


def _fields_of(name: str) -> list[tuple]:
    compiled = _COMPILED.get(name)
    if compiled is None:
        compiled = _COMPILED[name] = _compile(name)
    return compiled


def _scalar(ftype: str, value) -> bytes:
    if ftype == "string":
        if type(value) is not str:
            raise ProtobufError(f"expected a string, got {type(value).__name__}")
        data = value.encode()
        return _varint(len(data)) + data
    if ftype == "bool":
        return b"\x01" if value else b"\x00"
    if ftype == "bytes":
        data = base64.b64decode(value) if value else b""
        return _varint(len(data)) + data
    fmt = _FIXED.get(ftype)
    if fmt is not None:
        return struct.pack(fmt, value)
    if type(value) is not int:
        if type(value) is float and value.is_integer():
            value = int(value)
        else:
            raise ProtobufError(f"expected an integer, got {value!r}")
    if ftype in _ZIGZAG:
        value = (value << 1) ^ (value >> 63)
    return _varint(value)


def _year_zero(value) -> tuple[int, int]:
    """(seconds, microseconds) of a time Go reads and Python's datetime does not: year 0."""
    try:
        t = gotime.parse_rfc3339(value)
    except (TypeError, gotime.TimeParseError):
        raise ProtobufError(f"not an RFC 3339 time: {value!r}") from None
    seconds = math.floor(t)
    return seconds, min(round((t - seconds) * 1e6), 999_999)


def _timestamp(value, micro: bool) -> bytes:
    if not value:
        return b""
    try:
        t = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        seconds, micros = _year_zero(value)
    else:
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        delta = t - _EPOCH
        seconds, micros = delta.days * 86400 + delta.seconds, delta.microseconds
    nanos = micros * 1000 if micro else 0  # ProtoTime writes no nanos: JSON has none
    if seconds == _GO_ZERO and not nanos:
        return b""
    return b"\x08" + _varint(seconds) + b"\x10" + _varint(nanos)


def _quantity(value) -> bytes:
    text = "0" if value is None else value if type(value) is str else str(value)  # Quantity{}.String()
    data = text.encode()
    return b"\x0a" + _varint(len(data)) + data


def _int_or_string(value) -> bytes:
    if type(value) is str:
        data = value.encode()
        return b"\x08\x01\x10\x00\x1a" + _varint(len(data)) + data
    return b"\x08\x00\x10" + _varint(value or 0) + b"\x1a\x00"


def _raw_json(value) -> bytes:
    if value is None:
        return b""
    data = dumps(value)
    return b"\x0a" + _varint(len(data)) + data


def _duration(value) -> bytes:
    return b"\x08" + _varint(round(goduration.parse(value) * 1e9) if value else 0)


_SCHEMA = APIEXTENSIONS + "JSONSchemaProps"


def _embedded(num: int, body: bytes) -> bytes:
    return _key(num, 2) + _varint(len(body)) + body


def _schema_or_array(value) -> bytes:
    """JSONSchemaPropsOrArray: a list is its jSONSchemas (2), a schema its schema (1)."""
    if type(value) is list:
        return b"".join(_embedded(2, message(v, _SCHEMA)) for v in value)
    return _embedded(1, message(value, _SCHEMA))


def _schema_or_bool(value) -> bytes:
    """JSONSchemaPropsOrBool: a bool is its allows (1); a schema allows, and is its schema (2)."""
    if type(value) is bool:
        return b"\x08" + (b"\x01" if value else b"\x00")
    return b"\x08\x01" + _embedded(2, message(value, _SCHEMA))


def _schema_or_strings(value) -> bytes:
    """JSONSchemaPropsOrStringArray: strings are its property (2), a schema its schema (1)."""
    if type(value) is list:
        return b"".join(_key(2, 2) + _scalar("string", v) for v in value)
    return _embedded(1, message(value, _SCHEMA))


#: the messages whose marshallers are hand-written (apimachinery's) or whose JSON form is no object
#: (apiextensions' unions): their bodies from the JSON value
_SPECIAL = {
    APIEXTENSIONS + "JSON": _raw_json,
    APIEXTENSIONS + "JSONSchemaPropsOrArray": _schema_or_array,
    APIEXTENSIONS + "JSONSchemaPropsOrBool": _schema_or_bool,
    APIEXTENSIONS + "JSONSchemaPropsOrStringArray": _schema_or_strings,
    META + "Time": lambda v: _timestamp(v, micro=False),
    META + "MicroTime": lambda v: _timestamp(v, micro=True),
    META + "Duration": _duration,
    META + "FieldsV1": _raw_json,
    "k8s.io.apimachinery.pkg.runtime.RawExtension": _raw_json,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": _quantity,
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": _int_or_string,
}


def message(obj, name: str) -> bytes:
    """The bytes of message `name` holding JSON-form `obj` (fields it has no number for are left out)."""
    special = _SPECIAL.get(name)
    if special is not None:
        return special(obj)
    if name in ARRAY_WRAPPERS:
        obj = {"items": obj}
    elif obj is None:
        obj = {}
    elif type(obj) is not dict:
        raise ProtobufError(f"{name}: expected an object, got {type(obj).__name__}")
    out = bytearray()
    for jname, ftype, how, what, key, extra in _fields_of(name):
        if how == _INLINE:
            body = message(obj, ftype)
            out += key
            out += _varint(len(body))
            out += body
            continue
        value = obj.get(jname)
        if value is None:
            if how == _VALUE:
                out += extra
            elif how == _POINTER and ftype in _TIMES and jname in obj:  # a pointer at the zero time
                out += key
                out += b"\x00"
            continue
        if how <= _POINTER:  # one value
            out += key
            if what == _STRING and type(value) is str:
                data = value.encode()
                out += _varint(len(data))
                out += data
            elif what == _INT and type(value) is int:
                out += _varint(value)
            elif what == _MESSAGE:
                body = message(value, ftype)
                out += _varint(len(body))
                out += body
            else:
                out += _scalar(ftype, value)
        elif how == _REPEATED:
            if what == _MESSAGE:
                for item in value:
                    body = message(item, ftype)
                    out += key
                    out += _varint(len(body))
                    out += body
            else:
                zero = _SCALAR_ZERO.get(ftype, 0)
                for item in value:  # (a null item is Go's zero, as encoding/json reads it)
                    out += key
                    out += _scalar(ftype, zero if item is None else item)
        else:  # a map: entries {key = 1, value = 2} sorted by key, as the marshallers sort them
            for k in sorted(value):
                v = value[k]
                entry = b"\x0a" + _scalar("string", k)
                if what == _MESSAGE:
                    body = message(v, ftype)
                    entry += extra + _varint(len(body)) + body
                elif v is not None or ftype != "bytes":  # a nil []byte value is no field
                    entry += extra + _scalar(ftype, _SCALAR_ZERO.get(ftype, 0) if v is None else v)
                out += key
                out += _varint(len(entry))
                out += entry
    return bytes(out)


def _unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    av, k = api_version.encode(), kind.encode()
    type_meta = b"\x0a" + _varint(len(av)) + av + b"\x12" + _varint(len(k)) + k
    return (MAGIC + b"\x0a" + _varint(len(type_meta)) + type_meta + b"\x12" + _varint(len(raw)) + raw
            + b"\x1a\x00\x22\x00")


def encode(obj: dict) -> bytes:
    """`obj` (with its apiVersion and kind) as the protobuf serializer writes it: `k8s\\x00` and a
    runtime.Unknown whose raw is the object's message. NotMarshalable when its kind has none."""
    api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
    try:
        name = message_name(api_version, kind)
    except ProtobufError as e:
        raise NotMarshalable(str(e)) from None
    fields = TABLE[name]
    if not fields:  # a type go-to-protobuf generates no fields for (meta.v1.Table)
        raise NotMarshalable(f"no protobuf schema for {api_version}, Kind={kind}")
    return _unknown(api_version, kind, message(obj, name))


#: recent watch frames by (object, event type): every watcher of a kind is sent the same stored
#: object, encoded once (the memo holds the objects, so an id in it always names its own); ordered, so
#: the oldest leaves in O(1) (see machinery/encoded.py)
_FRAMES: OrderedDict[tuple[int, str], tuple[dict, bytes]] = OrderedDict()
_FRAMES_MAX = 1024


def watch_event(event_type: str, obj: dict) -> bytes:
    """One frame of a protobuf watch: the WatchEvent{type, object: RawExtension{raw: encode(obj)}}
    message, unwrapped, after its length as four big-endian bytes."""
    memo_key = (id(obj), event_type)
    hit = _FRAMES.get(memo_key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    raw = encode(obj)
    ext = b"\x0a" + _varint(len(raw)) + raw
    typ = event_type.encode()
    event = b"\x0a" + _varint(len(typ)) + typ + b"\x12" + _varint(len(ext)) + ext
    frame = struct.pack(">I", len(event)) + event
    if len(_FRAMES) >= _FRAMES_MAX:
        _FRAMES.popitem(last=False)
    _FRAMES[memo_key] = (obj, frame)
    return frame
