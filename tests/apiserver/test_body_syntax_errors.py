"""A body whose JSON does not parse, over HTTP: the 400 carries Go's decoder words, as upstream's
serializer (a create's or update's transformDecodeError) and patchers (applyJSPatch,
strategicPatchObject) write them, and nothing is written."""

from __future__ import annotations

import json

import pytest

from tests.served import send as _send
from tests.served import served

CMS = "/api/v1/namespaces/default/configmaps"
SYNTAX = "invalid character 'b' looking for beginning of object key string"


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        assert (await _send(api_client, "POST", CMS, b'{"metadata":{"name":"keep"},"data":{"a":"1"}}'))[0] == 201
        yield api_client


async def _refused(api, method: str, path: str, body: bytes, ctype: str = "application/json") -> str:
    code, status = await _send(api, method, path, body, ctype)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    _, kept = await _send(api, "GET", CMS + "/keep", None)
    assert kept["data"] == {"a": "1"}, kept
    return status["message"]


@pytest.mark.parametrize("ctype,validation,message", [
    ("application/merge-patch+json", "", f"error decoding patch: {SYNTAX}"),
    ("application/merge-patch+json", "Strict", f"error decoding patch: {SYNTAX}"),
    ("application/merge-patch+json", "Ignore", "Invalid JSON Patch"),
    ("application/json-patch+json", "Warn", f"error decoding patch: {SYNTAX}"),
    ("application/json-patch+json", "Ignore", SYNTAX),
    ("application/strategic-merge-patch+json", "", SYNTAX),
    ("application/strategic-merge-patch+json", "Strict", SYNTAX),
])
async def test_a_patch_that_does_not_parse_says_what_go_says(api, ctype, validation, message):
    query = f"?fieldValidation={validation}" if validation else ""
    assert await _refused(api, "PATCH", f"{CMS}/keep{query}", b"{bad", ctype) == message


async def test_a_create_or_update_that_does_not_parse_names_its_kind_and_quotes_the_body(api):
    unrecognized = "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: "
    assert await _refused(api, "POST", CMS, b"{bad") == f"{unrecognized}{SYNTAX} ({{bad)"
    assert await _refused(api, "PUT", CMS + "/keep", b"{bad") == f"{unrecognized}{SYNTAX} ({{bad)"
    # more than 30 bytes are cut; a body that is not an object is quoted in hex
    long = b'{"metadata":{"name":"keep"},"data":{"a":"1",}}'
    assert await _refused(api, "PUT", CMS + "/keep", long) == (
        f"{unrecognized}invalid character '}}' looking for beginning of object key string ({long[:30].decode()} ...)")
    assert await _refused(api, "POST", CMS, b"[1,]") == (
        f"{unrecognized}invalid character ']' looking for beginning of value (5b312c5d)")


async def test_a_scale_patch_that_does_not_parse_says_what_go_says(api):
    """/scale is served by the same patchers."""
    deploy = {"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    deploys = "/apis/apps/v1/namespaces/default/deployments"
    assert (await _send(api, "POST", deploys, json.dumps(deploy).encode()))[0] == 201
    for ctype, message in (("application/merge-patch+json", f"error decoding patch: {SYNTAX}"),
                           ("application/strategic-merge-patch+json", SYNTAX)):
        code, status = await _send(api, "PATCH", deploys + "/web/scale", b"{bad", ctype)
        assert (code, status["message"]) == (400, message), status
