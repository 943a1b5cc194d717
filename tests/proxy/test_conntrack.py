"""Stale UDP conntrack entries on the real kernel: a client keeping one UDP socket to a
Service is moved off an endpoint the Service no longer has once the entry is deleted, at the
ClusterIP and at the NodePort, while the flows to its serving endpoints stay; the proxier's
reconciles are timed and counted on its /metrics."""

import asyncio
import subprocess
import sys

import aiohttp
import pytest

from nanokube.proxy.conntrack import Conntrack, Flow, stale
from nanokube.proxy.nftables.layout import Endpoint, ServicePort
from nanokube.proxy.nftables.sync import Syncer
from nanokube.proxy.proxier import Proxier
from tests.controllers import eventually, make_stack
from tests.proxy.hosts import NODE4 as NODE
from tests.proxy.hosts import serving
from tests.proxy.test_nftables_sync import services
from tests.proxy.test_proxier_metrics import _metrics_server, _series
from tests.proxy.test_nftables_traffic_policies import CFG

POD, OTHER, OUTSIDE = "10.244.1.1", "10.244.1.2", "198.51.100.200"
CLUSTER_IP = "10.96.0.10"

#: one UDP socket to IP:PORT; a datagram per line read, printing the answering port (or the error)
UDP_CLIENT = r"""
import socket, sys
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(3)
c.connect((sys.argv[1], int(sys.argv[2])))
for _ in sys.stdin:
    c.send(b"x")
    try:
        print(c.recv(100).decode().split()[0], flush=True)
    except OSError as e:
        print(type(e).__name__, flush=True)
"""


class Client:
    def __init__(self, ns: str, ip: str, port: int):
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", UDP_CLIENT, ip, str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self) -> str:
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


@pytest.fixture
def hosts(netns):
    with serving(netns, [POD, OTHER, OUTSIDE], "udp") as names:
        yield names


def dns(*eps: Endpoint) -> ServicePort:
    return ServicePort("kube-system", "dns", "dns", "udp", CLUSTER_IP, 53, node_port=30053, endpoints=eps)


def test_a_flow_to_an_endpoint_gone_is_deleted_and_the_next_datagram_balanced_again(nft, netns, hosts):
    s, ct = Syncer(nft, CFG), Conntrack(netns)
    assert s.sync(services(dns(Endpoint(POD, 8080)))).ok
    pod, outside = Client(hosts[OTHER], CLUSTER_IP, 53), Client(hosts[OUTSIDE], NODE, 30053)
    try:
        assert pod.ask() == outside.ask() == "8080"
        assert ct.reconcile("ip", [dns(Endpoint(POD, 8080))]) == 0, "the flows' endpoint serves"
        moved = dns(Endpoint(POD, 8081))
        assert s.sync(services(moved)).ok
        assert pod.ask() == outside.ask() == "8080", "the kernel keeps translating a live UDP flow"
        assert ct.reconcile("ip", [moved]) == 2
        assert pod.ask() == outside.ask() == "8081"
        assert {(f.dst, f.dport, f.reply_sport) for f in ct.flows("ip")} >= {(CLUSTER_IP, 53, 8081),
                                                                           (NODE, 30053, 8081)}
    finally:
        pod.close()
        outside.close()


async def test_the_proxier_cleans_the_flows_of_a_udp_service_its_slices_moved(netns, hosts):
    """Through the API: the EndpointSlice's port changes, the proxier syncs and deletes the flow,
    which its /metrics counts (kubeproxy_conntrack_reconciler_*, upstream's names and labels)."""
    s = await make_stack()
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    await s.client.resource("", "v1", "services").create(
        {"metadata": {"name": "dns", "namespace": "default"},
         "spec": {"clusterIP": CLUSTER_IP, "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}})

    def endpoint_slice(port: int) -> dict:
        return {"metadata": {"name": "dns-abc", "namespace": "default", "labels": {"kubernetes.io/service-name": "dns"}},
                "addressType": "IPv4", "ports": [{"name": "dns", "port": port, "protocol": "UDP"}],
                "endpoints": [{"addresses": [POD], "conditions": {"ready": True}}]}
    await slices.create(endpoint_slice(8080))
    p = Proxier(s.client, "node-1", "", netns=netns, configs=(CFG,), min_sync_period=0.01)
    await p.start()
    servers, url = await _metrics_server(p)
    client = Client(hosts[OTHER], CLUSTER_IP, 53)
    try:
        async def answer(want):
            return await asyncio.to_thread(client.ask) == want

        async def scrape() -> str:
            async with aiohttp.ClientSession() as http, http.get(url) as r:
                return await r.text()
        assert await eventually(lambda: answer("8080"))

        async def reconciled() -> bool:  # the reconcile follows the rules that already answer, in a thread
            return _series(await scrape(), "kubeproxy_conntrack_reconciler_sync_duration_seconds_count",
                           ip_family="IPv4") is not None
        assert await eventually(reconciled), "the first sync wrote the UDP Service: its family was reconciled"
        text = await scrape()
        assert _series(text, "kubeproxy_conntrack_reconciler_deleted_entries_total", ip_family="IPv4") == 0
        reconciles = _series(text, "kubeproxy_conntrack_reconciler_sync_duration_seconds_count", ip_family="IPv4")
        assert reconciles >= 1
        await slices.patch("dns-abc", {"ports": endpoint_slice(8081)["ports"]}, namespace="default")
        assert await eventually(lambda: answer("8081"))

        async def counted() -> bool:
            text = await scrape()
            return _series(text, "kubeproxy_conntrack_reconciler_deleted_entries_total", ip_family="IPv4") == 1 and \
                _series(text, "kubeproxy_conntrack_reconciler_sync_duration_seconds_count", ip_family="IPv4") > reconciles
        assert await eventually(counted)
        assert "# TYPE kubeproxy_conntrack_reconciler_sync_duration_seconds histogram" in text
    finally:
        client.close()
        await servers.stop()
        await p.stop()
        await s.close()


def test_stale_leaves_services_without_serving_endpoints_and_other_destinations_alone():
    flows = [Flow(OTHER, CLUSTER_IP, 5000, 53, POD, 8080), Flow(OTHER, CLUSTER_IP, 5001, 53, POD, 8081),
             Flow(OUTSIDE, NODE, 5002, 30053, POD, 8080), Flow(OTHER, "10.96.0.11", 5003, 53, POD, 8080),
             Flow(OTHER, "192.0.2.1", 5004, 53, "192.0.2.1", 53)]
    terminating = Endpoint(POD, 8081, ready=False, serving_terminating=True)
    assert stale(flows, [dns(terminating)]) == [flows[0], flows[2]], "serving while terminating still serves"
    assert stale(flows, [dns(Endpoint(POD, 8081, ready=False))]) == [], "no serving endpoint: left alone"
    tcp = ServicePort("default", "web", "http", "tcp", CLUSTER_IP, 53, endpoints=(Endpoint(POD, 8081),))
    assert stale(flows, [tcp]) == []
