"""Connections that send nothing useful are closed, as kube-apiserver's http.Server closes them: a
request's headers not all sent within the read-header timeout after the TLS handshake (slowloris), a
connection idle past the idle timeout between requests, a TLS handshake never finished. The
timeouts (32 s, 90 s) are shortened here; what is asserted is that the server closes the connection
unanswered, and that a request or a watch that goes on past them is not cut."""

import asyncio
import contextlib
import socket
import ssl

import orjson
import pytest

from nanokube.apiserver import serving
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from tests.apiserver.test_expect import served

#: the most seconds a test waits for the server to close a connection (the timeouts are a fraction of it)
CLOSED_WITHIN = 20


@pytest.fixture
def short_timeouts(monkeypatch):
    monkeypatch.setattr(serving, "READ_HEADER_TIMEOUT", 0.5)
    monkeypatch.setattr(serving, "IDLE_TIMEOUT", 1.0)


async def _connect(server, ctx):
    return await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx, server_hostname="localhost")


async def _read_to_end(reader: asyncio.StreamReader) -> bytes:
    """What the server sends until it closes the connection."""
    try:
        return await asyncio.wait_for(reader.read(), CLOSED_WITHIN)
    except ConnectionResetError:
        return b""


async def test_headers_that_never_end_and_silence_close_the_connection_unanswered(tmp_path, short_timeouts):
    async with served(tmp_path) as (server, ctx):
        slow_reader, slow = await _connect(server, ctx)
        slow.write(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        silent_reader, silent = await _connect(server, ctx)
        for _ in range(3):  # a header byte now and then does not keep it open
            await asyncio.sleep(0.2)
            slow.write(b"a")
        assert await _read_to_end(slow_reader) == b""
        assert await _read_to_end(silent_reader) == b""
        slow.close()
        silent.close()


async def test_a_kept_connection_idle_past_the_idle_timeout_is_closed(tmp_path, short_timeouts):
    async with served(tmp_path) as (server, ctx):
        reader, writer = await _connect(server, ctx)
        await asyncio.sleep(0.3)  # a first request in time, past the point the header timeout was due
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1])
        await reader.readexactly(length)
        assert await _read_to_end(reader) == b""
        writer.close()


async def test_a_tls_handshake_never_finished_is_dropped(tmp_path, short_timeouts):
    async with served(tmp_path) as (server, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)  # no ClientHello ever
        writer.write(b"\x16\x03\x01")  # (the first bytes of one)
        assert await _read_to_end(reader) == b""
        writer.close()


async def test_a_watch_goes_on_past_the_header_and_idle_timeouts(tmp_path, short_timeouts):
    async with served(tmp_path) as (server, ctx):
        reader, writer = await _connect(server, ctx)
        writer.write(b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=30 HTTP/1.1\r\n"
                     b"Host: localhost\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200"), head
        await asyncio.sleep(1.5)  # past both
        await server.rest.create(server.index.get("", "v1", "configmaps"), "v1", "default", {"metadata": {"name": "late"}},
                                 WriteOptions(user=SYSTEM))
        size = int(await asyncio.wait_for(reader.readline(), 10), 16)
        event = orjson.loads(await reader.readexactly(size))
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "late")
        writer.close()


async def test_listening_sockets_take_the_handshake_timeout(tmp_path, short_timeouts):
    """The sockets `listen_on` is handed serve with the same bounds as the server's own."""
    async with served(tmp_path) as (server, _):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        await server.listen_on(sock)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await _read_to_end(reader) == b""
        writer.close()


async def test_an_answer_its_client_does_not_read_is_cut_at_the_requests_deadline(tmp_path):
    """A LIST of 8 MB to a client that reads none of it: the answer is written under the request's
    deadline (its `timeout`, 1 s here; else 60 s), past which the connection is cut, as upstream's
    timeout filter cuts a handler still writing; it was held as long as the client kept it open."""
    async with served(tmp_path) as (server, ctx):
        cms = server.index.get("", "v1", "configmaps")
        for i in range(8):
            await server.rest.create(cms, "v1", "default", {"metadata": {"name": f"big-{i}"}, "data": {"k": "x" * 1_000_000}},
                                     WriteOptions(user=SYSTEM))
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock, ssl=ctx, server_hostname="localhost")
        writer.write(b"GET /api/v1/namespaces/default/configmaps?timeout=1s HTTP/1.1\r\nHost: localhost\r\n"
                     b"Accept: application/json\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")).split(b":")[1])
        await asyncio.sleep(3)  # reading nothing, past the deadline
        body = b""
        with contextlib.suppress(ConnectionResetError, asyncio.IncompleteReadError):
            while chunk := await asyncio.wait_for(reader.read(1 << 20), CLOSED_WITHIN):
                body += chunk
        assert 0 < length and len(body) < length
        writer.transport.abort()


async def test_plain_http_on_the_tls_port_is_answered_as_gos_server_answers_it(tmp_path):
    """fuzz65: `curl http://` at the TLS port got nothing (asyncio failed the handshake and closed the
    connection); Go's server answers a record header that reads like a request line with its plain 400,
    even one that comes in pieces. A ClientHello whose first byte comes alone is still a handshake."""
    async with served(tmp_path) as (server, ctx):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GE")
        await writer.drain()
        await asyncio.sleep(0.1)  # (two segments: the first shorter than a record header)
        writer.write(b"T /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert await _read_to_end(reader) == b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
        hello = True
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sent = outgoing.read()
            if hello:
                writer.write(sent[:1])
                await writer.drain()
                await asyncio.sleep(0.1)
                sent, hello = sent[1:], False
            writer.write(sent)
            incoming.write(await asyncio.wait_for(reader.read(1 << 16), CLOSED_WITHIN))
        tls.write(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        writer.write(outgoing.read())
        answer = b""
        while True:
            try:
                if not (piece := tls.read(1 << 16)):
                    break
                answer += piece
            except ssl.SSLWantReadError:
                if not (got := await asyncio.wait_for(reader.read(1 << 16), CLOSED_WITHIN)):
                    break
                incoming.write(got)
            except ssl.SSLZeroReturnError:
                break
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nok"), answer


async def test_hundreds_of_connections_dropped_at_once_leave_no_descriptor_behind(tmp_path):
    """fuzz65: 200 connections opened together and dropped (reset) mid-way, in every state a connection
    can be in: a byte of a ClientHello, plain HTTP answered, junk, a finished handshake with nothing
    sent, a watch. The server's descriptors come back to what they were (counted in /proc, the server
    being in this process)."""
    import os

    async with served(tmp_path) as (server, ctx):
        before = len(os.listdir("/proc/self/fd"))
        conns = []
        for i in range(200):
            kind = i % 5
            reader, writer = await _connect(server, ctx) if kind >= 3 else \
                await asyncio.open_connection("127.0.0.1", server.port)
            writer.write((b"\x16", b"GET / HTTP/1.1\r\n\r\n", b"\x00" * 64, b"",
                          b"GET /api/v1/namespaces?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")[kind])
            conns.append((reader, writer))
        await conns[-1][0].readuntil(b"\r\n\r\n")  # the last watch has begun
        for _, writer in conns:
            writer.transport.abort()
        deadline = asyncio.get_running_loop().time() + CLOSED_WITHIN
        while (now := len(os.listdir("/proc/self/fd"))) != before and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert now == before, (before, now)
