"""Real connections through the per-service chains: NodePorts with either
externalTrafficPolicy, ClientIP session affinity, internalTrafficPolicy Local and
the no-endpoint, unknown-port and unallocated-ClusterIP verdicts. A node namespace
runs the rules; a pod (POD, serving 8080 and 8081), a second pod (OTHER) and an
outside host (OUTSIDE) sit behind it, each on a veth, the node reached at NODE."""

import pytest

from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort
from nanokube.proxy.nftables.sync import Syncer
from tests.proxy.hosts import NODE4 as NODE
from tests.proxy.hosts import answers, connect, serving
from tests.proxy.test_nftables_sync import services

POD, OTHER, OUTSIDE = "10.244.1.1", "10.244.1.2", "198.51.100.200"
CLUSTER_IP = "10.96.0.10"
CFG = Config(cluster_cidr="10.244.0.0/16", service_cidrs=("10.96.0.0/12",))


@pytest.fixture
def hosts(netns):
    with serving(netns, [POD, OTHER, OUTSIDE], "tcp") as names:
        yield names


def web(*eps: Endpoint, port=80, **kw) -> ServicePort:
    return ServicePort("default", "web", "http", "tcp", CLUSTER_IP, port, endpoints=eps, **kw)


def test_node_ports_masquerade_under_a_cluster_policy_and_keep_the_client_under_local(nft, hosts):
    """NodePort traffic from outside is masqueraded to the node under the Cluster policy; under
    Local it keeps its source, and with no endpoint on this node it is dropped while pods
    (short-circuited to the cluster-wide endpoints) still get through."""
    s = Syncer(nft, CFG)
    nodeport = f"{NODE}:30080"
    assert s.sync(services(web(Endpoint(POD, 8080), node_port=30080))).ok
    assert connect(hosts[OUTSIDE], nodeport) == {nodeport: ["OK", f"8080/{NODE}"]}
    assert s.sync(services(web(Endpoint(POD, 8080, local=True), node_port=30080, external_local=True))).ok
    assert connect(hosts[OUTSIDE], nodeport) == {nodeport: ["OK", f"8080/{OUTSIDE}"]}
    assert s.sync(services(web(Endpoint(POD, 8080), node_port=30080, external_local=True))).ok
    assert connect(hosts[OUTSIDE], nodeport) == {nodeport: ["ERR", "TimeoutError"]}
    assert connect(hosts[OTHER], nodeport, CLUSTER_IP) == {nodeport: ["OK", f"8080/{OTHER}"],
                                                          CLUSTER_IP: ["OK", f"8080/{OTHER}"]}


def test_client_ip_affinity_keeps_a_client_on_one_endpoint_across_a_full_sync(nft, hosts):
    """Of two endpoints, a client gets one for all its connections, also after the periodic full
    sync (it keeps the table, and with it the affinity sets)."""
    s = Syncer(nft, CFG)
    assert s.sync(services(web(Endpoint(POD, 8080), Endpoint(POD, 8081), affinity_timeout=300))).ok
    (first,) = answers(hosts[OTHER], "tcp", CLUSTER_IP, 80)
    assert s.sync(services(web(Endpoint(POD, 8080), Endpoint(POD, 8081), affinity_timeout=300)), full=True).ok
    assert answers(hosts[OTHER], "tcp", CLUSTER_IP, 80) == {first}


def test_internal_traffic_policy_local_uses_this_nodes_endpoints_only(nft, hosts):
    s = Syncer(nft, CFG)
    assert s.sync(services(web(Endpoint(POD, 8080, local=True), Endpoint(POD, 8081), internal_local=True))).ok
    assert answers(hosts[OTHER], "tcp", CLUSTER_IP, 80) == {("8080", OTHER)}
    assert s.sync(services(web(Endpoint(POD, 8080), Endpoint(POD, 8081), internal_local=True))).ok
    assert connect(hosts[OTHER], CLUSTER_IP) == {CLUSTER_IP: ["ERR", "TimeoutError"]}, "dropped, not rejected"


def test_no_endpoints_and_unknown_ports_are_rejected_and_unallocated_cluster_ips_dropped(nft, hosts):
    """A Service without endpoints is refused at its ClusterIP and NodePort; so is a port its
    ClusterIP does not serve; an address of the service range no Service has is dropped."""
    empty = ServicePort("default", "empty", "http", "tcp", "10.96.0.11", 80, node_port=30081)
    assert Syncer(nft, CFG).sync(services(web(Endpoint(POD, 8080)), empty)).ok
    assert connect(hosts[OTHER], "10.96.0.11", f"{NODE}:30081", f"{CLUSTER_IP}:81", CLUSTER_IP, "10.96.0.99") == {
        "10.96.0.11": ["ERR", "ConnectionRefusedError"], f"{NODE}:30081": ["ERR", "ConnectionRefusedError"],
        f"{CLUSTER_IP}:81": ["ERR", "ConnectionRefusedError"], CLUSTER_IP: ["OK", f"8080/{OTHER}"],
        "10.96.0.99": ["ERR", "TimeoutError"]}
    assert connect(hosts[OUTSIDE], f"{NODE}:30081") == {f"{NODE}:30081": ["ERR", "ConnectionRefusedError"]}
