"""Upstream's ServiceHealthServer (pkg/proxy/healthcheck/service_health.go): a cloud load balancer
in front of a LoadBalancer Service with `externalTrafficPolicy: Local` sends traffic only to the
nodes with endpoints of it, and learns which from an HTTP server each node's kube-proxy runs on
the Service's `spec.healthCheckNodePort`. Any method and path answers 200 while the node has
ready endpoints of the Service and the proxier is healthy, 503 otherwise, with upstream's body
and headers (`X-Load-Balancing-Endpoint-Weight`: the number of local endpoints)."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Awaitable, Callable

from aiohttp import web

from ..machinery.goserver import bounded_runner
from .health import ProxyHealth

log = logging.getLogger(__name__)

#: upstream's body: a dedented Go template, tabs included
_BODY = '{\n\t"service": {\n\t\t"namespace": %s,\n\t\t"name": %s\n\t},\n\t"localEndpoints": %d,\n\t"serviceProxyHealthy": %s\n}'


class ServiceHealthServer:
    """One HTTP server per Service ("namespace/name") on its port, from `listen(port)`: a bound socket.
    `failed(key, message)` is told of a port that could not be bound (upstream's Warning Event)."""

    def __init__(self, health: ProxyHealth, listen: Callable[[int], socket.socket], node: str = "",
                 failed: Callable[[str, str], Awaitable[None]] | None = None) -> None:
        self.health, self.listen, self.node, self.failed = health, listen, node, failed
        self._servers: dict[str, tuple[int, web.AppRunner]] = {}
        self._endpoints: dict[str, int] = {}

    def ports(self) -> dict[str, int]:
        """The Services served, with their ports."""
        return {key: port for key, (port, _) in self._servers.items()}

    async def sync_services(self, ports: dict[str, int]) -> None:
        """Serve exactly `ports`: servers no longer wanted (or on another port) close, new ones open.
        A port that cannot be bound is logged and tried again at the next sync, as upstream does."""
        for key, (port, runner) in list(self._servers.items()):
            if ports.get(key) != port:
                del self._servers[key]
                await runner.cleanup()
        for key, port in ports.items():
            if key not in self._servers:
                try:
                    self._servers[key] = (port, await self._serve(key, self.listen(port)))
                except OSError as e:
                    message = f"node {self.node} failed to start healthcheck {json.dumps(key)} on port {port}: {e}"
                    log.error("%s", message)
                    if self.failed is not None:
                        await self.failed(key, message)

    def sync_endpoints(self, counts: dict[str, int]) -> None:
        """The number of ready endpoints on this node of each Service; one left out has none."""
        self._endpoints = counts

    def answer(self, key: str) -> tuple[int, bytes, dict[str, str]]:
        count, healthy = self._endpoints.get(key, 0), self.health.healthy()
        namespace, _, name = key.partition("/")
        body = _BODY % (json.dumps(namespace), json.dumps(name), count, "true" if healthy else "false")
        headers = {"Content-Type": "application/json", "X-Content-Type-Options": "nosniff",
                   "X-Load-Balancing-Endpoint-Weight": str(count)}
        return (200 if count and healthy else 503), body.encode(), headers

    async def _serve(self, key: str, sock: socket.socket) -> web.AppRunner:
        async def handle(request: web.Request) -> web.Response:
            code, body, headers = self.answer(key)
            return web.Response(status=code, body=body, headers=headers)

        app = web.Application()
        app.router.add_route("*", "/{path:.*}", handle)
        runner = bounded_runner(app)
        try:
            await runner.setup()
            await web.SockSite(runner, sock).start()
        except BaseException:
            await runner.cleanup()
            sock.close()
            raise
        return runner

    async def close(self) -> None:
        await self.sync_services({})
