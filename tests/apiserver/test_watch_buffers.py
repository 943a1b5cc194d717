"""A watch's buffer, as upstream's cacheWatcher's: sized by its resource's event rate (10 to 100,
1000 for a resource with a trigger field, 10 for a watch of one value of it), and a watch whose
queue is still past it when its resource's budget (WATCH_BUDGET at most) runs out is ended as unresponsive, dropping what it had not
taken, instead of the server holding every event for it; its client watches again from the last
resourceVersion it had and misses nothing. An in-process watch that takes its events whenever its
task runs is never ended, however long the loop was busy."""

import asyncio
import time

import orjson

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.cache import WATCH_BUDGET, WATCH_BUFFER_INDEXED, WATCH_BUFFER_MIN, WATCH_BUFFER_OTHER
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.client.informer import Informer
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


async def test_a_watch_s_buffer_follows_its_resource_s_event_rate_and_trigger():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        rest = server.rest
        pods, cms = server.index.get("", "v1", "pods"), server.index.get("", "v1", "configmaps")

        async def size(res, **kw) -> int:
            stream = await rest.watch(res, "v1", None, **kw)
            await stream.aclose()
            return stream.watcher.size

        assert await size(pods) == await size(cms) == WATCH_BUFFER_MIN  # nothing written yet
        for i in range(40):  # ~3,000 events of each within EVENT_FRESH seconds: 40 a second
            rest.cache.stats.add(rest.cache.stats.received, "/registry/pods/", 75)
            rest.cache.stats.add(rest.cache.stats.received, "/registry/configmaps/", 75 * 4)
        assert await size(pods) == 40
        assert await size(pods, field_selector="spec.nodeName=n1") == WATCH_BUFFER_MIN
        assert await size(pods, field_selector="spec.nodeName!=") == 40
        assert await size(cms) == WATCH_BUFFER_OTHER  # 160 a second, past an unindexed resource's most
        rest.cache.stats.add(rest.cache.stats.received, "/registry/pods/", 75 * 2000)
        assert await size(pods, label_selector="app=a") == WATCH_BUFFER_INDEXED
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


async def test_a_watch_keeps_the_buffer_it_started_with_as_its_resource_s_rate_changes():
    """Upstream sizes a watcher's channels once, as its watch starts (suggestedWatchChannelSize of the
    watch cache's capacity then); a capacity grown or shrunk later sizes later watches only."""
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        pods = server.index.get("", "v1", "pods")
        early = await server.rest.watch(pods, "v1", None)
        assert early.watcher.size == WATCH_BUFFER_MIN
        server.cache.stats.add(server.cache.stats.received, "/registry/pods/", 75 * 400)  # 400 a second
        late = await server.rest.watch(pods, "v1", None)
        assert (early.watcher.size, late.watcher.size) == (WATCH_BUFFER_MIN, 400)
        await early.aclose()
        await late.aclose()
    finally:
        await server.stop()
