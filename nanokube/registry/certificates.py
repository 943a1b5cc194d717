"""certificates.k8s.io: CertificateSigningRequest, PodCertificateRequest and
ClusterTrustBundle.

Storage versions: CSR is v1 only. ClusterTrustBundle is identical in v1 and
v1beta1, so it is stored at v1. PodCertificateRequest is stored at v1beta1
because that shape is the superset: v1 dropped the deprecated `pkixPublicKey`
and `proofOfPossession`, and storing v1 would silently lose them from objects
written through v1beta1. Reads at v1 omit the two fields.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parseaddr
from typing import TYPE_CHECKING, Any

from ..clock import format_time
from ..pki import der as _der
from .base import AGE, RESET_DELETION, Column, Obj, Resource, Strategy, register
from .core_printing import human_duration
from ..machinery.gofmt import Struct
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    forbidden,
    immutable,
    invalid,
    not_supported,
    qualified_name,
    repeats,
    required,
    too_long,
    validate_conditions,
)

if TYPE_CHECKING:
    from cryptography import x509

# `cryptography`, and the stub request's parsers that use it, are imported by the functions that parse
# or verify: importing this module registers the group in every process that serves the API (and in
# `nanokube simulate`), and cryptography.x509's import (its RFC 4514 patterns, its enums) was the
# largest part of that.

GROUP = "certificates.k8s.io"
Errors = list[FieldError]

USAGES = sorted([
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
    "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
])
TRUE_ONLY = ("Approved", "Denied", "Failed")
#: v1beta1's default signer, which v1 (the only version served) may not create
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"
MAX_TRUST_BUNDLE = 1024 * 1024
MIN_MAX_EXPIRATION = 3600
MAX_MAX_EXPIRATION = 91 * 24 * 3600
KUBERNETES_MAX_MAX_EXPIRATION = 86400
MAX_UID = 128
MAX_PKIX_KEY = 10 * 1024
MAX_PROOF = 10 * 1024
MAX_STUB = 100 * 1024
MAX_CHAIN = 100 * 1024
PCR_TERMINAL = ("Issued", "Denied", "Failed")


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- PEM and names ------------------------------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN ([^-\r\n]*)-----\r?\n")


def pem_blocks(data: str) -> list[tuple[str, bool, bytes | None]]:
    """(type, has_headers, DER or None when the body is not base64) per PEM
    block: a BEGIN line up to the first END line of the same type. Scanned
    with str.find; the equivalent lazy back-referencing regex costs most of a
    status update's chain check."""
    blocks = []
    pos = 0
    while (m := _PEM_BEGIN.search(data, pos)) is not None:
        end_line = f"-----END {m.group(1)}-----"
        end = data.find(end_line, m.end())
        if end < 0:
            pos = m.start() + 1
            continue
        pos = end + len(end_line)
        body = data[m.end():end]
        has_headers = False
        if ":" in body.split("\n", 1)[0]:
            has_headers = True
            body = body.split("\n\n", 1)[-1]
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
        except (binascii.Error, ValueError):
            der = None
        blocks.append((m.group(1), has_headers, der))
    return blocks


def signer_name(value: Any, path: str) -> Errors:
    """`example.com/signer-name`: a dotted DNS domain, a slash, a dotted path."""
    if not value:
        return [required(path)]
    segments = value.split("/")
    if len(segments) != 2:
        return [invalid(path, value, "must be a fully qualified domain and path of the form 'example.com/signer-name'")]
    domain, rest = segments
    errs: Errors = [too_long(path, 253)] if len(domain) > 253 else []
    labels = domain.split(".")
    for lbl in labels:
        msgs = dns1123_label(lbl)
        if msgs:
            errs += [invalid(path, domain, f'validating label "{lbl}": {m}') for m in msgs]
            break
    if len(labels) < 2:
        errs.append(invalid(path, domain, "should be a domain with at least two segments separated by dots"))
    for lbl in rest.split("."):
        msgs = dns1123_subdomain(lbl)
        if msgs:
            errs += [invalid(path, rest, f'validating label "{lbl}": {m}') for m in msgs]
            break
    if len(rest) > 253:
        errs.append(too_long(path, 253))
    return errs


def is_kubernetes_signer(name: str) -> bool:
    return name.startswith("kubernetes.io/") or name.split("/", 1)[0].endswith(".kubernetes.io")


def _b64(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _name(o: Obj) -> str:
    return o["metadata"]["name"]


NAME = Column("Name", "string", _name, "Name must be unique within a namespace.", format="name")


# --- CertificateSigningRequest ----------------------------------------------------


def _csr_request(value: str) -> str:
    """'' when `spec.request` (base64 of a PEM CSR) parses and is self-signed, else why not."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    pem = _b64(value or "")
    blocks = pem_blocks(pem.decode("latin-1")) if pem is not None else []
    if not blocks or blocks[0][0] != "CERTIFICATE REQUEST" or blocks[0][2] is None:
        return "PEM block type must be CERTIFICATE REQUEST"
    try:  # (the public key is read only by the check: one of an unknown type or curve fails there)
        valid = x509.load_der_x509_csr(blocks[0][2]).is_signature_valid
    except (ValueError, UnsupportedAlgorithm, x509.InvalidVersion) as e:
        return str(e)
    return "" if valid else "x509: signature of the certificate request does not verify"


def _certificate_problem(value: str) -> str:
    """'' when `status.certificate` is empty or a run of CERTIFICATE PEM blocks."""
    from cryptography import x509
    data = _b64(value or "")
    if not value:
        return ""
    if data is None:
        return "must contain at least one CERTIFICATE PEM block"
    blocks = pem_blocks(data.decode("latin-1"))
    for typ, headers, der in blocks:
        if typ != "CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{typ}"'
        if headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_der_x509_certificate(der or b"")
        except ValueError as e:
            return f"x509: {e}"
    return "" if blocks else "must contain at least one CERTIFICATE PEM block"


def _conditions_of(obj: Obj, typ: str) -> list:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == typ]


def _csr_condition_column(o: Obj) -> str:
    status = o.get("status") or {}
    names = [c.get("type", "") for c in status.get("conditions") or []]
    if status.get("certificate"):
        names.append("Issued")
    return ",".join(names) if names else "Pending"


class CertificateSigningRequestStrategy(Strategy):
    track_generation = False

    def __init__(self, now: Callable[[], datetime] = utc_now):
        self.now = now
    columns = [
        NAME,
        Column("Age", "string", AGE, "CreationTimestamp is a timestamp representing the server time when this object was created."),
        Column("SignerName", "string", lambda o: o["spec"].get("signerName", ""), "Name of the signer that will sign the certificate."),
        Column("Requestor", "string", lambda o: o["spec"].get("username", ""), "Name of the user who requested the CSR."),
        Column(
            "RequestedDuration", "string",
            lambda o: human_duration(o["spec"]["expirationSeconds"]) if o["spec"].get("expirationSeconds") is not None else "<none>",
            "Requested duration of the issued certificate.",
        ),
        Column("Condition", "string", _csr_condition_column, "Condition of the certificate."),
    ]
    field_selectors = {"spec.signerName": lambda o: (o.get("spec") or {}).get("signerName", "")}
    name_validator = staticmethod(lambda name: [])

    def prepare_for_update(self, new, old):
        new["spec"] = copy.deepcopy(old.get("spec"))

    def prepare_for_status_update(self, new, old):
        """The Approved and Denied conditions stay as stored when /status keeps their number (adding
        or removing one is refused by validation), then conditions get their timestamps."""
        conditions = list((new.get("status") or {}).get("conditions") or [])
        for t in ("Approved", "Denied"):
            at = [i for i, c in enumerate(conditions) if c.get("type") == t]
            was = _conditions_of(old, t)
            if len(at) == len(was):
                for i, c in zip(at, was):
                    conditions[i] = c
        self._stamp(new, old, conditions)

    def prepare_for_approval_update(self, new, old):
        self._stamp(new, old, list((new.get("status") or {}).get("conditions") or []))

    def _stamp(self, new: Obj, old: Obj, conditions: list) -> None:
        """populateConditionTimestamps: a condition without lastUpdateTime gets now; one without
        lastTransitionTime keeps that of a stored condition of its type and status, else gets now."""
        if not conditions:
            return
        now = format_time(self.now().timestamp())
        stored = [c for c in (old.get("status") or {}).get("conditions") or [] if c.get("lastTransitionTime")]
        for i, c in enumerate(conditions):
            if c.get("lastUpdateTime") and c.get("lastTransitionTime"):
                continue
            c = conditions[i] = dict(c)
            if not c.get("lastUpdateTime"):
                c["lastUpdateTime"] = now
            if not c.get("lastTransitionTime"):
                c["lastTransitionTime"] = next((o["lastTransitionTime"] for o in stored
                                                if o.get("type") == c.get("type") and o.get("status") == c.get("status")), now)
        new["status"] = {**(new.get("status") or {}), "conditions": conditions}

    def validate(self, obj):
        return self._validate(obj, None)

    def validate_update(self, new, old):
        return self._validate(new, old)

    def validate_status_update(self, new, old):
        return self._validate(new, old, certificate=True)

    def validate_approval_update(self, new: Obj, old: Obj) -> Errors:
        """/approval may add or change the Approved and Denied conditions."""
        return self._validate(new, old, approval=True)

    def _validate(self, obj: Obj, old: Obj | None, certificate: bool = False, approval: bool = False) -> Errors:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        errs: Errors = []
        problem = _csr_request(spec.get("request", ""))
        if problem:
            errs.append(invalid("spec.request", spec.get("request", ""), problem))
        usages = spec.get("usages") or []
        old_usages = ((old or {}).get("spec") or {}).get("usages") or []
        if not usages:
            errs.append(required("spec.usages"))
        if not any(u not in USAGES for u in old_usages):
            errs += [not_supported(f"spec.usages[{i}]", u, USAGES) for i, u in enumerate(usages) if u not in USAGES]
        if len(set(old_usages)) == len(old_usages):
            errs += [duplicate(f"spec.usages[{i}]", usages[i]) for i in repeats(usages)]
        old_signer = ((old or {}).get("spec") or {}).get("signerName")
        if spec.get("signerName") == LEGACY_UNKNOWN_SIGNER and old_signer != LEGACY_UNKNOWN_SIGNER:
            errs.append(invalid("spec.signerName", LEGACY_UNKNOWN_SIGNER, "the legacy signerName is not allowed via this API version"))
        else:
            errs += signer_name(spec.get("signerName"), "spec.signerName")
        exp = spec.get("expirationSeconds")
        if exp is not None and exp < 600:
            errs.append(invalid("spec.expirationSeconds", exp, "may not specify a duration less than 600 seconds (10 minutes)"))
        errs += self._conditions(status.get("conditions") or [])
        if old is None or status.get("certificate") != (old.get("status") or {}).get("certificate"):
            problem = _certificate_problem(status.get("certificate", ""))
            if problem:
                errs.append(invalid("status.certificate", "<certificate data>", problem))
        if old is not None:
            errs += self._transitions(obj, old, certificate, approval)
        return errs

    @staticmethod
    def _conditions(conditions: list) -> Errors:
        errs: Errors = []
        seen: set = set()
        for i, c in enumerate(conditions):
            t, s = c.get("type", ""), c.get("status", "")
            if not t:
                errs.append(required(f"status.conditions[{i}].type"))
            allowed = ("True",) if t in TRUE_ONLY else ("False", "True", "Unknown")
            if not s:
                errs.append(required(f"status.conditions[{i}].status"))
            elif s not in allowed:
                errs.append(not_supported(f"status.conditions[{i}].status", s, allowed))
            if (t == "Approved" and "Denied" in seen) or (t == "Denied" and "Approved" in seen):
                errs.append(invalid("status.conditions", t, "Approved and Denied conditions are mutually exclusive"))
            if t in seen:
                errs.append(duplicate(f"status.conditions[{i}].type", t))
            seen.add(t)
        return errs

    @staticmethod
    def _transitions(new: Obj, old: Obj, certificate: bool, approval: bool) -> Errors:
        errs: Errors = []
        for t in ("Approved", "Denied", "Failed"):
            if len(_conditions_of(new, t)) < len(_conditions_of(old, t)):
                errs.append(forbidden("status.conditions", f'updates may not remove a condition of type "{t}"'))
        if not approval:
            for t in ("Approved", "Denied"):
                n, o = _conditions_of(new, t), _conditions_of(old, t)
                if len(n) > len(o):
                    errs.append(forbidden("status.conditions", f'updates may not add a condition of type "{t}"'))
                elif len(n) == len(o) and n != o:
                    errs.append(forbidden("status.conditions", f'updates may not modify a condition of type "{t}"'))
        new_cert, old_cert = (new.get("status") or {}).get("certificate"), (old.get("status") or {}).get("certificate")
        if (new_cert or "") != (old_cert or ""):
            if not certificate:
                errs.append(forbidden("status.certificate", "updates may not set certificate content"))
            elif old_cert:
                errs.append(forbidden("status.certificate", "updates may not modify existing certificate content"))
        return errs


# --- PodCertificateRequest ------------------------------------------------------------


def _key_problem(key: Any) -> tuple[str, str]:
    """(shown value, detail) when the public key type is not one kubelet may request."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "", ""
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name in ("secp256r1", "secp384r1", "secp521r1"):
            return "", ""
        return f"curve {key.curve.name}", "elliptic public keys must use curve P256, P384 or P521"
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size in (3072, 4096):
            return "", ""
        return f"{key.key_size}-bit modulus", "RSA keys must have modulus size 3072 or 4096"
    return "<value omitted>", "unknown public key type; supported types are Ed25519, ECDSA, and RSA"


def _verify_proof(key: Any, pod_uid: str, proof: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding
    data = pod_uid.encode()
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(proof, data)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(proof, data, ec.ECDSA(hashes.SHA256()))
        else:
            key.verify(proof, data, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.AUTO), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


#: stub CSR signature algorithms verified with the already extracted key;
#: `is_signature_valid` would load the key from the CSR a second time
_ECDSA_HASH_BY_OID = {"1.2.840.10045.4.3.2": "SHA256", "1.2.840.10045.4.3.3": "SHA384", "1.2.840.10045.4.3.4": "SHA512"}
_ED25519_OID = "1.3.101.112"


def _stub_signature_valid(csr: x509.CertificateSigningRequest, key: Any) -> bool:
    """Whether the stub CSR is signed by the key it carries (the proof of possession)."""
    from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    oid = csr.signature_algorithm_oid.dotted_string
    try:
        if isinstance(key, ec.EllipticCurvePublicKey) and oid in _ECDSA_HASH_BY_OID:
            key.verify(csr.signature, csr.tbs_certrequest_bytes, ec.ECDSA(getattr(hashes, _ECDSA_HASH_BY_OID[oid])()))
        elif isinstance(key, ed25519.Ed25519PublicKey) and oid == _ED25519_OID:
            key.verify(csr.signature, csr.tbs_certrequest_bytes)
        else:
            return csr.is_signature_valid
    except (InvalidSignature, UnsupportedAlgorithm):  # (a signature algorithm none implements)
        return False
    return True


def stub_public_key(spec: dict) -> Any:
    """The subject public key: from the stub CSR, else from v1beta1's pkixPublicKey."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    from ..machinery.podcertificates import stub_request_key
    stub = _b64(spec.get("stubPKCS10Request") or "")
    try:
        if stub:
            return stub_request_key(stub)
        pkix = _b64(spec.get("pkixPublicKey") or "")
        return serialization.load_der_public_key(pkix) if pkix else None
    except (ValueError, UnsupportedAlgorithm):
        return None


def requested_spki(spec: dict) -> bytes | None:
    """The subject public key as a DER SubjectPublicKeyInfo (see stub_public_key)."""
    from cryptography.hazmat.primitives import serialization

    from ..machinery.podcertificates import stub_request_spki
    stub = _b64(spec.get("stubPKCS10Request") or "")
    if stub:
        try:
            return stub_request_spki(stub)
        except ValueError:
            return None
    key = stub_public_key(spec)
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) if key is not None else None


def _leaf_has_key(leaf: x509.Certificate, leaf_spki: bytes, spki: bytes) -> bool:
    """Whether the leaf (whose SubjectPublicKeyInfo as encoded is `leaf_spki`)
    certifies the key whose SubjectPublicKeyInfo is `spki`: equal bytes settle
    it without loading the key; otherwise both are compared re-encoded, as a
    key may be encoded more than one way."""
    from cryptography.hazmat.primitives import serialization
    if leaf_spki == spki:
        return True
    return leaf.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == spki


def _stub_errors(spec: dict) -> Errors:
    from ..machinery.podcertificates import stub_request, stub_request_key
    path = "spec.stubPKCS10Request"
    raw = spec.get("stubPKCS10Request") or ""
    errs: Errors = []
    for f in ("pkixPublicKey", "proofOfPossession"):
        if spec.get(f):
            errs.append(invalid(f"spec.{f}", "<value omitted>", "must be empty when stubPKCS10Request is set"))
    der = _b64(raw)
    if der is not None and len(der) > MAX_STUB:
        return errs + [too_long(path, MAX_STUB)]
    csr = stub_request(der or b"")
    if csr is None:
        return errs + [invalid(path, "<value omitted>", "must be a DER-encoded PKCS#10 certificate signing request")]
    if not _stub_signature_valid(csr, stub_request_key(der)):
        return errs + [invalid(path, "<value omitted>", "could not verify the signature of the certificate signing request")]
    if len(csr.subject) > 0:
        errs.append(invalid(path, "<value omitted>", "must have an empty subject"))
    if len(csr.extensions) > 0:
        errs.append(invalid(path, "<value omitted>", "must not contain any extensions"))
    shown, detail = _key_problem(stub_request_key(der))
    if detail:
        errs.append(invalid(path, shown, detail))
    return errs


def _legacy_key_errors(spec: dict) -> Errors:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    pkix, proof = spec.get("pkixPublicKey") or "", _b64(spec.get("proofOfPossession") or "") or b""
    raw = _b64(pkix) or b""
    if len(raw) > MAX_PKIX_KEY:
        return [too_long("spec.pkixPublicKey", MAX_PKIX_KEY)]
    if len(proof) > MAX_PROOF:
        return [too_long("spec.proofOfPossession", MAX_PROOF)]
    try:
        key = serialization.load_der_public_key(raw)
    except (ValueError, UnsupportedAlgorithm):  # (a key of a type or curve none implements)
        return [invalid("spec.pkixPublicKey", pkix, "must be a valid PKIX-serialized public key")]
    shown, detail = _key_problem(key)
    if detail:
        return [invalid("spec.pkixPublicKey", shown, detail)]
    if not _verify_proof(key, spec.get("podUID", ""), proof):
        return [invalid("spec.proofOfPossession", "<value omitted>", "could not verify proof-of-possession signature")]
    return []


def _uid_field(spec: dict, field: str) -> Errors:
    value = spec.get(field) or ""
    if not value:
        return [invalid(f"spec.{field}", value, "must not be empty")]
    return [too_long(f"spec.{field}", MAX_UID)] if len(value) > MAX_UID else []


def user_annotations(annotations: Any, path: str) -> Errors:
    errs: Errors = []
    total = 0
    for k, v in (annotations or {}).items():
        errs += [invalid(path, k, m) for m in qualified_name(k.lower())]
        if "/" not in k:
            errs.append(invalid(path, k, "must be a domain-prefixed key (such as \"example.com/key\")"))
        total += len(k) + len(v or "")
    if total > 256 * 1024:
        errs.append(too_long(path, 256 * 1024))
    return errs


def pcr_spec(spec: dict) -> Errors:
    errs = signer_name(spec.get("signerName"), "spec.signerName")
    if spec.get("unverifiedUserAnnotations") is not None:
        errs += user_annotations(spec["unverifiedUserAnnotations"], "spec.unverifiedUserAnnotations")
    for field in ("podName", "serviceAccountName", "nodeName"):
        errs += [invalid(f"spec.{field}", spec.get(field, ""), m) for m in dns1123_subdomain(spec.get(field) or "")]
    for field in ("podUID", "serviceAccountUID", "nodeUID"):
        errs += _uid_field(spec, field)
    exp = spec.get("maxExpirationSeconds")
    if exp is None:
        return errs + [required("spec.maxExpirationSeconds", "must be set")]
    top = KUBERNETES_MAX_MAX_EXPIRATION if is_kubernetes_signer(spec.get("signerName") or "") else MAX_MAX_EXPIRATION
    if not MIN_MAX_EXPIRATION <= exp <= top:
        errs.append(invalid("spec.maxExpirationSeconds", exp, f"must be in the range [{MIN_MAX_EXPIRATION}, {top}]"))
    if spec.get("stubPKCS10Request"):
        return errs + _stub_errors(spec)
    if spec.get("pkixPublicKey"):
        return errs + _legacy_key_errors(spec)
    return errs + [required("spec.stubPKCS10Request")]


_RFC3339_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _time(value: Any) -> datetime | None:
    """A `metav1.Time` (second precision, `Z`); fromisoformat is several times
    cheaper than strptime on the signer's hot path."""
    if not value:
        return None
    if not _RFC3339_SECONDS.fullmatch(value):
        raise ValueError(f"time data {value!r} does not match format '%Y-%m-%dT%H:%M:%SZ'")
    return datetime.fromisoformat(value)


def _terminal(obj: Obj, typ: str) -> bool:
    return any(c.get("type") == typ and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or [])


#: per encoded extensions block: (DNS name or email, detail) for each bad SAN
#: entry, or None when the extensions do not parse. The block alone decides
#: both, and leaves for one service account from one CA share it, so most
#: status updates skip building the extensions' Python objects.
_SAN_PROBLEMS: OrderedDict[bytes, tuple[tuple[str, str], ...] | None] = OrderedDict()
_SAN_PROBLEMS_MAX = 1024


def _san_problems(leaf: x509.Certificate, extensions: bytes) -> tuple[tuple[str, str], ...] | None:
    from cryptography import x509
    if extensions in _SAN_PROBLEMS:
        _SAN_PROBLEMS.move_to_end(extensions)
        return _SAN_PROBLEMS[extensions]
    problems: tuple[tuple[str, str], ...] | None
    try:
        problems = _bad_san_entries(leaf.extensions)
    except (ValueError, x509.DuplicateExtension):
        problems = None
    _SAN_PROBLEMS[extensions] = problems
    if len(_SAN_PROBLEMS) > _SAN_PROBLEMS_MAX:
        _SAN_PROBLEMS.popitem(last=False)
    return problems


def _bad_san_entries(extensions: x509.Extensions) -> tuple[tuple[str, str], ...]:
    from cryptography import x509
    try:
        san = extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    problems = []
    for name in san.get_values_for_type(x509.DNSName):
        if not name:
            problems.append((name, "leaf certificate should not contain empty DNSName"))
        if ".." in name:
            problems.append((name, "leaf certificate's DNSName should not contain '..'"))
        if name.startswith(".") or name.endswith("."):
            problems.append((name, "leaf certificate's DNSName should not start or end with '.'"))
    for email in san.get_values_for_type(x509.RFC822Name):
        if "@" not in parseaddr(email)[1]:
            problems.append((email, "leaf certificate should not contain invalid EmailAddress"))
    return tuple(problems)


def _leaf_errors(status: dict, chain: str) -> tuple[Any, bytes, Errors]:
    """(leaf, its SubjectPublicKeyInfo as encoded, errors); no leaf when the
    chain is unusable."""
    from cryptography import x509
    if len(chain) > MAX_CHAIN:
        return None, b"", [too_long("status.certificateChain", MAX_CHAIN)]
    blocks = pem_blocks(chain)
    path = "status.certificateChain"
    if not blocks:
        return None, b"", [invalid(path, chain, "issued certificate chain must contain at least one certificate")]
    if any(typ != "CERTIFICATE" for typ, _, _ in blocks):
        return None, b"", [invalid(path, chain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")]
    leaf_der = blocks[0][2] or b""
    try:
        leaf = x509.load_der_x509_certificate(leaf_der)
    except ValueError:
        return None, b"", [invalid(path, chain, "leaf certificate does not parse as valid X.509")]
    for _, _, der in blocks[1:]:
        try:
            x509.load_der_x509_certificate(der or b"")
        except ValueError:
            return None, b"", [invalid(path, chain, "intermediate certificate does not parse as valid X.509")]
    spki, extensions = _der.certificate_parts(leaf_der)
    problems = _san_problems(leaf, extensions)
    if problems is None:
        return None, b"", [invalid(path, chain, "leaf certificate does not parse as valid X.509")]
    return leaf, spki, [invalid(path, value, detail) for value, detail in problems]


def _pcr_spec_value(spec: dict) -> Struct:
    """certificates.PodCertificateRequestSpec as field.Error prints it (an internal type: Go field
    names, every field, unset ones null; []byte as base64, as the request sends it)."""
    return Struct(
        SignerName=spec.get("signerName") or "", PodName=spec.get("podName") or "", PodUID=spec.get("podUID") or "",
        ServiceAccountName=spec.get("serviceAccountName") or "", ServiceAccountUID=spec.get("serviceAccountUID") or "",
        NodeName=spec.get("nodeName") or "", NodeUID=spec.get("nodeUID") or "",
        MaxExpirationSeconds=spec.get("maxExpirationSeconds"), PKIXPublicKey=spec.get("pkixPublicKey"),
        ProofOfPossession=spec.get("proofOfPossession"), StubPKCS10Request=spec.get("stubPKCS10Request"),
        UnverifiedUserAnnotations=spec.get("unverifiedUserAnnotations"))


class PodCertificateRequestStrategy(Strategy):
    status_metadata = ()  # ResetObjectMetaForStatus, which its reset fields do not name
    status_deletion_kept = RESET_DELETION
    status_owns_dropped_metadata = True
    track_generation = False
    field_selectors = {
        "spec.signerName": lambda o: (o.get("spec") or {}).get("signerName", ""),
        "spec.podName": lambda o: (o.get("spec") or {}).get("podName", ""),
        "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName", ""),
    }

    def __init__(self, now: Callable[[], datetime] = utc_now):
        self.now = now

    def default(self, obj, version):
        obj.setdefault("spec", {}).setdefault("maxExpirationSeconds", KUBERNETES_MAX_MAX_EXPIRATION)

    def validate(self, obj):
        return pcr_spec(obj.get("spec") or {})

    def validate_update(self, new, old):
        if new.get("spec") != old.get("spec"):
            return [immutable("spec", _pcr_spec_value(new.get("spec") or {}))]
        return []

    def validate_status_update(self, new, old):
        status, conditions = new.get("status") or {}, (new.get("status") or {}).get("conditions") or []
        errs: Errors = []
        known = 0
        for i, c in enumerate(conditions):
            if c.get("type") in PCR_TERMINAL:
                known += 1
                if known > 1:
                    errs.append(invalid(f"status.conditions[{i}].type", c["type"], 'There may be at most one condition with type "Issued", "Denied", or "Failed"'))
                if c.get("status") != "True":
                    errs.append(not_supported(f"status.conditions[{i}].status", c.get("status", ""), ["True"]))
            else:
                errs.append(not_supported(f"status.conditions[{i}].type", c.get("type", ""), PCR_TERMINAL))
        errs += validate_conditions(conditions, "status.conditions")
        if errs:
            return errs
        old_status = old.get("status") or {}
        if any(_terminal(old, t) for t in PCR_TERMINAL):
            return [] if status == old_status else [invalid("status", "<value omitted>", "immutable after PodCertificateRequest is issued, denied, or failed")]
        if _terminal(new, "Denied") or _terminal(new, "Failed"):
            extra = {k: v for k, v in status.items() if k != "conditions" and v}
            return [invalid("status", "<value omitted>", "non-condition status fields must be empty when denying or failing the PodCertificateRequest")] if extra else []
        if _terminal(new, "Issued"):
            return self._issued(new, status)
        if status != old_status:
            return [invalid("status", "<value omitted>", 'status is immutable unless transitioning to "Issued", "Denied", or "Failed"')]
        return []

    def _issued(self, new: Obj, status: dict) -> Errors:
        leaf, leaf_spki, errs = _leaf_errors(status, status.get("certificateChain") or "")
        if leaf is None:
            return errs
        want = requested_spki(new.get("spec") or {})
        if want is None or not _leaf_has_key(leaf, leaf_spki, want):
            return errs + [invalid("status.certificateChain", status.get("certificateChain"), "leaf certificate was not issued to the requested public key")]
        not_before, not_after, refresh = _time(status.get("notBefore")), _time(status.get("notAfter")), _time(status.get("beginRefreshAt"))
        if not_before is None:
            errs.append(required("status.notBefore", "must be present and consistent with the issued certificate"))
        if not_after is None:
            errs.append(required("status.notAfter", "must be present and consistent with the issued certificate"))
        if refresh is None:
            errs.append(required("status.beginRefreshAt", "must be present and in the range [notbefore+10min, notafter-10min]"))
        if errs:
            return errs
        if not_before != leaf.not_valid_before_utc:
            return [invalid("status.notBefore", status["notBefore"], "must be set to the NotBefore time encoded in the leaf certificate")]
        if abs(not_before - self.now()) >= timedelta(minutes=5):
            return [invalid("status.notBefore", status["notBefore"], "must be set to within 5 minutes of kube-apiserver's current time")]
        if not_after != leaf.not_valid_after_utc:
            return [invalid("status.notAfter", status["notAfter"], "must be set to the NotAfter time encoded in the leaf certificate")]
        lifetime = int((not_after - not_before).total_seconds())
        max_exp = (new.get("spec") or {}).get("maxExpirationSeconds") or 0
        if lifetime < 3600:
            return [invalid("status.certificateChain", f"{lifetime}s", "leaf certificate lifetime must be >= 1 hour")]
        if lifetime > max_exp:
            return [invalid("status.certificateChain", f"{lifetime}s", f"leaf certificate lifetime must be <= spec.maxExpirationSeconds ({max_exp})")]
        if refresh < not_before + timedelta(minutes=10):
            return [invalid("status.beginRefreshAt", status["beginRefreshAt"], "must be at least 10 minutes after status.notBefore")]
        if refresh > not_after - timedelta(minutes=10):
            return [invalid("status.beginRefreshAt", status["beginRefreshAt"], "must be at least 10 minutes before status.notAfter")]
        return []

    def from_storage(self, obj, version):
        spec = obj.get("spec") or {}
        if version != "v1" or ("pkixPublicKey" not in spec and "proofOfPossession" not in spec):
            return obj
        out = dict(obj)
        out["spec"] = {k: v for k, v in spec.items() if k not in ("pkixPublicKey", "proofOfPossession")}
        out["spec"].setdefault("stubPKCS10Request", "")
        return out


# --- ClusterTrustBundle ---------------------------------------------------------------


def bundle_name(name: str, signer: str) -> list[str]:
    """Names carry the signer (`example.com:foo:<rest>`); unsigned bundles have no colon."""
    if not signer:
        if ":" in name:
            return ['ClusterTrustBundle without signer name must not have ":" in its name']
        return dns1123_subdomain(name)
    prefix = signer.replace("/", ":") + ":"
    if not name.startswith(prefix):
        return [f"ClusterTrustBundle for signerName {signer} must be named with prefix {prefix}"]
    return dns1123_subdomain(name[len(prefix):])


def trust_bundle(value: str, path: str = "spec.trustBundle") -> Errors:
    from cryptography import x509
    if len(value) > MAX_TRUST_BUNDLE:
        return [too_long(path, MAX_TRUST_BUNDLE)]
    errs: Errors = []
    seen: dict[bytes, list[int]] = {}
    for i, (typ, headers, der) in enumerate(pem_blocks(value)):
        if typ != "CERTIFICATE":
            errs.append(invalid(path, "<value omitted>", f"entry {i} has bad block type: {typ}"))
            continue
        if headers:
            errs.append(invalid(path, "<value omitted>", f"entry {i} has PEM block headers"))
            continue
        try:
            cert = x509.load_der_x509_certificate(der or b"")
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            errs.append(invalid(path, "<value omitted>", f"entry {i} does not have the CA bit set"))
            continue
        except ValueError:
            errs.append(invalid(path, "<value omitted>", f"entry {i} does not parse as X.509"))
            continue
        if not constraints.ca:
            errs.append(invalid(path, "<value omitted>", f"entry {i} does not have the CA bit set"))
            continue
        seen.setdefault(der or b"", []).append(i)
    if errs:
        return errs
    if not seen:
        return [invalid(path, "<value omitted>", "at least one trust anchor must be provided")]
    return [invalid(path, "<value omitted>", f"duplicate trust anchor (indices [{' '.join(map(str, idx))}])") for idx in seen.values() if len(idx) > 1]


class ClusterTrustBundleStrategy(Strategy):
    track_generation = False  # its upstream strategy neither sets nor bumps it
    columns = [NAME, Column("SignerName", "string", lambda o: (o.get("spec") or {}).get("signerName", ""), "The name of the signer associated with this trust bundle.")]
    field_selectors = {"spec.signerName": lambda o: (o.get("spec") or {}).get("signerName", "")}
    #: the name rule depends on spec.signerName, so `validate` checks it
    name_validator = staticmethod(lambda name: [])

    def validate(self, obj):
        return self._validate(obj, parse=True)

    def validate_update(self, new, old):
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        errs = self._validate(new, parse=spec.get("trustBundle") != old_spec.get("trustBundle"))
        if spec.get("signerName", "") != old_spec.get("signerName", ""):
            errs.append(immutable("spec.signerName", spec.get("signerName", "")))
        return errs

    @staticmethod
    def _validate(obj: Obj, parse: bool) -> Errors:
        spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
        signer = spec.get("signerName") or ""
        errs = [invalid("metadata.name", meta.get("name", ""), m) for m in bundle_name(meta.get("name") or "", signer)]
        if signer:
            errs += signer_name(signer, "spec.signerName")
        if parse:
            errs += trust_bundle(spec.get("trustBundle") or "")
        return errs


register(
    Resource(
        GROUP, "certificatesigningrequests", "CertificateSigningRequest", ["v1"], namespaced=False,
        short_names=("csr",), subresources=("status", "approval"), strategy=CertificateSigningRequestStrategy(),
    ),
    Resource(
        GROUP, "podcertificaterequests", "PodCertificateRequest", ["v1", "v1beta1"], namespaced=True,
        storage_version="v1beta1", subresources=("status",), strategy=PodCertificateRequestStrategy(),
    ),
    Resource(GROUP, "clustertrustbundles", "ClusterTrustBundle", ["v1", "v1beta1"], namespaced=False, strategy=ClusterTrustBundleStrategy()),
)
