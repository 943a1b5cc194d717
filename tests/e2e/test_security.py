"""Security end to end: RBAC for a client-certificate user (403 wording,
`kubectl auth can-i`), unauthenticated requests, and pod certificates issued
by the built-in signer through the API and verified against its published
ClusterTrustBundle."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from nanokube.pki.ca import KeyPair, issue
from nanokube.pki.trustbundle import verify_chain
from tests.e2e.manifests import to_yaml

G = "rbac.authorization.k8s.io"


@pytest.fixture(scope="module")
def alice(cluster, tmp_path_factory):
    """kubectl flags for user alice, who may read pods in namespace `team` only."""
    pki = cluster.data_dir / "pki"
    ca = KeyPair((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes())
    kp = issue(ca, "alice", organizations=("dev",), client=True, days=1)
    config = yaml.safe_load(open(cluster.kubeconfig))
    for u in config["users"]:
        u["user"] = {"client-certificate-data": base64.b64encode(kp.cert_pem).decode(),
                     "client-key-data": base64.b64encode(kp.key_pem).decode()}
    path = tmp_path_factory.mktemp("alice") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": f"{G}/v1", "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "team"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": f"{G}/v1", "kind": "RoleBinding", "metadata": {"name": "alice-reads", "namespace": "team"},
         "roleRef": {"apiGroup": G, "kind": "Role", "name": "pod-reader"},
         "subjects": [{"apiGroup": G, "kind": "User", "name": "alice"}]},
    ]
    cluster.kubectl("apply", "-f", "-", input=to_yaml(docs))
    return ("--kubeconfig", str(path))


def test_role_user_is_confined_to_its_namespace(cluster, alice):
    assert cluster.kubectl(*alice, "get", "pods", "-n", "team").returncode == 0
    r = cluster.kubectl(*alice, "get", "pods", "-n", "default", check=False)
    assert r.returncode != 0
    assert 'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" ' \
           'in the namespace "default"' in r.stderr
    r = cluster.kubectl(*alice, "delete", "pod", "x", "-n", "team", check=False)
    assert 'pods "x" is forbidden: User "alice" cannot delete resource "pods" in API group "" in the namespace "team"' in r.stderr
    r = cluster.kubectl(*alice, "get", "clusterroles", check=False)
    assert 'User "alice" cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope' in r.stderr


def test_auth_can_i(cluster, alice):
    assert cluster.kubectl(*alice, "auth", "can-i", "list", "pods", "-n", "team").stdout.strip() == "yes"
    r = cluster.kubectl(*alice, "auth", "can-i", "list", "pods", "-n", "default", check=False)
    assert (r.returncode, r.stdout.strip()) == (1, "no")
    r = cluster.kubectl(*alice, "auth", "can-i", "create", "pods", "-n", "team", check=False)
    assert r.stdout.strip() == "no"
    assert cluster.kubectl("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"


def test_default_roles_are_served(cluster):
    roles = {r["metadata"]["name"] for r in cluster.kubectl_json("get", "clusterroles")["items"]}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery", "system:node"} <= roles
    crb = cluster.kubectl_json("get", "clusterrolebinding", "cluster-admin")
    assert crb["subjects"] == [{"apiGroup": G, "kind": "Group", "name": "system:masters"}]


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), context=ctx, timeout=10) as resp:
            return resp.status, {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_requests_without_credentials(cluster):
    assert _get(cluster.url + "/healthz")[0] == 200
    code, body = _get(cluster.url + "/api/v1/namespaces/default/pods")
    assert code == 403
    assert body["message"] == 'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"'
    code, body = _get(cluster.url + "/api/v1/pods", {"Authorization": "Bearer not-a-token"})
    assert (code, body["reason"]) == (401, "Unauthorized")


def _stub(key) -> str:
    algo = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, algo)
    return base64.b64encode(csr.public_bytes(serialization.Encoding.DER)).decode()


def _request(name: str, version: str = "v1", **spec) -> str:
    return json.dumps({"apiVersion": f"certificates.k8s.io/{version}", "kind": "PodCertificateRequest",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"signerName": "nanokube.io/pod-identity", "podName": "web-0", "podUID": "uid-pod",
                                "serviceAccountName": "web", "serviceAccountUID": "uid-sa", "nodeName": "node-1",
                                "nodeUID": "uid-node", **spec}})


def _settled(cluster, name: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        obj = cluster.kubectl_json("get", "podcertificaterequests.v1.certificates.k8s.io", name, "-n", "default")
        if (obj.get("status") or {}).get("conditions"):
            return obj
        time.sleep(0.2)
    raise AssertionError(f"request {name} was never issued or denied")


@pytest.mark.parametrize("make", [lambda: ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate],
                         ids=["ecdsa-p256", "ed25519"])
def test_pod_certificate_is_issued_and_verifies_against_the_bundle(cluster, make, request):
    name = f"req-{request.node.callspec.id}"
    key = make()
    cluster.kubectl("create", "-f", "-", input=_request(name, stubPKCS10Request=_stub(key)))
    st = _settled(cluster, name)["status"]
    assert [(c["type"], c["status"]) for c in st["conditions"]] == [("Issued", "True")]
    bundle = cluster.kubectl_json("get", "clustertrustbundle", "nanokube.io:pod-identity:ca")
    assert bundle["spec"]["signerName"] == "nanokube.io/pod-identity"
    leaf = verify_chain(st["certificateChain"], bundle["spec"]["trustBundle"])
    assert leaf.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == \
        key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://cluster.local/ns/default/sa/web"]
    assert (cluster.data_dir / "pki" / "signers" / "nanokube.io_pod-identity").is_dir()


def test_rsa_2048_is_rejected(cluster):
    r = cluster.kubectl("create", "-f", "-", input=_request("req-rsa", stubPKCS10Request=_stub(rsa.generate_private_key(65537, 2048))),
                        check=False)
    assert r.returncode != 0
    assert ('The PodCertificateRequest "req-rsa" is invalid: spec.stubPKCS10Request: Invalid value: "2048-bit modulus": '
            "RSA keys must have modulus size 3072 or 4096") in r.stderr


def test_request_without_a_stub_is_denied_unsupported_key_type(cluster):
    """A v1beta1 request carrying only the deprecated pkixPublicKey reaches v1
    with no stub CSR: the signer cannot bind a certificate to it and denies."""
    key = ed25519.Ed25519PrivateKey.generate()
    pkix = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    cluster.kubectl("create", "-f", "-", input=_request(
        "req-legacy", "v1beta1", pkixPublicKey=base64.b64encode(pkix).decode(),
        proofOfPossession=base64.b64encode(key.sign(b"uid-pod")).decode()))
    (cond,) = _settled(cluster, "req-legacy")["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Denied", "True", "UnsupportedKeyType")
