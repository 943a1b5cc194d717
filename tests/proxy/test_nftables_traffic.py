"""Packets through the `lb-N` layout on the real kernel: a node namespace
running the rules and a pod namespace behind a veth, as the process runtime
wires them. The pod serves two ports; it reaches them through a ClusterIP
from a second address (kept as the source) and from its own address
(hairpin: masqueraded to the node's address, else the reply would bypass
the DNAT)."""

import pytest

from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort
from nanokube.proxy.nftables.sync import Syncer
from tests.proxy.hosts import NODE4, answers, attached, serve

POD, OTHER, CLUSTER_IP = "10.244.1.1", "10.244.1.2", "10.96.0.10"


@pytest.fixture
def pods(netns):
    """Pod namespaces with POD and OTHER, each routed through `netns` (the node)."""
    with attached(netns, [(POD, None), (OTHER, None)]) as names:
        yield names


@pytest.mark.parametrize("proto,port", [("tcp", 80), ("udp", 53)])
def test_lb_chain_balances_translates_ports_and_masquerades_hairpin(nft, pods, proto, port):
    server = serve(pods[POD], proto)
    try:
        eps = (Endpoint(POD, 8080), Endpoint(POD, 8081))
        svc = ServicePort("default", "web", "p", proto, CLUSTER_IP, port, endpoints=eps)
        assert Syncer(nft, Config(cluster_cidr="10.244.0.0/16")).sync({svc.key: svc}).ok
        # both slots, the source kept; then hairpin, masqueraded to the node
        assert answers(pods[OTHER], proto, CLUSTER_IP, port) == {("8080", OTHER), ("8081", OTHER)}
        assert answers(pods[POD], proto, CLUSTER_IP, port) == {("8080", NODE4), ("8081", NODE4)}
    finally:
        server.kill()
        server.wait()
