"""Cluster DNS's answers (dns), which the simulated runtime's applets and the process runtime's real
server share: CoreDNS's kubernetes plugin's records, rcodes and the kubelet's resolv.conf."""

from __future__ import annotations

import pytest

from nanokube.node import dns
from nanokube.node.dns import Record

ZONE = "cluster.local"


def _service(name: str, ip: str, *ports: tuple[str, int, str], **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": ip, **({"clusterIPs": [ip]} if ip != "None" else {}),
                     "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports], **spec}}


def _slice(service: str, ports: list[tuple[str, int]], *endpoints: tuple[str, bool, str]) -> dict:
    return {"metadata": {"name": f"{service}-x", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in ports],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}, **({"hostname": host} if host else {})}
                          for ip, ready, host in endpoints]}


@pytest.fixture
def cluster():
    services = [
        _service("web", "10.96.0.50", ("http", 80, "TCP"), ("", 81, "TCP")),
        _service("db", "None", ("pg", 5432, "TCP")),
        _service("lonely", "None", ("pg", 5432, "TCP")),
        _service("early", "None", ("pg", 5432, "TCP"), publishNotReadyAddresses=True),
        {"metadata": {"name": "ext", "namespace": "default"}, "spec": {"type": "ExternalName",
                                                                      "externalName": "Example.com."}},
        {"metadata": {"name": "alias", "namespace": "default"}, "spec": {
            "type": "ExternalName", "externalName": f"web.default.svc.{ZONE}"}},
    ]
    slices = [
        _slice("web", [("http", 8080)], ("10.244.0.5", True, "")),
        _slice("db", [("pg", 15432)], ("10.244.0.7", True, "db-0"), ("10.244.0.8", True, ""),
               ("10.244.0.9", False, "db-2")),
        _slice("early", [("pg", 5432)], ("10.244.1.1", False, "")),
    ]
    return dns.Listed(services, slices, [])


def ask(cluster, name: str, qtype: str = "A") -> tuple[str, list[str]]:
    got = dns.answer(cluster, name, qtype)
    return got.rcode, [r.data for r in got.records]


def test_a_cluster_ip_services_name_is_its_cluster_ip_and_an_aaaa_question_has_no_answer(cluster):
    assert ask(cluster, f"web.default.svc.{ZONE}") == ("NOERROR", ["10.96.0.50"])
    assert ask(cluster, f"WEB.Default.svc.{ZONE}.") == ("NOERROR", ["10.96.0.50"])  # case and the root's dot
    # the name exists: NODATA, not NXDOMAIN, which would end musl's lookup of the A beside it
    assert ask(cluster, f"web.default.svc.{ZONE}", "AAAA") == ("NOERROR", [])
    assert ask(cluster, f"nope.default.svc.{ZONE}") == ("NXDOMAIN", [])
    assert ask(cluster, f"web.other.svc.{ZONE}") == ("NXDOMAIN", [])
    assert ask(cluster, f"web.default.{ZONE}") == ("NXDOMAIN", [])


def test_a_name_outside_the_zone_is_servfail_and_not_authoritative(cluster):
    got = dns.answer(cluster, "example.com", "A")
    assert (got.rcode, got.records, got.authoritative) == ("SERVFAIL", [], False)
    assert ask(cluster, "web.default") == ("SERVFAIL", [])  # a search-path miss: the resolver goes on


def test_a_headless_services_name_is_its_ready_endpoints_and_each_has_a_name_of_its_own(cluster):
    assert ask(cluster, f"db.default.svc.{ZONE}") == ("NOERROR", ["10.244.0.7", "10.244.0.8"])
    assert ask(cluster, f"db-0.db.default.svc.{ZONE}") == ("NOERROR", ["10.244.0.7"])
    assert ask(cluster, f"10-244-0-8.db.default.svc.{ZONE}") == ("NOERROR", ["10.244.0.8"])  # no hostname: dashed
    assert ask(cluster, f"10-244-0-7.db.default.svc.{ZONE}") == ("NXDOMAIN", [])  # it is db-0
    assert ask(cluster, f"db-2.db.default.svc.{ZONE}") == ("NXDOMAIN", [])  # not ready
    assert ask(cluster, f"lonely.default.svc.{ZONE}") == ("NXDOMAIN", [])  # the spec: no ready endpoint, NXDOMAIN
    assert ask(cluster, f"early.default.svc.{ZONE}") == ("NOERROR", ["10.244.1.1"])  # publishNotReadyAddresses
    # a ClusterIP Service's endpoints have names too
    assert ask(cluster, f"10-244-0-5.web.default.svc.{ZONE}") == ("NOERROR", ["10.244.0.5"])


def test_srv_records_name_each_named_port(cluster):
    got = dns.answer(cluster, f"_http._tcp.web.default.svc.{ZONE}", "SRV")
    assert got.records == [Record(f"_http._tcp.web.default.svc.{ZONE}", "SRV", f"web.default.svc.{ZONE}", 80, 100)]
    assert got.additional == [Record(f"web.default.svc.{ZONE}", "A", "10.96.0.50")]
    # headless: one per ready endpoint, at the endpoint's port, the weights split
    got = dns.answer(cluster, f"_pg._tcp.db.default.svc.{ZONE}", "SRV")
    assert [(r.data, r.port, r.weight) for r in got.records] == [
        (f"db-0.db.default.svc.{ZONE}", 15432, 50), (f"10-244-0-8.db.default.svc.{ZONE}", 15432, 50)]
    assert [r.data for r in got.additional] == ["10.244.0.7", "10.244.0.8"]
    assert ask(cluster, f"_http._udp.web.default.svc.{ZONE}", "SRV") == ("NXDOMAIN", [])  # no such protocol
    assert ask(cluster, f"_http._tcp.web.default.svc.{ZONE}", "A") == ("NOERROR", [])


def test_a_pointer_names_a_cluster_ips_service_or_an_endpoints_names(cluster):
    assert ask(cluster, "50.0.96.10.in-addr.arpa", "PTR") == ("NOERROR", [f"web.default.svc.{ZONE}"])
    assert ask(cluster, "7.0.244.10.in-addr.arpa.", "PTR") == ("NOERROR", [f"db-0.db.default.svc.{ZONE}"])
    assert ask(cluster, "5.0.244.10.in-addr.arpa", "PTR") == ("NOERROR", [f"10-244-0-5.web.default.svc.{ZONE}"])
    assert ask(cluster, "9.0.244.10.in-addr.arpa", "PTR") == ("NXDOMAIN", [])  # not ready
    assert ask(cluster, "3.2.1.10.in-addr.arpa", "PTR") == ("NXDOMAIN", [])
    assert ask(cluster, "50.0.96.10.in-addr.arpa", "A") == ("NOERROR", [])


def test_pod_names_echo_their_dashed_address_and_the_schema_version_is_published(cluster):
    assert ask(cluster, f"10-244-3-4.anyns.pod.{ZONE}") == ("NOERROR", ["10.244.3.4"])  # pods insecure: unchecked
    assert ask(cluster, f"10-244-3.anyns.pod.{ZONE}") == ("NXDOMAIN", [])
    assert ask(cluster, f"dns-version.{ZONE}", "TXT") == ("NOERROR", [dns.SCHEMA_VERSION])
    assert ask(cluster, ZONE) == ("NOERROR", [])


def test_an_external_name_is_a_cname_followed_inside_the_zone(cluster):
    assert ask(cluster, f"ext.default.svc.{ZONE}") == ("NOERROR", ["example.com"])
    got = dns.answer(cluster, f"alias.default.svc.{ZONE}", "A")
    assert [(r.type, r.data) for r in got.records] == [("CNAME", f"web.default.svc.{ZONE}"), ("A", "10.96.0.50")]


HOST = "# the node's\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch corp.example lab.example\noptions rotate\n"


def _pod(**spec) -> dict:
    return {"metadata": {"name": "p", "namespace": "ml"}, "spec": spec}


def test_cluster_first_puts_the_clusters_search_path_before_the_nodes():
    assert dns.resolver(_pod(), host=HOST) == (
        [dns.DNS_SERVER], ["ml.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "lab.example"],
        ["ndots:5"])
    assert dns.resolv_conf(_pod(), host=HOST) == (
        "search ml.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n"
        "nameserver 10.96.0.10\noptions ndots:5\n")


@pytest.mark.parametrize("pod", [
    _pod(dnsPolicy="Default"), _pod(hostNetwork=True),  # a hostNetwork pod's ClusterFirst is Default
    _pod(),  # with no cluster DNS server known
])
def test_default_is_the_nodes_resolver(pod):
    cluster_dns = () if not pod["spec"] else (dns.DNS_SERVER,)
    assert dns.resolver(pod, cluster_dns, HOST) == (
        ["192.168.1.1", "192.168.1.2"], ["corp.example", "lab.example"], ["rotate"])


def test_cluster_first_with_host_net_and_none_and_the_kubelets_limits():
    assert dns.resolver(_pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), host=HOST)[0] == [dns.DNS_SERVER]
    none = _pod(dnsPolicy="None", dnsConfig={"nameservers": ["1.1.1.1"], "searches": ["a.example"],
                                             "options": [{"name": "ndots", "value": "2"}]})
    assert dns.resolv_conf(none, host=HOST) == "search a.example\nnameserver 1.1.1.1\noptions ndots:2\n"
    many = _pod(dnsPolicy="Default", dnsConfig={"nameservers": ["1.1.1.1", "8.8.8.8"]})
    assert dns.resolver(many, host=HOST)[0] == ["192.168.1.1", "192.168.1.2", "1.1.1.1"]  # at most 3


def test_a_container_mounting_its_own_resolv_conf_keeps_it():
    assert dns.mounted({"name": "c"})
    assert not dns.mounted({"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/etc/resolv.conf"}]})
