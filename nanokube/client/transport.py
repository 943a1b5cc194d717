"""HTTP/1.1 for a component's unary requests (one answer read whole): a keep-alive connection pool
over asyncio, as client-go's http.Transport keeps one per server.

aiohttp's ClientSession spends ~0.5 M instructions on each such request in machinery these requests
do not use (URL objects, header multidicts, the cookie jar, timers, streamed payloads); a stuck pod's
two writes made that most of the scheduler's CPU for it (benchmarks/README, issue 19 row 1). Here a
request is its bytes, written once, and its answer is parsed by httptools (llhttp, in C). Watches and
other streams stay on aiohttp.

Failures are aiohttp's exceptions (`ConnectError`, a ClientOSError, where no connection opens) or
TimeoutError on connecting, which every caller already expects. An answer must be framed
(Content-Length or chunked, as the API server frames every answer): one that ends with its
connection is refused as cut short.
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import quote, urlsplit

import aiohttp
import httptools

#: seconds to open a connection, TLS included (the client's `sock_connect` before; client-go's
#: dialer and TLS handshake timeouts are 30 s and 10 s)
CONNECT_TIMEOUT = 10.0
#: seconds a kept-alive connection may sit idle and still be used (aiohttp's connector keeps 15 s,
#: well inside the API server's own keep-alive timeout, so the server seldom closes one under a request)
IDLE_TIMEOUT = 15.0
#: what is sent again, once, on a fresh connection when a kept-alive one closes before any byte of its
#: answer (Go's Request.isReplayable): a request without side effects, even if the server had read it
REPLAYABLE = frozenset(("GET", "HEAD", "OPTIONS", "TRACE"))
#: what a target may hold unquoted (yarl's requoting of a path and query: `%` escapes are kept)
_SAFE = "/:@!$&'()*+,;=?%~-._"


class ConnectError(aiohttp.ClientOSError):
    """A connection that could not be opened, naming where to as aiohttp's ClientConnectorError does;
    `os_error` is what stopped it (the informer retries a refused one, client-go's
    isWatchErrorRetriable)."""

    def __init__(self, where: str, os_error: OSError):
        self.os_error = os_error
        super().__init__(os_error.errno, f"cannot connect to {where}: {os_error.strerror or os_error}")


class _Connection(asyncio.Protocol):
    """One connection: the answer to its current request, parsed as it arrives."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[int] | None = None
        self.body: list[bytes] = []
        #: whether any byte of the current answer came
        self.received = False
        self.closed = False
        #: whether the last answer left the connection open for the next request
        self.keep_alive = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.pool.conns.add(self)

    def data_received(self, data: bytes) -> None:
        if self.answer is None or self.answer.done():  # bytes nobody asked for: the connection is unusable
            self.transport.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self.answer.set_exception(aiohttp.ClientPayloadError(f"malformed answer: {e}"))
            self.transport.close()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        # asked here: once the callback returns, the parser starts on the next message
        self.keep_alive = self.parser.should_keep_alive()
        if not self.answer.done():
            self.answer.set_result(self.parser.get_status_code())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.conns.discard(self)
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(aiohttp.ServerDisconnectedError() if exc is None
                                      else aiohttp.ClientOSError(getattr(exc, "errno", None), str(exc)))


class Pool:
    """The kept-alive connections to one server, used last in first out (the busiest stay warm).
    Unbounded, as the aiohttp connector it replaces: each request in flight has its own."""

    def __init__(self, server: str, context: ssl.SSLContext | None):
        url = urlsplit(server)
        self.host, self.port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        self.where = url.netloc
        self.ssl = (context or ssl.create_default_context()) if url.scheme == "https" else None
        self.prefix = url.path.rstrip("/")
        self.host_line = f"Host: {url.netloc}\r\n"
        self.idle: list[_Connection] = []
        self.conns: set[_Connection] = set()

    async def request(self, method: str, target: str, head: str, body: bytes | None = None) -> tuple[int, bytes]:
        """The status and body of the answer to `method target` with header lines `head` (each ending
        in CRLF; Host and Content-Length are added). `target` is a path and query."""
        data = f"{method} {quote(self.prefix + target, _SAFE)} HTTP/1.1\r\n{self.host_line}{head}".encode()
        data += b"\r\n" if body is None else b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
        for retry in (False, True):
            conn, reused = self._idle() or (await self._connect(), False)
            conn.answer, conn.received = asyncio.get_running_loop().create_future(), False
            conn.body.clear()
            conn.transport.write(data)
            try:
                status = await conn.answer
            except aiohttp.ClientConnectionError:  # closed or reset, as `connection_lost` says
                if retry or not reused or conn.received or method not in REPLAYABLE:
                    raise
                continue
            except BaseException:  # cancelled or failed mid-answer: what is left of it is unknown
                conn.transport.close()
                raise
            body = b"".join(conn.body)
            self._release(conn)
            return status, body
        raise AssertionError("unreachable")

    def _idle(self) -> tuple[_Connection, bool] | None:
        now = asyncio.get_running_loop().time()
        while self.idle:
            conn = self.idle.pop()
            if conn.closed or conn.transport.is_closing():
                continue
            if now - conn.idle_since > IDLE_TIMEOUT:  # it and every one idle longer, below it
                for old in (conn, *self.idle):
                    old.transport.close()
                self.idle.clear()
                return None
            return conn, True
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=self.ssl)
        except TimeoutError:
            raise TimeoutError(f"no connection to {self.where} within {CONNECT_TIMEOUT:g} s") from None
        except OSError as e:
            raise ConnectError(self.where, e) from e
        return conn

    def _release(self, conn: _Connection) -> None:
        conn.answer = None
        if conn.closed or not conn.keep_alive:
            conn.transport.close()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self.idle.append(conn)

    def close(self) -> None:
        """Closes every connection, those in use too (their requests fail)."""
        for conn in list(self.conns):
            conn.transport.close()
        self.idle.clear()
