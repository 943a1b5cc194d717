"""kube-proxy's per-Service health checks (proxy/service_health.py): upstream's answer on each
LoadBalancer Service's healthCheckNodePort, over real HTTP; then a node's kube-proxy in its network
namespace serving the port the API server allocated, 200 with a ready local endpoint, 503 without."""

from __future__ import annotations

import asyncio
import copy
import socket

import aiohttp
import pytest

from nanokube.apiserver.loopback import connector
from nanokube.clock import Clock
from nanokube.proxy.health import ProxyHealth
from nanokube.proxy.modes import DEFAULT_CHANGING
from nanokube.node.runtime.netns import open_in_netns
from nanokube.proxy.runner import NodeProxies, health_check_listener, listen_in_netns
from nanokube.proxy.service_health import ServiceHealthServer
from tests.controllers import eventually, make_stack
from tests.proxy.test_proxier import http_get_in, lo_up

BODY = ('{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "lb"\n\t},\n'
        '\t"localEndpoints": %d,\n\t"serviceProxyHealthy": %s\n}')


class StepClock(Clock):
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def now(self) -> float:
        return self.t


class Loopback:
    """`listen(port)` on 127.0.0.1 at a free port instead; `at[port]` is where it went."""

    def __init__(self) -> None:
        self.at: dict[int, int] = {}
        self.refuse: set[int] = set()

    def __call__(self, port: int) -> socket.socket:
        if port in self.refuse:
            raise OSError(98, "Address already in use")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        self.at[port] = sock.getsockname()[1]
        return sock


async def _get(port: int, method: str = "GET", path: str = "/") -> tuple[int, str, dict]:
    async with aiohttp.ClientSession() as session, session.request(method, f"http://127.0.0.1:{port}{path}") as r:
        return r.status, await r.text(), dict(r.headers)


async def test_the_answer_is_upstreams_for_any_method_and_path():
    clock, listen = StepClock(), Loopback()
    health = ProxyHealth(60, clock)
    server = ServiceHealthServer(health, listen, "node-1")
    await server.sync_services({"default/lb": 31000})
    try:
        port = listen.at[31000]
        code, body, headers = await _get(port)
        assert (code, body) == (503, BODY % (0, "true"))
        assert (headers["Content-Type"], headers["X-Content-Type-Options"], headers["X-Load-Balancing-Endpoint-Weight"]) \
            == ("application/json", "nosniff", "0")
        server.sync_endpoints({"default/lb": 2})
        for method, path in [("GET", "/"), ("GET", "/anything/at/all"), ("POST", "/healthz")]:
            code, body, headers = await _get(port, method, path)
            assert (code, body, headers["X-Load-Balancing-Endpoint-Weight"]) == (200, BODY % (2, "true"), "2")
        health.queued()  # a change the proxier has not written for longer than its timeout
        clock.t += 61
        code, body, _ = await _get(port)
        assert (code, body) == (503, BODY % (2, "false"))
    finally:
        await server.close()
    with pytest.raises(aiohttp.ClientConnectionError):
        await _get(port)


async def test_servers_follow_the_services_and_a_port_that_cannot_be_bound_is_retried(caplog):
    listen, failures = Loopback(), []

    async def failed(key: str, message: str) -> None:
        failures.append((key, message))

    server = ServiceHealthServer(ProxyHealth(60, StepClock()), listen, "node-1", failed)
    listen.refuse.add(31001)
    try:
        await server.sync_services({"default/lb": 31000, "default/other": 31001})
        assert server.ports() == {"default/lb": 31000}
        message = 'node node-1 failed to start healthcheck "default/other" on port 31001: [Errno 98] Address already in use'
        assert failures == [("default/other", message)] and message in caplog.text
        first = listen.at[31000]
        listen.refuse.clear()
        await server.sync_services({"default/lb": 31002, "default/other": 31001})  # a new port, and the retry
        assert server.ports() == {"default/lb": 31002, "default/other": 31001}
        with pytest.raises(aiohttp.ClientConnectionError):
            await _get(first)
        assert (await _get(listen.at[31002]))[0] == 503
        await server.sync_services({"default/other": 31001})
        with pytest.raises(aiohttp.ClientConnectionError):
            await _get(listen.at[31002])
    finally:
        await server.close()
    assert server.ports() == {}


def _slice(node: str, ready: bool = True) -> dict:
    return {"metadata": {"name": "lb-abc", "namespace": "default", "labels": {"kubernetes.io/service-name": "lb"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.244.1.5"], "nodeName": node, "conditions": {"ready": ready}}]}


async def test_a_nodes_kube_proxy_serves_the_allocated_port_in_its_namespace(netns):
    lo_up(netns)
    s = await make_stack()
    svcs, slices = s.client.resource("", "v1", "services"), s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    lb = await svcs.create({"metadata": {"name": "lb", "namespace": "default"},
                            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": {"app": "lb"},
                                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    hc = lb["spec"]["healthCheckNodePort"]
    await slices.create(_slice("node-1"))
    taken = listen_in_netns(netns, f"0.0.0.0:{hc}")  # something else on the node holds the port at first
    taken.listen()
    proxies = NodeProxies(connector(s.rest), [("node-1", "", netns)], [DEFAULT_CHANGING], min_sync_period=0.01)
    await proxies.start()

    async def answer() -> tuple[int, str]:
        try:
            text = await asyncio.to_thread(http_get_in, netns, f"127.0.0.1:{hc}", "/")
        except OSError:
            return 0, ""
        return int(text.split(" ", 2)[1]), text.partition("\r\n\r\n")[2]

    async def becomes(code: int, body: str = ""):
        return await eventually(lambda: _is(answer(), code, body))

    async def warned():
        events, _ = await s.client.resource("", "v1", "events").list("default")
        return [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"]) for e in events
                if e["reason"] == "FailedToStartServiceHealthcheck"]

    try:
        got = await eventually(warned)
        assert got[0] == ("Service", "lb", "Warning", f'node node-1 failed to start healthcheck "default/lb" on port '
                                                      f"{hc}: [Errno 98] Address already in use")
        taken.close()
        touched = copy.deepcopy(await slices.get("lb-abc", "default"))
        touched["metadata"]["annotations"] = {"touched": "1"}
        await slices.update(touched)  # the next sync tries again
        await becomes(200, BODY % (1, "true"))  # one ready endpoint on this node
        await slices.update({**await slices.get("lb-abc", "default"), **{"endpoints": _slice("node-1", False)["endpoints"]}})
        await becomes(503, BODY % (0, "true"))  # not ready
        await slices.update({**await slices.get("lb-abc", "default"), **{"endpoints": _slice("node-0")["endpoints"]}})
        await becomes(503, BODY % (0, "true"))  # on another node
        await slices.update({**await slices.get("lb-abc", "default"), **{"endpoints": _slice("node-1")["endpoints"]}})
        await becomes(200, BODY % (1, "true"))
        cluster = copy.deepcopy(await svcs.get("lb", "default"))
        cluster["spec"]["externalTrafficPolicy"] = "Cluster"
        await svcs.update(cluster)
        await becomes(0)  # no longer needed: the port is closed
    finally:
        await proxies.stop()
        await s.close()


async def _is(got, code: int, body: str) -> bool:
    c, b = await got
    return c == code and (not body or b == body)


def _get_in(netns: str, family: int, host: str, port: int) -> int:
    """The status of one GET over a socket of `family` opened in `netns`."""
    with open_in_netns(netns, family) as sock:
        sock.settimeout(5)
        sock.connect((host, port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return int(sock.recv(65536).split(b" ", 2)[1])


async def test_the_health_check_port_answers_on_both_families(netns):
    """Upstream listens on 0.0.0.0, which Go binds dual-stack: a load balancer probing a node's
    IPv6 address is answered too."""
    lo_up(netns)
    server = ServiceHealthServer(ProxyHealth(60, StepClock()), health_check_listener(netns), "node-1")
    await server.sync_services({"default/lb": 31000})
    try:
        server.sync_endpoints({"default/lb": 1})
        got = [await asyncio.to_thread(_get_in, netns, family, host, 31000)
               for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"))]
        assert got == [200, 200]
    finally:
        await server.close()
