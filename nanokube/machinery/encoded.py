"""The JSON of values that no longer change, by identity, so a write that keeps a value of the
object it replaces (a status write keeps the managedFields entries' FieldsV1 objects, which
creates of one shape and status writes of one kind share; a status patch met before keeps its
remembered status) does not encode it again.

Only values that are never changed again are remembered: those of an object handed to the watch
cache (which is never changed in place) and those remembered to be shared by several objects. An
entry holds its value, so the id it is found by cannot be another object's while it is here."""

from __future__ import annotations

from typing import Any

import orjson

#: id(value) -> (value, its JSON as an orjson.Fragment, the JSON)
_KNOWN: dict[int, tuple[Any, orjson.Fragment, bytes]] = {}
_LIMIT = 4096


def known(value: Any) -> bytes | None:
    """The JSON of `value` if it is remembered."""
    hit = _KNOWN.get(id(value))
    return hit[2] if hit is not None and hit[0] is value else None


def known_fragment(value: Any) -> orjson.Fragment | None:
    """`value`'s JSON as an orjson.Fragment if it is remembered."""
    hit = _KNOWN.get(id(value))
    return hit[1] if hit is not None and hit[0] is value else None


def fragment(value: Any) -> orjson.Fragment:
    """`value`'s JSON as an orjson.Fragment (encoded now and remembered, if it was not): for a
    value that will not change any more."""
    hit = _KNOWN.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    return remember(value, memoryview(orjson.dumps(value)).tobytes())[1]


def remember(value: Any, encoded: bytes) -> tuple[Any, orjson.Fragment, bytes]:
    """`encoded` is the JSON of `value`, which will not change any more."""
    if len(_KNOWN) >= _LIMIT:
        del _KNOWN[next(iter(_KNOWN))]
    entry = _KNOWN[id(value)] = (value, orjson.Fragment(encoded), encoded)
    return entry
