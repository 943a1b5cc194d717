"""The kube-apiserver-client CSR signer: an approved request gets a certificate of the cluster CA
carrying its subject, key and usages for the duration it asked (bounded); bad usages fail the
request; pending, denied and other signers' requests are left alone."""

from __future__ import annotations

import base64

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nanokube.controllers.csrsigning import CSRSigningController, duration, usage_error
from nanokube.controllers.csrsigning_options import cluster_ca, signer_files, validate_files
from nanokube.pki.ca import ensure_pki
from tests.controllers import eventually, make_stack
from tests.node import ManualClock


def csr_pem(cn: str, org: str) -> tuple[bytes, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    req = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]))
           .sign(key, hashes.SHA256()))
    return req.public_bytes(serialization.Encoding.PEM), key


def csr(name: str, pem: bytes, usages: list, signer: str = "kubernetes.io/kube-apiserver-client", **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer,
                                                  "usages": usages, **spec}}


APPROVED = {"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}


@pytest.fixture
async def env(tmp_path):
    pki = ensure_pki(str(tmp_path))
    s = await make_stack()
    clock = ManualClock()
    ctrl = CSRSigningController(s.client, cluster_ca(str(tmp_path)), clock)
    await ctrl.start()
    yield s.client.resource("certificates.k8s.io", "v1", "certificatesigningrequests"), clock, pki
    await ctrl.stop()
    await s.close()


async def approve(csrs, name: str, condition: dict = APPROVED) -> None:
    cur = await csrs.get(name)
    await csrs.update({**cur, "status": {"conditions": [condition]}}, subresource="approval")


def test_usages_and_duration_as_upstreams_signer():
    assert usage_error(["client auth"]) is None
    assert usage_error(["digital signature", "key encipherment", "client auth"]) is None
    assert usage_error(["client auth", "server auth"]) == "invalid usage for client certificate: server auth"
    assert usage_error(["digital signature"]) == "missing required usage for client certificate: client auth"
    assert (duration(None), duration(60), duration(3600), duration(10**9)) == (365 * 86400, 600, 3600, 365 * 86400)


async def test_an_approved_request_is_issued_a_client_certificate_of_the_cluster_ca(env):
    csrs, clock, pki = env
    pem, key = csr_pem("alice", "dev")
    await csrs.create(csr("alice", pem, ["digital signature", "client auth"], expirationSeconds=3600))
    await csrs.create(csr("pending", pem, ["client auth"]))
    await approve(csrs, "alice")

    async def issued():
        return (await csrs.get("alice")).get("status", {}).get("certificate")
    cert = x509.load_pem_x509_certificate(base64.b64decode(await eventually(issued)))
    assert cert.subject.rfc4514_string() == "O=dev,CN=alice" and cert.issuer == pki.ca.cert.subject
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    pki.ca.cert.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_encipherment
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # a short certificate (under 8 h) is backdated 5 minutes at its start only
    assert (cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()) == \
        (int(clock.now()) - 300, int(clock.now()) + 3600)
    assert "certificate" not in ((await csrs.get("pending")).get("status") or {})


async def test_bad_usages_fail_the_request_and_denied_or_foreign_ones_are_left_alone(env):
    csrs, _, _ = env
    pem, _ = csr_pem("bob", "dev")
    await csrs.create(csr("server", pem, ["client auth", "server auth"]))
    await csrs.create(csr("denied", pem, ["client auth"]))
    await csrs.create(csr("other", pem, ["client auth"], signer="example.com/other"))
    await approve(csrs, "server")
    await approve(csrs, "denied", {"type": "Denied", "status": "True", "reason": "No", "message": "no"})
    await approve(csrs, "other")

    async def failed():
        conds = (await csrs.get("server")).get("status", {}).get("conditions") or []
        return [c for c in conds if c["type"] == "Failed"]
    (cond,) = await eventually(failed)
    assert (cond["status"], cond["reason"], cond["message"]) == \
        ("True", "SignerValidationFailure", "invalid usage for client certificate: server auth")
    assert "certificate" not in (await csrs.get("server"))["status"]
    for name in ("denied", "other"):
        assert "certificate" not in (await csrs.get(name))["status"]


def node_request(cn: str = "system:node:n1", dns=(), ips=(), key=None) -> tuple[bytes, object]:
    import ipaddress
    key = key or ec.generate_private_key(ec.SECP256R1())
    b = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"), x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
    names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if names:
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM), key


async def issued_certificate(csrs, name: str) -> x509.Certificate:
    async def issued():
        return (await csrs.get(name)).get("status", {}).get("certificate")
    return x509.load_pem_x509_certificate(base64.b64decode(await eventually(issued)))


async def test_a_kubelet_client_request_is_issued_a_node_client_certificate(env):
    csrs, clock, pki = env
    pem, key = node_request()
    await csrs.create(csr("node-client", pem, ["digital signature", "client auth"],
                          signer="kubernetes.io/kube-apiserver-client-kubelet", expirationSeconds=600))
    await approve(csrs, "node-client")
    cert = await issued_certificate(csrs, "node-client")
    assert cert.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes" and cert.issuer == pki.ca.cert.subject
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    # the shortest lifetime the API takes (10 minutes), from 5 minutes back
    assert (cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()) == \
        (int(clock.now()) - 300, int(clock.now()) + 600)


async def test_a_kubelet_serving_request_is_issued_a_serving_certificate_for_its_names(env):
    csrs, clock, _ = env
    pem, _ = node_request(dns=("n1.example.com",), ips=("10.0.0.7",))
    await csrs.create(csr("node-serving", pem, ["digital signature", "key encipherment", "server auth"],
                          signer="kubernetes.io/kubelet-serving"))
    await approve(csrs, "node-serving")
    cert = await issued_certificate(csrs, "node-serving")
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["n1.example.com"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.7"]
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment
    # no expirationSeconds: the signing duration (a year), less the 5 minutes backdated at its start
    assert cert.not_valid_after_utc.timestamp() - cert.not_valid_before_utc.timestamp() == 365 * 86400


@pytest.mark.parametrize("name, signer, pem_args, usages, why", [
    ("client-not-a-node", "kubernetes.io/kube-apiserver-client-kubelet", {"cn": "alice"},
     ["digital signature", "client auth"], "subject common name does not begin with system:node:"),
    ("client-with-sans", "kubernetes.io/kube-apiserver-client-kubelet", {"dns": ("n1",)},
     ["digital signature", "client auth"], "DNS subjectAltNames are not allowed"),
    ("serving-without-sans", "kubernetes.io/kubelet-serving", {},
     ["digital signature", "server auth"], "DNS or IP subjectAltName is required"),
    ("serving-as-client", "kubernetes.io/kubelet-serving", {"ips": ("10.0.0.7",)},
     ["digital signature", "client auth"], "usages did not match [digital signature key encipherment server auth]"),
])
async def test_a_kubelet_request_its_signer_refuses_fails(env, name, signer, pem_args, usages, why):
    csrs, _, _ = env
    pem, _ = node_request(**pem_args)
    await csrs.create(csr(name, pem, usages, signer=signer))
    await approve(csrs, name)

    async def failed():
        return [c for c in (await csrs.get(name))["status"].get("conditions") or [] if c["type"] == "Failed"]
    (cond,) = await eventually(failed)
    assert (cond["reason"], cond["message"]) == ("SignerValidationFailure", why)
    # the server stamps both times of the condition the signer adds without lastTransitionTime
    assert cond["lastUpdateTime"] and cond["lastTransitionTime"]
    assert "certificate" not in (await csrs.get(name))["status"]


def test_signer_files_as_kube_controller_managers_flags_pick_them():
    none = {s: ("", "") for s in ("kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet",
                                   "kubernetes.io/kube-apiserver-client", "kubernetes.io/legacy-unknown")}
    # the generic pair signs for all four; half of it runs nothing (upstream skips the signer)
    assert set(signer_files(("ca.crt", "ca.key"), none).values()) == {("ca.crt", "ca.key")}
    assert len(signer_files(("ca.crt", "ca.key"), none)) == 4
    assert signer_files(("ca.crt", ""), none) == {}
    one = {**none, "kubernetes.io/kubelet-serving": ("s.crt", "s.key")}
    assert signer_files(("", ""), one) == {"kubernetes.io/kubelet-serving": ("s.crt", "s.key")}
    assert validate_files(("", ""), one) == []
    assert validate_files(("ca.crt", ""), {**none, "kubernetes.io/kube-apiserver-client-kubelet": ("", "k.key")}) == [
        '"cluster-signing-kube-apiserver-client": cannot specify key without cert',
        "cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time"]
