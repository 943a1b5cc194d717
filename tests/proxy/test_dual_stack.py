"""Dual-stack kube-proxy: one `kube-proxy` table per IP family, as
upstream's MetaProxier keeps one proxier per family. A Service's
clusterIPs/ipFamilies pick its ClusterIP in each family, EndpointSlices
feed the family of their addressType, and packets to both ClusterIPs of one
Service reach its pods on the real kernel.

nanokube's API server allocates single-stack IPv4 ClusterIPs only, so the
tests write the dual-stack Service into the store as a dual-stack API
server would keep it.
"""

import asyncio
import subprocess
from dataclasses import replace

import orjson
import pytest

from nanokube.cli import main
from nanokube.proxy.nftables.layout import TABLE
from nanokube.proxy.nftables.nft import NftError
from nanokube.proxy.proxier import Proxier, cluster_ip, service_ports
from nanokube.proxy.runner import proxy_configs
from tests.controllers import eventually, make_stack
from tests.proxy.hosts import NODE4, NODE6, answers, attached, serve

V4, V6 = "10.96.0.30", "fd00:10:96::30"


def dual_stack(spec: dict, ips=(V4, V6), families=("IPv4", "IPv6")) -> dict:
    return spec | {"clusterIP": ips[0], "clusterIPs": list(ips), "ipFamilies": list(families),
                   "ipFamilyPolicy": "RequireDualStack"}


def web(spec: dict | None = None) -> dict:
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": spec or dual_stack({"ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                                                   {"name": "dns", "port": 53, "protocol": "UDP"}]})}


def endpoint_slice(name: str, address_type: str, ips, node: str = "node-1") -> dict:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": address_type,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"},
                      {"name": "dns", "port": 8081, "protocol": "UDP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": node} for ip in ips]}


SLICES = [endpoint_slice("web-v4", "IPv4", ["10.244.1.1", "10.244.1.2"]),
          endpoint_slice("web-v6", "IPv6", ["fd00:10:244:1::1"], node="node-2")]


def test_each_family_gets_its_cluster_ip_and_the_endpoints_of_its_address_type():
    by_family = {f: {sp.port_name: sp for sp in service_ports(web(), SLICES, "node-1", f)} for f in ("ip", "ip6")}
    v4, v6 = by_family["ip"], by_family["ip6"]
    assert {sp.cluster_ip for sp in v4.values()} == {V4} and {sp.cluster_ip for sp in v6.values()} == {V6}
    assert [(e.ip, e.port, e.local) for e in v4["http"].endpoints] == [("10.244.1.1", 8080, True),
                                                                      ("10.244.1.2", 8080, True)]
    assert [(e.ip, e.port, e.local) for e in v6["dns"].endpoints] == [("fd00:10:244:1::1", 8081, False)]
    assert (v6["http"].protocol, v6["http"].port, v6["dns"].protocol, v6["dns"].port) == ("tcp", 80, "udp", 53)
    assert v4["http"].key == v6["http"].key, "the same service port, one in each table"


def test_ip_families_order_the_cluster_ips():
    spec = dual_stack({}, ips=(V6, V4), families=("IPv6", "IPv4"))
    assert (cluster_ip(spec, "ip"), cluster_ip(spec, "ip6")) == (V4, V6)
    single = {"clusterIP": V4, "clusterIPs": [V4], "ipFamilies": ["IPv4"]}
    assert (cluster_ip(single, "ip"), cluster_ip(single, "ip6")) == (V4, "")
    v6_only = {"clusterIP": V6, "clusterIPs": [V6], "ipFamilies": ["IPv6"]}
    assert (cluster_ip(v6_only, "ip"), cluster_ip(v6_only, "ip6")) == ("", V6)
    # a client from before dual-stack sets clusterIP alone: its address says its family
    assert (cluster_ip({"clusterIP": V6}, "ip"), cluster_ip({"clusterIP": V6}, "ip6")) == ("", V6)
    headless = {"clusterIP": "None", "clusterIPs": ["None"], "ipFamilies": ["IPv4", "IPv6"]}
    assert (cluster_ip(headless, "ip"), cluster_ip(headless, "ip6")) == ("", "")
    assert service_ports(web({"clusterIP": V4, "clusterIPs": [V4], "ipFamilies": ["IPv4"],
                              "ports": [{"port": 80}]}), SLICES, "", "ip6") == []


def service_ips(nft, family: str, name: str = "service-ips") -> dict[tuple, str] | None:
    """A verdict map of `family`'s table, key -> goto target or verdict (None when the table is missing)."""
    try:
        objs = nft.list_table(family, TABLE)
    except NftError:
        return None
    (m,) = [o["map"] for o in objs if "map" in o and o["map"]["name"] == name]
    return {tuple(k["concat"]): v["goto"]["target"] for k, v in m.get("elem", [])}


def base_chains(nft, family: str) -> set[str]:
    return {o["chain"]["name"] for o in nft.list_table(family, TABLE) if "chain" in o and "hook" in o["chain"]}


def nft_in(netns: str, *args: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, "nft", *args], check=True, capture_output=True,
                          text=True).stdout


async def make_dual_stack(s, name: str = "web") -> None:
    """Rewrite the stored Service `name` as a dual-stack API server keeps one."""
    key = f"/registry/services/default/{name}"
    kv = await s.store.get(key)
    obj = orjson.loads(kv.value)
    obj["spec"] = dual_stack(obj["spec"], ips=(obj["spec"]["clusterIP"], V6))
    await s.store.update(key, orjson.dumps(obj), kv.mod_revision)


async def _async(value):
    return value


async def test_one_proxier_keeps_an_ip_and_an_ip6_table(netns, nft):
    s = await make_stack()
    svcs = s.client.resource("", "v1", "services")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    ip = (await svcs.create(web({"ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                                           {"name": "dns", "port": 53, "protocol": "UDP"}]})))["spec"]["clusterIP"]
    for sl in SLICES:
        await slices.create(sl)
    p = Proxier(s.client, "node-1", "", netns=netns, configs=proxy_configs(), min_sync_period=0.01)
    await p.start()
    try:
        assert await eventually(lambda: _async(p.syncs >= 1))
        assert service_ips(nft, "ip") == {(ip, "tcp", 80): "lb-tcp-2", (ip, "udp", 53): "lb-udp-2"}
        assert service_ips(nft, "ip6") == {}, "a single-stack IPv4 Service has no IPv6 ClusterIP"
        assert base_chains(nft, "ip6") == base_chains(nft, "ip") == {
            "filter-prerouting", "filter-input", "filter-forward", "filter-output", "filter-output-post-dnat",
            "nat-prerouting", "nat-output", "nat-postrouting"}

        await make_dual_stack(s)
        assert await eventually(lambda: _async(p.tables["ip6"].last_report.services_changed))
        assert not p.tables["ip6"].last_report.full, "the IPv6 ClusterIP arrives in a partial sync"
        assert service_ips(nft, "ip6") == {(V6, "tcp", 80): "lb-tcp-1", (V6, "udp", 53): "lb-udp-1"}
        assert service_ips(nft, "ip") == {(ip, "tcp", 80): "lb-tcp-2", (ip, "udp", 53): "lb-udp-2"}
        assert f"{V6} . 80 . 0 : fd00:10:244:1::1 . 8080" in nft_in(netns, "list", "map", "ip6", TABLE,
                                                                    "service-endpoints-tcp")
        assert not any(p.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                                                   {"ip_family": f}) for f in ("IPv4", "IPv6"))

        await slices.delete("web-v6", "default")
        assert await eventually(lambda: _async(service_ips(nft, "ip6") == {})), "no IPv6 endpoints left"
        assert service_ips(nft, "ip6", "no-endpoint-services") == {(V6, "tcp", 80): "reject-chain",
                                                                   (V6, "udp", 53): "reject-chain"}
        assert service_ips(nft, "ip") == {(ip, "tcp", 80): "lb-tcp-2", (ip, "udp", 53): "lb-udp-2"}
    finally:
        await p.stop()
        await s.close()
    assert main(["proxy", "--cleanup", "--proxy-mode", "nftables", "--netns", netns]) == 0
    assert service_ips(nft, "ip") is None and service_ips(nft, "ip6") is None, "--cleanup removes both tables"


async def test_a_failed_transaction_of_one_family_resyncs_that_family_only(netns, nft):
    s = await make_stack()
    svcs = s.client.resource("", "v1", "services")
    ip = (await svcs.create(web({"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]})))["spec"]["clusterIP"]
    for sl in SLICES:
        await s.client.resource("discovery.k8s.io", "v1", "endpointslices").create(sl)
    p = Proxier(s.client, "node-1", "", netns=netns, configs=proxy_configs(), min_sync_period=0.01, sync_period=1000)
    await p.start()
    try:
        assert await eventually(lambda: _async(p.syncs >= 1))
        assert service_ips(nft, "ip") == {(ip, "tcp", 80): "lb-tcp-2"} and service_ips(nft, "ip6") == {}
        # the ip6 table is deleted behind the proxier's back: the partial sync adding the IPv6
        # ClusterIP fails in the kernel and a full sync rebuilds the ip6 table; the ip table,
        # with nothing to change, is left alone
        nft_in(netns, "delete", "table", "ip6", TABLE)
        await make_dual_stack(s)
        assert await eventually(lambda: _async(p.tables["ip6"].last_report.failures))
        assert service_ips(nft, "ip6") == {(V6, "tcp", 80): "lb-tcp-1"}
        v4, v6 = p.tables["ip"].last_report, p.tables["ip6"].last_report
        assert v6.full and v6.ok and v6.failures == 1 and "No such file or directory" in v6.error
        assert not v4.full and not v4.failures and v4.lines == 0
        assert [p.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                                            {"ip_family": f}) for f in ("IPv4", "IPv6")] == [None, 1]
        assert p.health.healthz()[0] == 200 and p.health.oldest_pending is None

        async def failures():  # written in the background, as upstream's broadcaster writes
            events, _ = await s.client.resource("events.k8s.io", "v1", "events").list("default")
            return [e["note"].split(" (")[0] for e in events if e["reason"] == "SyncProxyRulesFailed"]
        assert await eventually(failures) == ["nftables transaction on table ip6 kube-proxy failed"]
    finally:
        await p.stop()
        await s.close()


# each pod has an address of each family
POD4, OTHER4 = "10.244.1.1", "10.244.1.2"
POD6, OTHER6 = "fd00:10:244:1::1", "fd00:10:244:1::2"


@pytest.fixture
def pods(netns):
    """Dual-stack pod namespaces (POD, OTHER) routed through `netns` (the node)."""
    with attached(netns, [(POD4, POD6), (OTHER4, OTHER6)]) as names:
        yield names


@pytest.mark.parametrize("proto,port", [("tcp", 80), ("udp", 53)])
async def test_both_cluster_ips_of_a_dual_stack_service_reach_its_pods(netns, pods, proto, port):
    """The pod serves two ports on each family; the Service's IPv4 ClusterIP
    balances over its IPv4 endpoints and its IPv6 ClusterIP over its IPv6
    ones, from another pod (source kept) and from the pod itself (hairpin,
    masqueraded to the node's address of that family)."""
    server = serve(pods[POD4], proto)
    s = await make_stack()
    p = None
    try:
        svcs = s.client.resource("", "v1", "services")
        slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
        spec = {"ports": [{"name": "p", "port": port, "protocol": proto.upper()}]}
        v4 = (await svcs.create(web(spec)))["spec"]["clusterIP"]
        await make_dual_stack(s)
        for name, family, ip in (("web-v4", "IPv4", POD4), ("web-v6", "IPv6", POD6)):
            await slices.create({
                "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": family, "ports": [{"name": "p", "port": 8080, "protocol": proto.upper()}],
                "endpoints": [{"addresses": [ip]}]})
            await slices.create({
                "metadata": {"name": f"{name}-b", "namespace": "default",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": family, "ports": [{"name": "p", "port": 8081, "protocol": proto.upper()}],
                "endpoints": [{"addresses": [ip]}]})
        v4_cfg, v6_cfg = proxy_configs()
        configs = (replace(v4_cfg, cluster_cidr="10.244.0.0/16"), replace(v6_cfg, cluster_cidr="fd00:10:244::/48"))
        p = Proxier(s.client, "node-1", "", netns=netns, configs=configs, min_sync_period=0.01)
        await p.start()
        assert await eventually(lambda: _async(p.syncs >= 1 and all(
            t.last_report is not None and t.last_report.ok and len(t.flat) == 1 for t in p.tables.values())))
        for client, ip, source in ((OTHER6, V6, OTHER6), (POD6, V6, NODE6), (OTHER4, v4, OTHER4), (POD4, v4, NODE4)):
            got = await asyncio.to_thread(answers, pods[client], proto, ip, port)
            assert got == {("8080", source), ("8081", source)}, (client, ip)
    finally:
        if p is not None:
            await p.stop()
        await s.close()
        server.kill()
        server.wait()


async def test_each_table_drops_the_unallocated_addresses_of_its_familys_service_cidrs(netns, nft):
    """OnServiceCIDRsChanged: a ServiceCIDR's ranges join the drop of unallocated ClusterIPs in
    the table of their family (a full sync of that table), and leave it with the object."""
    s = await make_stack()
    cidrs = s.client.resource("networking.k8s.io", "v1", "servicecidrs")
    await cidrs.create({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12"]}})  # kube-apiserver's
    p = Proxier(s.client, "node-1", "", netns=netns, configs=proxy_configs(), min_sync_period=0.01)
    await p.start()

    def drops(family: str) -> str:
        return nft_in(netns, "list", "chain", family, TABLE, "cluster-ips-check").split("reject")[1]
    try:
        assert await eventually(lambda: _async(p.syncs >= 1))
        assert "10.96.0.0/12" in drops("ip") and "drop" not in drops("ip6")
        await cidrs.create({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/16", "fd00:100::/108"]}})
        assert await eventually(lambda: _async("10.200.0.0/16" in drops("ip") and "fd00:100::/108" in drops("ip6")))
        assert "10.96.0.0/12" in drops("ip")
        await cidrs.delete("extra")
        assert await eventually(lambda: _async("10.200.0.0/16" not in drops("ip") and "drop" not in drops("ip6")))
        assert "10.96.0.0/12" in drops("ip")
    finally:
        await p.stop()
        await s.close()
