"""`/openapi/v2` as protobuf: gnostic's `openapi.v2.Document` encoding.

kubectl asks for the v2 document in protobuf (Accept
`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) when it
validates `kind: List` files client-side, and cannot read JSON there.
Upstream turns its JSON into gnostic's `openapiv2/OpenAPIv2.proto` messages;
this module does the same from the JSON document `openapi.build_v2` serves.

Each message is a table of its JSON keys in proto field order (the .proto
numbers every message's fields 1, 2, 3... in the order the Swagger 2.0 spec
lists them, with `vendor_extension` last), so a field's number is its place
in the table. Keys starting with `x-` become `vendor_extension` entries whose
value is YAML text (JSON, a YAML subset); any other key the message lacks is
an error, as it is for gnostic.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from typing import Any

import orjson

#: what a client sends (the older name) or may send (the newer) to get protobuf
MEDIA_PB_DEPRECATED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
MEDIA_PB = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
MEDIA_JSON = "application/json"

Enc = Callable[[bytearray, int, Any], None]


# --- wire format ----------------------------------------------------------------


def _varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _embed(out: bytearray, num: int, body: bytes | bytearray) -> None:
    _varint(out, num << 3 | 2)
    _varint(out, len(body))
    out += body


def _string(out: bytearray, num: int, v: str) -> None:
    if v:  # proto3 leaves empty scalars out
        _embed(out, num, v.encode())


def _bool(out: bytearray, num: int, v: bool) -> None:
    if v:
        _varint(out, num << 3)
        out.append(1)


def _int64(out: bytearray, num: int, v: int) -> None:
    if v:
        _varint(out, num << 3)
        _varint(out, v & 0xFFFFFFFFFFFFFFFF)


def _double(out: bytearray, num: int, v: float) -> None:
    if v:
        _varint(out, num << 3 | 1)
        out += struct.pack("<d", v)


def _repeated(enc: Enc) -> Enc:
    def write(out: bytearray, num: int, v: list) -> None:
        for x in v:
            enc(out, num, x)
    return write


def _strings(out: bytearray, num: int, v: list[str]) -> None:
    for s in v:
        _embed(out, num, s.encode())


def _any(out: bytearray, num: int, v: Any) -> None:
    """`Any{yaml: 2}`: kubectl reads vendor extensions and enums back with a YAML parser."""
    body = bytearray()
    _string(body, 2, json.dumps(v, ensure_ascii=False) + "\n")
    _embed(out, num, body)


def _named_any(out: bytearray, num: int, name: str, v: Any) -> None:
    body = bytearray()
    _string(body, 1, name)
    _any(body, 2, v)
    _embed(out, num, body)


# --- messages ---------------------------------------------------------------------


class _Message:
    """A message whose JSON keys map to consecutive field numbers from 1."""

    def __init__(self, name: str, keys: tuple[str, ...], kinds: dict[str, Enc], vendor: bool = True) -> None:
        self.name = name
        self.fields = {k: (i, kinds.get(k, _string)) for i, k in enumerate(keys, 1)}
        self.vendor = len(keys) + 1 if vendor else 0

    def encode(self, obj: dict[str, Any]) -> bytearray:
        out = bytearray()
        for k, v in obj.items():
            f = self.fields.get(k)
            if f is not None:
                f[1](out, f[0], v)
            elif self.vendor and k.startswith("x-"):
                _named_any(out, self.vendor, k, v)
            else:
                raise ValueError(f"{self.name} has no field {k!r}")
        return out

    def __call__(self, out: bytearray, num: int, v: dict[str, Any]) -> None:
        _embed(out, num, self.encode(v))


def _map(entry_field: int, value: Enc, vendor: int = 0) -> Enc:
    """A JSON object as repeated `Named*{name: 1, value: 2}` entries (`x-` keys to `vendor`)."""
    def write(out: bytearray, num: int, v: dict[str, Any]) -> None:
        body = bytearray()
        for k, x in v.items():
            if vendor and k.startswith("x-"):
                _named_any(body, vendor, k, x)
                continue
            entry = bytearray()
            _string(entry, 1, k)
            value(entry, 2, x)
            _embed(body, entry_field, entry)
        _embed(out, num, body)
    return write


def _wrap(field: int, enc: Enc) -> Enc:
    """A message holding the value in its `field` (a oneof arm, or StringArray's `value`)."""
    def write(out: bytearray, num: int, v: Any) -> None:
        body = bytearray()
        enc(body, field, v)
        _embed(out, num, body)
    return write


def _list_of(enc: Enc) -> Enc:
    """A message whose field 1 repeats; a single JSON value counts as a list of one."""
    def write(out: bytearray, num: int, v: Any) -> None:
        body = bytearray()
        for x in v if isinstance(v, list) else [v]:
            enc(body, 1, x)
        _embed(out, num, body)
    return write


def _oneof_bool(out: bytearray, num: int, v: bool) -> None:
    """A bool in a oneof: written even when false, the arm itself being the information."""
    _varint(out, num << 3)
    out.append(int(v))


_VALIDATIONS = ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
                "maxItems", "minItems", "uniqueItems")
_KINDS: dict[str, Enc] = {
    "default": _any, "example": _any, "enum": _repeated(_any),
    "multipleOf": _double, "maximum": _double, "minimum": _double,
    "exclusiveMaximum": _bool, "exclusiveMinimum": _bool, "uniqueItems": _bool, "readOnly": _bool,
    "required": _bool, "allowEmptyValue": _bool, "deprecated": _bool,
    "maxLength": _int64, "minLength": _int64, "maxItems": _int64, "minItems": _int64,
    "maxProperties": _int64, "minProperties": _int64,
    "tags": _strings, "produces": _strings, "consumes": _strings, "schemes": _strings,
}
_KINDS["externalDocs"] = _Message("ExternalDocs", ("description", "url"), _KINDS)


def _schema(out: bytearray, num: int, v: dict[str, Any]) -> None:
    _SCHEMA(out, num, v)


def _additional_properties(out: bytearray, num: int, v: bool | dict[str, Any]) -> None:
    """AdditionalPropertiesItem: a Schema (1) or a bool (2)."""
    if isinstance(v, bool):
        _wrap(2, _oneof_bool)(out, num, v)
    else:
        _wrap(1, _schema)(out, num, v)


_SCHEMA = _Message("Schema", (
    "$ref", "format", "title", "description", "default", "multipleOf", *_VALIDATIONS, "maxProperties",
    "minProperties", "required", "enum", "additionalProperties", "type", "items", "allOf", "properties",
    "discriminator", "readOnly", "xml", "externalDocs", "example"), {
    **_KINDS,
    "required": _strings,
    "additionalProperties": _additional_properties,
    "type": _list_of(_string),
    "items": _list_of(_schema),
    "allOf": _repeated(_schema),
    "properties": _map(1, _schema),
    "xml": _Message("Xml", ("name", "namespace", "prefix", "attribute", "wrapped"),
                    {"attribute": _bool, "wrapped": _bool}),
})

_PRIMITIVE = ("type", "format", "items", "collectionFormat", "default", *_VALIDATIONS, "enum", "multipleOf")


def _primitives_items(out: bytearray, num: int, v: dict[str, Any]) -> None:
    _PRIMITIVES_ITEMS(out, num, v)


_PARAM_KINDS = {**_KINDS, "items": _primitives_items}
_PRIMITIVES_ITEMS = _Message("PrimitivesItems", _PRIMITIVE, _PARAM_KINDS)
#: NonBodyParameter's oneof arms by `in`: (field, message)
_NON_BODY = {
    "header": (1, _Message("HeaderParameterSubSchema", ("required", "in", "description", "name", *_PRIMITIVE),
                           _PARAM_KINDS)),
    "formData": (2, _Message("FormDataParameterSubSchema",
                             ("required", "in", "description", "name", "allowEmptyValue", *_PRIMITIVE), _PARAM_KINDS)),
    "query": (3, _Message("QueryParameterSubSchema",
                          ("required", "in", "description", "name", "allowEmptyValue", *_PRIMITIVE), _PARAM_KINDS)),
    "path": (4, _Message("PathParameterSubSchema", ("required", "in", "description", "name", *_PRIMITIVE),
                         _PARAM_KINDS)),
}
_BODY = _Message("BodyParameter", ("description", "name", "in", "required", "schema"), {**_KINDS, "schema": _schema})
_JSON_REFERENCE = _Message("JsonReference", ("$ref", "description"), {}, vendor=False)


def _parameter(out: bytearray, num: int, p: dict[str, Any]) -> None:
    """Parameter: a body parameter (1), or a non-body one (2) in the arm its `in` names."""
    if p.get("in") == "body":
        _wrap(1, _BODY)(out, num, p)
        return
    arm = _NON_BODY.get(p.get("in", ""))
    if arm is None:
        raise ValueError(f"parameter {p.get('name')!r} has an unknown location {p.get('in')!r}")
    _wrap(2, _wrap(*arm))(out, num, p)


def _parameters_item(out: bytearray, num: int, p: dict[str, Any]) -> None:
    """ParametersItem: a Parameter (1) or a `$ref` (2)."""
    if "$ref" in p:
        _wrap(2, _JSON_REFERENCE)(out, num, p)
    else:
        _wrap(1, _parameter)(out, num, p)


_RESPONSE = _Message("Response", ("description", "schema", "headers", "examples"), {
    "schema": _wrap(1, _schema),
    "headers": _map(1, _Message("Header", (*_PRIMITIVE, "description"), _PARAM_KINDS)),
    "examples": _map(1, _any),
})


def _response_value(out: bytearray, num: int, r: dict[str, Any]) -> None:
    """ResponseValue: a Response (1) or a `$ref` (2)."""
    if "$ref" in r:
        _wrap(2, _JSON_REFERENCE)(out, num, r)
    else:
        _wrap(1, _RESPONSE)(out, num, r)


#: SecurityRequirement: scheme name -> StringArray{value: 1}
_SECURITY = _repeated(_map(1, _wrap(1, _strings)))

_OPERATION = _Message("Operation", (
    "tags", "summary", "description", "externalDocs", "operationId", "produces", "consumes", "parameters",
    "responses", "schemes", "deprecated", "security"), {
    **_KINDS,
    "parameters": _repeated(_parameters_item),
    "responses": _map(1, _response_value, vendor=2),
    "security": _SECURITY,
})
_PATH_ITEM = _Message("PathItem", ("$ref", "get", "put", "post", "delete", "options", "head", "patch", "parameters"), {
    **{m: _OPERATION for m in ("get", "put", "post", "delete", "options", "head", "patch")},
    "parameters": _repeated(_parameters_item),
})

#: SecurityDefinitionsItem's oneof arms by `type`; OAuth2 flows are never served
_SECURITY_SCHEMES = {
    "basic": (1, _Message("BasicAuthenticationSecurity", ("type", "description"), {})),
    "apiKey": (2, _Message("ApiKeySecurity", ("type", "name", "in", "description"), {})),
}


def _security_scheme(out: bytearray, num: int, s: dict[str, Any]) -> None:
    arm = _SECURITY_SCHEMES.get(s.get("type", ""))
    if arm is None:
        raise ValueError(f"security scheme type {s.get('type')!r} is not supported")
    _wrap(*arm)(out, num, s)


_DOCUMENT = _Message("Document", (
    "swagger", "info", "host", "basePath", "schemes", "consumes", "produces", "paths", "definitions",
    "parameters", "responses", "security", "securityDefinitions", "tags", "externalDocs"), {
    **_KINDS,
    "info": _Message("Info", ("title", "version", "description", "termsOfService", "contact", "license"), {
        "contact": _Message("Contact", ("name", "url", "email"), {}),
        "license": _Message("License", ("name", "url"), {}),
    }),
    "paths": _map(2, _PATH_ITEM, vendor=1),
    "definitions": _map(1, _schema),
    "parameters": _map(1, _parameter),
    "responses": _map(1, _RESPONSE),
    "security": _SECURITY,
    "securityDefinitions": _map(1, _security_scheme),
    "tags": _repeated(_Message("Tag", ("name", "description", "externalDocs"), _KINDS)),
})


def encode_document(json_doc: bytes) -> bytes:
    """The Swagger 2.0 JSON document as a serialized `openapi.v2.Document`."""
    return bytes(_DOCUMENT.encode(orjson.loads(json_doc)))


def negotiate(accept: str) -> str | None:
    """The Content-Type to answer an `/openapi/v2` request with: JSON, protobuf, or
    None (406) when the Accept header allows neither. Like kube-openapi, clauses go
    by quality then specificity, and the first one JSON or either protobuf name
    satisfies wins; protobuf is answered under its newer name."""
    clauses = []
    for part in (accept or "*/*").split(","):
        media, *params = (x.strip() for x in part.split(";"))
        typ, _, sub = media.partition("/")
        if media == "*":
            typ, sub = "*", "*"
        q = 1.0
        for p in params:
            k, _, v = p.partition("=")
            if k.strip() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if typ and sub and q > 0:
            clauses.append((-q, typ == "*", sub == "*", typ, sub))
    clauses.sort(key=lambda c: c[:3])
    for *_, typ, sub in clauses:
        for offered, answer in ((MEDIA_JSON, MEDIA_JSON), (MEDIA_PB_DEPRECATED, MEDIA_PB), (MEDIA_PB, MEDIA_PB)):
            otyp, osub = offered.split("/")
            if typ in ("*", otyp) and sub in ("*", osub):
                return answer
    return None


def etag(json_doc: bytes) -> str:
    """The ETag of both encodings, as kube-openapi sets it: the JSON's SHA-512 in
    upper-case hex, quoted."""
    return '"' + hashlib.sha512(json_doc).hexdigest().upper() + '"'
