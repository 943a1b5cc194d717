"""The HTTP side of one kube-proxy, on upstream's two ports: the healthz
server (`/healthz`, `/livez`; default 0.0.0.0:10256) and the metrics server
(`/metrics`, `/proxyMode`; default 127.0.0.1:10249). An address is
"HOST:PORT" or a socket already bound (one opened in a node's network
namespace); an empty address leaves that server off, as upstream does."""

from __future__ import annotations

import socket

from aiohttp import web
from multidict import CIMultiDict
from ..machinery import featuregates
from ..machinery.goserver import bounded_runner
from ..metrics.build_info import BUILD_INFO
from ..metrics.process import PROCESS
from ..metrics.exposition import gzip_preferred, gzipped, render, scrape_headers
from .health import ProxyHealth


def split_address(address: str) -> tuple[str, int]:
    """"HOST:PORT" (IPv6 hosts in brackets) -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"invalid address {address!r}: want HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def health_app(health: ProxyHealth) -> web.Application:
    def answer(code_body: tuple[int, bytes]) -> web.Response:
        code, body = code_body
        return web.Response(status=code, body=body, content_type="application/json",
                            headers={"X-Content-Type-Options": "nosniff"})

    async def healthz(request: web.Request) -> web.Response:
        return answer(health.healthz())

    async def livez(request: web.Request) -> web.Response:
        return answer(health.livez())

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", livez)
    return app


def metrics_app(registry, mode: str) -> web.Application:
    """`registry`: anything with `collect()` (a CollectorRegistry or a collector)."""

    async def metrics(request: web.Request) -> web.Response:
        """promhttp's: the text format, gzipped where the scrape prefers it (its few series, on the loop)."""
        body, gzip = render(registry, featuregates.GATES, PROCESS, BUILD_INFO), gzip_preferred(request.headers.getall("Accept-Encoding", ()))
        return web.Response(body=gzipped(body) if gzip else body,
                            headers=CIMultiDict(scrape_headers(request.headers.get("Accept"), gzip)))

    async def proxy_mode(request: web.Request) -> web.Response:
        return web.Response(text=mode)

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/proxyMode", proxy_mode)
    app.router.add_get("/healthz", ok)
    return app


class Servers:
    """The running sites; `stop()` closes them all."""

    def __init__(self) -> None:
        self._runners: list[web.AppRunner] = []

    async def serve(self, app: web.Application, where: str | socket.socket) -> None:
        if not where:
            return
        runner = bounded_runner(app)
        await runner.setup()
        self._runners.append(runner)
        if isinstance(where, socket.socket):
            site = web.SockSite(runner, where)
        else:
            host, port = split_address(where)
            site = web.TCPSite(runner, host, port)
        await site.start()

    async def stop(self) -> None:
        for r in self._runners:
            await r.cleanup()
        self._runners.clear()
