"""A watch served over a WebSocket, as kube-apiserver's WatchServer.HandleWS serves one whose request
asks for the upgrade (a browser's, a WebSocket client's): each event is one message, its JSON in a
text frame (a protobuf event, which is not text, in a binary one), the stream's end a close frame
(1000). The client is to send nothing: what it sends is read and dropped (wsstream.IgnoreReceives),
and its close, or its connection's loss, ends the watch."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from aiohttp import WSMsgType, web

from ..machinery.httpstream.masked import MaskedWebSocket
from ..machinery.httpstream.transports import offered

#: the largest message the client may send, all of which are dropped
_MAX_RECEIVED = 1 << 16


class WatchSocket(MaskedWebSocket):
    """The watch's response: `write` sends one event as one message, `write_eof` closes."""

    def __init__(self, request: web.Request, binary: bool) -> None:
        # golang.org/x/net/websocket's server echoes the subprotocol its client names; the watch
        # reads none of them
        super().__init__(protocols=tuple(offered(request, "Sec-WebSocket-Protocol")), max_msg_size=_MAX_RECEIVED)
        self._opcode = WSMsgType.BINARY if binary else WSMsgType.TEXT
        self._ignoring: asyncio.Task | None = None
        #: called once the client has closed or gone: the handler's watch ends
        self.on_gone: Callable[[], None] | None = None

    async def prepare(self, request):
        writer = await super().prepare(request)
        if self._ignoring is None:
            self._ignoring = asyncio.get_running_loop().create_task(self._ignore())
        return writer

    async def _ignore(self) -> None:
        async for _ in self:
            pass
        if self.on_gone is not None:
            self.on_gone()

    async def write(self, data) -> None:
        if self._opcode is WSMsgType.BINARY:  # a protobuf event, after the stream's length of it: the message
            data = data[4:]  # has its own length (the WebSocket framer replaces the length-delimited one)
        await self.send_frame(bytes(data), self._opcode)

    async def write_eof(self) -> None:
        try:
            await super().write_eof()
        finally:
            if self._ignoring is not None:
                self._ignoring.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._ignoring


def is_websocket_watch(request: web.Request) -> bool:
    """wsstream.IsWebSocketRequest: `Connection` names `upgrade` and `Upgrade` is `websocket`."""
    return request.headers.get("Upgrade", "").lower() == "websocket" and any(
        t.strip().lower() == "upgrade" for t in request.headers.get("Connection", "").split(","))
