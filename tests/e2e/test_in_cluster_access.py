"""In-cluster API access from a process-runtime pod, as an operator author
runs a controller: the official `kubernetes` client's load_incluster_config()
dials https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (the
`kubernetes` Service's ClusterIP, which kube-proxy sends to the address the
API server advertises), verifies the server with the mounted ca.crt and
sends the projected token; RBAC decides what its ServiceAccount may do.

Skipped (loudly) only without root, `ip` or `nft`; the cluster's namespaces,
processes and listeners go with `nanokube up`, which process_cluster checks.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

pytestmark = PROCESS_RUNTIME

#: pods are host processes: this interpreter has the `kubernetes` client
PYTHON = sys.executable

#: an operator's main: list the pods, then watch them until the one named by its argument is added
OPERATOR = """
import os, sys
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
print("dialing", os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"], flush=True)
config.load_incluster_config()
api = client.CoreV1Api()
try:
    print("listed", sorted(p.metadata.name for p in api.list_namespaced_pod("default", _request_timeout=10).items),
          flush=True)
except ApiException as e:
    print("refused", e.status, flush=True)
    sys.exit(1)
print("watching", flush=True)
for event in watch.Watch().stream(api.list_namespaced_pod, "default", timeout_seconds=60):
    if event["object"].metadata.name == sys.argv[1]:
        print("saw", event["type"], sys.argv[1], flush=True)
        break
"""

#: what the client checks of the server: its certificate chains to ca.crt and names the Service
CERTIFICATE = """
import socket, ssl
ctx = ssl.create_default_context(cafile="/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
for name in ("kubernetes.default.svc", "kubernetes.default.svc.cluster.local", None):
    with socket.create_connection(("10.96.0.1", 443), timeout=5) as raw:
        ctx.check_hostname = name is not None
        with ctx.wrap_socket(raw, server_hostname=name or "10.96.0.1") as tls:
            print("verified", name or "10.96.0.1", tls.version(), flush=True)
"""

#: service account issuer discovery, as a workload verifying tokens does it: the discovery document
#: through the Service, then its jwks_uri (the advertised address), each verified by ca.crt
DISCOVERY = """
import json, os, ssl, urllib.request
d = "/var/run/secrets/kubernetes.io/serviceaccount/"
ctx = ssl.create_default_context(cafile=d + "ca.crt")
auth = {"Authorization": "Bearer " + open(d + "token").read()}
def get(url):
    return json.load(urllib.request.urlopen(urllib.request.Request(url, headers=auth), context=ctx, timeout=10))
config = get("https://%s:%s/.well-known/openid-configuration" % (
    os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]))
print("jwks_uri", config["jwks_uri"], flush=True)
print("keys", [k["alg"] for k in get(config["jwks_uri"])["keys"]], flush=True)
"""


@pytest.fixture(scope="module")
def in_cluster(store_url):
    with process_cluster(store_url, "incluster") as c:
        c.kubectl("create", "serviceaccount", "operator")
        yield c


def run_pod(c, name: str, script: str, account: str = "default", args: tuple[str, ...] = (), **spec) -> dict:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"serviceAccountName": account, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "python:3.11", "command": [PYTHON, "-c", script, *args]}],
                    **spec}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    return pod


def finished(c, name: str) -> str:
    return wait_for(lambda: c.kubectl_json("get", "pod", name)["status"].get("phase") in ("Succeeded", "Failed")
                    and c.kubectl_json("get", "pod", name)["status"]["phase"], 90, f"pod {name} finished")


def logs(c, name: str) -> list[str]:
    """The container's output so far; none before it starts."""
    return c.kubectl("logs", name, check=False).stdout.splitlines()


def test_the_service_account_is_refused_until_a_role_binding_lets_it_list_and_watch(in_cluster):
    c = in_cluster
    run_pod(c, "operator-unbound", OPERATOR, "operator", ("marker",))
    assert finished(c, "operator-unbound") == "Failed"
    assert logs(c, "operator-unbound") == ["dialing 10.96.0.1 443", "refused 403"]

    c.kubectl("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods")
    c.kubectl("create", "rolebinding", "operator", "--role=pod-reader", "--serviceaccount=default:operator")
    run_pod(c, "operator", OPERATOR, "operator", ("marker",))
    wait_for(lambda: "watching" in logs(c, "operator"), 90, "the operator watching")
    run_pod(c, "marker", "pass")
    assert finished(c, "operator") == "Succeeded"
    out = logs(c, "operator")
    assert out[0] == "dialing 10.96.0.1 443"
    assert out[1].startswith("listed [") and "'operator'" in out[1] and "'operator-unbound'" in out[1]
    assert out[2:] == ["watching", "saw ADDED marker"]
    c.kubectl("delete", "pod", "operator", "operator-unbound", "marker", "--wait=false")


def test_the_serving_certificate_names_the_kubernetes_service(in_cluster):
    c = in_cluster
    run_pod(c, "certificate", CERTIFICATE)
    assert finished(c, "certificate") == "Succeeded", logs(c, "certificate")
    assert [line.rsplit(" ", 1)[0] for line in logs(c, "certificate")] == [
        "verified kubernetes.default.svc", "verified kubernetes.default.svc.cluster.local", "verified 10.96.0.1"]
    c.kubectl("delete", "pod", "certificate", "--wait=false")


def test_a_host_network_pod_reaches_the_server_from_its_node(in_cluster):
    """A hostNetwork pod runs in its node's namespace: kube-proxy's rules there send the ClusterIP on."""
    c = in_cluster
    c.kubectl("create", "serviceaccount", "node-agent")
    c.kubectl("create", "rolebinding", "node-agent", "--clusterrole=view", "--serviceaccount=default:node-agent")
    run_pod(c, "node-agent", OPERATOR, "node-agent", ("node-marker",), hostNetwork=True)
    wait_for(lambda: "watching" in logs(c, "node-agent"), 90, "the node agent watching")
    run_pod(c, "node-marker", "pass")
    assert finished(c, "node-agent") == "Succeeded"
    out = logs(c, "node-agent")
    assert out[0] == "dialing 10.96.0.1 443" and "'node-agent'" in out[1] and out[2:] == ["watching", "saw ADDED node-marker"]
    assert c.kubectl_json("get", "pod", "node-agent")["status"]["podIP"].startswith("172.18.")  # the node's address
    c.kubectl("delete", "pod", "node-agent", "node-marker", "--wait=false")


def test_a_pod_follows_the_issuers_discovery_document_to_its_key_set(in_cluster):
    """jwks_uri names the advertised address, which the serving certificate names too."""
    c = in_cluster
    [address] = c.kubectl_json("get", "endpointslice", "kubernetes")["endpoints"][0]["addresses"]
    port = c.kubectl_json("get", "endpointslice", "kubernetes")["ports"][0]["port"]
    run_pod(c, "discovery", DISCOVERY)
    assert finished(c, "discovery") == "Succeeded", logs(c, "discovery")
    assert logs(c, "discovery") == [f"jwks_uri https://{address}:{port}/openid/v1/jwks", "keys ['ES256']"]
    c.kubectl("delete", "pod", "discovery", "--wait=false")
