"""kube-controller-manager's CSR signing for `kubernetes.io/kube-apiserver-client`: an approved
CertificateSigningRequest of that signer gets a client certificate from the cluster CA (the one
`nanokube up` keeps in DIR/pki, which the API server trusts for client certificates), so the
user a request names can then authenticate with it, as `kubectl certificate approve` promises.

As upstream's signer: unapproved, denied, failed and already issued requests are left alone; the
usages must include `client auth` and may add only `digital signature` and `key encipherment`,
else the request fails (condition Failed, reason SignerValidationFailure). The certificate keeps
the request's subject, SANs and key, carries the requested usages, starts 5 minutes in the past
and lasts `spec.expirationSeconds` (at least 10 minutes) but no longer than the signing duration
(a year, kube-controller-manager's --cluster-signing-duration default) nor the CA.
"""

from __future__ import annotations

import base64
import datetime as _dt
import logging
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from ..clock import REAL, Clock, format_time
from ..machinery.errors import APIError
from ..pki.ca import KeyPair
from .base import Controller

log = logging.getLogger(__name__)

SIGNER_NAME = "kubernetes.io/kube-apiserver-client"
#: kube-controller-manager's --cluster-signing-duration default
SIGNING_DURATION = 365 * 86400
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


def _condition(obj: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def pending(obj: dict) -> bool:
    """Approved (and not denied), not failed, not yet issued, and for this signer."""
    return (obj.get("spec") or {}).get("signerName") == SIGNER_NAME and _condition(obj, "Approved") \
        and not _condition(obj, "Denied") and not _condition(obj, "Failed") \
        and not (obj.get("status") or {}).get("certificate")


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

    def __init__(self, client, data_dir: str, clock: Clock = REAL, informers=None,
                 signing_duration: int = SIGNING_DURATION):
        """Signs with the cluster CA of `data_dir` (DIR/pki/ca.crt and ca.key)."""
        super().__init__(client, clock, informers)
        self.pki = os.path.join(data_dir, "pki")
        self.signing_duration = signing_duration
        self.ca: KeyPair | None = None
        self.csrs = client.resource("certificates.k8s.io", "v1", "certificatesigningrequests")
        self.inf = self.informer_factory.informer(self.csrs)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.inf]

    def _enqueue(self, obj: dict) -> None:
        if pending(obj):
            self.queue.add(obj["metadata"]["name"])

    async def start(self) -> None:
        with open(os.path.join(self.pki, "ca.crt"), "rb") as c, open(os.path.join(self.pki, "ca.key"), "rb") as k:
            self.ca = KeyPair(c.read(), k.read())
        await super().start()

    async def sync(self, key: str) -> None:
        obj = self.inf.get(key)
        if obj is None or not pending(obj):
            return
        spec = obj["spec"]
        try:
            request = x509.load_pem_x509_csr(base64.b64decode(spec.get("request") or ""))
        except ValueError as e:
            raise ValueError(f'unable to parse csr "{key}": {e}') from None
        status = dict(obj.get("status") or {})
        why = usage_error(spec.get("usages") or [])
        now = self.clock.now()
        if why is not None:
            status["conditions"] = [*(status.get("conditions") or []), {
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": why,
                "lastUpdateTime": format_time(now)}]
        else:
            pem = sign(self.ca, request, spec.get("usages") or [],
                       duration(spec.get("expirationSeconds"), self.signing_duration), now)
            status["certificate"] = base64.b64encode(pem).decode()
        try:
            await self.csrs.update({**obj, "status": status}, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
