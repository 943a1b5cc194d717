"""Kernel state for ClientIP affinity, Local traffic policies and
`nodeport-ips`, each in a small private namespace."""

import subprocess

import orjson

from nanokube.proxy.nftables.layout import (
    Config,
    Endpoint,
    ServicePort,
    affinity_set,
    chain_base,
    endpoint_chain,
)
from nanokube.proxy.nftables.sync import Syncer
from tests.proxy.test_nftables_sync import CFG, Kernel, service_ip_keys, services


def sp(name="web", n=3, local=(), node_port=0, **kw):
    eps = tuple(Endpoint(f"10.244.1.{i + 1}", 8080, local=i in local) for i in range(n))
    return ServicePort("default", name, "http", "tcp", "10.96.0.10", 80, node_port=node_port, endpoints=eps, **kw)


def sets(k):
    return {o["set"]["name"]: o["set"] for o in k.objs if "set" in o}


def text(rules) -> str:
    return orjson.dumps(rules).decode()


def vmap_keys(k, name):
    return {tuple(e[0]["concat"]): e[1] for e in k.map_elems(name)}


def test_client_ip_affinity_sets_with_timeout_and_stale_sets_deleted(nft):
    s = Syncer(nft, CFG)
    web = sp(affinity_timeout=300)
    assert s.sync(services(web)).ok
    k = Kernel(nft)
    names = [affinity_set(web, e) for e in web.endpoints]
    got = sets(k)
    for n in names:
        assert got[n]["timeout"] == 300 and "timeout" in got[n]["flags"]
    rules = k.rules("service-" + chain_base(web.key))
    sticky = [r for r in rules if "goto" in text(r) and "@affinity-" in text(r)]
    assert len(sticky) == 3 and text(rules[-1]).count("numgen") == 1  # lookups first, then the random pick
    ep_rules = k.rules(endpoint_chain(web, web.endpoints[0]))
    assert any("update" in text(r) and names[0] in text(r) for r in ep_rules)
    r = s.sync(services(sp(n=2, affinity_timeout=300)))
    assert r.ok and not r.full
    left = sets(Kernel(nft))
    assert names[2] not in left and names[0] in left and names[1] in left


def test_internal_traffic_policy_local(nft):
    s = Syncer(nft, CFG)
    web = sp(local=(1,), internal_local=True)
    assert s.sync(services(web)).ok
    k = Kernel(nft)
    local = "local-" + chain_base(web.key)
    assert service_ip_keys(k) == {("10.96.0.10", "tcp", 80): {"goto": {"target": local}}}
    assert k.rules(local)[-1][0]["vmap"]["key"]["numgen"]["mod"] == 1
    assert "service-" + chain_base(web.key) not in k.chains()
    r = s.sync(services(sp(local=(), internal_local=True)))
    assert r.ok and not r.full
    k = Kernel(nft)
    assert service_ip_keys(k) == {}
    assert vmap_keys(k, "no-endpoint-services") == {("10.96.0.10", "tcp", 80): {"drop": None}}


def test_external_traffic_policy_local_nodeport(nft):
    s = Syncer(nft, CFG)
    web = sp(local=(0,), node_port=30080, external_local=True)
    assert s.sync(services(web)).ok
    k = Kernel(nft)
    base = chain_base(web.key)
    ext = k.rules("external-" + base)
    assert len(ext) == 4
    assert "10.244.0.0" in text(ext[0]) and f"service-{base}" in text(ext[0])  # pod sources short-circuit
    assert "fib" in text(ext[1]) and "mark-for-masquerade" in text(ext[1])
    assert ext[3] == [{"goto": {"target": f"local-{base}"}}]
    assert k.rules(f"local-{base}")[-1][0]["vmap"]["key"]["numgen"]["mod"] == 1
    assert service_ip_keys(k) == {("10.96.0.10", "tcp", 80): {"goto": {"target": f"service-{base}"}}}
    assert vmap_keys(k, "service-nodeports") == {("tcp", 30080): {"goto": {"target": f"external-{base}"}}}
    assert s.sync(services(sp(local=(), node_port=30080, external_local=True))).ok
    k = Kernel(nft)
    # as upstream: the external chain still short-circuits pod and node sources, the rest falls through to drop
    assert vmap_keys(k, "service-nodeports") == {("tcp", 30080): {"goto": {"target": f"external-{base}"}}}
    assert len(k.rules(f"external-{base}")) == 3 and k.rules(f"local-{base}") == []  # flushed, deleted next sync
    assert vmap_keys(k, "no-endpoint-nodeports") == {("tcp", 30080): {"drop": None}}
    assert set(service_ip_keys(k)) == {("10.96.0.10", "tcp", 80)}  # ClusterIP traffic still served


def test_nodeport_ips_set_restricts_nodeports(nft, netns):
    """nodePortAddresses CIDRs: the set holds the namespace's addresses in them (its loopback one
    left out, localhost NodePorts being unsupported), not the CIDRs."""
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)  # 127.0.0.1 on it
    for address in ("192.168.7.10/24", "192.168.7.11/32", "10.1.2.3/8"):
        subprocess.run(["ip", "-n", netns, "address", "add", address, "dev", "lo"], check=True)
    cfg = Config(cluster_cidr=CFG.cluster_cidr, service_cidrs=CFG.service_cidrs,
                 nodeport_cidrs=("192.168.7.0/24", "127.0.0.0/8"))
    s = Syncer(nft, cfg)
    assert s.sync(services(sp(node_port=30080))).ok
    k = Kernel(nft)
    assert sorted(k.map_elems("nodeport-ips")) == ["192.168.7.10", "192.168.7.11"]
    assert "@nodeport-ips" in text(k.rules("services")[1]) and "fib" not in text(k.rules("services")[1])
    plain = Syncer(nft, CFG)
    assert plain.sync(services(sp(node_port=30080))).ok
    assert "nodeport-ips" not in sets(Kernel(nft))


def test_serving_terminating_endpoints_carry_traffic_where_none_is_ready(nft):
    """A Service whose every endpoint is terminating but still serving is balanced over them (not
    rejected), and an externalTrafficPolicy Local NodePort sends outside traffic to this node's
    serving terminating endpoint where it has no ready one, as upstream's CategorizeEndpoints."""
    s = Syncer(nft, CFG)
    eps = (Endpoint("10.244.1.1", 8080, ready=False, local=True, serving_terminating=True),
           Endpoint("10.244.1.2", 8080, ready=False, serving_terminating=True),
           Endpoint("10.244.1.3", 8080, ready=False))
    web = ServicePort("default", "web", "http", "tcp", "10.96.0.10", 80, node_port=30080, endpoints=eps,
                      external_local=True)
    assert s.sync(services(web)).ok
    k = Kernel(nft)
    base = chain_base(web.key)
    assert vmap_keys(k, "no-endpoint-services") == {} and vmap_keys(k, "no-endpoint-nodeports") == {}
    assert k.rules(f"service-{base}")[-1][0]["vmap"]["key"]["numgen"]["mod"] == 2
    assert k.rules(f"local-{base}")[-1][0]["vmap"]["key"]["numgen"]["mod"] == 1
    assert k.rules(f"external-{base}")[-1] == [{"goto": {"target": f"local-{base}"}}]


def test_affinity_sets_keep_their_clients_across_full_syncs_and_restarts(nft):
    """As upstream, a full sync keeps the table: a client stays with its endpoint through the
    periodic full sync and a kube-proxy restart; a changed timeout re-creates the sets."""
    web = sp(affinity_timeout=300)
    s = Syncer(nft, CFG)
    assert s.sync(services(web)).ok
    name = affinity_set(web, web.endpoints[1])
    nft.apply(f"add element ip kube-proxy {name} {{ 10.0.0.7 }}\n")  # what the endpoint chain's update writes

    def clients():
        return [e["elem"]["val"] for e in sets(Kernel(nft))[name].get("elem", [])]

    assert s.sync(services(web), full=True).ok and clients() == ["10.0.0.7"]
    assert Syncer(nft, CFG).sync(services(web)).ok and clients() == ["10.0.0.7"]
    assert Syncer(nft, CFG).sync(services(sp(affinity_timeout=60))).ok
    assert sets(Kernel(nft))[name]["timeout"] == 60 and clients() == []
