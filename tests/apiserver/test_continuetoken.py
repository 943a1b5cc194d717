"""A list's continue token is checked as upstream's storage.DecodeContinue checks it: a token the
client made up or changed is a 400 'invalid continue token: continue key is not valid: ...' with
its reason, never a server error, and its start key cannot climb out of the list's prefix."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest


def _token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _list(core, query: list[tuple[str, str]]) -> tuple[int, dict]:
    api = core.api_client
    request = api.param_serialize("GET", "/api/v1/namespaces/default/configmaps", query_params=query,
                                  header_params={"Accept": "application/json"})
    response = api.call_api(*request[:4])
    response.read()
    return response.status, json.loads(response.data)


V1 = '"v":"meta.k8s.io/v1"'


@pytest.mark.parametrize("token, reason", [
    ("x", "illegal base64 data at input byte 0"),
    ("ab=c", "illegal base64 data at input byte 2"),
    (_token("[]"), "json: cannot unmarshal array into Go value of type storage.continueToken"),
    (_token('{"v":'), "unexpected end of JSON input"),
    # wrong types were a 500 ("'>' not supported between instances of 'str' and 'int'")
    (_token('{' + V1 + ',"rv":"1","start":1}'),
     "json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
    (_token('{' + V1 + ',"rv":1,"start":1}'),
     "json: cannot unmarshal number into Go struct field continueToken.start of type string"),
    (_token('{' + V1 + ',"rv":1.5,"start":"a"}'),
     "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"),
    (_token('{' + V1 + ',"rv":1,"start":null}'), "encoded start key empty (version meta.k8s.io/v1)"),
    (_token('{' + V1 + ',"rv":0,"start":"a"}'), "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (_token('{"v":"meta.k8s.io/v2","rv":1,"start":"a"}'), "server does not recognize this encoded version meta.k8s.io/v2"),
    (_token('{' + V1 + ',"rv":1,"start":"../kube-system/a"}'), "../kube-system/a"),
])
async def test_a_tampered_continue_token_is_a_bad_request_with_decode_continues_reason(core, token, reason):
    status, body = await asyncio.to_thread(_list, core, [("limit", "1"), ("continue", token)])
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest", f"invalid continue token: continue key is not valid: {reason}")


async def test_the_servers_own_continue_token_pages_through_the_list(core):
    for name in ("a", "b", "c"):
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": name}})
    names, token = [], None
    while True:
        page = await asyncio.to_thread(core.list_namespaced_config_map, "default", limit=1, _continue=token)
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert [n for n in names if n in "abc"] == ["a", "b", "c"]
    # a token in upstream's form (start relative to the namespace's prefix, rv -1: the latest) continues after it
    status, body = await asyncio.to_thread(_list, core, [("limit", "5"), ("continue", _token('{' + V1 + ',"rv":-1,"start":"a\\u0000"}'))])
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]][:2] == ["b", "c"]
