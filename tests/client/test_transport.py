"""The HTTP client's requests (client/transport.py) against a bare HTTP/1.1 server that frames,
keeps and drops its connections as a test says: reuse, framing, a kept-alive connection the server
closed, refused connections, close(), and each request's headers; a watch's stream split at any byte,
its ERROR events, a refusal, and its connection dropped mid-event."""

import asyncio
import contextlib

import aiohttp
import orjson
import pytest

from nanokube.client.http import EXPECTED, HTTPClient, HTTPResourceClient, RemoteResource
from nanokube.client.kubeconfig import Credentials
from nanokube.client.metrics import REQUESTS
from nanokube.client.transport import HIGH_WATER, MAX_CONNS, ConnectError
from nanokube.machinery.errors import APIError


class Server:
    """Answers each request with `answer(request number on its connection, method, path)`: bytes to
    send, a 1-tuple of bytes to send before closing the connection, or None to close it unanswered.
    Keeps what it was sent, by connection."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[tuple[int, str, str, dict[str, str], bytes]] = []
        self.connections = 0
        self.open: set[asyncio.StreamWriter] = set()
        self.most_open = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn, self.connections = self.connections, self.connections + 1
        self.open.add(writer)
        self.most_open = max(self.most_open, len(self.open))
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
                writer.write(out if isinstance(out, bytes) else out[0])
                await writer.drain()
                if not isinstance(out, bytes):  # (bytes,): sent, then the connection closed
                    break
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


async def test_a_burst_of_requests_waits_for_the_pools_connections_rather_than_dialling_one_each():
    async with serving(lambda n, _m, path: ok(b'{"path": "%s"}' % path.encode())) as (server, client):
        paths = [f"/burst/{i}" for i in range(5 * MAX_CONNS)]
        answers = await asyncio.gather(*(client.request("GET", p) for p in paths))
        assert [a["path"] for a in answers] == paths
        assert (server.connections, server.most_open) == (MAX_CONNS, MAX_CONNS)
    # connections the server closes after each answer make room for the requests still waiting
    async with serving(lambda _n, _m, _p: ok(extra="Connection: close\r\n")) as (server, client):
        answers = await asyncio.gather(*(client.request("GET", "/x") for _ in range(3 * MAX_CONNS)))
        assert answers == [{"ok": True}] * (3 * MAX_CONNS)
        assert server.connections == 3 * MAX_CONNS and server.most_open <= MAX_CONNS


async def test_watches_hold_connections_of_their_own_beside_the_bounded_unary_ones():
    """A controller manager's dozens of informers each keep a watch open: they never take the
    unary requests' connections."""
    held = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"  # an answer that stays open
    async with serving(lambda _n, _m, path: held if "watch=true" in path else ok()) as (server, client):
        streams = [await configmaps(client).watch("default") for _ in range(MAX_CONNS + 1)]
        async with asyncio.timeout(10):
            answers = await asyncio.gather(*(client.request("GET", "/x") for _ in range(3)))
        assert answers == [{"ok": True}] * 3
        assert server.connections == MAX_CONNS + 1 + 3
        for stream in streams:
            await stream.aclose()


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


def configmaps(client: HTTPClient) -> HTTPResourceClient:
    """The resource client discovery would give (this server serves no discovery)."""
    return HTTPResourceClient(client, RemoteResource("", "configmaps", "ConfigMap", True, ["v1"]), "v1")


def event(typ: str, name: str, rv: str, **data: str) -> bytes:
    return orjson.dumps({"type": typ, "object": {"metadata": {"name": name, "resourceVersion": rv}, "data": data}}) + b"\n"


async def test_a_watch_reads_events_split_across_chunks_at_any_byte_and_several_in_one_chunk():
    """The server batches events into a chunk and slices a large one over several; a slice may end
    inside a line and inside a UTF-8 character's bytes. A blank line between events is skipped, and
    a last event without its newline is read when the stream ends."""
    one, two, three = event("ADDED", "a", "5", v="grüße, 日本"), event("MODIFIED", "a", "6"), event("BOOKMARK", "", "7")
    cut = one.index("ü".encode()) + 1  # between the two bytes of ü
    body = [one[:3], one[3:cut], one[cut:-5], one[-5:] + two + b"\n" + three[:9], three[9:-1]]
    async with serving(lambda _n, _m, _p: chunked(*body)) as (server, client):
        stream = await configmaps(client).watch("default", "4", label_selector="app in (x)", timeout_seconds=300)
        events = [ev async for ev in stream]
    assert events == [("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"v": "grüße, 日本"}}),
                      ("MODIFIED", {"metadata": {"name": "a", "resourceVersion": "6"}, "data": {}}),
                      ("BOOKMARK", {"metadata": {"name": "", "resourceVersion": "7"}, "data": {}})]
    [(_, method, path, headers, _)] = server.requests
    assert (method, path) == ("GET", "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true"
                                     "&resourceVersion=4&labelSelector=app%20in%20%28x%29&timeoutSeconds=300")
    assert {k: headers[k] for k in ("User-Agent", "Accept", "Authorization")} == {
        "User-Agent": "tester", "Accept": "application/json", "Authorization": "Bearer tok"}
    assert "Accept-Encoding" not in headers  # no gzip asked for a watch either


async def test_a_watch_of_many_events_is_read_whole_while_its_reader_lags():
    """More events than a watch holds undecoded: it stops reading its connection until they are read."""
    events = [event("ADDED", f"cm-{i}", str(i)) for i in range(HIGH_WATER * 4)]
    async with serving(lambda _n, _m, _p: chunked(b"".join(events))) as (_, client):
        stream = await configmaps(client).watch("default")
        names = []
        async with asyncio.timeout(10):  # (a reader that never resumed reading would wait forever)
            async for _, obj in stream:
                names.append(obj["metadata"]["name"])
                if len(names) % 100 == 0:
                    await asyncio.sleep(0)  # the loop runs between some reads, as an informer's does
    assert names == [f"cm-{i}" for i in range(HIGH_WATER * 4)]


async def test_an_error_event_is_raised_with_its_status_and_a_refused_watch_with_its_answer():
    expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
               "message": "too old resource version: 4 (90)", "details": {"causes": [{"reason": "Expired"}]}}
    forbidden = dict(expired, code=403, reason="Forbidden", message="configmaps is forbidden")

    def answer(n, _m, path):
        if "resourceVersion=4" in path:
            return chunked(event("ADDED", "a", "5"), orjson.dumps({"type": "ERROR", "object": expired}) + b"\n")
        body = orjson.dumps(forbidden)
        return f"HTTP/1.1 403 Forbidden\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    async with serving(answer) as (_, client):
        stream = await configmaps(client).watch("default", "4")
        assert await anext(stream) == ("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}, "data": {}})
        with pytest.raises(APIError) as e:
            await anext(stream)
        assert (e.value.code, e.value.reason, e.value.message, e.value.details) == (
            410, "Expired", "too old resource version: 4 (90)", {"causes": [{"reason": "Expired"}]})
        refused = REQUESTS.labels("403", "GET", client.host).value
        with pytest.raises(APIError) as e:
            await configmaps(client).watch("default", "9")
        assert (e.value.code, e.value.reason, e.value.message) == (403, "Forbidden", "configmaps is forbidden")
        assert REQUESTS.labels("403", "GET", client.host).value == refused + 1


async def test_a_watch_whose_connection_drops_mid_event_gives_what_came_whole_then_a_payload_error():
    """A server killed mid-stream: the events read whole before are read, the cut one is not, and
    the error is one an informer takes as a cut watch (ClientPayloadError: it watches again)."""
    head = chunked()[:-len(b"0\r\n\r\n")]  # the head, no last chunk
    whole, cut = event("ADDED", "a", "5"), event("ADDED", "b", "6")
    async with serving(lambda _n, _m, _p: (head + b"%x\r\n%b\r\n" % (len(whole) + 9, whole + cut[:9]),)) as (_, client):
        stream = await configmaps(client).watch("default")
        assert await anext(stream) == ("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}, "data": {}})
        with pytest.raises(aiohttp.ClientPayloadError) as e:
            await anext(stream)
        assert isinstance(e.value, EXPECTED)
        with pytest.raises(aiohttp.ClientPayloadError):  # and again, as the stream stays ended
            await anext(stream)
        await stream.aclose()
