"""The Warning headers of a response as upstream's recorder (filters/warning.go) writes them: whole
while their texts fit in 4 Ki runes; past that every text, those already written included, cut to 256
runes, and no more once the cut ones reach 4 Ki runes. A refused write is limited the same way."""

import re

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


def _texts(values: list[str]) -> list[str]:
    assert all(v.startswith('299 - "') and v.endswith('"') for v in values), values
    return [v[len('299 - "'):-1].replace('\\"', '"') for v in values]


async def test_warnings_past_four_ki_runes_are_cut_and_stop():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    long = "é" * 400  # runes, not bytes, are counted
    few = {long: 1, "short": 1}
    many = {long: 1, **{f"f{i:03d}" + "x" * 40: 1 for i in range(120)}}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "few"}, **few}) as r:
                assert r.status == 201
                assert _texts(r.headers.getall("Warning")) == [f'unknown field "{long}"', 'unknown field "short"']
            async with s.post(cms, json={"metadata": {"name": "many"}, **many}) as r:
                assert r.status == 201
                created = _texts(r.headers.getall("Warning"))
            async with s.post(cms, json={"metadata": {"name": "bad name!"}, **many}) as r:
                assert r.status == 422
                refused = _texts(r.headers.getall("Warning"))
    finally:
        await server.stop()
    assert created == refused
    assert len(set(created)) == len(created) and set(created) <= {f'unknown field "{k}"'[:256] for k in many}
    assert f'unknown field "{long}"'[:256] in created and max(map(len, created)) == 256
    assert sum(map(len, created[:-1])) < 4096 <= sum(map(len, created)) and len(created) < len(many)


async def test_a_warning_holding_a_control_character_is_dropped():
    """NewWarningHeader refuses a text with a control character, so upstream's recorder drops that warning;
    an unknown field named "\\b" made a Warning header aiohttp refused to write, a 500 for any write (found
    by the e2e fuzzer, NANOKUBE_FUZZ_SEED=2944014359: PUT .../certificatesigningrequests/N/approval with
    metadata {"\\b": ""}). The body's other warnings are kept."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            for body in ({"metadata": {"name": "a", "\b": ""}, "other": 1}, {"metadata": {"name": "b"}, "\x7f": 1, "\x85": 1,
                                                                            "other": 1}):
                async with s.post(cms, json=body) as r:
                    assert r.status == 201, await r.text()
                    assert _texts(r.headers.getall("Warning")) == ['unknown field "other"']
            async with s.post(cms, params={"fieldValidation": "Strict"}, json={"metadata": {"name": "c", "\b": ""}}) as r:
                assert r.status == 400 and "strict decoding error" in (await r.json())["message"]
    finally:
        await server.stop()


async def test_a_webhooks_many_warnings_are_kept_as_the_recorder_keeps_them():
    """A webhook answering 10,000 warnings of 1 KiB (the same one twice over): each text once, cut and
    stopped at the recorder's budget, on an admitted write and on a refused one. Every one was made a
    header that `limit` parsed again (2.8 s of the loop a request; found by fuzz_sweep's `webhooks`)."""
    from tests.apiserver.admission.server import WebhookServer, allow, deny

    many = [f"{i:05d}" + "w" * 1019 for i in range(5000)] * 2
    hook = WebhookServer().start()
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as s:
            config = {"metadata": {"name": "warns"}, "webhooks": [{
                "name": "warns.example.com", "clientConfig": {"url": hook.url("/w"), "caBundle": hook.ca.bundle},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}
            async with s.post(f"{base}/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", json=config) as r:
                assert r.status == 201, await r.text()
            heard = {}
            for name, answer in (("admitted", allow), ("refused", lambda r, **kw: deny(r, "no", **kw))):
                hook.handlers["/w"] = lambda r, answer=answer: answer(r, warnings=many)
                for _ in range(100):  # (until the configuration reaches admission: the webhook is called)
                    hook.calls.clear()
                    async with s.post(f"{base}/api/v1/namespaces/default/configmaps", params={"dryRun": "All"},
                                      json={"metadata": {"name": "a"}}) as r:
                        if hook.calls:
                            heard[name] = (r.status, _texts(r.headers.getall("Warning")))
                            break
    finally:
        await server.stop()
        hook.stop()
    assert heard["admitted"][0] == 201 and heard["refused"][0] == 403
    # (a refusal writes its admission warnings in one header, values joined by ", " as HTTP allows)
    heard["refused"] = (403, [t for v in heard["refused"][1] for t in re.findall(r'(\d{5}w*)(?:", 299 - "|$)', v)])
    texts = heard["admitted"][1]
    assert texts == heard["refused"][1] == [t[:256] for t in many[:len(texts)]]
    assert sum(map(len, texts[:-1])) < 4096 <= sum(map(len, texts))


async def test_a_yaml_bodys_duplicate_keys_warn_one_line_each():
    """go-yaml lists every repeated key of a YAML body in one multi-line error; upstream's handlers
    (addStrictDecodingWarnings) warn of each line alone, so no text holds the line break the recorder
    drops. A text that does hold one (an unknown field named with it) is dropped, as NewWarningHeader
    refuses it."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dupy\ndata:\n  a: '1'\n  a: '2'\n  b: '1'\n  b: '2'\n"
    dups = ['line 7: key "a" already set in map', 'line 9: key "b" already set in map']
    try:
        async with aiohttp.ClientSession() as s:
            async with s.patch(f"{cms}/dupy", params={"fieldManager": "m", "dryRun": "All"}, data=body,
                               headers={"Content-Type": "application/apply-patch+yaml"}) as r:
                assert r.status == 201, await r.text()
                assert _texts(r.headers.getall("Warning")) == dups
            async with s.post(cms, data=body + "c: 1\n", headers={"Content-Type": "application/yaml"}) as r:
                assert r.status == 201, await r.text()
                assert _texts(r.headers.getall("Warning")) == [*dups, 'unknown field "c"']
            async with s.post(cms, json={"metadata": {"name": "nl"}, "a\nb": 1, "other": 1}) as r:
                assert r.status == 201, await r.text()
                assert _texts(r.headers.getall("Warning")) == ['unknown field "other"']
    finally:
        await server.stop()
