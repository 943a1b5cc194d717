import copy

from nanokube.registry import events
from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.group == "events.k8s.io")
S = RES.strategy


def event(**extra):
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-1", "action": "Scale", "reason": "Scaled", "type": "Normal",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web"}, "note": "scaled up", **extra}


def test_registration_shares_core_storage():
    assert (RES.versions, RES.storage_version, RES.short_names) == (["v1"], "v1", ("ev",))
    assert RES.storage_alias == ("", "events")
    assert RES.key("default", "web.1") == "/registry/events/default/web.1"


def test_conversion_round_trip():
    obj = event(deprecatedCount=0)
    core = S.to_storage(obj, "v1")
    assert core["message"] == "scaled up"
    assert core["involvedObject"]["name"] == "web"
    assert core["reportingComponent"] == "example.com/ctl"
    assert "note" not in core and "apiVersion" not in core
    back = S.from_storage(core, "v1")
    # with the struct fields Go always encodes (their zero values: {} and null)
    assert back == {**{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}, "deprecatedSource": {},
                    "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None}


def test_core_event_reads_as_events_k8s_io():
    core = {"metadata": {"name": "p.1", "namespace": "default"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "Pulled", "source": {"component": "kubelet", "host": "n1"}, "count": 3,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z"}
    out = S.from_storage(core, "v1")
    assert (out["note"], out["regarding"], out["deprecatedSource"], out["deprecatedCount"]) == (
        "Pulled", {"kind": "Pod", "name": "p"}, {"component": "kubelet", "host": "n1"}, 3)
    assert out["deprecatedLastTimestamp"] == "2026-01-01T00:01:00Z"
    assert "message" in core


def test_valid_event():
    assert S.validate(S.to_storage(event(), "v1")) == []


def test_strict_rules():
    obj = event(type="Info", deprecatedCount=2, deprecatedSource={"component": "x"}, series={"count": 1})
    for f in ("eventTime", "action", "reportingInstance"):
        del obj[f]
    obj["note"] = "x" * 1025
    errs = {(e.reason, e.field, e.detail) for e in S.validate(S.to_storage(obj, "v1"))}
    assert ("FieldValueRequired", "eventTime", "") in errs
    assert ("FieldValueInvalid", "type", "has invalid value: Info") in errs
    assert ("FieldValueInvalid", "deprecatedCount", "needs to be unset") in errs
    assert ("FieldValueInvalid", "deprecatedSource", "needs to be unset") in errs
    assert ("FieldValueInvalid", "series.count", "should be at least 2") in errs
    assert ("FieldValueRequired", "series.lastObservedTime", "") in errs
    obj = event(action="", reportingController="", note="x" * 1025)
    errs = {(e.reason, e.field, e.detail) for e in S.validate(S.to_storage(obj, "v1"))}
    assert ("FieldValueRequired", "action", "") in errs
    assert ("FieldValueRequired", "reportingController", "") in errs
    assert ("FieldValueInvalid", "message", "can have at most 1024 characters") in errs


def test_cluster_scoped_regarding_needs_default_namespace():
    obj = event(regarding={"kind": "Node", "name": "n1"})
    obj["metadata"]["namespace"] = "team-a"
    errs = S.validate(S.to_storage(obj, "v1"))
    assert [(e.field, e.detail) for e in errs] == [("involvedObject.namespace", "does not match event.namespace")]


def test_update_immutability():
    old = S.to_storage(event(), "v1")
    new = copy.deepcopy(old)
    new["message"] = "changed"
    new["series"] = {"count": 2, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}
    assert [(e.field, e.detail) for e in S.validate_update(new, old)] == [("message", "field is immutable")]


def test_columns():
    strat = events.EventStrategy(clock=lambda: 1_767_225_900.0)  # 2026-01-01T00:05:00Z
    core = S.to_storage(event(series={"count": 4, "lastObservedTime": "2026-01-01T00:04:00.000000Z"}), "v1")
    cells = {c.name: c.fn(core) for c in strat.columns}
    assert cells == {"Last Seen": "60s", "Type": "Normal", "Reason": "Scaled", "Object": "deployment/web",
                     "Subobject": "", "Source": "example.com/ctl, ctl-1", "Message": "scaled up",
                     "First Seen": "5m", "Count": 4, "Name": "web.1"}
    assert [c.name for c in strat.columns if c.priority == 0] == ["Last Seen", "Type", "Reason", "Object", "Message"]


def test_field_selectors():
    core = S.to_storage(event(), "v1")
    assert S.field_selectors["regarding.name"](core) == "web"
    assert S.field_selectors["reportingController"](core) == "example.com/ctl"


def test_the_two_shapes_convert_field_for_field_in_any_order_each_time():
    """The conversion's plan is remembered by the fields' order: every order of an Event's fields
    (kind and apiVersion among them, both names of a renamed field too) converts as renaming each
    field in place would, for a second Event of the same fields as for the first."""
    import itertools

    from nanokube.registry.event_encoding import events_v1_encoding
    from nanokube.registry.events import _RENAMES, _TO_EVENTS, from_core, to_core

    fields = ("kind", "apiVersion", "metadata", "note", "message", "regarding", "reason")
    for n in range(0, 5):
        for keys in itertools.permutations(fields, n):
            for round_ in range(2):
                obj = {k: (k, round_) for k in keys}
                core = {_RENAMES.get(k, k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
                assert list(to_core(obj).items()) == list(core.items()), keys
                back = {_TO_EVENTS.get(k, k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
                events_v1_encoding(back)  # the fields always encoded follow the renamed ones
                assert list(from_core(obj).items()) == list(back.items()), keys


def test_an_update_compares_unset_fields_as_go_values():
    """A stored Event written before its zero fields were encoded (no source, no reportingInstance)
    is no different from one that has them: both decode to the same Go struct."""
    old = S.to_storage(event(), "v1")
    old.pop("reportingInstance")
    new = {**old, "source": {}, "reportingInstance": "", "firstTimestamp": None}
    assert [e for e in events.validate_event_update(new, old) if "immutable" in str(e)] == []
    assert [str(e) for e in events.validate_event_update({**new, "source": {"component": "x"}}, old)
            if "immutable" in str(e)] != []
