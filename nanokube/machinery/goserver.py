"""aiohttp serving as Go's net/http server does where clients notice: a request's headers bounded in all
(headlimit), a refused upgrade's connection ended (keepalive), and the parser's refusals answered with
Go's plain 400 or 431. The API server has its own (apiserver/http_errors.py); the components' secure
ports, the kubelet's read-only and healthz ports and kube-proxy's servers serve through bounded_runner."""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from . import headlimit, keepalive

log = logging.getLogger(__name__)

class _Quiet(headlimit.HeadLimit):
    """A connection whose requests the parser refuses (a line past headlimit's MAX_HEADER_BYTES, headers
    past its READ_LIMIT, a URL or method that does not parse: the client's doing) are answered as Go's net/http answers them, `400 Bad
    Request` or `431 Request Header Fields Too Large` in plain text, and logged at V(4), where
    aiohttp logs an ERROR with a traceback (any client could fill the log with them)."""

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        log.debug("bad request from %s: %s", request.remote, exc)
        if request.writer.output_size > 0:
            raise ConnectionError("a response was sent already")
        if isinstance(exc, LineTooLong):
            status = 431
        resp = web.Response(status=status, text=f"{status} {HTTPStatus(status).phrase}", charset="utf-8")
        resp.force_close()
        return resp


class _QuietServer(web.Server):
    """A web.Server whose connections are _Quiet, made with `handler_args` (the RequestHandler's
    keyword arguments, which web.Server keeps only in a private attribute)."""

    def __init__(self, handler, *, handler_args: dict, **kwargs) -> None:
        super().__init__(handler, **kwargs, **handler_args)
        self.handler_args = handler_args

    def __call__(self) -> RequestHandler:
        return _Quiet(self, loop=asyncio.get_running_loop(), **self.handler_args)


class _Runner(web.AppRunner):
    """An AppRunner serving through a _QuietServer. aiohttp (pinned at 3.14.5) has no public way to
    choose the RequestHandler class: this overrides BaseRunner._make_server, the factory its own
    runners implement, and takes the app's handler, request factory and cancellation from the
    server it makes, all public attributes (its requests made as keepalive.Request); tests/test_component_server.py's
    test_the_aiohttp_hooks_the_quiet_handler_relies_on_are_there fails by name on an aiohttp that
    changes them."""

    def __init__(self, app: web.Application, **handler_args) -> None:
        super().__init__(app, **handler_args)
        self.handler_args = handler_args

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        factory = server.request_factory
        return _QuietServer(server.request_handler,
                            request_factory=lambda *args: factory(*args, _cls=keepalive.Request),
                            handler_cancellation=server.handler_cancellation, handler_args=self.handler_args)


def bounded_runner(app: web.Application) -> web.AppRunner:
    """A runner serving `app` through _Runner with Go's limits."""
    return _Runner(app, access_log=None, max_line_size=headlimit.MAX_HEADER_BYTES, max_field_size=headlimit.MAX_HEADER_BYTES,
                   max_headers=headlimit.MAX_HEADERS)
