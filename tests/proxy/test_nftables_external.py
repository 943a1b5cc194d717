"""External destinations: spec.externalIPs and LoadBalancer ingress IPs in
`service-ips` (through the service's `external-` chain), the
loadBalancerSourceRanges firewall (`firewall-ips` to a `firewall-` chain,
before DNAT), no-endpoint verdicts for them; the kernel state in a private
namespace and real packets from clients inside and outside the ranges."""


import pytest

from nanokube.controllers.service_lb import ServiceLBController
from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort, chain_base, firewall_chain
from nanokube.proxy.nftables.nft import NftError
from nanokube.proxy.nftables.sync import Syncer
from nanokube.proxy.proxier import Proxier, service_ports
from tests.controllers import eventually, make_stack
from tests.proxy.hosts import NODE4 as NODE
from tests.proxy.hosts import attached, connect, serve, uplink
from tests.proxy.test_nftables_policies import text, vmap_keys
from tests.proxy.test_nftables_sync import CFG, Kernel, StepClock, service_ip_keys, services

EXT, LB = "192.0.2.10", "203.0.113.5"
POD = "10.244.1.1"
INSIDE, OUTSIDE = "198.51.100.7", "198.51.100.200"  # clients in and out of 198.51.100.0/28


def sp(n=2, local=(), **kw):
    eps = tuple(Endpoint(f"10.244.1.{i + 1}", 8080, local=i in local) for i in range(n))
    return ServicePort("default", "web", "http", "tcp", "10.96.0.10", 80, endpoints=eps, **kw)


def target(chain):
    return {"goto": {"target": chain}}


def test_external_and_lb_ips_go_to_the_external_chain_with_masquerade(nft):
    web = sp(external_ips=(EXT,), lb_ips=(LB,))
    assert not web.ordinary
    assert Syncer(nft, CFG).sync(services(web)).ok
    k = Kernel(nft)
    base = chain_base(web.key)
    assert service_ip_keys(k) == {("10.96.0.10", "tcp", 80): target(f"service-{base}"),
                                  (EXT, "tcp", 80): target(f"external-{base}"),
                                  (LB, "tcp", 80): target(f"external-{base}")}
    assert k.rules(f"external-{base}") == [[{"jump": {"target": "mark-for-masquerade"}}],
                                           [{"goto": {"target": f"service-{base}"}}]]
    assert k.map_elems("cluster-ips") == ["10.96.0.10"] and k.map_elems("firewall-ips") == []


def test_source_ranges_firewall_the_lb_ips_only_and_survive_losing_the_endpoints(nft):
    clock = StepClock()
    s = Syncer(nft, CFG, clock)
    web = sp(external_ips=(EXT,), lb_ips=(LB,), source_ranges=("198.51.100.0/28", "10.0.0.0/8"))
    assert s.sync(services(web)).ok
    k = Kernel(nft)
    fw = firewall_chain(web)
    assert vmap_keys(k, "firewall-ips") == {(LB, "tcp", 80): target(fw)}
    (rule,) = k.rules(fw)
    assert rule[0]["match"]["op"] == "!=" and rule[-1] == {"drop": None}
    assert "198.51.100.0" in text(rule) and "10.0.0.0" in text(rule)

    r = s.sync(services(sp(n=0, external_ips=(EXT,), lb_ips=(LB,), source_ranges=("198.51.100.0/28",))))
    assert r.ok and not r.full
    k = Kernel(nft)
    assert service_ip_keys(k) == {}
    reject = {"goto": {"target": "reject-chain"}}
    assert vmap_keys(k, "no-endpoint-services") == {("10.96.0.10", "tcp", 80): reject, (EXT, "tcp", 80): reject,
                                                    (LB, "tcp", 80): reject}
    assert vmap_keys(k, "firewall-ips") == {(LB, "tcp", 80): target(fw)} and "10.0.0.0" not in text(k.rules(fw))

    assert s.sync(services(sp(lb_ips=(LB,)))).ok  # ranges dropped: no firewall
    k = Kernel(nft)
    assert vmap_keys(k, "firewall-ips") == {} and k.rules(fw) == []
    clock.step()
    assert s.sync({}).ok
    assert fw not in Kernel(nft).chains()


def test_local_policy_without_local_endpoints_drops_external_ips_but_serves_the_cluster_ip(nft):
    web = sp(local=(), external_ips=(EXT,), lb_ips=(LB,), external_local=True)
    assert Syncer(nft, CFG).sync(services(web)).ok
    k = Kernel(nft)
    base = chain_base(web.key)
    assert vmap_keys(k, "no-endpoint-services") == {(EXT, "tcp", 80): {"drop": None}, (LB, "tcp", 80): {"drop": None}}
    assert service_ip_keys(k)[(LB, "tcp", 80)] == target(f"external-{base}")  # pod and node sources short-circuit
    ext = k.rules(f"external-{base}")
    assert len(ext) == 3 and ext[-1][-1] == target(f"service-{base}") and "fib" in text(ext[-1])


def lb_service(spec=None, status=None):
    return {"metadata": {"namespace": "default", "name": "web"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "ipFamilies": ["IPv4"], "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}],
                     **(spec or {})},
            "status": {"loadBalancer": {"ingress": status or []}}}


def test_service_ports_read_external_ips_vip_mode_ingress_and_source_ranges_per_family():
    svc = lb_service({"externalIPs": [EXT, "2001:db8::10"], "externalTrafficPolicy": "Local",
                      "loadBalancerSourceRanges": [" 198.51.100.0/28", "198.51.100.0/24", "2001:db8::/64"]},
                     [{"ip": LB, "ipMode": "VIP"}, {"ip": "203.0.113.6"}, {"ip": "203.0.113.7", "ipMode": "Proxy"},
                      {"hostname": "lb.example.com"}, {"ip": "2001:db8::5"}])
    (p,) = service_ports(svc, [], "node-1", "ip", node_ip="172.18.0.2")
    assert p.external_ips == (EXT,) and p.lb_ips == (LB, "203.0.113.6") and p.external_local
    assert p.source_ranges == ("198.51.100.0/24",)  # trimmed and merged, the IPv6 range left to the ip6 table
    (p,) = service_ports(svc, [], "node-1", "ip", node_ip="198.51.100.9")
    assert p.source_ranges == ("198.51.100.0/24", "203.0.113.5/32", "203.0.113.6/32")  # the node's own VIP traffic
    plain = {**svc, "spec": {**svc["spec"], "type": "ClusterIP", "externalIPs": [EXT], "ports": [{"port": 80}]}}
    (p,) = service_ports(plain, [], "node-1", "ip")
    assert p.external_local and not p.ordinary  # a ClusterIP with externalIPs is externally accessible


def test_external_ips_only_in_their_family_table(nft):
    svc = lb_service({"externalIPs": ["2001:db8::10"]})
    (p,) = service_ports(svc, [], "node-1", "ip")
    assert p.external_ips == () and p.lb_ips == ()


# --- packets ------------------------------------------------------------------------


@pytest.fixture
def hosts(netns):
    """Namespaces routed through `netns` (the node) by a veth each: the pod
    POD and the outside clients INSIDE and OUTSIDE."""
    uplink(netns)
    with attached(netns, [(POD, None), (INSIDE, None), (OUTSIDE, None)], "nk-host") as names:
        yield names


def test_source_ranges_drop_outsiders_and_external_traffic_is_masqueraded(nft, hosts):
    server = serve(hosts[POD], "tcp")
    try:
        s = Syncer(nft, Config(cluster_cidr="10.244.0.0/16"))
        web = ServicePort("default", "web", "http", "tcp", "10.96.0.10", 80, endpoints=(Endpoint(POD, 8080),),
                          external_ips=(EXT,), lb_ips=(LB,), source_ranges=("198.51.100.0/28",))
        assert s.sync(services(web)).ok
        assert connect(hosts[INSIDE], LB, EXT) == {LB: ["OK", f"8080/{NODE}"], EXT: ["OK", f"8080/{NODE}"]}
        # the range guards the LB IP only; the external IP answers anyone
        assert connect(hosts[OUTSIDE], LB, EXT) == {LB: ["ERR", "TimeoutError"], EXT: ["OK", f"8080/{NODE}"]}
        gone = ServicePort("default", "web", "http", "tcp", "10.96.0.10", 80, lb_ips=(LB,),
                           source_ranges=("198.51.100.0/28",))
        assert s.sync(services(gone)).ok
        assert connect(hosts[INSIDE], LB) == {LB: ["ERR", "ConnectionRefusedError"]}
        assert connect(hosts[OUTSIDE], LB) == {LB: ["ERR", "TimeoutError"]}
    finally:
        server.kill()
        server.wait()


async def test_an_allocated_lb_ip_reaches_the_proxier_through_the_service_status(netns, nft):
    s = await make_stack()
    ctrl = ServiceLBController(s.client, pool="203.0.113.4/30")
    p = Proxier(s.client, "node-1", "172.18.0.2", netns=netns, min_sync_period=0.01)
    svcs = s.client.resource("", "v1", "services")
    try:
        await ctrl.start()
        await p.start()
        await svcs.create({"metadata": {"name": "web", "namespace": "default"},
                           "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                                    "loadBalancerSourceRanges": ["198.51.100.0/28"]}})

        async def firewalled():
            try:
                return vmap_keys(Kernel(nft), "firewall-ips")
            except NftError:
                return None
        (key,) = await eventually(firewalled)
        assert key == (LB, "tcp", 80)
        assert (LB, "tcp", 80) in vmap_keys(Kernel(nft), "no-endpoint-services")  # no endpoints yet: reject
    finally:
        await p.stop()
        await ctrl.stop()
        await s.close()
