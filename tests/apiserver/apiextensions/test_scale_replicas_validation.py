"""A custom object whose CRD has a scale subresource keeps its replicas within an int32 and its
label selector a string, as kube-apiserver's customResourceValidator (ValidateScaleSpec on every
write but a status one, ValidateScaleStatus on every write): over HTTP, a negative or too large
replicas value and a selector of another type are 422s at the path as the CRD names it."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served
from tests.controllers import tries

GROUP = "replicas.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"things.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"status": {}, "scale": {
                                  "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size",
                                  "labelSelectorPath": ".status.selector"}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": {
                                      "size": {"type": "integer"}, "mode": {"type": "string", "enum": ["a"]},
                                      "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                               "items": {"type": "string"}}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


def thing(name: str, size: int) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": name}, "spec": {"size": size}}


async def _refused(c, method: str, path: str, body: dict) -> list[tuple[str, str]]:
    with pytest.raises(ApiException) as e:
        await call(c, method, path, body)
    assert e.value.status == 422
    return [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]]


async def test_replicas_and_selector_are_checked(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, CRD)
        for _ in tries():
            try:
                await call(c, "POST", THINGS, thing("a", 1))
                break
            except ApiException as e:
                assert e.status == 404  # not served yet
                await asyncio.sleep(0.05)
        assert await _refused(c, "POST", THINGS, thing("b", -1)) == [
            (".spec.size", "Invalid value: -1: should be a non-negative integer")]
        assert await _refused(c, "POST", THINGS, thing("b", 2147483648)) == [
            (".spec.size", "Invalid value: 2147483648: should be less than or equal to 2147483647")]
        # the validator's scale checks come after the schema's, before the list types' pass
        assert await _refused(c, "POST", THINGS, {**thing("b", -1), "spec": {"size": -1, "mode": "b", "tags": ["x", "x"]}}) == [
            ("spec.mode", 'Unsupported value: "b": supported values: "a"'),
            (".spec.size", "Invalid value: -1: should be a non-negative integer"),
            ("spec.tags[1]", 'Duplicate value: "x"')]

        a = await call(c, "GET", f"{THINGS}/a")
        a["status"] = {"size": -2, "selector": 5}
        assert await _refused(c, "PUT", f"{THINGS}/a/status", a) == [
            (".status.size", "Invalid value: -2: should be a non-negative integer"),
            (".status.selector", 'Invalid value: "": .status.selector accessor error: 5 is of the type int64, '
                                 "expected string")]
        a["status"] = {"size": 1, "selector": "app=a"}
        written = await call(c, "PUT", f"{THINGS}/a/status", a)
        assert written["status"] == {"size": 1, "selector": "app=a"}
        scale = await call(c, "GET", f"{THINGS}/a/scale")
        assert (scale["spec"], scale["status"]) == ({"replicas": 1}, {"replicas": 1, "selector": "app=a"})
