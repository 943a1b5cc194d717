"""`nanokube up --audit-policy-file` with two API workers: every worker, and the in-process
components writing through the loopback client, audit by the one policy a security reviewer
wrote, as kube-apiserver audits all its clients by its --audit-policy-file."""

from __future__ import annotations

import tempfile
import time
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
    namespaces: ["audited"]
  - level: Metadata
    users: ["system:kube-scheduler"]
    resources: [{group: "", resources: ["pods/binding"]}]
  - level: Request
    verbs: ["create"]
    namespaces: ["audited"]
    resources: [{group: "", resources: ["pods"]}]
"""


def test_up_audits_by_the_policy_in_every_worker_and_component():
    with tempfile.TemporaryDirectory() as d:
        policy = Path(d) / "policy.yaml"
        policy.write_text(POLICY)
        with running_cluster("audit", ("--api-workers", "2", "--audit-policy-file", str(policy))) as c:
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
                   and e["user"]["username"] == "kubernetes-admin"]
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
            assert [(e["verb"], e["user"]["username"]) for e in pods] == [("create", "kubernetes-admin")]
            assert pods[0]["requestObject"]["metadata"]["name"] == "p" and "responseObject" not in pods[0]
            assert not [e for e in events if e.get("objectRef", {}).get("resource") == "namespaces"]
            assert not [e for e in events if e["stage"] == "RequestReceived"]
