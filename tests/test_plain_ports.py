"""small63: the plain HTTP ports (the kubelet's read-only and healthz ports, kube-proxy's healthz, metrics
and per-Service health servers) serve as the secure ones do (machinery/goserver.py): a request refused an
upgrade ends its connection, where aiohttp's parser left the next request on it unanswered for good, and
headers are bounded in all (1 MiB + 4 KiB, a 431), not in number (aiohttp refused more than 128)."""

import argparse
import asyncio
import contextlib
import socket

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from nanokube import cli_kubelet
from nanokube.clock import REAL
from nanokube.machinery.headlimit import READ_LIMIT
from nanokube.proxy.health import ProxyHealth
from nanokube.proxy.server import Servers, health_app, metrics_app
from nanokube.proxy.service_health import ServiceHealthServer

#: 64 lines of 17 KiB: each far below a line's limit, together past READ_LIMIT
WIDE = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"v" * (17 << 10)) for i in range(64))
#: 200 short lines: more than aiohttp's 128, far below READ_LIMIT
MANY = b"".join(b"X-Remote-Group-%d: g\r\n" % i for i in range(200))


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def _kubelet_port(which: str):
    class Kubelet:  # the endpoints behind the ports are not what is under test: their server is
        async def serve(self, request, path):
            return web.Response(text="ok")

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = argparse.Namespace(read_only_port=port if which == "read-only" else 0, bind_address="127.0.0.1",
                              healthz_port=port if which == "healthz" else 0, healthz_bind_address="127.0.0.1")
    runners = await cli_kubelet._plain_ports(args, Kubelet())
    try:
        yield port
    finally:
        for r in runners:
            await r.cleanup()


@contextlib.asynccontextmanager
async def _proxy_port(which: str):
    registry = CollectorRegistry()
    health = ProxyHealth(60, REAL, registry)
    sock = _listening()
    port = sock.getsockname()[1]
    if which == "service-health":
        server = ServiceHealthServer(health, lambda _: sock, "node-1")
        await server.sync_services({"default/lb": 31000})
        try:
            yield port
        finally:
            await server.close()
        return
    servers = Servers()
    await servers.serve(health_app(health) if which == "healthz" else metrics_app(registry, "nftables"), sock)
    try:
        yield port
    finally:
        await servers.stop()


PORTS = {"kubelet read-only": lambda: _kubelet_port("read-only"), "kubelet healthz": lambda: _kubelet_port("healthz"),
         "kube-proxy healthz": lambda: _proxy_port("healthz"), "kube-proxy metrics": lambda: _proxy_port("metrics"),
         "kube-proxy service health": lambda: _proxy_port("service-health")}


@pytest.mark.parametrize("ports", PORTS.values(), ids=PORTS.keys())
async def test_a_plain_port_refusing_an_upgrade_closes_its_connection(ports):
    async with ports() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"PATCH /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                         b"Content-Length: 1\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            writer.write(b"xGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # the body after the answer, then the next
            rest = await asyncio.wait_for(reader.read(), 10)  # a hang here: the connection was kept, unread
        finally:
            writer.close()
    assert head.startswith(b"HTTP/1.1 "), head
    assert b"\r\nConnection: close\r\n" in head, head
    assert b"HTTP/1.1" not in rest, "the request after the refusal was read as if the connection were kept"


@pytest.mark.parametrize("ports", PORTS.values(), ids=PORTS.keys())
async def test_a_plain_ports_headers_are_bounded_in_all_not_in_number(ports):
    answers = []
    async with ports() as port:
        for extra in (WIDE, MANY):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + b"\r\n")
                answers.append(await asyncio.wait_for(reader.read(), 10))
            except ConnectionResetError:  # the server closed with the rest of the head unread
                answers.append(b"reset")
            finally:
                writer.close()
    wide, many = answers
    assert len(WIDE) > READ_LIMIT
    assert wide.startswith(b"HTTP/1.0 431 ") and wide.endswith(b"\r\n\r\n431 Request Header Fields Too Large"), wide[:300]
    assert many.split(b" ", 2)[1] in (b"200", b"503"), many[:300]
