"""ServiceAccount admission and the root CA publisher in `nanokube up`, driven by kubectl: a pod
created right after its namespace runs as the namespace's default account, with the projected
kube-api-access volume a node agent fills (a bound token that authenticates as the account, the
cluster CA from kube-root-ca.crt, the namespace); a pod naming a missing account is refused; a
standalone `nanokube controller-manager` publishes the CA its kubeconfig trusts."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.e2e.conftest import running_cluster, wait_for
from tests.e2e.manifests import to_yaml
from tests.e2e.test_controller_manager_identities import manager, stop

NS = "sa-e2e"


def _pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}], **spec}}


def _whoami(cluster, token: str) -> str:
    """The user a bearer token stands for, from a SelfSubjectReview."""
    ctx = ssl.create_default_context(cafile=str(cluster.data_dir / "pki" / "ca.crt"))
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
    req = urllib.request.Request(cluster.url + "/apis/authentication.k8s.io/v1/selfsubjectreviews", data=body,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        return json.loads(r.read())["status"]["userInfo"]["username"]


def test_a_pod_runs_with_its_account_token_and_the_cluster_ca(cluster):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_pod("web")]))  # the account is made meanwhile
    deadline = time.monotonic() + 60
    while (pod := cluster.kubectl_json("get", "pod", "web", "-n", NS))["status"].get("phase") != "Running":
        assert time.monotonic() < deadline, pod["status"]
        time.sleep(0.25)
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "default"
    vol = next(v for v in spec["volumes"] if v["name"].startswith("kube-api-access-"))
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": vol["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]

    ca = (cluster.data_dir / "pki" / "ca.crt").read_text()
    cm = cluster.kubectl_json("get", "configmap", "kube-root-ca.crt", "-n", NS)
    assert cm["data"] == {"ca.crt": ca}
    files = cluster.data_dir / "pods" / spec["nodeName"] / pod["metadata"]["uid"] / "volumes" / vol["name"]
    assert (files / "ca.crt").read_text() == ca
    assert (files / "namespace").read_text() == NS
    assert _whoami(cluster, (files / "token").read_text()) == f"system:serviceaccount:{NS}:default"
    # the node agents asked the TokenRequest API for it, as the kubelet does
    asked = {(e["user"]["username"], e["objectRef"]["name"]) for e in cluster.audit_events() if e["verb"] == "create"
             and e["objectRef"].get("subresource") == "token" and e["objectRef"].get("namespace") == NS
             and e["responseStatus"]["code"] == 201}
    assert asked == {("system:node-agents", "default")}


def test_a_pod_naming_a_missing_account_is_refused(cluster):
    cluster.kubectl("create", "namespace", "sa-missing")
    body = _pod("lost", serviceAccountName="robot")
    body["metadata"]["namespace"] = "sa-missing"
    r = cluster.kubectl("apply", "-f", "-", input=to_yaml([body]), check=False)
    assert r.returncode == 1
    assert ('pods "lost" is forbidden: error looking up service account sa-missing/robot: '
            'serviceaccount "robot" not found') in r.stderr


@pytest.fixture(scope="module")
def no_controllers():
    """A cluster without controllers nor ServiceAccount and TaintNodesByCondition admission (no
    node lifecycle controller would take a new node's not-ready taint off), for the next two tests."""
    with running_cluster("no-sa", ("--controllers", "", "--disable-admission-plugins",
                                   "ServiceAccount,TaintNodesByCondition")) as c:
        yield c


def test_a_standalone_manager_publishes_the_ca_its_kubeconfig_trusts(no_controllers, tmp_path):
    """kube-controller-manager without --root-ca-file publishes its client's CA data."""
    c = no_controllers
    assert c.kubectl("get", "configmap", "kube-root-ca.crt", check=False).returncode == 1
    p = manager(c, tmp_path / "kcm.log", "--controllers", "root-ca-cert-publisher")
    try:
        cm = wait_for(lambda: c.kubectl("get", "configmap", "kube-root-ca.crt", "-o", "json", check=False).stdout,
                      60, "kube-root-ca.crt")
    finally:
        stop(p)
    assert json.loads(cm)["data"] == {"ca.crt": (c.data_dir / "pki" / "ca.crt").read_text()}


def test_disable_admission_plugins_turns_service_account_admission_off(no_controllers, tmp_path):
    """`--disable-admission-plugins ServiceAccount,TaintNodesByCondition`, as with kube-apiserver: a
    cluster without the serviceaccount controller admits pods, which then name no account and mount
    no token, and registers its nodes without the not-ready taint; a name
    kube-apiserver does not know, or a plugin nanokube always runs, stops `up` with exit code 2."""
    c = no_controllers
    c.kubectl("create", "namespace", NS)
    c.kubectl("apply", "-f", "-", input=to_yaml([_pod("bare")]))
    spec = c.kubectl_json("get", "pod", "bare", "-n", NS)["spec"]
    assert "serviceAccountName" not in spec and "volumes" not in spec
    # `up`'s own nodes registered untainted, and nothing ever tainted them
    nodes = c.kubectl_json("get", "nodes")["items"]
    assert nodes and not [n["spec"]["taints"] for n in nodes if "taints" in n["spec"]]
    for names, why in (("Nope", 'disable-admission-plugins plugin "Nope" is unknown'),
                       ("ServiceAccount,LimitRanger", "nanokube always runs LimitRanger")):
        r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--port", "0", "--data-dir", str(tmp_path),
                            "--disable-admission-plugins", names], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and why in r.stderr, r.stderr
