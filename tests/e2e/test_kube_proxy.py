"""`nanokube proxy` as its own process: kube-proxy for one node of a plain
`nanokube up`, over HTTPS with the admin kubeconfig, programming nftables in
a private network namespace the test creates (standing in for the node).

Skipped (loudly) only without root, `ip` or `nft`. The namespace (and with
it any table left in it) and the proxy process are removed even when a test
fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from .conftest import wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
    reason="SKIPPED LOUDLY: kube-proxy's nftables need root, ip and nft (run scripts/nftables.sh)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nft(netns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", netns, "nft", *args], capture_output=True, text=True, check=False)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def nanokube_proxy(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nanokube.cli", "proxy", *args], check=False, capture_output=True,
                          text=True, timeout=60, **kw)


@pytest.fixture
def netns():
    name = f"nk-e2e-proxy-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@contextlib.contextmanager
def running_proxy(cluster, netns: str, *flags: str, node: str = ""):
    """A `nanokube proxy` for `node` (default: the cluster's first) with `flags`; (process, node, healthz URL,
    metrics URL). Its log is the data directory's proxy-NETNS.log."""
    node = node or cluster.kubectl_json("get", "nodes")["items"][0]["metadata"]["name"]
    hport, mport = free_port(), free_port()
    with open(cluster.data_dir / f"proxy-{netns}.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nanokube.cli", "proxy", "--kubeconfig", cluster.kubeconfig, "--hostname-override",
             node, "--netns", netns, "--healthz-bind-address", f"127.0.0.1:{hport}", "--metrics-bind-address",
             f"127.0.0.1:{mport}", "--min-sync-period", "100ms", *flags],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield proc, node, f"http://127.0.0.1:{hport}", f"http://127.0.0.1:{mport}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def proxy(cluster, netns):
    with running_proxy(cluster, netns, "--sync-period", "90s") as p:
        yield p


def service_and_slice(name: str) -> list[str]:
    """A selector-less Service and its hand-made EndpointSlice (no pods needed)."""
    return [json.dumps(o) for o in (
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
         "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": f"{name}-1", "namespace": "default", "labels": {"kubernetes.io/service-name": name}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
         "endpoints": [{"addresses": [f"10.244.9.{i}"], "conditions": {"ready": True}} for i in (1, 2)]})]


def test_proxy_programs_its_namespace_serves_health_and_metrics_and_keeps_rules_on_exit(cluster, netns, proxy):
    proc, node, healthz, metrics = proxy
    for manifest in service_and_slice("kp-web"):
        cluster.kubectl("apply", "-f", "-", input=manifest)
    ip = cluster.kubectl_json("get", "service", "kp-web")["spec"]["clusterIP"]

    # (the table holds other Services too, the kubernetes Service's one endpoint among them: wait for
    # this Service's two endpoints, not only its ClusterIP, which is there before its slice)
    table = wait_for(lambda: (t := nft(netns, "list", "table", "ip", "kube-proxy").stdout)
                     and f"{ip} . tcp . 80 : goto lb-tcp-2" in t and t, 30,
                     "the Service's ClusterIP to its two endpoints in the namespace's kube-proxy table")
    assert "numgen random mod 2 map @service-endpoints-tcp" in table

    code, body = get(f"{healthz}/healthz")
    doc = json.loads(body)
    assert code == 200 and doc["lastUpdated"] and doc["currentTime"] and doc["nodeEligible"] is True
    assert get(f"{healthz}/livez")[0] == 200
    text = wait_for(lambda: (t := get(f"{metrics}/metrics")[1]) and
                    'kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}' in t and t, 60, "sync metrics")
    # no failed sync, no failure series: client_golang writes a vector's child once it was used
    assert "kubeproxy_sync_proxy_rules_nftables_sync_failures_total{" not in text
    assert get(f"{metrics}/proxyMode")[1] == "nftables"
    code, flagz = get(f"{metrics}/flagz")
    # (on the metrics server; durations as Go prints them, after a delimiter zpages picks at random)
    assert code == 200 and re.search(r"^sync-period(:|: |=| )1m30s$", flagz, re.M)
    assert re.search(r"^min-sync-period(:|: |=| )100ms$", flagz, re.M)

    # written from the proxy's recorder queue, maybe after the rules and metrics waited for
    wait_for(lambda: any(e["reason"] == "ProxyModeWarning" and "planned for 1.40" in e["message"] for e in
                         cluster.kubectl_json("get", "events", "--field-selector",
                                              f"involvedObject.name={node}")["items"]), 30,
             "an unset --proxy-mode warned about on the proxy's Node")

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert ip in nft(netns, "list", "table", "ip", "kube-proxy").stdout, "kube-proxy leaves its rules on exit"
    r = nanokube_proxy("--cleanup", "--proxy-mode", "nftables", "--netns", netns)
    assert r.returncode == 0, r.stderr
    assert nft(netns, "list", "table", "ip", "kube-proxy").returncode != 0, "--cleanup removes the table"


def test_proxy_refuses_ipvs_before_touching_anything(cluster, netns):
    r = nanokube_proxy("--kubeconfig", cluster.kubeconfig, "--proxy-mode", "ipvs", "--netns", netns)
    assert r.returncode == 2 and "ipvs proxy mode is deprecated" in r.stderr and "iptables, nftables" in r.stderr
    assert nft(netns, "list", "tables").stdout.strip() == ""


#: what an iptables-mode kube-proxy left (as iptables-nft keeps it), beside a rule of someone else's
IPTABLES_MODE_LEFTOVERS = """
table ip nat {
  chain PREROUTING {
    type nat hook prerouting priority dstnat; policy accept;
    jump KUBE-SERVICES
    ip daddr 192.0.2.1 accept
  }
  chain KUBE-SERVICES {
    ip daddr 10.96.0.10 tcp dport 53 jump KUBE-SVC-ERIFXISQEP7F7OF4
  }
  chain KUBE-SVC-ERIFXISQEP7F7OF4 {
    meta l4proto tcp dnat to 10.244.0.5:53
  }
}
"""


def test_an_nftables_proxy_removes_an_iptables_mode_proxys_rules_when_it_starts(cluster, netns):
    """upstream's platformCleanup: a node moved from iptables mode loses the old proxy's DNATs
    (which would sit in front of the new table) when the nftables proxy starts, not only with --cleanup."""
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=IPTABLES_MODE_LEFTOVERS.encode(),
                   check=True)
    with running_proxy(cluster, netns, "--proxy-mode", "nftables") as (proc, _, healthz, _):
        # /healthz answers 200 before the first sync too (nothing pending yet): wait for the table
        wait_for(lambda: nft(netns, "list", "table", "ip", "kube-proxy").returncode == 0, 30, "the proxy's first sync")
        nat = nft(netns, "list", "table", "ip", "nat").stdout
        assert "KUBE-" not in nat and "ip daddr 192.0.2.1 accept" in nat, nat
        assert get(f"{healthz}/healthz")[0] == 200 and proc.poll() is None
    assert "removed 2 chains an iptables- or ipvs-mode kube-proxy left" in \
        (cluster.data_dir / f"proxy-{netns}.log").read_text()


@pytest.mark.parametrize(("flags", "not_local"), [
    ((), None),
    (("--cluster-cidr", "10.244.0.0/16,fd00:10:244::/56"), "ip saddr != 10.244.0.0/16"),
    (("--detect-local-mode", "NodeCIDR"), "ip saddr != {pod_cidr}"),
    (("--detect-local-mode", "BridgeInterface", "--pod-bridge-interface", "cbr0"), 'iifname != "cbr0"'),
    (("--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "veth"), 'iifname != "veth*"'),
    (("--masquerade-all", "--cluster-cidr", "10.244.0.0/16"), ""),
], ids=["no-detector", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", "masquerade-all"])
def test_detect_local_mode_decides_which_service_traffic_is_masqueraded(cluster, netns, flags, not_local):
    """Upstream's local detectors: ClusterIP traffic the detector does not place among the pods
    is marked for masquerade before DNAT; none (ClusterCIDR without --cluster-cidr) marks none;
    --masquerade-all marks all of it."""
    for manifest in service_and_slice("kp-local"):
        cluster.kubectl("apply", "-f", "-", input=manifest)
    with running_proxy(cluster, netns, "--proxy-mode", "nftables", *flags) as (_, node, _, _):
        pod_cidr = cluster.kubectl_json("get", "node", node)["spec"]["podCIDR"]
        chain = wait_for(lambda: (t := nft(netns, "list", "chain", "ip", "kube-proxy", "lb-tcp-2").stdout)
                         and "dnat" in t and t, 30, "the two-endpoint balancing chain")
    rules = [line.strip() for line in chain.splitlines() if "jump mark-for-masquerade" in line]
    if not_local is None:
        assert rules == [], chain
    else:
        assert rules == [f"{not_local.format(pod_cidr=pod_cidr)} jump mark-for-masquerade".lstrip()], chain


def test_node_cidr_mode_waits_for_the_nodes_pod_cidrs_and_exits_when_they_change(cluster, netns):
    """Upstream's NodeCIDR mode: nothing is programmed until the Node has spec.podCIDRs; its rules then
    use them. The API changes a Node's podCIDRs only by its recreation, and the Node's deletion exits
    the proxy (1, the node manager's OnNodeDelete), which restarted uses the new Node's range. A Node
    of the test's own, which no agent runs and no allocator gives a range."""
    for manifest in service_and_slice("kp-local"):
        cluster.kubectl("apply", "-f", "-", input=manifest)
    node = f"kp-cidr-{netns[-8:]}"

    def make_node(pod_cidr: str = "") -> None:
        spec = {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]} if pod_cidr else {}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "spec": spec,
             "status": {"addresses": [{"type": "InternalIP", "address": "198.51.100.70"}]}}))

    make_node()
    try:
        with running_proxy(cluster, netns, "--proxy-mode", "nftables", "--detect-local-mode", "NodeCIDR",
                           node=node) as (proc, _, _, _):
            log = cluster.data_dir / f"proxy-{netns}.log"
            wait_for(lambda: "awaiting podCIDR allocation" in log.read_text(), 30, "the proxy waiting for the podCIDRs")
            assert nft(netns, "list", "tables").stdout.strip() == "" and proc.poll() is None
            cluster.kubectl("patch", "node", node, "--type", "merge", "-p",
                            json.dumps({"spec": {"podCIDR": "10.99.0.0/24", "podCIDRs": ["10.99.0.0/24"]}}))
            chain = wait_for(lambda: (t := nft(netns, "list", "chain", "ip", "kube-proxy", "lb-tcp-2").stdout)
                             and "dnat" in t and t, 30, "the two-endpoint balancing chain")
            assert "ip saddr != 10.99.0.0/24 jump mark-for-masquerade" in chain
            cluster.kubectl("delete", "node", node)
            assert proc.wait(timeout=30) == 1
            assert f"Node is being deleted: node {node}" in log.read_text()
        make_node("10.98.0.0/24")
        with running_proxy(cluster, netns, "--proxy-mode", "nftables", "--detect-local-mode", "NodeCIDR",
                           node=node) as (proc, _, _, _):
            chain = wait_for(lambda: (t := nft(netns, "list", "chain", "ip", "kube-proxy", "lb-tcp-2").stdout)
                             and "10.98.0.0/24" in t and t, 30, "the chain with the new range")
            assert "ip saddr != 10.98.0.0/24 jump mark-for-masquerade" in chain and proc.poll() is None
    finally:
        cluster.kubectl("delete", "node", node, "--ignore-not-found")


def test_the_node_ip_is_the_nodes_internal_ip_unless_bind_address_says_otherwise(cluster, netns):
    """Upstream's node manager: with bindAddress 0.0.0.0 the node's IP is its Node's InternalIP, so a
    LoadBalancer source range holding it lets the node reach the LB IP (the firewall allows the LB IP
    too), and NodePorts answer on it alone of the namespace's addresses (nodePortAddresses `primary`,
    the default); other IPs on the Node exit the proxy (1), to be restarted with them; a
    --bind-address is the node's IP instead; `primary` leaving a dual-stack cluster's IPv6 NodePorts
    open is logged. A Node and a classed LoadBalancer (whose ingress the test writes) of its own."""
    node, lb_ip = f"kp-ip-{netns[-8:]}", "203.0.113.50"
    subprocess.run(["ip", "-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer"], check=True)
    for address in ("198.51.100.77/24", "192.0.2.5/32"):
        subprocess.run(["ip", "-n", netns, "address", "add", address, "dev", "eth0"], check=True)

    def nodeport_ips() -> list[str]:
        listed = nft(netns, "list", "set", "ip", "kube-proxy", "nodeport-ips").stdout
        return sorted(m.group(1).replace(" ", "").split(",")) if (m := re.search(r"elements = \{ ([^}]*) \}", listed)) \
            else []

    def set_node_ip(ip: str) -> None:
        cluster.kubectl("patch", "node", node, "--subresource=status", "--type", "merge", "-p",
                        json.dumps({"status": {"addresses": [{"type": "Hostname", "address": node},
                                                             {"type": "InternalIP", "address": ip}]}}))
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}))
    svc, sl = (json.loads(m) for m in service_and_slice("kp-lb"))
    svc["spec"] |= {"type": "LoadBalancer", "loadBalancerClass": "example.com/other",
                    "loadBalancerSourceRanges": ["198.51.100.0/24"]}
    try:
        set_node_ip("198.51.100.77")
        for manifest in (svc, sl):
            cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
        cluster.kubectl("patch", "service", "kp-lb", "--subresource=status", "--type", "merge", "-p",
                        json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": lb_ip}]}}}))

        def firewall() -> str:
            table = nft(netns, "list", "table", "ip", "kube-proxy").stdout
            return next((line.strip() for line in table.splitlines() if "ip saddr != " in line and
                         line.endswith(" drop")), "")
        with running_proxy(cluster, netns, "--proxy-mode", "nftables", "--cluster-cidr", "10.244.0.0/16,fd00:10::/56",
                           node=node) as (proc, _, _, _):
            rule = wait_for(lambda: "198.51.100.0/24" in (r := firewall()) and r, 60, "the LB's source-range firewall")
            assert rule == f"ip saddr != {{ 198.51.100.0/24, {lb_ip} }} drop", rule
            assert nodeport_ips() == ["198.51.100.77"]
            set_node_ip("198.51.100.78")
            assert proc.wait(timeout=30) == 1
        log = (cluster.data_dir / f"proxy-{netns}.log").read_text()
        assert "NodeIPs changed for the node" in log
        assert "cluster appears to be dual-stack but nodePortAddresses contains only IPv4 addresses; NodePort " \
               "connections will be accepted on all local IPv6 IPs" in log, "upstream's checkBadConfig"
        with running_proxy(cluster, netns, "--proxy-mode", "nftables", "--bind-address", "192.0.2.5", node=node):
            rule = wait_for(lambda: lb_ip not in (r := firewall()) and r, 60, "the firewall rewritten")
            assert rule == "ip saddr != 198.51.100.0/24 drop", rule
            assert nodeport_ips() == ["192.0.2.5"]
    finally:
        cluster.kubectl("delete", "service", "kp-lb", "--ignore-not-found")
        cluster.kubectl("delete", "node", node, "--ignore-not-found")


def test_a_config_file_configures_the_proxy_and_the_flags_it_covers_are_ignored(cluster, netns, tmp_path):
    """`--config` as kube-proxy's: the file's kubeconfig, addresses, mode, local detector and sync
    periods are what runs; --cluster-cidr and --metrics-bind-address given beside it change nothing;
    --hostname-override still names the node; a change to the file exits the proxy (1), as kube-proxy's
    watch of it does."""
    for manifest in service_and_slice("kp-local"):
        cluster.kubectl("apply", "-f", "-", input=manifest)
    node = cluster.kubectl_json("get", "nodes")["items"][0]["metadata"]["name"]
    hport, mport = free_port(), free_port()
    config = tmp_path / "kube-proxy.yaml"
    config.write_text("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                      f"mode: nftables\nclientConnection:\n  kubeconfig: {cluster.kubeconfig}\n"
                      f"healthzBindAddress: 127.0.0.1:{hport}\nmetricsBindAddress: 127.0.0.1:{mport}\n"
                      "clusterCIDR: 10.244.0.0/16\nnftables:\n  minSyncPeriod: 100ms\n")
    with open(cluster.data_dir / f"proxy-{netns}.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nanokube.cli", "proxy", "--config", str(config), "--hostname-override", node,
             "--netns", netns, "--cluster-cidr", "10.99.0.0/16", "--metrics-bind-address", f"127.0.0.1:{free_port()}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        chain = wait_for(lambda: (t := nft(netns, "list", "chain", "ip", "kube-proxy", "lb-tcp-2").stdout)
                         and "dnat" in t and t, 30, "the two-endpoint balancing chain")
        assert "ip saddr != 10.244.0.0/16 jump mark-for-masquerade" in chain
        assert get(f"http://127.0.0.1:{mport}/proxyMode") == (200, "nftables")
        assert get(f"http://127.0.0.1:{hport}/healthz")[0] == 200
        assert "flags ignored as --config is given" in (cluster.data_dir / f"proxy-{netns}.log").read_text()
        config.write_text(config.read_text().replace("10.244.0.0/16", "10.245.0.0/16"))
        assert proc.wait(timeout=20) == 1, "a change to the file exits the proxy, for its supervisor to restart it"
        assert "content of the proxy server's configuration file was updated" in \
            (cluster.data_dir / f"proxy-{netns}.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
