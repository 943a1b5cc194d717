"""x-kubernetes-validations: CRD-time checks and object validation."""

import asyncio
import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver.apiextensions.cel_rules import (
    compile_rules, has_blocking_errors, not_checked_error,
)
from nanokube.machinery.validation import FieldError, required
from tests.cel_work import count_cel_work
from tests.served import served

from .test_serving import GROUP, crd
from tests.controllers import tries

BASE = "spec.versions[0].schema.openAPIV3Schema"


def crd_schema(spec_props, spec_rules=(), **spec_extra):
    return {"type": "object", "properties": {"spec": {
        "type": "object", "properties": spec_props, "x-kubernetes-validations": list(spec_rules), **spec_extra}}}


def obj(spec, name="x"):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def errors_of(schema):
    rules, errs = compile_rules(schema, BASE)
    return [str(e) for e in errs]


def validate(schema, new, old=None, warnings=None):
    rules, errs = compile_rules(schema, BASE)
    assert errs == []
    return [str(e) for e in rules.validate(new, old, warnings)]


REPLICAS = {"replicas": {"type": "integer"}, "minReplicas": {"type": "integer"}}


def test_no_rules_compiles_to_none():
    assert compile_rules(crd_schema(REPLICAS), BASE) == (None, [])


def test_rule_message_and_default_message():
    s = crd_schema(REPLICAS, [{"rule": "self.minReplicas <= self.replicas", "message": "replicas must be >= min"},
                              {"rule": "self.replicas < 100"}])
    assert validate(s, obj({"replicas": 1, "minReplicas": 2})) == ["spec: Invalid value: replicas must be >= min"]
    assert validate(s, obj({"replicas": 200, "minReplicas": 2})) == [
        "spec: Invalid value: failed rule: self.replicas < 100"]
    assert validate(s, obj({"replicas": 5, "minReplicas": 2})) == []


def test_scalar_failures_show_the_value_and_message_expression_wins():
    s = crd_schema({"replicas": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self <= 3", "message": "static", "messageExpression": "'must be <= 3, got ' + string(self)"}]},
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('a')", "message": "starts with a"}]}})
    assert validate(s, obj({"replicas": 5, "name": "bob"})) == [
        "spec.replicas: Invalid value: 5: must be <= 3, got 5",
        'spec.name: Invalid value: "bob": starts with a']


def test_message_expression_that_fails_falls_back_to_message():
    s = crd_schema(REPLICAS, [{"rule": "self.replicas < 3", "message": "too many",
                               "messageExpression": "string(100 / (self.replicas - 5))"}])
    assert validate(s, obj({"replicas": 5})) == ["spec: Invalid value: too many"]


def test_reason_and_field_path():
    s = crd_schema({**REPLICAS, "x.y": {"type": "string"}, "labels": {
        "type": "object", "additionalProperties": {"type": "string"}}}, [
        {"rule": "self.replicas >= 1", "reason": "FieldValueForbidden", "fieldPath": ".replicas", "message": "no"},
        {"rule": "has(self.minReplicas)", "reason": "FieldValueRequired", "fieldPath": ".minReplicas",
         "message": "set it"},
        {"rule": "self.labels.size() < 1", "fieldPath": ".labels['a.b']", "message": "label"},
        {"rule": "false", "fieldPath": "['x.y']", "message": "dotted"}])
    assert validate(s, obj({"replicas": 0, "labels": {"a.b": "c"}, "x.y": "z"})) == [
        "spec.replicas: Forbidden: no", "spec.minReplicas: Required value: set it",
        "spec.labels[a.b]: Invalid value: label", "spec.x.y: Invalid value: dotted"]


def test_rules_on_list_items_and_map_values():
    s = crd_schema({"ports": {"type": "array", "maxItems": 8, "items": {
        "type": "object", "properties": {"port": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.port > 1024", "message": "unprivileged ports only"}]}},
        "env": {"type": "object", "maxProperties": 8, "additionalProperties": {
            "type": "string", "maxLength": 64, "x-kubernetes-validations": [{"rule": "self != ''", "message": "empty"}]}}})
    assert validate(s, obj({"ports": [{"port": 8080}, {"port": 80}], "env": {"A": "1", "B": ""}})) == [
        "spec.ports[1]: Invalid value: unprivileged ports only", 'spec.env[B]: Invalid value: "": empty']


def test_kubernetes_libraries_in_rules():
    s = crd_schema({"cpu": {"type": "string", "maxLength": 32}, "cidr": {"type": "string", "maxLength": 64},
                    "name": {"type": "string", "maxLength": 63}}, [
        {"rule": "quantity(self.cpu).isLessThan(quantity('4'))", "message": "cpu"},
        {"rule": "cidr(self.cidr).containsIP('10.0.0.1')", "message": "cidr"},
        {"rule": "!format.dns1123Label().validate(self.name).hasValue()", "message": "name"}])
    assert validate(s, obj({"cpu": "500m", "cidr": "10.0.0.0/8", "name": "ok"})) == []
    assert validate(s, obj({"cpu": "8", "cidr": "11.0.0.0/8", "name": "Not_OK"})) == [
        "spec: Invalid value: cpu", "spec: Invalid value: cidr", "spec: Invalid value: name"]


def test_root_rule_sees_metadata_name_and_reports_nil_path():
    s = {"type": "object", "properties": {"spec": {"type": "object"}},
         "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w-')", "message": "name prefix"}]}
    assert validate(s, obj({}, name="w-1")) == []
    assert validate(s, obj({}, name="x")) == ["<nil>: Invalid value: name prefix"]


def test_transition_rule_runs_only_on_update():
    s = crd_schema(REPLICAS, [{"rule": "self.replicas >= oldSelf.replicas", "message": "cannot scale down"}])
    assert validate(s, obj({"replicas": 1})) == []
    assert validate(s, obj({"replicas": 1}), obj({"replicas": 3})) == ["spec: Invalid value: cannot scale down"]
    assert validate(s, obj({"replicas": 4}), obj({"replicas": 3})) == []


def test_transition_rules_correlate_map_list_items_by_key():
    s = crd_schema({"items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "maxItems": 8, "items": {"type": "object", "properties": {
                                  "name": {"type": "string", "maxLength": 8}, "size": {"type": "integer"}},
                                  "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size", "message": "grow"}]}}})
    old = obj({"items": [{"name": "a", "size": 5}, {"name": "b", "size": 5}]})
    new = obj({"items": [{"name": "c", "size": 1}, {"name": "b", "size": 4}]})
    assert validate(s, new, old) == ["spec.items[1]: Invalid value: grow"]


def test_optional_old_self_runs_on_create():
    s = crd_schema(REPLICAS, [{"rule": "oldSelf.hasValue() || self.replicas == 1", "optionalOldSelf": True,
                               "message": "start with one replica"}])
    assert validate(s, obj({"replicas": 3})) == ["spec: Invalid value: start with one replica"]
    assert validate(s, obj({"replicas": 3}), obj({"replicas": 1})) == []


def test_has_of_an_optional_old_self_field():
    """cel-go unwraps an optional for has() as for a selection: `has(oldSelf.mode)` compiles (it read
    'invalid type for field selection: optional(object)') and is false on create."""
    s = crd_schema({"mode": {"type": "string", "maxLength": 8}}, [
        {"rule": "!has(oldSelf.mode) || self.mode == oldSelf.mode.value()", "optionalOldSelf": True,
         "message": "mode is immutable"}])
    assert errors_of(s) == []
    assert validate(s, obj({"mode": "a"})) == []
    assert validate(s, obj({"mode": "a"}), obj({})) == []
    assert validate(s, obj({"mode": "a"}), obj({"mode": "a"})) == []
    assert validate(s, obj({"mode": "b"}), obj({"mode": "a"})) == ["spec: Invalid value: mode is immutable"]


def test_unchanged_values_ratchet_to_warnings():
    s = crd_schema({"name": {"type": "string", "maxLength": 16, "x-kubernetes-validations": [
        {"rule": "self.size() < 3", "message": "short names"}]}, "other": {"type": "integer"}})
    warnings = []
    assert validate(s, obj({"name": "long", "other": 2}), obj({"name": "long", "other": 1}), warnings) == []
    assert warnings == ['spec.name: Invalid value: "long": short names']
    assert validate(s, obj({"name": "longer"}), obj({"name": "long"})) == [
        'spec.name: Invalid value: "longer": short names']


def test_evaluation_errors():
    s = crd_schema({"a": {"type": "integer"}, "v": {"x-kubernetes-int-or-string": True}}, [
        {"rule": "self.a == 1"}, {"rule": "self.v + 1 > 0", "message": "v"}])
    assert validate(s, obj({"v": "x"})) == [
        'spec: Invalid value: "object": no such key: a evaluating rule: self.a == 1',
        "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, "
        "function or macro signature for rule: v"]


def test_per_call_limit_stops_further_rules():
    s = crd_schema({"l": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}}, [
        {"rule": "self.l.all(a, self.l.all(b, a + b >= 0))", "message": "cube"},
        {"rule": "false", "message": "never reached"}])
    assert validate(s, obj({"l": list(range(500))})) == [
        "spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation "
        "rules will be run due to call cost exceeds limit for rule: cube"]
    assert validate(s, obj({"l": [1, 2]})) == ["spec: Invalid value: never reached"]


def test_find_all_over_a_100kb_string_runs_within_upstreams_cost():
    """A regex over a text costs a tenth of the text times a quarter of the pattern, upstream at CRD
    creation (the maxLength) and as it runs: findAll('.') over 100,000 characters is 10,001 of the
    per-call 1,000,000, so the rule is accepted and runs to its answer (fuzz64 saw it take 2.6 s)."""
    s = crd_schema({"s": {"type": "string", "maxLength": 100_000}}, [
        {"rule": "self.s.findAll('.').size() == size(self.s)", "message": "every character"},
        {"rule": "self.s.findAll('b').size() == 0", "message": "no b"}])
    assert errors_of(s) == []
    assert validate(s, obj({"s": "é" * 100_000})) == []
    assert validate(s, obj({"s": "a" * 50_000 + "b" * 50_000})) == ["spec: Invalid value: no b"]


def test_per_object_budget():
    """Each rule is charged what it ran, as upstream's cost tracker measures it: over 370 items
    one costs 960,152, under the per-call limit, and the eleventh runs out of the object's
    10,000,000 budget. The same rules behind a `||` that is already true run nothing and cost
    next to nothing (they were charged their bound, both sides of the `||`, and ran out too)."""
    pairs = "self.l.all(a, self.l.all(b, a + b >= 0))"
    s = crd_schema({"l": {"type": "array", "maxItems": 400, "items": {"type": "integer"}}}, [{"rule": pairs}] * 12)
    assert validate(s, obj({"l": list(range(370))})) == [
        'spec: Invalid value: "object": validation failed due to running out of cost budget, no further validation '
        "rules will be run"]
    assert validate(s, obj({"l": list(range(100))})) == []
    s = crd_schema({"l": {"type": "array", "maxItems": 400, "items": {"type": "integer"}}},
                   [{"rule": f"self.l.size() >= 0 || {pairs}"}] * 12)
    assert validate(s, obj({"l": list(range(370))})) == []


def test_a_cheap_rule_is_charged_for_the_longer_strings_of_either_value(monkeypatch):
    """A cheap rule is charged its bound for the values' sizes: the larger count and the longer
    string of the new and old values, each on its own. Here the new list is the longer and the
    old one holds the long string: charged for 3 strings of 1,000 characters (317), not for 3 of
    one (20, when the sizes were compared as a pair, list size first), so it runs out of a budget
    of 200 that the same update from a short old string stays inside. No interface shows the
    charge short of the 10,000,000 budget, which cheap rules reach only with gigabytes of old
    values: hence the smaller budget here."""
    from nanokube.apiserver.apiextensions import cel_rules

    monkeypatch.setattr(cel_rules, "RUNTIME_BUDGET", 200)
    s = crd_schema({"l": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 1000}}},
                   [{"rule": "self.l.all(x, !x.contains('zz'))"}])
    new = obj({"l": ["a", "b", "c"]})
    assert validate(s, new, obj({"l": ["y"]})) == []
    assert validate(s, new, obj({"l": ["y" * 1000]})) == [
        'spec: Invalid value: "object": validation failed due to running out of cost budget, no further validation '
        "rules will be run"]


def test_message_expressions_spend_the_budget_and_stop_at_the_limit():
    """A messageExpression is charged what it ran from the same budget; over the per-call limit,
    or past what is left, no further rules run, reported at the rule's fieldPath in upstream's
    words (was: its node's path, and its bound charged)."""
    pairs = "self.l.all(a, self.l.all(b, a + b >= 0))"
    items = {"l": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}}
    s = crd_schema(items, [{"rule": "false", "fieldPath": ".l",
                            "messageExpression": f"{pairs} ? 'cheap' : 'never'"}, {"rule": "false", "message": "next"}])
    assert validate(s, obj({"l": list(range(10))})) == ["spec.l: Invalid value: cheap", "spec: Invalid value: next"]
    assert validate(s, obj({"l": list(range(500))})) == [
        'spec.l: Invalid value: "object": no further validation rules will be run due to call cost exceeds limit for '
        f'messageExpression: "{pairs} ? \'cheap\' : \'never\'"']
    spend = {"rule": pairs, "message": "spent"}
    s = crd_schema({"l": {"type": "array", "maxItems": 400, "items": {"type": "integer"}}},
                   [spend] * 10 + [{"rule": "false", "messageExpression": f"{pairs} ? 'm' : 'n'"}])
    assert validate(s, obj({"l": list(range(370))})) == [
        'spec: Invalid value: "object": messageExpression evaluation failed due to running out of cost budget, no '
        "further validation rules will be run"]


CRD_ERRORS = [
    ({"rule": ""}, f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"),
    ({"rule": "true", "message": " "}, "message: Invalid value: \" \": message must be non-empty if specified"),
    ({"rule": "true", "message": "a\nb"}, "message must not contain line breaks"),
    ({"rule": "true &&\ntrue"}, "message: Required value: message must be specified if rule contains line breaks"),
    ({"rule": "true", "messageExpression": " "}, "messageExpression: Required value: messageExpression must be "
                                                  "non-empty if specified"),
    ({"rule": "true", "reason": "Bogus"}, 'reason: Unsupported value: "Bogus": supported values: '
                                          '"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", '
                                          '"FieldValueRequired"'),
    ({"rule": "true", "fieldPath": ".nope"}, 'fieldPath: Invalid value: ".nope": fieldPath must be a valid path'),
    ({"rule": "self.replicas"}, "rule: Invalid value: {\"rule\":\"self.replicas\"}: cel expression must evaluate to "
                                "a bool"),
    ({"rule": "self.nope > 1"}, "compilation failed: ERROR: <input>:1:6: undefined field 'nope'\n | self.nope > 1\n"),
    ({"rule": "self.replicas >"}, "compilation failed: ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>'"),
    ({"rule": "true", "messageExpression": "self.replicas"}, "messageExpression must evaluate to a string"),
    ({"rule": "true", "optionalOldSelf": False}, "optionalOldSelf: Invalid value: false: may not be set if oldSelf "
                                                 "is not used in rule"),
]


@pytest.mark.parametrize("rule,want", CRD_ERRORS)
def test_crd_time_rule_errors(rule, want):
    errs = errors_of(crd_schema(REPLICAS, [rule]))
    assert len(errs) == 1 and want in errs[0], errs


def test_a_dynamic_value_is_not_a_bool():
    s = crd_schema({"v": {"x-kubernetes-int-or-string": True}, "free": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}, [{"rule": "self.v"}, {"rule": "self.free.on"},
                                                                            {"rule": "self.free.on == true"}])
    errs = errors_of(s)
    assert [e.split(": ", 2)[1:] for e in errs] == [
        ["Invalid value", '{"rule":"self.v"}: cel expression must evaluate to a bool'],
        ["Invalid value", '{"rule":"self.free.on"}: cel expression must evaluate to a bool']]


def test_old_self_on_uncorrelatable_items():
    s = crd_schema({"tags": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 4,
                                                                       "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}})
    assert errors_of(s) == [
        f"{BASE}.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: "
        f'"self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within '
        f"{BASE}.properties[spec].properties[tags]"]


def test_static_cost_limits():
    unbounded = crd_schema({"tags": {"type": "array", "items": {"type": "string"}}},
                           [{"rule": "self.tags.all(x, x.contains('gpu'))"}])
    assert errors_of(unbounded) == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by "
        "factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
        "arrays, maps, and strings are declared)",
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost "
        "total exceeding cost limit for entire OpenAPIv3 schema",
        f"{BASE}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds "
        "budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and "
        "maxLength where arrays, maps, and strings are declared)"]
    # upstream accepts maxItems 909090 at maxLength 16 (11 per item) and refuses one more item
    bounded = copy.deepcopy(unbounded)
    tags = bounded["properties"]["spec"]["properties"]["tags"]
    tags["items"]["maxLength"] = 16
    tags["maxItems"] = 909090
    assert errors_of(bounded) == []
    tags["maxItems"] = 909091
    assert errors_of(bounded) == [
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by "
        "factor of 1.000000x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
        "arrays, maps, and strings are declared)"]


def test_a_range_of_a_value_is_over_the_static_limits():
    """cel-go sizes lists.range(n) of a value it cannot read when the CRD is written as math.MaxUint
    integers, so the rule is refused whatever it does with them (it was sized 1,000,000 and this
    one admitted); a written-out n is its own size."""
    spec = {"n": {"type": "integer"}}
    assert errors_of(crd_schema(spec, [{"rule": "lists.range(self.n).size() > 0"}]))[0] == (
        f"{BASE}.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by "
        "factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
        "arrays, maps, and strings are declared)")
    assert errors_of(crd_schema(spec, [{"rule": "lists.range(3000).size() > self.n"}])) == []


def test_cost_is_multiplied_by_cardinality():
    rule = {"rule": "self.all(x, x.contains('gpu'))"}
    inner = {"type": "array", "maxItems": 1000, "items": {"type": "string", "maxLength": 16}, "x-kubernetes-validations": [rule]}
    assert errors_of(crd_schema({"l": {"type": "array", "maxItems": 100, "items": inner}})) == []
    errs = errors_of(crd_schema({"l": {"type": "array", "maxItems": 1000, "items": inner}}))
    assert "estimated rule cost exceeds budget by factor of 1.100100x" in errs[0]


def test_a_rule_that_does_not_compile_is_reported_on_every_object():
    rules, errs = compile_rules(crd_schema(REPLICAS, [{"rule": "self.nope > 1"}, {"rule": "self.replicas < 3"}]), BASE)
    assert len(errs) == 1
    assert [str(e) for e in rules.validate(obj({"replicas": 5}), None)] == [
        "spec: Invalid value: \"object\": rule compile error: compilation failed: ERROR: <input>:1:6: undefined "
        "field 'nope'\n | self.nope > 1\n | .....^",
        "spec: Invalid value: failed rule: self.replicas < 3"]


def test_blocking_errors():
    assert has_blocking_errors([required("spec.a")])
    assert not has_blocking_errors([FieldError("FieldValueInvalid", "spec.a", "x")])
    assert str(not_checked_error()) == ('<nil>: Invalid value: null: some validation rules were not checked because '
                                        "the object was invalid; correct the existing errors to complete validation")


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


TEN = "[1,2,3,4,5,6,7,8,9,10]"


@pytest.mark.parametrize("rule,whole", [
    # 10^5 iterations: within the CRD's static limit, over the per-call limit once run; sizes of literals
    # were lowered to the object's (one field here), so it ran
    (f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, {TEN}.all(d, {TEN}.all(e, a + b + c + d + e > 0)))))", 111_110),
    ("lists.range(3000000).size() > 0", 0),  # built three million integers before anything was charged
    ("lists.range(900000).all(x, x >= 0)", 900_000),  # cheap statically (a range was any list), all run
    # each inner range is charged the 3,011 cel-go charges for building it (it was charged 1: all of it ran)
    ("lists.range(3000).exists(x, lists.range(3000).size() < 0)", 3000),
    ("lists.range(1000).sort().size() > 0", 0),  # 2 n^2 + 11, as upstream: over the limit (was charged n)
])
async def test_over_http_a_rule_over_the_per_call_limit_is_stopped_at_the_limit(api, monkeypatch, rule, whole):
    """`whole`: the elements a full run ranges over; the meter stops it before (counted, not timed)."""
    ext = client.ApiextensionsV1Api(api)
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": rule}]
    await asyncio.to_thread(ext.create_custom_resource_definition, body)
    objs = client.CustomObjectsApi(api)
    widget = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    work = count_cel_work(monkeypatch)
    for _ in tries():  # until the new kind is served
        try:
            await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default", "widgets", widget)
        except ApiException as e:
            if e.status == 404:
                await asyncio.sleep(0.05)
                continue
            assert e.status == 422, e.body
            assert json.loads(e.body)["message"] == (
                f'Widget.example.com "w" is invalid: spec: Invalid value: "object": \'operation cancelled: actual cost '
                f"limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {rule}")
            assert work.iterated < max(whole, 1), work.iterated
            return
        raise AssertionError(f"accepted: {rule}")
    raise AssertionError("widgets never served")


async def test_over_http_a_rule_is_stopped_at_runtime_not_refused_for_its_bound(api):
    """A rule within the CRD's static limit (maxItems 1,000: ~7 M) is charged what it runs: a
    zero-sum pair found at the first step is admitted (its bound for 900 items, 5.7 M, refused
    it before it ran), and a list without one runs until the per-call limit stops it, with
    upstream's message, and no further rule runs."""
    ext = client.ApiextensionsV1Api(api)
    body = crd()
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["items"] = {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}
    spec["x-kubernetes-validations"] = [
        {"rule": "!has(self.items) || self.items.exists(a, self.items.exists(b, a + b == 0))", "message": "pairs"},
        {"rule": "!has(self.items) || size(self.items) < 900", "message": "too long"}]
    await asyncio.to_thread(ext.create_custom_resource_definition, body)
    objs = client.CustomObjectsApi(api)

    async def create(name: str, items: list[int]) -> tuple[int, str]:
        widget = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"items": items}}
        try:
            await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default", "widgets", widget)
        except ApiException as e:
            return e.status, json.loads(e.body)["message"]
        return 201, ""

    for _ in tries():  # until the new kind is served
        code, _ = await create("probe", [1])
        if code != 404:
            break
        await asyncio.sleep(0.05)
    assert code == 422
    assert await create("zero", [0] + list(range(1, 899))) == (201, "")
    assert await create("none", list(range(1, 900))) == (422, (
        'Widget.example.com "none" is invalid: spec: Invalid value: "object": \'operation cancelled: actual cost limit '
        "exceeded': no further validation rules will be run due to call cost exceeds limit for rule: pairs"))
