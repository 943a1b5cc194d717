"""Health endpoints and their SLIs, as k8s.io/apiserver's healthz and component-base's slis:
the API server and the standalone components (component_server.py) install the same ones."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDict
from prometheus_client import CollectorRegistry, Counter, Gauge

from ..machinery import healthz
from ..metrics.exposition import gzip_preferred, gzipped, render, scrape_headers

log = logging.getLogger("nanokube.healthz")

TEXT = {"X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class Check:
    """A named health check: `run()` gives the reason it fails, or None; `refresh()`, where given, is
    awaited first, so a check that asks another process (a KMS plugin) does so off the event loop
    and `run()` answers from what it learnt."""

    name: str
    run: Callable[[], str | None]
    refresh: Callable[[], Awaitable[None]] | None = None


async def _refreshed(checks: list[Check]) -> None:
    if waits := [c.refresh() for c in checks if c.refresh is not None]:
        await asyncio.gather(*waits)


PING = Check("ping", lambda: None)


Checks = Callable[[], list[Check]]


def exposition(request: web.Request, *collectors) -> web.Response:
    """`collectors` in the text format, with the escaping scheme `request` asks for (exposition.content_type),
    gzipped on the loop (a component's few series) where the client prefers it (`scraped`)."""
    body, gzip = render(*collectors), _prefers_gzip(request)
    return scraped(request, gzipped(body) if gzip else body, gzip)


async def exposition_of(request: web.Request, body: bytes) -> web.Response:
    """`exposition` of a rendered `body` (the API server's, of many series), gzipped in a worker thread:
    zlib lets go of the GIL, and a megabyte would hold the loop some 10 ms."""
    gzip = _prefers_gzip(request)
    return scraped(request, await asyncio.to_thread(gzipped, body) if gzip else body, gzip)


def _prefers_gzip(request: web.Request) -> bool:
    """Whether promhttp's handler answers `request` gzipped (exposition.gzip_preferred)."""
    return gzip_preferred(request.headers.getall("Accept-Encoding", ()))


def scraped(request: web.Request, body: bytes, gzip: bool) -> web.Response:
    """A metrics answer as promhttp writes one (exposition.scrape_headers), `body` gzipped where `gzip`."""
    return web.Response(body=body, headers=CIMultiDict(scrape_headers(request.headers.get("Accept"), gzip)))


class HealthSLIs:
    """component-base's slis: each health check the root endpoints ran, its last result
    (kubernetes_healthcheck, 1 or 0) and a count by status; served at /metrics/slis."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.last = Gauge("kubernetes_healthcheck", "[STABLE] This metric records the result of a single healthcheck.",
                          ["name", "type"], registry=self.registry)
        self.total = Counter("kubernetes_healthchecks", "[STABLE] This metric records the results of all healthcheck.",
                             ["name", "type", "status"], registry=self.registry)

    def observe(self, name: str, kind: str, ok: bool) -> None:
        self.last.labels(name, kind).set(1 if ok else 0)
        self.total.labels(name, kind, "success" if ok else "error").inc()

    def reset(self) -> None:
        self.last.clear()
        self.total.clear()

    def install(self, app: web.Application) -> None:
        """/metrics/slis, SLIMetricsWithReset: DELETE clears the health check series."""
        async def handler(request: web.Request) -> web.Response:
            if request.method == "DELETE":
                self.reset()
                return web.Response(text="metrics reset\n", headers=TEXT)
            return exposition(request, self.registry)

        app.router.add_route("*", "/metrics/slis", handler)


def install(app: web.Application, path: str, checks: Checks, slis: HealthSLIs, each: bool = True,
            monitor: Callable[[str, web.Response, float], None] | None = None) -> None:
    """healthz.InstallPathHandler over the checks `checks()` names now (ping when none): the
    root answers 'ok' or lists failures (?verbose lists all, ?exclude=NAME skips one), and
    records each check it ran in `slis`; with `each`, `path/NAME` runs one check. `monitor(path,
    response, seconds)` hears of each answer of the root: the API server's request metrics, as
    upstream's InstrumentHandlerFunc wraps it."""
    kind = path.strip("/")

    def current() -> list[Check]:
        return checks() or [PING]

    def ran(name: str, reason: str | None) -> None:
        slis.observe(name, kind, reason is None)
        if reason is not None:
            log.info("%s check %s failed: %s", kind, name, reason)

    async def root(request: web.Request) -> web.Response:
        await _refreshed(running := current())
        status, text = healthz.root_answer(kind, [(c.name, c.run) for c in running],
                                           set(request.query.getall("exclude", [])), "verbose" in request.query, ran)
        return web.Response(status=status, text=text, headers=TEXT)

    async def one(request: web.Request) -> web.Response:
        check = next((c for c in current() if c.name == request.match_info["name"]), None)
        if check is None:
            raise web.HTTPNotFound()
        await _refreshed([check])
        status, text = healthz.check_answer(check.run())
        return web.Response(status=status, text=text, headers=TEXT)

    async def monitored(request: web.Request) -> web.Response:
        started = time.perf_counter()
        resp = await root(request)
        monitor(path, resp, time.perf_counter() - started)
        return resp

    app.router.add_get(path, root if monitor is None else monitored)
    if each:
        app.router.add_get(path + "/{name}", one)
