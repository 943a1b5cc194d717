"""Port-forwarding over an upgraded connection, as the kubelet's streaming server serves it
(k8s.io/kubelet/pkg/cri/streaming/portforward): SPDY/3.1 data and error stream pairs, the same
tunnelled through a WebSocket (kubectl 1.31+), or the native WebSocket channels, each connection
joined to the pod's port through the node's `port_forward`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from aiohttp import web

from .. import errors
from ..streaming import PORT_FORWARD, TUNNELED_PORT_FORWARD, V4, NodeStreaming, StreamFailed, sandbox_id
from .masked import MaskedWebSocket
from .spdy import HeldReader, SpdySession, SpdyStream
from .transports import (CHUNK, MAX_MESSAGE, WebSocketChannels, handshake, is_spdy, is_websocket, offered, spdy_over_websocket,
                         upgrade_to_spdy)


async def serve_port_forward(request: web.Request, node: NodeStreaming, ns: str, name: str, uid: str,
                             ports_param: str = "ports") -> web.StreamResponse:
    """Port-forward to the pod over kubectl's SPDY-in-WebSocket tunnel, the native WebSocket
    protocol (the ports from the query's `ports_param`: the API server's `ports`, the kubelet's
    `port`), or SPDY/3.1."""
    if is_websocket(request):
        protos = offered(request, "Sec-WebSocket-Protocol")
        if TUNNELED_PORT_FORWARD in protos:
            ws = MaskedWebSocket(protocols=(TUNNELED_PORT_FORWARD,), max_msg_size=MAX_MESSAGE)
            await ws.prepare(request)
            spdy, pump = spdy_over_websocket(ws)
            try:
                await _spdy_port_forward(spdy, node, ns, name, uid)
            finally:
                pump.cancel()
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await ws.close()
            return ws
        if any(p.startswith("SPDY/") for p in protos):
            raise errors.bad_request("unable to upgrade: no tunneling spdy protocols provided")
        ports = []
        for p in request.query.getall(ports_param, []):
            for part in p.split(","):
                if not part.strip().isdigit() or not 0 < int(part) < 65536:
                    raise errors.bad_request(f'invalid port "{part}"')
                ports.append(int(part))
        if not ports:
            raise errors.bad_request('query parameter "port" is required')
        ws = MaskedWebSocket(protocols=(V4,), max_msg_size=MAX_MESSAGE)
        await ws.prepare(request)
        await _websocket_port_forward(WebSocketChannels(ws), node, ns, name, uid, ports)
        return ws
    if is_spdy(request):
        refused = handshake(request, (PORT_FORWARD,))
        if isinstance(refused, web.Response):
            return refused
        spdy, resp = await upgrade_to_spdy(request, PORT_FORWARD)
        await _spdy_port_forward(spdy, node, ns, name, uid)
        return resp
    raise errors.bad_request("Upgrade request required")


def _forward_error(port: int, uid: str, e: Exception) -> bytes:
    """The CRI streaming server's words (containerd's, which the kubelet hands port-forwards to):
    the pod it names is its sandbox's ID, with no uid."""
    return f"error forwarding port {port} to pod {sandbox_id(uid)}, uid : {e}".encode()


async def _copy_to_pod(read: Callable[[int], Awaitable[bytes]], writer: asyncio.StreamWriter) -> None:
    while chunk := await read(CHUNK):
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def _spdy_port_forward(spdy: SpdySession, node: NodeStreaming, ns: str, name: str, uid: str) -> None:
    """Pairs of data and error streams, one pair per client connection, each
    forwarded to its `port` in the pod until the client leaves."""
    serving = asyncio.ensure_future(spdy.serve())
    pairs: dict[str, dict[str, SpdyStream]] = {}
    tasks: set[asyncio.Task] = set()

    async def forward(port: int, data: SpdyStream, error: SpdyStream) -> None:
        try:
            reader, writer = await node.port_forward(ns, name, uid, port)
        except (StreamFailed, OSError) as e:
            data.reader.close()
            await error.write(_forward_error(port, uid, e))
            await error.close()
            await data.close()
            return
        up = asyncio.ensure_future(_copy_to_pod(data.reader.read, writer))
        try:
            while chunk := await reader.read(CHUNK):
                await data.write(chunk)
            await up
        except (ConnectionError, OSError):
            pass
        finally:
            up.cancel()
            writer.close()
            data.reader.close()
            with contextlib.suppress(ConnectionError, RuntimeError):
                await data.close()
                await error.close()

    try:
        while (s := await spdy.incoming.get()) is not None:
            rid = s.headers.get("requestid") or str(s.id - (2 if s.headers.get("streamtype") == "data" else 0))
            pair = pairs.setdefault(rid, {})
            pair[s.headers.get("streamtype", "")] = s
            if "data" in pair and "error" in pair:
                del pairs[rid]
                port = s.headers.get("port", "")
                if not port.isdigit():
                    await pair["error"].write(f'invalid port "{port}"'.encode())
                    await pair["error"].close()
                    continue
                t = asyncio.ensure_future(forward(int(port), pair["data"], pair["error"]))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
    finally:
        for t in list(tasks):
            t.cancel()
        serving.cancel()
        await asyncio.gather(serving, *tasks, return_exceptions=True)


async def _websocket_port_forward(ch: WebSocketChannels, node: NodeStreaming, ns: str, name: str, uid: str,
                                  ports: list[int]) -> None:
    """The kubelet's native WebSocket port-forward: channel 2i carries port i's
    data, 2i+1 its errors; each starts with the port as two little-endian
    bytes. The connection ends when every port's connection has."""
    to_pod = {i: HeldReader() for i in range(len(ports))}

    async def on_data(channel: int, data: bytes) -> None:
        reader = to_pod.get(channel // 2) if channel % 2 == 0 else None
        if reader is not None:
            await reader.feed(data)

    for i, port in enumerate(ports):
        await ch.send(2 * i, port.to_bytes(2, "little"))
        await ch.send(2 * i + 1, port.to_bytes(2, "little"))

    async def forward(i: int, port: int) -> None:
        try:
            reader, writer = await node.port_forward(ns, name, uid, port)
        except (StreamFailed, OSError) as e:
            to_pod.pop(i).close()
            await ch.send(2 * i + 1, _forward_error(port, uid, e))
            return
        up = asyncio.ensure_future(_copy_to_pod(to_pod[i].read, writer))
        try:
            while chunk := await reader.read(CHUNK):
                await ch.send(2 * i, chunk)
        except (ConnectionError, OSError):
            pass
        finally:
            up.cancel()
            writer.close()
            to_pod.pop(i).close()  # what the client sends this port from now on is dropped

    pump = asyncio.ensure_future(ch.pump_into(None, on_data))
    forwards = asyncio.ensure_future(asyncio.gather(*(forward(i, p) for i, p in enumerate(ports))))
    try:
        await asyncio.wait([pump, forwards], return_when=asyncio.FIRST_COMPLETED)
    finally:
        forwards.cancel()
        pump.cancel()
        await asyncio.gather(pump, forwards, return_exceptions=True)
        await ch.close()
