"""kube-apiserver's in-tree admission plugins, over HTTP with the official client."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.served import served


def csr(name: str, signer: str, orgs: tuple[str, ...], usages: list) -> dict:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    req = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(
        [*attrs, x509.NameAttribute(NameOID.COMMON_NAME, "system:node:n1")])).sign(
        ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
    return {"metadata": {"name": name}, "spec": {
        "request": base64.b64encode(req.public_bytes(serialization.Encoding.PEM)).decode(), "signerName": signer,
        "usages": usages}}


async def test_certificate_subject_restriction_refuses_a_masters_client_request(tmp_path):
    """CertificateSubjectRestriction: a kube-apiserver-client request may not name system:masters
    among its organizations; other signers' requests may (their signers have policies of their own)."""
    async with served(tmp_path) as (_, api_client):
        certs = client.CertificatesV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(certs.create_certificate_signing_request, csr(
                "root", "kubernetes.io/kube-apiserver-client", ("dev", "system:masters"), ["client auth"]))
        made = [(await asyncio.to_thread(certs.create_certificate_signing_request, csr(name, signer, orgs, usages))).metadata.name
                for name, signer, orgs, usages in (
                    ("dev", "kubernetes.io/kube-apiserver-client", ("dev",), ["client auth"]),
                    ("node", "kubernetes.io/kube-apiserver-client-kubelet", ("system:masters",), ["client auth"]))]
    assert e.value.status == 403
    body = json.loads(e.value.body)
    assert (body["reason"], body["message"]) == ("Forbidden", 'certificatesigningrequests.certificates.k8s.io "root" is '
                                                 "forbidden: use of kubernetes.io/kube-apiserver-client signer with "
                                                 "system:masters group is not allowed")
    assert made == ["dev", "node"]
