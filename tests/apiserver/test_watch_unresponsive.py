"""A watch whose client reads nothing is ended as unresponsive once its queue stays past its buffer
(cache.WATCH_BUDGET), as upstream's cacher closes a watcher whose buffer stays full
(apiserver_terminated_watchers_total). Its task then waits for the client to take what it was sent,
as upstream's handler blocks in its write; at the watch's deadline (timeoutSeconds) a connection whose
client has still not taken it is cut, as any answer's by its request's deadline, instead of keeping
it and its buffers until the client goes away."""

import asyncio
import contextlib
import socket

import aiohttp
import orjson
from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

WATCHES = ("apiserver_longrunning_requests{", 'resource="configmaps"', 'verb="WATCH"')
TERMINATED = ("apiserver_terminated_watchers_total{", 'resource="configmaps"')


@contextlib.asynccontextmanager
async def _unread(tmp_path, **stream_options):
    """A TLS API server and a connection to it (its client's TLS context, a reader and writer) from a
    socket whose receive buffer is 4 KiB, so that a watch its client does not read backs up at once."""
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    writer = None
    try:
        ctx = admin_context(pki, tmp_path)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock, ssl=ctx, server_hostname="localhost", **stream_options)
        yield server, ctx, reader, writer
    finally:
        if writer is not None:
            writer.transport.abort()
        await server.stop()


async def _metrics(http: aiohttp.ClientSession) -> str:
    async with http.get("/metrics") as r:
        return await r.text()


def _sample(metrics: str, series: tuple[str, ...]) -> float:
    """The sum of the samples of the series whose lines begin with series[0] and hold the rest."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith(series[0]) and all(part in line for part in series[1:]))


async def test_a_watch_that_reads_nothing_is_ended_and_its_connection_cut_at_its_deadline(tmp_path):
    async with _unread(tmp_path) as (server, ctx, reader, writer):
        async with aiohttp.ClientSession(f"https://127.0.0.1:{server.port}",
                                         connector=aiohttp.TCPConnector(ssl=ctx)) as http:
            writer.write(b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=8 HTTP/1.1\r\n"
                         b"Host: localhost\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            assert _sample(await _metrics(http), WATCHES) == 1
            cms = server.index.get("", "v1", "configmaps")
            for i in range(200):  # 13 MB, past every buffer between the watch and its client
                await server.rest.create(cms, "v1", "default", {"metadata": {"name": f"cm-{i}"},
                                                                 "data": {"k": "x" * 65536}}, WriteOptions(user=SYSTEM))
            for _ in range(100):
                if _sample(text := await _metrics(http), TERMINATED) == 1:
                    break
                await asyncio.sleep(0.1)
            assert _sample(text, TERMINATED) == 1
            assert _sample(text, WATCHES) == 1  # its task waits for the client
            for _ in range(100):  # until the watch's deadline, 8 s after it began
                if _sample(await _metrics(http), WATCHES) == 0:
                    break
                await asyncio.sleep(0.1)
            assert _sample(await _metrics(http), WATCHES) == 0
        try:  # what the client then reads ends with the connection, not with the stream's last chunk
            rest = await asyncio.wait_for(reader.read(), 20)
        except ConnectionResetError:
            rest = b""
        assert not rest.endswith(b"\r\n0\r\n\r\n")


async def test_a_watch_that_reads_nothing_holds_little_more_than_its_connection_s_high_water_mark(tmp_path):
    """Past its connection's high-water mark (asyncio's flow control, 512 KiB with TLS) a watch's events
    wait in its queue as references to the cache's shared ones, as upstream's wait in a channel over
    the kernel's socket buffer: a watch that reads nothing held 1 MiB unsent before (direct writes went
    on to 1 MiB)."""
    async with _unread(tmp_path, limit=4096) as (server, _, reader, writer):
        writer.write(b"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        cms = server.index.get("", "v1", "configmaps")
        most, high = 0, 0

        def sample() -> None:
            nonlocal most, high
            for c in server._runner.server.connections:
                if c.transport is not None and c.transport.get_write_buffer_size() > most:
                    most, high = c.transport.get_write_buffer_size(), c.transport.get_write_buffer_limits()[1]

        for i in range(200):  # 13 MB in events of 64 KB
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": f"cm-{i}"}, "data": {"k": "x" * 65536}},
                                     WriteOptions(user=SYSTEM))
            await asyncio.sleep(0)
            sample()
        for _ in range(100):  # the budget's wait (up to WATCH_BUDGET) can outlast the creates on a fast loop
            if server.cache.stats.terminated:
                break
            await asyncio.sleep(0.05)
            sample()
        assert server.cache.stats.terminated == {"/registry/configmaps/": 1}
        assert high < most < high + 2 * 65536  # the mark, and a turn's batch of events past it


GIZMOS = ("apiserver_longrunning_requests{", 'resource="gizmos"', 'verb="WATCH"')


def _gizmo_crd(fields: tuple[str, ...]) -> dict:
    props = {f: {"type": "string"} for f in fields}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gizmos.unread.example.com"},
            "spec": {"group": "unread.example.com", "scope": "Namespaced",
                     "names": {"plural": "gizmos", "kind": "Gizmo"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}}


def _paused(server: APIServer) -> bool:
    """Whether a connection's writes wait for its client (asyncio's flow control paused them)."""
    return any(c.writing_paused for c in server._runner.server.connections)


async def test_a_watch_ended_while_its_client_has_stopped_reading_is_cut_at_its_deadline(tmp_path):
    """The client stops reading just as the server ends the watch (its CRD's schema changed, which
    rebuilds the resource's storage): small events fill the connection past its high-water mark while
    the watch's task waits in no write (aiohttp waits on the client once per 64 KiB the task wrote), so
    it is the stream's last chunk that waits for the client. The request runs on
    (apiserver_longrunning_requests) until its deadline, where the server cuts the connection (gone
    from the server's connections), instead of keeping it, its task and what it holds for as long as the
    client keeps the connection open, as it did when the deadline's guard ended with the watch's loop.
    (One time in 16 the event that passed the mark waits in its own write, which the guard covered.)"""
    async with _unread(tmp_path) as (server, ctx, reader, writer):
        async with aiohttp.ClientSession(f"https://127.0.0.1:{server.port}",
                                         connector=aiohttp.TCPConnector(ssl=ctx)) as http:
            crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            gizmos = "/apis/unread.example.com/v1/namespaces/default/gizmos"
            async with http.post(crd, json=_gizmo_crd(("data",))) as r:
                assert r.status == 201, await r.text()
            for _ in range(500):
                async with http.get(gizmos) as r:
                    if r.status == 200:
                        break
                await asyncio.sleep(0.02)
            others = server.cache.watcher_count
            writer.write(f"GET {gizmos}?watch=1&timeoutSeconds=8 HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            local = writer.get_extra_info("sockname")

            def held() -> bool:  # the server still has the watch's connection
                return any(c.transport is not None and c.transport.get_extra_info("peername") == local
                           for c in server._runner.server.connections)
            assert held()
            res = server.index.get("unread.example.com", "v1", "gizmos")
            for i in range(5000):  # until the connection holds past its mark
                await server.rest.create(res, "v1", "default", {"apiVersion": "unread.example.com/v1", "kind": "Gizmo",
                                                                "metadata": {"name": f"g-{i}"}, "spec": {"data": "x" * 4096}},
                                         WriteOptions(user=SYSTEM))
                await asyncio.sleep(0)
                if _paused(server):
                    break
            assert _paused(server)
            async with http.patch(f"{crd}/gizmos.unread.example.com", data=orjson.dumps(
                    {"spec": _gizmo_crd(("data", "note"))["spec"]}),
                    headers={"Content-Type": "application/merge-patch+json"}) as r:
                assert r.status == 200, await r.text()
            for _ in range(100):  # the watch is gone from the cache
                if server.cache.watcher_count == others:
                    break
                await asyncio.sleep(0.05)
            assert server.cache.watcher_count == others
            assert _sample(await _metrics(http), GIZMOS) == 1  # ended, its last chunk waiting for the client
            for _ in range(200):  # until its deadline, 8 s after it began
                if _sample(await _metrics(http), GIZMOS) == 0:
                    break
                await asyncio.sleep(0.05)
            assert _sample(await _metrics(http), GIZMOS) == 0
            for _ in range(40):
                if not held():
                    break
                await asyncio.sleep(0.05)
            assert not held()  # the server's end of the connection is closed
        try:
            rest = await asyncio.wait_for(reader.read(), 20)
        except ConnectionResetError:
            rest = b""
        assert not rest.endswith(b"\r\n0\r\n\r\n")
