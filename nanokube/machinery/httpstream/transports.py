"""The connections a streaming request upgrades to: a WebSocket speaking the
channel protocol (`v5.channel.k8s.io`, `v4.channel.k8s.io`: one byte of
channel number, then the payload), a WebSocket carrying a SPDY connection
(kubectl's port-forward tunnel), or the HTTP connection itself upgraded to
SPDY/3.1 (older clients, and kubectl's fallback). Upstream's
k8s.io/apimachinery/pkg/util/httpstream (wsstream, spdy) and its upgrade-aware proxy's splice."""

from __future__ import annotations

import asyncio
import binascii
import contextlib
from base64 import b64decode, b64encode

import orjson
from aiohttp import WSMsgType, web
from multidict import CIMultiDict

from ..streaming import CLOSE, RESIZE, STDIN, YIELD_EVERY, StreamSession
from .spdy import HeldReader, SpdySession

#: how much one copy between a stream and the pod moves at a time
CHUNK = 32 * 1024
#: the largest WebSocket message a stream takes: golang.org/x/net/websocket's DefaultMaxPayloadBytes, past
#: which the kubelet's wsstream ends the connection (a larger one closes it with 1009, message too big)
MAX_MESSAGE = 32 << 20


def offered(request: web.Request, header: str) -> list[str]:
    return [p.strip() for v in request.headers.getall(header, []) for p in v.split(",") if p.strip()]


def handshake(request: web.Request, accepted: tuple[str, ...]) -> str | web.Response:
    """httpstream.Handshake for a SPDY upgrade: the first protocol in the client's
    X-Stream-Protocol-Version that the server accepts, or the plain-text refusal to answer
    instead (403 listing both sides, the accepted ones also as headers; 400 when the client
    names none, where the kubelet gives up without a word)."""
    client = offered(request, "X-Stream-Protocol-Version")
    if not client:
        return web.Response(status=400, text="unable to upgrade: X-Stream-Protocol-Version is required\n")
    chosen = next((p for p in client if p in accepted), None)
    if chosen is not None:
        return chosen
    headers = CIMultiDict(("X-Accepted-Stream-Protocol-Versions", p) for p in accepted)
    return web.Response(status=403, headers=headers,
                        text=f"unable to upgrade: unable to negotiate protocol: client supports [{' '.join(client)}], "
                             f"server accepts [{' '.join(accepted)}]\n")


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


def is_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower().startswith("spdy/3")


class WebSocketChannels:
    """The channel protocol over an upgraded WebSocket: binary frames whose first
    byte is the channel, or with `base64` (the browser-friendly variants) text
    frames of '0'+channel and the payload in base64."""

    def __init__(self, ws: web.WebSocketResponse, base64: bool = False):
        self.ws = ws
        self.base64 = base64
        self.closed = False

    async def send(self, channel: int, data: bytes) -> None:
        if not self.closed:
            try:
                if self.base64:
                    await self.ws.send_str(chr(ord("0") + channel) + b64encode(data).decode())
                else:
                    await self.ws.send_bytes(bytes([channel]) + data)
            except (ConnectionError, RuntimeError):
                self.closed = True

    async def pump_into(self, session: StreamSession | None, on_data=None) -> None:
        """Client frames until it closes: stdin and resizes into `session`
        (or every data frame to `on_data(channel, bytes)`); CLOSE ends a channel. A loop turn
        every YIELD_EVERY frames: those of one read are taken without one, and 100,000 of a few
        bytes each (stdin, resizes, empty ones) held the event loop, every other client, for seconds."""
        taken = 0
        async for msg in self.ws:
            taken += 1
            if taken % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            frame = b""
            if msg.type == WSMsgType.BINARY:
                frame = msg.data
            elif msg.type == WSMsgType.TEXT and self.base64:
                if not msg.data or ord(msg.data[0]) < ord("0"):
                    continue
                with contextlib.suppress(binascii.Error, ValueError):
                    frame = bytes([ord(msg.data[0]) - ord("0")]) + b64decode(msg.data[1:])
            elif msg.type == WSMsgType.TEXT:
                frame = msg.data.encode()  # a text frame: its UTF-8 bytes, the first one the channel
            else:
                continue
            if not frame:
                continue
            channel, data = frame[0], frame[1:]
            if channel == CLOSE:
                if session is not None and data[:1] == bytes([STDIN]):
                    await session.feed_stdin(None)
                continue
            if on_data is not None:
                await on_data(channel, data)
            elif channel == STDIN and session.stdin:
                await session.feed_stdin(data)
            elif channel == RESIZE:
                _resizes(session, data)
        self.closed = True
        if session is not None:
            session.stdin_data.put_nowait(None)

    async def close(self) -> None:
        self.closed = True
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.close()


def _resizes(session: StreamSession, data: bytes) -> None:
    """Terminal sizes; one that does not decode (`"Width": "x"`, a number past int) is dropped, the
    session going on, as the kubelet's resize reader only stops reading sizes."""
    for part in data.replace(b"}{", b"}\n{").splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError, OverflowError):
            size = orjson.loads(part)
            session.resizes.put_nowait((int(size["Width"]), int(size["Height"])))


#: the most a SPDY resize stream holds of a terminal size still to end (one takes a few dozen bytes)
MAX_SIZE_MESSAGE = 64 * 1024


def resize_stream_reader(session: StreamSession, reader: asyncio.StreamReader):
    """A SPDY resize stream: JSON sizes one after another. One that runs past MAX_SIZE_MESSAGE
    without ending stops the sizes, as a decode error stops the kubelet's reader; the stream is
    read on to its end and dropped (it was held whole, each chunk joined to all before it: 16 MiB
    held the loop 5 s)."""
    async def pump() -> None:
        buf = b""
        while chunk := await reader.read(4096):
            *parts, buf = (buf + chunk).split(b"}")
            for part in parts:
                _resizes(session, part + b"}")
            if len(buf) > MAX_SIZE_MESSAGE:
                while await reader.read(CHUNK):
                    pass
    return pump()


class RawUpgrade(web.StreamResponse):
    """A 101 answer after which the connection carries another protocol, or a proxied backend's
    refusal of an upgrade: written as on upstream's hijacked connection, past the headers its
    filters set (aiohttp chunks a body of unknown length unless told otherwise)."""

    _length_check = False


class _Feed:
    """aiohttp's payload-parser seat, taken over after the upgrade: every byte
    the client sends goes to `reader`."""

    def __init__(self, reader: asyncio.StreamReader):
        self.reader = reader

    def feed_data(self, data: bytes):
        self.reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self.reader.feed_eof()


async def splice(request: web.Request, resp: web.StreamResponse, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> web.StreamResponse:
    """Answer `resp` (an upgrade) and join the client's connection to a backend's until either
    side ends: the upgraded proxy's and a relaying worker's byte pipe. The client's connection is
    paused while what it sent waits for a backend that does not read (a StreamReader pauses its
    transport at twice its limit), as upstream's copy blocks, instead of all of it held here."""
    resp.force_close()
    client = asyncio.StreamReader()
    client.set_transport(request.transport)
    request.protocol.set_parser(_Feed(client))
    await resp.prepare(request)

    async def up() -> None:
        while data := await client.read(1 << 16):
            writer.write(data)
            await writer.drain()

    async def down() -> None:
        while data := await reader.read(1 << 16):
            await resp.write(data)

    tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return resp


async def upgrade_to_spdy(request: web.Request, protocol: str) -> tuple[SpdySession, web.StreamResponse]:
    """Answer 101 Switching Protocols to SPDY/3.1 and start serving SPDY frames."""
    reader = asyncio.StreamReader()
    reader.set_transport(request.transport)  # paused while the session reads no further (a stream holds too much)
    resp = RawUpgrade(status=101, headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                            "X-Stream-Protocol-Version": protocol})
    resp.force_close()
    request.protocol.set_parser(_Feed(reader))
    await resp.prepare(request)
    return SpdySession(reader.read, resp.write), resp


def spdy_over_websocket(ws: web.WebSocketResponse) -> tuple[SpdySession, asyncio.Task]:
    """A SPDY connection whose bytes travel in the WebSocket's binary messages."""
    reader = HeldReader()

    async def pump() -> None:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                await reader.feed(msg.data)  # (the WebSocket is read no further while the session is not)
        reader.feed_eof()

    return SpdySession(reader.read, ws.send_bytes), asyncio.ensure_future(pump())
