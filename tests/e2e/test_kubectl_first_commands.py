"""The commands a new user types first, from kubectl's own docs, against `nanokube up` (session
40, kubectl58): what each prints is checked against what kubectl 1.37 prints of a real 1.37
cluster, on the session's shared cluster."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import urllib.request

import pytest

from tests.e2e.conftest import KUBECTL, own_namespace

NS = "first-commands"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster), in a namespace of this module's own."""
    with own_namespace(session_cluster, NS) as c:
        yield c


@pytest.fixture(scope="module")
def proxy(cluster):
    """`kubectl proxy --port=0`'s base URL."""
    p = subprocess.Popen([KUBECTL, "proxy", "--port=0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "KUBECONFIG": cluster.kubeconfig})
    try:
        yield "http://127.0.0.1:" + re.search(r"127\.0\.0\.1:(\d+)", p.stdout.readline()).group(1)
    finally:
        p.terminate()
        p.wait(timeout=10)


def _fetch(url: str, **headers: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=20) as r:
        return r.headers["Content-Type"], r.read()


def test_the_kubelets_json_through_kubectl_proxy_is_as_the_kubelet_wrote_it(cluster, proxy):
    """`curl localhost:8001/api/v1/nodes/N/proxy/pods` (and /stats/summary, /configz) is the
    kubelet's compact JSON: the API server relays a proxied answer, never pretty-printing it for
    curl's User-Agent nor re-encoding it as YAML or protobuf for an Accept header, as it does its
    own answers."""
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    base = f"{proxy}/api/v1/nodes/{node}/proxy"
    for accept in ("*/*", "application/yaml", "application/vnd.kubernetes.protobuf"):
        ctype, body = _fetch(f"{base}/pods", **{"User-Agent": "curl/8.5.0", "Accept": accept})
        assert ctype == "application/json" and body.startswith(b'{"kind":"PodList","apiVersion":"v1","metadata":{},'), accept
        ctype, body = _fetch(f"{base}/stats/summary", **{"User-Agent": "curl/8.5.0", "Accept": accept})
        assert ctype == "application/json" and body.startswith(b'{"node":{"nodeName":"'), accept
    ctype, body = _fetch(f"{base}/configz?pretty=true", **{"User-Agent": "Mozilla/5.0"})
    assert body.startswith(b'{"kubeletconfig":{"')
    # the API server's own answers stay negotiated: pretty for curl, YAML where asked
    assert _fetch(f"{proxy}/api/v1/nodes/{node}", **{"User-Agent": "curl/8.5.0"})[1].startswith(b'{\n  "kind": "Node"')
    assert _fetch(f"{proxy}/api/v1/nodes/{node}", Accept="application/yaml")[1].startswith(b"apiVersion: v1\n")


def test_cluster_ips_and_node_ports_are_picked_at_random_in_their_upper_bands(cluster):
    """`kubectl create service nodeport` three times: the ClusterIPs and node ports are each a random
    pick of the range's upper (dynamic) band, as upstream's allocators make them (10.96.183.20,
    31652), where nanokube handed out 10.96.1.1, 10.96.1.2, ... and 30086, 30087, ... in turn."""
    for name in ("np-one", "np-two", "np-three"):
        cluster.kubectl("-n", NS, "create", "service", "nodeport", name, "--tcp=80:8080")
    out = cluster.kubectl("-n", NS, "get", "services", "np-one", "np-two", "np-three", "-o",
                          "jsonpath={range .items[*]}{.spec.clusterIP} {.spec.ports[0].nodePort}{'\\n'}{end}").stdout
    picks = [line.split() for line in out.splitlines()]
    ips = [int(ipaddress.ip_address(ip)) for ip, _ in picks]
    ports = [int(port) for _, port in picks]
    first, last = int(ipaddress.ip_address("10.96.0.0")), int(ipaddress.ip_address("10.111.255.255"))
    assert all(first + 256 < ip < last for ip in ips) and all(30086 <= p <= 32767 for p in ports), picks
    # (a cursor hands out consecutive values; three random picks of either band almost never are)
    assert sorted(ips) != list(range(min(ips), min(ips) + 3)) and sorted(ports) != list(range(min(ports), min(ports) + 3)), picks
    assert sorted(ips) != list(range(min(ips), min(ips) + 3)), picks
    assert sorted(ports) != list(range(min(ports), min(ports) + 3)), picks


def test_a_directory_copied_in_lists_with_ls_r(cluster, tmp_path):
    """`kubectl cp DIR pod:/tmp/site`, then `kubectl exec pod -- ls -R /tmp/site` as one checks the
    copy: busybox's listing, every directory under its `path:` line (the simulated ls refused -R as
    a command it lacked: `sh: ls: not found`)."""
    cluster.kubectl("-n", NS, "run", "box", "--image=busybox", "--", "sleep", "3600")
    cluster.kubectl("-n", NS, "wait", "--for=condition=Ready", "pod/box", "--timeout=60s")
    (tmp_path / "site" / "css").mkdir(parents=True)
    (tmp_path / "site" / "index.html").write_text("<p>hi</p>\n")
    (tmp_path / "site" / "css" / "main.css").write_text("p {}\n")
    cluster.kubectl("-n", NS, "cp", str(tmp_path / "site"), "box:/tmp/site")
    out = cluster.kubectl("-n", NS, "exec", "box", "--", "ls", "-R", "/tmp/site").stdout
    assert out == "/tmp/site:\ncss\nindex.html\n\n/tmp/site/css:\nmain.css\n"
    out = cluster.kubectl("-n", NS, "exec", "box", "--", "sh", "-c", "cd /tmp && ls -R site/css site/index.html").stdout
    assert out == "site/index.html\n\nsite/css:\nmain.css\n"
