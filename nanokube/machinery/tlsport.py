"""A TLS listening port that answers a plain HTTP request as Go's server does.

A client that speaks HTTP to an HTTPS port (`curl http://` at kube-apiserver's 6443, a kubeconfig
whose server says http://) gets, from Go's net/http, `400 Bad Request` and the body "Client sent an
HTTP request to an HTTPS server." written on the bare connection: its TLS handshake found a record
header that reads like the start of a request line. asyncio's TLS transport fails the handshake and
closes the connection without a word, so such a client saw only "connection reset" or an empty
reply. Here each accepted connection first reads the five bytes of a record header; a TLS record
(or anything else not like HTTP) goes on to the event loop's own TLS protocol, bytes read included,
as `loop.start_tls` hands a connection over to it."""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio import constants, sslproto
from collections.abc import Callable

log = logging.getLogger(__name__)

#: what Go's server writes on the bare connection, then closes it
PLAIN_HTTP_ANSWER = b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
#: the record headers Go's server takes for HTTP (tlsRecordHeaderLooksLikeHTTP)
_HTTP_STARTS = frozenset((b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO"))
#: a TLS record header's length, and the content type of a handshake record, which a ClientHello is
_HEADER, _HANDSHAKE = 5, 0x16


class _TLS(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 64 KiB read buffer, not 256 KiB: each connection holds its buffer,
    zeroed (resident), from its ClientHello on, so 400 connections held 120 MB more where Go's hold a
    few KiB each; at 64 KiB they hold 43 MB (16 KiB: 24 MB). A read still takes four full TLS records."""

    max_size = 64 * 1024


def _protocol_class(loop: asyncio.AbstractEventLoop) -> type:
    """The TLS protocol the loop's own create_server would have served with: uvloop's (Cython; `nanokube
    up` and the components run on uvloop for it, issue 16), whose read buffer stays 256 KiB, or _TLS."""
    if type(loop).__module__.startswith("uvloop"):
        from uvloop.loop import SSLProtocol
        return SSLProtocol
    return _TLS


class _FirstRecord(asyncio.Protocol):
    """A connection until its first record header has come: then either the answer to plain HTTP or
    the loop's TLS protocol (_protocol_class) serving `app_factory()`'s protocol, its handshake bounded by
    what is left of `handshake_timeout` since the connection was made."""

    def __init__(self, app_factory: Callable[[], asyncio.BaseProtocol], ctx: ssl.SSLContext,
                 handshake_timeout: float | None) -> None:
        self._app_factory, self._ctx = app_factory, ctx
        self._timeout = handshake_timeout or constants.SSL_HANDSHAKE_TIMEOUT
        self._head = b""

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self._timeout
        self._timer = loop.call_at(self._deadline, transport.abort)

    def data_received(self, data: bytes) -> None:
        head = self._head = self._head + data
        if len(head) < _HEADER and head[0] != _HANDSHAKE:
            return
        self._timer.cancel()
        if head[:_HEADER] in _HTTP_STARTS:
            log.debug("http: TLS handshake error from %s: client sent an HTTP request to an HTTPS server",
                      self._transport.get_extra_info("peername"))
            self._transport.write(PLAIN_HTTP_ANSWER)
            self._transport.close()
            return
        loop = asyncio.get_running_loop()
        tls = _protocol_class(loop)(loop, self._app_factory(), self._ctx, None, server_side=True,
                                   ssl_handshake_timeout=max(self._deadline - loop.time(), 0.001))
        self._transport.set_protocol(tls)
        tls.connection_made(self._transport)
        view = memoryview(head)
        while view and not self._transport.is_closing():
            buf = tls.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            tls.buffer_updated(n)
            view = view[n:]

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._timer.cancel()


async def create_server(app_factory: Callable[[], asyncio.BaseProtocol], ctx: ssl.SSLContext | None,
                        handshake_timeout: float | None = None, **listen) -> asyncio.Server:
    """`loop.create_server(app_factory, ssl=ctx, ssl_handshake_timeout=handshake_timeout, **listen)`
    (asyncio's 60 s without one), whose connections that send plain HTTP are answered as Go's server
    answers them."""
    loop = asyncio.get_running_loop()
    if ctx is None:
        return await loop.create_server(app_factory, **listen)
    return await loop.create_server(lambda: _FirstRecord(app_factory, ctx, handshake_timeout), **listen)
