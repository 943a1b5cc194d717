"""nodePortAddresses on the real kernel: which of the node's addresses a NodePort answers on. The
node namespace has its IP (on the veths to the pod and the outside host) and two more addresses
on an interface of their own (a veth whose peer stays down); a host outside connects to the NodePort at each. `primary` (the
default of `nanokube up`'s kube-proxy) answers on the node's IP alone, an explicit list on the
addresses in its CIDRs, and a list naming only the other family leaves this one unrestricted."""

import asyncio
import subprocess

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort
from nanokube.proxy.nftables.sync import Syncer
from nanokube.proxy.nodeport_addresses import PRIMARY, config_warning, of_family, resolve
from nanokube.proxy.runner import NodeProxies
from tests.controllers import eventually, make_stack
from tests.proxy.hosts import NODE4 as NODE
from tests.proxy.hosts import connect, serving

POD, OUTSIDE = "10.244.1.1", "198.51.100.200"
OTHER, OTHER2 = "192.0.2.1", "192.0.2.2"
NODE_PORT = 30080


@pytest.fixture
def hosts(netns):
    """The pod (serving) and the outside host behind `netns`, which also holds OTHER and OTHER2."""
    node = ("ip", "-n", netns)
    subprocess.run([*node, "link", "set", "lo", "up"], check=True)  # kube-proxy's metrics listen on 127.0.0.1
    subprocess.run([*node, "link", "add", "nk-other", "type", "veth", "peer", "name", "nk-other-peer"], check=True)
    subprocess.run([*node, "link", "set", "nk-other", "up"], check=True)
    for address in (OTHER, OTHER2):
        subprocess.run([*node, "address", "add", f"{address}/32", "dev", "nk-other"], check=True)
    with serving(netns, [POD, OUTSIDE], "tcp") as names:
        yield names


def reached(hosts, *addresses: str) -> dict[str, str]:
    """address -> "OK" or the error of one connection from outside to the NodePort there."""
    got = connect(hosts[OUTSIDE], *(f"{a}:{NODE_PORT}" for a in addresses))
    return {a: got[f"{a}:{NODE_PORT}"][0] if got[f"{a}:{NODE_PORT}"][0] == "OK" else got[f"{a}:{NODE_PORT}"][1]
            for a in addresses}


def web() -> ServicePort:
    return ServicePort("default", "web", "http", "tcp", "10.96.0.10", 80, node_port=NODE_PORT,
                       endpoints=(Endpoint(POD, 8080),))


async def test_primary_answers_on_the_node_ip_only(netns, hosts):
    """Through `nanokube up`'s kube-proxy (NodeProxies), the API's Service and EndpointSlice."""
    s = await make_stack()
    await s.client.resource("", "v1", "services").create(
        {"metadata": {"name": "web", "namespace": "default"},
         "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
                  "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": NODE_PORT}]}})
    await s.client.resource("discovery.k8s.io", "v1", "endpointslices").create(
        {"metadata": {"name": "web-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
         "endpoints": [{"addresses": [POD], "conditions": {"ready": True}}]})
    proxies = NodeProxies(connector(s.rest), [("node-1", NODE, netns)], [], min_sync_period=0.01)
    await proxies.start()
    try:
        async def synced():
            return proxies.proxiers[0].syncs >= 1
        assert await eventually(synced)
        got = await asyncio.to_thread(reached, hosts, NODE, OTHER)
        assert got == {NODE: "OK", OTHER: "ConnectionRefusedError"}, got
    finally:
        await proxies.stop()
        await s.close()


@pytest.mark.parametrize(("addresses", "answering"), [
    (["192.0.2.0/24"], {OTHER, OTHER2}),
    (["192.0.2.2/32", "fd00::/64"], {OTHER2}),
    (["fd00::/64"], {NODE, OTHER, OTHER2}),  # none of the family: every local address
    (["0.0.0.0/0"], {NODE, OTHER, OTHER2}),
], ids=["cidr", "one-address", "other-family-only", "zero-cidr"])
def test_a_cidr_list_answers_on_the_local_addresses_in_it(nft, hosts, addresses, answering):
    cfg = Config(cluster_cidr="10.244.0.0/16", nodeport_cidrs=of_family("ip", addresses))
    assert Syncer(nft, cfg).sync({web().key: web()}).ok
    got = reached(hosts, NODE, OTHER, OTHER2)
    assert got == {a: "OK" if a in answering else "ConnectionRefusedError" for a in (NODE, OTHER, OTHER2)}, got


def test_primary_stands_for_each_familys_node_ip():
    assert resolve([PRIMARY], ["10.0.0.5", "fd00::5"]) == ("10.0.0.5/32", "fd00::5/128")
    assert resolve([PRIMARY], ["127.0.0.1", "::1"]) == (), "an unknown node IP (loopback) restricts nothing"
    assert resolve(["10.0.0.0/8"], ["10.0.0.5"]) == ("10.0.0.0/8",)
    assert of_family("ip6", resolve([PRIMARY], ["10.0.0.5"])) == (), "the other family is left unrestricted"
    assert of_family("ip", ["10.1.2.3/8", "fd00::/64"]) == ("10.0.0.0/8",)


def test_settings_leaving_a_family_open_are_complained_about_as_upstream_does():
    """checkBadConfig's three cases, on the resolved CIDRs."""
    assert config_warning([], "IPv4", False).startswith("nodePortAddresses is unset; NodePort connections will be "
                                                         "accepted on all local IPs")
    assert config_warning(["10.0.0.5/32"], "IPv4", False) == ""
    assert config_warning(["10.0.0.5/32"], "IPv4", True) == (
        "cluster appears to be dual-stack but nodePortAddresses contains only IPv4 addresses; NodePort connections "
        "will be accepted on all local IPv6 IPs")
    assert config_warning(["10.0.0.5/32", "fd00::5/128"], "IPv4", True) == ""
    assert config_warning(["fd00::/64"], "IPv4", False) == (
        "cluster appears to be IPv4-primary but nodePortAddresses contains only IPv6 addresses; NodePort "
        "connections will be accepted on all local IPv4 IPs")
