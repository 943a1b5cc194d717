"""pods/exec, attach and portforward at the API server: kube-apiserver's
checks and messages, the WebSocket channel protocol (stdin in, stdout out,
the exit code as a Status on the error channel) against a node agent
stand-in, SPDY/3.1 framing as moby/spdystream speaks it, and exec over SPDY in each
protocol version the kubelet negotiates (v1 to v5)."""

import asyncio
import contextlib
import struct
import zlib

import aiohttp
import orjson
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.machinery.httpstream.spdy import DICTIONARY, SpdySession
from nanokube.machinery.streaming import StreamFailed
from nanokube.store.memory import MemoryStore
from tests.controllers import eventually


class FakeNode:
    """A node agent that upper-cases stdin and exits with the number of bytes read."""

    def has_container(self, namespace, pod, uid, container):
        return container != "b"

    async def exec(self, namespace, pod, uid, container, command, session):
        if command == ["missing"]:
            raise StreamFailed('exec: "missing": executable file not found in $PATH')
        seen = 0
        while data := await session.read_stdin():
            seen += len(data)
            await session.write_stdout(data.upper())
        await session.write_stderr(f"{container}:{' '.join(command)}".encode())
        return seen


@pytest.fixture
async def server():
    s = APIServer(MemoryStore(), None, port=0)
    await s.start()
    s.handlers.streams.node_servers.append(lambda node: FakeNode() if node == "n1" else None)
    pods = s.index.get("", "v1", "pods")
    for name, spec in (("one", {"nodeName": "n1", "containers": [{"name": "app", "image": "x"}]}),
                       ("two", {"nodeName": "n1", "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}],
                                "initContainers": [{"name": "init", "image": "x"}]}),
                       ("pending", {"containers": [{"name": "app", "image": "x"}]})):
        await s.rest.create(pods, "v1", "default", {"metadata": {"name": name}, "spec": spec}, WriteOptions(user=SYSTEM))
    yield s
    await s.stop()


async def _get(server, path):
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{server.port}{path}") as r:
            return r.status, await r.json()


@pytest.mark.parametrize("path,message", [
    ("/api/v1/namespaces/default/pods/two/exec?command=ls&stdout=true",
     "a container name must be specified for pod two, choose one of: [init a b]"),
    ("/api/v1/namespaces/default/pods/one/exec?command=ls&stdout=true&container=nope",
     "container nope is not valid for pod one"),
    ("/api/v1/namespaces/default/pods/pending/exec?command=ls&stdout=true", "pod pending does not have a host assigned"),
    ("/api/v1/namespaces/default/pods/one/exec?command=ls", "you must specify at least 1 of stdin, stdout, stderr"),
    ("/api/v1/namespaces/default/pods/one/exec?command=ls&stdout=true", "Upgrade request required"),
])
async def test_checks_before_the_upgrade(server, path, message):
    code, body = await _get(server, path)
    assert (code, body["reason"], body["message"]) == (400, "BadRequest", message)


async def test_exec_over_websocket_channels(server):
    url = (f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/exec"
           "?command=tr&command=a-z&stdin=true&stdout=true&stderr=true")
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io", "v4.channel.k8s.io")) as ws:
            assert ws.protocol == "v5.channel.k8s.io"
            await ws.send_bytes(b"\x00hello")
            await ws.send_bytes(bytes([255, 0]))  # v5 CLOSE of stdin
            frames = [m.data async for m in ws if m.type == aiohttp.WSMsgType.BINARY]
    by_channel = {}
    for f in frames:
        by_channel[f[0]] = by_channel.get(f[0], b"") + f[1:]
    assert by_channel[1] == b"HELLO" and by_channel[2] == b"app:tr a-z"
    assert orjson.loads(by_channel[3]) == {
        "metadata": {}, "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command [tr a-z], exit code 5",
        "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "5"}]}}


async def test_a_command_that_cannot_run_is_an_internal_error_status(server):
    url = f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/exec?command=missing&stdout=true"
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v4.channel.k8s.io",)) as ws:
            frames = [m.data async for m in ws if m.type == aiohttp.WSMsgType.BINARY]
    status = orjson.loads(b"".join(f[1:] for f in frames if f[0] == 3))
    assert status["reason"] == "InternalError" and status["message"] == (
        'Internal error occurred: error executing command in container: exec: "missing": executable file not found '
        "in $PATH")


def _frame_headers(deflate, headers: dict) -> bytes:
    raw = struct.pack(">I", len(headers)) + b"".join(
        struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode() for k, v in headers.items())
    return deflate.compress(raw) + deflate.flush(zlib.Z_SYNC_FLUSH)


async def test_spdy_session_streams_replies_data_and_pings():
    to_server, to_client = asyncio.StreamReader(), asyncio.StreamReader()

    async def write(data: bytes) -> None:
        to_client.feed_data(data)
    session = SpdySession(to_server.read, write)
    serving = asyncio.ensure_future(session.serve())
    deflate = zlib.compressobj(9, zdict=DICTIONARY)
    block = _frame_headers(deflate, {"streamtype": "stdin", "port": "80"})
    to_server.feed_data(struct.pack(">HHI", 0x8003, 1, len(block) + 10) + struct.pack(">IIH", 1, 0, 0) + block)
    to_server.feed_data(struct.pack(">II", 1, (1 << 24) | 5) + b"hello")  # DATA with FIN
    to_server.feed_data(struct.pack(">HHI", 0x8003, 6, 4) + struct.pack(">I", 7))  # PING
    stream = await asyncio.wait_for(session.incoming.get(), 5)
    assert stream.headers == {"streamtype": "stdin", "port": "80"}
    assert await stream.reader.read() == b"hello"
    await stream.write(b"back")
    await stream.close()
    inflate = zlib.decompressobj(zdict=DICTIONARY)
    head = await to_client.readexactly(8)
    assert struct.unpack(">HH", head[:4]) == (0x8003, 2)  # SYN_REPLY
    body = await to_client.readexactly(struct.unpack(">I", head[4:])[0] & 0xFFFFFF)
    assert struct.unpack(">I", body[:4])[0] == 1 and inflate.decompress(body[4:]) == b"\x00\x00\x00\x00"
    assert await to_client.readexactly(12) == struct.pack(">HHI", 0x8003, 6, 4) + struct.pack(">I", 7)
    assert await to_client.readexactly(12) == struct.pack(">II", 1, 4) + b"back"
    assert await to_client.readexactly(8) == struct.pack(">II", 1, 1 << 24)  # FIN
    to_server.feed_eof()
    await asyncio.wait_for(serving, 5)
    assert await session.incoming.get() is None


async def test_a_websocket_upgrade_also_needs_create_on_the_subresource(server):
    from nanokube.apiserver.auth import Decision

    asked = []

    async def authorize(user, attrs):
        asked.append((attrs.verb, attrs.resource, attrs.subresource))
        return Decision(False, "")
    server.handlers.streams.authorize = authorize
    code, body = await _get(server, "/api/v1/namespaces/default/pods/one/exec?command=ls&stdout=true")
    assert asked == [("create", "pods", "exec")]
    assert (code, body["message"]) == (403, 'pods "one" is forbidden: User "system:admin" cannot create resource '
                                            '"pods/exec" in API group "" in the namespace "default"')


async def test_open_sessions_end_when_the_server_stops():
    class Forever(FakeNode):
        async def exec(self, *args):
            await asyncio.sleep(3600)

    s = APIServer(MemoryStore(), None, port=0)
    await s.start()
    s.handlers.streams.node_servers.append(lambda node: Forever())
    await s.rest.create(s.index.get("", "v1", "pods"), "v1", "default", {"metadata": {"name": "one"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "app", "image": "x"}]}}, WriteOptions(user=SYSTEM))
    url = f"ws://127.0.0.1:{s.port}/api/v1/namespaces/default/pods/one/exec?command=sleep&stdout=true"
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
            seen: list[bytes] = []
            frames = asyncio.ensure_future(_frames(ws, seen))
            await eventually(lambda: _true(seen))  # the session is open: its exec waits forever
            await asyncio.wait_for(s.stop(), 10)
            assert await asyncio.wait_for(frames, 5) == [b"\x01"], "the opening frame, then the close"


async def _frames(ws, into: list[bytes]) -> list[bytes]:
    """The binary frames of `ws` until it closes, each added to `into` as it comes."""
    async for m in ws:
        if m.type == aiohttp.WSMsgType.BINARY:
            into.append(m.data)
    return into


async def _true(value):
    return value


async def test_a_container_not_yet_created_is_not_found_before_the_upgrade(server):
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/two/exec"
                            "?command=ls&stdout=true&container=b") as r:
            assert (r.status, await r.text()) == (404, 'container not found ("b")')
            assert r.headers["Cache-Control"] == "no-cache, private" and "Audit-Id" in r.headers
        # asked to upgrade (kubectl exec), the kubelet's refusal comes as upstream writes a refused
        # upgrade on the hijacked connection: none of the API server's headers, then the connection closed
        async with http.get(f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/two/exec"
                            "?command=ls&stdout=true&container=b",
                            headers={"Connection": "Upgrade", "Upgrade": "websocket"}) as r:
            assert (r.status, await r.text()) == (404, 'container not found ("b")')
            assert "Cache-Control" not in r.headers and "Audit-Id" not in r.headers
            assert r.headers["Content-Type"] == "text/plain; charset=utf-8" and r.headers["Connection"] == "close"


async def test_exec_over_the_base64_channel_protocol(server):
    import base64

    url = (f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/exec"
           "?command=cat&stdin=true&stdout=true")
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v4.base64.channel.k8s.io",)) as ws:
            assert (await ws.receive()).data == "1"  # the opening frame: stdout, empty
            await ws.send_str("0" + base64.b64encode(b"hi there").decode())
            echoed = (await ws.receive()).data
    assert echoed[0] == "1" and base64.b64decode(echoed[1:]) == b"HI THERE"


_EXEC = "/api/v1/namespaces/default/pods/one/exec?command=tr&command=a-z&stdin=true&stdout=true"
_EXIT_5 = "command terminated with non-zero exit code: error executing command [tr a-z], exit code 5"


async def _spdy_upgrade(server, path: str, protocols: str):
    """An HTTP upgrade to SPDY/3.1 offering `protocols`: (status, headers, body or the open connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: nanokube\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                 f"X-Stream-Protocol-Version: {protocols}\r\n\r\n".encode())
    head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
    headers = [tuple(h.split(": ", 1)) for h in head[1:] if h]
    status = int(head[0].split()[1])
    if status != 101:
        length = int(next(v for k, v in headers if k.lower() == "content-length"))
        body = (await reader.readexactly(length)).decode()
        writer.close()
        return status, headers, body
    return status, headers, (reader, writer)


async def _spdy_exec(conn, kinds: tuple[str, ...]) -> tuple[dict[int, bytes], set[int], set[int]]:
    """client-go's SPDY exec by hand: a stream per kind (ids 1, 3, ...), "hello" on stdin with FIN;
    then every frame back until the server's GOAWAY: the data by stream, the streams it reset,
    and those it finished."""
    reader, writer = conn
    deflate = zlib.compressobj(9, zdict=DICTIONARY)
    ids = {kind: 2 * i + 1 for i, kind in enumerate(kinds)}
    for kind, sid in ids.items():
        block = _frame_headers(deflate, {"streamtype": kind})
        writer.write(struct.pack(">HHI", 0x8003, 1, len(block) + 10) + struct.pack(">IIH", sid, 0, 0) + block)
    writer.write(struct.pack(">II", ids["stdin"], (1 << 24) | 5) + b"hello")
    data: dict[int, bytes] = {}
    reset, finished = set(), set()
    while True:
        first, second = struct.unpack(">II", await reader.readexactly(8))
        body = await reader.readexactly(second & 0xFFFFFF)
        if not first & 0x80000000:
            data[first] = data.get(first, b"") + body
            if second >> 24 & 1:
                finished.add(first)
        elif first & 0xFFFF == 3:  # RST_STREAM
            reset.add(struct.unpack(">I", body[:4])[0])
        elif first & 0xFFFF == 7:  # GOAWAY
            writer.close()
            return data, reset, finished


@pytest.mark.parametrize("offer,chosen,error", [
    ("v5.channel.k8s.io, v4.channel.k8s.io, v3.channel.k8s.io, v2.channel.k8s.io, channel.k8s.io",
     "v5.channel.k8s.io", "json"),
    ("v4.channel.k8s.io", "v4.channel.k8s.io", "json"),
    ("v3.channel.k8s.io", "v3.channel.k8s.io", "text"),
    ("v2.channel.k8s.io, v4.channel.k8s.io", "v2.channel.k8s.io", "text"),  # the client's order decides
    ("channel.k8s.io", "channel.k8s.io", "reset"),
])
async def test_exec_over_spdy_speaks_every_protocol_version_the_kubelet_does(server, offer, chosen, error):
    status, headers, conn = await _spdy_upgrade(server, _EXEC + "&stderr=true", offer)
    assert status == 101 and ("X-Stream-Protocol-Version", chosen) in headers
    data, reset, finished = await asyncio.wait_for(_spdy_exec(conn, ("error", "stdin", "stdout", "stderr")), 10)
    assert (data[5], data[7]) == (b"HELLO", b"app:tr a-z")
    if error == "json":
        assert orjson.loads(data[1])["message"] == _EXIT_5
    elif error == "text":  # v2 and v3: the failure's message alone
        assert data[1] == _EXIT_5.encode()
    else:  # v1, as 1.0's kubelet: the error stream reset and the server's side of stdin closed at once
        assert 1 not in data and reset == {1} and 3 in finished


@pytest.mark.parametrize("offer", ["v2.channel.k8s.io", "channel.k8s.io"])
async def test_spdy_v1_and_v2_take_no_resize_stream_for_a_terminal(server, offer):
    _, _, conn = await _spdy_upgrade(server, _EXEC + "&tty=true", offer)
    data, _, _ = await asyncio.wait_for(_spdy_exec(conn, ("error", "stdin", "stdout")), 10)
    assert data[5] == b"HELLO"


@pytest.mark.parametrize("path,accepted", [
    (_EXEC, ["v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]),
    ("/api/v1/namespaces/default/pods/one/portforward?ports=80", ["portforward.k8s.io"]),
])
async def test_a_spdy_protocol_the_server_does_not_speak_is_forbidden(server, path, accepted):
    status, headers, body = await _spdy_upgrade(server, path, "v9.channel.k8s.io")
    assert status == 403 and [v for k, v in headers if k == "X-Accepted-Stream-Protocol-Versions"] == accepted
    assert body == (f"unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io], "
                    f"server accepts [{' '.join(accepted)}]\n")


class _LateReader:
    """A node agent whose command reads no stdin until `reading` is set, then counts it all."""

    def __init__(self):
        self.session = None
        self.reading = asyncio.Event()
        self.seen: list[int] = []  # each exec's stdin, in bytes

    def has_container(self, namespace, pod, uid, container):
        return True

    async def exec(self, namespace, pod, uid, container, command, session):
        self.session = session
        await self.reading.wait()
        seen = 0
        while data := await session.read_stdin():
            seen += len(data)
        self.seen.append(seen)
        return seen % 256


def _held(session) -> int:
    return sum(len(d) for d in session.stdin_data._queue if d)


async def test_stdin_a_command_does_not_read_is_not_held_unbounded(server):
    """A client writing stdin faster than the command reads it is slowed through its connection, as the
    kubelet's stdin pipe slows it: the server held every frame (a client sent 300 MiB to `sleep` and the
    server kept all of it). A message past 32 MiB ends the stream (x/net/websocket's limit)."""
    from nanokube.machinery.streaming import STDIN_BUFFER

    node = _LateReader()
    server.handlers.streams.node_servers.insert(0, lambda name: node if name == "n2" else None)
    pods = server.index.get("", "v1", "pods")
    await server.rest.create(pods, "v1", "default", {"metadata": {"name": "late"}, "spec": {
        "nodeName": "n2", "containers": [{"name": "app", "image": "x"}]}}, WriteOptions(user=SYSTEM))
    url = f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/late/exec?command=x&stdin=true&stdout=true"
    frame, frames = b"\x00" + b"x" * (1 << 16), 512  # 32 MiB in kubectl-sized writes
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
            async def send():
                for _ in range(frames):
                    await ws.send_bytes(frame)
                await ws.send_bytes(bytes([255, 0]))
            sending = asyncio.ensure_future(send())
            await eventually(lambda: _true(node.session is not None and _held(node.session) >= STDIN_BUFFER))
            await asyncio.sleep(0.3)  # (time for the client to push more, were it let)
            assert _held(node.session) <= STDIN_BUFFER + len(frame) and not sending.done()
            node.reading.set()
            await asyncio.wait_for(sending, 30)
            received = [m.data async for m in ws if m.type == aiohttp.WSMsgType.BINARY]
    status = orjson.loads(b"".join(f[1:] for f in received if f[0] == 3))
    assert status["status"] == "Success"  # every byte read: (512 * 65536) % 256 == 0
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",), max_msg_size=0) as ws:
            with contextlib.suppress(ConnectionError):
                await ws.send_bytes(b"\x00" + bytes(33 << 20))
            assert [m.data async for m in ws] == [b"\x01"]  # the opening frame, then the end
    await eventually(lambda: _true(len(node.seen) == 2))
    assert node.seen == [frames * (len(frame) - 1), 0]


async def test_a_terminal_size_that_does_not_decode_leaves_the_session_running(server):
    """A resize frame whose width is a string or past any integer ended the whole exec (the pump raised
    ValueError); the kubelet's resize reader stops reading sizes and the command goes on."""
    url = (f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/exec"
           "?command=tr&stdin=true&stdout=true&tty=true")
    for size in (b'{"Width":"x","Height":1}', b'{"Width":1e400,"Height":1}', b'{"Width":null}', b"[1]"):
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
                await ws.send_bytes(b"\x04" + size)
                await ws.send_bytes(b"\x00hi")
                await ws.send_bytes(bytes([255, 0]))
                frames = [m.data async for m in ws if m.type == aiohttp.WSMsgType.BINARY]
        assert b"".join(f[1:] for f in frames if f[0] == 1) == b"HI", size
        assert orjson.loads(b"".join(f[1:] for f in frames if f[0] == 3))["details"]["causes"][0]["message"] == "2"


async def test_a_spdy_header_block_that_inflates_past_a_mebibyte_ends_the_connection(server):
    """A SYN_STREAM whose header block is a zlib bomb (a frame of 1 MiB inflated to 3 GB and held the loop
    half a minute) or does not parse ends the SPDY connection; the server reads on."""
    path = "/api/v1/namespaces/default/pods/one/exec?command=tr&stdin=true&stdout=true"
    deflate = zlib.compressobj(9, zdict=DICTIONARY)
    bomb = [deflate.compress(struct.pack(">II", 1, 64 << 20))] + [deflate.compress(bytes(1 << 20)) for _ in range(64)]
    bomb.append(deflate.compress(struct.pack(">I", 1) + b"x"))  # a 64 MiB name with a value: a whole header
    short = zlib.compressobj(9, zdict=DICTIONARY)
    for block in (b"".join(bomb) + deflate.flush(zlib.Z_SYNC_FLUSH), short.compress(b"\x00") + short.flush(zlib.Z_SYNC_FLUSH)):
        status, _, (reader, writer) = await _spdy_upgrade(server, path, "v4.channel.k8s.io")
        assert status == 101
        writer.write(struct.pack(">HHI", 0x8003, 1, len(block) + 10) + struct.pack(">IIH", 1, 0, 0) + block)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, no SYN_REPLY
        writer.close()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{server.port}/readyz") as r:
            assert r.status == 200


async def test_port_forward_data_a_pod_does_not_read_is_not_held_unbounded(server):
    """What a client sends a forwarded port the pod does not read is held only up to a bound, then the
    client is slowed through its connection (the server held all of it: the WebSocket's channel fed the
    copy to the pod without limit); once the pod reads, every byte arrives."""
    reading, got = asyncio.Event(), []

    async def pod(reader, writer):
        await reading.wait()
        while data := await reader.read(1 << 16):
            got.append(len(data))
        writer.close()

    listener = await asyncio.start_server(pod, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]

    class Node(FakeNode):
        async def port_forward(self, namespace, pod, uid, p):
            return await asyncio.open_connection("127.0.0.1", port)

    server.handlers.streams.node_servers.insert(0, lambda name: Node() if name == "n1" else None)
    url = f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/one/portforward?ports=80"
    frame, frames = b"\x00" + b"x" * (1 << 16), 1024  # 64 MiB
    try:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(url, protocols=("v4.channel.k8s.io",)) as ws:
                async def send():
                    for _ in range(frames):
                        await ws.send_bytes(frame)
                sending = asyncio.ensure_future(send())
                await asyncio.sleep(1)  # (time for the client to push it all, were it let)
                assert not sending.done()
                reading.set()
                await asyncio.wait_for(sending, 60)
                await eventually(lambda: _true(sum(got) == frames * (len(frame) - 1)))
    finally:
        listener.close()


async def test_spdy_stdin_a_command_does_not_read_slows_the_client(server):
    """Over SPDY too (kubectl's fallback and older clients), stdin a command does not read is held only up to
    a bound: the session reads no further frame, and the connection no further byte, while a stream holds too
    much (every DATA frame was held before); once the command reads, it all arrives."""
    node = _LateReader()
    server.handlers.streams.node_servers.insert(0, lambda name: node if name == "n2" else None)
    pods = server.index.get("", "v1", "pods")
    await server.rest.create(pods, "v1", "default", {"metadata": {"name": "late"}, "spec": {
        "nodeName": "n2", "containers": [{"name": "app", "image": "x"}]}}, WriteOptions(user=SYSTEM))
    status, _, (reader, writer) = await _spdy_upgrade(
        server, "/api/v1/namespaces/default/pods/late/exec?command=x&stdin=true&stdout=true", "v4.channel.k8s.io")
    assert status == 101
    deflate = zlib.compressobj(9, zdict=DICTIONARY)
    for sid, kind in ((1, "error"), (3, "stdin"), (5, "stdout")):
        block = _frame_headers(deflate, {"streamtype": kind})
        writer.write(struct.pack(">HHI", 0x8003, 1, len(block) + 10) + struct.pack(">IIH", sid, 0, 0) + block)
    chunk, chunks = bytes(32 << 10), 2048  # 64 MiB

    async def send():
        for _ in range(chunks):
            writer.write(struct.pack(">II", 3, len(chunk)) + chunk)
            await writer.drain()
        writer.write(struct.pack(">II", 3, 1 << 24))  # FIN
        await writer.drain()
    sending = asyncio.ensure_future(send())
    try:
        await asyncio.sleep(1)  # (time for the client to push it all, were it let)
        assert not sending.done()
        node.reading.set()
        await asyncio.wait_for(sending, 60)
        await eventually(lambda: _true(node.seen == [chunks * len(chunk)]))
    finally:
        sending.cancel()
        writer.close()


async def test_a_spdy_resize_stream_that_never_ends_a_size_is_dropped_and_the_exec_goes_on(server):
    """48 MiB on a terminal's resize stream with no size ending in it: the sizes stop (the kubelet's
    decoder stops at an error) and the rest is read and dropped, so the session reads on and the
    command gets its stdin (each chunk was joined to all before it: the loop held for a minute)."""
    status, _, (reader, writer) = await _spdy_upgrade(server, _EXEC + "&tty=true", "v4.channel.k8s.io")
    assert status == 101
    deflate = zlib.compressobj(9, zdict=DICTIONARY)
    for sid, kind in ((1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")):
        block = _frame_headers(deflate, {"streamtype": kind})
        writer.write(struct.pack(">HHI", 0x8003, 1, len(block) + 10) + struct.pack(">IIH", sid, 0, 0) + block)
    junk = b"x" * (32 << 10)

    async def run() -> bytes:
        for _ in range(48 << 5):  # 48 MiB
            writer.write(struct.pack(">II", 7, len(junk)) + junk)
            await writer.drain()
        writer.write(struct.pack(">II", 3, (1 << 24) | 5) + b"hello")
        out = b""
        while True:
            first, second = struct.unpack(">II", await reader.readexactly(8))
            body = await reader.readexactly(second & 0xFFFFFF)
            if first == 5:
                out += body
            elif first & 0x80000000 and first & 0xFFFF == 7:  # GOAWAY
                return out
    try:
        assert await asyncio.wait_for(run(), 20) == b"HELLO"
    finally:
        writer.close()


async def test_connect_admission_answers_before_the_create_check(server):
    """kube-apiserver's ConnectResource runs CONNECT admission before the connecter, whose first check
    is the WebSocket upgrade's `create`: a policy refusing the exec is what a client without create
    is told."""
    from nanokube.apiserver.auth import Decision

    async def authorize(user, attrs):
        return Decision(False, "")
    base = f"http://127.0.0.1:{server.port}/apis/admissionregistration.k8s.io/v1"
    async with aiohttp.ClientSession() as http:
        for plural, body in (("validatingadmissionpolicies", {"metadata": {"name": "no-exec"}, "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CONNECT"],
                                                        "resources": ["pods/exec"]}]},
                "validations": [{"expression": "false", "message": "no exec here"}]}}),
                             ("validatingadmissionpolicybindings", {"metadata": {"name": "no-exec"}, "spec": {
                                 "policyName": "no-exec", "validationActions": ["Deny"]}})):
            async with http.post(f"{base}/{plural}", json=body) as r:
                assert r.status == 201, await r.text()
    server.handlers.streams.authorize = authorize
    path = "/api/v1/namespaces/default/pods/one/exec?command=ls&stdout=true"
    for _ in range(100):  # the policy reaches admission through its informer
        code, body = await _get(server, path)
        if "ValidatingAdmissionPolicy" in body["message"]:
            break
        await asyncio.sleep(0.05)
    assert (code, body["message"]) == (422, "pods \"one\" is forbidden: ValidatingAdmissionPolicy 'no-exec' with "
                                            "binding 'no-exec' denied request: no exec here")


async def test_a_flood_of_small_websocket_frames_lets_the_loop_run_between_them(server):
    """fuzz65: the frames of one read were all taken into the session without a loop turn, so 100,000
    stdin frames of a byte each held the event loop (every other client) for seconds, while the command
    had yet to read the first. 300 frames sent at once: the command sees at most YIELD_EVERY of them
    queued when it reads, then all of them."""
    from nanokube.machinery.streaming import YIELD_EVERY

    class Queued:
        def __init__(self):
            self.queued: list[int] = []

        def has_container(self, *_):
            return True

        async def exec(self, namespace, pod, uid, container, command, session):
            while data := await session.read_stdin():
                self.queued.append(session.stdin_data.qsize() + len(data))
            return 0

    node = Queued()
    server.handlers.streams.node_servers.insert(0, lambda name: node if name == "n3" else None)
    pods = server.index.get("", "v1", "pods")
    await server.rest.create(pods, "v1", "default", {"metadata": {"name": "flood"}, "spec": {
        "nodeName": "n3", "containers": [{"name": "app", "image": "x"}]}}, WriteOptions(user=SYSTEM))
    url = f"ws://127.0.0.1:{server.port}/api/v1/namespaces/default/pods/flood/exec?command=cat&stdin=true&stdout=true"
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
            for _ in range(300):
                await ws.send_bytes(b"\x00x")
            await ws.send_bytes(bytes([255, 0]))
            frames = [m.data async for m in ws if m.type == aiohttp.WSMsgType.BINARY]
    assert frames[-1][:1] == b"\x03" and orjson.loads(frames[-1][1:])["status"] == "Success"
    assert len(node.queued) == 300 and max(node.queued) <= YIELD_EVERY, node.queued


async def test_a_flood_of_spdy_frames_lets_the_loop_run_between_them(server):
    """fuzz65: as over a WebSocket, the SPDY frames of one read were all taken without a loop turn:
    200,000 PINGs sent at once held the event loop for over a second. Stdin "a", then 1000 PINGs, in
    one write: the command's echo of "a" now comes back before the last PING's reply."""
    status, _, (reader, writer) = await _spdy_upgrade(server, _EXEC, "v4.channel.k8s.io")
    assert status == 101
    deflate = zlib.compressobj(9, zdict=DICTIONARY)
    for kind, sid in (("error", 1), ("stdin", 3), ("stdout", 5)):
        block = _frame_headers(deflate, {"streamtype": kind})
        writer.write(struct.pack(">HHI", 0x8003, 1, len(block) + 10) + struct.pack(">IIH", sid, 0, 0) + block)
    ping = struct.pack(">HHII", 0x8003, 6, 4, 1)
    writer.write(struct.pack(">II", 3, 1) + b"a" + ping * 1000 + struct.pack(">II", 3, 1 << 24))
    pongs = 0
    while True:
        first, second = struct.unpack(">II", await asyncio.wait_for(reader.readexactly(8), 10))
        body = await reader.readexactly(second & 0xFFFFFF)
        if first == 5 and body:
            break
        pongs += first & 0x8000FFFF == 0x80000006
    writer.close()
    assert body == b"A" and pongs < 1000, pongs


#: an exec's WebSocket upgrade, as bytes on the wire (the unmasked-frame tests write their frames raw)
UPGRADE_EXEC = (b"GET /api/v1/namespaces/default/pods/one/exec?command=cat&stdin=true&stdout=true HTTP/1.1\r\n"
                b"Host: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n")


async def test_an_unmasked_client_frame_fails_the_websocket_with_1002(server):
    """RFC 6455 5.1: a client masks every frame, and a server that gets one unmasked closes with 1002."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(UPGRADE_EXEC)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        key = b"\x01\x02\x03\x04"  # a masked frame first: stdin "ab", its echo "AB" on stdout
        writer.write(b"\x82\x83" + key + bytes(b ^ key[i % 4] for i, b in enumerate(b"\x00ab")))
        frames, stdout = [], b""
        while not frames or frames[-1][0] != 0x8:
            first, size = await asyncio.wait_for(reader.readexactly(2), 10)
            frames.append((first & 0x0F, await reader.readexactly(size & 0x7F)))
            if frames[-1][0] == 0x2 and frames[-1][1][:1] == b"\x01":  # the echo may come in more than one frame
                stdout += frames[-1][1][1:]
                if stdout == b"AB":
                    writer.write(b"\x82\x02\x00c")  # then an unmasked one
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 101 ")
    assert stdout == b"AB"
    assert frames[-1][1][:2] == (1002).to_bytes(2, "big")


async def test_an_unmasked_frame_sent_with_the_handshake_fails_the_websocket_with_1002(server):
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(UPGRADE_EXEC + b"\x82\x02\x00c")  # one write: the frame arrives with the request
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        frames = []
        while not frames or frames[-1][0] != 0x8:
            first, size = await asyncio.wait_for(reader.readexactly(2), 10)
            frames.append((first & 0x0F, await reader.readexactly(size & 0x7F)))
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 101 ")
    assert frames[-1][1][:2] == (1002).to_bytes(2, "big")
