"""A watch with a label selector matches each event's objects once (the object now, and the one
before it where there is one): the cache's `accept` judges the event, and the stream takes its
type from that judgement instead of matching again, over HTTP (the events written straight to the
connection) as in-process (queued for the watch's task)."""

import asyncio

import aiohttp
import orjson

from nanokube.apiserver import rest as rest_mod
from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.store.memory import MemoryStore


def _counting(monkeypatch) -> list[int]:
    calls = [0]
    real = rest_mod.matches_labels

    def counted(reqs, labels):
        calls[0] += 1
        return real(reqs, labels)

    monkeypatch.setattr(rest_mod, "matches_labels", counted)
    return calls


async def _writes(server: APIServer, calls: list[int]) -> list[int]:
    """Writes a ConfigMap in and out of the selector `app=a`; the selector's matches each write cost."""
    cms = server.index.get("", "v1", "configmaps")
    opts = WriteOptions(user=SYSTEM)
    spent = []

    async def step(write):
        before = calls[0]
        await write
        await asyncio.sleep(0.05)  # the event reaches the watch and its stream
        spent.append(calls[0] - before)

    def labels(value: str) -> dict:
        return {"metadata": {"labels": {"app": value}}}

    await step(server.rest.create(cms, "v1", "default", {"metadata": {"name": "c", "labels": {"app": "a"}}}, opts))
    for i, value in enumerate(("a", "b", "b", "a")):  # still in, out, still out, in again
        await step(server.rest.patch(cms, "v1", "default", "c", "application/merge-patch+json",
                                     orjson.dumps(labels(value) | {"data": {"v": str(i)}}), opts))
    await step(server.rest.delete(cms, "v1", "default", "c", None, opts))
    return spent


#: (the object that stopped matching is sent as it last matched, at the event's resourceVersion, as
#: upstream's cacheWatcher sends it)
EXPECTED = [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "a"), ("DELETED", "a")]


async def test_a_selector_is_matched_once_an_event_over_http(monkeypatch):
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    calls = _counting(monkeypatch)
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps",
                                params={"watch": "1", "labelSelector": "app=a"}) as r:
                assert r.status == 200
                spent = await _writes(server, calls)
                got, versions, data = [], [], []
                while len(got) < len(EXPECTED):
                    ev = orjson.loads(await asyncio.wait_for(r.content.readline(), 10))
                    got.append((ev["type"], ev["object"]["metadata"]["labels"]["app"]))
                    versions.append(int(ev["object"]["metadata"]["resourceVersion"]))
                    data.append((ev["object"].get("data") or {}).get("v"))
        assert got == EXPECTED
        # the DELETED of the object that left the selector: as it was (data v=0), at its event's revision
        assert data[1:3] == ["0", "0"] and versions == sorted(set(versions))
        # created: the object; each patch and the delete: the object and the one it replaced
        assert spent == [1, 2, 2, 2, 2, 2]
    finally:
        await server.stop()


async def test_a_selector_is_matched_once_an_event_in_process(monkeypatch):
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    calls = _counting(monkeypatch)
    try:
        cms = server.index.get("", "v1", "configmaps")
        stream = await server.rest.watch(cms, "v1", "default", label_selector="app=a", resource_version="0")
        got = []

        async def read():
            async for typ, obj in stream:
                got.append((typ, obj["metadata"]["labels"]["app"]))
                if len(got) == len(EXPECTED):
                    return

        reader = asyncio.ensure_future(read())
        spent = await _writes(server, calls)
        await asyncio.wait_for(reader, 10)
        await stream.aclose()
        assert got == EXPECTED
        assert spent == [1, 2, 2, 2, 2, 2]
    finally:
        await server.stop()
