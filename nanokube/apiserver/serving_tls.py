"""The API server's TLS: the serving certificate (and --tls-sni-cert-key's, picked by the name a
client asks for) and the CAs client certificates are verified against (--client-ca-file's for
users, --requestheader-client-ca-file's for front proxies).

Each is PEM content (what `up` made in DIR/pki) or a file the operator named. Files are read again
when they change, as kube-apiserver's dynamic certificate controllers do: a connection's handshake
(the SNI callback, before the server's certificate goes out) looks at the files at most once a
second and, when any changed, builds the contexts anew from what they hold; the connection then
gets those. A file that does not load (a certificate written before its key) keeps the last good
contexts, and is tried again once it changes again. Connections already open keep theirs."""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import time
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

log = logging.getLogger(__name__)

#: PEM content, or the path of a file holding it
Source = bytes | str


def _read(source: Source) -> bytes:
    if isinstance(source, bytes):
        return source
    with open(source, "rb") as f:
        return f.read()


def certificates(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle (ValueError where it holds none)."""
    return x509.load_pem_x509_certificates(pem)


def names_of(cert_pem: bytes) -> tuple[str, ...]:
    """The names an SNI certificate serves when its flag names none: its DNS and IP SANs and,
    where it is a host name, its common name."""
    cert = certificates(cert_pem)[0]
    names = [a.value for a in cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)]
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names += san.get_values_for_type(x509.DNSName) + [str(i) for i in san.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        pass
    return tuple(dict.fromkeys(n.lower() for n in names if n))


def _matches(pattern: str, name: str) -> bool:
    """An SNI name against a certificate name: equal, or `*.` standing for one leftmost label."""
    if pattern == name:
        return True
    return pattern.startswith("*.") and "." in name and name.split(".", 1)[1] == pattern[2:]


@dataclass
class SNICert:
    """--tls-sni-cert-key: a certificate and key served to clients asking for `names` (none: the
    certificate's own)."""
    cert: Source
    key: Source
    names: tuple[str, ...] = ()


@dataclass
class ServingTLS:
    serving: tuple[Source, Source]
    client_ca: Source
    requestheader_ca: Source
    sni: list[SNICert] = field(default_factory=list)
    #: seconds between looks at the files
    recheck: float = 1.0
    monotonic: object = time.monotonic

    def __post_init__(self) -> None:
        self._files = [s for s in (*self.serving, self.client_ca, self.requestheader_ca,
                                   *(p for c in self.sni for p in (c.cert, c.key))) if isinstance(s, str)]
        self._seen: tuple = ()
        self._checked = float("-inf")
        #: the CAs of users' and of front proxies' certificates (DER), and the users' CAs
        self.client_ders: frozenset[bytes] = frozenset()
        self.requestheader_ders: frozenset[bytes] = frozenset()
        self.client_cas: tuple[x509.Certificate, ...] = ()
        self.client_ca_pem = self.requestheader_ca_pem = b""
        self._default: ssl.SSLContext | None = None
        self._by_name: list[tuple[str, ssl.SSLContext]] = []
        self._build()  # the first contexts: a file that does not load stops the start (raises)
        self._base = self._default
        if self._files or self.sni:
            self._base.sni_callback = self._choose

    def context(self) -> ssl.SSLContext:
        """The context the sites serve with (its SNI callback hands each connection the current one)."""
        return self._base

    def _signature(self) -> tuple:
        out = []
        for path in self._files:
            try:
                st = os.stat(path)
                out.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    def _build(self) -> None:
        """Contexts from what the sources hold now; raises (OSError, ValueError, ssl.SSLError) on any
        that does not load, leaving the current ones."""
        self._seen = self._signature()
        client_ca, requestheader_ca = _read(self.client_ca), _read(self.requestheader_ca)
        clients, proxies = certificates(client_ca), certificates(requestheader_ca)
        trust = client_ca.rstrip(b"\n") + b"\n" + requestheader_ca
        default = _context(_read(self.serving[0]), _read(self.serving[1]), trust)
        by_name = []
        for c in self.sni:
            cert = _read(c.cert)
            ctx = _context(cert, _read(c.key), trust)
            by_name += [(n.lower(), ctx) for n in c.names or names_of(cert)]
        self._default, self._by_name = default, by_name
        self.client_ders = frozenset(c.public_bytes(Encoding.DER) for c in clients)
        self.requestheader_ders = frozenset(c.public_bytes(Encoding.DER) for c in proxies)
        self.client_cas = tuple(clients)
        self.client_ca_pem, self.requestheader_ca_pem = client_ca, requestheader_ca

    def watches_files(self) -> bool:
        """Whether any certificate or CA is a file (the operator's), which may change."""
        return bool(self._files)

    def refresh(self) -> None:
        """Rebuild from the files where any changed since they were last looked at (at most once a
        `recheck`)."""
        now = self.monotonic()
        if now - self._checked < self.recheck:
            return
        self._checked = now
        if self._signature() == self._seen:
            return
        try:
            self._build()
            log.info("serving certificates and client CAs reloaded from their files")
        except (OSError, ValueError, ssl.SSLError) as e:
            log.warning("the certificate files changed but do not load, keeping the last ones: %s", e)

    def _choose(self, conn: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        self.refresh()
        ctx = self._default
        if server_name and self._by_name:
            name = server_name.lower()
            exact = [c for n, c in self._by_name if n == name]
            ctx = (exact or [c for n, c in self._by_name if _matches(n, name)] or [ctx])[0]
        if ctx is not conn.context:
            conn.context = ctx


def _private_chain_reader():
    """How a Python before 3.13 gives a connection's verified chain: 3.13's SSLObject has it as a
    public method (DER); before, only the private object an SSLObject wraps has it (as
    certificates), and neither the rest of ssl nor `cryptography` (which sees no connection) has
    another way to the intermediates a client sent. Where neither is there, the import fails: a
    server that could not tell whose CA anchors a client certificate must not start."""
    if hasattr(ssl.SSLObject, "get_verified_chain"):
        return None
    if hasattr(getattr(ssl._ssl, "_SSLSocket", None), "get_verified_chain"):
        der = ssl._ssl.ENCODING_DER
        return lambda obj: [c.public_bytes(der) for c in obj._sslobj.get_verified_chain() or ()]
    raise ImportError("this Python's ssl module gives no verified certificate chain of a connection "
                      "(SSLObject.get_verified_chain, public since 3.13)")


_private_chain = _private_chain_reader()


def verified_chain(transport) -> list[bytes]:
    """A connection's client certificate chain as the handshake verified it (DER, the leaf first,
    then the intermediates the client sent, up to the CA of ours it ends in); [] without one."""
    obj = transport.get_extra_info("ssl_object") if transport else None
    if obj is None:
        return []
    return obj.get_verified_chain() if hasattr(obj, "get_verified_chain") else _private_chain(obj)


def signed_by(tls: ServingTLS, chain: list[bytes]) -> tuple[bool, bool]:
    """(whether a front proxies' CA anchors the verified `chain`, whether a users' CA does): the
    handshake verified it against both sets together, building the path as Go's x509 does (through
    the intermediates the client sent; any certificate of a CA file an anchor, an intermediate
    too), so each set's verdict is whether the path passes through one of its certificates. Not by
    names: two operator CAs both named `kubernetes` would make the front proxy CA's certificates
    users, system:masters among them, which upstream's x509 authenticator, verifying against the
    client CAs alone, refuses."""
    return (any(der in tls.requestheader_ders for der in chain), any(der in tls.client_ders for der in chain))


def _context(cert_pem: bytes, key_pem: bytes, trust: bytes) -> ssl.SSLContext:
    """A server context serving `cert_pem` (a chain, leaf first) and verifying client certificates,
    when sent, against `trust`."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as d:  # (ssl loads a chain and key from files only)
        cert, key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
        with open(cert, "wb") as f:
            f.write(cert_pem)
        with open(key, "wb") as f:
            f.write(key_pem)
        ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(cadata=trust.decode())
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # (every CA file certificate an anchor, as in Go's pools)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    # no session resumption: a resumed connection has no verified chain to tell whose CA anchors its
    # client certificate (verified_chain); client-go keeps no session cache, so it resumes none anyway
    ctx.options |= ssl.OP_NO_TICKET
    ctx.num_tickets = 0
    return ctx
