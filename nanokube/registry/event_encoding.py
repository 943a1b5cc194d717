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


def _plan(keys: tuple, always: tuple, omitted: frozenset) -> tuple:
    """What encoding an Event of these fields (in this order) takes: the omitempty fields it has
    (dropped where unset), the always-encoded ones it has whose zero is not null (null -> zero),
    and the always-encoded ones it lacks (appended, in `always`' order, as assigning them would)."""
    have = set(keys)
    return (tuple(f for f in keys if f in omitted),
            tuple((f, zero) for f, zero in always if f in have and zero is not None),
            tuple((f, zero) for f, zero in always if f not in have))


def encode_planned(ev: Obj, plan: tuple) -> None:
    """`ev` encoded by the `plan` made for its fields, in place."""
    drop, fill, add = plan
    for f in drop:
        v = ev[f]
        if not v and (v is None or v == "" or type(v) is int):
            del ev[f]
    for f, zero in fill:
        if ev[f] is None:
            ev[f] = {} if zero == {} else zero
    for f, zero in add:
        ev[f] = {} if zero == {} else zero


def core_plan(keys: tuple) -> tuple:
    return _plan(keys, _CORE_ALWAYS, _CORE_OMITTED)


def events_v1_plan(keys: tuple) -> tuple:
    return _plan(keys, _EVENTS_ALWAYS, _EVENTS_OMITTED)


def _encode(ev: Obj, plans: dict[tuple, tuple], make) -> None:
    """Every Event written is encoded twice (stored, served), mostly with the same fields in the
    same order: its plan is remembered by them, so only what the plan names is looked at."""
    keys = tuple(ev)
    plan = plans.get(keys)
    if plan is None:
        if len(plans) >= 1024:
            plans.clear()
        plan = plans[keys] = make(keys)
    encode_planned(ev, plan)


#: `_encode`'s plans by an Event's fields
_CORE_PLANS: dict[tuple, tuple] = {}
_EVENTS_PLANS: dict[tuple, tuple] = {}


def core_encoding(ev: Obj) -> None:
    """`ev` (core/v1's shape) as Go encodes core/v1's Event, in place."""
    _encode(ev, _CORE_PLANS, core_plan)


def events_v1_encoding(ev: Obj) -> None:
    """`ev` (events.k8s.io/v1's shape, renamed from core/v1's) as Go encodes that API's Event, in place."""
    _encode(ev, _EVENTS_PLANS, events_v1_plan)


def same_value(a: Any, b: Any) -> bool:
    """Do two values of a top-level Event field decode to the same Go value (absent, null and the
    zero value all read as unset)?"""
    if a == b:
        return True
    return (_unset(a) or a == {}) and (_unset(b) or b == {})
