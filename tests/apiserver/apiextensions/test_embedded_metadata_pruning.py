"""The metadata of an x-kubernetes-embedded-resource object keeps only ObjectMeta's fields, as
kube-apiserver's objectmeta.Coerce round-trips it through an ObjectMeta: over HTTP, an unknown
field there is dropped and reported like any other unknown field (a Warning with
fieldValidation=Warn, after the schema's own and sorted; a 400 strict decoding error with Strict),
under x-kubernetes-preserve-unknown-fields too. Metadata that does not decode as an ObjectMeta, or an
apiVersion that is no string, fails the decoding: a 400 before any validation."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served
from tests.controllers import tries

GROUP = "embedded.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/things"
POD = {"type": "object", "x-kubernetes-embedded-resource": True,
       "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"things.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "template": POD,
                        "templates": {"type": "array", "items": POD},
                        "free": {"type": "object", "x-kubernetes-embedded-resource": True,
                                 "x-kubernetes-preserve-unknown-fields": True}}}}}}}]}}


def thing(name: str) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": name}, "spec": {
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
                     "spec": {"a": "x", "b": 2}},
        "templates": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": {"k": "v"}, "nope": True}}],
        "free": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "f", "other": "x"}, "kept": 3}}}


async def test_unknown_embedded_metadata_fields_are_dropped_and_reported(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, CRD)
        warnings: list[str] = []
        for _ in tries():
            try:
                made = await call(c, "POST", f"{THINGS}?fieldValidation=Warn", thing("a"), warnings=warnings)
                break
            except ApiException as e:
                assert e.status == 404  # not served yet
                await asyncio.sleep(0.05)
        spec = made["spec"]
        assert spec["template"]["metadata"] == {"name": "p", "labels": {"a": "b"}}
        assert spec["template"]["spec"] == {"a": "x"}
        assert spec["templates"][0]["metadata"] == {"annotations": {"k": "v"}}
        assert spec["free"] == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "f"}, "kept": 3}
        assert warnings == [", ".join(f'299 - "unknown field \\"{p}\\""' for p in (
            "spec.template.spec.b", "spec.free.metadata.other", "spec.template.metadata.bogus",
            "spec.templates[0].metadata.nope"))]

        with pytest.raises(ApiException) as e:
            await call(c, "POST", f"{THINGS}?fieldValidation=Strict", thing("b"))
        assert e.value.status == 400
        assert json.loads(e.value.body)["message"] == (
            'Thing in version "v1" cannot be handled as a Thing: strict decoding error: '
            'unknown field "spec.template.spec.b", unknown field "spec.free.metadata.other", '
            'unknown field "spec.template.metadata.bogus", unknown field "spec.templates[0].metadata.nope"')


async def test_embedded_metadata_that_does_not_decode_is_a_bad_request(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, CRD)
        body = thing("a")
        body["spec"]["templates"][0]["metadata"] = {"labels": "app"}
        for _ in tries():
            with pytest.raises(ApiException) as e:
                await call(c, "POST", THINGS, body)
            if e.value.status != 404:  # not served yet
                break
            await asyncio.sleep(0.05)
        assert e.value.status == 400
        assert json.loads(e.value.body)["message"] == (
            'Thing in version "v1" cannot be handled as a Thing: spec.templates[0].metadata: Invalid value: '
            '{"labels":"app"}: json: cannot unmarshal string into Go struct field ObjectMeta.labels of type '
            'map[string]string')
        body = thing("b")
        body["spec"]["free"]["apiVersion"] = 1
        with pytest.raises(ApiException) as e:
            await call(c, "POST", THINGS, body)
        assert (e.value.status, json.loads(e.value.body)["message"]) == (
            400, 'Thing in version "v1" cannot be handled as a Thing: spec.free.apiVersion: Invalid value: 1: '
                 'must be a string')
