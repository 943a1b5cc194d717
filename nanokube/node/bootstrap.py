"""The kubelet's TLS bootstrapping and client certificate rotation (kubelet/certificate/bootstrap;
rotation is --rotate-certificates alone: its RotateKubeletClientCertificate gate, GA in 1.19, was
removed in 1.21, and 1.37 refuses it as unrecognized). A node that has only a bootstrap kubeconfig (a bootstrap token)
makes a key, asks for a client certificate for system:node:<name> in system:nodes with a
CertificateSigningRequest to the kube-apiserver-client-kubelet signer, waits for it to be approved
(kube-controller-manager's csrapproving approves it when RBAC lets the requester create
certificatesigningrequests/nodeclient) and issued, and writes the certificate and key to
`<cert dir>/kubelet-client-current.pem` and a kubeconfig naming that file, which it uses from then
on; a kubeconfig whose certificate is still valid is used as it is. With rotation on, a new
certificate is asked for, as the node itself (selfnodeclient), once 70 to 90% of the current one's
life has passed, and put in place of the old one: the file, and the TLS context, whose connections
are then closed so that every one presents the new certificate. serverTLSBootstrap
(--rotate-server-certificates) asks as the node for a serving certificate of the kubelet-serving
signer, the node's addresses its SANs (addressesToHostnamesAndIPs), which kube-controller-manager
never approves on its own: an admin does (`kubectl certificate approve`); it is written to
`<cert dir>/kubelet-server-current.pem`, served from then on and renewed the same way; a request
left unanswered 15 minutes is made anew."""

from __future__ import annotations

import base64
import ipaddress
import logging
import os
import random
import ssl
from collections.abc import Awaitable, Callable

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ..client import kubeconfig
from ..clock import REAL, Clock
from ..machinery.backoff import doubling
from ..pki.csr import NODE_PREFIX, NODES_GROUP
from ..pki.keys import private_pem

log = logging.getLogger(__name__)

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
#: a kubelet's client usages with an ECDSA key (an RSA key would add key encipherment)
USAGES = ["digital signature", "client auth"]
CURRENT = "kubelet-client-current.pem"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"
#: a kubelet's serving usages with an ECDSA key
SERVING_USAGES = ["digital signature", "server auth"]
SERVING_CURRENT = "kubelet-server-current.pem"
#: how long a serving request may wait for its approval before another is made (certificateWaitTimeout)
SERVING_WAIT = 900.0
#: how often a pending request is looked at again
POLL = 0.5


class BootstrapError(Exception):
    """The certificate cannot be had: the request was denied or failed."""


def _certificate(pem: bytes) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def still_valid(path: str, now: float) -> bool:
    """Whether the kubeconfig at `path` exists and its client certificate is valid at `now`
    (isClientConfigStillValid): then no bootstrap is needed."""
    try:
        cfg = kubeconfig.read_file(path)
        user = (cfg.get("users") or [{}])[0].get("user") or {}
        if user.get("client-certificate-data"):
            pem = base64.b64decode(user["client-certificate-data"])
        else:
            with open(os.path.join(os.path.dirname(path), user.get("client-certificate") or ""), "rb") as f:
                pem = f.read()
    except (OSError, ValueError, IndexError):  # (a kubeconfig that does not decode: KubeconfigError)
        return False
    cert = _certificate(pem)
    return cert is not None and cert.not_valid_before_utc.timestamp() <= now <= cert.not_valid_after_utc.timestamp()


def serving_names(addresses: list[dict]) -> tuple[list[str], list[str]]:
    """addressesToHostnamesAndIPs: a serving certificate's DNS and IP names, each set sorted, from
    the node's addresses (a Hostname that is an IP among the IPs)."""
    dns, ips = set(), set()
    for a in addresses:
        value, kind = a.get("address") or "", a.get("type")
        try:
            ip = ipaddress.ip_address(value)
        except ValueError:
            ip = None
        if kind in ("InternalIP", "ExternalIP", "Hostname") and ip is not None:
            ips.add(str(ip))
        elif kind in ("Hostname", "InternalDNS", "ExternalDNS") and value:
            dns.add(value)
    return sorted(dns), sorted(ips)


def _request(node_name: str, key, addresses: list[dict] | None = None) -> dict:
    """A client certificate's request, or with `addresses` a serving certificate's."""
    b = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
        x509.NameAttribute(NameOID.COMMON_NAME, NODE_PREFIX + node_name)]))
    if addresses is not None:
        dns, ips = serving_names(addresses)
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]), critical=False)
    csr = b.sign(key, hashes.SHA256())
    signer, usages, name = (CLIENT_SIGNER, USAGES, "node-csr-") if addresses is None else \
        (SERVING_SIGNER, SERVING_USAGES, "csr-")
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": name},
            "spec": {"request": base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode(),
                     "signerName": signer, "usages": usages}}


async def request_certificate(client, node_name: str, clock: Clock = REAL, addresses: list[dict] | None = None,
                              wait: float | None = None) -> bytes:
    """A new key and its issued certificate, as one PEM (certificate, then key): a client
    certificate's, or with `addresses` a serving certificate's. BootstrapError when it is denied or
    failed, or not issued within `wait` seconds."""
    key = ec.generate_private_key(ec.SECP256R1())
    csrs = client.resource("certificates.k8s.io", "v1", "certificatesigningrequests")
    name = (await csrs.create(_request(node_name, key, addresses)))["metadata"]["name"]
    log.info("waiting for certificate signing request %s to be approved and issued", name)
    until = None if wait is None else clock.now() + wait
    while until is None or clock.now() < until:
        status = (await csrs.get(name)).get("status") or {}
        for c in status.get("conditions") or ():
            if c.get("type") in ("Denied", "Failed"):
                raise BootstrapError(f"certificate signing request {name} is {c['type'].lower()}, reason: "
                                     f"{c.get('reason', '')}, message: {c.get('message', '')}")
        if status.get("certificate"):
            return base64.b64decode(status["certificate"]) + private_pem(key)
        await clock.sleep(POLL)
    raise BootstrapError(f"certificate signing request {name} was not issued within {wait:g} s")


def write_pem(cert_dir: str, pem: bytes, name: str = CURRENT) -> str:
    """The certificate and key to `<cert_dir>/<name>` (replaced at once, 0600)."""
    os.makedirs(cert_dir, mode=0o700, exist_ok=True)
    path = os.path.join(cert_dir, name)
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(pem)
    os.replace(tmp, path)
    return path


def write_kubeconfig(path: str, server: str, ca: bytes, pem_path: str) -> None:
    """The kubeconfig the kubelet writes once bootstrapped (writeKubeconfigFromBootstrapping's
    names), its user the PEM file holding certificate and key."""
    cluster = {"server": server, **({"certificate-authority-data": base64.b64encode(ca).decode()} if ca else {})}
    cfg = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "default-cluster", "cluster": cluster}],
           "users": [{"name": "default-auth", "user": {"client-certificate": pem_path, "client-key": pem_path}}],
           "contexts": [{"name": "default-context", "context": {"cluster": "default-cluster", "user": "default-auth",
                                                                "namespace": "default"}}],
           "current-context": "default-context"}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    os.replace(tmp, path)


async def bootstrap(kubeconfig_path: str, bootstrap_path: str, cert_dir: str, node_name: str, client_factory,
                    clock: Clock = REAL) -> None:
    """LoadClientCert: nothing when `kubeconfig_path` holds a valid certificate; else one asked for
    with the bootstrap kubeconfig's credentials (`client_factory(credentials)` makes the started
    client; it is closed here) and written with a kubeconfig at `kubeconfig_path`."""
    if still_valid(kubeconfig_path, clock.now()):
        log.info("the kubeconfig %s holds a valid client certificate: no bootstrap needed", kubeconfig_path)
        return
    creds = kubeconfig.load(bootstrap_path, env={})
    client = await client_factory(creds)
    try:
        pem = await request_certificate(client, node_name, clock)
    finally:
        await client.close()
    write_kubeconfig(kubeconfig_path, creds.server, creds.ca, write_pem(cert_dir, pem))
    log.info("bootstrapped: wrote the client certificate to %s and the kubeconfig %s", cert_dir, kubeconfig_path)


def rotation_deadline(pem: bytes) -> float:
    """When to ask for the next certificate: a random point 70 to 90% into this one's life
    (the certificate manager's jittered deadline); 0 (now) for no certificate."""
    cert = _certificate(pem)
    if cert is None:
        return 0.0
    start, end = cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    return start + (end - start) * random.uniform(0.7, 0.9)


#: the certificate manager's backoff after a failed rotation: 2 s doubling, jittered by 10%, to 32 s
BACKOFF, BACKOFF_LIMIT = 2.0, 32.0


def stored(pem_path: str, what: str) -> bytes | None:
    """The certificate and key at `pem_path` when both load as a pair; None without the file or,
    logged, when they do not (the certificate manager treats a store it cannot load as having no
    certificate, and asks for a new one)."""
    try:
        with open(pem_path, "rb") as f:
            pem = f.read()
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(pem_path)
    except FileNotFoundError:
        return None
    except (OSError, ssl.SSLError) as e:
        log.warning("the stored %s certificate %s does not load, asking for a new one: %s", what, pem_path, e)
        return None
    return pem


async def _renew(pem_path: str, pem: bytes | None, ask: Callable[[], Awaitable[bytes]], use: Callable[[str], None],
                 what: str, clock: Clock) -> None:
    """Forever: at the deadline of the certificate `pem` (at once for None), `ask()` for a new one,
    write it over `pem_path` and `use(pem_path)`; whatever fails is tried again after a backoff
    (BACKOFF doubling to BACKOFF_LIMIT)."""
    failures = 0
    while True:
        if not failures:
            await clock.sleep(max(0.0, (rotation_deadline(pem) if pem else 0.0) - clock.now()))
        try:
            pem = await ask()
            write_pem(os.path.dirname(pem_path), pem, os.path.basename(pem_path))
            use(pem_path)
        except Exception as e:  # whatever failed (the server away, a denial, a full disk): tried again later
            delay = doubling(BACKOFF, failures, BACKOFF_LIMIT) * random.uniform(1.0, 1.1)
            failures += 1
            log.warning("rotating the %s certificate failed, trying again in %.0f s: %s", what, delay, e)
            await clock.sleep(delay)
            continue
        failures = 0
        log.info("rotated the %s certificate in %s", what, pem_path)


async def rotate(client, node_name: str, pem_path: str, clock: Clock = REAL) -> None:
    """Forever: at each certificate's deadline, a new one for the node, asked for as the node,
    written over `pem_path` and loaded into the client's TLS context; its connections closed, so
    that those opened next present it."""
    def use(path: str) -> None:
        client.creds.ssl.load_cert_chain(path)
        client.reconnect()

    await _renew(pem_path, stored(pem_path, "client"), lambda: request_certificate(client, node_name, clock), use,
                 "client", clock)


async def rotate_serving(client, node_name: str, addresses: Callable[[], list[dict]], cert_dir: str,
                         use: Callable[[str], None], clock: Clock = REAL) -> None:
    """serverTLSBootstrap, forever: a serving certificate still valid in `cert_dir` is used at once;
    at its deadline (at once without one) a new one is asked for as the node, for `addresses()`,
    and `use(path)` once issued. A node without an IP address asks for none (AllowDNSOnlyNodeCSR off)."""
    path = os.path.join(cert_dir, SERVING_CURRENT)
    pem = stored(path, "serving")
    cert = None if pem is None else _certificate(pem)
    if cert is not None and cert.not_valid_before_utc.timestamp() <= clock.now() <= cert.not_valid_after_utc.timestamp():
        use(path)

    async def ask() -> bytes:
        current = addresses()
        if not serving_names(current)[1]:
            raise BootstrapError("the node has no IP address to ask for a serving certificate for")
        return await request_certificate(client, node_name, clock, current, SERVING_WAIT)

    await _renew(path, pem, ask, use, "serving", clock)
