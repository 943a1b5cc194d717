import socket
import zlib

import aiohttp
import orjson
from prometheus_client import CollectorRegistry

from nanokube.clock import Clock
from nanokube.proxy.health import ZERO_TIME, ProxyHealth, go_time
from nanokube.proxy.server import Servers, health_app, metrics_app, split_address


class StepClock(Clock):
    def __init__(self, t: float = 1_800_000_000.0):
        self.t = t

    def now(self) -> float:
        return self.t


def test_go_time_prints_utc_as_go_does():
    assert go_time(0.5) == "1970-01-01 00:00:00.500000 +0000 UTC"
    assert go_time(None) == ZERO_TIME


def test_healthy_answers_report_now_as_last_updated():
    h = ProxyHealth(60, StepClock())
    code, body = h.healthz()
    doc = orjson.loads(body)
    assert code == 200 and doc["lastUpdated"] == doc["currentTime"] and doc["nodeEligible"] is True


def test_a_change_waiting_past_the_timeout_makes_the_proxy_unhealthy():
    clock = StepClock()
    h = ProxyHealth(60, clock)
    h.updated()
    synced = go_time(clock.t)
    clock.t += 10
    h.queued()
    clock.t += 59
    assert h.healthz()[0] == 200, "a pending change within the timeout is fine"
    h.queued()  # a later change does not restart the wait
    clock.t += 1
    code, body = h.healthz()
    assert code == 503 and orjson.loads(body)["lastUpdated"] == synced
    assert h.livez()[0] == 503
    h.updated()
    assert h.healthz()[0] == 200 and h.livez()[0] == 200


def test_a_node_being_deleted_fails_healthz_but_not_livez():
    h = ProxyHealth(60, StepClock())
    h.sync_node({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler",
                                                                  "effect": "NoSchedule"}]}})
    code, body = h.healthz()
    assert code == 503 and orjson.loads(body)["nodeEligible"] is False
    assert h.livez()[0] == 200
    h.sync_node({"metadata": {"name": "n"}, "spec": {}})
    assert h.healthz()[0] == 200
    h.sync_node({"metadata": {"name": "n", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert h.healthz()[0] == 503


def test_split_address():
    assert split_address("0.0.0.0:10256") == ("0.0.0.0", 10256)
    assert split_address("[::1]:10249") == ("::1", 10249)
    assert split_address(":10249") == ("0.0.0.0", 10249)


def _listening() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock, sock.getsockname()[1]


async def test_servers_answer_healthz_livez_metrics_and_proxy_mode():
    clock, registry = StepClock(), CollectorRegistry()
    h = ProxyHealth(60, clock, registry)
    servers = Servers()
    hsock, hport = _listening()
    msock, mport = _listening()
    await servers.serve(health_app(h), hsock)
    await servers.serve(metrics_app(registry, "nftables"), msock)
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{hport}/healthz") as r:
                assert r.status == 200 and r.headers["Content-Type"] == "application/json"
                assert set(orjson.loads(await r.read())) == {"lastUpdated", "currentTime", "nodeEligible"}
            h.queued()
            clock.t += 120
            async with s.get(f"http://127.0.0.1:{hport}/livez") as r:
                assert r.status == 503 and orjson.loads(await r.read())["lastUpdated"] == ZERO_TIME
            async with s.get(f"http://127.0.0.1:{mport}/metrics") as r:
                text = await r.text()
                assert 'kubeproxy_proxy_healthz_total{code="200"} 1\n' in text  # upstream's names
                assert 'kubeproxy_proxy_livez_total{code="503"} 1\n' in text
                assert "_created" not in text and r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
                assert "\nprocess_cpu_seconds_total " in text  # legacyregistry's process collector
                assert '\nkubernetes_build_info{build_date="' in text  # and kube-proxy's main's build info
            async with s.get(f"http://127.0.0.1:{mport}/proxyMode") as r:
                assert await r.text() == "nftables"
    finally:
        await servers.stop()


async def test_metrics_are_gzipped_for_a_scrape_that_prefers_gzip():
    """kube-proxy serves /metrics through promhttp's handler, as every component: gzipped where
    Accept-Encoding prefers gzip (Prometheus's Go transport asks for it), identity otherwise, and
    `Vary` on both negotiated headers either way."""
    registry = CollectorRegistry()
    ProxyHealth(60, StepClock(), registry).healthz()
    servers = Servers()
    msock, mport = _listening()
    await servers.serve(metrics_app(registry, "nftables"), msock)
    try:
        async with aiohttp.ClientSession() as s:
            for encoding, gzip in (("gzip", True), ("gzip;q=0", False), ("", False)):
                async with s.get(f"http://127.0.0.1:{mport}/metrics", headers={"Accept-Encoding": encoding},
                                 auto_decompress=False) as r:
                    raw = await r.read()
                    assert r.headers.getall("Vary") == ["Accept", "Accept-Encoding"]
                    assert r.headers.get("Content-Encoding") == ("gzip" if gzip else None), encoding
                    text = (zlib.decompress(raw, 16 + zlib.MAX_WBITS) if gzip else raw).decode()
                    assert 'kubeproxy_proxy_healthz_total{code="200"} 1\n' in text
    finally:
        await servers.stop()
