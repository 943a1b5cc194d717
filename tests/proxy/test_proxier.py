import asyncio
import logging
import re
import subprocess

import orjson
from prometheus_client import generate_latest

from nanokube.apiserver.loopback import connector
from nanokube.clock import Clock
from nanokube.node.runtime.netns import open_in_netns
from nanokube.proxy.health import ZERO_TIME
from nanokube.proxy.modes import DEFAULT_CHANGING
from nanokube.proxy.nftables.layout import TABLE
from nanokube.proxy.nftables.nft import Nft, NftError
from nanokube.proxy.proxier import Proxier, service_ports
from nanokube.proxy.runner import HEALTHZ_ADDRESS, METRICS_ADDRESS, MODE_EVENT_REASON, NodeProxies
from nanokube.proxy.server import split_address
from tests.controllers import eventually, make_stack


def service(ip="10.96.0.20"):
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


#: the IPv4 proxier's series (kube-proxy's sync metrics are labelled by ip_family)
V4 = {"ip_family": "IPv4"}


def endpoint_slice(ips):
    return {"metadata": {"name": "web-abc", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}


def test_service_ports_carry_affinity_traffic_policies_and_local_endpoints():
    svc = service()
    svc["spec"] |= {"type": "NodePort", "sessionAffinity": "ClientIP", "externalTrafficPolicy": "Local",
                    "internalTrafficPolicy": "Local"}
    svc["spec"]["ports"][0]["nodePort"] = 30080
    sl = endpoint_slice(["10.244.0.2", "10.244.1.2"])
    sl["endpoints"][0]["nodeName"] = "node-0"
    sl["endpoints"][1]["nodeName"] = "node-1"
    (sp,) = service_ports(svc, [sl], "node-1")
    assert sp.affinity_timeout == 10800 and sp.internal_local and sp.external_local and sp.node_port == 30080
    assert [(e.ip, e.port, e.local) for e in sp.endpoints] == [("10.244.0.2", 8080, False), ("10.244.1.2", 8080, True)]
    svc["spec"] |= {"type": "ClusterIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}
    (sp,) = service_ports(svc, [sl], "node-1")
    assert sp.affinity_timeout == 60 and not sp.external_local, "externalTrafficPolicy applies to external types only"


def endpoints_of(nft, ip="10.96.0.20"):
    """How many endpoints the kernel balances `ip`:80 over (its `lb-tcp-N`
    chain in `service-ips`, with that many slots in `service-endpoints-tcp`), or None."""
    try:
        objs = nft.list_table("ip", TABLE)
    except NftError:
        return None
    maps = {o["map"]["name"]: o["map"].get("elem", []) for o in objs if "map" in o}
    target = next((v["goto"]["target"] for k, v in maps.get("service-ips", []) if k["concat"] == [ip, "tcp", 80]), None)
    if target is None:
        return None
    slots = [k for k, _ in maps["service-endpoints-tcp"] if k["concat"][:2] == [ip, 80]]
    assert target == f"lb-tcp-{len(slots)}", (target, slots)
    return len(slots)


async def test_proxier_programs_services_and_syncs_changes_partially(netns, nft):
    s = await make_stack()
    svcs = s.client.resource("", "v1", "services")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    await svcs.create(service())
    await slices.create(endpoint_slice(["10.244.1.1", "10.244.1.2"]))
    p = Proxier(s.client, "node-1", "192.168.0.1", netns=netns, min_sync_period=0.01)
    await p.start()
    try:
        assert await eventually(lambda: _async(endpoints_of(nft) == 2))
        assert await eventually(lambda: _async(p.syncs >= 1 and (p.registry.get_sample_value(
            "kubeproxy_sync_full_proxy_rules_duration_seconds_count", V4) or 0) >= 1))
        cur = await slices.get("web-abc", "default")
        await slices.update({**cur, **{k: v for k, v in endpoint_slice(
            ["10.244.1.1", "10.244.1.2", "10.244.1.3"]).items() if k != "metadata"}})
        assert await eventually(lambda: _async(endpoints_of(nft) == 3))
        assert await eventually(lambda: _async((p.registry.get_sample_value(
            "kubeproxy_sync_partial_proxy_rules_duration_seconds_count", V4) or 0) >= 1))
        assert not p.tables["ip"].last_report.full
        # no failure, no series: client_golang writes a vector's child once it was used
        assert p.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", V4) is None
        await svcs.delete("web", "default")
        assert await eventually(lambda: _async(endpoints_of(nft) is None))
    finally:
        await p.stop()
        await s.close()


async def _async(value):
    return value


def nft_in(netns, *args):
    return subprocess.run(["ip", "netns", "exec", netns, "nft", *args], check=True, capture_output=True, text=True)


async def test_a_failed_transaction_is_counted_and_retried_as_a_full_sync(netns, nft, caplog):
    s = await make_stack()
    svcs = s.client.resource("", "v1", "services")
    slices = s.client.resource("discovery.k8s.io", "v1", "endpointslices")
    await svcs.create(service())
    await slices.create(endpoint_slice(["10.244.1.1", "10.244.1.2"]))
    p = Proxier(s.client, "node-1", "", netns=netns, min_sync_period=0.01, sync_period=1000)
    await p.start()
    try:
        assert await eventually(lambda: _async(endpoints_of(nft) == 2))
        # the ruleset is flushed behind the proxier's back (as a firewall reload does): the next
        # partial sync's transaction fails in the kernel, and the full retry rebuilds the table
        nft_in(netns, "flush", "ruleset")
        cur = await slices.get("web-abc", "default")
        with caplog.at_level(logging.WARNING):
            await slices.update({**cur, "endpoints": endpoint_slice(["10.244.1.1", "10.244.1.2", "10.244.1.3"])[
                "endpoints"]})
            assert await eventually(lambda: _async(p.registry.get_sample_value(
                "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", V4) == 1 and p.tables["ip"].last_report.failures))
        assert endpoints_of(nft) == 3
        report = p.tables["ip"].last_report
        assert report.full and report.ok and report.failures == 1
        assert "retrying as a full sync" in caplog.text
        # the health tracker and the Event are updated just after the report: wait for them
        assert await eventually(lambda: _async(p.health.healthz()[0] == 200 and p.health.oldest_pending is None))
        (ev,) = await eventually(lambda: failure_events(s))
        assert ev["type"] == "Warning" and ev["regarding"] == {"kind": "Node", "name": "node-1", "uid": "node-1"}
        assert ev["note"].startswith(
            "nftables transaction on table ip kube-proxy failed (the full sync that followed succeeded): ")
        assert len(ev["note"]) <= 1024, "the rules nft quotes are cut to the note's limit"
    finally:
        await p.stop()
        await s.close()


async def failure_events(s) -> list[dict]:
    """kube-proxy's SyncProxyRulesFailed Events (events.k8s.io/v1)."""
    items, _ = await s.client.resource("events.k8s.io", "v1", "events").list("default")
    return [e for e in items if e["reason"] == "SyncProxyRulesFailed"]


async def _folded(s) -> list[dict] | None:
    """The failure Events once the second table's failure has folded into the first's series."""
    events = await failure_events(s)
    return events if any((e.get("series") or {}).get("count") == 2 for e in events) else None


class BrokenNft(Nft):
    def apply(self, transaction: str) -> None:
        raise NftError("Error: Could not process rule: Operation not supported")


class StepClock(Clock):
    """Wall time set by the test, a microsecond later at each read (Events
    are named by the time they are recorded); short sleeps only yield (the
    proxier's batching sleep), the event broadcaster's minutes-long timers never end."""

    def __init__(self):
        self.t = 1_800_000_000.0

    def now(self) -> float:
        self.t += 1e-6
        return self.t

    async def sleep(self, seconds: float) -> None:
        await (asyncio.sleep(0) if seconds < 60 else asyncio.Event().wait())


async def test_a_sync_that_keeps_failing_is_logged_counted_and_fails_healthz(caplog):
    s = await make_stack()
    await s.client.resource("", "v1", "services").create(service("10.96.0.21"))
    clock = StepClock()
    p = Proxier(s.client, "node-1", "", nft=BrokenNft(), clock=clock, min_sync_period=0, sync_period=1000)
    with caplog.at_level(logging.ERROR):
        await p.start()
        try:
            assert await eventually(lambda: _async(p.syncs >= 1))
            assert all(not t.last_report.ok and t.syncer.need_full for t in p.tables.values())
            assert [p.registry.get_sample_value("kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                                                {"ip_family": f}) for f in ("IPv4", "IPv6")] == [1, 1]
            for family in ("ip", "ip6"):
                assert f"node-1: nftables sync of table {family} kube-proxy failed" in caplog.text
            assert "Operation not supported" in caplog.text
            # the ip6 table's failure is the same Event to the events.k8s.io recorder (its note is not
            # compared): one Event, a series of two
            [ev] = await eventually(lambda: _folded(s))
            assert ev["note"] == ("nftables transaction on table ip kube-proxy failed (the kernel keeps the last "
                                  "good ruleset; a full sync is retried): Error: Could not process rule: "
                                  "Operation not supported")
            await p.sync_once()
            assert not p.broadcaster.pending(), "the same failure of a table is not reported again"
            assert p.health.healthz()[0] == 200, "within the health timeout"
            clock.t += 2000
            code, body = p.health.healthz()
            assert code == 503 and orjson.loads(body)["lastUpdated"] == ZERO_TIME
        finally:
            await p.stop()
            await s.close()


class ChangingNft(Nft):
    """Every transaction fails, with the error the test sets."""
    error = "Error: one"

    def apply(self, transaction: str) -> None:
        raise NftError(self.error)


async def test_failures_are_events_k8s_io_events_of_kube_proxy_on_its_node():
    """Node events go through the proxier's events.k8s.io recorder, as upstream's kube-proxy's
    (events.NewBroadcaster over EventsV1): reported by kube-proxy, instance kube-proxy-<node>,
    about the Node by name and UID, in `default`; a later failure on the node is a repeat of
    that Event (its series), not another Event."""
    s = await make_stack()
    nft = ChangingNft()
    p = Proxier(s.client, "node-1", "", nft=nft, clock=StepClock(), min_sync_period=0, sync_period=1000)
    await p.start()
    try:
        assert await eventually(lambda: _async(p.syncs >= 1))
        [ev] = await eventually(lambda: _folded(s))
        assert (ev["type"], ev["reason"], ev["action"]) == ("Warning", "SyncProxyRulesFailed", "SyncProxyRules")
        assert (ev["reportingController"], ev["reportingInstance"]) == ("kube-proxy", "kube-proxy-node-1")
        assert ev["regarding"] == {"kind": "Node", "name": "node-1", "uid": "node-1"}
        assert ev["metadata"]["namespace"] == "default" and ev["note"].endswith("): Error: one")
        nft.error = "Error: two"
        await p.sync_once()  # counted in the series, in memory: written at the next refresh
        assert not p.broadcaster.pending()
        assert len(await failure_events(s)) == 1
    finally:
        await p.stop()
        await s.close()


async def test_node_proxies_serve_health_and_metrics_in_the_node_namespace(netns):
    lo_up(netns)
    s = await make_stack()
    await s.client.resource("", "v1", "services").create(service("10.96.0.22"))
    proxies = NodeProxies(connector(s.rest), [("node-1", "", netns)], [DEFAULT_CHANGING], min_sync_period=0.01)
    await proxies.start()
    try:
        assert await eventually(lambda: _async(proxies.proxiers[0].syncs >= 1))
        health = await asyncio.to_thread(http_get_in, netns, HEALTHZ_ADDRESS.replace("0.0.0.0", "127.0.0.1"),
                                         "/healthz")
        assert health.startswith("HTTP/1.1 200") and '"lastUpdated"' in health
        metrics = await asyncio.to_thread(http_get_in, netns, METRICS_ADDRESS, "/metrics")
        assert float(re.search(r'^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\S+)$', metrics,
                               re.MULTILINE)[1]) >= 1
        text = generate_latest(proxies.metrics).decode()
        assert 'kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4",node="node-1"}' in text

        async def events():
            items, _ = await s.client.resource("events.k8s.io", "v1", "events").list("default")
            return items if len(items) == 2 else None
        # upstream's birth cry, then the mode's warning
        assert sorted((e["type"], e["reason"], e["action"], e["regarding"]["name"]) for e in await eventually(events)) \
            == [("Normal", "Starting", "StartKubeProxy", "node-1"), ("Warning", MODE_EVENT_REASON, "StartKubeProxy", "node-1")]
    finally:
        await proxies.stop()
        await s.close()


def lo_up(netns: str) -> None:
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)


def http_get_in(netns: str, address: str, path: str) -> str:
    """One HTTP/1.1 GET over a socket opened in `netns` (the host cannot route there)."""
    with open_in_netns(netns) as sock:
        sock.settimeout(5)
        sock.connect(split_address(address))
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_endpoints_serving_while_terminating_are_used_where_none_is_ready():
    """KEP-1669 (GA in 1.28), upstream's CategorizeEndpoints: a Cluster policy uses the ready endpoints,
    else, none being ready anywhere, those serving while they terminate; a Local policy this node's
    ready ones, else its serving terminating ones. Found by fuzz54: they were never used, so a
    Service whose pods were all terminating (a rollout's end, an ETP Local node draining) lost its
    traffic while they still served."""
    svc = service()
    svc["spec"] |= {"type": "NodePort", "externalTrafficPolicy": "Local"}
    svc["spec"]["ports"][0]["nodePort"] = 30080
    sl = endpoint_slice(["10.244.0.2", "10.244.1.2", "10.244.1.3", "10.244.1.4"])
    sl["endpoints"][0] |= {"nodeName": "node-0"}
    sl["endpoints"][1] |= {"nodeName": "node-1", "conditions": {"ready": False, "serving": True, "terminating": True}}
    sl["endpoints"][2] |= {"nodeName": "node-1", "conditions": {"ready": False, "serving": False, "terminating": True}}
    sl["endpoints"][3] |= {"nodeName": "node-1", "conditions": {"ready": False}}
    (sp,) = service_ports(svc, [sl], "node-1")
    assert [e.ip for e in sp.cluster_endpoints] == ["10.244.0.2"]  # a ready one elsewhere wins
    assert [e.ip for e in sp.local_endpoints] == ["10.244.1.2"]  # no ready one here: the serving terminating one
    sl["endpoints"][0]["conditions"] = {"ready": False, "serving": True, "terminating": True}
    (sp,) = service_ports(svc, [sl], "node-1")
    assert [e.ip for e in sp.cluster_endpoints] == ["10.244.0.2", "10.244.1.2"]
    sl["endpoints"][1]["conditions"] = {"ready": True}
    (sp,) = service_ports(svc, [sl], "node-1")
    assert [e.ip for e in sp.cluster_endpoints] == [e.ip for e in sp.local_endpoints] == ["10.244.1.2"]
