"""A standalone `nanokube controller-manager` with kube-controller-manager's CSR signing flags signs
with the CA it is given, and with --use-service-account-credentials each controller acts as its
own kube-system service account, held by the API server's RBAC to its system:controller role."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nanokube.pki.ca import new_ca

from .conftest import running_cluster, wait_for

pytestmark = pytest.mark.store


@pytest.fixture(scope="module")
def bare():
    with running_cluster("kcm-ids", ("--controllers", "")) as c:
        yield c


def manager(c, log: Path, *args: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", c.kubeconfig,
                                 "--leader-elect", "false", "--secure-port", "0", *args],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)


def stop(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def csr_manifest(name: str, signer: str, usages: list[str], cn: str, org: str = "") -> str:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)] + (
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else [])
    req = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    if signer.endswith("kubelet-serving"):
        req = req.add_extension(x509.SubjectAlternativeName([x509.DNSName("node-a")]), critical=False)
    pem = req.sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return json.dumps({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                       "metadata": {"name": name},
                       "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": usages}})


def test_signing_flags_are_validated_as_upstream(bare):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", bare.kubeconfig,
                        "--cluster-signing-cert-file", "ca.crt", "--cluster-signing-kubelet-serving-key-file", "k.key",
                        "--cluster-signing-kube-apiserver-client-cert-file", "c.crt"],
                       check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == (
        'nanokube controller-manager: ["cluster-signing-kubelet-serving": cannot specify key without cert, '
        '"cluster-signing-kube-apiserver": cannot specify cert without key, cannot specify '
        '--cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time]')
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", bare.kubeconfig,
                        "--cluster-signing-duration", "a year"], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ('nanokube controller-manager: invalid argument "a year" for '
                                         '"--cluster-signing-duration" flag: time: invalid duration "a year"')


def test_standalone_manager_signs_with_the_ca_it_is_given(bare, tmp_path):
    c = bare
    ca = new_ca("kcm-test-signer")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "ca.key").write_bytes(ca.key_pem)
    c.kubectl("apply", "-f", "-", input=csr_manifest("serving", "kubernetes.io/kubelet-serving",
                                                     ["digital signature", "server auth"], "system:node:node-a",
                                                     "system:nodes"))
    c.kubectl("apply", "-f", "-", input=csr_manifest("alice", "kubernetes.io/kube-apiserver-client",
                                                     ["client auth"], "alice"))
    c.kubectl("certificate", "approve", "serving", "alice")
    # only kube-apiserver-client has a CA: the kubelet-serving signer does not run
    p = manager(c, c.data_dir / "kcm-sign.log", "--controllers", "csrsigning",
                "--cluster-signing-kube-apiserver-client-cert-file", str(tmp_path / "ca.crt"),
                "--cluster-signing-kube-apiserver-client-key-file", str(tmp_path / "ca.key"),
                "--cluster-signing-duration", "24h")
    try:
        pem = wait_for(lambda: c.kubectl("get", "csr", "alice", "-o", "jsonpath={.status.certificate}").stdout,
                       60, "alice's certificate")
        serving = c.kubectl_json("get", "csr", "serving")
    finally:
        stop(p)
    cert = x509.load_pem_x509_certificate(base64.b64decode(pem))
    assert cert.issuer == ca.cert.subject
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    # backdated 5 minutes at both ends: the lifetime is the signing duration
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() == 86400
    assert "certificate" not in (serving.get("status") or {})


def test_controllers_act_as_their_service_accounts(bare):
    c = bare
    c.kubectl("create", "deployment", "sa-web", "--image=nginx", "--replicas=2")
    c.kubectl("expose", "deployment", "sa-web", "--port=80")
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "sa-claim"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    c.kubectl("create", "namespace", "sa-gone")
    c.kubectl("create", "configmap", "leftover", "-n", "sa-gone", "--from-literal=a=b")
    p = manager(c, c.data_dir / "kcm-sa.log", "--use-service-account-credentials")
    try:
        wait_for(lambda: c.kubectl("get", "deployment", "sa-web", "-o", "jsonpath={.status.readyReplicas}").stdout == "2",
                 90, "sa-web ready")
        addresses = wait_for(lambda: c.kubectl("get", "endpoints", "sa-web", "-o",
                                               "jsonpath={.subsets[*].addresses[*].ip}", check=False).stdout.split(),
                             60, "sa-web's Endpoints")
        c.kubectl("delete", "pvc", "sa-claim", "--wait=false")
        wait_for(lambda: c.kubectl("get", "pvc", "sa-claim", check=False).returncode != 0, 60, "sa-claim gone")
        # the namespace controller empties a deleted namespace (only kinds that can be listed and deleted)
        c.kubectl("delete", "namespace", "sa-gone", "--wait=false")
        wait_for(lambda: c.kubectl("get", "namespace", "sa-gone", check=False).returncode != 0, 60, "sa-gone gone")
    finally:
        stop(p)
    assert len(addresses) == 2
    events = [json.loads(line) for line in (c.data_dir / "audit.log").read_text().splitlines()]
    creators = {e["user"]["username"] for e in events if e["verb"] == "create" and e["objectRef"]["resource"] == "pods"
                and "subresource" not in e["objectRef"] and e["responseStatus"]["code"] == 201}
    assert creators == {"system:serviceaccount:kube-system:replicaset-controller"}
    rs = {e["user"]["username"] for e in events if e["verb"] == "create" and e["objectRef"]["resource"] == "replicasets"
          and e["responseStatus"]["code"] == 201}
    assert rs == {"system:serviceaccount:kube-system:deployment-controller"}
    # the legacy Endpoints are the endpoint controller's, the claim's finalizer the PVC protection controller's
    writers = {(e["verb"], e["objectRef"]["resource"]): e["user"]["username"] for e in events
               if e["objectRef"].get("name") in ("sa-web", "sa-claim") and e["responseStatus"]["code"] < 300
               and e["verb"] in ("create", "update")}
    assert writers["create", "endpoints"] == "system:serviceaccount:kube-system:endpoint-controller"
    assert writers["update", "persistentvolumeclaims"] == "system:serviceaccount:kube-system:pvc-protection-controller"
    emptied = {e["user"]["username"] for e in events if e["verb"] == "delete" and e["objectRef"].get("name") == "leftover"
               and e["responseStatus"]["code"] == 200}
    assert emptied == {"system:serviceaccount:kube-system:namespace-controller"}
    tokens = {e["objectRef"]["name"] for e in events if e["objectRef"].get("subresource") == "token"
              and e["objectRef"].get("namespace") == "kube-system"}
    assert {"replicaset-controller", "deployment-controller"} <= tokens
    # no controller was refused what it asked for under its role (the root CA publisher putting
    # kube-root-ca.crt back in sa-gone while it terminates is refused by NamespaceLifecycle, as upstream's is)
    refused = sorted({(e["user"]["username"], e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
                      for e in events if e["user"]["username"].startswith("system:serviceaccount:kube-system:")
                      and e["responseStatus"]["code"] == 403
                      and "because it is being terminated" not in e["responseStatus"].get("message", "")})
    assert refused == []
