"""SPDY/3.1 framing, as much of it as Kubernetes' streaming protocols use
(moby/spdystream on the client side): streams opened by the client with
SYN_STREAM and answered with SYN_REPLY, DATA frames with FIN half-closes,
RST_STREAM, PING echoes and GOAWAY. Header blocks are zlib-compressed with
SPDY/3's dictionary on one compression context per direction for the whole
connection. Flow control is not enforced (spdystream neither sends nor
honours WINDOW_UPDATE).

`SpdySession` runs over any byte stream: an HTTP connection upgraded to
`SPDY/3.1`, or the binary messages of a WebSocket tunnel
(`SPDY/3.1+portforward.k8s.io`).
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Awaitable, Callable

from ..streaming import STDIN_BUFFER, YIELD_EVERY

_WORDS = (
    'options', 'head', 'post', 'put', 'delete', 'trace', 'accept', 'accept-charset', 'accept-encoding',
    'accept-language', 'accept-ranges', 'age', 'allow', 'authorization', 'cache-control', 'connection',
    'content-base', 'content-encoding', 'content-language', 'content-length', 'content-location', 'content-md5',
    'content-range', 'content-type', 'date', 'etag', 'expect', 'expires', 'from', 'host', 'if-match',
    'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since', 'last-modified', 'location',
    'max-forwards', 'pragma', 'proxy-authenticate', 'proxy-authorization', 'range', 'referer', 'retry-after',
    'server', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent', 'vary', 'via', 'warning',
    'www-authenticate', 'method', 'get', 'status', '200 OK', 'version', 'HTTP/1.1', 'url', 'public', 'set-cookie',
    'keep-alive', 'origin',
)
_TAIL = (
    '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 Non-Au'
    'thoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidd'
    'en404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr Ma'
    'y Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,imag'
    'e/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicpri'
    'vatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.'
)
#: SPDY/3's header compression dictionary (draft 3, section 2.6.10.1)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_CANCEL = 5
MAX_DATA = 32 * 1024
#: the most one header block may inflate to (Go's http.DefaultMaxHeaderBytes; the streams' headers are a few
#: dozen bytes): a frame of 1 MiB inflating to gigabytes held the loop half a minute and took 3 GB
MAX_HEADER_BLOCK = 1 << 20


class SpdyError(Exception):
    """The peer broke the framing; the connection is unusable."""


class HeldReader(asyncio.StreamReader):
    """What a client sends one stream (a SPDY stream, a WebSocket channel's port), for whoever reads it:
    `feed` waits while more than STDIN_BUFFER is unread (the reader pauses its stand-in transport at
    twice its limit and resumes it once read down to it), so a reader that does not keep up (a pod port,
    a command's stdin) slows the client through its connection, as the kubelet's pipes do, instead of
    the server holding it all; once closed, what comes is dropped."""

    def __init__(self) -> None:
        super().__init__(limit=STDIN_BUFFER // 2)
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._dropped = self._ended = False
        self.set_transport(self)

    def pause_reading(self) -> None:
        self._resumed.clear()

    def resume_reading(self) -> None:
        self._resumed.set()

    async def feed(self, data: bytes) -> None:
        if self._dropped or self._ended:
            return
        self.feed_data(data)
        await self._resumed.wait()

    def feed_eof(self) -> None:
        self._ended = True
        super().feed_eof()

    def close(self) -> None:
        """Nothing more is read: a feeder waiting goes on, and what comes after is dropped."""
        self._dropped = True
        self._resumed.set()


class SpdyStream:
    """One stream the client opened: its headers, what it sent (a reader that
    ends at the client's FIN) and writes back to it."""

    def __init__(self, session: SpdySession, stream_id: int, headers: dict[str, str]):
        self.session = session
        self.id = stream_id
        self.headers = headers
        self.reader = HeldReader()
        self.closed = False  # our side sent FIN

    async def write(self, data: bytes) -> None:
        for i in range(0, len(data), MAX_DATA):
            await self.session.send_data(self.id, data[i:i + MAX_DATA], False)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.session.send_data(self.id, b"", True)


class SpdySession:
    """The server side of a SPDY/3.1 connection over `read(n)` / `write(data)`."""

    def __init__(self, read: Callable[[int], Awaitable[bytes]], write: Callable[[bytes], Awaitable[None]]):
        self._read = read
        self._write = write
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(9, zdict=DICTIONARY)
        self._lock = asyncio.Lock()
        self.streams: dict[int, SpdyStream] = {}
        self.incoming: asyncio.Queue[SpdyStream | None] = asyncio.Queue()
        self.done = asyncio.Event()

    async def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = await self._read(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    async def serve(self) -> None:
        """Read frames until the client goes away; every opened stream is
        answered with SYN_REPLY and queued on `incoming` (None at the end). A loop turn every
        YIELD_EVERY frames: 200,000 PINGs of 12 bytes sent at once held the event loop, every
        other client, for over a second."""
        taken = 0
        try:
            while True:
                taken += 1
                if taken % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                head = await self._exactly(8)
                first, second = struct.unpack(">II", head)
                flags, length = second >> 24, second & 0xFFFFFF
                payload = await self._exactly(length) if length else b""
                if first & 0x80000000:
                    if not await self._control(first & 0xFFFF, flags, payload):
                        return
                else:
                    await self._data(first & 0x7FFFFFFF, flags, payload)
        except (EOFError, ConnectionError, asyncio.IncompleteReadError, SpdyError, struct.error):
            pass  # the peer left, or broke the framing: the connection ends
        finally:
            for s in self.streams.values():
                s.reader.feed_eof()
            self.incoming.put_nowait(None)
            self.done.set()

    async def _control(self, ftype: int, flags: int, payload: bytes) -> bool:
        if ftype == SYN_STREAM:
            stream_id = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            stream = SpdyStream(self, stream_id, self._headers(payload[10:]))
            self.streams[stream_id] = stream
            if flags & FLAG_FIN:
                stream.reader.feed_eof()
            await self._send_control(SYN_REPLY, 0, struct.pack(">I", stream_id) + self._header_block({}))
            self.incoming.put_nowait(stream)
        elif ftype == RST_STREAM:
            stream = self.streams.pop(struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF, None)
            if stream is not None:
                stream.closed = True
                stream.reader.feed_eof()
        elif ftype == PING:
            await self._send_control(PING, 0, payload[:4])
        elif ftype == GOAWAY:
            return False
        elif ftype == HEADERS:
            self._headers(payload[4:])  # keeps the shared decompression context in step
        return True

    async def _data(self, stream_id: int, flags: int, data: bytes) -> None:
        """A DATA frame to its stream's reader; the session reads no further frame while the stream holds
        too much unread (spdystream's frame queue blocks as well)."""
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if data:
            await stream.reader.feed(data)
        if flags & FLAG_FIN:
            stream.reader.feed_eof()

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as e:
            raise SpdyError(f"header block: {e}") from None
        if self._inflate.unconsumed_tail:
            raise SpdyError(f"header block: over {MAX_HEADER_BLOCK} bytes")
        try:
            (count,), pos, out = struct.unpack(">I", raw[:4]), 4, {}
            for _ in range(count):
                n = struct.unpack(">I", raw[pos:pos + 4])[0]
                name = raw[pos + 4:pos + 4 + n].decode().lower()
                pos += 4 + n
                n = struct.unpack(">I", raw[pos:pos + 4])[0]
                out[name] = raw[pos + 4:pos + 4 + n].decode().split("\x00")[0]
                pos += 4 + n
        except (struct.error, UnicodeDecodeError) as e:
            raise SpdyError(f"header block: {e}") from None
        return out

    def _header_block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode() for k, v in headers.items())
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    async def _send_control(self, ftype: int, flags: int, payload: bytes) -> None:
        async with self._lock:
            await self._write(struct.pack(">HHI", 0x8000 | 3, ftype, (flags << 24) | len(payload)) + payload)

    async def send_data(self, stream_id: int, data: bytes, fin: bool) -> None:
        async with self._lock:
            await self._write(struct.pack(">II", stream_id, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data)

    async def reset(self, stream: SpdyStream) -> None:
        self.streams.pop(stream.id, None)
        await self._send_control(RST_STREAM, 0, struct.pack(">II", stream.id, RST_CANCEL))

    async def go_away(self) -> None:
        last = max(self.streams, default=0)
        try:
            await self._send_control(GOAWAY, 0, struct.pack(">II", last, 0))
        except (ConnectionError, RuntimeError):
            pass
