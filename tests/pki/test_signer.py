"""The pod-identity signer: CA storage and rotation, leaf contents, and the
controller issuing and denying requests through an in-process API server."""

import asyncio
import base64
import datetime as dt
import os
import shutil

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from nanokube.clock import Clock
from nanokube.pki import trustbundle
from nanokube.pki.signer import DAY, PodCertificateSigner, SignerCA, issue_leaf, key_type, pem_certificate
from tests.controllers import eventually, make_stack


class FakeClock(Clock):
    def __init__(self, t: float):
        self.t = t

    def now(self) -> float:
        return self.t


def stub(key) -> str:
    algo = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, algo)
    return base64.b64encode(csr.public_bytes(serialization.Encoding.DER)).decode()


def request(name: str, key, signer="nanokube.io/pod-identity", **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "signerName": signer, "podName": "p", "podUID": "u1", "serviceAccountName": "builder", "serviceAccountUID": "u2",
        "nodeName": "n1", "nodeUID": "u3", "stubPKCS10Request": stub(key), **spec}}


def test_key_types():
    assert key_type(ec.generate_private_key(ec.SECP384R1()).public_key()) == "ECDSAP384"
    assert key_type(ed25519.Ed25519PrivateKey.generate().public_key()) == "ED25519"
    assert key_type(rsa.generate_private_key(65537, 2048).public_key()) == ""


def test_leaf_pem_is_laid_out_as_cryptography_writes_it(tmp_path):
    ca = SignerCA(str(tmp_path))
    ca.load()
    for key in (ec.generate_private_key(ec.SECP256R1()), rsa.generate_private_key(65537, 3072)):
        leaf = issue_leaf(ca.issuing(), key.public_key(), "spiffe://cluster.local/ns/a/sa/b", 1.8e9, 3600)
        assert pem_certificate(leaf.public_bytes(serialization.Encoding.DER)) == leaf.public_bytes(serialization.Encoding.PEM).decode()


def test_ca_is_kept_on_disk_and_rotated_with_overlap(tmp_path):
    clock = FakeClock(1_800_000_000)
    ca = SignerCA(str(tmp_path), clock, validity=100 * DAY, rotate_before=20 * DAY, publish_lead=3600)
    assert ca.load() is True
    first = ca.issuing().pem
    assert oct(os.stat(next(tmp_path.glob("*.key"))).st_mode & 0o777) == "0o600"
    again = SignerCA(str(tmp_path), clock, validity=100 * DAY, rotate_before=20 * DAY)
    assert again.load() is True and again.trust_pems() == [first]
    assert ca.load() is False
    clock.t += 81 * DAY  # inside the rotation window: a second CA appears, published before it issues
    assert ca.load() is True
    assert len(ca.trust_pems()) == 2 and ca.issuing().pem == first
    clock.t += 3600
    assert ca.issuing().pem == ca.trust_pems()[1]
    clock.t += 20 * DAY  # the first CA expired: no longer trusted, and gone from disk
    assert ca.load() is True
    assert first not in ca.trust_pems() and len(list(tmp_path.glob("*.crt"))) == 1


def test_bundle_name_rule():
    assert trustbundle.bundle_name("example.com/foo", "abc") == "example.com:foo:abc"
    with pytest.raises(ValueError):
        trustbundle.bundle_name("example.com/foo", "a:b")


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    signer = PodCertificateSigner(s.client, str(tmp_path))
    await signer.start()
    yield s.client, signer, tmp_path
    await signer.stop()
    await s.close()


def _issued_or_denied(rc, name):
    async def check():
        obj = await rc.get(name, "default")
        return obj if (obj.get("status") or {}).get("conditions") else None
    return check


@pytest.mark.parametrize("make", [lambda: ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate,
                                  lambda: rsa.generate_private_key(65537, 3072)], ids=["p256", "ed25519", "rsa3072"])
async def test_issues_a_spiffe_leaf_that_verifies_against_the_bundle(env, make):
    client, signer, tmp_path = env
    rc = client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
    key = make()
    await rc.create(request("r1", key, maxExpirationSeconds=7200))
    obj = await eventually(_issued_or_denied(rc, "r1"))
    st = obj["status"]
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"]] == [("Issued", "True", "Issued")]
    bundle = await client.resource("certificates.k8s.io", "v1", "clustertrustbundles").get("nanokube.io:pod-identity:ca")
    assert bundle["spec"]["signerName"] == "nanokube.io/pod-identity"
    leaf = trustbundle.verify_chain(st["certificateChain"], bundle["spec"]["trustBundle"])
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://cluster.local/ns/default/sa/builder"]
    assert leaf.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == \
        key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    nb, na = leaf.not_valid_before_utc, leaf.not_valid_after_utc
    assert (na - nb) == dt.timedelta(seconds=7200)
    refresh = dt.datetime.fromisoformat(st["beginRefreshAt"].replace("Z", "+00:00"))
    assert nb + dt.timedelta(minutes=10) <= refresh <= na - dt.timedelta(minutes=10)
    assert list(tmp_path.glob("pki/signers/nanokube.io_pod-identity/ca-*.key"))


async def test_denies_unsupported_key_types(tmp_path):
    s = await make_stack()
    signer = PodCertificateSigner(s.client, str(tmp_path), supported=frozenset({"ED25519"}))
    await signer.start()
    try:
        rc = s.client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
        await rc.create(request("r2", ec.generate_private_key(ec.SECP256R1())))
        obj = await eventually(_issued_or_denied(rc, "r2"))
        (cond,) = obj["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Denied", "True", "UnsupportedKeyType")
        assert "ECDSAP256" in cond["message"] and "ED25519" in cond["message"]
        assert "certificateChain" not in obj["status"]
    finally:
        await signer.stop()
        await s.close()


async def test_ignores_other_signers(env):
    client, signer, _ = env
    rc = client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
    await rc.create(request("other", ed25519.Ed25519PrivateKey.generate(), signer="example.com/else"))
    await rc.create(request("mine", ed25519.Ed25519PrivateKey.generate()))
    await eventually(_issued_or_denied(rc, "mine"))
    assert not ((await rc.get("other", "default")).get("status") or {}).get("conditions")


async def test_a_server_joining_with_a_copy_of_up_s_pki_signs_with_the_same_ca(tmp_path):
    """`up` makes the signer's CA with the rest of DIR/pki, before its controllers: a second API
    server that joins with a copy of DIR/pki publishes and signs with the first's CA when its
    signer leads, rather than making one of its own."""
    from nanokube.cli import main

    # stopped by the bad flag right after the PKI is made, before anything serves
    argv = ["up", "--data-dir", str(tmp_path / "first"), "--disable-admission-plugins", "Bogus"]
    assert await asyncio.to_thread(main, argv) == 2
    made = sorted((tmp_path / "first").glob("pki/signers/nanokube.io_pod-identity/ca-*.crt"))
    assert len(made) == 1
    shutil.copytree(tmp_path / "first" / "pki", tmp_path / "second" / "pki")
    s = await make_stack()
    signer = PodCertificateSigner(s.client, str(tmp_path / "second"))
    await signer.start()
    try:
        bundle = await s.client.resource("certificates.k8s.io", "v1", "clustertrustbundles").get(
            "nanokube.io:pod-identity:ca")
        assert bundle["spec"]["trustBundle"] == made[0].read_text()
        key = ec.generate_private_key(ec.SECP256R1())
        rc = s.client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
        await rc.create(request("r1", key))
        st = (await eventually(_issued_or_denied(rc, "r1")))["status"]
        trustbundle.verify_chain(st["certificateChain"], made[0].read_text())
    finally:
        await signer.stop()
        await s.close()
