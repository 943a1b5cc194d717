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
from .spdy import SpdyStream
from .transports import CHUNK, WebSocketChannels, is_spdy, is_websocket, offered, resize_stream_reader, upgrade_to_spdy

#: the channel protocols before v4 (wsstream's; no protocol at all is the first): the error channel
#: carries a failure's message alone, and nothing on success
_PRE_V4, _PRE_V4_BASE64 = "channel.k8s.io", "base64.channel.k8s.io"
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
        proto = next((p for p in asked if p in (V5, V4, V4_BASE64, _PRE_V4, _PRE_V4_BASE64)), None if asked else "")
        if proto is None:
            raise errors.bad_request(f"unable to upgrade: no supported channel protocol ({V5}, {V4}, "
                                     f"{V4_BASE64}, {_PRE_V4}, {_PRE_V4_BASE64}) requested")
        return await _command_over_websocket(request, proto, flags, run)
    if is_spdy(request):
        protos = offered(request, "X-Stream-Protocol-Version")
        proto = next((p for p in (V4, V5) if p in protos), None)
        if proto is None:
            raise errors.bad_request(f"unable to upgrade: unable to negotiate protocol: client supports {protos}, "
                                     f"server supports [{V4} {V5}]")
        return await _command_over_spdy(request, proto, flags, run)
    raise errors.bad_request("Upgrade request required")


async def _command_over_websocket(request: web.Request, proto: str, flags, run) -> web.StreamResponse:
    stdin, stdout, stderr, tty = flags
    ws = web.WebSocketResponse(protocols=(proto,) if proto else (), max_msg_size=0)
    await ws.prepare(request)
    ch = WebSocketChannels(ws, base64=proto in (V4_BASE64, _PRE_V4_BASE64))
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
    stdin, stdout, stderr, tty = flags
    spdy, resp = await upgrade_to_spdy(request, proto)
    serving = asyncio.ensure_future(spdy.serve())
    expected = {"error"} | {k for k, on in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr),
                                            ("resize", tty)) if on}
    streams: dict[str, SpdyStream] = {}
    tasks: list[asyncio.Future] = []
    try:
        async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
            while not expected <= streams.keys():
                s = await spdy.incoming.get()
                if s is None:
                    return resp
                streams[s.headers.get("streamtype", "")] = s
        out, err = streams.get("stdout"), streams.get("stderr")
        session = StreamSession(stdin, stdout, stderr, tty, out.write if out else _discard,
                                err.write if err else _discard)
        if "stdin" in streams:
            tasks.append(asyncio.ensure_future(_feed_stdin(streams["stdin"].reader, session)))
        if "resize" in streams:
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
            await streams["error"].write(orjson.dumps(runner.result()))
            await streams["error"].close()
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
        session.stdin_data.put_nowait(chunk)
    session.stdin_data.put_nowait(None)
