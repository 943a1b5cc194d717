"""Subject keys for pod certificates: generated per `keyType`, and the stub
PKCS#10 request (empty subject, no extensions) whose signature proves the
requester holds the private key."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

#: podCertificate keyType -> key generator
GENERATORS = {
    "RSA3072": lambda: rsa.generate_private_key(65537, 3072),
    "RSA4096": lambda: rsa.generate_private_key(65537, 4096),
    "ECDSAP256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "ECDSAP384": lambda: ec.generate_private_key(ec.SECP384R1()),
    "ECDSAP521": lambda: ec.generate_private_key(ec.SECP521R1()),
    "ED25519": ed25519.Ed25519PrivateKey.generate,
}


def generate_key(key_type: str):
    """A new private key of a podCertificate keyType; ValueError for an unknown type."""
    try:
        return GENERATORS[key_type]()
    except KeyError:
        raise ValueError(f"unsupported keyType {key_type!r}") from None


def stub_csr(key) -> bytes:
    """DER PKCS#10 request with an empty subject, signed by `key`."""
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, algorithm)
    return csr.public_bytes(serialization.Encoding.DER)


def private_pem(key) -> bytes:
    """The key as an unencrypted PKCS#8 `PRIVATE KEY` block."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
