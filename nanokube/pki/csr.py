"""What kube-controller-manager's certificate controllers read off a CertificateSigningRequest: its
approval state and its PEM request, and pkg/apis/certificates' checks of a kubelet's request
(ValidateKubeletClientCSR, ValidateKubeletServingCSR). The signer fails a request of the kubelet
signers that does not pass them; the approver recognizes a node's client request by the first.
A check answers the reason a request fails, in upstream's words, or None."""

from __future__ import annotations

import base64

from cryptography import x509
from cryptography.x509.oid import NameOID

NODES_GROUP = "system:nodes"
NODE_PREFIX = "system:node:"

_NOT_NODES = "subject organization is not system:nodes"
_NOT_NODE_NAME = "subject common name does not begin with system:node:"
_SAN_REQUIRED = "DNS or IP subjectAltName is required"
_NOT_ALLOWED = "{} subjectAltNames are not allowed"

#: a kubelet's usages: with an RSA key it also asks for key encipherment; listed sorted, as the message does
_CLIENT_USAGES = ("client auth", "digital signature", "key encipherment")
_SERVING_USAGES = ("digital signature", "key encipherment", "server auth")


def approval(obj: dict) -> tuple[bool, bool]:
    """(approved, denied): whether the request has an Approved and a Denied condition
    (GetCertApprovalCondition; validation lets either only be True)."""
    types = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or ()}
    return "Approved" in types, "Denied" in types


def parse_request(obj: dict) -> x509.CertificateSigningRequest:
    """spec.request's PEM request (ParseCSR); ValueError names the request when it does not parse."""
    try:
        return x509.load_pem_x509_csr(base64.b64decode((obj.get("spec") or {}).get("request") or ""))
    except ValueError as e:
        raise ValueError(f'unable to parse csr "{obj["metadata"]["name"]}": {e}') from None


def common_name(req: x509.CertificateSigningRequest) -> str:
    """The subject's CN as Go's pkix.Name keeps it: the last one."""
    cns = req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return cns[-1].value if cns else ""


def organizations(req: x509.CertificateSigningRequest) -> list[str]:
    """The subject's O values in order, as Go's pkix.Name keeps them."""
    return [a.value for a in req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def _subject(req: x509.CertificateSigningRequest) -> tuple[list[str], str]:
    return organizations(req), common_name(req)


def _sans(req: x509.CertificateSigningRequest) -> dict[str, list]:
    """The request's subjectAltNames by Go's kinds (other name types are not read, as Go's parser skips them)."""
    try:
        san = req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return {"DNS": [], "Email": [], "IP": [], "URI": []}
    return {"DNS": san.get_values_for_type(x509.DNSName), "Email": san.get_values_for_type(x509.RFC822Name),
            "IP": san.get_values_for_type(x509.IPAddress), "URI": san.get_values_for_type(x509.UniformResourceIdentifier)}


def _usages_match(usages: list, required: tuple[str, ...]) -> bool:
    """The usages as a set are `required`, or `required` without key encipherment (a non-RSA key)."""
    have = set(usages)
    return have == set(required) or have == set(required) - {"key encipherment"}


def _usages_error(required: tuple[str, ...]) -> str:
    return f"usages did not match [{' '.join(required)}]"


def kubelet_client_error(req: x509.CertificateSigningRequest, usages: list) -> str | None:
    """ValidateKubeletClientCSR: O=system:nodes alone, no SANs, CN system:node:<name>, a client's usages."""
    orgs, cn = _subject(req)
    if orgs != [NODES_GROUP]:
        return _NOT_NODES
    sans = _sans(req)
    for kind in ("DNS", "Email", "IP", "URI"):
        if sans[kind]:
            return _NOT_ALLOWED.format(kind)
    if not cn.startswith(NODE_PREFIX):
        return _NOT_NODE_NAME
    if not _usages_match(usages, _CLIENT_USAGES):
        return _usages_error(_CLIENT_USAGES)
    return None


def kubelet_serving_error(req: x509.CertificateSigningRequest, usages: list) -> str | None:
    """ValidateKubeletServingCSR: O=system:nodes alone, a DNS or IP SAN but no email or URI one, a
    server's usages, CN system:node:<name> (checked in that order)."""
    orgs, cn = _subject(req)
    if orgs != [NODES_GROUP]:
        return _NOT_NODES
    sans = _sans(req)
    if not sans["DNS"] and not sans["IP"]:
        return _SAN_REQUIRED
    for kind in ("Email", "URI"):
        if sans[kind]:
            return _NOT_ALLOWED.format(kind)
    if not _usages_match(usages, _SERVING_USAGES):
        return _usages_error(_SERVING_USAGES)
    if not cn.startswith(NODE_PREFIX):
        return _NOT_NODE_NAME
    return None
