"""A list's continue token, encoded and checked as upstream's storage.EncodeContinue/DecodeContinue.

The token is base64url (no padding) of `{"v":"meta.k8s.io/v1","rv":<revision>,"start":<key>}`,
the key relative to the list's key prefix, after the page's last key (its last key and a NUL,
as etcd's range reads from there). A token the client made up or changed is a 400 'invalid
continue token: ...' with DecodeContinue's reason, never a server error; its start key may
not climb out of the prefix (path.Clean must leave it as it is).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson

from ..machinery import errors, gojson

VERSION = "meta.k8s.io/v1"
_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_INVALID = "continue key is not valid"
#: the token's fields and the Go types they decode into
_FIELDS = {"v": "string", "rv": "int64", "start": "string"}
_INT64 = (-(2**63), 2**63 - 1)


class _Number(str):
    """A JSON number's literal text (Go reports a number it cannot store by its text)."""


class _Object(list):
    """A JSON object's members, in document order."""


def encode(key: str, prefix: str, rev: int) -> str:
    """The token that continues a list under `prefix` after `key` (a key under it) at `rev`."""
    token = orjson.dumps({"v": VERSION, "rv": rev, "start": key[len(prefix):]})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def next_after(key: str, prefix: str, rev: int) -> str:
    """The token of a page whose last key is `key`: the next page starts just past it."""
    return encode(key + "\x00", prefix, rev)


def decode(token: str, prefix: str) -> tuple[str, int]:
    """(the key to list from, the revision) of a token, or a 400 with DecodeContinue's reason."""
    try:
        return _decode(token, prefix)
    except ValueError as e:
        raise errors.bad_request(f"invalid continue token: {e}") from None


def _decode(token: str, prefix: str) -> tuple[str, int]:
    data = _base64(token.encode("utf-8", "surrogateescape"))
    syntax, kind = gojson.check_valid(data)
    if syntax is not None:
        raise ValueError(f"{_INVALID}: {syntax}")
    if kind not in ("object", "null"):
        raise ValueError(f"{_INVALID}: json: cannot unmarshal {kind} into Go value of type storage.continueToken")
    fields = _fields(data) if kind == "object" else {}
    version, rv, start = fields.get("v", ""), fields.get("rv", 0), fields.get("start", "")
    if version != VERSION:
        raise ValueError(f"{_INVALID}: server does not recognize this encoded version {version}")
    if rv == 0:
        raise ValueError(f"{_INVALID}: incorrect encoded start resourceVersion (version {VERSION})")
    if not start:
        raise ValueError(f"{_INVALID}: encoded start key empty (version {VERSION})")
    key = start if start.startswith("/") else "/" + start
    if _clean(key) != key:
        raise ValueError(f"{_INVALID}: {start}")
    return prefix + key[1:], rv


def _base64(text: bytes) -> bytes:
    """base64.RawURLEncoding.DecodeString: line breaks skipped, any other byte outside the alphabet
    (padding included) refused at its offset, as is a last group of one character."""
    kept = [(i, c) for i, c in enumerate(text) if c not in b"\r\n"]
    for i, c in kept:
        if c not in _ALPHABET:
            raise ValueError(f"{_INVALID}: illegal base64 data at input byte {i}")
    if len(kept) % 4 == 1:
        raise ValueError(f"{_INVALID}: illegal base64 data at input byte {kept[-1][0]}")
    body = bytes(c for _, c in kept)
    return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))


def _fields(data: bytes) -> dict[str, Any]:
    """The token's fields as json.Unmarshal fills continueToken: keys matched case-insensitively, a
    null left as the zero value, the first value of the wrong type reported (in document order)."""
    pairs = json.loads(data.decode("utf-8", "replace"), object_pairs_hook=_Object, parse_int=_Number,
                       parse_float=_Number)
    out: dict[str, Any] = {}
    first_error = None
    for name, value in pairs:
        field = name if name in _FIELDS else next((f for f in _FIELDS if f == name.lower()), None)
        if field is None or value is None:
            continue
        error = _type_error(field, value)
        if error is None:
            out[field] = int(value) if _FIELDS[field] == "int64" else value
        elif first_error is None:
            first_error = error
    if first_error is not None:
        raise ValueError(f"{_INVALID}: {first_error}")
    return out


def _type_error(field: str, value: Any) -> str | None:
    want = _FIELDS[field]
    if isinstance(value, _Number):
        if want == "int64":
            try:
                if _INT64[0] <= int(value) <= _INT64[1]:
                    return None
            except ValueError:
                pass
        kind = f"number {value}" if want == "int64" else "number"
    elif isinstance(value, str):
        if want == "string":
            return None
        kind = "string"
    else:
        kind = {bool: "bool", list: "array", _Object: "object"}[type(value)]
    return f"json: cannot unmarshal {kind} into Go struct field continueToken.{field} of type {want}"


def _clean(path: str) -> str:
    """Go's path.Clean of a rooted path."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)
