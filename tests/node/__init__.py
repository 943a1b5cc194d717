"""Shared helpers for the node-agent tests: a clock the test advances by hand, an API server
whose requests carry it, and node agents talking to one over HTTP with its request counts."""

from __future__ import annotations

import contextlib
import re
import socket

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.client.http import HTTPClient
from nanokube.client.kubeconfig import Credentials
from nanokube.clock import VirtualClock
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.store.memory import MemoryStore
from tests.controllers import make_stack


class ManualClock(VirtualClock):
    """The simulator's virtual clock, advanced by the test; `t` is its wall-clock reading,
    which a test may also set on its own (a wall-clock jump, with monotonic time unmoved)."""

    @property
    def t(self) -> float:
        return self.now()

    @t.setter
    def t(self, value: float) -> None:
        self._now = value


@contextlib.asynccontextmanager
async def api_on_manual_clock():
    """An in-process API server (with the kube-node-lease namespace node agents renew their Leases in)
    on a ManualClock: yields the stack and the clock."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    s.rest.clock = clock = ManualClock()
    try:
        yield s, clock
    finally:
        await s.close()


@contextlib.asynccontextmanager
async def nodes_over_http(pods_dir: str):
    """The default cluster's node agents talking to an API server over HTTP (so its metrics count
    what they ask), all on one ManualClock: yields the client, the NodeManager, the clock and the server."""
    clock = ManualClock()
    server = APIServer(MemoryStore(), None, port=0, clock=clock)
    await server.start()
    client = HTTPClient(Credentials(f"http://127.0.0.1:{server.port}", None), "test", clock=clock)
    await client.start()
    nodes = NodeManager(lambda _user, field_manager: client.named(field_manager), default_cluster(), clock,
                        pods_dir=pods_dir)
    await nodes.start()
    try:
        yield client, nodes, clock, server
    finally:
        await nodes.stop()
        await client.close()
        await server.stop()


async def metric_totals(server, *queries: tuple[str, str]) -> list[float]:
    """For each (series, label pattern) of `queries`, the sum of the server's /metrics samples of that
    series whose labels match the pattern (a regular expression over the text between the braces)."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{server.port}/metrics") as r:
        text = await r.text()
    return [sum(float(m.group(1)) for m in re.finditer(rf"^{series}{{{labels}}} (\S+)$", text, re.M))
            for series, labels in queries]


def listening() -> tuple[socket.socket, socket.socket]:
    """A UDP and a listening TCP socket on loopback's free ports, for a DNS server under test."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    return udp, tcp
