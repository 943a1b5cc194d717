"""How long the API server keeps a connection that sends nothing useful, as
kube-apiserver's secure serving bounds it (SecureServingInfo.Serve's
http.Server): a client gets READ_HEADER_TIMEOUT after its TLS handshake to send
its first request's headers, the same to finish that handshake, and
IDLE_TIMEOUT between requests; past them the connection is closed unanswered,
as Go's server drops one whose read timed out. aiohttp's only bound is its
keep-alive timeout (an hour by default), so a client that opened connections
and sent a header byte now and then, or nothing at all, held a descriptor and
a TLS session each for that hour.

A request's body is not bounded here: the request's own deadline (timeout.py,
60 s) answers 504 to one that is still arriving, as upstream's timeout filter
does. One difference: a later request on a kept connection must have all its
headers within IDLE_TIMEOUT of the previous answer (Go starts READ_HEADER_TIMEOUT
at its first byte instead)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from ..machinery import tlsport

#: http.Server.ReadHeaderTimeout kube-apiserver sets ("just shy of" the upper bound of a request's timeout)
READ_HEADER_TIMEOUT = 32.0
#: http.Server.IdleTimeout kube-apiserver sets (http.DefaultTransport's keep-alive timeout)
IDLE_TIMEOUT = 90.0


class HeaderDeadline(RequestHandler):
    """A connection closed when its first request's headers have not all come READ_HEADER_TIMEOUT after
    it was made: aiohttp's keep-alive check, which closes a connection that waits for a request, is moved
    up from IDLE_TIMEOUT to then (and moved back, by aiohttp, once a request has been answered)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._keepalive_handle is not None:
            self._keepalive_handle.cancel()
            self._next_keepalive_close_time = self._loop.time() + READ_HEADER_TIMEOUT
            self._keepalive_handle = self._loop.call_at(self._next_keepalive_close_time, self._process_keepalive)


class Site(web.SockSite):
    """A listening socket whose TLS handshakes must be done within READ_HEADER_TIMEOUT (Go's server bounds
    a handshake by its shortest read or write timeout), not asyncio's 60 s, and whose plain HTTP requests
    are answered Go's 400 (machinery/tlsport.py)."""

    async def start(self) -> None:
        await web.BaseSite.start(self)  # (SockSite.start's create_server takes no handshake timeout)
        self._server = await tlsport.create_server(self._runner.server, self._ssl_context, READ_HEADER_TIMEOUT,
                                                   sock=self._sock, backlog=self._backlog)
