"""An Event's top-level fields as kube-apiserver serves them, Go's encoding of its types.

Upstream decodes a write into the Go struct and encodes the struct when it serves it: a field
without `omitempty` (core/v1's reportingComponent and reportingInstance) or of a struct type
(source, the timestamps: `omitempty` leaves structs alone, and a zero Time encodes as null) is
always there, and an `omitempty` field left at its zero value never is. Both APIs serve one
stored object, kept here in core/v1's encoding, so core/v1 reads serve it as stored and the
events.k8s.io/v1 view only renames and adjusts (`events_v1_encoding`)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

#: core/v1 Event fields always encoded, with what an unset one encodes as ({}: an empty struct)
_CORE_ALWAYS = (("involvedObject", {}), ("source", {}), ("firstTimestamp", None), ("lastTimestamp", None),
                ("eventTime", None), ("reportingComponent", ""), ("reportingInstance", ""))
#: core/v1 Event fields left out when unset (omitempty scalars and pointers)
_CORE_OMITTED = frozenset(("reason", "message", "count", "type", "series", "action", "related"))
#: events.k8s.io/v1 fields always encoded, and the omitempty ones whose core names are always encoded
_EVENTS_ALWAYS = (("regarding", {}), ("deprecatedSource", {}), ("deprecatedFirstTimestamp", None),
                  ("deprecatedLastTimestamp", None), ("eventTime", None))
_EVENTS_OMITTED = frozenset(("reportingController", "reportingInstance"))


def _unset(v: Any) -> bool:
    return v is None or v == "" or (v == 0 and type(v) is int)


def _encode(ev: Obj, always: tuple, omitted: frozenset) -> None:
    """Every Event written is encoded twice (stored, served) and its fields are mostly set
    strings: only the omitempty fields it has are looked at, and `_unset` only for a falsy one."""
    for f in omitted.intersection(ev):
        v = ev[f]
        if not v and (v is None or v == "" or type(v) is int):
            del ev[f]
    for f, zero in always:
        if ev.get(f) is None:
            ev[f] = {} if zero == {} else zero


def core_encoding(ev: Obj) -> None:
    """`ev` (core/v1's shape) as Go encodes core/v1's Event, in place."""
    _encode(ev, _CORE_ALWAYS, _CORE_OMITTED)


def events_v1_encoding(ev: Obj) -> None:
    """`ev` (events.k8s.io/v1's shape, renamed from core/v1's) as Go encodes that API's Event, in place."""
    _encode(ev, _EVENTS_ALWAYS, _EVENTS_OMITTED)


def same_value(a: Any, b: Any) -> bool:
    """Do two values of a top-level Event field decode to the same Go value (absent, null and the
    zero value all read as unset)?"""
    if a == b:
        return True
    return (_unset(a) or a == {}) and (_unset(b) or b == {})
