"""events.k8s.io/v1: Events, the same objects as core v1 events.

Upstream stores events once, in core's shape; events.k8s.io/v1 is another
view of them. Here too: this resource is stored in core events' storage (see
`storage_alias`) and converts between the two shapes on the way in and out:

    events.k8s.io/v1              core/v1
    note                          message
    regarding                     involvedObject
    reportingController           reportingComponent
    deprecatedSource              source
    deprecatedFirstTimestamp      firstTimestamp
    deprecatedLastTimestamp       lastTimestamp
    deprecatedCount               count
"""

from __future__ import annotations

from operator import itemgetter
from typing import Callable

from ..clock import REAL
from .apps import api_doc
from .base import Column, Obj, Resource, Strategy, register
from .core_printing import NAME_DOC, doc, since
from .event_encoding import core_encoding, encode_planned, events_v1_plan, same_value
from ..machinery.validation import FieldError, dns1123_subdomain, immutable, invalid, qualified_name, required

Clock = Callable[[], float]

# events.k8s.io/v1 field -> core/v1 field; unlisted fields share their name.
_RENAMES = {
    "note": "message",
    "regarding": "involvedObject",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_EVENTS = {v: k for k, v in _RENAMES.items()}
_SKIP = ("apiVersion", "kind")

_REPORTING_INSTANCE_LIMIT = 128
_ACTION_LIMIT = 128
_REASON_LIMIT = 128
_NOTE_LIMIT = 1024


def to_core(obj: Obj) -> Obj:
    return _renamed(obj, _RENAMES, _TO_CORE, None)[0]


def from_core(obj: Obj) -> Obj:
    out, encoding = _renamed(obj, _TO_EVENTS, _FROM_CORE, events_v1_plan)
    encode_planned(out, encoding)
    return out


def _renamed(obj: Obj, renames: dict[str, str], plans: dict[tuple, tuple], encoding) -> tuple[Obj, tuple | None]:
    """`obj` without apiVersion and kind, its fields renamed by `renames`, in its order, and the plan
    that `encoding` (None: none) makes for encoding its new fields. Both are remembered by the
    object's fields in their order: an events.k8s.io/v1 patch converts its Event once in and four
    times out (the patched object, managedFields' old and new, the response)."""
    keys = tuple(obj)
    plan = plans.get(keys)
    if plan is None:
        kept = [k for k in keys if k not in _SKIP]
        values = itemgetter(*kept) if len(kept) > 1 else (lambda o, k=kept[0]: (o[k],)) if kept else (lambda o: ())
        if len(plans) >= 1024:
            plans.clear()
        names = tuple(renames.get(k, k) for k in kept)
        plan = plans[keys] = (names, values, encoding and encoding(tuple(dict.fromkeys(names))))
    names, values, planned = plan
    return dict(zip(names, values(obj))), planned


#: `_renamed`'s plans (the new names, what reads the kept values, the encoding) by the fields of an object
_TO_CORE: dict[tuple, tuple] = {}
_FROM_CORE: dict[tuple, tuple] = {}


# --- validation (in core shape, with core's field names, as upstream reports them) -----


def _legacy_errors(ev: Obj) -> list[FieldError]:
    """legacyValidateEvent for an event that has eventTime (events.k8s.io requires it)."""
    errs: list[FieldError] = []
    ns = (ev.get("metadata") or {}).get("namespace", "")
    involved_ns = (ev.get("involvedObject") or {}).get("namespace", "")
    if ev.get("eventTime"):
        if not involved_ns and ns not in ("default", "kube-system"):
            errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = ev.get("reportingComponent", "")
        if not controller:
            errs.append(required("reportingController"))
        if msgs := qualified_name(controller):  # (a comprehension over none made a frame each Event)
            errs += [invalid("reportingController", controller, m) for m in msgs]
        for f, limit in (("reportingInstance", _REPORTING_INSTANCE_LIMIT), ("action", _ACTION_LIMIT),
                         ("reason", _REASON_LIMIT)):
            if not ev.get(f):
                errs.append(required(f))
            if len(ev.get(f) or "") > limit:
                errs.append(invalid(f, "", f"can have at most {limit} characters"))
        if len(ev.get("message") or "") > _NOTE_LIMIT:
            errs.append(invalid("message", "", f"can have at most {_NOTE_LIMIT} characters"))
    elif involved_ns != ns and (involved_ns or ns not in ("", "default")):
        errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    if msgs := dns1123_subdomain(ns):
        errs += [invalid("namespace", ns, m) for m in msgs]
    return errs


def _series_errors(ev: Obj) -> list[FieldError]:
    series = ev.get("series")
    if series is None:
        return []
    errs: list[FieldError] = []
    if series.get("count", 0) < 2:
        errs.append(invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(required("series.lastObservedTime"))
    return errs


def validate_event_create(ev: Obj) -> list[FieldError]:
    """ValidateEventCreate for requests at events.k8s.io/v1 (the strict rules)."""
    errs = _legacy_errors(ev) + _series_errors(ev)
    if not ev.get("eventTime"):
        errs.append(required("eventTime"))
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(invalid("type", "", f"has invalid value: {ev.get('type', '')}"))
    for core_field, name in (("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
                             ("count", "deprecatedCount")):
        if ev.get(core_field):
            errs.append(invalid(name, "", "needs to be unset"))
    source = ev.get("source") or {}
    if source.get("component") or source.get("host"):
        errs.append(invalid("deprecatedSource", "", "needs to be unset"))
    return errs


_IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "type",
              "action", "related", "reportingComponent", "reportingInstance")
_UPDATE_PATHS = {"reportingComponent": "reportingController"}


def validate_event_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = _legacy_errors(new)
    if new.get("series") != old.get("series"):
        errs += _series_errors(new)
    immutables = [*map(new.get, _IMMUTABLE)]
    if immutables != [*map(old.get, _IMMUTABLE)]:  # mostly the same objects (a series refresh): one comparison
        for f, v in zip(_IMMUTABLE, immutables):
            if not same_value(v, old.get(f)):
                errs.append(immutable(_UPDATE_PATHS.get(f, f), v))
    if (new.get("eventTime") or "")[:26] != (old.get("eventTime") or "")[:26]:
        errs.append(immutable("eventTime", new.get("eventTime")))
    return errs


# --- printing -----------------------------------------------------------------------


def _doc(field: str) -> str:
    return doc("Event", field)


def _first_seen(ev: Obj, clock: Clock) -> str:
    return since(ev.get("firstTimestamp") or ev.get("eventTime"), clock)


def _last_seen(ev: Obj, clock: Clock) -> str:
    if ev.get("series"):
        return since(ev["series"].get("lastObservedTime"), clock)
    if ev.get("lastTimestamp"):
        return since(ev["lastTimestamp"], clock)
    return _first_seen(ev, clock)


def _count(ev: Obj) -> int:
    if ev.get("series"):
        return ev["series"].get("count", 0)
    return ev.get("count") or 1


def _target(ev: Obj) -> str:
    ref = ev.get("involvedObject") or {}
    kind = (ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def _source(ev: Obj) -> str:
    src = ev.get("source") or {}
    component = src.get("component") or ev.get("reportingComponent") or ""
    instance = src.get("host") or ev.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else component


def event_columns(clock: Clock) -> list[Column]:
    """printEvent's columns (over the stored, core-shaped event); Name comes last, as upstream."""
    return [
        Column("Last Seen", "string", lambda o: _last_seen(o, clock), _doc("lastTimestamp")),
        Column("Type", "string", lambda o: o.get("type", ""), _doc("type")),
        Column("Reason", "string", lambda o: o.get("reason", ""), _doc("reason")),
        Column("Object", "string", _target, _doc("involvedObject")),
        Column("Subobject", "string", lambda o: (o.get("involvedObject") or {}).get("fieldPath", ""),
               api_doc("io.k8s.api.core.v1.ObjectReference", "fieldPath"), priority=1),
        Column("Source", "string", _source, _doc("source"), priority=1),
        Column("Message", "string", lambda o: (o.get("message") or "").strip(), _doc("message")),
        Column("First Seen", "string", lambda o: _first_seen(o, clock), _doc("firstTimestamp"), priority=1),
        Column("Count", "string", _count, _doc("count"), priority=1),
        Column("Name", "string", lambda o: o["metadata"]["name"],
               NAME_DOC, format="name", priority=1),
    ]


def _ref(field: str):
    return lambda o: (o.get("involvedObject") or {}).get(field, "")


class EventStrategy(Strategy):
    """events.k8s.io/v1 Events; hooks after `to_storage` see the core shape."""

    track_generation = False
    field_selectors = {
        **{f"regarding.{f}": _ref(f) for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                                                "fieldPath")},
        "reason": lambda o: o.get("reason", ""),
        "reportingController": lambda o: o.get("reportingComponent", ""),
        "type": lambda o: o.get("type", ""),
    }

    def __init__(self, clock: Clock = REAL.now) -> None:
        self.columns = event_columns(clock)

    def to_storage(self, obj: Obj, version: str) -> Obj:
        return to_core(obj)

    def prepare_for_create(self, obj: Obj) -> None:
        core_encoding(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        core_encoding(new)

    def from_storage(self, obj: Obj, version: str) -> Obj:
        return from_core(obj)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_event_create(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_event_update(new, old)


register(Resource("events.k8s.io", "events", "Event", ["v1"], namespaced=True, short_names=("ev",),
                  strategy=EventStrategy(), storage_alias=("", "events")))
