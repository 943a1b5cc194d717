"""Response bodies as Go's JSON encoder writes them, over HTTP: `<`, `>`, `&`, U+2028 and U+2029
inside strings are escaped (\\u003c, \\u003e, \\u0026, \\u2028, \\u2029), in a create's answer,
a GET (pretty too), a LIST, a watch event and a Status alike."""

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
