"""Which paths watch: a collection's with ?watch, and the legacy /watch/ paths (one object's too);
an object's own path is a GET whatever its ?watch, as upstream's RequestInfo makes only a
collection request a watch."""

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def test_an_objects_own_path_with_watch_is_a_get():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}/api/v1"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base}/namespaces/default/configmaps", json={"metadata": {"name": "a"}}) as r:
                assert r.status == 201
            async with s.get(f"{base}/namespaces/default/configmaps/a?watch=true&timeoutSeconds=1") as r:
                got = await r.json()
            async with s.get(f"{base}/watch/namespaces/default/configmaps/a?timeoutSeconds=1") as r:
                legacy = [orjson.loads(line) for line in (await r.read()).splitlines()]
        assert (got["kind"], got["metadata"]["name"]) == ("ConfigMap", "a")
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in legacy] == [("ADDED", "a")]
    finally:
        await server.stop()
