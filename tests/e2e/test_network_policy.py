"""NetworkPolicy enforced in `nanokube up --runtime process`: curl from a pod
in one namespace (run in that pod's network namespace) to a pod in another works, stops under a default-deny
ingress policy, stays blocked while only the namespace or only the pod
matches an allow rule, and works again once both labels match; a policy on
the client's egress blocks it at the source node. Every namespace is deleted
and the cluster's network namespaces (with their nft tables) are gone after.

Skipped (loudly) only without root, `ip` or `nft` (scripts/nftables.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from nanokube.node.runtime.netns import PREFIX, ClusterNetwork, cluster_tag, list_netns
from tests.e2e.conftest import start_cluster, wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft") or not shutil.which("curl"),
    reason="SKIPPED LOUDLY: NetworkPolicy enforcement needs root, ip, nft and curl (run scripts/nftables.sh)")

SERVER = "import http.server as h; h.ThreadingHTTPServer(('0.0.0.0', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
#: answers each GET with the address the connection came from
ECHO = """
import http.server as h
class Echo(h.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.client_address[0].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
h.ThreadingHTTPServer(("0.0.0.0", 8080), Echo).serve_forever()
"""


@pytest.fixture(scope="module")
def np_cluster(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-netpol-"))
    c = start_cluster(d, store_url, ("--cluster", "examples/clusters/process-3cpu.yaml", "--runtime", "process",
                                     "--proxy-mode", "nftables"))
    c.prefix = f"{PREFIX}{cluster_tag(str(d))}-"
    c.net = ClusterNetwork(cluster_tag(str(d)))
    try:
        yield c
    finally:
        for ns in ("np-server", "np-client", "np-svc"):
            c.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        c.stop()
        leftovers = [n for n in list_netns() if n.startswith(c.prefix)]
        shutil.rmtree(d, ignore_errors=True)
        assert leftovers == [], f"namespaces left after shutdown: {leftovers}"


def apply(c, *objs: dict) -> None:
    c.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))


def pod(name: str, ns: str, node: str, command: list[str], labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "busybox", "command": command}]}}


def policy(name: str, ns: str, **spec) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name, "namespace": ns},
            "spec": {"podSelector": {}, **spec}}


def curl(c, uid: str, url: str) -> str:
    """HTTP status of one GET from inside the pod `uid`'s network namespace ('000': not connected within 0.5 s)."""
    r = subprocess.run(["ip", "netns", "exec", c.net.pod_ns(uid), "curl", "-s", "-o", "/dev/null", "--connect-timeout", "0.5", "-m", "2",
                        "-w", "%{http_code}", url], capture_output=True, text=True, timeout=10)
    return r.stdout.strip()


def body(c, uid: str, url: str) -> str:
    """The body of one GET from inside the pod `uid`'s network namespace ('' when nothing answered)."""
    return subprocess.run(["ip", "netns", "exec", c.net.pod_ns(uid), "curl", "-s", "--connect-timeout", "0.5", "-m", "2",
                           url], capture_output=True, text=True, timeout=10).stdout


def settles(c, uid: str, url: str, want: str, what: str) -> None:
    """Policies apply asynchronously: wait until three curls in a row answer `want`."""
    streak = []

    def check():
        streak.append(curl(c, uid, url) == want)
        return len(streak) >= 3 and all(streak[-3:])
    wait_for(check, 30, what, every=0.2)


def test_policies_block_and_allow_traffic_between_namespaces(np_cluster):
    c = np_cluster
    apply(c, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "np-server"}},
          {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "np-client"}})
    apply(c, pod("web", "np-server", "cpu-0", ["python3", "-c", SERVER], {"app": "web"}))
    ip = wait_for(lambda: c.kubectl_json("get", "pod", "web", "-n", "np-server")["status"].get("podIP"), 60, "server IP")
    apply(c, pod("curl", "np-client", "cpu-2", ["sleep", "3600"]))
    client = wait_for(lambda: (p := c.kubectl_json("get", "pod", "curl", "-n", "np-client"))["status"].get("podIP") and p,
                      60, "client IP")
    uid, url = client["metadata"]["uid"], f"http://{ip}:8080/"
    settles(c, uid, url, "200", "curl answered before any policy")

    apply(c, policy("deny-ingress", "np-server", policyTypes=["Ingress"]))
    settles(c, uid, url, "000", "default-deny ingress blocks the client")
    table = c.kubectl("get", "netpol", "-n", "np-server", "--no-headers").stdout.split()
    assert table[:2] == ["deny-ingress", "<none>"]

    allow = {"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}, "podSelector": {"matchLabels": {"role": "tester"}}}],
             "ports": [{"protocol": "TCP", "port": 8080}]}
    apply(c, policy("allow-testers", "np-server", podSelector={"matchLabels": {"app": "web"}}, ingress=[allow]))
    c.kubectl("label", "namespace", "np-client", "team=a")
    settles(c, uid, url, "000", "the namespace alone does not match")
    c.kubectl("label", "pod", "curl", "-n", "np-client", "role=tester")
    settles(c, uid, url, "200", "namespace and pod labels together allow the client")

    apply(c, policy("no-egress", "np-client", policyTypes=["Egress"]))
    settles(c, uid, url, "000", "egress isolation blocks the client at its own node")
    chain = subprocess.run(["ip", "netns", "exec", f"{c.prefix}n2", "nft", "list", "table", "inet", "nanokube-netpol"],
                           capture_output=True, text=True, check=True).stdout
    assert "jump egress-" in chain and "drop" in chain
    c.kubectl("delete", "netpol", "no-egress", "-n", "np-client")
    settles(c, uid, url, "200", "removing the egress policy lets it through again")
    c.kubectl("delete", "namespace", "np-server", "np-client", "--wait=false")


def test_a_pod_reaches_a_service_with_its_own_address_so_policies_see_it(np_cluster):
    """kube-proxy, which tells pods' traffic by its node's podCIDR (--detect-local-mode NodeCIDR),
    masquerades no pod's connection to a ClusterIP (upstream's rule: only traffic from outside
    the local detector's CIDR, and hairpin traffic):
    the server sees the client pod's IP, not its node's, so an ingress rule selecting client pods
    admits a matching pod through the Service and refuses another."""
    c = np_cluster
    apply(c, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "np-svc"}})
    apply(c, pod("echo", "np-svc", "cpu-0", ["python3", "-c", ECHO], {"app": "echo"}),
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": "np-svc"},
           "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]}},
          pod("friend", "np-svc", "cpu-2", ["sleep", "3600"], {"role": "client"}),
          pod("stranger", "np-svc", "cpu-2", ["sleep", "3600"]))

    def running(name):
        p = c.kubectl_json("get", "pod", name, "-n", "np-svc")
        return p if p["status"].get("podIP") else None
    friend, stranger = (wait_for(lambda n=n: running(n), 60, f"{n} IP") for n in ("friend", "stranger"))
    url = "http://%s/" % c.kubectl_json("get", "service", "echo", "-n", "np-svc")["spec"]["clusterIP"]
    for client in (friend, stranger):
        wait_for(lambda client=client: body(c, client["metadata"]["uid"], url), 60, "the Service answers")
        assert body(c, client["metadata"]["uid"], url) == client["status"]["podIP"] != client["status"]["hostIP"]

    allow = {"from": [{"podSelector": {"matchLabels": {"role": "client"}}}], "ports": [{"protocol": "TCP", "port": 8080}]}
    apply(c, policy("clients-only", "np-svc", podSelector={"matchLabels": {"app": "echo"}}, ingress=[allow]))
    settles(c, stranger["metadata"]["uid"], url, "000", "the unselected pod is refused through the Service")
    settles(c, friend["metadata"]["uid"], url, "200", "the selected pod is admitted through the Service")
    c.kubectl("delete", "namespace", "np-svc", "--wait=false")
