"""An admission webhook and an aggregated API served by pods, reached through
their Services, under `nanokube up --runtime process`, as a user deploys
them: the serving certificate in a Secret the pod mounts, a Service in front
of the pod, and a ValidatingWebhookConfiguration or APIService naming the
Service with the CA in caBundle. The API server resolves the Service to a
ready endpoint (the pod's IP) and dials it from the cluster network
namespace, which routes every podCIDR; TLS verifies
`<service>.<namespace>.svc` against caBundle.

Skipped (loudly) only without root, `ip` or `nft`; the cluster's namespaces
and processes go with `nanokube up`, which process_cluster checks.
"""

from __future__ import annotations

import base64
import json
import sys

import pytest
from cryptography.hazmat.primitives import serialization

from tests.apiserver.admission.server import TestCA, WebhookServer, deny
from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

pytestmark = PROCESS_RUNTIME

#: refuses ConfigMaps named denied-*, allows the rest
WEBHOOK = """
import json, ssl
from http.server import BaseHTTPRequestHandler, HTTPServer
class Review(BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["request"]
        name = req.get("name") or req["object"]["metadata"].get("name", "")
        answer = {"uid": req["uid"], "allowed": not name.startswith("denied-")}
        if not answer["allowed"]:
            answer["status"] = {"code": 403, "message": "configmap " + name + " is on the deny list"}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        print("reviewed", name, answer["allowed"], flush=True)
    def log_message(self, *args):
        pass
server = HTTPServer(("0.0.0.0", 8443), Review)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/tls/tls.crt", "/tls/tls.key")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


#: an aggregated API: discovery for things.nanokube.test/v1, and whoami answering with the user the API server relayed
AGGREGATED = """
import json, ssl
from http.server import BaseHTTPRequestHandler, HTTPServer
class API(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/apis/things.nanokube.test/v1":
            doc = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "things.nanokube.test/v1",
                   "resources": [{"name": "whoami", "namespaced": False, "kind": "WhoAmI", "verbs": ["get"]}]}
        elif self.path == "/apis/things.nanokube.test/v1/whoami":
            doc = {"user": self.headers["X-Remote-User"]}
        else:
            self.send_error(404)
            return
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = HTTPServer(("0.0.0.0", 8443), API)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/tls/tls.crt", "/tls/tls.key")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def serve_behind_service(c, name: str, script: str) -> TestCA:
    """A pod running `script` with a serving certificate for `<name>.default.svc` mounted
    from a Secret, and the Service `name` in front of it, ready; returns the certificate's CA."""
    ca = TestCA((f"{name}.default.svc",))
    key = ca.server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": f"{name}-tls", "namespace": "default"},
              "data": {"tls.crt": _b64(ca.server_cert.public_bytes(serialization.Encoding.PEM)), "tls.key": _b64(key)}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
           "spec": {"terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "server", "image": "python:3.11", "command": [sys.executable, "-c", script],
                                    "ports": [{"containerPort": 8443}],
                                    "readinessProbe": {"tcpSocket": {"port": 8443}, "periodSeconds": 1},
                                    "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}]}],
                    "volumes": [{"name": "tls", "secret": {"secretName": f"{name}-tls"}}]}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
               "spec": {"selector": {"app": name}, "ports": [{"port": 443, "targetPort": 8443}]}}
    for obj in (secret, pod, service):
        c.kubectl("apply", "-f", "-", input=json.dumps(obj))
    wait_for(lambda: any((e.get("conditions") or {}).get("ready")
                         for s in c.kubectl_json("get", "endpointslices", "-l", f"kubernetes.io/service-name={name}")["items"]
                         for e in s.get("endpoints") or []), 90, f"the {name} pod ready behind its Service")
    return ca


def serve_deny_webhook(c, **webhook) -> None:
    """The WEBHOOK pod behind Service `deny`, and a ValidatingWebhookConfiguration `deny` that sends it
    the default namespace's ConfigMap creates (`webhook`: more fields of its one webhook)."""
    ca = serve_behind_service(c, "deny", WEBHOOK)
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": "deny"},
              "webhooks": [{"name": "deny.nanokube.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                            "failurePolicy": "Fail", **webhook,
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}},
                            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                       "resources": ["configmaps"]}],
                            "clientConfig": {"caBundle": ca.bundle,
                                             "service": {"namespace": "default", "name": "deny", "port": 443}}}]}
    c.kubectl("apply", "-f", "-", input=json.dumps(config))


def serve_things_api(c) -> None:
    """The AGGREGATED pod behind Service `things`, registered as APIService v1.things.nanokube.test,
    once it is Available."""
    ca = serve_behind_service(c, "things", AGGREGATED)
    apiservice = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                  "metadata": {"name": "v1.things.nanokube.test"},
                  "spec": {"group": "things.nanokube.test", "version": "v1", "caBundle": ca.bundle,
                           "groupPriorityMinimum": 1000, "versionPriority": 15,
                           "service": {"namespace": "default", "name": "things", "port": 443}}}
    c.kubectl("apply", "-f", "-", input=json.dumps(apiservice))

    def available():
        conds = c.kubectl_json("get", "apiservice", "v1.things.nanokube.test")["status"].get("conditions") or []
        return [(x["status"], x["reason"]) for x in conds if x["type"] == "Available"] == [("True", "Passed")]
    wait_for(available, 60, "the APIService Available")


@pytest.fixture(scope="module")
def webhook_cluster(store_url):
    with process_cluster(store_url, "webhooksvc") as c:
        yield c


def test_a_validating_webhook_served_by_a_pod_is_reached_through_its_service(webhook_cluster):
    c = webhook_cluster
    serve_deny_webhook(c)

    c.kubectl("create", "configmap", "allowed-x")
    denied = c.kubectl("create", "configmap", "denied-x", check=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == ('error: failed to create configmap: admission webhook "deny.nanokube.test" '
                                     'denied the request: configmap denied-x is on the deny list')
    assert c.kubectl("get", "configmap", "denied-x", check=False).returncode == 1
    assert c.kubectl("logs", "deny").stdout.splitlines() == ["reviewed allowed-x True", "reviewed denied-x False"]

    # with its endpoint gone the Service cannot be reached, and failurePolicy Fail refuses
    c.kubectl("delete", "pod", "deny", "--wait=true")
    refused = c.kubectl("create", "configmap", "later-x", check=False)
    assert refused.returncode == 1
    assert 'failed calling webhook "deny.nanokube.test"' in refused.stderr
    assert 'no endpoints available for service "deny"' in refused.stderr
    c.kubectl("delete", "validatingwebhookconfiguration", "deny")
    c.kubectl("delete", "service", "deny")
    c.kubectl("delete", "secret", "deny-tls")


def test_an_aggregated_api_served_by_a_pod_is_reached_through_its_service(webhook_cluster):
    c = webhook_cluster
    serve_things_api(c)
    assert json.loads(c.kubectl("get", "--raw", "/apis/things.nanokube.test/v1").stdout)["resources"][0]["name"] == "whoami"
    assert json.loads(c.kubectl("get", "--raw", "/apis/things.nanokube.test/v1/whoami").stdout) == {"user": "kubernetes-super-admin"}
    c.kubectl("delete", "apiservice", "v1.things.nanokube.test")
    c.kubectl("delete", "pod", "things", "--wait=false")
    c.kubectl("delete", "service", "things")
    c.kubectl("delete", "secret", "things-tls")


def test_an_external_name_webhook_service_is_dialled_from_the_host(webhook_cluster):
    """An ExternalName Service resolves to a host name, not a pod's address: the
    API server dials it as it dials a `url`, here a server on the host's loopback."""
    c = webhook_cluster
    server = WebhookServer(TestCA(("ext.default.svc",))).start()
    server.handlers["/review"] = lambda review: deny(review, "refused by the host's webhook")
    try:
        c.kubectl("create", "service", "externalname", "ext", "--external-name=localhost")
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": "ext"},
                  "webhooks": [{"name": "ext.nanokube.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                                "failurePolicy": "Fail",
                                "objectSelector": {"matchLabels": {"ext": "check"}},
                                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                           "resources": ["configmaps"]}],
                                "clientConfig": {"caBundle": server.ca.bundle,
                                                 "service": {"namespace": "default", "name": "ext", "port": server.port,
                                                             "path": "/review"}}}]}
        c.kubectl("apply", "-f", "-", input=json.dumps(config))
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ext-x", "labels": {"ext": "check"}}}
        refused = c.kubectl("create", "-f", "-", input=json.dumps(cm), check=False)
        assert refused.returncode == 1
        assert ('admission webhook "ext.nanokube.test" denied the request: refused by the host\'s webhook'
                in refused.stderr), refused.stderr
        assert [b["request"]["name"] for b in server.calls_to("/review")] == ["ext-x"]
    finally:
        c.kubectl("delete", "validatingwebhookconfiguration", "ext", check=False)
        c.kubectl("delete", "service", "ext", check=False)
        server.stop()
