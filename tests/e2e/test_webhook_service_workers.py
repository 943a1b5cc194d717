"""Webhooks, a CRD's conversion webhook and an aggregated API served by pods, under
`nanokube up --runtime process --api-workers 2`: every API server process, not only
worker 0, dials their Services' endpoints (pod IPs) from the cluster network namespace,
so each request is answered the same whichever worker the kernel gave its connection to.
Each test drives one connection held by each worker (which process holds the server
side of the socket is read from /proc, as test_api_workers does) and kubectl. The other
way, pods reach every worker at the advertised address, and each sees the pod's address.

Skipped (loudly) only without root, `ip` or `nft`, and on the memory store, which
serves one process; the cluster's namespaces and processes go with `nanokube up`,
which process_cluster checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.api import tls_context
from tests.e2e.conftest import PROCESS_RUNTIME, STORE, process_cluster, wait_for
from tests.e2e.test_api_workers import Conn, _children
from tests.e2e.test_webhook_service_process import serve_behind_service, serve_deny_webhook, serve_things_api

pytestmark = [PROCESS_RUNTIME, pytest.mark.skipif(STORE == "memory", reason="the memory store serves one process")]

#: converts Widgets between v1 (spec.colour) and v2 (spec.color), as a ConversionReview's response;
#: logs each conversion with the address the request came from
CONVERTER = """
import json, ssl
from http.server import BaseHTTPRequestHandler, HTTPServer
RENAME = {"conv.nanokube.test/v1": ("color", "colour"), "conv.nanokube.test/v2": ("colour", "color")}
class Convert(BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["request"]
        want = req["desiredAPIVersion"]
        old, new = RENAME[want]
        out = []
        for obj in req["objects"]:
            spec = obj.get("spec") or {}
            if old in spec:
                spec[new] = spec.pop(old)
            out.append({**obj, "apiVersion": want, "spec": spec})
            print("converted", obj["metadata"]["name"], "to", want, "for", self.client_address[0], flush=True)
        body = json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                           "response": {"uid": req["uid"], "convertedObjects": out,
                                        "result": {"status": "Success"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = HTTPServer(("0.0.0.0", 8443), Convert)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/tls/tls.crt", "/tls/tls.key")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


#: writes ConfigMaps as its ServiceAccount, each on a new connection: 4 to the `kubernetes`
#: Service, 4 to the address the API server advertises (its argument, the Service's endpoint)
IN_CLUSTER = """
import json, os, ssl, sys, urllib.error, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
ctx = ssl.create_default_context(cafile=sa + "ca.crt")
for i, host in enumerate([os.environ["KUBERNETES_SERVICE_HOST"] + ":" + os.environ["KUBERNETES_SERVICE_PORT"]] * 4
                         + [sys.argv[1]] * 4):
    req = urllib.request.Request("https://%s/api/v1/namespaces/default/configmaps" % host, method="POST",
                                 data=json.dumps({"metadata": {"name": "from-pod-%d" % i}}).encode(),
                                 headers={"Authorization": "Bearer " + open(sa + "token").read(),
                                          "Content-Type": "application/json"})
    try:
        print("answered", urllib.request.urlopen(req, context=ctx, timeout=10).status, flush=True)
    except urllib.error.HTTPError as e:
        print("answered", e.code, flush=True)
"""


def _version(name: str, field: str, storage: bool) -> dict:
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}}}


@pytest.fixture(scope="module")
def workers_cluster(store_url):
    with process_cluster(store_url, "webhookworkers", ("--api-workers", "2")) as c:
        yield c


def _advertised(c) -> tuple[str, int]:
    """The address and port the API server advertises: the `kubernetes` Service's endpoint."""
    subset = c.kubectl_json("get", "endpoints", "kubernetes")["subsets"][0]
    return subset["addresses"][0]["ip"], subset["ports"][0]["port"]


def _workers(c) -> list[int]:
    """The API server workers' process ids, worker 0's first (pods' processes are `up`'s children too)."""
    pids = [c.proc.pid] + [p for p in _children(c.proc.pid)
                           if b"nanokube.apiserver.workers" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(pids) == 2, pids
    return pids


def one_per_worker(c) -> list[Conn]:
    """A keep-alive connection held by each API server worker, worker 0's first."""
    pids = _workers(c)
    ctx = tls_context(Path(c.kubeconfig), c.data_dir)

    def spread():
        by_worker: dict[int | None, Conn] = {}
        for _ in range(8):
            conn = Conn(c.url, ctx, pids)
            if conn.worker in by_worker:
                conn.http.close()
            else:
                by_worker[conn.worker] = conn
        if set(by_worker) == set(pids):
            return [by_worker[p] for p in pids]
        for conn in by_worker.values():
            conn.http.close()
        return None
    return wait_for(spread, what="a connection to each worker", every=0.1)


def test_every_worker_reaches_a_validating_webhook_served_by_a_pod(workers_cluster):
    c = workers_cluster
    serve_deny_webhook(c, timeoutSeconds=5)
    conns = one_per_worker(c)
    cms = "/api/v1/namespaces/default/configmaps"
    for i, conn in enumerate(conns):
        code, made = conn.call("POST", cms, {"metadata": {"name": f"allowed-{i}"}})
        assert code == 201, (i, made)
        code, refused = conn.call("POST", cms, {"metadata": {"name": f"denied-{i}"}})
        assert (code, refused["message"]) == (403, f'admission webhook "deny.nanokube.test" denied the request: '
                                                   f'configmap denied-{i} is on the deny list'), (i, refused)
        conn.http.close()
    # kubectl, whose every run is a new connection, to whichever worker
    for _ in range(4):
        denied = c.kubectl("create", "configmap", "denied-x", check=False)
        assert denied.returncode == 1
        assert denied.stderr.strip() == ('error: failed to create configmap: admission webhook "deny.nanokube.test" '
                                         'denied the request: configmap denied-x is on the deny list')
    reviewed = c.kubectl("logs", "deny").stdout.splitlines()
    assert reviewed[:4] == ["reviewed allowed-0 True", "reviewed denied-0 False",
                            "reviewed allowed-1 True", "reviewed denied-1 False"]
    assert reviewed[4:] == ["reviewed denied-x False"] * 4
    c.kubectl("delete", "validatingwebhookconfiguration", "deny")
    c.kubectl("delete", "pod", "deny", "--wait=false")
    c.kubectl("delete", "service", "deny")
    c.kubectl("delete", "secret", "deny-tls")
    c.kubectl("delete", "configmap", "allowed-0", "allowed-1")


def test_every_worker_converts_through_a_conversion_webhook_served_by_a_pod(workers_cluster):
    """A CRD stored at v1 (spec.colour) and served at v2 too (spec.color), converted by a pod:
    a Widget created at either version reads back at the other, through each worker. The pod
    sees each worker's requests come from the address the API server advertises (the
    `kubernetes` Service's endpoint), as a webhook sees kube-apiserver's host address."""
    c = workers_cluster
    ca = serve_behind_service(c, "conv", CONVERTER)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.conv.nanokube.test"},
           "spec": {"group": "conv.nanokube.test", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                    "versions": [_version("v1", "colour", True), _version("v2", "color", False)],
                    "conversion": {"strategy": "Webhook", "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {"caBundle": ca.bundle, "service": {
                            "namespace": "default", "name": "conv", "port": 443, "path": "/convert"}}}}}}
    c.kubectl("apply", "-f", "-", input=json.dumps(crd))
    c.kubectl("wait", "--for=condition=Established", "crd/widgets.conv.nanokube.test", "--timeout=30s")
    widget = {"apiVersion": "conv.nanokube.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"colour": "blue"}}
    c.kubectl("apply", "-f", "-", input=json.dumps(widget))

    got = c.kubectl_json("get", "widgets.v2.conv.nanokube.test", "w1")
    assert (got["apiVersion"], got["spec"]) == ("conv.nanokube.test/v2", {"color": "blue"})
    # written at v2, stored at v1
    v2 = {"apiVersion": "conv.nanokube.test/v2", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"color": "red"}}
    c.kubectl("apply", "-f", "-", input=json.dumps(v2))
    got = c.kubectl_json("get", "widgets.v1.conv.nanokube.test", "w2")
    assert (got["apiVersion"], got["spec"]) == ("conv.nanokube.test/v1", {"colour": "red"})

    for conn in one_per_worker(c):
        code, listed = conn.call("GET", "/apis/conv.nanokube.test/v2/namespaces/default/widgets")
        assert code == 200, listed
        assert {(w["metadata"]["name"], w["apiVersion"], w["spec"]["color"]) for w in listed["items"]} == {
            ("w1", "conv.nanokube.test/v2", "blue"), ("w2", "conv.nanokube.test/v2", "red")}
        conn.http.close()
    converted = c.kubectl("logs", "conv").stdout.splitlines()
    assert "converted w1 to conv.nanokube.test/v2 for " + _advertised(c)[0] in converted
    assert {line.split(" for ")[1] for line in converted} == {_advertised(c)[0]}
    c.kubectl("delete", "crd", "widgets.conv.nanokube.test")
    c.kubectl("delete", "pod", "conv", "--wait=false")
    c.kubectl("delete", "service", "conv")
    c.kubectl("delete", "secret", "conv-tls")


def test_every_worker_proxies_to_an_aggregated_api_served_by_a_pod(workers_cluster):
    """Each worker proxies the APIService's requests and probes it (the availability loop runs in
    every worker): dialled from the host, worker 1 would answer 503 and write Available=False."""
    c = workers_cluster
    serve_things_api(c)
    for conn in one_per_worker(c):
        code, doc = conn.call("GET", "/apis/things.nanokube.test/v1/whoami")
        assert (code, doc) == (200, {"user": "kubernetes-super-admin"})
        conn.http.close()
    c.kubectl("delete", "apiservice", "v1.things.nanokube.test")
    c.kubectl("delete", "pod", "things", "--wait=false")
    c.kubectl("delete", "service", "things")
    c.kubectl("delete", "secret", "things-tls")


def test_every_worker_serves_pods_and_sees_their_address(workers_cluster):
    """Pods reach the API server at its advertised address (the `kubernetes` Service's
    endpoint) in the cluster network namespace, where every worker listens, and the server
    sees the address a pod's connection comes from: the audit events of its writes (refused
    by RBAC, audited all the same) carry the pod's IP in sourceIPs whether it dials the
    advertised address or the Service's ClusterIP, which kube-proxy does not masquerade for
    a source in its node's podCIDR (upstream's rule; proxy/runner.py proxy_configs)."""
    c = workers_cluster
    listening = subprocess.run(["ip", "netns", "exec", c.prefix + "c", "ss", "-Htlnp"], capture_output=True,
                               text=True, check=True).stdout
    assert {f"pid={pid}," for pid in _workers(c)} <= {f"pid={p.split(',')[0]}," for p in listening.split("pid=")[1:]}
    advertised = "%s:%d" % _advertised(c)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "writer", "namespace": "default"},
           "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "writer", "image": "python:3.11",
                                    "command": [sys.executable, "-c", IN_CLUSTER, advertised]}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: c.kubectl_json("get", "pod", "writer")["status"].get("phase") == "Succeeded", 60,
             "the writer pod done")
    assert c.kubectl("logs", "writer").stdout.splitlines() == ["answered 403"] * 8
    status = c.kubectl_json("get", "pod", "writer")["status"]
    events = [json.loads(line) for line in (c.data_dir / "audit.log").read_bytes().splitlines()]
    writes = [e for e in events if e["user"]["username"] == "system:serviceaccount:default:default"
              and (e.get("objectRef") or {}).get("resource") == "configmaps"]
    assert [(e["verb"], e["responseStatus"]["code"], e["sourceIPs"]) for e in writes] == (
        [("create", 403, [status["podIP"]])] * 8)
    c.kubectl("delete", "pod", "writer")
