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

SPEC = {"type": "object", "properties": {
    "ratio": {"type": "number", "maximum": 1000000},
    "count": {"type": "integer", "maximum": 2.5},
    "level": {"type": "integer", "enum": [1, 2]},
    "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}}}}


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
              "spec": {"ratio": 1500000.5, "level": 3, "tags": ["a", "b"]}}
    for _ in range(100):  # until the new kind is served
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
    ]
