"""HTTP/1.1 for a component's requests: a keep-alive connection pool over asyncio for the unary ones
(one answer read whole), as client-go's http.Transport keeps one per server, and a connection of its
own for each watch, whose answer is a stream of JSON lines.

aiohttp's ClientSession spends ~0.5 M instructions on each unary request in machinery these requests
do not use (URL objects, header multidicts, the cookie jar, timers, streamed payloads); a stuck pod's
two writes made that most of the scheduler's CPU for it (benchmarks/README, issue 19 row 1), and its
stream reader's readline most of what a watch event cost besides decoding it. Here a request is its
bytes, written once, and its answer is parsed by httptools (llhttp, in C): a watch's chunks are split
into lines as they arrive, without copying a line that one chunk holds whole.

Failures are aiohttp's exceptions (`ConnectError`, a ClientOSError, where no connection opens) or
TimeoutError on connecting, which every caller already expects. An answer must be framed
(Content-Length or chunked, as the API server frames every answer): one that ends with its
connection is refused as cut short.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import quote, urlsplit

import aiohttp
import httptools
import orjson

from ..machinery.errors import APIError

#: seconds to open a connection, TLS included (the client's `sock_connect` before; client-go's
#: dialer and TLS handshake timeouts are 30 s and 10 s)
CONNECT_TIMEOUT = 10.0
#: seconds a kept-alive connection may sit idle and still be used (aiohttp's connector keeps 15 s,
#: well inside the API server's own keep-alive timeout, so the server seldom closes one under a request)
IDLE_TIMEOUT = 15.0
#: unary connections a pool has open (or opening) at most: more requests at once wait for one to be
#: released. A TLS handshake costs the server some ten kept-alive requests' CPU, and a component's
#: burst of concurrent writes (a scheduler's bindings, status patches and Events) otherwise dials a
#: connection per request in flight (client-go multiplexes them on one HTTP/2 connection)
MAX_CONNS = 32
#: what is sent again, once, on a fresh connection when a kept-alive one closes before any byte of its
#: answer (Go's Request.isReplayable): a request without side effects, even if the server had read it
REPLAYABLE = frozenset(("GET", "HEAD", "OPTIONS", "TRACE"))
#: what a target may hold unquoted (yarl's requoting of a path and query: `%` escapes are kept)
_SAFE = "/:@!$&'()*+,;=?%~-._"
#: lines a watch holds undecoded before it stops reading its connection until its reader catches up
#: (TCP's window then holds the server back, as a full buffer of aiohttp's stream reader did)
HIGH_WATER = 512

_P = TypeVar("_P", bound=asyncio.Protocol)


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
        self.pool.unary.add(self)

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
        self.pool.unary.discard(self)
        self.pool.wake_dialer()
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(aiohttp.ServerDisconnectedError() if exc is None
                                      else aiohttp.ClientOSError(getattr(exc, "errno", None), str(exc)))


class Pool:
    """The kept-alive connections to one server, used last in first out (the busiest stay warm), at
    most MAX_CONNS of them: a request that finds none idle and the pool full waits, first come first
    served, for the next one released (or for room to dial once one closes)."""

    def __init__(self, server: str, context: ssl.SSLContext | None):
        url = urlsplit(server)
        self.host, self.port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        self.where = url.netloc
        self.ssl = (context or ssl.create_default_context()) if url.scheme == "https" else None
        self.prefix = url.path.rstrip("/")
        self.host_line = f"Host: {url.netloc}\r\n"
        self.idle: list[_Connection] = []
        self.conns: set[_Connection | WatchStream] = set()
        #: the unary requests' connections, which MAX_CONNS bounds (a watch holds one of its own for its
        #: life, and a controller manager runs dozens of informers: counted, they would starve requests)
        self.unary: set[_Connection] = set()
        #: connections being opened, and the requests waiting for a connection (a future's result:
        #: the connection handed over, or None: room to dial)
        self.dialing = 0
        self.waiters: deque[asyncio.Future[_Connection | None]] = deque()

    def _bytes(self, method: str, target: str, head: str, body: bytes | None = None) -> bytes:
        data = f"{method} {quote(self.prefix + target, _SAFE)} HTTP/1.1\r\n{self.host_line}{head}".encode()
        return data + (b"\r\n" if body is None else b"Content-Length: %d\r\n\r\n%b" % (len(body), body))

    async def request(self, method: str, target: str, head: str, body: bytes | None = None) -> tuple[int, bytes]:
        """The status and body of the answer to `method target` with header lines `head` (each ending
        in CRLF; Host and Content-Length are added). `target` is a path and query."""
        data = self._bytes(method, target, head, body)
        for retry in (False, True):
            conn, reused = await self._take()
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

    async def _take(self) -> tuple[_Connection, bool]:
        """An idle connection, a new one while the pool has room, else the next one released."""
        while True:
            if (got := self._idle()) is not None:
                return got
            if len(self.unary) + self.dialing < MAX_CONNS:
                self.dialing += 1
                try:
                    return await self._connect(lambda: _Connection(self)), False
                finally:
                    self.dialing -= 1
                    self.wake_dialer()  # (a failed dial leaves its room to a waiter)
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            try:
                conn = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    self._release(waiter.result())  # handed over just as this request was cancelled
                raise
            if conn is not None and not conn.closed and not conn.transport.is_closing():
                return conn, True

    def wake_dialer(self) -> None:
        """Room to dial: the first waiting request is told to try again."""
        if len(self.unary) + self.dialing < MAX_CONNS:
            self._hand(None)

    def _hand(self, conn: _Connection | None) -> bool:
        """Whether a waiting request (the first still waiting) took `conn` (None: room to dial)."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False

    async def watch(self, target: str, head: str) -> tuple[int, WatchStream]:
        """A GET of `target` on a connection of its own, once its answer's head came: the status and
        the stream of its body (a watch's events; for a status of 400 or more, `read()` gives the body)."""
        stream = await self._connect(lambda: WatchStream(self))
        stream.transport.write(self._bytes("GET", target, head))
        try:
            return await stream.head, stream
        except BaseException:
            stream.transport.close()
            raise

    async def _connect(self, protocol: Callable[[], _P]) -> _P:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                _, conn = await loop.create_connection(protocol, self.host, self.port, ssl=self.ssl)
        except TimeoutError:
            raise TimeoutError(f"no connection to {self.where} within {CONNECT_TIMEOUT:g} s") from None
        except OSError as e:
            raise ConnectError(self.where, e) from e
        return conn

    def _release(self, conn: _Connection) -> None:
        conn.answer = None
        if conn.closed or not conn.keep_alive:
            conn.transport.close()  # (its connection_lost makes room for a waiter)
            return
        if self._hand(conn):
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self.idle.append(conn)

    def close(self) -> None:
        """Closes every connection, those in use too (their requests fail)."""
        for conn in list(self.conns):
            conn.transport.close()
        self.idle.clear()


class WatchStream(asyncio.Protocol):
    """One watch's connection: its answer's body split into lines as the chunks come (a chunk seldom
    holds less than one event, an event of the server's batches seldom spans two), each decoded when
    it is read. An async iterator of (type, object), as client-go's StreamWatcher: an ERROR event is
    raised as the APIError it carries, the answer's end (the server's timeout) ends it, and a
    connection lost mid-answer raises ClientPayloadError once the lines read before it are read;
    `aclose()` closes the connection."""

    def __init__(self, pool: Pool):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        loop = asyncio.get_running_loop()
        self.head: asyncio.Future[int] = loop.create_future()
        #: the status; for one of 400 or more the body is kept whole in `partial`
        self.status = 0
        #: complete lines not read yet
        self.lines: deque[bytes | memoryview] = deque()
        #: the pieces of a line whose end has not come
        self.partial: list[bytes] = []
        #: set once the answer ended: True, or the exception that ended it
        self.ended: bool | BaseException = False
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.pool.conns.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._end(aiohttp.ClientPayloadError(f"malformed answer: {e}"))
            self.transport.close()
            return
        if len(self.lines) > HIGH_WATER and not self.paused and not self.ended:
            self.paused = True
            self.transport.pause_reading()

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if not self.head.done():  # (not if `Pool.watch`, waiting for it, was cancelled)
            self.head.set_result(self.status)

    def on_body(self, body: bytes) -> None:
        if self.status >= 400:
            self.partial.append(body)
            return
        start, size = 0, len(body)
        if self.partial:
            i = body.find(b"\n")
            if i < 0:
                self.partial.append(body)
                return
            self.partial.append(body[:i])
            self.lines.append(b"".join(self.partial))
            self.partial.clear()
            start = i + 1
        elif body[-1] == 10 and body.find(b"\n") == size - 1:  # one whole line: the usual chunk
            self.lines.append(body)
            self._wake()
            return
        view = memoryview(body)
        while (i := body.find(b"\n", start)) >= 0:
            if i > start:
                self.lines.append(view[start:i])
            start = i + 1
        if start < size:
            self.partial.append(body[start:])
        self._wake()

    def on_message_complete(self) -> None:
        if self.status < 400 and self.partial:  # a last line without its newline
            self.lines.append(b"".join(self.partial))
            self.partial.clear()
        self._end(True)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.conns.discard(self)
        if not self.head.done():
            self.head.set_exception(aiohttp.ServerDisconnectedError() if exc is None
                                    else aiohttp.ClientOSError(getattr(exc, "errno", None), str(exc)))
        self._end(aiohttp.ClientPayloadError(f"the watch's connection closed mid-answer: {exc or 'EOF'}"))

    def _end(self, how: bool | BaseException) -> None:
        if not self.ended:
            self.ended = how
            self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def read(self) -> bytes:
        """The whole body of an answer of 400 or more, and the connection closed."""
        while not self.ended:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        self.transport.close()
        if self.ended is not True:
            raise self.ended
        return b"".join(self.partial)

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> tuple[str, dict]:
        lines = self.lines
        while not lines:
            if self.ended:
                if self.ended is True:
                    raise StopAsyncIteration
                raise self.ended
            if self.paused:
                self.paused = False
                self.transport.resume_reading()
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        line = lines.popleft()
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            if bytes(line).strip():
                raise
            return await self.__anext__()  # a blank line between events
        typ = ev["type"]
        if typ == "ERROR":
            s = ev["object"]
            raise APIError(s.get("code", 500), s.get("reason", ""), s.get("message", ""), s.get("details"))
        return typ, ev["object"]

    async def aclose(self) -> None:
        self.transport.close()
