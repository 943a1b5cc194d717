"""Admission webhooks on a real `nanokube up`: a validating and a mutating
webhook served by the test over TLS with its own CA, configured with kubectl
and the Python client; mutations land on stored objects, failurePolicy Fail
refuses writes with upstream's message when the webhook is down and Ignore
lets them through, matchConditions and objectSelector skip the webhook."""

from __future__ import annotations

import json
import socket

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.apiserver.admission.server import WebhookServer, allow, deny, json_patch

from .conftest import wait_for

NS = "hooked"


@pytest.fixture(scope="module")
def server():
    s = WebhookServer().start()

    def mutate(review):
        labels = (review["request"]["object"]["metadata"].get("labels")) or {}
        ops = [{"op": "add", "path": "/metadata/labels", "value": {**labels, "stamped-by": "webhook"}}]
        return json_patch(review, ops, warnings=["stamped by the test webhook"], auditAnnotations={"stamp": "yes"})

    def validate(review):
        data = review["request"]["object"].get("data") or {}
        return deny(review, "forbidden value in data", code=422) if data.get("bad") == "true" else allow(review)

    s.handlers["/mutate"] = mutate
    s.handlers["/validate"] = validate
    yield s
    s.stop()


@pytest.fixture(scope="module")
def api(cluster):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("label", "namespace", NS, "webhooks=on")
    return cluster.client()


def _rules() -> list[dict]:
    return [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def _webhook(server, name: str, path: str, **extra) -> dict:
    return {"name": name, "clientConfig": {"url": server.url(path), "caBundle": server.ca.bundle},
            "rules": _rules(), "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}}, **extra}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mutating_and_validating_webhooks_with_kubectl(cluster, api, server):
    cfg = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
           "metadata": {"name": "stamp"},
           "webhooks": [_webhook(server, "stamp.hooks.example.com", "/mutate",
                                 objectSelector={"matchExpressions": [{"key": "skip-webhooks", "operator": "DoesNotExist"}]})]}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cfg))
    vcfg = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "check"},
            "webhooks": [_webhook(server, "check.hooks.example.com", "/validate", matchConditions=[
                {"name": "not-exempt", "expression": "!has(object.metadata.annotations) || "
                                                     "!('exempt' in object.metadata.annotations)"}])]}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(vcfg))
    got = cluster.kubectl_json("get", "mutatingwebhookconfiguration", "stamp")["webhooks"][0]
    assert (got["failurePolicy"], got["timeoutSeconds"], got["reinvocationPolicy"]) == ("Fail", 10, "Never")
    table = cluster.kubectl("get", "validatingwebhookconfigurations").stdout
    assert table.split("\n")[0].split() == ["NAME", "WEBHOOKS", "AGE"] and "check" in table

    r = cluster.kubectl("create", "configmap", "one", "-n", NS, "--from-literal=a=b")
    assert "stamped by the test webhook" in r.stderr
    stored = cluster.kubectl_json("get", "configmap", "one", "-n", NS)
    assert stored["metadata"]["labels"] == {"stamped-by": "webhook"}

    r = cluster.kubectl("create", "configmap", "two", "-n", NS, "--from-literal=bad=true", check=False)
    assert r.returncode != 0
    assert 'admission webhook "check.hooks.example.com" denied the request: forbidden value in data' in r.stderr

    exempt = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"bad": "true"},
              "metadata": {"name": "exempt", "namespace": NS, "annotations": {"exempt": "yes"},
                           "labels": {"skip-webhooks": "1"}}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(exempt))
    stored = cluster.kubectl_json("get", "configmap", "exempt", "-n", NS)
    assert "stamped-by" not in stored["metadata"]["labels"]

    # elsewhere (a namespace without the label) nothing is called
    calls = len(server.calls)
    cluster.kubectl("create", "configmap", "quiet", "-n", "default", "--from-literal=bad=true")
    assert len(server.calls) == calls
    audit = (cluster.data_dir / "audit.log").read_text()
    assert '"stamp.hooks.example.com/stamp":"yes"' in audit


def test_failure_policy_with_the_webhook_down(cluster, api, server):
    adm = client.AdmissionregistrationV1Api(api)
    port = _closed_port()
    down = _webhook(server, "down.hooks.example.com", "/validate")
    down["clientConfig"]["url"] = f"https://127.0.0.1:{port}/validate"
    adm.create_validating_webhook_configuration({"metadata": {"name": "down"}, "webhooks": [down]})
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "blocked"}, "data": {"a": "b"}})
    status = json.loads(e.value.body)
    assert e.value.status == 500 and status["reason"] == "InternalError"
    assert status["message"] == (
        'Internal error occurred: failed calling webhook "down.hooks.example.com": failed to call webhook: '
        f'Post "https://127.0.0.1:{port}/validate?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')
    r = cluster.kubectl("create", "configmap", "blocked", "-n", NS, check=False)
    assert r.returncode != 0 and "failed calling webhook \"down.hooks.example.com\"" in r.stderr

    adm.patch_validating_webhook_configuration("down", [{"op": "replace", "path": "/webhooks/0/failurePolicy",
                                                         "value": "Ignore"}])
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "through"}, "data": {"a": "b"}})
    assert created.metadata.labels == {"stamped-by": "webhook"}
    audit = (cluster.data_dir / "audit.log").read_text()
    assert "failed-open.validating.webhook.admission.k8s.io/round_0_index_" in audit
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    assert 'apiserver_admission_webhook_fail_open_count{name="down.hooks.example.com",type="validating"} 1\n' in metrics
    assert "# TYPE apiserver_admission_webhook_fail_open_count counter\n" in metrics  # a counter without _total
    adm.delete_validating_webhook_configuration("down")


def test_connect_admission_denies_exec(cluster, api, server):
    server.handlers["/connect"] = lambda r: deny(r, "exec is audited elsewhere") \
        if r["request"]["operation"] == "CONNECT" else allow(r)
    hook = _webhook(server, "connect.hooks.example.com", "/connect",
                    rules=[{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"],
                            "resources": ["pods/exec"]}])
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "connect"}, "webhooks": [hook]}))
    cluster.kubectl("run", "shell", "-n", NS, "--image=busybox")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "shell", "-n", NS)["status"].get("phase") == "Running",
             30, "shell running")
    r = cluster.kubectl("exec", "-n", NS, "shell", "--", "date", check=False)
    assert r.returncode != 0
    assert 'admission webhook "connect.hooks.example.com" denied the request: exec is audited elsewhere' in r.stderr
    req = server.calls_to("/connect")[-1]["request"]
    assert (req["kind"]["kind"], req["object"]["command"], req["userInfo"]["username"]) == (
        "PodExecOptions", ["date"], "kubernetes-super-admin")


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.hooks.example.com"},
    "spec": {"group": "hooks.example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {"type": "object", "properties": {
                     "size": {"type": "integer"}, "owner": {"type": "string"}}}}}}}]}}


def test_webhooks_on_a_custom_resource(cluster, api, server):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(WIDGET_CRD))
    wait_for(lambda: cluster.kubectl("get", "widgets", "-n", NS, check=False).returncode == 0, 60, "widgets served")

    def owner(review):
        user = review["request"]["userInfo"]["username"]
        return json_patch(review, [{"op": "add", "path": "/spec/owner", "value": user},
                                   {"op": "add", "path": "/spec/unknownField", "value": "dropped"}])

    server.handlers["/owner"] = owner
    hook = _webhook(server, "owner.hooks.example.com", "/owner",
                    rules=[{"operations": ["CREATE"], "apiGroups": ["hooks.example.com"], "apiVersions": ["v1"],
                            "resources": ["widgets"]}])
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "owner"}, "webhooks": [hook]}))
    widget = {"apiVersion": "hooks.example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": NS},
              "spec": {"size": 2}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(widget))
    assert cluster.kubectl_json("get", "widget", "w", "-n", NS)["spec"] == {"size": 2, "owner": "kubernetes-super-admin"}
    req = server.calls_to("/owner")[-1]["request"]
    assert req["kind"] == {"group": "hooks.example.com", "version": "v1", "kind": "Widget"}
