from nanokube.proxy.nftables.layout import (
    TABLE,
    Config,
    Endpoint,
    ServicePort,
    chain_base,
)
from nanokube.proxy.nftables.sync import Syncer

CFG = Config(cluster_cidr="10.244.0.0/16", service_cidrs=("10.96.0.0/12",))


def svc(name, ip, n_eps, port=80):
    eps = tuple(Endpoint(f"10.244.1.{i + 1}", 8080) for i in range(n_eps))
    return ServicePort("default", name, "http", "tcp", ip, port, endpoints=eps)


def services(*sps):
    return {sp.key: sp for sp in sps}


class Kernel:
    def __init__(self, nft):
        self.objs = nft.list_table("ip", TABLE)

    def map_elems(self, name):
        for o in self.objs:
            m = o.get("map") or o.get("set")
            if m and m["name"] == name:
                return m.get("elem", [])
        raise KeyError(name)

    def chains(self):
        return {o["chain"]["name"] for o in self.objs if "chain" in o}

    def rules(self, chain):
        return [o["rule"]["expr"] for o in self.objs if "rule" in o and o["rule"]["chain"] == chain]


def service_ip_keys(k):
    return {tuple(e[0]["concat"]): e[1] for e in k.map_elems("service-ips")}


def test_full_sync_writes_upstream_layout(nft):
    s = Syncer(nft, CFG)
    r = s.sync(services(svc("web", "10.96.0.10", 3), svc("empty", "10.96.0.11", 0)))
    assert r.ok and r.full
    k = Kernel(nft)
    web = "service-" + chain_base("default/web/tcp/http")
    assert service_ip_keys(k) == {("10.96.0.10", "tcp", 80): {"goto": {"target": web}}}
    numgen = k.rules(web)[1][0]["vmap"]
    assert numgen["key"]["numgen"] == {"mode": "random", "mod": 3, "offset": 0}
    targets = [v["goto"]["target"] for _, v in numgen["data"]["set"]]
    assert len(targets) == 3 and all(t.startswith("endpoint-") and t in k.chains() for t in targets)
    masq = k.rules(web)[0]
    assert masq[-1] == {"jump": {"target": "mark-for-masquerade"}}
    assert {"dnat": {"addr": "10.244.1.1", "port": 8080}} in k.rules(targets[0])[1]
    no_ep = {tuple(e[0]["concat"]): e[1] for e in k.map_elems("no-endpoint-services")}
    assert no_ep == {("10.96.0.11", "tcp", 80): {"goto": {"target": "reject-chain"}}}
    assert not any("empty" in c for c in k.chains())
    assert set(k.map_elems("cluster-ips")) == {"10.96.0.10", "10.96.0.11"}
    assert list(k.rules("reject-chain")[0][0]) == ["reject"]
    assert {"mangle": {"key": {"meta": {"key": "mark"}}, "value": {"|": [{"meta": {"key": "mark"}}, 16384]}}} \
        in k.rules("mark-for-masquerade")[0]


def test_partial_sync_touches_only_the_changed_service(nft):
    s = Syncer(nft, CFG)
    a, b = svc("a", "10.96.0.1", 2), svc("b", "10.96.0.2", 2)
    assert s.sync(services(a, b)).full
    b3 = svc("b", "10.96.0.2", 3)
    r = s.sync(services(a, b3))
    assert r.ok and not r.full and r.failures == 0
    assert r.services_changed == [b3.key]
    assert all("/b/" in c for c in r.chains_written) and len(r.chains_written) == 2  # service chain + new endpoint
    assert r.elements_added == {} and r.elements_deleted == {}
    k = Kernel(nft)
    b_chain = "service-" + chain_base(b3.key)
    assert k.rules(b_chain)[1][0]["vmap"]["key"]["numgen"]["mod"] == 3
    a_chain = "service-" + chain_base(a.key)
    assert k.rules(a_chain)[1][0]["vmap"]["key"]["numgen"]["mod"] == 2


def test_endpoints_going_away_switch_to_reject_and_delete_removes_everything(nft):
    s = Syncer(nft, CFG)
    a, b = svc("a", "10.96.0.1", 2), svc("b", "10.96.0.2", 2)
    s.sync(services(a, b))
    r = s.sync(services(a, svc("b", "10.96.0.2", 0)))
    assert not r.full and r.elements_added == {"no-endpoint-services": ["10.96.0.2 . tcp . 80"]}
    assert r.elements_deleted == {"service-ips": ["10.96.0.2 . tcp . 80"]}
    assert len(r.chains_deleted) == 3
    r = s.sync(services(a))
    assert r.ok and not r.full
    assert not any(k.rules(c) for k in [Kernel(nft)] for c in k.chains() if "/b/" in c)
    assert s.sync(services(a)).services_changed == []  # deletes the flushed chains
    k = Kernel(nft)
    assert not any("/b/" in c for c in k.chains())
    assert set(service_ip_keys(k)) == {("10.96.0.1", "tcp", 80)}
    assert k.map_elems("cluster-ips") == ["10.96.0.1"]
    assert k.map_elems("no-endpoint-services") == []


def test_failed_partial_sync_is_retried_as_full(nft):
    s = Syncer(nft, CFG)
    a = svc("a", "10.96.0.1", 2)
    s.sync(services(a))
    nft.apply(f"flush chain ip {TABLE} {'service-' + chain_base(a.key)}\n")
    # Drift the kernel behind the syncer's back: the partial sync's `flush chain` of a
    # chain that no longer exists fails, and the full retry rebuilds the table.
    nft.apply(f"delete element ip {TABLE} service-ips {{ 10.96.0.1 . tcp . 80 }}\n"
              f"delete chain ip {TABLE} {'service-' + chain_base(a.key)}\n")
    r = s.sync(services(svc("a", "10.96.0.1", 3)))
    assert r.ok and r.full and r.failures == 1
    k = Kernel(nft)
    assert set(service_ip_keys(k)) == {("10.96.0.1", "tcp", 80)}
    assert k.rules("service-" + chain_base(a.key))[1][0]["vmap"]["key"]["numgen"]["mod"] == 3


def test_bad_rule_never_leaves_half_a_ruleset(nft):
    s = Syncer(nft, CFG)
    good = svc("a", "10.96.0.1", 2)
    s.sync(services(good))
    before = Kernel(nft).objs
    r = s.sync(services(good, svc("bad", "10.96.0.999", 2)))
    assert not r.ok and r.failures == 2 and "Error" in r.error  # partial, then the full retry
    assert Kernel(nft).objs == before
    assert s.need_full
    r = s.sync(services(good, svc("fixed", "10.96.0.9", 1)))
    assert r.ok and r.full
    assert set(service_ip_keys(Kernel(nft))) == {("10.96.0.1", "tcp", 80), ("10.96.0.9", "tcp", 80)}


def test_periodic_full_resync_rebuilds_the_same_table(nft):
    s = Syncer(nft, CFG)
    sps = services(svc("a", "10.96.0.1", 2), svc("b", "10.96.0.2", 0))
    s.sync(sps)
    before = {o.get("chain", {}).get("name") for o in Kernel(nft).objs}
    r = s.sync(sps, full=True)
    assert r.ok and r.full and len(r.services_changed) == 2
    assert {o.get("chain", {}).get("name") for o in Kernel(nft).objs} == before
