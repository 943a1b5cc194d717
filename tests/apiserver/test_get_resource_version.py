"""A GET with a resourceVersion, as the watch cache's Get serves it: the object no older than that
revision; one the cache has not reached within its wait is the 504 Too large resource version (with
Retry-After), and one that is not a number a 400."""

import aiohttp

from nanokube.apiserver import rest
from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def test_a_get_at_a_resource_version_is_not_older_than_it(monkeypatch):
    monkeypatch.setattr(rest, "FUTURE_RV_WAIT", 0.05)
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    cms = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cms, json={"metadata": {"name": "a"}}) as r:
                rv = (await r.json())["metadata"]["resourceVersion"]
            got = {}
            for asked in (rv, "0", "1", "999999", "abc"):
                async with s.get(f"{cms}/a", params={"resourceVersion": asked}) as r:
                    body = await r.json()
                    got[asked] = r.status, r.headers.get("Retry-After"), body.get("message") or body["metadata"]["name"]
        current = server.rest.cache.rev
        assert got == {rv: (200, None, "a"), "0": (200, None, "a"), "1": (200, None, "a"),
                       "999999": (504, "1", f"Timeout: Too large resource version: 999999, current: {current}"),
                       "abc": (400, None, 'invalid resource version "abc"')}
    finally:
        await server.stop()
