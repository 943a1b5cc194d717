"""/metrics of several API server workers (`nanokube up --api-workers N`) as one kube-apiserver's.

Each worker counts what it serves in its own memory (metrics.py: plain numbers, nothing shared
on the request path). A scrape is answered by worker 0 (another worker relays it there, as it
relays what node agents serve): it renders its own metrics, fetches each other worker's from
that worker's private port (as the front proxy, naming the scraping user, whom the worker
authorizes again) and merges them series by series: counters, histograms' buckets, counts and
sums and the gauges of what is in progress (in-flight requests, watchers) are added up, and a
gauge that describes the one store (SHARED) is the largest that any worker saw. With one worker none of this is installed.
"""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from ..metrics.exposition import go_float
from .aggregator.proxy import identity_headers
from .aggregator.requestheader import own_front_proxy_files
from .auth.authorizer import USER
from .healthz import exposition_of

#: gauges of the one store, which every worker reports alike, and of the processes that are one
#: server (its start, its limits): the largest, not the sum
SHARED = frozenset(("apiserver_storage_objects", "apiserver_resource_objects", "apiserver_watch_cache_resource_version",
                    "apiserver_storage_size_bytes",
                    "process_start_time_seconds", "process_max_fds", "process_virtual_memory_max_bytes",
                    "kubernetes_feature_enabled", "kubernetes_build_info"))


def merge(bodies: list[bytes]) -> bytes:
    """Several workers' expositions (exposition.py's text format) as one, the families by name and
    their series in the order first seen; one body comes back as it was."""
    families: dict[str, tuple[list[str], dict[str, float]]] = {}
    for body in bodies:
        name, fresh = "", True
        header, series = families.setdefault(name, ([], {}))
        for line in body.decode().splitlines():
            if line.startswith("# HELP "):
                name = line.split(" ", 3)[2]
                header, series = families.setdefault(name, ([], {}))
                fresh = not header
            if line.startswith("#"):
                if fresh:
                    header.append(line)
                continue
            key, _, text = line.rpartition(" ")
            value, had = float(text), series.get(key)
            if had is None:
                series[key] = value
            elif name in SHARED:
                series[key] = max(had, value)
            else:
                series[key] = had + value
    lines = []
    for _, (header, series) in sorted(families.items()):  # by name, as client_golang's Gather
        lines += header
        lines += [f"{key} {go_float(value)}" for key, value in series.items()]
    return ("\n".join(lines) + "\n").encode() if lines else b""


class WorkerMetrics:
    """Serves /metrics in a worker (installed before `server.start()` adds the route)."""

    def __init__(self, server, pki, relay=None) -> None:
        self.server, self.relay = server, relay
        self.own = server._metrics
        #: worker -> its private port (worker 0's Workers fills it as each one starts)
        self.ports: dict[int, int] = {}
        self.ctx = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
        self.ctx.load_cert_chain(*own_front_proxy_files(pki.dir))
        server._metrics = self.serve

    async def serve(self, request: web.Request) -> web.StreamResponse:
        if self.server.worker != 0:
            if request.transport.get_extra_info("sockname")[1] == self.server.relay_port:
                return await self.own(request)  # worker 0 asks for this worker's own
            return await self.relay.relay(request)
        own = self.server.metrics_text()
        # a header per group; the others' answers not gzipped only to be undone here
        headers = CIMultiDict(identity_headers(request[USER]), **{"Accept-Encoding": "identity"})
        async with aiohttp.ClientSession() as session:
            others = await asyncio.gather(*(self._fetch(session, port, headers) for port in list(self.ports.values())))
        return await exposition_of(request, merge([own, *(b for b in others if b is not None)]))

    async def _fetch(self, session: aiohttp.ClientSession, port: int, headers: CIMultiDict) -> bytes | None:
        """A worker's own metrics; None from one that is not there (being started again)."""
        try:
            async with session.get(f"https://127.0.0.1:{port}/metrics", ssl=self.ctx, headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=10)) as r:
                return await r.read() if r.status == 200 else None
        except (aiohttp.ClientError, OSError, TimeoutError):
            return None
