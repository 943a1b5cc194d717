"""What a custom object's conversion brings that the target version's schema does not declare is
pruned, over HTTP, as upstream's storage codec prunes whatever it converts: on the way to the
storage version (so it is never stored) and on the way to the version a client reads."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.admission.server import WebhookServer
from tests.apiserver.test_rest_managedfields import call
from tests.served import served
from tests.controllers import tries

GROUP = "prune.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMAS = {  # v2 declares spec.extra, the storage version v1 does not
    "v1": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}},
    "v2": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer"}, "extra": {"type": "string"}}}}},
}


def crd(conversion: dict | None = None) -> dict:
    spec = {"group": GROUP, "scope": "Namespaced", "names": {"plural": "boxes", "kind": "Box"},
            "versions": [{"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": s}}
                         for v, s in SCHEMAS.items()]}
    if conversion is not None:
        spec["conversion"] = conversion
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"boxes.{GROUP}"}, "spec": spec}


def box(name: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v2", "kind": "Box", "metadata": {"name": name}, "spec": spec}


async def create_when_served(c, path: str, body: dict) -> dict:
    for _ in tries():
        try:
            return await call(c, "POST", path, body)
        except ApiException as e:
            if e.status != 404:
                raise
            await asyncio.sleep(0.05)
    pytest.fail("the CRD was never served")


async def test_a_field_only_the_written_version_declares_is_not_stored(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, crd())
        v2 = f"/apis/{GROUP}/v2/namespaces/default/boxes"
        created = await create_when_served(c, v2, box("b", size=1, extra="x"))
        assert created["spec"] == {"size": 1}
        assert (await call(c, "GET", f"{v2}/b"))["spec"] == {"size": 1}


def webhook_review(review: dict) -> dict:
    """Converts by rewriting apiVersion, adding spec.note (no version declares it) and, towards v1,
    spec.extra (v1 does not declare it)."""
    req = review["request"]
    want = req["desiredAPIVersion"]
    out = []
    for o in req["objects"]:
        spec = {**(o.get("spec") or {}), "note": "from the webhook"}
        if want.endswith("/v1"):
            spec["extra"] = "added"
        out.append({**o, "apiVersion": want, "spec": spec})
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": req["uid"], "result": {"status": "Success"}, "convertedObjects": out}}


async def test_what_a_conversion_webhook_adds_is_pruned_by_the_target_version(tmp_path):
    hook = WebhookServer().start()
    hook.handlers["/convert"] = webhook_review
    try:
        async with served(tmp_path) as (_, c):
            await call(c, "POST", CRDS, crd({"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": hook.url("/convert"), "caBundle": hook.ca.bundle}}}))
            v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
            created = await create_when_served(c, v2, box("b", size=2, extra="kept at v2"))
            assert created["spec"] == {"size": 2}  # extra and note pruned at v1, note again at v2
            assert (await call(c, "GET", f"{v1}/b"))["spec"] == {"size": 2}
            assert (await call(c, "GET", f"{v2}/b"))["spec"] == {"size": 2}
            assert any(r["request"]["desiredAPIVersion"] == f"{GROUP}/v1" for r in hook.calls_to("/convert"))
    finally:
        hook.stop()
