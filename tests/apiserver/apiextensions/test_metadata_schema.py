"""A CRD schema's metadata.name and metadata.generateName restrictions (the only ones it may set)
hold for its objects, over HTTP: kube-apiserver validates the whole custom object against the
schema, metadata included, so a name too long or not matching the pattern is a 422 at metadata.name
(a generated name too), and an update that keeps a name a tightened schema refuses is ratcheted."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "names.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"


def _crd(max_length: int) -> dict:
    name = {"type": "string", "maxLength": max_length, "pattern": "^a"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {
                             "metadata": {"type": "object", "properties": {"name": name}},
                             "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


async def _causes(c, metadata: dict) -> list[tuple[str, str]]:
    with pytest.raises(ApiException) as e:
        await call(c, "POST", THINGS, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": metadata})
    assert e.value.status == 422
    return [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]]


async def test_the_schemas_name_restrictions_hold_for_objects(tmp_path):
    async with served(tmp_path) as (_, c):
        await install(c, _crd(5), THINGS)
        await call(c, "POST", THINGS, {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "abc"}})
        assert await _causes(c, {"name": "abcdefg"}) == [("metadata.name", "Too long: may not be more than 5 bytes")]
        assert await _causes(c, {"name": "bcd"}) == [
            ("metadata.name", "Invalid value: \"bcd\": metadata.name in body should match '^a'")]
        # a generated name is validated too: 'ab' and five random characters
        assert await _causes(c, {"generateName": "ab"}) == [("metadata.name", "Too long: may not be more than 5 bytes")]

        # tightened: the stored 'abc' is now too long, but an update that keeps it is ratcheted
        crd = await call(c, "GET", f"{CRDS}/things.{GROUP}")
        crd["spec"] = _crd(2)["spec"]
        await call(c, "PUT", f"{CRDS}/things.{GROUP}", crd)
        # (the new schema is served once the CRD's write returns)
        assert await _causes(c, {"name": "abc2"}) == [("metadata.name", "Too long: may not be more than 2 bytes")]
        patched = await call(c, "PATCH", f"{THINGS}/abc", {"metadata": {"labels": {"x": "y"}}},
                             content_type="application/merge-patch+json")
        assert patched["metadata"]["labels"] == {"x": "y"}
