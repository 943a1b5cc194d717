"""The commands a new user types first, from kubectl's own docs, against `nanokube up` (session
40, kubectl58): what each prints is checked against what kubectl 1.37 prints of a real 1.37
cluster, on the session's shared cluster."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request

import pytest

from tests.e2e.conftest import KUBECTL

NS = "first-commands"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module works in a namespace of its
    own, deleted at the end."""
    session_cluster.kubectl("create", "namespace", NS)
    yield session_cluster
    session_cluster.kubectl("delete", "namespace", NS, "--wait=false")


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
