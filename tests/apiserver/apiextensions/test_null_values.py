"""Explicit nulls in a custom resource, over HTTP, as kube-apiserver treats them: a create's or an
update's body is decoded, which drops a null in a non-nullable field without a default (before
validation, whether or not the schema has defaults), while a server-side apply's merged object is
not decoded: a nullable field keeps its null, a default fills a non-nullable one, and any other
null is a type error (the `null` kube-rs and k8s-openapi users meet with --server-side)."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions.test_conversion_pruning import create_when_served
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "nulls.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPLY = "application/apply-patch+yaml"


def crd(plural: str, kind: str, props: dict) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}}


def obj(kind: str, name: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


async def test_a_decoded_body_drops_nulls_and_an_apply_keeps_them_for_validation(tmp_path):
    async with served(tmp_path) as (_, c):
        # no default anywhere in this schema
        await call(c, "POST", CRDS, crd("plains", "Plain", {"size": {"type": "integer"}, "tags": {
            "type": "array", "items": {"type": "string"}}, "note": {"type": "string", "nullable": True}}))
        plains = f"/apis/{GROUP}/v1/namespaces/default/plains"
        made = await create_when_served(c, plains, obj("Plain", "posted", size=None, tags=None, note=None))
        assert made["spec"] == {"note": None}
        with pytest.raises(ApiException) as e:
            await call(c, "PATCH", f"{plains}/applied", obj("Plain", "applied", size=None, note=None), "op",
                       content_type=APPLY)
        assert e.value.status == 422
        assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.size", 'Invalid value: "null": spec.size in body must be of type integer: "null"')]
        applied = await call(c, "PATCH", f"{plains}/applied", obj("Plain", "applied", size=2, note=None), "op",
                             content_type=APPLY)
        assert applied["spec"] == {"note": None, "size": 2}
        assert (await call(c, "GET", f"{plains}/applied"))["spec"] == {"note": None, "size": 2}

        # a default fills an applied null in a non-nullable field
        await call(c, "POST", CRDS, crd("defs", "Def", {"size": {"type": "integer", "default": 1},
                                                        "mode": {"type": "string"}}))
        defs = f"/apis/{GROUP}/v1/namespaces/default/defs"
        await create_when_served(c, defs, obj("Def", "posted", size=None, mode=None))
        assert (await call(c, "GET", f"{defs}/posted"))["spec"] == {"size": 1}
        applied = await call(c, "PATCH", f"{defs}/applied", obj("Def", "applied", size=None), "op", content_type=APPLY)
        assert applied["spec"] == {"size": 1}
