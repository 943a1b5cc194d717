"""Remote commands (exec and attach) over an upgraded connection, as the kubelet's streaming
server serves them (k8s.io/kubelet/pkg/cri/streaming/remotecommand): the WebSocket channel
protocols v1 to v5 or SPDY/3.1, negotiated from what the client offers, feeding stdin and
terminal sizes to a `StreamSession` and reporting the command's end on the error channel. The
node agent's /exec and /attach serve them directly; the API server's pods/exec and pods/attach
reach them through the node agent."""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from .. import errors
from ..streaming import (ERROR, STDERR, STDOUT, V4, V4_BASE64, V5, NodeStreaming, StreamFailed, StreamSession,
                         exit_status, failure_status)
from .masked import MaskedWebSocket
from .spdy import SpdyStream
from .transports import (CHUNK, MAX_MESSAGE, WebSocketChannels, handshake, is_spdy, is_websocket, offered, resize_stream_reader,
                         upgrade_to_spdy)

#: the channel protocols before v4: the error channel carries a failure's message alone, and nothing
#: on success. Over a WebSocket only v1 (also when the client asks for no protocol) and its base64
#: form; over SPDY v1 to v3, v3 adding the resize stream (v1 and v2 take no terminal sizes)
V1, V1_BASE64 = "channel.k8s.io", "base64.channel.k8s.io"
V2, V3 = "v2.channel.k8s.io", "v3.channel.k8s.io"
#: what a SPDY upgrade may negotiate (remotecommand.SupportedStreamingProtocols); v5 is v4 there
SPDY_PROTOCOLS = (V5, V4, V3, V2, V1)
#: how long the client has to open the streams it asked for (the kubelet's streamCreationTimeout)
STREAM_CREATION_TIMEOUT = 30.0


def query_flag(v: str | None) -> bool:
    """A boolean query parameter (stdin, stdout, stderr, tty) as the options' decoder reads it."""
    return v in ("true", "1", "True")


async def serve_command(request: web.Request, node: NodeStreaming, ns: str, name: str, uid: str, container: str,
                        sub: str) -> web.StreamResponse:
    """exec (`sub` "exec": the query's `command`) or attach to a checked container, over the WebSocket
    channel protocol or SPDY the client upgrades to (the kubelet's remotecommand server, which the
    API server's pods/exec and pods/attach and the kubelet's own /exec and /attach reach)."""
    q = request.query
    stdin, stdout, stderr, tty = (query_flag(q.get(k)) for k in ("stdin", "stdout", "stderr", "tty"))
    if tty:
        stderr = False
    command = q.getall("command", [])

    async def run(session: StreamSession) -> dict:
        try:
            if sub == "exec":
                return exit_status(await node.exec(ns, name, uid, container, command, session), command)
            await node.attach(ns, name, uid, container, session)
            return exit_status(0, [])  # the kubelet reports success however the container ended
        except StreamFailed as e:
            what = "executing command in" if sub == "exec" else "attaching to"
            return failure_status(f"error {what} container: {e}")

    flags = (stdin, stdout, stderr, tty)
    if is_websocket(request):
        asked = offered(request, "Sec-WebSocket-Protocol")
        proto = next((p for p in asked if p in (V5, V4, V4_BASE64, V1, V1_BASE64)), None if asked else "")
        if proto is None:
            raise errors.bad_request(f"unable to upgrade: no supported channel protocol ({V5}, {V4}, "
                                     f"{V4_BASE64}, {V1}, {V1_BASE64}) requested")
        return await _command_over_websocket(request, proto, flags, run)
    if is_spdy(request):
        proto = handshake(request, SPDY_PROTOCOLS)
        if isinstance(proto, web.Response):
            return proto
        return await _command_over_spdy(request, proto, flags, run)
    raise errors.bad_request("Upgrade request required")


async def _command_over_websocket(request: web.Request, proto: str, flags, run) -> web.StreamResponse:
    stdin, stdout, stderr, tty = flags
    ws = MaskedWebSocket(protocols=(proto,) if proto else (), max_msg_size=MAX_MESSAGE)
    await ws.prepare(request)
    ch = WebSocketChannels(ws, base64=proto in (V4_BASE64, V1_BASE64))
    session = StreamSession(stdin, stdout, stderr, tty, lambda d: ch.send(STDOUT, d), lambda d: ch.send(STDERR, d))
    await ch.send(STDOUT if stdout else STDERR if stderr else ERROR, b"")
    pump = asyncio.ensure_future(ch.pump_into(session))
    runner = asyncio.ensure_future(run(session))
    try:
        await asyncio.wait([runner, pump], return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            status = runner.result()
            if proto in (V5, V4, V4_BASE64):
                await ch.send(ERROR, orjson.dumps(status))
            elif status["status"] != "Success":
                await ch.send(ERROR, status["message"].encode())
    finally:
        runner.cancel()
        pump.cancel()
        await asyncio.gather(runner, pump, return_exceptions=True)
        await ch.close()
    return ws


async def _command_over_spdy(request: web.Request, proto: str, flags, run) -> web.StreamResponse:
    """The client opens a stream per channel it asked for; v4 and v5 report the end as a JSON Status,
    earlier versions a failure's message. v1 keeps 1.0's quirks: once the streams are open the
    server resets the error stream (so no failure reaches the client) and closes its side of stdin."""
    stdin, stdout, stderr, tty = flags
    spdy, resp = await upgrade_to_spdy(request, proto)
    serving = asyncio.ensure_future(spdy.serve())
    expected = {"error"} | {k for k, on in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr),
                                            ("resize", tty and proto not in (V1, V2))) if on}
    streams: dict[str, SpdyStream] = {}
    tasks: list[asyncio.Future] = []
    try:
        async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
            while not expected <= streams.keys():
                s = await spdy.incoming.get()
                if s is None:
                    return resp
                streams[s.headers.get("streamtype", "")] = s
        if proto == V1:
            await spdy.reset(streams.pop("error"))
            if "stdin" in streams:
                await streams["stdin"].close()
        out, err = streams.get("stdout"), streams.get("stderr")
        session = StreamSession(stdin, stdout, stderr, tty, out.write if out else _discard,
                                err.write if err else _discard)
        if "stdin" in streams:
            tasks.append(asyncio.ensure_future(_feed_stdin(streams["stdin"].reader, session)))
        if "resize" in expected:
            tasks.append(asyncio.ensure_future(resize_stream_reader(session, streams["resize"].reader)))
        runner = asyncio.ensure_future(run(session))
        tasks.append(runner)
        gone = asyncio.ensure_future(spdy.done.wait())
        tasks.append(gone)
        await asyncio.wait([runner, gone], return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            for s in (out, err):
                if s is not None:
                    await s.close()
            status, error = runner.result(), streams.get("error")
            if error is not None and proto in (V5, V4):
                await error.write(orjson.dumps(status))
            elif error is not None and status["status"] != "Success":
                await error.write(status["message"].encode())
            if error is not None:
                await error.close()
            await spdy.go_away()
    except (TimeoutError, ConnectionError):
        pass
    finally:
        for t in tasks:
            t.cancel()
        serving.cancel()
        await asyncio.gather(serving, *tasks, return_exceptions=True)
    return resp


async def _discard(_data: bytes) -> None:
    return None


async def _feed_stdin(reader: asyncio.StreamReader, session: StreamSession) -> None:
    while chunk := await reader.read(CHUNK):
        await session.feed_stdin(chunk)
    session.stdin_data.put_nowait(None)
