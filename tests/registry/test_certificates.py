"""certificates.k8s.io registry: CSRs, PodCertificateRequests, ClusterTrustBundles."""

import base64
import copy
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from nanokube.registry.base import all_resources
from nanokube.registry.certificates import (
    CertificateSigningRequestStrategy,
    ClusterTrustBundleStrategy,
    PodCertificateRequestStrategy,
    human_duration,
)

NOW = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def errors(errs):
    return [(e.field, e.reason) for e in errs]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def make_cert(key, subject="ca", ca=True, not_before=NOW, days=30, issuer_key=None, dns=()):
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_before + timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def pem(cert) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def test_registration():
    res = {r.plural: r for r in all_resources() if r.group == "certificates.k8s.io"}
    csr = res["certificatesigningrequests"]
    assert (csr.short_names, csr.subresources, csr.namespaced) == (("csr",), ("status", "approval"), False)
    assert res["podcertificaterequests"].versions == ["v1", "v1beta1"] and res["podcertificaterequests"].namespaced
    assert res["clustertrustbundles"].versions == ["v1", "v1beta1"] and not res["clustertrustbundles"].namespaced


# --- CertificateSigningRequest -----------------------------------------------------

def csr_request(key=EC_KEY, cn="system:node:node-1"):
    req = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])).sign(key, hashes.SHA256())
    return b64(req.public_bytes(serialization.Encoding.PEM))


def csr(**spec):
    base = {"request": csr_request(), "signerName": "kubernetes.io/kube-apiserver-client-kubelet", "usages": ["digital signature", "client auth"], "username": "system:node:node-1"}
    base.update(spec)
    return {"metadata": {"name": "node-csr-abc"}, "spec": base}


def test_csr_valid_and_columns():
    s = CertificateSigningRequestStrategy()
    obj = csr(expirationSeconds=86400)
    assert s.validate(obj) == []
    assert [c.fn(obj) for c in s.columns if c.name != "Age"] == [
        "node-csr-abc", "kubernetes.io/kube-apiserver-client-kubelet", "system:node:node-1", "24h", "Pending"]
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}], "certificate": b64(pem(make_cert(EC_KEY)).encode())}
    assert s.columns[5].fn(obj) == "Approved,Issued"
    assert s.field_selectors["spec.signerName"](obj) == "kubernetes.io/kube-apiserver-client-kubelet"


@pytest.mark.parametrize(
    "spec, field, reason",
    [
        ({"request": b64(b"not a csr")}, "spec.request", "FieldValueInvalid"),
        ({"usages": []}, "spec.usages", "FieldValueRequired"),
        ({"usages": ["client auth", "flying"]}, "spec.usages[1]", "FieldValueNotSupported"),
        ({"usages": ["client auth", "client auth"]}, "spec.usages[1]", "FieldValueDuplicate"),
        ({"signerName": "example"}, "spec.signerName", "FieldValueInvalid"),
        ({"signerName": "example/signer"}, "spec.signerName", "FieldValueInvalid"),
        ({"signerName": ""}, "spec.signerName", "FieldValueRequired"),
        ({"expirationSeconds": 599}, "spec.expirationSeconds", "FieldValueInvalid"),
    ],
)
def test_csr_rules(spec, field, reason):
    assert (field, reason) in errors(CertificateSigningRequestStrategy().validate(csr(**spec)))


def test_csr_bad_signature():
    req = x509.load_pem_x509_csr(base64.b64decode(csr_request()))
    der = bytearray(req.public_bytes(serialization.Encoding.DER))
    der[-3] ^= 0xFF
    tampered = b64(b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(bytes(der)) + b"-----END CERTIFICATE REQUEST-----\n")
    assert errors(CertificateSigningRequestStrategy().validate(csr(request=tampered))) == [("spec.request", "FieldValueInvalid")]


def test_csr_update_paths():
    s = CertificateSigningRequestStrategy()
    old = csr()
    approved = copy.deepcopy(old)
    approved["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}]}
    assert s.validate_approval_update(approved, old) == []
    assert errors(s.validate_status_update(approved, old)) == [("status.conditions", "FieldValueForbidden")]
    both = copy.deepcopy(approved)
    both["status"]["conditions"].append({"type": "Denied", "status": "True"})
    assert ("status.conditions", "FieldValueInvalid") in errors(s.validate_approval_update(both, old))
    issued = copy.deepcopy(approved)
    issued["status"]["certificate"] = b64(pem(make_cert(EC_KEY, ca=False)).encode())
    assert s.validate_status_update(issued, approved) == []
    assert errors(s.validate_update(issued, approved)) == [("status.certificate", "FieldValueForbidden")]
    reissued = copy.deepcopy(issued)
    reissued["status"]["certificate"] = b64(pem(make_cert(EC_KEY, subject="other", ca=False)).encode())
    assert errors(s.validate_status_update(reissued, issued)) == [("status.certificate", "FieldValueForbidden")]
    garbage = copy.deepcopy(approved)
    garbage["status"]["certificate"] = b64(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    assert errors(s.validate_status_update(garbage, approved)) == [("status.certificate", "FieldValueInvalid")]
    pending_again = copy.deepcopy(approved)
    pending_again["status"]["conditions"] = []
    assert ("status.conditions", "FieldValueForbidden") in errors(s.validate_approval_update(pending_again, approved))
    edited = csr(usages=["server auth"])
    s.prepare_for_update(edited, old)
    assert edited["spec"] == old["spec"]


def test_human_duration():
    assert [human_duration(s) for s in (90, 600, 3600, 86400, 86400 * 10, 86400 * 800)] == ["90s", "10m", "60m", "24h", "10d", "2y70d"]


# --- PodCertificateRequest ------------------------------------------------------------

POD_UID = "6a1f9a0e-7a7f-4d6f-9b7e-1d2b3c4d5e6f"


def stub(key, subject=None, extension=False):
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(subject or []))
    if extension:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    return b64(builder.sign(key, None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()).public_bytes(serialization.Encoding.DER))


def pcr(key=EC_KEY, **spec):
    base = {"signerName": "example.com/workload-identity", "podName": "web-0", "podUID": POD_UID, "serviceAccountName": "web",
            "serviceAccountUID": "b2c3", "nodeName": "node-1", "nodeUID": "c3d4", "stubPKCS10Request": stub(key)}
    base.update(spec)
    return {"metadata": {"name": "req-x7", "namespace": "default"}, "spec": {k: v for k, v in base.items() if v is not None}}


def test_pcr_defaults_and_valid_keys():
    s = PodCertificateRequestStrategy()
    obj = pcr()
    s.default(obj, "v1")
    assert obj["spec"]["maxExpirationSeconds"] == 86400
    assert s.validate(obj) == []
    for key in (ed25519.Ed25519PrivateKey.generate(), ec.generate_private_key(ec.SECP384R1())):
        assert s.validate(pcr(key, maxExpirationSeconds=3600)) == []
    assert set(s.field_selectors) == {"spec.signerName", "spec.podName", "spec.nodeName"}


@pytest.mark.parametrize(
    "spec, field, reason",
    [
        ({"maxExpirationSeconds": 3599}, "spec.maxExpirationSeconds", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 7862401}, "spec.maxExpirationSeconds", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 86401, "signerName": "kubernetes.io/kube-apiserver-client-pod"}, "spec.maxExpirationSeconds", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 3600, "stubPKCS10Request": None}, "spec.stubPKCS10Request", "FieldValueRequired"),
        ({"maxExpirationSeconds": 3600, "stubPKCS10Request": b64(b"junk")}, "spec.stubPKCS10Request", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 3600, "podUID": ""}, "spec.podUID", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 3600, "nodeName": "Node_1"}, "spec.nodeName", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 3600, "signerName": "nodomain"}, "spec.signerName", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 3600, "unverifiedUserAnnotations": {"plain": "x"}}, "spec.unverifiedUserAnnotations", "FieldValueInvalid"),
        ({"maxExpirationSeconds": 3600, "pkixPublicKey": b64(b"k")}, "spec.pkixPublicKey", "FieldValueInvalid"),
    ],
)
def test_pcr_rules(spec, field, reason):
    assert (field, reason) in errors(PodCertificateRequestStrategy().validate(pcr(**spec)))


def test_pcr_stub_content_rules():
    s = PodCertificateRequestStrategy()
    named = pcr(maxExpirationSeconds=3600, stubPKCS10Request=stub(EC_KEY, [x509.NameAttribute(NameOID.COMMON_NAME, "x")]))
    assert errors(s.validate(named)) == [("spec.stubPKCS10Request", "FieldValueInvalid")]
    extended = pcr(maxExpirationSeconds=3600, stubPKCS10Request=stub(EC_KEY, extension=True))
    assert errors(s.validate(extended)) == [("spec.stubPKCS10Request", "FieldValueInvalid")]
    small_rsa = rsa.generate_private_key(65537, 2048)
    [e] = s.validate(pcr(small_rsa, maxExpirationSeconds=3600))
    assert e.message == 'Invalid value: "2048-bit modulus": RSA keys must have modulus size 3072 or 4096'


@pytest.mark.parametrize("make", [lambda: ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate,
                                  lambda: rsa.generate_private_key(65537, 3072)], ids=["p256", "ed25519", "rsa3072"])
def test_pcr_stub_signature_is_the_proof_of_possession(make):
    """A stub CSR carrying someone else's public key, signed by the requester's
    own key, is refused: the signature must verify with the key in the CSR."""
    mine, theirs = make(), make()
    spki = [k.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) for k in (mine, theirs)]
    der = base64.b64decode(stub(mine))
    assert len(spki[0]) == len(spki[1]) and der.count(spki[0]) == 1
    forged = pcr(maxExpirationSeconds=3600, stubPKCS10Request=b64(der.replace(spki[0], spki[1])))
    [e] = PodCertificateRequestStrategy().validate(forged)
    assert (e.field, e.message) == ("spec.stubPKCS10Request",
                                    "Invalid value: \"<value omitted>\": could not verify the signature of the certificate signing request")
    assert PodCertificateRequestStrategy().validate(pcr(mine, maxExpirationSeconds=3600)) == []


def test_pcr_v1beta1_legacy_key_and_v1_read():
    s = PodCertificateRequestStrategy()
    key = ed25519.Ed25519PrivateKey.generate()
    pkix = b64(key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
    legacy = pcr(key, maxExpirationSeconds=3600, stubPKCS10Request=None, pkixPublicKey=pkix, proofOfPossession=b64(key.sign(POD_UID.encode())))
    assert s.validate(legacy) == []
    forged = copy.deepcopy(legacy)
    forged["spec"]["proofOfPossession"] = b64(key.sign(b"other"))
    assert errors(s.validate(forged)) == [("spec.proofOfPossession", "FieldValueInvalid")]
    both = copy.deepcopy(legacy)
    both["spec"]["stubPKCS10Request"] = stub(key)
    assert ("spec.pkixPublicKey", "FieldValueInvalid") in errors(s.validate(both))
    v1 = s.from_storage(legacy, "v1")
    assert "pkixPublicKey" not in v1["spec"] and v1["spec"]["stubPKCS10Request"] == "" and "pkixPublicKey" in legacy["spec"]
    assert s.from_storage(legacy, "v1beta1") is legacy


def issue(req, not_before=NOW, days=0, hours=24, refresh=timedelta(hours=12), key=EC_KEY, dns=("web.default.svc",), ca_key=None):
    ca_key = ca_key or ec.generate_private_key(ec.SECP256R1())
    leaf = make_cert(key, "web-0", ca=False, not_before=not_before, days=days + hours / 24, issuer_key=ca_key, dns=dns)
    new = copy.deepcopy(req)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    new["status"] = {
        "conditions": [{"type": "Issued", "status": "True", "reason": "Issued", "lastTransitionTime": NOW.strftime(fmt)}],
        "certificateChain": pem(leaf) + pem(make_cert(ca_key)),
        "notBefore": not_before.strftime(fmt), "notAfter": (not_before + timedelta(days=days, hours=hours)).strftime(fmt),
        "beginRefreshAt": (not_before + refresh).strftime(fmt),
    }
    return new


def test_pcr_status_transitions():
    s = PodCertificateRequestStrategy(now=lambda: NOW)
    req = pcr(maxExpirationSeconds=86400)
    issued = issue(req)
    assert s.validate_status_update(issued, req) == []
    assert errors(s.validate_status_update(issue(req, hours=25), req)) == [("status.certificateChain", "FieldValueInvalid")]
    assert errors(s.validate_status_update(issue(req, refresh=timedelta(minutes=5)), req)) == [("status.beginRefreshAt", "FieldValueInvalid")]
    assert errors(s.validate_status_update(issue(req, not_before=NOW - timedelta(hours=1)), req)) == [("status.notBefore", "FieldValueInvalid")]
    assert errors(s.validate_status_update(issue(req, key=ec.generate_private_key(ec.SECP256R1())), req)) == [("status.certificateChain", "FieldValueInvalid")]
    reissued = issue(req)
    assert errors(s.validate_status_update(reissued, issued)) == [("status", "FieldValueInvalid")]
    denied = copy.deepcopy(req)
    denied["status"] = {"conditions": [{"type": "Denied", "status": "True", "reason": "UnsupportedKeyType", "lastTransitionTime": "2026-07-01T12:00:00Z"}]}
    assert s.validate_status_update(denied, req) == []
    denied_with_chain = copy.deepcopy(denied)
    denied_with_chain["status"]["certificateChain"] = issued["status"]["certificateChain"]
    assert errors(s.validate_status_update(denied_with_chain, req)) == [("status", "FieldValueInvalid")]
    two = copy.deepcopy(denied)
    two["status"]["conditions"].append(dict(denied["status"]["conditions"][0], type="Failed", status="False"))
    assert errors(s.validate_status_update(two, req)) == [("status.conditions[1].type", "FieldValueInvalid"), ("status.conditions[1].status", "FieldValueNotSupported")]


def test_pcr_issued_leaf_key_compared_as_a_key_not_as_bytes():
    """A leaf whose SubjectPublicKeyInfo encodes the requested key differently
    (a compressed P-256 point) is still issued to that key."""
    from nanokube.pki import der

    s = PodCertificateRequestStrategy(now=lambda: NOW)
    req = pcr(maxExpirationSeconds=86400)
    issued = issue(req)
    leaf_pem = issued["status"]["certificateChain"].split("-----END CERTIFICATE-----\n")[0] + "-----END CERTIFICATE-----\n"
    leaf = x509.load_pem_x509_certificate(leaf_pem.encode())
    full = EC_KEY.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert der.certificate_parts(leaf.public_bytes(serialization.Encoding.DER))[0] == full
    point = EC_KEY.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
    compressed = der.seq(der.seq(der.oid("1.2.840.10045.2.1"), der.oid("1.2.840.10045.3.1.7")), der.bit_string(point))
    tbs = leaf.tbs_certificate_bytes.replace(full, compressed)
    tbs = der.seq(tbs[der.read(tbs, 0)[1]:])
    ca_key = ec.generate_private_key(ec.SECP256R1())
    sig_alg = der.seq(der.oid("1.2.840.10045.4.3.2"))
    reencoded = x509.load_der_x509_certificate(der.seq(tbs, sig_alg, der.bit_string(ca_key.sign(tbs, ec.ECDSA(hashes.SHA256())))))
    assert der.certificate_parts(reencoded.public_bytes(serialization.Encoding.DER))[0] == compressed
    new = copy.deepcopy(issued)
    new["status"]["certificateChain"] = pem(reencoded)
    assert s.validate_status_update(new, req) == []
    other = copy.deepcopy(req)
    other["spec"]["stubPKCS10Request"] = stub(ec.generate_private_key(ec.SECP256R1()))
    assert errors(s.validate_status_update(dict(new, spec=other["spec"]), other)) == [("status.certificateChain", "FieldValueInvalid")]


def test_pcr_issued_leaf_with_a_duplicate_extension_does_not_parse():
    from nanokube.pki import der

    s = PodCertificateRequestStrategy(now=lambda: NOW)
    req = pcr(maxExpirationSeconds=86400)
    issued = issue(req)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    spki = EC_KEY.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    san = der.extension(der.oid("2.5.29.17"), der.seq(der.tlv(0x86, b"spiffe://cluster.local/ns/default/sa/web")), True)
    sig_alg = der.seq(der.oid("1.2.840.10045.4.3.2"))
    tbs = der.seq(b"\xa0\x03\x02\x01\x02", der.integer(7), sig_alg, der.seq(), der.seq(der.time(NOW), der.time(NOW + timedelta(hours=24))),
                  der.seq(), spki, der.tlv(0xA3, der.seq(san, san)))
    leaf = x509.load_der_x509_certificate(der.seq(tbs, sig_alg, der.bit_string(ca_key.sign(tbs, ec.ECDSA(hashes.SHA256())))))
    issued["status"]["certificateChain"] = pem(leaf)
    [e] = s.validate_status_update(issued, req)
    assert (e.field, e.message.rsplit(": ", 1)[-1]) == ("status.certificateChain", "leaf certificate does not parse as valid X.509")


def test_pcr_issued_leaf_san_checks_hold_for_every_leaf_sharing_its_extensions():
    """The SAN verdict is remembered per encoded extensions block: a second
    leaf with the same extensions (another key, serial and CA signature) gets
    the same answer, and one without a SAN is fine."""
    s = PodCertificateRequestStrategy(now=lambda: NOW)
    req = pcr(maxExpirationSeconds=86400)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    assert s.validate_status_update(issue(req, dns=(), ca_key=ca_key), req) == []
    bad = [("Invalid value", "a..b", "leaf certificate's DNSName should not contain '..'"),
           ("Invalid value", ".x", "leaf certificate's DNSName should not start or end with '.'")]
    for _ in range(2):
        errs = s.validate_status_update(issue(req, dns=("a..b", ".x"), ca_key=ca_key), req)
        assert [(e.field, e.message) for e in errs] == [("status.certificateChain", f'{kind}: "{v}": {d}') for kind, v, d in bad]
    assert s.validate_status_update(issue(req, dns=("ok.example",), ca_key=ca_key), req) == []


def test_pcr_spec_immutable():
    s = PodCertificateRequestStrategy()
    old = pcr(maxExpirationSeconds=3600)
    new = pcr(maxExpirationSeconds=7200)
    new["spec"]["stubPKCS10Request"] = old["spec"]["stubPKCS10Request"]
    assert errors(s.validate_update(new, old)) == [("spec", "FieldValueInvalid")]


# --- ClusterTrustBundle ----------------------------------------------------------------

CA_A = pem(make_cert(ec.generate_private_key(ec.SECP256R1()), "ca-a"))
CA_B = pem(make_cert(ec.generate_private_key(ec.SECP256R1()), "ca-b"))


def bundle(name="example.com:foo:abc", signer="example.com/foo", trust=CA_A + CA_B):
    spec = {"trustBundle": trust}
    if signer:
        spec["signerName"] = signer
    return {"metadata": {"name": name}, "spec": spec}


def test_bundle_valid_and_columns():
    s = ClusterTrustBundleStrategy()
    assert s.validate(bundle()) == []
    assert s.validate(bundle("plain-roots", None)) == []
    assert [c.fn(bundle()) for c in s.columns] == ["example.com:foo:abc", "example.com/foo"]
    assert s.field_selectors["spec.signerName"](bundle()) == "example.com/foo"


@pytest.mark.parametrize(
    "obj, field, detail",
    [
        (bundle("example.com:foo:abc", None), "metadata.name", 'ClusterTrustBundle without signer name must not have ":" in its name'),
        (bundle("foo"), "metadata.name", "ClusterTrustBundle for signerName example.com/foo must be named with prefix example.com:foo:"),
        (bundle(trust=""), "spec.trustBundle", "at least one trust anchor must be provided"),
        (bundle(trust=CA_A + CA_A), "spec.trustBundle", "duplicate trust anchor (indices [0 1])"),
        (bundle(trust=pem(make_cert(EC_KEY, "leaf", ca=False))), "spec.trustBundle", "entry 0 does not have the CA bit set"),
        (bundle(trust="-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), "spec.trustBundle", "entry 0 has bad block type: PRIVATE KEY"),
        (bundle(trust=CA_A.replace("-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1)), "spec.trustBundle", "entry 0 has PEM block headers"),
    ],
)
def test_bundle_rules(obj, field, detail):
    assert (field, detail) in [(e.field, e.detail) for e in ClusterTrustBundleStrategy().validate(obj)]


def test_bundle_update():
    s = ClusterTrustBundleStrategy()
    old = bundle()
    assert s.validate_update(bundle(trust=CA_B), old) == []
    moved = bundle(signer="example.com/bar", name="example.com:bar:abc")
    assert errors(s.validate_update(moved, old)) == [("spec.signerName", "FieldValueInvalid")]


def test_stub_request_is_parsed_once_and_shared_with_the_signer():
    from nanokube.pki.signer import stub_key
    from nanokube.machinery.podcertificates import stub_request, stub_request_key
    from nanokube.registry.certificates import stub_public_key

    spec = {"stubPKCS10Request": stub(EC_KEY)}
    der = base64.b64decode(spec["stubPKCS10Request"])
    assert stub_request(der) is stub_request(bytes(der))
    assert stub_public_key(spec) is stub_key(spec) is stub_request_key(der)
    assert stub_request_key(der).public_numbers() == EC_KEY.public_key().public_numbers()
    assert stub_request(b"junk") is None and stub_request_key(b"junk") is None


def test_registering_the_group_does_not_import_cryptography():
    code = "import sys\nimport nanokube.registry\nprint(sorted(m for m in sys.modules if m.startswith('cryptography')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]"


async def test_over_http_pcr_spec_immutable_prints_the_internal_spec(tmp_path):
    """ValidateImmutableField(newReq.Spec, ...) hands field.Invalid the internal
    certificates.PodCertificateRequestSpec, which json.Marshal writes under its Go field names."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    body = pcr(maxExpirationSeconds=3600, unverifiedUserAnnotations={"example.com/a": "b"})
    async with served(tmp_path) as (_, api_client):
        certs = client.CertificatesV1Api(api_client)
        await asyncio.to_thread(certs.create_namespaced_pod_certificate_request, "default", body)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(certs.patch_namespaced_pod_certificate_request, "req-x7", "default",
                                    {"spec": {"maxExpirationSeconds": 7200}})
    assert e.value.status == 422
    spec = body["spec"]
    assert json.loads(e.value.body)["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec",
        "message": 'Invalid value: {"SignerName":"example.com/workload-identity","PodName":"web-0","PodUID":'
                   f'"{POD_UID}","ServiceAccountName":"web","ServiceAccountUID":"b2c3","NodeName":"node-1",'
                   '"NodeUID":"c3d4","MaxExpirationSeconds":7200,"PKIXPublicKey":null,"ProofOfPossession":null,'
                   f'"StubPKCS10Request":"{spec["stubPKCS10Request"]}","UnverifiedUserAnnotations":'
                   '{"example.com/a":"b"}}: field is immutable'}]


async def test_over_http_csr_condition_times_are_stamped_and_status_keeps_the_approval(tmp_path):
    """populateConditionTimestamps: /approval and /status fill a condition's lastUpdateTime and
    lastTransitionTime the client left out (the transition time of a stored condition of that type
    and status, else now); /status keeps the Approved and Denied conditions as stored."""
    import asyncio

    from kubernetes import client

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        certs = client.CertificatesV1Api(api_client)
        created = await asyncio.to_thread(certs.create_certificate_signing_request,
                                          {**csr(), "status": {"conditions": [{"type": "Approved", "status": "True"}]}})
        assert created.status.to_dict() == {"certificate": None, "conditions": None}  # `{}`, nothing approved
        cur = await asyncio.to_thread(certs.read_certificate_signing_request, "node-csr-abc")
        cur.status.conditions = [client.V1CertificateSigningRequestCondition(
            type="Approved", status="True", reason="ByHand", message="looks fine")]
        approved = await asyncio.to_thread(certs.replace_certificate_signing_request_approval, "node-csr-abc", cur)
        (cond,) = approved.status.conditions
        assert cond.last_update_time is not None and cond.last_transition_time == cond.last_update_time
        assert abs(cond.last_transition_time - datetime.now(timezone.utc)) < timedelta(seconds=30)

        # the same condition sent again without times keeps its transition time
        transition = cond.last_transition_time
        cond.last_transition_time = None
        again = await asyncio.to_thread(certs.replace_certificate_signing_request_approval, "node-csr-abc", approved)
        assert again.status.conditions[0].last_transition_time == transition

        # /status may add Failed (stamped too) but not rewrite Approved: it is put back as stored
        again.status.conditions[0].message = "rewritten"
        again.status.conditions.append(client.V1CertificateSigningRequestCondition(
            type="Failed", status="True", reason="SignerValidationFailure", message="no"))
        failed = await asyncio.to_thread(certs.replace_certificate_signing_request_status, "node-csr-abc", again)
    assert [(c.type, c.message) for c in failed.status.conditions] == [("Approved", "looks fine"), ("Failed", "no")]
    assert failed.status.conditions[1].last_update_time is not None
    assert failed.status.conditions[1].last_transition_time is not None


async def test_over_http_the_legacy_signer_is_refused_on_create(tmp_path):
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        certs = client.CertificatesV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(certs.create_certificate_signing_request,
                                    csr(signerName="kubernetes.io/legacy-unknown"))
    assert e.value.status == 422
    assert json.loads(e.value.body)["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.signerName",
        "message": 'Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version'}]


#: a P-256 key's SubjectPublicKeyInfo as DER writes it, and changes no library reads at load time: its
#: curve one none implements, its algorithm none knows, its point no point (each read only with the key)
_SPKI_MANGLES = {"curve": (b"\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07", b"\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x06"),
                 "algorithm": (b"\x06\x07\x2a\x86\x48\xce\x3d\x02\x01", b"\x06\x07\x2a\x86\x48\xce\x3d\x02\x02"),
                 "point": (b"\x03\x42\x00\x04", b"\x03\x42\x00\x05")}


def _mangled(der: bytes, how: str) -> bytes:
    old, new = _SPKI_MANGLES[how]
    assert der.count(old) == 1
    return der.replace(old, new)


@pytest.mark.parametrize("how", sorted(_SPKI_MANGLES))
def test_a_request_whose_public_key_does_not_parse_is_invalid_not_an_error(how):
    """cryptography reads a CSR's public key only when it is first used (Go's parser reads it at once): a key
    of an unknown curve or algorithm, or no point, raised from the signature check (a 500, found by fuzz45's
    protobuf sweep); it is the field's invalid value, for a CSR and a PodCertificateRequest's stub alike."""
    der = x509.load_pem_x509_csr(base64.b64decode(csr_request())).public_bytes(serialization.Encoding.DER)
    request = b64(b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(_mangled(der, how))
                  + b"-----END CERTIFICATE REQUEST-----\n")
    assert errors(CertificateSigningRequestStrategy().validate(csr(request=request))) == [("spec.request", "FieldValueInvalid")]
    stub_der = _mangled(base64.b64decode(stub(EC_KEY)), how)
    [e] = PodCertificateRequestStrategy().validate(pcr(maxExpirationSeconds=3600, stubPKCS10Request=b64(stub_der)))
    assert (e.field, e.message) == ("spec.stubPKCS10Request",
                                    'Invalid value: "<value omitted>": must be a DER-encoded PKCS#10 certificate signing request')


async def test_over_http_a_csr_whose_public_key_does_not_parse_is_a_422(tmp_path):
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    der = x509.load_pem_x509_csr(base64.b64decode(csr_request())).public_bytes(serialization.Encoding.DER)
    request = b64(b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(_mangled(der, "curve"))
                  + b"-----END CERTIFICATE REQUEST-----\n")
    async with served(tmp_path) as (_, api_client):
        certs = client.CertificatesV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(certs.create_certificate_signing_request, csr(request=request))
    assert e.value.status == 422
    assert [c["field"] for c in json.loads(e.value.body)["details"]["causes"]] == ["spec.request"]
