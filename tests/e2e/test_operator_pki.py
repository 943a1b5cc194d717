"""`nanokube up` with the operator's own PKI, as kube-apiserver's and kube-controller-manager's flags
take it (kubeadm's layout: ca.crt/ca.key for clients and the CSR signer, apiserver.crt, an RSA sa.key
with sa.pub, front-proxy-ca.crt): every certificate here is made by the test, none by `up`."""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from nanokube.pki.ca import KeyPair, issue, new_ca
from nanokube.pki.jwt import key_id

from .conftest import running_cluster, wait_for

ISSUER = "https://issuer.example.test"
#: --api-audiences' second audience (the first: the issuer, as the default would be)
API = "https://api.example.test"


def _write(d: Path, name: str, data: bytes) -> str:
    """Written whole, as a rotation replaces a file (rename over it)."""
    (d / (name + ".tmp")).write_bytes(data)
    os.replace(d / (name + ".tmp"), d / name)
    return str(d / name)


def _serving(ca: KeyPair) -> KeyPair:
    return issue(ca, "operator-apiserver", dns_names=("localhost",), ips=("127.0.0.1",), server=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("operator-pki")
    ca, front_ca = new_ca("operator-ca"), new_ca("operator-ca")  # (one name: only the CA that signed tells)
    serving, sni = _serving(ca), issue(ca, "sni", dns_names=("api.example.test",), server=True)
    sa = rsa.generate_private_key(65537, 2048)
    files = {"dir": d, "ca": ca, "front_ca": front_ca, "sa": sa, "serving": serving, "sni": sni}
    for name, kp in (("ca", ca), ("front-proxy-ca", front_ca), ("apiserver", serving), ("sni", sni)):
        _write(d, f"{name}.crt", kp.cert_pem)
        _write(d, f"{name}.key", kp.key_pem)
    _write(d, "sa.key", sa.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    _write(d, "sa.pub", sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return files


@pytest.fixture(scope="module")
def cluster(pki):
    d = pki["dir"]
    with running_cluster("operator-pki", extra=(
            "--client-ca-file", str(d / "ca.crt"), "--tls-cert-file", str(d / "apiserver.crt"),
            "--tls-private-key-file", str(d / "apiserver.key"),
            "--tls-sni-cert-key", f"{d / 'sni.crt'},{d / 'sni.key'}",
            "--service-account-signing-key-file", str(d / "sa.key"), "--service-account-key-file", str(d / "sa.pub"),
            "--service-account-issuer", ISSUER, "--api-audiences", f"{ISSUER},{API}",
            "--requestheader-client-ca-file", str(d / "front-proxy-ca.crt"),
            "--requestheader-allowed-names", "front-proxy-client",
            "--cluster-signing-cert-file", str(d / "ca.crt"), "--cluster-signing-key-file", str(d / "ca.key"))) as c:
        yield c


def _address(cluster) -> tuple[str, int]:
    host, port = cluster.url.removeprefix("https://").rsplit(":", 1)
    return host, int(port)


def _served_certificate(cluster, server_name: str | None = None) -> bytes:
    """The DER certificate a new connection is served (not verified: the test compares it)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(_address(cluster), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname=server_name) as conn:
        return conn.getpeercert(True)


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def _call(cluster, pki, path: str, body: dict | None = None, cert: KeyPair | None = None,
          headers: dict | None = None) -> dict:
    """A request trusting the operator's CA, with `cert` as the client certificate."""
    ctx = ssl.create_default_context(cadata=pki["ca"].cert_pem.decode())
    if cert is not None:
        c = _write(pki["dir"], "client.crt", cert.cert_pem)
        k = _write(pki["dir"], "client.key", cert.key_pem)
        ctx.load_cert_chain(c, k)
    req = urllib.request.Request(cluster.url + path, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json", **(headers or {})},
                                 method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=20) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def test_kubectl_with_a_client_certificate_of_the_given_ca(cluster, pki, tmp_path):
    alice = issue(pki["ca"], "alice", organizations=("system:masters",), client=True)
    b64 = lambda b: base64.b64encode(b).decode()
    kubeconfig = tmp_path / "alice.conf"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": cluster.url,
                                               "certificate-authority-data": b64(pki["ca"].cert_pem)}}],
        "users": [{"name": "alice", "user": {"client-certificate-data": b64(alice.cert_pem),
                                             "client-key-data": b64(alice.key_pem)}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "alice"}}]}))
    whoami = cluster.kubectl_json("--kubeconfig", str(kubeconfig), "auth", "whoami")
    assert whoami["status"]["userInfo"]["username"] == "alice"
    assert "system:masters" in whoami["status"]["userInfo"]["groups"]
    # `up`'s own kubeconfigs trust the given CA and hold certificates of it (the signing CA's)
    assert cluster.kubectl_json("auth", "whoami")["status"]["userInfo"]["username"] == "kubernetes-super-admin"
    printed = cluster.kubectl_json("--kubeconfig", str(cluster.data_dir / "kubeconfig"), "auth", "whoami")
    assert printed["status"]["userInfo"]["groups"] == ["kubeadm:cluster-admins", "system:authenticated"]
    # extension API servers learn the given CAs
    cm = cluster.kubectl_json("get", "configmap", "-n", "kube-system", "extension-apiserver-authentication")
    assert cm["data"]["client-ca-file"] == pki["ca"].cert_pem.decode()
    assert cm["data"]["requestheader-client-ca-file"] == pki["front_ca"].cert_pem.decode()


def test_a_front_proxy_of_the_given_request_header_ca_vouches_for_its_user(cluster, pki):
    proxy = issue(pki["front_ca"], "front-proxy-client", client=True)
    review = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW, proxy,
                   {"X-Remote-User": "bob", "X-Remote-Group": "system:masters"})
    assert review["status"]["userInfo"]["username"] == "bob"
    other = issue(pki["front_ca"], "someone-else", client=True)  # not an allowed name
    refused = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW, other,
                    {"X-Remote-User": "bob"})
    assert (refused["code"], refused["reason"]) == (401, "Unauthorized")


def test_client_certificates_are_verified_through_their_chain_as_go_verifies_them(cluster, pki):
    """A user of an intermediate CA the client sends after its certificate is the client CA's; the
    front proxy CA, of the client CA's very name, makes no user (system:masters or not)."""
    mid = new_ca("operator-intermediate", parent=pki["ca"])
    erin = issue(mid, "erin", organizations=("devs",), client=True)
    review = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW,
                   KeyPair(erin.cert_pem + mid.cert_pem, erin.key_pem))
    assert (review["status"]["userInfo"]["username"], review["status"]["userInfo"]["groups"]) == (
        "erin", ["devs", "system:authenticated"])
    mallory = issue(pki["front_ca"], "mallory", organizations=("system:masters",), client=True)
    refused = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW, mallory)
    assert (refused["code"], refused["reason"]) == (401, "Unauthorized")


def test_the_serving_certificate_is_the_given_one_and_its_rotation_is_served(cluster, pki):
    assert _served_certificate(cluster) == _der(pki["serving"].cert_pem)
    assert _served_certificate(cluster, "api.example.test") == _der(pki["sni"].cert_pem)
    rotated = _serving(pki["ca"])
    _write(pki["dir"], "apiserver.key", rotated.key_pem)  # a rotation's two writes, key first
    _write(pki["dir"], "apiserver.crt", rotated.cert_pem)
    wait_for(lambda: _served_certificate(cluster) == _der(rotated.cert_pem), 30, "the rotated certificate served")
    assert cluster.kubectl("get", "--raw", "/readyz").stdout == "ok"  # verified against the CA, as before


def test_tokens_are_signed_with_the_given_key_and_issuer(cluster, pki):
    token = cluster.kubectl("create", "token", "default").stdout.strip()
    head, body, sig = token.split(".")
    unb64 = lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    public = pki["sa"].public_key()
    assert json.loads(unb64(head)) == {"alg": "RS256", "kid": key_id(public)}
    claims = json.loads(unb64(body))
    assert claims["iss"] == ISSUER and claims["aud"] == [ISSUER, API]  # --api-audiences, a TokenRequest's default
    public.verify(unb64(sig), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())  # raises if not
    review = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW,
                   headers={"Authorization": f"Bearer {token}"})
    assert review["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"
    jwks = json.loads(cluster.kubectl("get", "--raw", "/openid/v1/jwks").stdout)
    assert [(k["kid"], k["alg"]) for k in jwks["keys"]] == [(key_id(public), "RS256")]


def test_a_csr_is_signed_by_the_given_signing_ca(cluster, pki):
    key = ec.generate_private_key(ec.SECP256R1())
    csr = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "carol")])).sign(key, hashes.SHA256())
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "carol"},
        "spec": {"request": base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode(),
                 "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}}))
    cluster.kubectl("certificate", "approve", "carol")
    issued = wait_for(lambda: cluster.kubectl_json("get", "csr", "carol").get("status", {}).get("certificate"),
                      30, "the CSR's certificate")
    cert = x509.load_pem_x509_certificate(base64.b64decode(issued))
    cert.verify_directly_issued_by(pki["ca"].cert)  # raises if another CA signed it
    assert cert.subject.rfc4514_string() == "CN=carol"


def test_a_token_authenticates_only_for_one_of_the_api_audiences(cluster, pki):
    for audience, user in ((API, "system:serviceaccount:default:default"), ("https://elsewhere.test", 401)):
        token = cluster.kubectl("create", "token", "default", "--audience", audience).stdout.strip()
        review = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW,
                       headers={"Authorization": f"Bearer {token}"})
        assert (review["status"]["userInfo"]["username"] if review["kind"] == "SelfSubjectReview"
                else review["code"]) == user, review
        tokenreview = json.loads(cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})).stdout)
        assert tokenreview["status"].get("audiences") == ([API] if user != 401 else None), tokenreview
    assert tokenreview["status"]["error"] == (
        f'token audiences ["https://elsewhere.test"] is invalid for the target audiences ["{ISSUER}" "{API}"]')


def test_changed_ca_files_are_republished_for_extension_api_servers(cluster, pki):
    """Last in the module: the CA files rotated. What the ConfigMap holds is joined with what it
    held (every API server adds its own), an old CA leaving once it expires."""
    ca2, front_ca2 = new_ca("operator-ca-2"), new_ca("operator-front-proxy-ca-2")
    _write(pki["dir"], "ca.crt", pki["ca"].cert_pem + ca2.cert_pem)
    _write(pki["dir"], "front-proxy-ca.crt", front_ca2.cert_pem)

    def published():
        cm = cluster.kubectl_json("get", "configmap", "-n", "kube-system", "extension-apiserver-authentication")
        return (cm["data"]["client-ca-file"], cm["data"]["requestheader-client-ca-file"])
    want = ((pki["ca"].cert_pem + ca2.cert_pem).decode(), (pki["front_ca"].cert_pem + front_ca2.cert_pem).decode())
    wait_for(lambda: published() == want, 30, "the rotated CAs published")
    dave = issue(ca2, "dave", client=True)  # the new client CA's users authenticate too
    review = _call(cluster, pki, "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW, dave)
    assert review["status"]["userInfo"]["username"] == "dave"
