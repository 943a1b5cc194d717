"""pods/binding and pods/eviction judge the object mutating admission left: the create handler runs the
mutating chain before BindingREST.Create and EvictionREST.Create, whose first check is the name in the
URL, and their createValidation (the validating chain) comes after that check. Over HTTP, with a real
mutating webhook that renames the object to its `rename-to` annotation and a validating one that
records what it is asked."""

from __future__ import annotations

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore
from tests.apiserver.admission.server import WebhookServer, allow, json_patch

RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
          "resources": ["pods/binding", "pods/eviction"]}]


def rename(review: dict) -> dict:
    to = ((review["request"]["object"].get("metadata") or {}).get("annotations") or {}).get("rename-to")
    return json_patch(review, [{"op": "replace", "path": "/metadata/name", "value": to}] if to else [])


@pytest.fixture
async def api():
    hooks = WebhookServer().start()
    hooks.handlers.update({"/mutate": rename, "/validate": allow})
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as s:
            for kind, path in (("mutating", "/mutate"), ("validating", "/validate")):
                async with s.post(f"{base}/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations", json={
                    "metadata": {"name": kind}, "webhooks": [{
                        "name": f"{kind}.example.com", "rules": RULES, "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "clientConfig": {"url": hooks.url(path), "caBundle": hooks.ca.bundle}}]}) as r:
                    assert r.status == 201, await r.text()
            for name in ("p", "q"):
                async with s.post(f"{base}/api/v1/namespaces/default/pods", json={
                        "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}}) as r:
                    assert r.status == 201, await r.text()
            yield s, f"{base}/api/v1/namespaces/default/pods", hooks
    finally:
        await server.stop()
        hooks.stop()


async def test_a_binding_renamed_by_a_mutating_webhook_is_judged_by_its_new_name(api):
    s, pods, hooks = api
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "n1"}}
    async with s.post(f"{pods}/p/binding", json={**binding, "metadata": {
            "name": "p", "annotations": {"rename-to": "q"}}}) as r:
        got = await r.json()
    assert (r.status, got["reason"], got["message"]) == (
        400, "BadRequest", "name in URL does not match name in Binding object"), got
    assert hooks.calls_to("/validate") == []  # refused before the validating chain
    async with s.get(f"{pods}/p") as r:
        assert "nodeName" not in (await r.json())["spec"]

    async with s.post(f"{pods}/p/binding", json={**binding, "metadata": {
            "name": "other", "annotations": {"rename-to": "p"}}}) as r:
        assert r.status == 201, await r.text()
    [review] = hooks.calls_to("/validate")
    assert review["request"]["object"]["metadata"]["name"] == "p"
    async with s.get(f"{pods}/p") as r:
        assert (await r.json())["spec"]["nodeName"] == "n1"


async def test_an_eviction_renamed_by_a_mutating_webhook_is_judged_by_its_new_name(api):
    s, pods, hooks = api
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction"}
    async with s.post(f"{pods}/p/eviction", json={**eviction, "metadata": {
            "name": "p", "annotations": {"rename-to": "q"}}}) as r:
        got = await r.json()
    assert (r.status, got["reason"], got["message"]) == (
        400, "BadRequest", "name in URL does not match name in Eviction object"), got
    assert hooks.calls_to("/validate") == []
    async with s.get(f"{pods}/p") as r:
        assert r.status == 200 and "deletionTimestamp" not in (await r.json())["metadata"]

    async with s.post(f"{pods}/p/eviction", json={**eviction, "metadata": {
            "name": "other", "annotations": {"rename-to": "p"}}}) as r:
        assert r.status == 201, await r.text()
    assert [c["request"]["object"]["metadata"]["name"] for c in hooks.calls_to("/validate")] == ["p"]
    async with s.get(f"{pods}/p") as r:
        assert r.status == 404
