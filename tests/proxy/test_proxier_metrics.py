"""kube-proxy's change and policy metrics (pkg/proxy/metrics), scraped from its /metrics server:
the Service and EndpointSlice changes it has seen and those pending until the next sync
(kubeproxy_sync_proxy_rules_{service,endpoint}_changes_{total,pending}), the services of a Local
traffic policy with no local endpoint (kubeproxy_sync_proxy_rules_no_local_endpoints_total), and
the network programming latency of a change stamped with its trigger time."""

import asyncio
import re
import socket
import subprocess
import threading
from datetime import datetime, timezone

import aiohttp

from nanokube.clock import Clock
from nanokube.proxy.nftables.nft import Nft
from nanokube.proxy.proxier import Proxier
from nanokube.proxy.server import Servers, metrics_app
from tests.controllers import eventually, make_stack

T0 = 1_800_000_000.0


class GatedNft(Nft):
    """Transactions succeed; while the gate is shut one waits in `apply`, as a slow nft would."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def apply(self, transaction: str) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            self.gate.wait()


class SetClock(Clock):
    """Wall time the test sets; the proxier's batching sleeps only yield."""

    def __init__(self) -> None:
        self.t = T0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        await (asyncio.sleep(0) if seconds < 60 else asyncio.Event().wait())


async def _metrics_server(p: Proxier) -> tuple[Servers, str]:
    """The proxier's /metrics served on a free local port, and its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    servers = Servers()
    await servers.serve(metrics_app(p.registry, "nftables"), sock)
    return servers, f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


def _scraper(http: aiohttp.ClientSession, url: str):
    async def scrape() -> str:
        async with http.get(url) as r:
            return await r.text()
    return scrape


def _series(text: str, name: str, **labels) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    m = re.search(rf"^{re.escape(name)}{re.escape('{' + want + '}') if want else ''} (\S+)$", text, re.MULTILINE)
    return float(m[1]) if m else None


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _slice(name: str, service: str, node: str, trigger: float | None = None) -> dict:
    md = {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": service}}
    if trigger is not None:
        md["annotations"] = {"endpoints.kubernetes.io/last-change-trigger-time": _stamp(trigger)}
    return {"metadata": md, "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.244.0.2"], "conditions": {"ready": True}, "nodeName": node}]}


async def test_change_policy_and_programming_metrics_at_kube_proxys_metrics_server():
    s = await make_stack()
    services = s.client.resource("", "v1", "services")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    await services.create({"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "internalTrafficPolicy": "Local", "ports": [{"name": "http", "port": 80}]}})
    await services.create({"metadata": {"name": "np", "namespace": "default"}, "spec": {
        "type": "NodePort", "externalTrafficPolicy": "Local", "ports": [{"name": "http", "port": 80}]}})
    await slices.create(_slice("web-a", "web", "node-0"))  # on another node: web has no local endpoint
    nft, clock = GatedNft(), SetClock()
    p = Proxier(s.client, "node-1", "", nft=nft, clock=clock, min_sync_period=0, sync_period=1000)
    servers, url = await _metrics_server(p)
    await p.start()
    try:
        async with aiohttp.ClientSession() as http:
            scrape = _scraper(http, url)

            assert await eventually(lambda: _async(p.syncs >= 1))
            text = await scrape()
            # two Services listed, each handed to both families' trackers; one slice of a served family
            assert _series(text, "kubeproxy_sync_proxy_rules_service_changes_total") == 4
            assert _series(text, "kubeproxy_sync_proxy_rules_endpoint_changes_total") == 1
            assert _series(text, "kubeproxy_sync_proxy_rules_service_changes_pending") == 0
            assert _series(text, "kubeproxy_sync_proxy_rules_endpoint_changes_pending") == 0
            no_local = "kubeproxy_sync_proxy_rules_no_local_endpoints_total"
            assert [_series(text, no_local, ip_family=f, traffic_policy=p_) for f in ("IPv4", "IPv6")
                    for p_ in ("internal", "external")] == [1, 1, 0, 0]
            assert "kubeproxy_network_programming_duration_seconds" not in text, "no change was stamped yet"

            # a sync waits on nft: what changes meanwhile is pending
            nft.gate.clear()
            await services.create({"metadata": {"name": "other", "namespace": "default"}, "spec": {
                "ports": [{"name": "http", "port": 80}]}})
            assert await asyncio.to_thread(nft.waiting.wait, 30)
            await services.patch("web", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
            clock.t = T0 + 12.5
            await slices.create(_slice("web-b", "web", "node-1", trigger=T0 + 10))
            await slices.create(_slice("np-a", "np", "node-1", trigger=T0 - 5))  # before the proxier started
            text = await eventually(lambda: _pending(scrape))
            assert _series(text, "kubeproxy_sync_proxy_rules_endpoint_changes_pending") == 2
            assert _series(text, "kubeproxy_sync_proxy_rules_service_changes_pending") == 1
            nft.gate.set()

            async def programmed():
                t = await scrape()
                return t if _series(t, "kubeproxy_network_programming_duration_seconds_count", ip_family="IPv4") else None
            text = await eventually(programmed)
            bucket = "kubeproxy_network_programming_duration_seconds_bucket"
            assert (_series(text, bucket, ip_family="IPv4", le="2"), _series(text, bucket, ip_family="IPv4", le="3"),
                    _series(text, "kubeproxy_network_programming_duration_seconds_count", ip_family="IPv4")) == (0, 1, 1)
            text = await eventually(lambda: _settled(scrape, p))
            assert [_series(text, no_local, ip_family="IPv4", traffic_policy=p_) for p_ in ("internal", "external")] \
                == [0, 0]
            assert _series(text, "kubeproxy_sync_proxy_rules_endpoint_changes_pending") == 0
    finally:
        nft.gate.set()
        await p.stop()
        await servers.stop()
        await s.close()


async def _async(value):
    return value


async def _pending(scrape):
    text = await scrape()
    return text if _series(text, "kubeproxy_sync_proxy_rules_endpoint_changes_pending") == 2 else None


async def _settled(scrape, p):
    text = await scrape()
    return text if _series(text, "kubeproxy_sync_proxy_rules_no_local_endpoints_total", ip_family="IPv4",
                           traffic_policy="internal") == 0 else None


def _nft(netns: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", netns, "nft", *args], input=input, capture_output=True, text=True,
                          check=False)


def _slice_of(service: str, addresses: list[str]) -> dict:
    return {"metadata": {"name": f"{service}-1", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses]}


class Later(Clock):
    """Real time, with monotonic time the test moves ahead (`skip`): a stale chain waits a second."""

    skipped = 0.0

    def monotonic(self) -> float:
        return super().monotonic() + self.skipped

    def skip(self) -> None:
        self.skipped += 2.0


async def test_a_stale_chain_that_cannot_be_deleted_counts_a_cleanup_failure_and_the_sync_goes_on(netns):
    """kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total: upstream's nftables proxier
    deletes the chains a sync left unused a second later, in a transaction of its own, counts its
    failure there and syncs all the same. A jump into the stale chain (here from a chain the test
    adds) makes the kernel refuse the delete; once it is gone, a sync a second after the failure
    deletes the chain."""
    s = await make_stack()
    services = s.client.resource("", "v1", "services")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    clock = Later()
    p = Proxier(s.client, "node-1", "", netns=netns, clock=clock, min_sync_period=0, sync_period=1000)
    servers, url = await _metrics_server(p)

    async def add(name: str) -> str:  # one change, one sync: no endpoints yet
        svc = await services.create({"metadata": {"name": name, "namespace": "default"},
                                     "spec": {"ports": [{"name": "http", "port": 80}]}})
        return svc["spec"]["clusterIP"]

    async def chain(name: str) -> str | None:
        r = await asyncio.to_thread(_nft, netns, "list", "chain", "ip", "kube-proxy", name)
        return r.stdout if r.returncode == 0 else None

    await p.start()
    try:
        async with aiohttp.ClientSession() as http:
            scrape = _scraper(http, url)

            await add("a")
            await slices.create(_slice_of("a", ["10.244.0.2", "10.244.0.3"]))
            assert await eventually(lambda: chain("lb-tcp-2"))
            await slices.delete("a-1", namespace="default")
            assert await eventually(lambda: _flushed(chain("lb-tcp-2")))  # flushed; deleted a second later
            held = _nft(netns, "-f", "-", input="add chain ip kube-proxy holder\n"
                                                "add rule ip kube-proxy holder jump lb-tcp-2\n")
            assert held.returncode == 0, held.stderr
            clock.skip()
            ip = await add("b")
            cleanup = "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total"
            text = await eventually(lambda: _counted(scrape, cleanup, 1))
            assert _series(text, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", ip_family="IPv4") in (None, 0)
            assert _series(text, cleanup, ip_family="IPv6") in (None, 0)
            rejected = _nft(netns, "list", "map", "ip", "kube-proxy", "no-endpoint-services").stdout
            assert ip in rejected and await chain("lb-tcp-2") is not None, "the sync went on; the chain stays"

            assert _nft(netns, "delete", "chain", "ip", "kube-proxy", "holder").returncode == 0
            clock.skip()
            await add("c")
            assert await eventually(lambda: _gone(chain("lb-tcp-2")))
            assert _series(await scrape(), cleanup, ip_family="IPv4") == 1
    finally:
        await p.stop()
        await servers.stop()
        await s.close()


async def _flushed(listing) -> bool:
    text = await listing
    return text is not None and "jump" not in text and "goto" not in text and "dnat" not in text


async def _gone(listing) -> bool:
    return await listing is None


async def _counted(scrape, name: str, value: float):
    text = await scrape()
    return text if _series(text, name, ip_family="IPv4") == value else None
