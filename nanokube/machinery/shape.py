"""The shape of a decoded JSON object, as a key for work that depends on its shape alone.

A scheduler's FailedScheduling Events, a ReplicaSet's pods and a node's certificate requests
each come in one shape: work that depends only on which fields there are, what types they hold
and which are zeros (a create's managedFields) is done once per shape and remembered
under `signature`, which is built mostly in C (`tuple` and `map` over each map's keys and
values) instead of a Python step per field."""

from __future__ import annotations

from operator import truth
from typing import Any

import orjson

#: the types a decoded JSON value has
_JSON = frozenset({str, int, float, bool, type(None), dict, list})


def signature(obj: dict[str, Any], known: tuple[dict, tuple | None] | None = None) -> tuple | None:
    """A key equal for two maps exactly when they have the same keys in the same order, values of
    the same exact types and the same zeros (false, 0, "", empty: a field manager leaves an
    omitempty value field's zero out), nested maps of equal signatures and lists of the same JSON
    (their contents whole, as orjson encodes them); None when a map holds something that is not a
    JSON value, or a list something orjson cannot encode. `known`: a map of `obj`'s own, as that
    very object, with its signature already taken (a remembered spec's, apiserver/decoded_specs.py)."""
    values = obj.values()
    types = tuple(map(type, values))
    if not _JSON.issuperset(types):
        return None
    zeros = None if all(values) else tuple(map(truth, values))  # (mostly none: one look in C)
    if dict not in types and list not in types:
        return (tuple(obj), types, zeros)
    nested: list[Any] = []
    for v in values:
        t = type(v)
        if t is dict:
            s = known[1] if known is not None and v is known[0] else signature(v)
            if s is None:
                return None
            nested.append(s)
        elif t is list:
            try:
                nested.append(orjson.dumps(v))
            except TypeError:  # orjson.JSONEncodeError: a value that is not JSON, or an integer past 64 bits
                return None
    return (tuple(obj), types, zeros, tuple(nested))
