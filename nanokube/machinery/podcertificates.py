"""The stub certificate request a PodCertificateRequest carries, parsed once for the API
server's validation, the signer and the check of the issued certificate."""

from __future__ import annotations

import functools
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization


@functools.lru_cache(maxsize=1024)
def stub_request(der: bytes) -> x509.CertificateSigningRequest | None:
    """A stub CSR parsed once for the create's validation, the signer and
    the check of the issued certificate; None when it does not parse, its public key
    included (which the load leaves unread: a key of an unknown type or curve, or one
    that is not a point, fails only when it is first read, where Go's parser fails at once)."""
    try:
        csr = x509.load_der_x509_csr(der)
        csr.public_key()
    except (ValueError, UnsupportedAlgorithm, x509.InvalidVersion):
        return None
    return csr


@functools.lru_cache(maxsize=1024)
def stub_request_key(der: bytes) -> Any:
    """The public key of a stub CSR (None when it does not parse)."""
    csr = stub_request(der)
    return csr.public_key() if csr is not None else None


@functools.lru_cache(maxsize=1024)
def stub_request_spki(der: bytes) -> bytes | None:
    """The stub CSR's public key as a DER SubjectPublicKeyInfo, encoded once
    for the signer's leaf and the check that the leaf carries it."""
    key = stub_request_key(der)
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) if key is not None else None
