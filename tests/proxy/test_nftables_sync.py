from nanokube.clock import Clock
from nanokube.proxy.nftables.layout import (
    TABLE,
    Config,
    Endpoint,
    ServicePort,
)
from nanokube.proxy.nftables.sync import STALE_CHAIN_DELAY, Syncer

CFG = Config(cluster_cidr="10.244.0.0/16", service_cidrs=("10.96.0.0/12",))


def svc(name, ip, n_eps, port=80):
    eps = tuple(Endpoint(f"10.244.1.{i + 1}", 8080) for i in range(n_eps))
    return ServicePort("default", name, "http", "tcp", ip, port, endpoints=eps)


def services(*sps):
    return {sp.key: sp for sp in sps}


class StepClock(Clock):
    """Monotonic time the test moves on (`step`): how long a flushed chain has been stale."""

    def __init__(self):
        self.t = 0.0

    def monotonic(self):
        return self.t

    def step(self, seconds=STALE_CHAIN_DELAY + 0.001):
        self.t += seconds


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


def endpoint_slots(k, proto="tcp"):
    """service-endpoints-<proto> as {(ip, port, slot): (endpoint ip, endpoint port)}."""
    return {tuple(e[0]["concat"]): tuple(e[1]["concat"]) for e in k.map_elems(f"service-endpoints-{proto}")}


def hairpins(k):
    return {tuple(e["concat"]) for e in k.map_elems("hairpin-endpoints")}


def test_full_sync_writes_the_documented_layout(nft):
    s = Syncer(nft, CFG)
    r = s.sync(services(svc("web", "10.96.0.10", 3), svc("empty", "10.96.0.11", 0)))
    assert r.ok and r.full
    k = Kernel(nft)
    assert service_ip_keys(k) == {("10.96.0.10", "tcp", 80): {"goto": {"target": "lb-tcp-3"}}}
    assert endpoint_slots(k) == {("10.96.0.10", 80, i): (f"10.244.1.{i + 1}", 8080) for i in range(3)}
    masq, dnat = k.rules("lb-tcp-3")
    assert masq[0]["match"] == {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}},
                                "right": {"prefix": {"addr": "10.244.0.0", "len": 16}}}
    assert masq[-1] == {"jump": {"target": "mark-for-masquerade"}}
    lookup = dnat[0]["dnat"]["addr"]["map"]
    assert lookup["data"] == "@service-endpoints-tcp"
    assert lookup["key"]["concat"][-1] == {"numgen": {"mode": "random", "mod": 3, "offset": 0}}
    assert not any(c.startswith(("service-", "endpoint-")) and "web" in c for c in k.chains())
    assert hairpins(k) == {(f"10.244.1.{i}", f"10.244.1.{i}") for i in (1, 2, 3)}
    assert "@hairpin-endpoints" in str(k.rules("masquerading")[0]) and "dnat" in str(k.rules("masquerading")[0])
    no_ep = {tuple(e[0]["concat"]): e[1] for e in k.map_elems("no-endpoint-services")}
    assert no_ep == {("10.96.0.11", "tcp", 80): {"goto": {"target": "reject-chain"}}}
    assert not any("empty" in c for c in k.chains())
    assert set(k.map_elems("cluster-ips")) == {"10.96.0.10", "10.96.0.11"}
    assert list(k.rules("reject-chain")[0][0]) == ["reject"]
    assert {"mangle": {"key": {"meta": {"key": "mark"}}, "value": {"|": [{"meta": {"key": "mark"}}, 16384]}}} \
        in k.rules("mark-for-masquerade")[0]


def test_without_cluster_cidr_only_hairpin_service_connections_are_masqueraded(nft):
    """Upstream's proxier with no local detector marks no ClusterIP traffic in the service's chain:
    a pod's connection keeps its source address; an endpoint reaching itself is still masqueraded."""
    s = Syncer(nft, Config(service_cidrs=CFG.service_cidrs))
    sticky = ServicePort("default", "sticky", "http", "tcp", "10.96.0.11", 80,
                         endpoints=(Endpoint("10.244.1.1", 8080),), affinity_timeout=60)
    assert s.sync(services(svc("web", "10.96.0.10", 2), sticky)).ok
    k = Kernel(nft)
    (dnat,) = k.rules("lb-tcp-2")
    assert "dnat" in dnat[0]
    policy = next(c for c in k.chains() if c.startswith("service-") and "sticky" in c)
    assert "mark-for-masquerade" not in str(k.rules(policy))
    endpoint = next(c for c in k.chains() if c.startswith("endpoint-") and "sticky" in c)
    assert k.rules(endpoint)[0][-1] == {"jump": {"target": "mark-for-masquerade"}}  # saddr 10.244.1.1: hairpin
    assert "@hairpin-endpoints" in str(k.rules("masquerading")[0])


def test_masquerade_all_marks_every_service_connection(nft):
    s = Syncer(nft, Config(cluster_cidr=CFG.cluster_cidr, service_cidrs=CFG.service_cidrs, masquerade_all=True))
    assert s.sync(services(svc("web", "10.96.0.10", 2))).ok
    assert Kernel(nft).rules("lb-tcp-2")[0] == [{"jump": {"target": "mark-for-masquerade"}}]


def test_lb_chains_are_shared_and_deleted_with_their_last_user(nft):
    clock = StepClock()
    s = Syncer(nft, CFG, clock)
    a, b, c = svc("a", "10.96.0.1", 2), svc("b", "10.96.0.2", 2), svc("c", "10.96.0.3", 4)
    dns = ServicePort("default", "dns", "dns", "udp", "10.96.0.4", 53, endpoints=b.endpoints)
    assert s.sync(services(a, b, c, dns)).ok
    k = Kernel(nft)
    assert {c for c in k.chains() if c.startswith("lb-")} == {"lb-tcp-2", "lb-tcp-4", "lb-udp-2"}
    assert endpoint_slots(k, "udp") == {("10.96.0.4", 53, 0): ("10.244.1.1", 8080), ("10.96.0.4", 53, 1): (
        "10.244.1.2", 8080)}
    assert "udp" in str(Kernel(nft).rules("lb-udp-2")[1])
    r = s.sync(services(a, c, dns))
    assert r.ok and not r.full and r.chains_written == [] and r.chains_deleted == []
    assert len(Kernel(nft).rules("lb-tcp-2")) == 2  # still serving a
    r = s.sync(services(c, dns))
    assert r.chains_deleted == ["lb-tcp-2"] and Kernel(nft).rules("lb-tcp-2") == []  # flushed now,
    clock.step()
    s.sync(services(c, dns))
    assert "lb-tcp-2" not in Kernel(nft).chains()  # deleted by a sync a second later
    r = s.sync(services(c, dns, svc("a", "10.96.0.1", 2)))
    assert r.chains_written == ["lb-tcp-2"] and len(Kernel(nft).rules("lb-tcp-2")) == 2


def test_partial_sync_touches_only_the_changed_service(nft):
    s = Syncer(nft, CFG)
    a, b = svc("a", "10.96.0.1", 2), svc("b", "10.96.0.2", 2)
    assert s.sync(services(a, b)).full
    b3 = svc("b", "10.96.0.2", 3)
    r = s.sync(services(a, b3))
    assert r.ok and not r.full and r.failures == 0
    assert r.services_changed == [b3.key]
    assert r.chains_written == ["lb-tcp-3"] and r.chains_deleted == []  # lb-2 still serves a
    assert r.elements_deleted == {"service-ips": ["10.96.0.2 . tcp . 80"]}
    assert r.elements_added == {"service-ips": ["10.96.0.2 . tcp . 80"],
                                "service-endpoints-tcp": ["10.96.0.2 . 80 . 2"],
                                "hairpin-endpoints": ["10.244.1.3 . 10.244.1.3"]}
    assert r.lines == 7  # add chain, 2 rules; delete + add service-ips; add the new slot; add its hairpin pair
    k = Kernel(nft)
    assert service_ip_keys(k) == {("10.96.0.1", "tcp", 80): {"goto": {"target": "lb-tcp-2"}},
                                  ("10.96.0.2", "tcp", 80): {"goto": {"target": "lb-tcp-3"}}}
    assert endpoint_slots(k)[("10.96.0.2", 80, 2)] == ("10.244.1.3", 8080)
    moved = svc("b", "10.96.0.2", 3)
    moved = ServicePort(**{f: getattr(moved, f) for f in ("namespace", "name", "port_name", "protocol", "cluster_ip",
                                                           "port")}, endpoints=moved.endpoints[:2] + (
        Endpoint("10.244.1.3", 9090),))
    r = s.sync(services(a, moved))
    assert r.elements_deleted == {"service-endpoints-tcp": ["10.96.0.2 . 80 . 2"]} and r.chains_written == []
    assert r.elements_added == {"service-endpoints-tcp": ["10.96.0.2 . 80 . 2"]}
    assert endpoint_slots(Kernel(nft))[("10.96.0.2", 80, 2)] == ("10.244.1.3", 9090)


def test_endpoints_going_away_switch_to_reject_and_delete_removes_everything(nft):
    clock = StepClock()
    s = Syncer(nft, CFG, clock)
    a, b = svc("a", "10.96.0.1", 2, port=81), svc("b", "10.96.0.2", 3)
    s.sync(services(a, b))
    r = s.sync(services(a, svc("b", "10.96.0.2", 0)))
    assert not r.full and r.elements_added == {"no-endpoint-services": ["10.96.0.2 . tcp . 80"]}
    assert r.elements_deleted == {"service-ips": ["10.96.0.2 . tcp . 80"],
                                  "service-endpoints-tcp": [f"10.96.0.2 . 80 . {i}" for i in range(3)],
                                  "hairpin-endpoints": ["10.244.1.3 . 10.244.1.3"]}  # .1 and .2 still serve a
    assert r.chains_deleted == ["lb-tcp-3"]
    clock.step()
    r = s.sync(services(a))
    assert r.ok and not r.full
    assert s.sync(services(a)).services_changed == []
    k = Kernel(nft)
    assert "lb-tcp-3" not in k.chains()
    assert set(service_ip_keys(k)) == {("10.96.0.1", "tcp", 81)}
    assert {key[:2] for key in endpoint_slots(k)} == {("10.96.0.1", 81)}
    assert k.map_elems("cluster-ips") == ["10.96.0.1"]
    assert k.map_elems("no-endpoint-services") == []
    s.sync({})
    k = Kernel(nft)
    assert not k.map_elems("service-ips") and not k.map_elems("service-endpoints-tcp") and not hairpins(k)
    clock.step()
    s.sync({})
    assert not any(c.startswith("lb-") for c in Kernel(nft).chains())


def test_a_stale_chain_is_flushed_at_once_and_deleted_more_than_a_second_later(nft):
    """Upstream's staleChains: a chain no service uses any more is flushed by the sync that drops
    it and deleted, in a transaction of its own, by the first sync more than a second later (a
    kernel before 6.2 holds it referenced a moment after its last vmap element goes). A chain
    written again before then is kept; a refused deletion is counted once and tried again only a
    second after it failed."""
    clock = StepClock()
    s = Syncer(nft, CFG, clock)
    a, b = svc("a", "10.96.0.1", 2), svc("b", "10.96.0.2", 3)
    assert s.sync(services(a, b)).full
    r = s.sync(services(a))
    assert r.chains_deleted == ["lb-tcp-3"] and Kernel(nft).rules("lb-tcp-3") == []
    clock.step(STALE_CHAIN_DELAY)
    assert s.sync(services(a)).cleanup_failures == 0
    assert "lb-tcp-3" in Kernel(nft).chains(), "not more than a second yet"
    clock.step(0.001)
    s.sync(services(a))
    assert "lb-tcp-3" not in Kernel(nft).chains()

    s.sync(services(a, b))
    s.sync(services(a))
    clock.step(0.5)
    assert s.sync(services(a, b)).chains_written == ["lb-tcp-3"]  # back before its delay was up
    rules = Kernel(nft).rules("lb-tcp-3")
    clock.step()
    s.sync(services(a, b))
    assert rules and Kernel(nft).rules("lb-tcp-3") == rules, "kept, with its rules"

    s.sync(services(a))
    nft.apply(f"add chain ip {TABLE} holder\nadd rule ip {TABLE} holder jump lb-tcp-3\n")  # the kernel refuses
    clock.step()
    r = s.sync(services(a, svc("c", "10.96.0.3", 2)))
    assert r.ok and r.cleanup_failures == 1 and not r.full, "counted; the sync goes on"
    assert service_ip_keys(Kernel(nft))[("10.96.0.3", "tcp", 80)] == {"goto": {"target": "lb-tcp-2"}}
    nft.apply(f"delete chain ip {TABLE} holder\n")
    assert s.sync(services(a)).cleanup_failures == 0 and "lb-tcp-3" in Kernel(nft).chains(), "a delay after failing"
    clock.step()
    assert s.sync(services(a)).cleanup_failures == 0
    assert "lb-tcp-3" not in Kernel(nft).chains()


def test_failed_partial_sync_is_retried_as_full(nft):
    s = Syncer(nft, CFG)
    a = svc("a", "10.96.0.1", 2)
    s.sync(services(a))
    # Drift the kernel behind the syncer's back: the partial sync's delete of an element
    # that is no longer there fails, and the full retry rebuilds the table.
    nft.apply(f"delete element ip {TABLE} service-ips {{ 10.96.0.1 . tcp . 80 }}\n")
    r = s.sync(services(svc("a", "10.96.0.1", 3)))
    assert r.ok and r.full and r.failures == 1
    k = Kernel(nft)
    assert service_ip_keys(k) == {("10.96.0.1", "tcp", 80): {"goto": {"target": "lb-tcp-3"}}}
    assert len(endpoint_slots(k)) == 3


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


def test_a_full_sync_flushes_what_it_did_not_write_and_deletes_it_a_second_later(nft):
    """Upstream's full sync lists the table: a kube-proxy restarted over its predecessor's table
    (or a periodic full sync over chains someone added) flushes every chain it does not write,
    deletes them with the stale ones a delay later, and deletes the sets nobody declares; its
    first full sync re-creates base chains whose priority changed."""
    a = svc("a", "10.96.0.1", 2)
    b = ServicePort("default", "b", "http", "tcp", "10.96.0.2", 80, node_port=30080,
                    endpoints=(Endpoint("10.244.1.9", 8080),))
    assert Syncer(nft, CFG).sync(services(a, b)).ok
    gone = {c for c in Kernel(nft).chains() if "default/b/" in c} | {"lb-tcp-2"}
    assert len(gone) == 4  # service-, external-, endpoint- and the lb- chain
    nft.apply(f"add chain ip {TABLE} leftover\nadd rule ip {TABLE} leftover drop\n"
              f"add set ip {TABLE} old-set {{ type ipv4_addr ; }}\n"
              f"add map ip {TABLE} old-map {{ type ipv4_addr : verdict ; }}\n"
              f"delete chain ip {TABLE} nat-output\n"
              f"add chain ip {TABLE} nat-output {{ type nat hook output priority -90 ; }}\n")
    gone.add("leftover")

    clock = StepClock()
    s = Syncer(nft, CFG, clock)  # the restarted kube-proxy
    r = s.sync(services(svc("c", "10.96.0.3", 1)))
    assert r.ok and r.full and set(r.chains_deleted) == gone
    k = Kernel(nft)
    assert gone <= k.chains() and all(k.rules(c) == [] for c in gone), "flushed, not deleted yet"
    assert not {"old-set", "old-map"} & {(o.get("set") or o.get("map") or {}).get("name") for o in k.objs}
    assert next(o["chain"] for o in k.objs if o.get("chain", {}).get("name") == "nat-output")["prio"] == -100
    assert set(service_ip_keys(k)) == {("10.96.0.3", "tcp", 80)}
    clock.step()
    assert s.sync(services(svc("c", "10.96.0.3", 1))).cleanup_failures == 0
    assert not gone & Kernel(nft).chains()

    nft.apply(f"add chain ip {TABLE} added-later\n")
    assert s.sync(services(svc("c", "10.96.0.3", 1))).lines == 0, "a partial sync never lists the table"
    assert s.sync(services(svc("c", "10.96.0.3", 1)), full=True).chains_deleted == ["added-later"]
    clock.step()
    s.sync(services(svc("c", "10.96.0.3", 1)))
    assert "added-later" not in Kernel(nft).chains()


def test_the_full_sync_after_a_failed_one_recreates_the_table(nft):
    """A table a full sync cannot load into (here a map of another type under one of our names,
    as an older kube-proxy might leave) fails that sync; the next deletes and re-creates it."""
    nft.apply(f"add table ip {TABLE}\nadd map ip {TABLE} service-ips {{ type ipv4_addr : verdict ; }}\n")
    s = Syncer(nft, CFG)
    a = svc("a", "10.96.0.1", 2)
    r = s.sync(services(a))
    assert not r.ok and r.full and r.failures == 1 and s.need_full
    r = s.sync(services(a))
    assert r.ok and r.full and r.failures == 0
    assert service_ip_keys(Kernel(nft)) == {("10.96.0.1", "tcp", 80): {"goto": {"target": "lb-tcp-2"}}}
