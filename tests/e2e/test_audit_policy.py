"""`nanokube up --audit-policy-file` with two API workers: every worker, and the in-process
components writing through the loopback client, audit by the one policy a security reviewer
wrote, as kube-apiserver audits all its clients by its --audit-policy-file; and every worker
sends its events to a blocking audit webhook as well as to the log. One cluster serves both
tests, each in a namespace of its own."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .conftest import STORE, running_cluster

pytestmark = pytest.mark.skipif(STORE == "memory", reason="the memory store serves one process (--api-workers 2)")

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: RequestResponse
    resources: [{group: "", resources: ["configmaps"]}]
    namespaces: ["audited", "sent"]
  - level: Metadata
    users: ["system:kube-scheduler"]
    resources: [{group: "", resources: ["pods/binding"]}]
  - level: Request
    verbs: ["create"]
    namespaces: ["audited"]
    resources: [{group: "", resources: ["pods"]}]
"""


class _Sink(BaseHTTPRequestHandler):
    """The audit webhook's server: each EventList it is sent, kept on the server object."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.lists.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def audited():
    """The cluster, with the policy and a blocking webhook to a sink; and the sink."""
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    sink.lists = []
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "policy.yaml").write_text(POLICY)
            (Path(d) / "webhook.yaml").write_text(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "w",
                "clusters": [{"name": "s", "cluster": {"server": f"http://127.0.0.1:{sink.server_port}/"}}],
                "users": [{"name": "u", "user": {}}], "contexts": [{"name": "w", "context": {"cluster": "s", "user": "u"}}]}))
            with running_cluster("audit", (
                    "--api-workers", "2", "--audit-policy-file", str(Path(d) / "policy.yaml"),
                    "--audit-webhook-config-file", str(Path(d) / "webhook.yaml"), "--audit-webhook-mode", "blocking")) as c:
                yield c, sink
    finally:
        sink.shutdown()


def test_up_audits_by_the_policy_in_every_worker_and_component(audited):
    c, _ = audited
    c.kubectl("create", "namespace", "audited")
    c.kubectl("-n", "audited", "create", "configmap", "c", "--from-literal=k=v")
    for _ in range(6):  # connections the kernel spreads over both workers
        c.kubectl("-n", "audited", "get", "configmap", "c", "-o", "json")
    c.kubectl("-n", "audited", "run", "p", "--image", "busybox")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        events = c.audit_events()
        bindings = [e for e in events if e.get("objectRef", {}).get("subresource") == "binding"
                    and e["objectRef"].get("namespace") == "audited"]
        if bindings:
            break
        time.sleep(0.2)
    cms = [e for e in events if e.get("objectRef", {}).get("resource") == "configmaps"
           and e["objectRef"].get("namespace") == "audited" and e["user"]["username"] == "kubernetes-super-admin"]
    root_ca = [e for e in events if e.get("objectRef", {}).get("name") == "kube-root-ca.crt"
               and e["objectRef"].get("namespace") == "audited"]  # the root CA publisher's, in-process
    assert root_ca[0]["verb"] == "create" and root_ca[0]["level"] == "RequestResponse"
    assert "ca.crt" in root_ca[0]["responseObject"]["data"] and "ca.crt" in root_ca[0]["requestObject"]["data"]
    assert [e["verb"] for e in cms] == ["create"] + ["get"] * 6, cms
    assert all(e["level"] == "RequestResponse" and e["stage"] == "ResponseComplete" for e in cms)
    assert all(e["responseObject"]["data"] == {"k": "v"} for e in cms)
    assert cms[0]["requestObject"]["data"] == {"k": "v"}
    assert bindings and bindings[0]["user"]["username"] == "system:kube-scheduler"
    assert bindings[0]["level"] == "Metadata" and bindings[0]["stage"] == "ResponseComplete"
    pods = [e for e in events if e.get("objectRef", {}).get("resource") == "pods"
            and not e["objectRef"].get("subresource")]
    assert [(e["verb"], e["user"]["username"]) for e in pods] == [("create", "kubernetes-super-admin")]
    assert pods[0]["requestObject"]["metadata"]["name"] == "p" and "responseObject" not in pods[0]
    assert not [e for e in events if e.get("objectRef", {}).get("resource") == "namespaces"]
    assert not [e for e in events if e["stage"] == "RequestReceived"]


def test_up_sends_every_workers_events_to_the_audit_webhook(audited):
    c, sink = audited
    c.kubectl("create", "namespace", "sent")
    for i in range(6):  # connections the kernel spreads over both workers
        c.kubectl("-n", "sent", "create", "configmap", f"c{i}")
        sent = [e["objectRef"]["name"] for lst in sink.lists for e in lst["items"]
                if e["user"]["username"] == "kubernetes-super-admin"]
        assert sent[-1] == f"c{i}"  # blocking: sent before kubectl had its answer
    logged = {e["auditID"] for e in c.audit_events() if e["user"]["username"] == "kubernetes-super-admin"}
    assert {e["auditID"] for lst in sink.lists for e in lst["items"]
            if e["user"]["username"] == "kubernetes-super-admin"} == logged
    assert all(lst["kind"] == "EventList" and lst["apiVersion"] == "audit.k8s.io/v1" for lst in sink.lists)
