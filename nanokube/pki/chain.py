"""Which CA issued a certificate, found as Go's x509 builds a chain: a candidate's subject is the
certificate's issuer, those whose Subject Key Identifier is the certificate's Authority Key
Identifier tried first, and the one whose key verifies the signature is the issuer. Not by name
alone: a CA rotated under the same subject, or two operator CAs both named `kubernetes`, share it."""

from __future__ import annotations

from collections.abc import Iterable

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def _key_id(cert: x509.Certificate, kind) -> bytes | None:
    try:
        ext = cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None
    return ext.key_identifier if kind is x509.AuthorityKeyIdentifier else ext.digest


def issuer_of(cert: x509.Certificate, candidates: Iterable[x509.Certificate]) -> x509.Certificate | None:
    """The candidate that signed `cert` (itself, where it is self-signed and among them), or None."""
    named = [c for c in candidates if c.subject == cert.issuer]
    aki = _key_id(cert, x509.AuthorityKeyIdentifier)
    named.sort(key=lambda c: aki is None or _key_id(c, x509.SubjectKeyIdentifier) != aki)  # (stable: the rest keep their order)
    for ca in named:
        try:
            cert.verify_directly_issued_by(ca)
        except (InvalidSignature, ValueError, TypeError):  # (TypeError: a key type that signs no certificates)
            continue
        return ca
    return None


def _spki(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)


def holds(bundle: Iterable[x509.Certificate], ca: x509.Certificate) -> bool:
    """Whether a CA bundle verifies what `ca` issues: it holds a certificate of the same subject
    and key (the same CA, or a renewal of it)."""
    key = _spki(ca)
    return any(c.subject == ca.subject and _spki(c) == key for c in bundle)
