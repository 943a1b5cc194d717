"""NetworkPolicy semantics to per-pod allows, and allows to nft rules."""

from nanokube.netpol.policy import Allow, Cluster, Peer, PortMatch, rules_for
from nanokube.netpol.rules import TABLE, transaction


def pod(name, ns, ip, labels=None, node="n1", ports=()):
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [
                {"name": n, "containerPort": p} for n, p in ports]}]},
            "status": {"podIP": ip}}


def ns(name, **labels):
    return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def policy(name, namespace, **spec):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"podSelector": {}, **spec}}


SERVER = pod("web", "server", "10.244.1.2", {"app": "web"}, ports=[("http", 8080)])
CLIENT = pod("curl", "client", "10.244.2.3", {"role": "tester"}, node="n2")
OTHER = pod("other", "other", "10.244.2.4", {"role": "tester"}, node="n2")
CLUSTER = Cluster([SERVER, CLIENT, OTHER], [ns("server"), ns("client", team="a"), ns("other")])


def test_unselected_pods_are_not_isolated():
    assert rules_for([SERVER, CLIENT], [], CLUSTER) == {}
    assert rules_for([CLIENT], [policy("deny", "server", policyTypes=["Ingress"])], CLUSTER) == {}


def test_default_deny_ingress():
    r = rules_for([SERVER], [policy("deny", "server", policyTypes=["Ingress"])], CLUSTER)["uid-web"]
    assert (r.ip, r.ingress, r.egress, r.policies) == ("10.244.1.2", [], None, ["deny"])


def test_namespace_and_pod_selectors_and_named_ports():
    allow = policy("allow", "server", policyTypes=["Ingress"], ingress=[{
        "from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}, "podSelector": {"matchLabels": {"role": "tester"}}}],
        "ports": [{"protocol": "TCP", "port": "http"}]}])
    r = rules_for([SERVER], [allow], CLUSTER)["uid-web"]
    assert len(r.ingress) == 1
    assert r.ingress[0].peer == Peer(ips=frozenset({"10.244.2.3"}))
    assert r.ingress[0].ports == (PortMatch("TCP", 8080, 8080),)
    any_ns = policy("any", "server", ingress=[{"from": [{"namespaceSelector": {}}]}])
    r = rules_for([SERVER], [any_ns], CLUSTER)["uid-web"]
    assert r.ingress[0].peer.ips == frozenset({"10.244.1.2", "10.244.2.3", "10.244.2.4"}) and r.ingress[0].ports is None


def test_egress_and_ip_blocks():
    egress = policy("out", "client", policyTypes=["Egress"], egress=[
        {"to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.1.0/24"]}}], "ports": [{"port": 80, "endPort": 90}]}])
    r = rules_for([CLIENT], [egress], CLUSTER)["uid-curl"]
    assert r.ingress is None and r.egress[0].peer == Peer(cidr="10.244.0.0/16", excepts=("10.244.1.0/24",))
    assert r.egress[0].ports == (PortMatch("TCP", 80, 90),)


def test_transaction():
    allow = policy("allow", "server", ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}],
                                                 "ports": [{"port": 8080}]}])
    egress = policy("out", "client", policyTypes=["Egress"], egress=[])
    rules = rules_for([SERVER, CLIENT], [allow, egress], CLUSTER)
    text = transaction(rules, lambda uid: "v" + uid.replace("-", "")[:12])
    lines = text.splitlines()
    assert lines[:3] == [f"add table inet {TABLE}", f"delete table inet {TABLE}", f"add table inet {TABLE}"]
    assert f"add rule inet {TABLE} ingress-uidweb ip saddr {{ 10.244.2.3 }} tcp dport 8080 return" in lines
    assert f"add rule inet {TABLE} ingress-uidweb counter drop" in lines
    assert f'add rule inet {TABLE} forward oifname "vuidweb" jump ingress-uidweb' in lines
    assert f'add rule inet {TABLE} forward iifname "vuidcurl" jump egress-uidcurl' in lines
    assert f"add rule inet {TABLE} egress-uidcurl counter drop" in lines


def test_egress_named_ports_resolve_per_destination_pod():
    out = policy("dns", "client", policyTypes=["Egress"], egress=[{"ports": [{"port": "http"}, {"port": 53, "protocol": "UDP"}]}])
    r = rules_for([CLIENT], [out], CLUSTER)["uid-curl"]
    assert Allow(Peer(), (PortMatch("UDP", 53, 53),)) in r.egress
    assert Allow(Peer(ips=frozenset({"10.244.1.2"})), (PortMatch("TCP", 8080, 8080),)) in r.egress
    block = policy("block", "client", policyTypes=["Egress"], egress=[
        {"to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.2.0/24"]}}], "ports": [{"port": "http"}]}])
    r = rules_for([CLIENT], [block], CLUSTER)["uid-curl"]
    assert r.egress == [Allow(Peer(ips=frozenset({"10.244.1.2"})), (PortMatch("TCP", 8080, 8080),))]
