"""Publishing CA certificates as ClusterTrustBundles, and checking a chain
against a bundle the way a pod that trusts it would."""

from __future__ import annotations

import datetime as _dt
import re

from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from ..machinery.errors import APIError

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.DOTALL)


def bundle_name(signer_name: str, suffix: str) -> str:
    """A signer-linked bundle's name: the signer with `/` as `:`, then `:suffix`."""
    if ":" in suffix:
        raise ValueError("the free part of a trust bundle name may not contain ':'")
    return f"{signer_name.replace('/', ':')}:{suffix}"


def certificates(pem: str | bytes) -> list[x509.Certificate]:
    """Every CERTIFICATE block in a PEM text, in order."""
    data = pem.encode() if isinstance(pem, str) else pem
    return [x509.load_pem_x509_certificate(m.group(0)) for m in _PEM.finditer(data)]


def verify_chain(chain_pem: str, bundle_pem: str, at: _dt.datetime | None = None) -> x509.Certificate:
    """Build a path from the chain's leaf to an anchor in the bundle; returns the
    leaf, or raises `cryptography.x509.verification.VerificationError`."""
    chain, anchors = certificates(chain_pem), certificates(bundle_pem)
    builder = PolicyBuilder().store(Store(anchors))
    if at is not None:
        builder = builder.time(at)
    builder.build_client_verifier().verify(chain[0], chain[1:])
    return chain[0]


async def publish(rc, signer_name: str, suffix: str, pems: list[bytes], labels: dict | None = None) -> dict:
    """Create or update the bundle `bundle_name(signer_name, suffix)` so it holds
    exactly `pems`; `rc` is a clustertrustbundles resource client."""
    name = bundle_name(signer_name, suffix)
    body = b"".join(p if p.endswith(b"\n") else p + b"\n" for p in pems).decode()
    try:
        current = await rc.get(name)
    except APIError as e:
        if e.code != 404:
            raise
        md: dict = {"name": name}
        if labels:
            md["labels"] = labels
        return await rc.create({"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle", "metadata": md,
                                "spec": {"signerName": signer_name, "trustBundle": body}})
    if (current.get("spec") or {}).get("trustBundle") == body:
        return current
    return await rc.update({**current, "spec": {**current["spec"], "trustBundle": body}})
