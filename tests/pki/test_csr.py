"""pkg/apis/certificates' kubelet request checks: which requests the kubelet signers sign and the
approver recognizes, and the reason (upstream's words, in upstream's order) for the others."""

from __future__ import annotations

import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nanokube.pki.csr import approval, common_name, kubelet_client_error, kubelet_serving_error

KEY = ec.generate_private_key(ec.SECP256R1())
CLIENT = ["digital signature", "client auth"]
SERVING = ["digital signature", "key encipherment", "server auth"]


def request(cn: str = "system:node:n1", orgs=("system:nodes",), dns=(), ips=(), emails=(), uris=(), cns=()):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs += [x509.NameAttribute(NameOID.COMMON_NAME, c) for c in (*cns, cn) if c]
    b = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips] \
        + [x509.RFC822Name(e) for e in emails] + [x509.UniformResourceIdentifier(u) for u in uris]
    if names:
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(KEY, hashes.SHA256())


def test_a_kubelet_client_request_with_or_without_key_encipherment():
    assert kubelet_client_error(request(), CLIENT) is None
    assert kubelet_client_error(request(), ["key encipherment", *CLIENT, "client auth"]) is None


@pytest.mark.parametrize("req, usages, why", [
    (request(orgs=()), CLIENT, "subject organization is not system:nodes"),
    (request(orgs=("system:nodes", "extra")), CLIENT, "subject organization is not system:nodes"),
    (request(orgs=("dev",), dns=("n1",)), CLIENT, "subject organization is not system:nodes"),
    (request(dns=("n1",), ips=("10.0.0.1",)), CLIENT, "DNS subjectAltNames are not allowed"),
    (request(emails=("n1@example.com",), ips=("10.0.0.1",)), CLIENT, "Email subjectAltNames are not allowed"),
    (request(ips=("10.0.0.1",)), CLIENT, "IP subjectAltNames are not allowed"),
    (request(uris=("spiffe://n1",)), CLIENT, "URI subjectAltNames are not allowed"),
    (request(cn="n1"), ["server auth"], "subject common name does not begin with system:node:"),
    (request(), ["client auth"], "usages did not match [client auth digital signature key encipherment]"),
    (request(), [*CLIENT, "server auth"], "usages did not match [client auth digital signature key encipherment]"),
])
def test_a_kubelet_client_request_fails_on_the_first_rule_it_breaks(req, usages, why):
    assert kubelet_client_error(req, usages) == why


def test_a_kubelet_serving_request_names_the_node_by_dns_or_ip():
    assert kubelet_serving_error(request(dns=("n1.example.com",)), SERVING) is None
    assert kubelet_serving_error(request(ips=("10.0.0.1", "fd00::1")), ["server auth", "digital signature"]) is None


@pytest.mark.parametrize("req, usages, why", [
    (request(orgs=("system:masters",), dns=("n1",)), SERVING, "subject organization is not system:nodes"),
    (request(), ["server auth"], "DNS or IP subjectAltName is required"),
    (request(dns=("n1",), emails=("a@example.com",)), SERVING, "Email subjectAltNames are not allowed"),
    (request(ips=("10.0.0.1",), uris=("spiffe://n1",)), SERVING, "URI subjectAltNames are not allowed"),
    # the usages are checked before the common name here, after it for a client request
    (request(cn="n1", dns=("n1",)), CLIENT, "usages did not match [digital signature key encipherment server auth]"),
    (request(cn="n1", dns=("n1",)), SERVING, "subject common name does not begin with system:node:"),
])
def test_a_kubelet_serving_request_fails_on_the_first_rule_it_breaks(req, usages, why):
    assert kubelet_serving_error(req, usages) == why


def test_the_last_common_name_counts_as_go_reads_a_subject():
    assert common_name(request(cn="system:node:n1", cns=("first",))) == "system:node:n1"
    assert kubelet_client_error(request(cn="n1", cns=("system:node:n1",)), CLIENT) == \
        "subject common name does not begin with system:node:"
    assert common_name(request(cn="")) == ""


def test_approval_reads_the_condition_types():
    assert approval({}) == (False, False)
    assert approval({"status": {"conditions": [{"type": "Approved", "status": "True"}]}}) == (True, False)
    assert approval({"status": {"conditions": [{"type": "Failed", "status": "True"},
                                               {"type": "Denied", "status": "True"}]}}) == (False, True)
