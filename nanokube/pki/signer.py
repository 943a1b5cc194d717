"""The built-in PodCertificateRequest signer `nanokube.io/pod-identity`.

It is a controller like any other client of the API: it watches requests for
its signer name, issues a leaf certificate bound to the stub CSR's public key
with a SPIFFE URI SAN for the pod's namespace and service account, and writes
the result through `podcertificaterequests/status`. Its CA lives in
`DIR/pki/signers/<signer>/`; a new CA is made `rotate_before` ahead of the old
one's expiry and both are published in the signer's ClusterTrustBundle until
the old one expires, so trust moves before issuance does.

No operator flag names its CA, as none does upstream: Kubernetes 1.37 documents
`kubernetes.io/kube-apiserver-client-pod` as unimplemented, kube-controller-manager
runs no pod certificate signer, and its --cluster-signing-* flags name only the
four CSR signers (csrsigning_options); a request for that signer stays pending.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import functools
import logging
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..machinery.conditions import is_condition_true
from ..machinery.errors import APIError
from ..client.informer import Informer
from ..clock import REAL, Clock
from ..controllers.base import Controller
from ..machinery.podcertificates import stub_request_key, stub_request_spki
from . import der, trustbundle

log = logging.getLogger(__name__)

SIGNER_NAME = "nanokube.io/pod-identity"
TERMINAL = ("Issued", "Denied", "Failed")
#: key types kubelet may request, as (kind, size-or-curve) → the podCertificate keyType name
KEY_TYPES = {
    ("rsa", 3072): "RSA3072", ("rsa", 4096): "RSA4096",
    ("ec", "secp256r1"): "ECDSAP256", ("ec", "secp384r1"): "ECDSAP384", ("ec", "secp521r1"): "ECDSAP521",
    ("ed25519", None): "ED25519",
}
DAY = 86400


def key_type(key) -> str:
    """The podCertificate keyType name of a public key, or "" if it has none."""
    if isinstance(key, rsa.RSAPublicKey):
        return KEY_TYPES.get(("rsa", key.key_size), "")
    if isinstance(key, ec.EllipticCurvePublicKey):
        return KEY_TYPES.get(("ec", key.curve.name), "")
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "ED25519"
    return ""


def _utc(t: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(int(t), _dt.UTC)


def _rfc3339(d: _dt.datetime) -> str:
    return d.isoformat()[:19] + "Z"


@functools.lru_cache(maxsize=256)
def _stamp(t: int) -> tuple[str, bytes]:
    """(metav1.Time, X.509 Time) for a second: requests signed close together
    share their notBefore/notAfter/beginRefreshAt seconds, so each is formatted once."""
    d = _utc(t)
    return _rfc3339(d), der.time(d)


@dataclass(eq=False)
class SigningCA:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @functools.cached_property
    def not_before(self) -> _dt.datetime:
        return self.cert.not_valid_before_utc

    @functools.cached_property
    def expiry(self) -> int:
        """notAfter in seconds since the epoch, which bounds every issued leaf."""
        return int(self.cert.not_valid_after_utc.timestamp())


class SignerCA:
    """The signer's CAs on disk: the one issuing now plus any older one still
    trusted. Files are `ca-<notBefore>.crt` / `.key`, private key mode 0600."""

    def __init__(self, directory: str, clock: Clock = REAL, validity: float = 365 * DAY,
                 rotate_before: float = 30 * DAY, publish_lead: float = 3600.0, common_name: str = SIGNER_NAME):
        self.dir = directory
        self.clock = clock
        self.validity = validity
        self.rotate_before = rotate_before
        self.publish_lead = publish_lead
        self.common_name = common_name
        self.cas: list[SigningCA] = []

    def load(self) -> bool:
        """Read the CAs, drop expired ones, create one when the newest is near
        its end. Returns whether the set of trusted CAs changed."""
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        before = [c.pem for c in self.cas]
        now = _utc(self.clock.now())
        cas = []
        for f in sorted(os.listdir(self.dir)):
            if not (f.startswith("ca-") and f.endswith(".crt")):
                continue
            base = os.path.join(self.dir, f[:-4])
            with open(base + ".crt", "rb") as c, open(base + ".key", "rb") as k:
                ca = SigningCA(x509.load_pem_x509_certificate(c.read()), serialization.load_pem_private_key(k.read(), None))
            if ca.cert.not_valid_after_utc <= now:
                os.remove(base + ".crt")
                os.remove(base + ".key")
                continue
            cas.append(ca)
        cas.sort(key=lambda c: c.cert.not_valid_before_utc)
        if not cas or (cas[-1].cert.not_valid_after_utc - now).total_seconds() < self.rotate_before:
            cas.append(self._create())
        self.cas = cas
        return [c.pem for c in cas] != before

    def _create(self) -> SigningCA:
        key = ec.generate_private_key(ec.SECP256R1())
        nb = int(self.clock.now())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{self.common_name} CA {nb}")])
        cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_utc(nb)).not_valid_after(_utc(nb + self.validity))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        base = os.path.join(self.dir, f"ca-{nb}")
        for path, data, mode in (
            (base + ".key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()), 0o600),
            (base + ".crt", cert.public_bytes(serialization.Encoding.PEM), 0o644),
        ):
            fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(path + ".tmp", path)
        return SigningCA(cert, key)

    def issuing(self) -> SigningCA:
        """The newest CA that has been published for `publish_lead`, so pods
        have had time to trust it; the oldest one if none has."""
        now = _utc(self.clock.now())
        ready = [c for c in self.cas if (now - c.not_before).total_seconds() >= self.publish_lead]
        return ready[-1] if ready else self.cas[0]

    def trust_pems(self) -> list[bytes]:
        return [c.pem for c in self.cas]


def spiffe_id(namespace: str, service_account: str, trust_domain: str = "cluster.local") -> str:
    return f"spiffe://{trust_domain}/ns/{namespace}/sa/{service_account}"


#: ecdsa-with-SHA256, the signature algorithm of every signer CA (P-256)
_ECDSA_SHA256 = der.seq(der.oid("1.2.840.10045.4.3.2"))
#: a SAN extension's extnID and critical flag
_SAN_HEAD = der.oid("2.5.29.17") + b"\x01\x01\xff"
_V3 = b"\xa0\x03\x02\x01\x02"
_EMPTY_NAME = der.seq()
_KEY_USAGE = {False: x509.KeyUsage(True, False, False, False, False, False, False, False, False),
              True: x509.KeyUsage(True, False, True, False, False, False, False, False, False)}


@functools.lru_cache(maxsize=8)
def _fixed_parts(ca: SigningCA) -> tuple[bytes, dict[bool, bytes]]:
    """(signature algorithm and issuer Name, extensions but the SAN keyed by
    "is an RSA key") for a CA: everything in a leaf that does not change
    between leaves."""
    aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key())
    common = (der.extension(der.oid("2.5.29.19"), x509.BasicConstraints(ca=False, path_length=None).public_bytes(), True)
              + der.extension(der.oid("2.5.29.37"), x509.ExtendedKeyUsage(
                  [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]).public_bytes(), False)
              + der.extension(der.oid("2.5.29.35"), aki.public_bytes(), False))
    by_usage = {enc: der.extension(der.oid("2.5.29.15"), ku.public_bytes(), True) + common for enc, ku in _KEY_USAGE.items()}
    return _ECDSA_SHA256 + ca.cert.subject.public_bytes(), by_usage


_SIGN = ec.ECDSA(hashes.SHA256())


def _validity(ca: SigningCA, not_before: float, lifetime: float) -> tuple[int, int]:
    """From `not_before` for `lifetime` seconds, but never past the CA (whole seconds)."""
    return int(not_before), min(int(not_before + lifetime), ca.expiry)


def leaf_der(ca: SigningCA, spki: bytes, rsa_key: bool, uri: str, nb: int, na: int) -> bytes:
    """A DER leaf certificate for the SubjectPublicKeyInfo `spki` with an empty
    subject and only a (critical) URI SAN, encoded directly (see der.py) and
    signed by the CA's P-256 key; RSA keys also get keyEncipherment."""
    algorithm_issuer, extensions = _fixed_parts(ca)
    san = der.seq(_SAN_HEAD, der.tlv(0x04, der.seq(der.tlv(0x86, uri.encode()))))
    tbs = der.seq(
        _V3, der.integer(x509.random_serial_number()), algorithm_issuer,
        der.seq(_stamp(nb)[1], _stamp(na)[1]), _EMPTY_NAME, spki, der.tlv(0xA3, der.seq(extensions[rsa_key], san)),
    )
    return der.seq(tbs, _ECDSA_SHA256, der.bit_string(ca.key.sign(tbs, _SIGN)))


def issue_leaf(ca: SigningCA, public_key, uri: str, not_before: float, lifetime: float) -> x509.Certificate:
    """A leaf for `public_key` (see leaf_der), valid from `not_before` for
    `lifetime` seconds but never past the CA."""
    nb, na = _validity(ca, not_before, lifetime)
    spki = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return x509.load_der_x509_certificate(leaf_der(ca, spki, isinstance(public_key, rsa.RSAPublicKey), uri, nb, na))


def pem_certificate(data: bytes) -> str:
    """A CERTIFICATE PEM block, laid out as OpenSSL and `cryptography` write it."""
    b64 = base64.b64encode(data).decode()
    lines = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
    return f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----\n"


def _stub_der(spec: dict) -> bytes:
    raw = spec.get("stubPKCS10Request") or ""
    try:
        return base64.b64decode(raw) if raw else b""
    except ValueError:
        return b""


def stub_key(spec: dict):
    """The public key of a request's stub CSR, or None when there is none usable."""
    stub = _stub_der(spec)
    return stub_request_key(stub) if stub else None


def ca_dir(data_dir: str, signer_name: str = SIGNER_NAME) -> str:
    """Where a signer's CAs live: DIR/pki/signers/<signer>/, with the rest of the cluster's PKI. `up`
    loads (first: makes) them at start, before any controller runs, so a second API server that joins
    with a copy of DIR/pki signs with the same CA whichever server's signer leads, as upstream's
    leader-elected signer reads CA files kubeadm copies to every control-plane node."""
    return os.path.join(data_dir, "pki", "signers", signer_name.replace("/", "_"))


class PodCertificateSigner(Controller):
    name = "pod-certificate-signer"
    workers = 2

    def __init__(self, client, data_dir: str, clock: Clock = REAL, signer_name: str = SIGNER_NAME,
                 max_lifetime: float = DAY, supported: frozenset[str] = frozenset(KEY_TYPES.values()),
                 rotation_check: float = 3600.0, ca: SignerCA | None = None):
        super().__init__(client, clock)
        self.signer_name = signer_name
        self.max_lifetime = max_lifetime
        self.supported = supported
        self.rotation_check = rotation_check
        self.ca = ca or SignerCA(ca_dir(data_dir, signer_name), clock)
        self.requests = client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
        self.bundles = client.resource("certificates.k8s.io", "v1", "clustertrustbundles")
        self.inf = Informer(self.requests, field_selector=f"spec.signerName={signer_name}", clock=clock)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    @property
    def bundle_name(self) -> str:
        return trustbundle.bundle_name(self.signer_name, "ca")

    def informers(self):
        return [self.inf]

    def _enqueue(self, obj: dict) -> None:
        if not _terminal(obj):
            md = obj["metadata"]
            self.queue.add(f"{md['namespace']}/{md['name']}")

    async def start(self) -> None:
        self.ca.load()
        await self.publish()
        await super().start()
        self._tasks.append(asyncio.create_task(self._rotate_loop()))

    async def publish(self) -> None:
        await trustbundle.publish(self.bundles, self.signer_name, "ca", self.ca.trust_pems())

    async def _rotate_loop(self) -> None:
        while True:
            await self.clock.sleep(self.rotation_check)
            try:
                if self.ca.load():
                    await self.publish()
            except Exception:
                log.exception("%s: CA rotation failed", self.name)

    async def sync(self, key: str) -> None:
        obj = self.inf.get(key)
        if obj is None or _terminal(obj):
            return
        status = self.decide(obj)
        try:
            await self.requests.update({**obj, "status": status}, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise

    def decide(self, obj: dict) -> dict:
        """The status this signer writes for a pending request."""
        spec = obj.get("spec") or {}
        now = self.clock.now()
        stub = _stub_der(spec)
        key = stub_request_key(stub) if stub else None
        kt = key_type(key) if key is not None else ""
        if not kt or kt not in self.supported:
            shown = kt or ("no stub PKCS#10 request" if key is None else type(key).__name__)
            return {"conditions": [_condition("Denied", "UnsupportedKeyType", now,
                                              f"{self.signer_name} does not sign {shown} keys; request one of "
                                              f"{', '.join(sorted(self.supported))} (for example ECDSAP256)")]}
        lifetime = min(float(spec.get("maxExpirationSeconds") or DAY), self.max_lifetime)
        ca = self.ca.issuing()
        nb, na = _validity(ca, now, lifetime)
        leaf = leaf_der(ca, stub_request_spki(stub), kt.startswith("RSA"),
                        spiffe_id(obj["metadata"]["namespace"], spec.get("serviceAccountName", "")), nb, na)
        return {
            "certificateChain": pem_certificate(leaf),
            "notBefore": _stamp(nb)[0], "notAfter": _stamp(na)[0], "beginRefreshAt": _stamp(nb + (na - nb) // 2)[0],
            "conditions": [_condition("Issued", "Issued", now, f"issued by {self.signer_name}")],
        }


def _terminal(obj: dict) -> bool:
    conditions = (obj.get("status") or {}).get("conditions")
    return any(is_condition_true(conditions, t) for t in TERMINAL)


def _condition(typ: str, reason: str, now: float, message: str) -> dict:
    return {"type": typ, "status": "True", "reason": reason, "message": message, "lastTransitionTime": _stamp(int(now))[0]}
