"""The cluster CA and the certificates `nanokube up` issues from it.

Kept in the data dir so a restart keeps the same identity: clients that trust
the CA keep working, and the admin kubeconfig stays valid.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def key(self):
        return serialization.load_pem_private_key(self.key_pem, None)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def new_ca(common_name: str = "nanokube-ca", days: int = 3650, parent: KeyPair | None = None) -> KeyPair:
    """A self-signed CA, or with `parent` an intermediate CA it signs."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _dt.datetime.now(_dt.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(parent.cert.subject if parent else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    cert = _with_authority_key_id(b, parent).sign(parent.key if parent else key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _with_authority_key_id(b: x509.CertificateBuilder, issuer: KeyPair | None) -> x509.CertificateBuilder:
    """The issuer's key identifier, as Go's x509 writes it: a verifier tells apart two CAs of one
    name by it."""
    try:
        ski = issuer.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value if issuer else None
    except x509.ExtensionNotFound:
        ski = None
    return b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False) \
        if ski else b


def issue(
    ca: KeyPair,
    common_name: str,
    organizations: tuple[str, ...] = (),
    dns_names: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
    days: int = 365,
) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    now = _dt.datetime.now(_dt.UTC)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    b = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = _with_authority_key_id(b, ca).sign(ca.key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _load_or(path_cert: str, path_key: str, make) -> KeyPair:
    if os.path.exists(path_cert) and os.path.exists(path_key):
        with open(path_cert, "rb") as c, open(path_key, "rb") as k:
            return KeyPair(c.read(), k.read())
    kp = make()
    _write(path_cert, kp.cert_pem)
    _write(path_key, kp.key_pem, private=True)
    return kp


def _write(path: str, data: bytes, private: bool = False) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


@dataclass
class ClusterPKI:
    dir: str
    ca: KeyPair
    server: KeyPair
    #: kubernetes-super-admin in system:masters (DIR/pki/admin.crt): super-admin.conf's user
    admin: KeyPair
    #: --proxy-client-cert-file and -key-file, the front-proxy client certificate in place of DIR/pki's
    proxy_client: tuple[str, str] | None = None

    @property
    def ca_path(self) -> str:
        return os.path.join(self.dir, "ca.crt")


#: the serving certificate's names, as kubeadm's: an in-cluster client dials the `kubernetes`
#: Service's ClusterIP (the first address of the service range, 10.96.0.0/12) or its DNS names
SERVING_DNS_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                     "kubernetes.default.svc.cluster.local")
SERVING_IPS = ("127.0.0.1", "::1", "10.96.0.1")


def _names_all(kp: KeyPair, dns_names: tuple[str, ...], ips: tuple[str, ...]) -> bool:
    try:
        san = x509.load_pem_x509_certificate(kp.cert_pem).extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return (set(dns_names) <= set(san.get_values_for_type(x509.DNSName))
            and {ipaddress.ip_address(i) for i in ips} <= set(san.get_values_for_type(x509.IPAddress)))


def ensure_pki(data_dir: str, ips: tuple[str, ...] = ()) -> ClusterPKI:
    """Create (first start) or load the CA, the serving cert and the admin cert; the serving cert
    names `ips` too (the advertised address, which the `kubernetes` Service's endpoints and the
    service account issuer's jwks_uri name)."""
    d = os.path.join(data_dir, "pki")
    os.makedirs(d, exist_ok=True)
    ca = _load_or(os.path.join(d, "ca.crt"), os.path.join(d, "ca.key"), new_ca)
    paths = os.path.join(d, "apiserver.crt"), os.path.join(d, "apiserver.key")

    names = tuple(dict.fromkeys((*SERVING_IPS, *ips)))

    def serving() -> KeyPair:
        return issue(ca, "kube-apiserver", dns_names=SERVING_DNS_NAMES, ips=names, server=True)

    server = _load_or(*paths, serving)
    if not _names_all(server, SERVING_DNS_NAMES, names):  # a data dir from before a name was added, a new address
        server = serving()
        _write(paths[0], server.cert_pem)
        _write(paths[1], server.key_pem, private=True)
    admin_paths = os.path.join(d, "admin.crt"), os.path.join(d, "admin.key")
    admin = _load_or(*admin_paths, lambda: super_admin(ca))
    if admin.cert.subject != _SUPER_ADMIN_SUBJECT:  # a data dir from before: kubernetes-admin in system:masters
        admin = super_admin(ca)
        _write(admin_paths[0], admin.cert_pem)
        _write(admin_paths[1], admin.key_pem, private=True)
    return ClusterPKI(d, ca, server, admin)


#: super-admin.conf's user, as kubeadm (1.29+) names it: a user of its own in system:masters, which
#: no RBAC binding grants and none can take away, apart from admin.conf's kubernetes-admin
SUPER_ADMIN = "kubernetes-super-admin"
MASTERS = "system:masters"
_SUPER_ADMIN_SUBJECT = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, MASTERS),
                                  x509.NameAttribute(NameOID.COMMON_NAME, SUPER_ADMIN)])


def super_admin(ca: KeyPair) -> KeyPair:
    """The break-glass client certificate: kubernetes-super-admin in system:masters."""
    return issue(ca, SUPER_ADMIN, organizations=(MASTERS,), client=True)


def ensure_front_proxy(pki_dir: str) -> tuple[KeyPair, KeyPair]:
    """The request-header CA and the `front-proxy-client` certificate it signs: the
    aggregator's identity towards extension API servers, which trust
    X-Remote-User/X-Remote-Group only from a client certificate of this CA."""
    ca = _load_or(os.path.join(pki_dir, "front-proxy-ca.crt"), os.path.join(pki_dir, "front-proxy-ca.key"),
                  lambda: new_ca("front-proxy-ca"))
    client = _load_or(os.path.join(pki_dir, "front-proxy-client.crt"), os.path.join(pki_dir, "front-proxy-client.key"),
                      lambda: issue(ca, "front-proxy-client", client=True))
    return ca, client


#: kubeadm's admin group, bound to cluster-admin (clusterinfo.py): since kubeadm 1.29 admin.conf's
#: kubernetes-admin and its apiserver-kubelet-client are in it, no longer in system:masters
#: (kubernetes#121837; super-admin.conf's user is, a break-glass credential RBAC cannot take away)
CLUSTER_ADMINS = "kubeadm:cluster-admins"


def ensure_cluster_admin(pki_dir: str, ca: KeyPair) -> KeyPair:
    """The admin kubeconfig's certificate, as kubeadm's admin.conf (1.29+): kubernetes-admin in
    kubeadm:cluster-admins, which clusterinfo binds to cluster-admin, so that RBAC decides (and
    API Priority and Fairness queues) its requests. (DIR/pki/admin.crt is the super-admin's,
    super-admin.conf's.)"""
    return _load_or(os.path.join(pki_dir, "cluster-admin.crt"), os.path.join(pki_dir, "cluster-admin.key"),
                    lambda: issue(ca, "kubernetes-admin", organizations=(CLUSTER_ADMINS,), client=True))


def ensure_kubelet_client(pki_dir: str, ca: KeyPair) -> tuple[str, str]:
    """The API server's client certificate towards the kubelets (kubeadm's apiserver-kubelet-client,
    in kubeadm:cluster-admins; one an older `up` made in system:masters is kept, as kubeadm keeps
    its files until they are renewed): its certificate and key files."""
    paths = os.path.join(pki_dir, "apiserver-kubelet-client.crt"), os.path.join(pki_dir, "apiserver-kubelet-client.key")
    _load_or(*paths, lambda: issue(ca, "kube-apiserver-kubelet-client", organizations=(CLUSTER_ADMINS,), client=True))
    return paths
