"""A `Status` for every error the HTTP layer produces, not only the API's.

aiohttp answers some requests itself in text/plain: the parser's refusals
(a request line or header past the size limit, a NUL in a header, a method
that is not a token) and the router's (no route, a method a route does not
take, a body over the client size limit). Clients of kube-apiserver decode
every error body as a `metav1.Status`, so these are rewritten: the parser's
through a request handler whose `handle_error` writes a Status, the router's
through a middleware. A method the parser does not know but that is a token
(`get`) is a 405, as Go's server routes it case-sensitively to no route (one
difference: upstream answers paths outside the API's routes, /healthz, by
their own handlers). Header and request-line limits are Go's
`MaxHeaderBytes` (1 MiB), which kube-apiserver keeps.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
from http import HTTPStatus

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod
from multidict import CIMultiDict, CIMultiDictProxy
from aiohttp.web_protocol import RequestHandler

from ..machinery import errors, gofmt, headlimit
from ..machinery.responses import error_response
from . import inline, serving

log = logging.getLogger(__name__)

_REASONS = {400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 406: "NotAcceptable",
            408: "Timeout", 409: "Conflict", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType",
            429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


def status_error(code: int, message: str) -> errors.APIError:
    """The API error for an HTTP status the transport chose."""
    if code == 500:
        return errors.internal(message)
    return errors.APIError(code, _REASONS.get(code, "Unknown"), message)


def internal_error(request: web.Request, message: str) -> web.Response:
    """responsewriters.InternalError: a plain-text 500 naming the request's URI and what failed (an
    audit event that could not be stored, an authorizer's evaluation error), HTML-escaped."""
    text = f"Internal Server Error: {gofmt.quote(request.raw_path)}: {message}"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return web.Response(status=500, text=text + "\n", charset="utf-8", headers={"X-Content-Type-Options": "nosniff"})


def _message(status: int, text: str | None) -> str:
    """The first line of aiohttp's text (its later lines quote the raw request)."""
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return first[:256] or HTTPStatus(status).phrase


class _StatusRequestHandler(inline.InlineRequests, headlimit.HeadLimit, serving.HeaderDeadline):
    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            super().handle_error(request, status, exc, message)  # logs it; refuses once a response has started
        else:  # a request the parser refused is the client's doing: Go's net/http answers it and logs nothing,
            # where aiohttp logs an ERROR with a traceback (any client could fill the log with them)
            log.debug("bad request from %s: %s", request.remote, exc)
            if request.writer.output_size > 0:
                raise ConnectionError("a response was sent already")
        text = message if status != 500 else "an error on the server prevented the request from succeeding"
        error = errors.method_not_allowed() if _unknown_method(exc) else status_error(status, _message(status, text))
        resp = error_response(error)
        resp.force_close()
        return resp


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _unknown_method(exc: BaseException | None) -> bool:
    """Whether the parser refused a method that is a token all the same (`get`, `FOO`): llhttp knows
    only its own list, in capitals, where Go's server takes any token and its router, matching methods
    case-sensitively, finds no route for it (go-restful's 405). The parser's message quotes the request
    line as a bytes literal on its third line; a method that is no token stays the parser's 400."""
    if not isinstance(exc, BadHttpMethod):
        return False
    try:
        line = ast.literal_eval(exc.message.splitlines()[2].strip())
    except (IndexError, SyntaxError, ValueError):
        return False
    return isinstance(line, bytes) and bool(_TOKEN.fullmatch(line.split(b" ", 1)[0].decode("latin-1")))


class _StatusServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _StatusRequestHandler(self, loop=self._loop, **self._kwargs)


class StatusAppRunner(web.AppRunner):
    """An AppRunner whose connections answer parser errors with a Status. `handler`, when given,
    is what the connections call with each request instead of the application's `_handle`
    (the API server's, which hands the application only what its router has to route);
    `request_class`, the web.Request subclass its requests are made as."""

    def __init__(self, app: web.Application, handler=None, request_class: type[web.Request] = web.Request,
                 **kwargs) -> None:
        kwargs.setdefault("max_line_size", headlimit.MAX_HEADER_BYTES)
        kwargs.setdefault("max_field_size", headlimit.MAX_HEADER_BYTES)
        kwargs.setdefault("max_headers", headlimit.MAX_HEADERS)
        kwargs.setdefault("auto_decompress", False)  # (as Go's net/http: the handler decompresses what it reads)
        kwargs.setdefault("keepalive_timeout", serving.IDLE_TIMEOUT)
        super().__init__(app, **kwargs)
        self._handler = handler
        self._request_class = request_class

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        factory, cls = server.request_factory, self._request_class
        return _StatusServer(self._handler or server.request_handler,
                             request_factory=lambda message, *args: factory(_utf8_headers(message), *args, _cls=cls),
                             handler_cancellation=server.handler_cancellation,
                             loop=asyncio.get_running_loop(), **server._kwargs)


_INVALID_BYTE = re.compile("[\udc80-\udcff]")


def _utf8_headers(message):
    """The request with each header byte that is not UTF-8 (aiohttp keeps it as a lone surrogate, which
    no encoder writes) as U+FFFD, as Go's encoders write such a byte of a header-borne string (a user,
    an audit ID, a field manager from the User-Agent) wherever it ends up: a 500 before."""
    headers = message.headers
    if "".join(headers.values()).isascii():
        return message
    return message._replace(headers=CIMultiDictProxy(CIMultiDict(
        (k, _INVALID_BYTE.sub("\ufffd", v)) for k, v in headers.items())))


@web.middleware
async def http_exceptions(request: web.Request, handler) -> web.StreamResponse:
    """The router's and the body reader's HTTP exceptions as a Status."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        return status_response(e)


def status_response(e: web.HTTPException) -> web.Response:
    """An HTTP exception of status 400 or more as a Status (re-raised below 400)."""
    if e.status < 400:
        raise e
    message = "the server could not find the requested resource" if e.status == 404 else \
        "the server does not allow this method on the requested resource" if e.status == 405 else \
        _message(e.status, e.text)
    resp = error_response(status_error(e.status, message))
    for h in ("Allow", "Retry-After"):
        if h in e.headers:
            resp.headers[h] = e.headers[h]
    return resp
