"""A JSON number past float64's range (1e400) in a request body: Go's struct decoder skips it in a
field the kind lacks (an unknown field, warned of or refused per fieldValidation) and refuses it in
a field it keeps, as it does anywhere in a custom resource's body (decoded as plain JSON)."""

from __future__ import annotations

import asyncio
import json

from tests.apiserver.apiextensions import install
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
HEAD = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '


async def _post(api, path: str, body: str) -> tuple[int, dict, str | None]:
    """POST the JSON text as it is (the client would encode a str as a JSON string): the status,
    the decoded answer and its Warning header."""
    def send():
        r = api.rest_client.pool_manager.request("POST", api.configuration.host + path, body=body.encode(),
                                                 headers={"Content-Type": "application/json"})
        return r.status, json.loads(r.data), r.headers.get("Warning")
    return await asyncio.to_thread(send)


def _configmap(name: str, extra: str) -> str:
    return f'{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"a":"b"}},{extra}}}'


async def test_an_unknown_field_holding_one_is_dropped_with_a_warning(tmp_path):
    async with served(tmp_path) as (_, api):
        code, created, warning = await _post(api, CONFIGMAPS, _configmap("cm", '"x":1e400,"y":[-1E999]'))
        assert code == 201 and created["data"] == {"a": "b"} and "x" not in created
        assert warning == '299 - "unknown field \\"x\\"", 299 - "unknown field \\"y\\""'
        code, status, _ = await _post(api, f"{CONFIGMAPS}?fieldValidation=Strict", _configmap("cm2", '"x":1e400'))
        assert (code, status["message"]) == (400, HEAD + 'strict decoding error: unknown field "x"')


async def test_a_field_the_kind_keeps_refuses_one(tmp_path):
    async with served(tmp_path) as (_, api):
        pod = ('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c",'
               '"image":"busybox"}],"terminationGracePeriodSeconds":1e400}}')
        code, status, _ = await _post(api, "/api/v1/namespaces/default/pods", pod)
        assert (code, status["message"]) == (
            400, 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number 1e400 into Go struct '
                 "field PodSpec.spec.terminationGracePeriodSeconds of type int64")
        body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":1e400}}'
        code, status, _ = await _post(api, CONFIGMAPS, body)
        assert (code, status["message"]) == (
            400, HEAD + "json: cannot unmarshal number into Go struct field ConfigMap.data of type string")


async def test_a_custom_resource_refuses_one_anywhere(tmp_path):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "number"}}}}}}}]}}
    path = "/apis/example.com/v1/namespaces/default/widgets"
    async with served(tmp_path) as (_, api):
        await install(api, crd, path)
        for spec in ('{"size":1e400}', '{"size":1,"unknown":1e400}'):
            body = f'{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"w"}},"spec":{spec}}}'
            code, status, _ = await _post(api, path, body)
            assert (code, status["message"]) == (
                400, 'Widget in version "v1" cannot be handled as a Widget: '
                     "json: cannot unmarshal number 1e400 into Go value of type float64")
        assert (await call(api, "GET", path))["items"] == []


async def _patch(api, path: str, ctype: str, body: str, query: str = "") -> tuple[int, dict]:
    """PATCH the JSON text as it is: the status and the decoded answer."""
    def send():
        r = api.rest_client.pool_manager.request("PATCH", api.configuration.host + path + query, body=body.encode(),
                                                 headers={"Content-Type": ctype})
        return r.status, json.loads(r.data)
    return await asyncio.to_thread(send)


MERGE, SMP, JSONPATCH = ("application/merge-patch+json", "application/strategic-merge-patch+json",
                         "application/json-patch+json")
FLOAT64 = "json: cannot unmarshal number 1e400 into Go value of type float64"


async def test_a_patch_decoded_into_interface_values_refuses_one(tmp_path):
    """strategicPatchObject decodes the patch into a map[string]interface{} whatever fieldValidation
    says, as the json and merge patchers' strict pass does under Strict and Warn (the default): Go
    refuses the number there, the first in the text, and nothing is written."""
    async with served(tmp_path) as (_, api):
        assert (await _post(api, CONFIGMAPS, _configmap("cm", '"immutable":false')))[0] == 201
        cm = f"{CONFIGMAPS}/cm"
        for query in ("", "?fieldValidation=Ignore"):
            code, status = await _patch(api, cm, SMP, '{"data":{"c":"d"},"x":[1E999,1e400]}', query)
            assert (code, status["message"]) == (400, FLOAT64.replace("1e400", "1E999"))
        for query in ("", "?fieldValidation=Strict", "?fieldValidation=Warn"):
            code, status = await _patch(api, cm, MERGE, '{"data":{"c":"d"},"x":1e400}', query)
            assert (code, status["message"]) == (400, f"error decoding patch: {FLOAT64}")
            code, status = await _patch(api, cm, JSONPATCH, '[{"op":"add","path":"/data/c","value":1e400}]', query)
            assert (code, status["message"]) == (400, f"error decoding patch: {FLOAT64}")
        assert (await call(api, "GET", cm))["data"] == {"a": "b"}


async def test_a_json_or_merge_patch_under_ignore_is_decoded_as_a_body(tmp_path):
    """Under fieldValidation=Ignore a json or merge patch is merged as raw JSON text: the number
    in a field the kind lacks goes with that field, in one it keeps it is Go's type error (the
    json patcher's 422 for a patched object that does not decode)."""
    async with served(tmp_path) as (_, api):
        assert (await _post(api, CONFIGMAPS, _configmap("cm", '"immutable":false')))[0] == 201
        cm, ignore = f"{CONFIGMAPS}/cm", "?fieldValidation=Ignore"
        code, patched = await _patch(api, cm, MERGE, '{"data":{"c":"d"},"x":1e400}', ignore)
        assert code == 200 and patched["data"] == {"a": "b", "c": "d"} and "x" not in patched
        code, patched = await _patch(api, cm, JSONPATCH, '[{"op":"add","path":"/x","value":-1e400}]', ignore)
        assert code == 200 and "x" not in patched
        code, status = await _patch(api, cm, MERGE, '{"data":{"e":1e400}}', ignore)
        assert code == 422 and status["message"].startswith(' "" is invalid: patch: Invalid value: ') and \
            status["message"].endswith("json: cannot unmarshal number into Go struct field ConfigMap.data of type string")
        assert (await call(api, "GET", cm))["data"] == {"a": "b", "c": "d"}


DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
INT32 = "json: cannot unmarshal number {} into Go struct field ScaleSpec.spec.replicas of type int32"


async def test_a_scale_patch_answers_as_a_patch_of_its_parent(tmp_path):
    """/scale is served by the same patchers: a number past float64 is refused where the patch is
    decoded into interface values (400), and a patched Scale whose replicas do not fit an int32 is
    the patchers' 422 when its JSON is decoded; a strategic merge patch's result is converted, which
    wraps an integer into the int32 (2147483648 is -2147483648, refused by the Scale's validation;
    4294967298 is 2). Nothing else is written."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": {
                      "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    async with served(tmp_path) as (_, api):
        assert (await _post(api, DEPLOYS, json.dumps(deployment)))[0] == 201
        scale = f"{DEPLOYS}/d/scale"
        for query in ("", "?fieldValidation=Strict", "?fieldValidation=Warn"):
            code, status = await _patch(api, scale, MERGE, '{"spec":{"replicas":1e400}}', query)
            assert (code, status["message"]) == (400, f"error decoding patch: {FLOAT64}")
            code, status = await _patch(api, scale, JSONPATCH, '[{"op":"replace","path":"/spec/replicas","value":1e400}]',
                                        query)
            assert (code, status["message"]) == (400, f"error decoding patch: {FLOAT64}")
        for query in ("", "?fieldValidation=Ignore"):
            code, status = await _patch(api, scale, SMP, '{"spec":{"replicas":1e400}}', query)
            assert (code, status["message"]) == (400, FLOAT64)
        ignore = "?fieldValidation=Ignore"
        for ctype, body, query, number in (
                (MERGE, '{"spec":{"replicas":1e400}}', ignore, "1e400"),
                (JSONPATCH, '[{"op":"replace","path":"/spec/replicas","value":1e400}]', ignore, "1e400"),
                (MERGE, '{"spec":{"replicas":2147483648}}', "", "2147483648"),
                (JSONPATCH, '[{"op":"replace","path":"/spec/replicas","value":-2147483649}]', "", "-2147483649")):
            code, status = await _patch(api, scale, ctype, body, query)
            assert code == 422 and status["message"].startswith(' "" is invalid: patch: Invalid value: "{') and \
                status["message"].endswith(INT32.format(number)), (ctype, body)
            assert status["details"]["causes"][0]["field"] == "patch"
        code, status = await _patch(api, scale, SMP, '{"spec":{"replicas":2147483648}}')
        assert (code, status["message"]) == (422, 'Scale.autoscaling "d" is invalid: spec.replicas: Invalid value: '
                                                  "-2147483648: must be greater than or equal to 0")
        assert (await call(api, "GET", f"{DEPLOYS}/d"))["spec"]["replicas"] == 1
        code, scaled = await _patch(api, scale, SMP, '{"spec":{"replicas":4294967298}}')
        assert (code, scaled["spec"]["replicas"]) == (200, 2)
