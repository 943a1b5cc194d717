"""Response bodies as Go's JSON encoder writes them, over HTTP: `<`, `>`, `&`, U+2028 and U+2029
inside strings are escaped (\\u003c, \\u003e, \\u0026, \\u2028, \\u2029), in a create's answer,
a GET (pretty too), a LIST, a watch event and a Status alike; and a map's keys are sorted."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.served import served

CMS = "/api/v1/namespaces/default/configmaps"
VALUE = "a<b>&c\u2028d\u2029e\u2013"
ESCAPED = b'"a\\u003cb\\u003e\\u0026c\\u2028d\\u2029e\xe2\x80\x93"'


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


async def _raw(api, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    def send():
        r = api.rest_client.pool_manager.request(method, api.configuration.host + path, preload_content=True,
                                                 body=None if body is None else json.dumps(body).encode(),
                                                 headers={"Content-Type": "application/json"})
        return r.status, r.data
    return await asyncio.to_thread(send)


async def test_html_characters_are_escaped_as_go_writes_them(api):
    code, created = await _raw(api, "POST", CMS, {"metadata": {"name": "esc", "annotations": {"n": "<&>"}},
                                                  "data": {"k": VALUE}})
    assert code == 201 and ESCAPED in created and b'"\\u003c\\u0026\\u003e"' in created, created
    assert json.loads(created)["data"]["k"] == VALUE
    for path in (CMS + "/esc", CMS + "/esc?pretty=true", CMS, CMS + "?watch=true&timeoutSeconds=1"):
        code, body = await _raw(api, "GET", path)
        assert code == 200 and ESCAPED in body and b"<" not in body and b"&" not in body, (path, body)
    code, missing = await _raw(api, "GET", CMS + "/a&b")
    assert code == 404 and b'configmaps \\"a\\u0026b\\" not found' in missing, missing


def _keys(body: bytes, *path: str) -> list[str]:
    """The keys of the map at `path` in the order the bytes hold them."""
    v = json.loads(body)
    for p in path:
        v = v[p]
    return list(v)


async def test_map_keys_are_stored_and_served_sorted_as_go_writes_them(api):
    """Go's encoder writes a map's keys sorted (labels, annotations, a ConfigMap's data, a pod's
    nodeSelector and resource limits): however a create, update or patch ordered them."""
    code, body = await _raw(api, "POST", CMS, {"metadata": {"name": "m", "labels": {"z": "1", "a": "2", "m": "3"}},
                                               "data": {"b": "x", "a": "y"}})
    assert code == 201 and _keys(body, "metadata", "labels") == ["a", "m", "z"] and _keys(body, "data") == ["a", "b"]
    for ctype, patch in (("application/merge-patch+json", {"data": {"0": "n", "c": "z"}}),
                         ("application/strategic-merge-patch+json", {"metadata": {"annotations": {"y": "1", "b": "2"}}})):
        def send():
            r = api.rest_client.pool_manager.request("PATCH", api.configuration.host + CMS + "/m",
                                                     body=json.dumps(patch).encode(), headers={"Content-Type": ctype})
            return r.status, r.data
        code, body = await asyncio.to_thread(send)
        assert code == 200, body
    code, body = await _raw(api, "GET", CMS + "/m")
    assert _keys(body, "data") == ["0", "a", "b", "c"] and _keys(body, "metadata", "annotations") == ["b", "y"], body
    current = json.loads(body)
    current["data"] = {"q": "1", "p": "2"}
    code, body = await _raw(api, "PUT", CMS + "/m", current)
    assert code == 200 and _keys(body, "data") == ["p", "q"], body
    _, listed = await _raw(api, "GET", CMS)
    assert list(json.loads(listed)["items"][0]["data"]) == ["p", "q"]
    pod = {"metadata": {"name": "p"}, "spec": {"nodeSelector": {"zone": "a", "disk": "ssd"}, "containers": [
        {"name": "c", "image": "nginx", "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}}]}}
    code, body = await _raw(api, "POST", "/api/v1/namespaces/default/pods", pod)
    assert code == 201 and _keys(body, "spec", "nodeSelector") == ["disk", "zone"], body
    assert list(json.loads(body)["spec"]["containers"][0]["resources"]["limits"]) == ["cpu", "memory"]
