"""The certificate and key flags of kube-apiserver that `nanokube up` takes, for an operator's own
PKI (kubeadm's /etc/kubernetes/pki, an HA pair's shared one): the serving certificate
(--tls-cert-file, --tls-private-key-file, --tls-sni-cert-key), the CAs client certificates are
verified by (--client-ca-file, --requestheader-*), the aggregator's client certificate
(--proxy-client-cert-file, --proxy-client-key-file) and the service-account keys and issuers
(--service-account-key-file, --service-account-signing-key-file, --service-account-issuer) and the
audiences tokens must be for (--api-audiences).
kube-controller-manager's --cluster-signing-* are csrsigning_options.add_flags'. A flag left unset keeps
what `up` makes in DIR/pki. Every file is read and checked before anything starts, so a bad one
stops `up` with its line; the serving and CA files are read again when they change (serving_tls)."""

from __future__ import annotations

import argparse
import logging
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..pki import jwt
from ..pki.chain import holds, issuer_of
from ..pki.ca import CLUSTER_ADMINS, KeyPair, ensure_cluster_admin, ensure_front_proxy, issue, super_admin
from .serving_tls import SNICert, ServingTLS

if TYPE_CHECKING:
    from .auth.requestheader import RequestHeader

log = logging.getLogger(__name__)


def _request_header(**fields) -> RequestHeader:
    """A RequestHeader, imported only once options are judged (the auth package brings the server's
    HTTP stack, which a refused flag must stop `up` before)."""
    from .auth.requestheader import RequestHeader

    return RequestHeader(**fields)


@dataclass
class PKIOptions:
    #: --tls-cert-file, --tls-private-key-file (None: DIR/pki/apiserver.crt)
    serving: tuple[str, str] | None = None
    sni: list[SNICert] = field(default_factory=list)
    client_ca: str = ""
    requestheader_ca: str = ""
    requestheader: RequestHeader = field(default_factory=_request_header)
    proxy_client: tuple[str, str] | None = None
    #: --service-account-signing-key-file's key, --service-account-key-file's public keys
    signing_key: object = None
    verifying_keys: list = field(default_factory=list)
    issuers: tuple[str, ...] = ()
    #: --api-audiences (none: the issuers)
    audiences: tuple[str, ...] = ()

    def files_given(self) -> bool:
        """Whether any serving or client CA file is the operator's."""
        return bool(self.serving or self.sni or self.client_ca or self.requestheader_ca)


def _list(value: str) -> tuple[str, ...]:
    """A comma-separated flag's values (pflag's StringSlice)."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("certificates and keys (kube-apiserver's flags; each unset: what `up` makes in DIR/pki)")
    g.add_argument("--tls-cert-file", default="", metavar="FILE",
                   help="the serving certificate (PEM, intermediates after it); reloaded when the file changes")
    g.add_argument("--tls-private-key-file", default="", metavar="FILE", help="the key of --tls-cert-file")
    g.add_argument("--tls-sni-cert-key", action="append", default=[], metavar="CERT,KEY[:NAME,...]",
                   help="a certificate served to clients asking (SNI) for one of the names (default: the "
                        "certificate's own; `*.` a wildcard label); repeatable; reloaded when the files change")
    g.add_argument("--client-ca-file", default="", metavar="FILE",
                   help="the CAs a client certificate is a user by (its CN, its O the groups); reloaded when the file "
                        "changes")
    g.add_argument("--requestheader-client-ca-file", default="", metavar="FILE",
                   help="the CAs of front proxies' client certificates, whose requests are the user the headers name")
    g.add_argument("--requestheader-allowed-names", default=None, metavar="NAMES",
                   help="the front proxies' certificate common names (comma-separated; empty: any; default with no "
                        "--requestheader-client-ca-file: front-proxy-client)")
    for flag, default in (("username-headers", "X-Remote-User"), ("group-headers", "X-Remote-Group"),
                          ("extra-headers-prefix", "X-Remote-Extra-"), ("uid-headers", "X-Remote-Uid")):
        g.add_argument(f"--requestheader-{flag}", default=default, metavar="HEADERS",
                       help=f"comma-separated (default {default}, as kubeadm sets it)")
    g.add_argument("--proxy-client-cert-file", default="", metavar="FILE",
                   help="the client certificate the aggregator proxies to extension API servers with")
    g.add_argument("--proxy-client-key-file", default="", metavar="FILE", help="the key of --proxy-client-cert-file")
    g.add_argument("--service-account-key-file", action="append", default=[], metavar="FILE",
                   help="PEM public keys, certificates or private keys (RSA or ECDSA) that verify service account "
                        "tokens; repeatable (required with --service-account-signing-key-file; without it, default: "
                        "--tls-private-key-file where it is such a key, and the key `up` signs with)")
    g.add_argument("--service-account-signing-key-file", default="", metavar="FILE",
                   help="the private key (RSA: RS256, ECDSA: ES256/384/512) service account tokens are signed with")
    g.add_argument("--service-account-issuer", action="append", default=[], metavar="URL",
                   help="the tokens' iss: the first issues, every one is accepted (repeatable; default "
                        "https://kubernetes.default.svc.cluster.local)")
    g.add_argument("--api-audiences", default="", metavar="AUDIENCES",
                   help="the audiences a token must be for to authenticate, a TokenReview's and TokenRequest's "
                        "default (comma-separated; default: the service account issuers)")


def _pair(cert: str, key: str, what: str) -> tuple[str, str] | None:
    if bool(cert) != bool(key):
        raise ValueError(f"missing filename for {what}")
    return (os.path.abspath(cert), os.path.abspath(key)) if cert else None


def _sni(value: str) -> SNICert:
    """--tls-sni-cert-key's CERT,KEY[:NAME,...] (pflag's NamedCertKey)."""
    files, _, names = value.partition(":")
    pair = [f.strip() for f in files.split(",")]
    if len(pair) != 2 or not all(pair):
        raise ValueError(f"--tls-sni-cert-key: expected comma separated certificate and key file paths: {value!r}")
    return SNICert(os.path.abspath(pair[0]), os.path.abspath(pair[1]), _list(names))


def _issuers(values: list[str]) -> tuple[str, ...]:
    """--service-account-issuer as kube-apiserver validates it."""
    seen: list[str] = []
    for issuer in values:
        if not issuer:
            raise ValueError("service-account-issuer should not be an empty string")
        if ":" in issuer:
            try:
                urllib.parse.urlsplit(issuer)
            except ValueError as e:
                raise ValueError(f"service-account-issuer contained a ':' but was not a valid URL: {e}") from None
        if issuer in seen:
            raise ValueError(f'service-account-issuer "{issuer}" is already specified')
        seen.append(issuer)
    return tuple(seen)


def load(args: argparse.Namespace) -> PKIOptions:
    """The flags read and their key files loaded: ValueError with the line `up` stops with. (The
    serving and CA files are loaded by `tls`, which `up` calls before it listens.)"""
    o = PKIOptions(serving=_pair(args.tls_cert_file, args.tls_private_key_file, "serving cert"),
                   sni=[_sni(v) for v in args.tls_sni_cert_key],
                   client_ca=os.path.abspath(args.client_ca_file) if args.client_ca_file else "",
                   requestheader_ca=os.path.abspath(args.requestheader_client_ca_file)
                   if args.requestheader_client_ca_file else "",
                   proxy_client=_pair(args.proxy_client_cert_file, args.proxy_client_key_file, "proxy client cert"),
                   issuers=_issuers(args.service_account_issuer), audiences=_list(args.api_audiences))
    allowed = args.requestheader_allowed_names
    o.requestheader = _request_header(
        allowed_names=_list(allowed) if allowed is not None else () if o.requestheader_ca else ("front-proxy-client",),
        username_headers=_list(args.requestheader_username_headers),
        group_headers=_list(args.requestheader_group_headers),
        extra_prefixes=_list(args.requestheader_extra_headers_prefix),
        uid_headers=_list(args.requestheader_uid_headers))
    if args.service_account_signing_key_file:
        try:
            o.signing_key = jwt.load_key(args.service_account_signing_key_file)
            jwt.algorithm(o.signing_key.public_key())
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"--service-account-signing-key-file: {e}") from None
        if not args.service_account_key_file:  # (kube-apiserver defaults no verifying key once one signs)
            raise ValueError("service-account-key-file is a required flag")
    for path in _key_files(args):
        try:
            with open(path, "rb") as f:
                o.verifying_keys += jwt.public_keys(f.read())
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"--service-account-key-file: {path}: {e}") from None
    return o


def _key_files(args: argparse.Namespace) -> list[str]:
    """--service-account-key-file's files; none given and no --service-account-signing-key-file, the
    TLS key where it holds a key that verifies (kube-apiserver's default, which it passes over with
    a warning where the file holds none, and since signing keys came, where one is given)."""
    if args.service_account_key_file or not args.tls_private_key_file or args.service_account_signing_key_file:
        return args.service_account_key_file
    try:
        with open(args.tls_private_key_file, "rb") as f:
            jwt.public_keys(f.read())
    except (OSError, ValueError, TypeError):
        log.warning("--tls-private-key-file holds no key that verifies service account tokens: "
                    "--service-account-key-file is not defaulted to it")
        return []
    return [args.tls_private_key_file]


def tls(o: PKIOptions, pki) -> ServingTLS | None:
    """The operator's serving certificates and client CAs, `up`'s own for those left unset; None
    where no file is given (the server makes its own). ValueError for a file that does not load."""
    if not o.files_given():
        return None
    try:
        return ServingTLS(o.serving or (pki.server.cert_pem + pki.ca.cert_pem, pki.server.key_pem),
                          o.client_ca or pki.ca.cert_pem, o.requestheader_ca or ensure_front_proxy(pki.dir)[0].cert_pem,
                          o.sni)
    except (OSError, ValueError) as e:  # (ssl.SSLError is an OSError)
        raise ValueError(f"serving certificates or client CAs: {e}") from None


def apply(server, o: PKIOptions, serving: ServingTLS | None) -> None:
    """Before the server starts: its TLS, request-header flags and service-account keys."""
    server.tls = serving or server.tls
    server.requestheader = o.requestheader
    server.pki.proxy_client = o.proxy_client
    tokens = server.tokens
    if o.signing_key is None and not o.verifying_keys and not o.issuers and not o.audiences:
        return
    key = o.signing_key or tokens.key
    issuers = o.issuers or (tokens.issuer,)
    # the key `up` made signs where none is given: it verifies too, or no token it signs would
    verifying = tuple(o.verifying_keys) + (() if o.signing_key else (key.public_key(),))
    tokens.configure(key, verifying, issuers, o.audiences or (issuers if o.issuers else tokens.audiences))


#: the flags of one file each, and those of a value kept as given
_FILE_FLAGS = ("tls_cert_file", "tls_private_key_file", "client_ca_file", "requestheader_client_ca_file",
               "proxy_client_cert_file", "proxy_client_key_file")
_VALUE_FLAGS = ("requestheader_username_headers", "requestheader_group_headers", "requestheader_extra_headers_prefix",
                "requestheader_uid_headers")


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The flags again, for `up`'s API workers: each reads the same files (and each reloads the
    serving and CA files when they change, on its own connections' handshakes)."""
    flag = lambda name: "--" + name.replace("_", "-")
    out = [f"{flag(n)}={os.path.abspath(getattr(args, n))}" for n in _FILE_FLAGS if getattr(args, n)]
    out += [f"{flag(n)}={getattr(args, n)}" for n in _VALUE_FLAGS]
    if args.requestheader_allowed_names is not None:
        out.append(f"--requestheader-allowed-names={args.requestheader_allowed_names}")
    for value in args.tls_sni_cert_key:
        files, colon, names = value.partition(":")
        out.append("--tls-sni-cert-key=" + ",".join(os.path.abspath(f.strip()) for f in files.split(",")) + colon + names)
    if args.service_account_signing_key_file:
        out += ["--service-account-signing-key-file", os.path.abspath(args.service_account_signing_key_file)]
    for value in args.service_account_key_file:
        out += ["--service-account-key-file", os.path.abspath(value)]
    for value in args.service_account_issuer:
        out += ["--service-account-issuer", value]
    return out + (["--api-audiences", args.api_audiences] if args.api_audiences else [])


def _certificates(pem: bytes) -> list:
    from cryptography import x509

    return x509.load_pem_x509_certificates(pem) if b"-----BEGIN CERTIFICATE" in pem else []


def client_trust(o: PKIOptions, pki, signers: dict[str, tuple[str, str]]) -> bytes:
    """The CA certificate clients verify the serving certificate by (the admin kubeconfig's,
    cluster-info's, kube-root-ca.crt's): DIR/pki's CA, or for --tls-cert-file the one of the CAs
    `up` knows (its chain's own root, the client CAs, the signing CAs, DIR/pki's) that issued its
    chain; where none did, DIR/pki's, said in the log."""
    if o.serving is None:
        return pki.ca.cert_pem
    with open(o.serving[0], "rb") as f:
        chain = _certificates(f.read())
    known = [*chain, *_certificates(pki.ca.cert_pem)]  # (the chain's: a root it ends in, or a self-signed leaf)
    for path in ([o.client_ca] if o.client_ca else []) + [cert for cert, _ in signers.values()]:
        with open(path, "rb") as f:
            known += _certificates(f.read())
    ca = issuer_of(chain[-1], known) if chain else None  # (by key: two CAs `up` knows may share a name)
    if ca is not None:
        from cryptography.hazmat.primitives import serialization

        return ca.public_bytes(serialization.Encoding.PEM)
    log.warning("no CA nanokube knows issued --tls-cert-file's certificate: the admin kubeconfig trusts DIR/pki/ca.crt")
    return pki.ca.cert_pem


def admin_credentials(o: PKIOptions, pki, serving: ServingTLS | None,
                      signers: dict[str, tuple[str, str]]) -> tuple[KeyPair, KeyPair]:
    """The client certificates of the admin kubeconfig (kubernetes-admin in kubeadm:cluster-admins)
    and of super-admin.conf (kubernetes-super-admin in system:masters): DIR/pki's, unless
    --client-ca-file leaves DIR/pki's CA out; then ones `up` issues with the kube-apiserver-client
    signer's CA where the client CAs hold it (kubeadm's ca.crt is both), else DIR/pki's, said in
    the log. A CA is held by its key
    and name, not its name alone: a rotated CA keeps the name, and certificates of its old key
    would not authenticate."""
    if not o.client_ca or serving is None or holds(serving.client_cas, pki.ca.cert):
        return ensure_cluster_admin(pki.dir, pki.ca), pki.admin
    files = signers.get("kubernetes.io/kube-apiserver-client")
    if files:
        with open(files[0], "rb") as c, open(files[1], "rb") as k:
            ca = KeyPair(c.read(), k.read())
        if holds(serving.client_cas, ca.cert):
            return issue(ca, "kubernetes-admin", organizations=(CLUSTER_ADMINS,), client=True), super_admin(ca)
    log.warning("--client-ca-file holds neither DIR/pki's CA nor a --cluster-signing CA: the admin kubeconfigs' "
                "certificates will not authenticate")
    return ensure_cluster_admin(pki.dir, pki.ca), pki.admin
