"""Periodic watch bookmarks, as upstream's cacher sends them to a watch that allows them: about every
minute whether events flow or not (defaultBookmarkFrequency), and one just before the watch times out
(nextBookmarkTime: 2 s before its deadline), timed by the server's clock."""

import asyncio

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore


async def test_a_watch_gets_a_bookmark_every_minute_and_one_just_before_its_timeout():
    clock = VirtualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    await server.start()
    cms = server.index.get("", "v1", "configmaps")

    async def write(name: str) -> str:
        out = await server.rest.create(cms, "v1", "default", {"metadata": {"name": name}}, WriteOptions(user=SYSTEM))
        return out.obj["metadata"]["resourceVersion"]

    async def sent_before(r, marker: str) -> list[tuple[str, str]]:
        """What the watch sent before `marker`'s ADDED (written now): events go out in order."""
        await write(marker)
        out = []
        while True:
            ev = orjson.loads(await asyncio.wait_for(r.content.readline(), 30))
            if ev["object"]["metadata"].get("name") == marker:
                return out
            out.append((ev["type"], ev["object"]["kind"], ev["object"]["metadata"]["resourceVersion"]))

    start = await write("start")
    url = (f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
           f"?watch=1&allowWatchBookmarks=true&timeoutSeconds=100&resourceVersion={start}")
    try:
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            await clock.advance(30)
            assert await sent_before(r, "busy") == []
            await clock.advance(29)
            assert await sent_before(r, "m1") == []
            rv = server.rest.cache.rev
            await clock.advance(1)  # a minute on: due although events came meanwhile
            assert await sent_before(r, "m2") == [("BOOKMARK", "ConfigMap", str(rv))]
            await clock.advance(37)
            assert await sent_before(r, "m3") == []
            rv = server.rest.cache.rev
            await clock.advance(1)  # 98 s: 2 s before the timeout comes before the next minute
            assert await sent_before(r, "m4") == [("BOOKMARK", "ConfigMap", str(rv))]
    finally:
        await server.stop()


async def test_a_watch_without_bookmarks_allowed_gets_none():
    clock = VirtualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    await server.start()
    cms = server.index.get("", "v1", "configmaps")
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0"
    try:
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            await clock.advance(300)
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}}, WriteOptions(user=SYSTEM))
            ev = orjson.loads(await asyncio.wait_for(r.content.readline(), 30))
            assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "a")
    finally:
        await server.stop()
