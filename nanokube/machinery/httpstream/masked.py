"""A server's WebSocket that holds its client to RFC 6455's masking: every frame a client sends must
be masked (section 5.1), and a server that receives one unmasked fails the connection, closing it with
1002 (protocol error), as Go's websocket servers do. aiohttp's frame reader takes unmasked frames, so
the frame headers are checked on their way to it."""

from __future__ import annotations

from aiohttp import WSCloseCode, web
from aiohttp.http_websocket import WebSocketError

#: the longest frame header: two bytes, a 64-bit length, the mask key
_HEADER_MAX = 14


class MaskedWebSocket(web.WebSocketResponse):
    """A WebSocketResponse whose client frames must be masked."""

    def _post_start(self, request, protocol, writer) -> None:
        conn = request.protocol
        tail, conn._message_tail = conn._message_tail, b""  # frames that came with the handshake: checked too
        super()._post_start(request, protocol, writer)
        conn._payload_parser = check = _MaskCheck(conn._payload_parser, self._reader)
        if tail:
            check.feed_data(tail)


class _MaskCheck:
    """The frame reader behind a check of each frame's header: its mask bit, and its length (to skip
    its payload), across the reads they arrive in."""

    __slots__ = ("parser", "queue", "head", "skip", "failed")

    def __init__(self, parser, queue) -> None:
        self.parser = parser
        self.queue = queue
        self.head = b""  # a header's bytes that arrived so far, where it is split between reads
        self.skip = 0  # the payload bytes of the current frame still to come
        self.failed = False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self.failed:
            return False, b""
        i, n = 0, len(data)
        while i < n:
            if self.skip:
                step = min(self.skip, n - i)
                self.skip -= step
                i += step
                continue
            head = self.head + data[i:i + _HEADER_MAX - len(self.head)]
            if len(head) < 2:
                self.head, i = head, n
                break
            if not head[1] & 0x80:
                self.failed = True  # what came before it is read; it and all after are not
                if i:
                    self.parser.feed_data(data[:i])
                self.queue.set_exception(WebSocketError(WSCloseCode.PROTOCOL_ERROR, "received an unmasked frame"))
                return False, b""
            size = head[1] & 0x7F
            extra = 2 if size == 126 else 8 if size == 127 else 0
            length = 2 + extra + 4
            if len(head) < length:
                self.head, i = head, n
                break
            if extra:
                size = int.from_bytes(head[2:2 + extra], "big")
            i += length - len(self.head)
            self.head = b""
            self.skip = size
        return self.parser.feed_data(data)

    def feed_eof(self) -> None:
        self.parser.feed_eof()

    def __getattr__(self, name):
        return getattr(self.parser, name)
