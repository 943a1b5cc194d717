"""A watch's buffer, as upstream's cacheWatcher's: sized by its resource's watch cache capacity over
75 s (10 to 100, 1000 for a resource with a trigger field, 10 for a watch of one value of it), and a watch whose
queue is still past it when its resource's budget (WATCH_BUDGET at most) runs out is ended as unresponsive, dropping what it had not
taken, instead of the server holding every event for it; its client watches again from the last
resourceVersion it had and misses nothing. An in-process watch that takes its events whenever its
task runs is never ended, however long the loop was busy."""

import asyncio
import time

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.cache import CAPACITY_MIN, EVENT_FRESH, WATCH_BUDGET, WATCH_BUFFER_MIN, WATCH_BUFFER_TRIGGERED
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.client.informer import Informer
from nanokube.clock import VirtualClock
from nanokube.store.memory import MemoryStore

OPTS = WriteOptions(user=SYSTEM)


def _cm(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": name}}


async def test_a_watch_that_reads_nothing_is_ended_and_a_watch_from_its_last_version_misses_nothing():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        cms = server.index.get("", "v1", "configmaps")
        first = await server.rest.create(cms, "v1", "default", _cm("first"), OPTS)
        others = server.cache.watcher_count  # the server's own (admission's configuration)
        stream = await server.rest.watch(cms, "v1", "default", resource_version=first.obj["metadata"]["resourceVersion"])
        assert stream.watcher.size == WATCH_BUFFER_MIN
        await server.rest.create(cms, "v1", "default", _cm("seen"), OPTS)
        typ, obj = await asyncio.wait_for(stream.__anext__(), 10)
        assert (typ, obj["metadata"]["name"]) == ("ADDED", "seen")
        last = obj["metadata"]["resourceVersion"]
        names = [f"cm-{i}" for i in range(3 * WATCH_BUFFER_MIN)]
        for name in names:  # the watch's task takes none of them
            await server.rest.create(cms, "v1", "default", _cm(name), OPTS)
        await asyncio.sleep(3 * WATCH_BUDGET)
        assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
        assert [e async for e in stream] == []  # its stream ends: what it had not taken was dropped
        assert server.cache.watcher_count == others
        again = await server.rest.watch(cms, "v1", "default", resource_version=last)
        got = [await asyncio.wait_for(again.__anext__(), 10) for _ in names]
        assert [(t, o["metadata"]["name"]) for t, o in got] == [("ADDED", n) for n in names]
        await again.aclose()
    finally:
        await server.stop()


async def test_an_in_process_informer_keeps_its_watch_through_a_burst_on_a_busy_loop():
    """The informer's task is woken by the burst's first event, before the timer that would end its
    watch is due: however long the writes hold the loop, it takes its events before that timer runs."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        client = LocalClient(server.rest)
        informer = Informer(client.resource("", "v1", "configmaps"), namespace="default")
        task = asyncio.ensure_future(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 10)
        cms = server.index.get("", "v1", "configmaps")

        async def burst(k: int) -> None:
            for i in range(k, k + 10 * WATCH_BUFFER_MIN):
                await server.rest.create(cms, "v1", "default", _cm(f"cm-{i:04d}"), OPTS)
            time.sleep(2 * WATCH_BUDGET)  # the loop is held past the timer's due time

        for k in range(0, 300, 100):
            await burst(k)
            await asyncio.sleep(0)
        rv = (await server.rest.create(cms, "v1", "default", _cm("last"), OPTS)).obj["metadata"]["resourceVersion"]
        for _ in range(1000):
            if informer.last_sync_rv == rv:
                break
            await asyncio.sleep(0.01)
        assert informer.last_sync_rv == rv
        assert len(informer.list()) == 301
        assert server.cache.stats.terminated == {}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        await server.stop()


def _capacity(metrics: str, resource: str) -> tuple[float, float, float]:
    """watch_cache_capacity of `resource` and its increases and decreases, from /metrics."""
    got = {}
    for line in metrics.splitlines():
        if line.startswith("watch_cache_capacity") and f'resource="{resource}"' in line:
            got[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
    return (got.get("watch_cache_capacity", 0.0), got.get("watch_cache_capacity_increase_total", 0.0),
            got.get("watch_cache_capacity_decrease_total", 0.0))


async def test_a_watch_s_buffer_is_its_resource_s_watch_cache_capacity_over_75_s():
    """Upstream's watch cache holds a resource's events from the last 75 s, its capacity doubling when
    an event finds it full of fresher ones and halving when one finds the newest quarter stale (from
    100 to 102,400); a watch's buffer is that capacity over 75 s (at least 10, at most 10 for a watch
    of one node's pods, 1000 for other watches of pods, 100 for other resources)."""
    clock = VirtualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    try:
        rest = server.rest
        pods, cms = server.index.get("", "v1", "pods"), server.index.get("", "v1", "configmaps")

        async def size(res, **kw) -> int:
            stream = await rest.watch(res, "v1", None, **kw)
            await stream.aclose()
            return stream.watcher.size

        async def capacity(resource: str) -> tuple[float, float, float]:
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{server.port}/metrics") as r:
                return _capacity(await r.text(), resource)

        assert await size(pods) == await size(cms) == WATCH_BUFFER_MIN  # nothing written yet
        for i in range(1600):  # within 75 s: 100 -> 200 -> 400 -> 800 -> 1600 as the 101st, 201st, ... comes
            await rest.create(cms, "v1", "default", _cm(f"cm-{i}"), OPTS)
        assert await capacity("configmaps") == (1600, 4, 0)
        assert await size(cms) == 22  # ceil(1600 / 75)
        for i in range(801):
            await rest.create(pods, "v1", "default", {"metadata": {"name": f"p-{i}"},
                                                      "spec": {"containers": [{"name": "c", "image": "i"}]}}, OPTS)
        assert (await capacity("pods"))[0] == 1600
        assert await size(pods) == await size(pods, field_selector="spec.nodeName!=") == 22
        assert await size(pods, field_selector="spec.nodeName=n1") == WATCH_BUFFER_TRIGGERED
        await clock.advance(EVENT_FRESH + 1)
        await rest.create(cms, "v1", "default", _cm("later-0"), OPTS)  # its newest quarter is stale: halved
        assert await capacity("configmaps") == (800, 4, 1)
        assert await size(cms) == 11
        for i in range(1, 4):  # each finds it full again, of events no fresher: 400, 200, 100
            await rest.create(cms, "v1", "default", _cm(f"later-{i}"), OPTS)
        assert await capacity("configmaps") == (CAPACITY_MIN, 4, 4)
        assert await size(cms) == WATCH_BUFFER_MIN
    finally:
        await server.stop()


def _chunked_events(body: bytes) -> tuple[list[dict], bool]:
    """A chunked watch response's events, and whether it ended with its last (empty) chunk."""
    events, at, line = [], 0, b""
    while at < len(body):
        end = body.index(b"\r\n", at)
        size = int(body[at:end], 16)
        if size == 0:
            return events, body[end:] == b"\r\n\r\n"
        line += body[end + 2:end + 2 + size]
        at = end + 4 + size
        while b"\n" in line:
            one, line = line.split(b"\n", 1)
            events.append(orjson.loads(one))
    return events, False


async def test_a_watch_ended_while_its_client_reads_slowly_ends_cleanly_and_its_client_watches_again():
    """Over HTTP: the client reads its first event, then nothing while 13 MB of changes come, then
    all it was sent, slowly; the server ends the watch as unresponsive, and the client gets what it
    was sent and the stream's last chunk, as upstream's handler ends the response once the watcher's
    result channel is closed; a watch from the resourceVersion it had last gets every change after it."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        cms = server.index.get("", "v1", "configmaps")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        await server.rest.create(cms, "v1", "default", _cm("seen"), OPTS)
        names = [f"cm-{i}" for i in range(200)]
        for name in names:
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": name}, "data": {"k": "x" * 65536}}, OPTS)
        body = b""
        while chunk := await asyncio.wait_for(reader.read(65536), 10):  # slowly: 64 KiB each 10 ms
            body += chunk
            if body.endswith(b"\r\n0\r\n\r\n"):
                break
            await asyncio.sleep(0.01)
        writer.close()
        assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
        events, ended = _chunked_events(body)
        assert ended
        got = [e["object"]["metadata"]["name"] for e in events]
        assert got == ["seen", *names[:len(got) - 1]] and len(got) <= len(names)
        again = await server.rest.watch(cms, "v1", "default", resource_version=events[-1]["object"]["metadata"]["resourceVersion"])
        rest = [await asyncio.wait_for(again.__anext__(), 10) for _ in names[len(got) - 1:]]
        assert [o["metadata"]["name"] for _, o in rest] == names[len(got) - 1:]
        await again.aclose()
    finally:
        await server.stop()


async def test_a_watch_keeps_the_buffer_it_started_with_as_its_resource_s_capacity_changes():
    """Upstream sizes a watcher's channels once, as its watch starts (suggestedWatchChannelSize of the
    watch cache's capacity then); a capacity grown or shrunk later sizes later watches only."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        cms = server.index.get("", "v1", "configmaps")
        early = await server.rest.watch(cms, "v1", None)
        assert early.watcher.size == WATCH_BUFFER_MIN
        for i in range(801):  # capacity 1600
            await server.rest.create(cms, "v1", "default", _cm(f"cm-{i}"), OPTS)
        late = await server.rest.watch(cms, "v1", None)
        assert (early.watcher.size, late.watcher.size) == (WATCH_BUFFER_MIN, 22)
        await early.aclose()
        await late.aclose()
    finally:
        await server.stop()
