"""--authorization-config as a cluster admin writes it: authorizers asked in order, a Webhook
(a real HTTPS server the test runs, answering SubjectAccessReviews) asked only where its CEL
matchConditions hold, its answers cached, its failurePolicy applied when it is down, RBAC after
it; the file reloaded when it changes; bad files stop `up` with upstream's errors; and
apiserver_authorization_* say what was decided."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import http.server
import json
import re
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver import auth_options
from nanokube.apiserver.app import APIServer
from nanokube.cli import main
from nanokube.pki.ca import ensure_pki, issue, new_ca
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.e2e.conftest import KUBECTL


class Webhook:
    """An authorization webhook in a thread of its own: allows `team-a` but its secrets, which it
    denies; records every review it is sent."""

    def __init__(self, tmp_path: Path) -> None:
        self.reviews: list[dict] = []
        ca = new_ca("webhook-ca")
        serving = issue(ca, "webhook", ips=("127.0.0.1",), server=True)
        (tmp_path / "wh.crt").write_bytes(serving.cert_pem)
        (tmp_path / "wh.key").write_bytes(serving.key_pem)
        reviews = self.reviews

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reviews.append(review)
                ra = review["spec"].get("resourceAttributes") or {}
                status = {"allowed": False}
                if ra.get("namespace") == "team-a":
                    status = {"allowed": False, "denied": True, "reason": "team-a keeps its secrets"} \
                        if ra.get("resource") == "secrets" else {"allowed": True}
                body = json.dumps({**review, "status": status}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(tmp_path / "wh.crt", tmp_path / "wh.key")
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.kubeconfig = tmp_path / "webhook-kubeconfig.yaml"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "wh",
            "clusters": [{"name": "wh", "cluster": {
                "server": f"https://127.0.0.1:{self.httpd.server_address[1]}/authorize",
                "certificate-authority-data": base64.b64encode(ca.cert_pem).decode()}}],
            "users": [{"name": "apiserver", "user": {"token": "s3cret"}}],
            "contexts": [{"name": "wh", "context": {"cluster": "wh", "user": "apiserver"}}]}))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def config(webhook: Webhook, failure_policy: str = "NoOpinion") -> str:
    return f"""apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: team-a
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: {failure_policy}
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: {webhook.kubeconfig}
    matchConditions:
    - expression: has(request.resourceAttributes)
    - expression: request.resourceAttributes.namespace in ['team-a', 'team-b']
- type: Node
  name: node
- type: RBAC
  name: rbac
"""


@contextlib.asynccontextmanager
async def served(tmp_path: Path, text: str):
    """A started server with --authorization-config (tmp_path/authz.yaml), and a client for user
    dave (group devs) by his client certificate."""
    path = tmp_path / "authz.yaml"
    path.write_text(text)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    server.rest.admission.disable("ServiceAccount")
    auth_options.apply(server, auth_options.load(argparse.Namespace(authorization_config=str(path))))
    await server.start()
    dave = issue(pki.ca, "dave", organizations=("devs",), client=True)
    (tmp_path / "dave.crt").write_bytes(dave.cert_pem)
    (tmp_path / "dave.key").write_bytes(dave.key_pem)
    c = client.Configuration()
    c.host, c.ssl_ca_cert = server.url, pki.ca_path
    c.cert_file, c.key_file = str(tmp_path / "dave.crt"), str(tmp_path / "dave.key")
    api = client.ApiClient(c)
    try:
        yield server, api
    finally:
        api.close()
        await server.stop()


async def _list(api, resource: str, namespace: str) -> int:
    core = client.CoreV1Api(api)
    try:
        await asyncio.to_thread(getattr(core, f"list_namespaced_{resource}"), namespace)
    except ApiException as e:
        return e.status
    return 200


async def test_the_webhook_decides_where_its_conditions_hold_and_rbac_after_it(tmp_path):
    webhook = Webhook(tmp_path)
    try:
        async with served(tmp_path, config(webhook)) as (server, api):
            assert await _list(api, "pod", "team-a") == 200
            [review] = webhook.reviews
            assert review["apiVersion"] == "authorization.k8s.io/v1" and review["kind"] == "SubjectAccessReview"
            assert review["spec"] == {"user": "dave", "groups": ["devs", "system:authenticated"],
                                      "resourceAttributes": {"namespace": "team-a", "verb": "list", "version": "v1",
                                                             "resource": "pods"}}
            assert await _list(api, "pod", "team-a") == 200
            assert len(webhook.reviews) == 1  # the allowed answer is cached (authorizedTTL 5m by default)
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(client.CoreV1Api(api).list_namespaced_secret, "team-a")
            assert e.value.status == 403 and json.loads(e.value.body)["message"].endswith(": team-a keeps its secrets")
            assert await _list(api, "pod", "default") == 403  # not the webhook's: RBAC's, which grants dave nothing
            assert await _list(api, "pod", "team-b") == 403  # the webhook's no opinion, then RBAC's
            assert len(webhook.reviews) == 3
            metrics = server.metrics_text().decode()
            for line in ('apiserver_authorization_decisions_total{decision="allowed",name="team-a",type="Webhook"} 2',
                         'apiserver_authorization_decisions_total{decision="denied",name="team-a",type="Webhook"} 1',
                         'apiserver_authorization_webhook_evaluations_total{name="team-a",result="success"} 3',
                         'apiserver_authorization_match_condition_exclusions_total{name="team-a",type="Webhook"} 1'):
                assert line in metrics, line
            # kubectl auth can-i: a SelfSubjectAccessReview, which the same chain answers
            kubeconfig = tmp_path / "dave-kubeconfig"
            write_kubeconfig(str(kubeconfig), server.url, server.pki)
            flags = [KUBECTL, "--kubeconfig", str(kubeconfig), "--client-certificate", str(tmp_path / "dave.crt"),
                     "--client-key", str(tmp_path / "dave.key"), "auth", "can-i"]
            for args, answer in ((["get", "configmaps", "-n", "team-a"], "yes"), (["get", "secrets", "-n", "team-a"], "no - team-a keeps its secrets")):
                out = await asyncio.to_thread(subprocess.run, flags + args, capture_output=True, text=True, timeout=60)
                assert out.stdout.strip() == answer, out.stderr
    finally:
        webhook.close()


async def test_failure_policy_applies_when_the_webhook_is_down_and_the_file_reloads(tmp_path):
    webhook = Webhook(tmp_path)
    webhook.close()  # nobody answers at its address
    async with served(tmp_path, config(webhook, "NoOpinion")) as (server, api):
        admin_pki = server.pki
        with tempfile.TemporaryDirectory() as d:
            write_kubeconfig(f"{d}/k", server.url, admin_pki)
            from kubernetes import config as kubeconfig

            admin = kubeconfig.new_client_from_config(config_file=f"{d}/k")
            await asyncio.to_thread(client.CoreV1Api(admin).create_namespace, {"metadata": {"name": "team-a"}})
            await asyncio.to_thread(client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding, "team-a", {
                "metadata": {"name": "devs-view"}, "subjects": [{"kind": "Group", "name": "devs",
                                                                 "apiGroup": "rbac.authorization.k8s.io"}],
                "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"}})
            admin.close()
        for _ in range(100):  # NoOpinion: RBAC decides, once the binding reaches its cache
            if await _list(api, "pod", "team-a") == 200:
                break
            await asyncio.sleep(0.05)
        assert await _list(api, "pod", "team-a") == 200
        (tmp_path / "authz.yaml").write_text(config(webhook, "Deny"))
        for _ in range(100):  # Deny, with the webhook's error: a 500, as WithAuthorization answers an error
            if await _list(api, "pod", "team-a") == 500:
                break
            await asyncio.sleep(0.1)
        assert await _list(api, "pod", "team-a") == 500
        metrics = server.metrics_text().decode()
        assert re.search(r'apiserver_authorization_config_controller_automatic_reloads_total\{apiserver_id_hash="sha256:'
                         r'\w+",status="success"\} 1\n', metrics)
        assert 'apiserver_authorization_webhook_evaluations_fail_open_total{name="team-a",result="error"}' in metrics
        assert 'apiserver_authorization_decisions_total{decision="denied",name="team-a",type="Webhook"}' in metrics


HEAD = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n"


@pytest.mark.parametrize("body, line", [
    ("authorizers: []\n", "authorizers: Required value: at least one authorization mode must be defined"),
    ("authorizers: [null, {type: RBAC, name: rbac}]\n", "authorizers[0].type: Required value"),  # (Go's zero item: fuzz62)
    ("authorizers:\n- {type: RBAC, name: rbac}\n- {type: RBAC, name: rbac2}\n", 'authorizers[1].type: Duplicate value: "RBAC"'),
    ("authorizers:\n- {type: Magic, name: m}\n",
     'authorizers[0].type: Unsupported value: "Magic": supported values: "ABAC", "AlwaysAllow", "AlwaysDeny", "Node", '
     '"RBAC", "Webhook"'),
    ("authorizers:\n- {type: Webhook, name: w}\n", "authorizers[0].webhook: Required value: required when type=Webhook"),
    ("authorizers:\n- type: Webhook\n  name: w\n  webhook: {subjectAccessReviewVersion: v1, failurePolicy: Deny, "
     "connectionInfo: {type: KubeConfigFile, kubeConfigFile: rel.yaml}}\n",
     "[authorizers[0].timeout: Required value, authorizers[0].connectionInfo.kubeConfigFile: Invalid value: "
     '"rel.yaml": must be an absolute path]'),
    ("authorizers:\n- type: Webhook\n  name: w\n  webhook: {timeout: 45s, subjectAccessReviewVersion: v1, failurePolicy: "
     "Maybe, connectionInfo: {type: KubeConfigFile, kubeConfigFile: /nope.yaml}, matchConditions: [{expression: "
     "'request.user'}]}\n",
     'authorizers[0].timeout: Invalid value: "45s": must be > 0s and <= 30s, authorizers[0].matchConditionSubjectAccessReviewVersion: '
     "Required value: required if match conditions are specified, authorizers[0].failurePolicy: Unsupported value: "
     '"Maybe": supported values: "NoOpinion", "Deny", authorizers[0].connectionInfo.kubeConfigFile: Invalid value: '
     '"/nope.yaml": error loading file: stat /nope.yaml: no such file or directory, '
     'authorizers[0].matchConditions[0].expression: Invalid value: "request.user": must evaluate to bool]'),
    ("authorizers:\n- {type: RBAC, name: rbac, extra: 1}\n",
     'failed to load AuthorizationConfiguration from file: strict decoding error: unknown field "authorizers[0].extra"'),
])
def test_up_stops_on_a_bad_file_with_upstreams_reason(tmp_path, capsys, body, line):
    path = tmp_path / "authz.yaml"
    path.write_text(HEAD + body)
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--authorization-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nanokube: --authorization-config: ") and line in err, err


async def test_the_webhook_is_told_a_lists_selectors(tmp_path):
    """AuthorizeWithSelectors: a list's fieldSelector and labelSelector reach the webhook's review as
    requirements (= and == as In, != as NotIn; label keys sorted, values sorted; gt/lt left out)."""
    webhook = Webhook(tmp_path)
    try:
        async with served(tmp_path, config(webhook)) as (_, api):
            await asyncio.to_thread(client.CoreV1Api(api).list_namespaced_pod, "team-a",
                                    field_selector="status.phase!=Failed,spec.nodeName==gpu-0",
                                    label_selector="tier in (web,api),app=x,!canary,size>3")
            [review] = webhook.reviews
            ra = review["spec"]["resourceAttributes"]
            assert ra["fieldSelector"] == {"requirements": [
                {"key": "spec.nodeName", "operator": "In", "values": ["gpu-0"]},
                {"key": "status.phase", "operator": "NotIn", "values": ["Failed"]}]}
            assert ra["labelSelector"] == {"requirements": [
                {"key": "app", "operator": "In", "values": ["x"]}, {"key": "canary", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "In", "values": ["api", "web"]}]}
            # an access review's selectors (raw, or requirements) are asked about as a request's
            selectors = {"fieldSelector": {"rawSelector": "spec.nodeName=gpu-0"}, "labelSelector": {"requirements": [
                {"key": "tier", "operator": "NotIn", "values": ["web"]}, {"key": "app", "operator": "Exists"}]}}
            await asyncio.to_thread(client.AuthorizationV1Api(api).create_namespaced_local_subject_access_review, "team-a", {
                "metadata": {"namespace": "team-a"}, "spec": {"user": "erin", "resourceAttributes": {
                    "namespace": "team-a", "verb": "list", "resource": "pods", **selectors}}})
            asked = [r["spec"]["resourceAttributes"] for r in webhook.reviews if r["spec"]["user"] == "erin"]
            assert [(a["fieldSelector"], a["labelSelector"]) for a in asked] == [(
                {"requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["gpu-0"]}]},
                {"requirements": [{"key": "app", "operator": "Exists"},
                                  {"key": "tier", "operator": "NotIn", "values": ["web"]}]})]
    finally:
        webhook.close()
