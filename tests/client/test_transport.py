"""The HTTP client's unary requests (client/transport.py) against a bare HTTP/1.1 server that frames,
keeps and drops its connections as a test says: reuse, framing, a kept-alive connection the server
closed, refused connections, close(), and each request's headers."""

import asyncio
import contextlib

import aiohttp
import orjson
import pytest

from nanokube.client.http import EXPECTED, HTTPClient
from nanokube.client.kubeconfig import Credentials
from nanokube.client.metrics import REQUESTS
from nanokube.client.transport import ConnectError


class Server:
    """Answers each request with `answer(request number on its connection, method, path)`: bytes to
    send, or None to close the connection unanswered. Keeps what it was sent, by connection."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[tuple[int, str, str, dict[str, str], bytes]] = []
        self.connections = 0
        self.open: set[asyncio.StreamWriter] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn, self.connections = self.connections, self.connections + 1
        self.open.add(writer)
        try:
            for n in range(1_000):
                head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
                method, path, _ = head[0].split(" ")
                headers = dict(line.split(": ", 1) for line in head[1:] if line)
                body = await reader.readexactly(int(headers.get("Content-Length", 0)))
                self.requests.append((conn, method, path, headers, body))
                out = self.answer(n, method, path)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open.discard(writer)
            writer.close()


def ok(body: bytes = b'{"ok": true}', extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def chunked(*parts: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"%x\r\n%b\r\n" % (len(p), p) for p in (*parts, b""))


@contextlib.asynccontextmanager
async def serving(answer):
    s = Server(answer)
    server = await asyncio.start_server(s.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HTTPClient(Credentials(f"http://127.0.0.1:{port}", None, token="tok"), user_agent="tester")
    try:
        yield s, client
    finally:
        await client.close()
        server.close()


async def test_requests_share_one_kept_alive_connection_and_read_both_framings():
    bodies = {"/a": ok(b'{"n": 1}'), "/b": chunked(b'{"n":', b" 2}")}
    async with serving(lambda _n, _m, path: bodies[path.split("?")[0]]) as (server, client):
        assert await client.request("GET", "/a") == {"n": 1}
        assert await client.request("GET", "/b", params={"labelSelector": "app in (x,y)"}) == {"n": 2}
        assert await client.get_raw("/a") == {"n": 1}
        assert await client.request("POST", "/a", {"k": "v"}, content_type="application/apply-patch+yaml") == {"n": 1}
    assert server.connections == 1
    (_, _, _, get, _), (_, _, query, _, _) = server.requests[0], server.requests[1]
    assert query == "/b?labelSelector=app%20in%20%28x%2Cy%29"
    assert {k: get[k] for k in ("User-Agent", "Accept", "Authorization")} == {
        "User-Agent": "tester", "Accept": "application/json", "Authorization": "Bearer tok"}
    assert "Accept-Encoding" not in get and "Content-Length" not in get  # no gzip; a GET has no body
    _, _, _, post, body = server.requests[3]
    assert (post["Content-Type"], post["Content-Length"], orjson.loads(body)) == (
        "application/apply-patch+yaml", str(len(body)), {"k": "v"})


async def test_an_answer_that_closes_its_connection_is_read_and_the_next_request_opens_another():
    async with serving(lambda _n, _m, _p: ok(extra="Connection: close\r\n")) as (server, client):
        for _ in range(3):
            assert await client.request("GET", "/x") == {"ok": True}
    assert server.connections == 3


async def test_a_kept_alive_connection_the_server_drops_is_retried_only_for_a_replayable_request():
    """Go's net/http: a request the server may have read is sent again only where that is harmless."""
    def first_only(n, _m, _p):
        return ok() if n == 0 else None  # each connection answers once, then drops the next request
    async with serving(first_only) as (server, client):
        await client.request("GET", "/x")
        assert await client.request("GET", "/x") == {"ok": True}  # dropped on the first, answered on a new one
        assert [c for c, *_ in server.requests] == [0, 0, 1]
        errors = REQUESTS.labels("<error>", "POST", client.host).value
        with pytest.raises(aiohttp.ServerDisconnectedError) as e:
            await client.request("POST", "/x", {"a": 1})
        assert isinstance(e.value, EXPECTED) and REQUESTS.labels("<error>", "POST", client.host).value == errors + 1
        assert [m for _, m, *_ in server.requests].count("POST") == 1
        assert await client.request("POST", "/x", {"a": 1}) == {"ok": True}  # a fresh connection


async def test_a_refused_connection_names_the_server_and_close_closes_every_connection():
    async with serving(lambda _n, _m, _p: ok()) as (server, client):
        await asyncio.gather(*(client.request("GET", "/x") for _ in range(3)))
        assert server.connections == 3 and len(server.open) == 3
        await client.close()
        for _ in range(100):
            if not server.open:
                break
            await asyncio.sleep(0.01)
        assert not server.open
    with pytest.raises(ConnectError) as e:  # the server is gone: said where, what stopped it kept
        await client.request("GET", "/x")
    assert isinstance(e.value.os_error, ConnectionRefusedError) and client.host in str(e.value)


async def test_a_token_client_sends_a_fresh_token_on_each_request_and_its_own_connections():
    """(kube-controller-manager's service-account clients.) A token with a line break is refused."""
    tokens = iter(("t1", "t2", "t3\r\nX-Injected: 1"))

    async def token() -> str:
        return next(tokens)
    async with serving(lambda _n, _m, _p: ok()) as (server, client):
        await client.request("GET", "/x")
        child = client.with_token("tokens-controller", token)
        await child.request("GET", "/x")
        await child.request("GET", "/x")
        with pytest.raises(ValueError):  # a token that would end the header early is not sent
            await child.request("GET", "/x")
    seen = [(c, h["User-Agent"], h["Authorization"]) for c, _, _, h, _ in server.requests]
    assert seen == [(0, "tester", "Bearer tok"), (1, "tester/tokens-controller", "Bearer t1"),
                    (1, "tester/tokens-controller", "Bearer t2")]
