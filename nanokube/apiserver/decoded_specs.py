"""A created object's spec decoded and defaulted once per JSON (issue 19).

The pods of one template (a ReplicaSet's, a Job's, a scheduler benchmark's, a queue of pods that
fit nowhere) send one spec over and over, and each create walked it three times before admission:
decoding it as its Go struct (structural.check: types, nulls, canonical forms, sorted map keys),
defaulting it, and taking its shape for the create's managedFields (shape.signature). Where a
strategy's defaulting reads and writes the spec alone (Strategy.defaults_spec_only), a spec that
decoded clean (no error, no unknown field, no empty list held for validation) is remembered by its
JSON as it stood once defaulted; a create sending an equal spec takes a fresh copy of that and
decodes only the rest of its body, and its managedFields reuse the spec's shape.

Equal means the same JSON and `==` to the spec that was remembered: the JSON tells 1 from 1.0
and true, `==` a list from a tuple and a NaN from null, so the two decode alike value for value.
Validation, admission and everything after them still see every create's whole object."""

from __future__ import annotations

from typing import Any

import orjson

from nanokube.machinery import shape

#: remembered specs, by (strategy type, kind, version, the spec's JSON as sent)
_SPECS: dict[tuple, Remembered] = {}
_LIMIT = 1024
#: lookups that missed in a row, by (strategy type, kind, version): specs that never repeat (each
#: pod's env of its own) stop paying for their key after this many, trying once in as many again
_MISSES: dict[tuple, int] = {}
_TRIES = 32


class Remembered:
    """A spec as sent (decoded from its key on first use), as it stood defaulted (JSON) and its shape."""

    __slots__ = ("sent", "defaulted", "signature")

    def __init__(self, defaulted: bytes) -> None:
        self.sent: Any = None
        self.defaulted = defaulted
        self.signature: tuple | None = None

    def copy(self) -> tuple[dict, tuple | None]:
        """A fresh copy of the defaulted spec and its shape.signature."""
        spec = orjson.loads(self.defaulted)
        if self.signature is None:
            self.signature = shape.signature(spec)
        return spec, self.signature


def key(strategy: Any, kind: str, version: str, body: Any, strict_texts: bool) -> tuple | None:
    """What a create's spec is remembered by, or None where it is not: the strategy defaults
    more than the spec, the body has no spec object, or its decoding has strict texts of its own
    to order (`strict_texts`: repeated keys, a number out of range)."""
    if not strategy.defaults_spec_only or strict_texts or type(body) is not dict:
        return None
    spec = body.get("spec")
    if type(spec) is not dict:
        return None
    base = (type(strategy), kind, version)
    misses = _MISSES.get(base, 0)
    if misses >= _TRIES and misses % _TRIES:
        _MISSES[base] = misses + 1
        return None
    try:
        return (*base, orjson.dumps(spec))
    except TypeError:  # orjson.JSONEncodeError: not JSON (an integer past 64 bits)
        return None


def find(k: tuple | None, spec: Any) -> Remembered | None:
    """The remembered spec equal to `spec`, which has key `k`."""
    if k is None:
        return None
    hit = _SPECS.get(k)
    if hit is not None:
        if hit.sent is None:
            hit.sent = orjson.loads(k[-1])
        if hit.sent == spec:
            _MISSES[k[:-1]] = 0
            return hit
    base = k[:-1]
    if len(_MISSES) >= _LIMIT:
        _MISSES.clear()
    _MISSES[base] = _MISSES.get(base, 0) + 1
    return None


def remember(k: tuple, spec: dict) -> None:
    """Remember `spec`, decoded clean and defaulted, for the creates whose spec has key `k`."""
    try:
        defaulted = orjson.dumps(spec)
    except TypeError:
        return
    if len(_SPECS) >= _LIMIT:
        _SPECS.clear()
    _SPECS[k] = Remembered(defaulted)
