"""Encode JSON-form objects as Kubernetes protobuf (application/vnd.kubernetes.protobuf), the inverse
of protobuf.decode over the same field table.

What go-to-protobuf's generated marshallers write, and so what Go clients (client-go with
ContentType protobuf, kube-controller-manager, the scheduler) read: fields in field-number order;
a value scalar always, its zero too (json's omitempty plays no part); a pointer ("p") or a
`[]byte` only when set; a value struct always, empty or not; repeated fields unpacked, one tag per
element; map entries sorted by key. Time and MicroTime are Timestamp{seconds, nanos} (Time keeps no
nanos) and empty when zero; Quantity is its string; IntOrString {type, intVal, strVal}; Duration its
nanoseconds; RawExtension and FieldsV1 the JSON bytes. A top-level object is `k8s\\x00` +
runtime.Unknown{typeMeta, raw, contentEncoding, contentType}; a watch event is meta.v1.WatchEvent,
unwrapped and length-prefixed (the raw serializer and framer of the stream), whose object is a
wrapped one.
"""

from __future__ import annotations

import base64
import struct
from datetime import UTC, datetime

from ..machinery import goduration
from ..machinery.responses import dumps
from .protobuf import _FIXED, _SCALARS, _WIRE, ARRAY_WRAPPERS, MAGIC, META, TABLE, ProtobufError, message_name

_ZIGZAG = {"sint32", "sint64"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Go's zero time (0001-01-01T00:00:00Z), which Time and MicroTime encode as no timestamp at all
_GO_ZERO = -62135596800
_SCALAR_ZERO = {"bool": False, "string": "", "float": 0.0, "double": 0.0}

# what a field is, for the encoder: its own kind of write
_VALUE, _POINTER, _REPEATED, _MAP, _INLINE, _OPTIONAL = range(6)


class NotMarshalable(ProtobufError):
    """An object with no protobuf message (a custom resource, a Table): upstream's errNotMarshalable."""


def _key(num: int, wire: int) -> bytes:
    return _varint(num << 3 | wire)


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return bytes((n,))
    n &= (1 << 64) - 1  # a negative int32 or int64 is its two's complement: ten bytes
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compile(name: str) -> list[tuple]:
    """(json name, proto type, how it is written, key bytes, key bytes of a map entry's value) for
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
        wire = _WIRE[ftype] if scalar else 2
        if how == _MAP:
            value_wire = _WIRE[ftype] if scalar else 2
            out.append((jname, ftype, how, _key(num, 2), _key(2, value_wire)))
        else:
            out.append((jname, ftype, how, _key(num, wire), None))
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


def _timestamp(value, micro: bool) -> bytes:
    if not value:
        return b""
    try:
        t = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ProtobufError(f"not an RFC 3339 time: {value!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    delta = t - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    nanos = delta.microseconds * 1000 if micro else 0  # ProtoTime writes no nanos: JSON has none
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


#: the apimachinery messages whose marshallers are hand-written: their bodies from the JSON value
_SPECIAL = {
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
    for jname, ftype, how, key, value_key in _fields_of(name):
        if how == _INLINE:
            body = message(obj, ftype)
            out += key + _varint(len(body)) + body
            continue
        value = obj.get(jname)
        if how == _VALUE:
            if ftype in _SCALARS:
                out += key + _scalar(ftype, _SCALAR_ZERO.get(ftype, 0) if value is None else value)
            else:
                body = message(value, ftype)
                out += key + _varint(len(body)) + body
        elif value is None:
            continue
        elif how == _POINTER:
            if ftype in _SCALARS:
                out += key + _scalar(ftype, value)
            else:
                body = message(value, ftype)
                out += key + _varint(len(body)) + body
        elif how == _REPEATED:
            if ftype in _SCALARS:
                for item in value:
                    out += key + _scalar(ftype, item)
            else:
                for item in value:
                    body = message(item, ftype)
                    out += key + _varint(len(body)) + body
        else:  # a map: entries {key = 1, value = 2} sorted by key, as the marshallers sort them
            for k in sorted(value):
                v = value[k]
                if ftype in _SCALARS:
                    if v is None and ftype == "bytes":
                        entry = _key(1, 2) + _scalar("string", k)
                    else:
                        entry = _key(1, 2) + _scalar("string", k) + value_key + _scalar(
                            ftype, _SCALAR_ZERO.get(ftype, 0) if v is None else v)
                else:
                    body = message(v, ftype)
                    entry = _key(1, 2) + _scalar("string", k) + value_key + _varint(len(body)) + body
                out += key + _varint(len(entry)) + entry
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


def watch_event(event_type: str, obj: dict) -> bytes:
    """One frame of a protobuf watch: the WatchEvent{type, object: RawExtension{raw: encode(obj)}}
    message, unwrapped, after its length as four big-endian bytes."""
    raw = encode(obj)
    ext = b"\x0a" + _varint(len(raw)) + raw
    typ = event_type.encode()
    event = b"\x0a" + _varint(len(typ)) + typ + b"\x12" + _varint(len(ext)) + ext
    return struct.pack(">I", len(event)) + event
