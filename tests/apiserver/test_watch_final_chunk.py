"""Every watch response ends with the final chunk of its chunked encoding —
on `timeoutSeconds`, on server shutdown and when the watcher falls behind —
so clients see a clean end of stream, never a connection cut mid-body."""

import asyncio

import orjson

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def _open_watch(port: int, query: str):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /api/v1/namespaces/default/configmaps?watch=true{query} HTTP/1.1\r\n"
                 "Host: localhost\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


async def _watching(server: APIServer):
    """The watch cache's ConfigMap watcher, once the watch request has registered it (a loaded
    machine can take seconds to get there)."""
    for _ in range(3000):
        ws = [w for ws in server.cache._watchers.values() for w in ws if w.prefix.startswith("/registry/configmaps/")]
        if ws:
            (w,) = ws
            return w
        await asyncio.sleep(0.01)
    raise AssertionError("the watch was never registered")


async def _chunks(reader: asyncio.StreamReader) -> tuple[list[bytes], bool]:
    """The chunked body's chunks, and whether the zero-length final chunk came."""
    head = await reader.readuntil(b"\r\n\r\n")
    assert b"200 OK" in head and b"chunked" in head.lower(), head
    chunks = []
    while True:
        size_line = await reader.readline()
        if not size_line:
            return chunks, False
        size = int(size_line.strip(), 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            return chunks, True
        chunks.append(data[:-2])


async def test_watch_ends_with_final_chunk_on_timeout_and_shutdown():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    stopped = False
    try:
        reader, writer = await _open_watch(server.port, "&timeoutSeconds=1")
        chunks, final = await asyncio.wait_for(_chunks(reader), 10)
        writer.close()
        assert final
        reader, writer = await _open_watch(server.port, "")
        await _watching(server)
        read = asyncio.ensure_future(_chunks(reader))
        await server.stop()
        stopped = True
        chunks, final = await asyncio.wait_for(read, 10)
        writer.close()
        assert final
    finally:
        if not stopped:
            await server.stop()


async def test_failing_event_ends_the_stream_with_an_error_event_and_final_chunk(monkeypatch):
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        reader, writer = await _open_watch(server.port, "")
        read = asyncio.ensure_future(_chunks(reader))
        await _watching(server)

        def broken(typ, obj):
            raise RuntimeError("encoder broke")
        monkeypatch.setattr(server.cache, "encode_event", broken)
        cms = server.index.get("", "v1", "configmaps")
        from nanokube.apiserver.rest import SYSTEM, WriteOptions
        await server.rest.create(cms, "v1", "default", {"metadata": {"name": "a"}}, WriteOptions(user=SYSTEM))
        chunks, final = await asyncio.wait_for(read, 10)
        writer.close()
        assert final
        event = orjson.loads(b"".join(chunks))
        assert event["type"] == "ERROR"
        assert list(event["object"]) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "details",
                                         "code"]
        assert event["object"]["code"] == 500
    finally:
        await server.stop()


async def test_slow_watcher_is_ended_cleanly():
    """A watcher ended for falling behind its buffer; its response still ends cleanly."""
    from nanokube.apiserver.cache import ADDED, CacheEvent, Entry

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        reader, writer = await _open_watch(server.port, "")
        w = await _watching(server)
        w.size = 2
        obj = {"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": "a", "namespace": "default", "resourceVersion": "999999"}}
        events = [CacheEvent(ADDED, "/registry/configmaps/default/a", Entry(obj, 999999), None, 999999) for _ in range(3)]
        for ev in events:  # arrive faster than the watcher is served
            server.cache._offer(w, ev)
        server.cache._blocked_out("/registry/configmaps/", w.blocked)  # its time is up before its task ran
        assert w.overflowed
        chunks, final = await asyncio.wait_for(_chunks(reader), 10)
        writer.close()
        assert final
    finally:
        await server.stop()


async def test_an_expired_resource_version_is_a_watch_with_one_error_event(monkeypatch):
    """As kube-apiserver's cacher answers it: 200, an ERROR event with the 410 Status, the final chunk."""
    from nanokube.store.interface import Compacted

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    try:
        def compacted(rev, prefix):
            raise Compacted(rev, 40)
        monkeypatch.setattr(server.cache, "events_since", compacted)
        reader, writer = await _open_watch(server.port, "&resourceVersion=3")
        chunks, final = await asyncio.wait_for(_chunks(reader), 10)
        writer.close()
        assert final
        event = orjson.loads(b"".join(chunks))
        assert event == {"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 3 (40)", "reason": "Expired", "code": 410}}
    finally:
        await server.stop()
