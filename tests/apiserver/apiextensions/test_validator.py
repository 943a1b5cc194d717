"""A custom object's schema errors print their values as the apiextensions-apiserver's do: the
decoded JSON values (int64, float64 by %v, maps and lists by json.Marshal), an integer enum's
supported values quoted, TooMany worded by its count; bounds as kube-openapi compares them."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver.apiextensions.validator import validate
from tests.served import served

from .test_serving import GROUP, SCHEMA, crd
from tests.controllers import tries

SPEC = {"type": "object", "properties": {
    "ratio": {"type": "number", "maximum": 1000000},
    "count": {"type": "integer", "maximum": 2.5},
    "level": {"type": "integer", "enum": [1, 2]},
    "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
    "mode": {"type": "string", "anyOf": [{"maxLength": 1}, {"pattern": "^b"}]}}}


def test_bounds_are_cut_to_the_values_type():
    """MaximumNativeType: an integer is held to int64(maximum) and the message prints that; a float
    to the float64 maximum, printed by %v."""
    assert [str(e) for e in validate({"count": 3, "ratio": 1e6}, SPEC)] == [
        "count: Invalid value: 3: count in body should be less than or equal to 2"]
    assert [str(e) for e in validate({"ratio": 1500000.5}, SPEC)] == [
        "ratio: Invalid value: 1.5000005e+06: ratio in body should be less than or equal to 1e+06"]


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


async def test_over_http_values_print_by_their_json_types(api):
    body = crd()
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"] = SPEC
    await asyncio.to_thread(client.ApiextensionsV1Api(api).create_custom_resource_definition, body)
    objs = client.CustomObjectsApi(api)
    widget = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"},
              "spec": {"ratio": 1500000.5, "level": 3, "tags": ["a", "b"], "mode": "xyz"}}
    for _ in tries():  # until the new kind is served
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default", "widgets", widget)
        if e.value.status != 404:
            break
        await asyncio.sleep(0.05)
    assert e.value.status == 422, e.value.body
    status = json.loads(e.value.body)
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("spec.ratio", "Invalid value: 1.5000005e+06: spec.ratio in body should be less than or equal to 1e+06"),
        ("spec.level", 'Unsupported value: 3: supported values: "1", "2"'),
        ("spec.tags", "Too many: 2: must have at most 1 item"),
        ("<nil>", 'Invalid value: "": "spec.mode" must validate at least one schema (anyOf)'),
        ("spec.mode", "Too long: may not be more than 1 byte"),
    ]


def test_counts_are_the_values_and_a_refused_count_stops_the_object():
    """TooFewItems/TooFewProperties carry the count as their value; kube-openapi's objectValidator
    returns at a refused count, so neither required properties nor children are checked; else the
    children come before the required ones missing."""
    node = {"type": "object", "properties": {
        "tags": {"type": "array", "minItems": 2, "items": {"type": "string"}},
        "labels": {"type": "object", "minProperties": 2, "required": ["b"],
                   "additionalProperties": {"type": "string", "maxLength": 1}}}}
    assert [str(e) for e in validate({"tags": ["a"], "labels": {"a": "long"}}, node)] == [
        "tags: Invalid value: 1: tags in body should have at least 2 items",
        "labels: Invalid value: 1: labels in body should have at least 2 properties"]
    assert [str(e) for e in validate({"labels": {"a": "long", "c": "x"}}, node)] == [
        "labels.a: Too long: may not be more than 1 byte", "labels.b: Required value"]


def test_an_integer_is_a_multiple_of_the_factor_cut_to_an_int64():
    """MultipleOfNativeType: an integer against int64(multipleOf), a float against the float64."""
    node = {"type": "number", "multipleOf": 2.5}
    assert [str(e) for e in validate(5, node, "n")] == ["n: Invalid value: 5: n in body should be a multiple of 2"]
    assert validate(4, node, "n") == [] and validate(7.5, node, "n") == []
    assert [str(e) for e in validate(6.0, node, "n")] == ["n: Invalid value: 6: n in body should be a multiple of 2.5"]


def test_junctor_errors_stand_at_the_root_with_the_schema_path_quoted():
    """schemaPropsValidator's own errors are plain kube-openapi errors: ValidateCustomResource puts them
    at its field path (none for a custom object: <nil>) with an empty value."""
    def errs(x, **junctors):
        node = {"type": "object", "properties": {"x": {"type": "integer", **junctors}}}
        return [str(e) for e in validate({"x": x}, node, "spec")]

    assert errs(5, anyOf=[{"minimum": 10}, {"maximum": 1}]) == [
        '<nil>: Invalid value: "": "spec.x" must validate at least one schema (anyOf)',
        "spec.x: Invalid value: 5: spec.x in body should be greater than or equal to 10"]
    assert errs(5, oneOf=[{"minimum": 1}, {"maximum": 10}]) == [
        '<nil>: Invalid value: "": "spec.x" must validate one and only one schema (oneOf). Found 2 valid alternatives']
    assert errs(5, allOf=[{"minimum": 10}, {"maximum": 1}]) == [
        "spec.x: Invalid value: 5: spec.x in body should be greater than or equal to 10",
        "spec.x: Invalid value: 5: spec.x in body should be less than or equal to 1",
        '<nil>: Invalid value: "": "spec.x" must validate all the schemas (allOf). None validated']
    assert errs(5, **{"not": {"minimum": 1}}) == ['<nil>: Invalid value: "": "spec.x" must not validate the schema (not)']
    assert validate({"x": 5}, {"properties": {"x": {"not": {"minimum": 1}}}}, "d", root="s.default")[0].field == \
        "s.default"


def test_a_failed_any_of_reports_the_alternative_that_passed_the_most_checks():
    """schemaPropsValidator keeps the failed alternative with the highest MatchCount (every validator
    applied and every child validated counts), the first of equals: here the second, which checks
    two properties, though it fails both."""
    node = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "anyOf": [{"properties": {"a": {"minimum": 5}}},
                      {"properties": {"a": {"maximum": 0}, "b": {"maxLength": 0}}}]}
    assert [str(e) for e in validate({"a": 1, "b": "x"}, node, "spec")] == [
        '<nil>: Invalid value: "": "spec" must validate at least one schema (anyOf)',
        "spec.a: Invalid value: 1: spec.a in body should be less than or equal to 0",
        "spec.b: Too long: may not be more than 0 bytes"]
    one_of = {**node, "oneOf": node["anyOf"]}
    del one_of["anyOf"]
    assert [str(e) for e in validate({"a": 1, "b": "x"}, one_of, "spec")][1:] == [
        "spec.a: Invalid value: 1: spec.a in body should be less than or equal to 0",
        "spec.b: Too long: may not be more than 0 bytes"]
    # equal counts: the first
    assert [str(e) for e in validate({"a": 1}, node, "spec")][1:] == [
        "spec.a: Invalid value: 1: spec.a in body should be greater than or equal to 5"]


def test_a_nodes_errors_come_in_the_schema_validators_order():
    """SchemaValidator: type, the junctors, string (its first failure only), number (multipleOf,
    minimum, maximum), array (items, then minItems/maxItems), enum, object (children, then
    required), each where it applies to the value, a wrong type included; list-type duplicates
    after every schema error."""
    node = {"type": "object", "required": ["z"], "properties": {
        "s": {"type": "string", "maxLength": 1, "pattern": "^b", "anyOf": [{"pattern": "^c"}]},
        "n": {"type": "integer", "multipleOf": 3, "minimum": 10, "maximum": 1},
        "l": {"type": "array", "maxItems": 1, "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 1}},
        "e": {"type": "string", "enum": ["a"]}}}
    assert [str(e) for e in validate({"s": "xyz", "n": 5, "l": ["ab", "ab"], "e": 5}, node)] == [
        '<nil>: Invalid value: "": "s" must validate at least one schema (anyOf)',
        "s: Invalid value: \"xyz\": s in body should match '^c'",
        "s: Too long: may not be more than 1 byte",
        "n: Invalid value: 5: n in body should be a multiple of 3",
        "n: Invalid value: 5: n in body should be greater than or equal to 10",
        "n: Invalid value: 5: n in body should be less than or equal to 1",
        "l[0]: Too long: may not be more than 1 byte",
        "l[1]: Too long: may not be more than 1 byte",
        "l: Too many: 2: must have at most 1 item",
        'e: Invalid value: "integer": e in body must be of type string: "integer"',
        'e: Unsupported value: 5: supported values: "a"',
        "z: Required value",
        'l[1]: Duplicate value: "ab"']


async def test_over_http_a_failed_any_of_reports_the_best_alternative_in_node_order(api):
    body = crd(plural="gizmos", kind="Gizmo", short=())
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"] = {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3, "pattern": "^q"}},
        "anyOf": [{"properties": {"a": {"minimum": 5}}}, {"properties": {"a": {"maximum": 0}, "b": {"maxLength": 0}}}]}
    await asyncio.to_thread(client.ApiextensionsV1Api(api).create_custom_resource_definition, body)
    objs = client.CustomObjectsApi(api)
    gizmo = {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"a": 1, "b": "xxxx"}}
    for _ in tries():  # until the new kind is served
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default", "gizmos", gizmo)
        if e.value.status != 404:
            break
        await asyncio.sleep(0.05)
    assert e.value.status == 422, e.value.body
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("<nil>", 'Invalid value: "": "spec" must validate at least one schema (anyOf)'),
        ("spec.a", "Invalid value: 1: spec.a in body should be less than or equal to 0"),
        ("spec.b", "Too long: may not be more than 0 bytes"),
        ("spec.b", "Too long: may not be more than 3 bytes"),
    ]


async def test_over_http_an_embedded_resource_gets_validate_embedded_resources_words(api):
    """objectmeta's validateEmbeddedResource, after every schema error: a missing kind is Required with
    no detail, the apiVersion a group/version (ParseGroupVersion), the kind a mixed-case DNS-1035 label."""
    body = crd(plural="boxes", kind="Box", short=())
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"] = {"type": "object", "properties": {
        "size": {"type": "integer", "minimum": 1},
        "inner": {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True},
        "other": {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}}}
    await asyncio.to_thread(client.ApiextensionsV1Api(api).create_custom_resource_definition, body)
    objs = client.CustomObjectsApi(api)
    box = {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "b"},
           "spec": {"inner": {"apiVersion": "a/b/c"}, "other": {"apiVersion": "v1", "kind": "Not_A_Kind"}, "size": 0}}
    for _ in tries():  # until the new kind is served
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default", "boxes", box)
        if e.value.status != 404:
            break
        await asyncio.sleep(0.05)
    assert e.value.status == 422, e.value.body
    causes = [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]
    assert causes[0] == ("spec.size", "Invalid value: 0: spec.size in body should be greater than or equal to 1")
    assert causes[1:4] == [
        ("spec.inner.kind", "Required value"),
        ("spec.inner.apiVersion", 'Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'),
        ("spec.other.kind", 'Invalid value: "Not_A_Kind": may have mixed case, but should otherwise match: a DNS-1035 '
                            "label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
                            "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
                            "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")]


async def test_over_http_an_update_is_judged_by_the_junctors_of_the_nodes_it_changes(api):
    """A junctor's error stands at the root (<nil>), but ratcheting judges the node whose schema
    holds the junctor: an update that changes that node gets the oneOf/not errors (every such
    update was accepted, the root's value reading as unchanged), one that leaves a node the
    schema no longer accepts alone is still accepted."""
    body = crd(plural="choosers", kind="Chooser", short=())
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"] = {"type": "object", "properties": {
        "choice": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
                   "oneOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["c"]}},
        "other": {"type": "string"}}}
    crds = client.ApiextensionsV1Api(api)
    await asyncio.to_thread(crds.create_custom_resource_definition, body)
    objs = client.CustomObjectsApi(api)
    chooser = {"apiVersion": f"{GROUP}/v1", "kind": "Chooser", "metadata": {"name": "c"}, "spec": {"choice": {"a": "x"}}}
    for _ in tries():  # until the new kind is served
        try:
            await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default", "choosers", chooser)
            break
        except ApiException as e:
            assert e.status == 404, e.body
            await asyncio.sleep(0.05)

    def patch(spec: dict):
        return objs.patch_namespaced_custom_object(GROUP, "v1", "default", "choosers", "c", {"spec": spec})

    for change, message in [
        ({"choice": {"b": 1}}, '"spec.choice" must validate one and only one schema (oneOf). Found 2 valid alternatives'),
        ({"choice": {"a": None}}, '"spec.choice" must validate one and only one schema (oneOf). Found none valid'),
        ({"choice": {"c": True}}, '"spec.choice" must not validate the schema (not)'),
    ]:
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(patch, change)
        assert e.value.status == 422, change
        causes = json.loads(e.value.body)["details"]["causes"]
        assert ("<nil>", f'Invalid value: "": {message}') in [(c["field"], c["message"]) for c in causes], change
    got = await asyncio.to_thread(objs.get_namespaced_custom_object, GROUP, "v1", "default", "choosers", "c")
    assert got["spec"] == {"choice": {"a": "x"}}
    # the schema tightened under the stored object: an update that leaves spec.choice alone is ratcheted
    crd_now = await asyncio.to_thread(crds.read_custom_resource_definition, f"choosers.{GROUP}")
    choice = crd_now.spec.versions[0].schema.open_apiv3_schema.properties["spec"].properties["choice"]
    choice.any_of = [client.V1JSONSchemaProps(required=["b"])]
    await asyncio.to_thread(crds.replace_custom_resource_definition, f"choosers.{GROUP}", crd_now)
    for _ in tries():  # until the tighter schema serves
        try:
            await asyncio.to_thread(patch, {"choice": {"a": "y"}})
        except ApiException as e:
            assert '"spec.choice" must validate at least one schema (anyOf)' in json.loads(e.body)["message"]
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the tighter schema was never served")
    got = await asyncio.to_thread(patch, {"other": "o"})
    assert got["spec"]["other"] == "o" and got["spec"]["choice"] in ({"a": "x"}, {"a": "y"})


def test_a_repeated_list_item_or_key_is_reported_once_where_it_first_repeats():
    """validateListSet: each value counted in a hash map (a set of 20,000 strings is one pass, not
    20,000² comparisons); 1, 1.0 and true are three values, as Go's map keys tell them apart; a
    list-map's duplicate prints the key fields that are set."""
    node = {"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"x-kubernetes-int-or-string": True}},
        "objs": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "one": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "string"}}}},
        "two": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}
    value = {"set": ["a", "b", "a", "a", 1, "1", "b"],
             "objs": [{"x": 1, "y": [2]}, {"y": [2], "x": 1}, {"x": 2}],
             "one": [{"name": "a", "v": "1"}, {"v": "2"}, {"name": "a", "v": "3"}, {"v": "4"}, {"name": "a"}],
             "two": [{"name": "a"}, {"name": "a", "port": 1}, {"name": "a"}]}
    assert [str(e) for e in validate(value, node)] == [
        'set[2]: Duplicate value: "a"', 'set[6]: Duplicate value: "b"',
        'objs[1]: Duplicate value: {"x":1,"y":[2]}',
        'one[2]: Duplicate value: {"name":"a"}', "one[3]: Duplicate value: {}",
        'two[2]: Duplicate value: {"name":"a"}']
    wide = {"set": [f"s{i}" for i in range(20_000)] + ["s0"]}
    assert [str(e) for e in validate(wide, node)] == ['set[20000]: Duplicate value: "s0"']
