"""Warnings gathered before a request fails go out with its error, as upstream's warning recorder
writes each Warning header as it is added: the unknown and duplicate fields of a refused write
(kubectl prints them above the error), a deprecated version's warning on a 404."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore

UNKNOWN = '299 - "unknown field \\"bogus\\""'


async def test_a_refused_write_carries_the_warnings_of_its_decoding():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    cms = f"{base}/api/v1/namespaces/default/configmaps"
    bad = {"bad key!": "x"}
    try:
        async with aiohttp.ClientSession() as s:
            got = {}
            async with s.post(cms, json={"metadata": {"name": "a"}, "bogus": 1}) as r:
                got["created"] = r.status, r.headers.getall("Warning", [])
            async with s.post(cms, json={"metadata": {"name": "b"}, "bogus": 1, "data": bad}) as r:
                got["create"] = r.status, r.headers.getall("Warning", [])
            async with s.put(f"{cms}/a", json={"metadata": {"name": "a"}, "bogus": 1, "data": bad}) as r:
                got["update"] = r.status, r.headers.getall("Warning", [])
            async with s.patch(f"{cms}/a", data=b'{"data":{"k":"1","k":"2","bad key!":"x"}}',
                               headers={"Content-Type": "application/merge-patch+json"}) as r:
                got["patch"] = r.status, r.headers.getall("Warning", [])
            async with s.get(f"{base}/api/v1/namespaces/default/endpoints/missing") as r:
                got["deprecated"] = r.status, r.headers.getall("Warning", [])
        assert got == {
            "created": (201, [UNKNOWN]),
            "create": (422, [UNKNOWN]),
            "update": (422, [UNKNOWN]),
            "patch": (422, ['299 - "duplicate field \\"data.k\\""']),
            "deprecated": (404, ['299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"']),
        }
    finally:
        await server.stop()


async def test_a_deprecated_versions_warning_comes_before_the_requests_own():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    eps = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/endpoints"
    try:
        async with aiohttp.ClientSession() as s, s.post(eps, json={"metadata": {"name": "e"}, "bogus": 1}) as r:
            got = r.status, r.headers.getall("Warning", [])
        assert got == (201, ['299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"', UNKNOWN])
    finally:
        await server.stop()
