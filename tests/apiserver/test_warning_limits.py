"""The Warning headers of a response as upstream's recorder (filters/warning.go) writes them: whole
while their texts fit in 4 Ki runes; past that every text, those already written included, cut to 256
runes, and no more once the cut ones reach 4 Ki runes. A refused write is limited the same way."""

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
