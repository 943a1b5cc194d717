"""The service-account key files as kube-apiserver reads them, and JWS signatures by key kind."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from nanokube.pki.ca import new_ca
from nanokube.pki.jwt import algorithm, key_id, public_keys, sign, verify_signature


def test_a_key_file_holds_public_keys_certificates_and_private_keys():
    ca = new_ca("sa")
    rsa_key, ec_key = rsa.generate_private_key(65537, 2048), ec.generate_private_key(ec.SECP384R1())
    pem = (rsa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
           + ca.cert_pem
           + ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    assert [key_id(k) for k in public_keys(pem)] == [key_id(rsa_key.public_key()), key_id(ca.cert.public_key()),
                                                      key_id(ec_key.public_key())]
    with pytest.raises(ValueError, match="does not contain any valid RSA or ECDSA public keys"):
        public_keys(b"no PEM here\n")


def test_keys_are_told_by_their_bytes_as_keyutil_tells_them():
    """keyutil.ParsePublicKeysPEM reads a block's bytes, never its label: an RSA private key in
    PKCS #1 or #8, a SubjectPublicKeyInfo, a certificate, an ECDSA private key in SEC 1. A PKCS #1
    `RSA PUBLIC KEY` (Go's ParsePKIXPublicKey refuses it) and an ECDSA private key in PKCS #8 hold
    none for it, which was taken before."""
    rsa_key, ec_key = rsa.generate_private_key(65537, 2048), ec.generate_private_key(ec.SECP256R1())
    no = serialization.NoEncryption()
    pkcs1_public = rsa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
    ec_pkcs8 = ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, no)
    with pytest.raises(ValueError, match="does not contain any valid RSA or ECDSA public keys"):
        public_keys(pkcs1_public + ec_pkcs8)
    rsa_pkcs8 = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, no)
    spki = ec_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    relabelled = spki.replace(b"PUBLIC KEY", b"RSA PUBLIC KEY").replace(b"\n", b"\r\n")
    assert [key_id(k) for k in public_keys(rsa_pkcs8 + relabelled)] == [key_id(rsa_key.public_key()),
                                                                        key_id(ec_key.public_key())]


def test_blocks_without_a_key_are_passed_over():
    """keyutil tolerates non-key PEM blocks: an encrypted key, a damaged certificate and a CRL-like
    block beside the key are skipped, not the file's error; a file of only those has no key."""
    key = ec.generate_private_key(ec.SECP256R1())
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"pw"))
    others = encrypted + b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" \
        + b"-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert [key_id(k) for k in public_keys(others + public)] == [key_id(key.public_key())]
    with pytest.raises(ValueError, match="does not contain any valid RSA or ECDSA public keys"):
        public_keys(others)


@pytest.mark.parametrize("key, alg", [(rsa.generate_private_key(65537, 2048), "RS256"),
                                      (ec.generate_private_key(ec.SECP256R1()), "ES256"),
                                      (ec.generate_private_key(ec.SECP521R1()), "ES512")])
def test_each_key_kind_signs_with_its_algorithm(key, alg):
    token = sign(key, {"sub": "x"})
    head, body, sig = token.split(".")
    raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    assert algorithm(key.public_key()) == alg
    assert verify_signature(key.public_key(), alg, f"{head}.{body}".encode(), raw)
    assert not verify_signature(key.public_key(), alg, f"{head}.{body}x".encode(), raw)


def test_a_key_of_another_curve_is_refused():
    with pytest.raises(ValueError, match="RSA key or an ECDSA key"):
        algorithm(ec.generate_private_key(ec.SECP256K1()).public_key())
