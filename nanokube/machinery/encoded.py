"""The JSON of values that no longer change, by identity, so a write that keeps a value of the
object it replaces (a status write keeps its object's spec and the managedFields entries' FieldsV1
objects, which creates of one shape and status writes of one kind share; a status patch met before
keeps its remembered status) does not encode it again.

Only values that are never changed again are remembered: those of an object handed to the watch
cache (which is never changed in place) and those remembered to be shared by several objects. An
entry holds its value, so the id it is found by cannot be another object's while it is here. The
oldest entries go first once there are `_LIMIT` of them or their JSON passes `_SIZE_MAX` bytes (an
OrderedDict's oldest leaves in O(1); a dict's `next(iter(d))` walks the slots its deletions left)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

#: id(value) -> (value, its JSON as an orjson.Fragment, the JSON)
_KNOWN: OrderedDict[int, tuple[Any, orjson.Fragment, bytes]] = OrderedDict()
_LIMIT = 4096
_SIZE_MAX = 16 << 20
#: bytes of JSON in _KNOWN
_size = 0


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


def framing(value: Any, least: int) -> orjson.Fragment | None:
    """`fragment(value)` where its JSON has `least` bytes or more (framing a smaller value in a copy
    of its container costs more than encoding it); None for a smaller one, still remembered."""
    hit = _KNOWN.get(id(value))
    if hit is None or hit[0] is not value:
        hit = remember(value, memoryview(orjson.dumps(value)).tobytes())
    return hit[1] if len(hit[2]) >= least else None


def alias(value: Any, same: Any) -> None:
    """`same` has `value`'s JSON (the watch cache's shared copy of a written spec) and will not
    change: remembered with it, if `value`'s is."""
    if same is value:
        return
    hit = _KNOWN.get(id(value))
    if hit is not None and hit[0] is value:
        _keep(same, (same, hit[1], hit[2]))


def remember(value: Any, encoded: bytes) -> tuple[Any, orjson.Fragment, bytes]:
    """`encoded` is the JSON of `value`, which will not change any more."""
    entry = (value, orjson.Fragment(encoded), encoded)
    _keep(value, entry)
    return entry


def _keep(value: Any, entry: tuple[Any, orjson.Fragment, bytes]) -> None:
    global _size
    if len(entry[2]) > _SIZE_MAX // 16:  # one value does not push out many
        return
    gone = _KNOWN.pop(id(value), None)
    if gone is not None:
        _size -= len(gone[2])
    while _KNOWN and (len(_KNOWN) >= _LIMIT or _size + len(entry[2]) > _SIZE_MAX):
        _size -= len(_KNOWN.popitem(last=False)[1][2])
    _KNOWN[id(value)] = entry
    _size += len(entry[2])
