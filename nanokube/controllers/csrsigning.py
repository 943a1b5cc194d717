"""kube-controller-manager's CSR signing: an approved CertificateSigningRequest of one of the
`kubernetes.io` signers it runs gets a certificate from the cluster CA (the one `nanokube up` keeps
in DIR/pki, which the API server trusts for client certificates), as `kubectl certificate approve`
promises. Upstream runs one signer per name, all on --cluster-signing-cert-file:

- `kube-apiserver-client`: the usages must include `client auth` and may add only `digital
  signature` and `key encipherment`;
- `kube-apiserver-client-kubelet` and `kubelet-serving`: a kubelet's request (pki/csr.py's checks);
- `legacy-unknown`: no checks (v1 refuses to create such a request; an old one may still be stored).

A request that fails its signer's check fails (condition Failed, reason SignerValidationFailure).
Unapproved, denied, failed and already issued requests are left alone. The certificate keeps the
request's subject, SANs and key, carries the requested usages, starts 5 minutes in the past and
lasts `spec.expirationSeconds` (at least 10 minutes) but no longer than the signing duration (a
year, kube-controller-manager's --cluster-signing-duration default) nor the CA.

Each signer's CA comes from files, as kube-controller-manager's flags name them (csrsigning_options.signer_files):
the generic pair signs for all four, or each signer has a pair of its own and a signer without one
does not run; `nanokube up` signs all four with its cluster CA (csrsigning_options.cluster_ca).
"""

from __future__ import annotations

import base64
import datetime as _dt
import logging
from collections.abc import Callable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from ..clock import REAL, Clock, format_time
from ..machinery.errors import APIError
from ..pki.ca import KeyPair
from ..machinery.conditions import is_condition_true
from ..pki.csr import approval, kubelet_client_error, kubelet_serving_error, parse_request
from .base import Controller
from .csrsigning_options import (KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, LEGACY_UNKNOWN_SIGNER, SIGNER_NAME,
                                 SIGNING_DURATION, Files)

log = logging.getLogger(__name__)

BACKDATE = 300
#: a certificate shorter than this is not backdated at its end (PermissiveSigningPolicy's Short)
SHORT = 8 * 3600
MIN_DURATION = 600
_OPTIONAL_USAGES = frozenset({"digital signature", "key encipherment"})
#: the key usages the request's usages set (x509.KeyUsage's arguments, by name)
_KEY_USAGES = {"digital signature": "digital_signature", "signing": "digital_signature",
               "content commitment": "content_commitment", "key encipherment": "key_encipherment",
               "key agreement": "key_agreement", "data encipherment": "data_encipherment", "cert sign": "key_cert_sign",
               "crl sign": "crl_sign", "encipher only": "encipher_only", "decipher only": "decipher_only"}
_EXT_KEY_USAGES = {"any": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE, "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
                   "client auth": ExtendedKeyUsageOID.CLIENT_AUTH, "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
                   "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
                   "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION, "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
                   "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING}


def usage_error(usages: list) -> str | None:
    """validAPIServerClientUsages: why these usages are no client certificate's, or None."""
    for u in usages:
        if u not in _OPTIONAL_USAGES and u != "client auth":
            return f"invalid usage for client certificate: {u}"
    if "client auth" not in usages:
        return "missing required usage for client certificate: client auth"
    return None


def duration(expiration_seconds: int | None, signing_duration: int = SIGNING_DURATION) -> int:
    """The certificate's lifetime: the requested one, at least 10 minutes, at most the signing duration."""
    if expiration_seconds is None:
        return signing_duration
    return max(MIN_DURATION, min(expiration_seconds, signing_duration))


#: each signer's check of a request: why the request is not one it signs, or None
SIGNERS: dict[str, Callable[[x509.CertificateSigningRequest, list], str | None]] = {
    SIGNER_NAME: lambda request, usages: usage_error(usages),
    KUBELET_CLIENT_SIGNER: kubelet_client_error,
    KUBELET_SERVING_SIGNER: kubelet_serving_error,
    LEGACY_UNKNOWN_SIGNER: lambda request, usages: None,
}


def pending(obj: dict) -> bool:
    """Approved (and not denied), not failed, not yet issued, and for a signer this controller runs."""
    approved, denied = approval(obj)
    return (obj.get("spec") or {}).get("signerName") in SIGNERS and approved and not denied \
        and not is_condition_true((obj.get("status") or {}).get("conditions"), "Failed") and not (obj.get("status") or {}).get("certificate")


def sign(ca: KeyPair, request: x509.CertificateSigningRequest, usages: list, lifetime: int, now: float) -> bytes:
    """The PEM certificate PermissiveSigningPolicy makes of `request`."""
    ca_cert = ca.cert
    not_before = now - BACKDATE
    not_after = now + lifetime if lifetime < SHORT else now + lifetime - BACKDATE
    not_after = min(not_after, ca_cert.not_valid_after_utc.timestamp())
    key_usage = {name: False for name in set(_KEY_USAGES.values())}
    key_usage.update({_KEY_USAGES[u]: True for u in usages if u in _KEY_USAGES})
    b = (x509.CertificateBuilder().subject_name(request.subject).issuer_name(ca_cert.subject)
         .public_key(request.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(_dt.datetime.fromtimestamp(not_before, _dt.UTC))
         .not_valid_after(_dt.datetime.fromtimestamp(not_after, _dt.UTC))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if any(key_usage.values()):
        b = b.add_extension(x509.KeyUsage(**key_usage), critical=True)
    ext = [_EXT_KEY_USAGES[u] for u in usages if u in _EXT_KEY_USAGES]
    if ext:
        b = b.add_extension(x509.ExtendedKeyUsage(ext), critical=False)
    try:
        b = b.add_extension(request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value, critical=False)
    except x509.ExtensionNotFound:
        pass
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
    return b.sign(ca.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


class CSRSigningController(Controller):
    name = "certificatesigningrequest-signing-controller"
    aliases = ("csrsigning",)
    queue_name = "certificate"

    def __init__(self, client, signers: dict[str, Files], clock: Clock = REAL, informers=None,
                 signing_duration: int = SIGNING_DURATION):
        """Signs for each signer of `signers` with its CA's files (read at start)."""
        super().__init__(client, clock, informers)
        self.files = signers
        self.signing_duration = signing_duration
        self.cas: dict[str, KeyPair] = {}
        self.csrs = client.resource("certificates.k8s.io", "v1", "certificatesigningrequests")
        self.inf = self.informer_factory.informer(self.csrs)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.inf]

    def _enqueue(self, obj: dict) -> None:
        if pending(obj) and obj["spec"]["signerName"] in self.files:
            self.queue.add(obj["metadata"]["name"])

    async def start(self) -> None:
        for signer, (cert, key) in self.files.items():
            with open(cert, "rb") as c, open(key, "rb") as k:
                self.cas[signer] = KeyPair(c.read(), k.read())
        await super().start()

    async def sync(self, key: str) -> None:
        obj = self.inf.get(key)
        if obj is None or not pending(obj) or obj["spec"]["signerName"] not in self.cas:
            return
        spec = obj["spec"]
        request = parse_request(obj)
        status = dict(obj.get("status") or {})
        why = SIGNERS[spec["signerName"]](request, spec.get("usages") or [])
        now = self.clock.now()
        if why is not None:
            status["conditions"] = [*(status.get("conditions") or []), {
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": why,
                "lastUpdateTime": format_time(now)}]
        else:
            pem = sign(self.cas[spec["signerName"]], request, spec.get("usages") or [],
                       duration(spec.get("expirationSeconds"), self.signing_duration), now)
            status["certificate"] = base64.b64encode(pem).decode()
        try:
            await self.csrs.update({**obj, "status": status}, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
