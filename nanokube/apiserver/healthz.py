"""Health endpoints and their SLIs, as k8s.io/apiserver's healthz and component-base's slis:
the API server and the standalone components (component_server.py) install the same ones."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDict
from prometheus_client import CollectorRegistry, Counter, Gauge

from ..machinery import healthz
from ..metrics.exposition import content_type, render

log = logging.getLogger("nanokube.healthz")

TEXT = {"X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class Check:
    """A named health check: `run()` gives the reason it fails, or None."""

    name: str
    run: Callable[[], str | None]


PING = Check("ping", lambda: None)


Checks = Callable[[], list[Check]]


def exposition(request: web.Request, *collectors) -> web.Response:
    """`collectors` in the text format, with the escaping scheme `request` asks for (exposition.content_type),
    gzipped on the loop (a component's few series) where the client prefers it (`scraped`)."""
    body, gzip = render(*collectors), gzip_preferred(request)
    return scraped(request, gzipped(body) if gzip else body, gzip)


async def exposition_of(request: web.Request, body: bytes) -> web.Response:
    """`exposition` of a rendered `body` (the API server's, of many series), gzipped in a worker thread:
    zlib lets go of the GIL, and a megabyte would hold the loop some 10 ms."""
    gzip = gzip_preferred(request)
    return scraped(request, await asyncio.to_thread(gzipped, body) if gzip else body, gzip)


def gzip_preferred(request: web.Request) -> bool:
    """Whether promhttp's handler answers `request` gzipped: of its offers, identity and gzip in that
    order, the one an Accept-Encoding coding (or `*`) gives the highest quality, the first on a tie
    (gddo's NegotiateContentEncoding), and gzip only at a quality above 0 (a 0 falls back to identity).
    Whatever the answer's size: promhttp has no threshold."""
    specs = []
    for coding in request.headers.getall("Accept-Encoding", ()):
        for clause in coding.split(","):  # (ParseAccept stops at what it cannot read)
            value, *params = (p.strip() for p in clause.split(";"))
            if not value:
                break
            q = 1.0
            if params:
                key, _, number = params[0].partition("=")
                try:
                    q = float(number) if key == "q" and 0 <= float(number) <= 1 else -1
                except ValueError:
                    q = -1
                if q < 0:
                    break
            specs.append((value, q))
    best, best_q = "identity", -1.0
    for offer in ("identity", "gzip"):
        for value, q in specs:
            if q > best_q and value in ("*", offer):
                best, best_q = offer, q
    return best == "gzip" and best_q > 0


def gzipped(body: bytes) -> bytes:
    """`body` gzipped at gzip's default level, as promhttp's pooled gzip.Writer writes it."""
    z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return z.compress(body) + z.flush()


def scraped(request: web.Request, body: bytes, gzip: bool) -> web.Response:
    """A metrics answer as promhttp writes one: `Vary: Accept` and `Vary: Accept-Encoding` whatever
    was negotiated, `Content-Encoding: gzip` where `body` is gzipped."""
    headers = CIMultiDict({"Content-Type": content_type(request.headers.get("Accept"))})
    headers.add("Vary", "Accept")
    headers.add("Vary", "Accept-Encoding")
    if gzip:
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


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
        status, text = healthz.root_answer(kind, [(c.name, c.run) for c in current()],
                                           set(request.query.getall("exclude", [])), "verbose" in request.query, ran)
        return web.Response(status=status, text=text, headers=TEXT)

    async def one(request: web.Request) -> web.Response:
        check = next((c for c in current() if c.name == request.match_info["name"]), None)
        if check is None:
            raise web.HTTPNotFound()
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
