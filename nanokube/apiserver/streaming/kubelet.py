"""kube-apiserver's kubelet client (pkg/kubelet/client, the node registry's ResourceLocation and the
pod streaming and log locations): a node's kubelet is reached at the first of its status.addresses
in --kubelet-preferred-address-types' order (none of them: upstream's NoMatchError) and its
daemonEndpoints.kubeletEndpoint.Port, over TLS with the API server's kubelet client certificate
(--kubelet-client-certificate/--kubelet-client-key), which the kubelet authenticates by its client
CA and authorizes with a SubjectAccessReview. The files are read again when they change, and the
connections made with the old certificate closed, as client-go's ReloadTLSFiles does. The
kubelet's serving certificate is verified, chain and then the dialled host against its SANs, only
when a CA is given (--kubelet-certificate-authority), and never for a pods/log request that sets
insecureSkipTLSVerifyBackend; a failure reads as Go's crypto/tls and x509 words. A node an
in-process agent runs is answered by that agent's KubeletServer in place of the dial: its
addresses are simulated ones that nothing listens on."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import ssl
import weakref
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote, urlencode

from aiohttp import web

from ...clock import REAL, Clock
from ...machinery import errors
from ...machinery.hostport import join_host_port
from ...machinery.nodeaddresses import PREFERRED_ADDRESS_TYPES
from ..audit import PROXIED
from .proxy import DialError, _body, _read_head, forward, relayed, upgrade

#: the kubelet's port when the Node names none (ports.KubeletPort)
KUBELET_PORT = 10250
#: how long a dial may take (the kubelet client transport's dial timeout)
DIAL_TIMEOUT = 30.0
#: the streaming paths by subresource (the kubelet's /exec, /attach, /portForward)
_STREAM_PATHS = {"exec": "exec", "attach": "attach", "portforward": "portForward"}

log = logging.getLogger(__name__)


def location(node: dict, preferred: tuple[str, ...] = PREFERRED_ADDRESS_TYPES) -> tuple[str, int]:
    """(host, port) of a Node's kubelet (GetPreferredNodeAddress): the first address of the first
    preferred type it has, else a 500 naming the addresses it has; the kubelet endpoint's port, else
    10250."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or ()
    host = next((a["address"] for t in preferred for a in addresses if a.get("type") == t and a.get("address")), None)
    if host is None:  # Go's %v of the []NodeAddress
        known = " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses)
        raise errors.APIError(500, "", f"no preferred addresses found; known addresses: [{known}]")
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or KUBELET_PORT
    return host, int(port)


#: OpenSSL's verify codes for a chain that ends at no trusted root (unable to get the issuer, locally
#: or at all; self-signed, alone or in the chain; unable to verify the leaf), which Go calls one thing
_UNKNOWN_AUTHORITY = frozenset((2, 18, 19, 20, 21))
#: expired, not yet valid
_VALIDITY = frozenset((9, 10))
#: the certificate's purpose is not serverAuth
_PURPOSE = 26


def _x509_error(e: ssl.SSLCertVerificationError) -> str:
    """A failed chain in Go's x509 words."""
    if e.verify_code in _UNKNOWN_AUTHORITY:
        return "x509: certificate signed by unknown authority"
    if e.verify_code in _VALIDITY:
        return "x509: certificate has expired or is not yet valid"
    if e.verify_code == _PURPOSE:
        return "x509: certificate specifies an incompatible key usage"
    return f"x509: {e.verify_message or e.reason}"


#: OpenSSL's names of the alerts whose Go names differ
_ALERTS = {"UNKNOWN_CA": "unknown certificate authority", "BAD_CERTIFICATE": "bad certificate"}


def _tls_error(e: ssl.SSLError) -> str:
    """A failed handshake in crypto/tls's words: an alert the kubelet sent is `remote error: tls: <alert>`."""
    reason = e.reason or ""
    for prefix in ("SSLV3_ALERT_", "TLSV1_ALERT_", "TLSV13_ALERT_"):
        if reason.startswith(prefix):
            alert = reason[len(prefix):]
            return f"remote error: tls: {_ALERTS.get(alert, alert.lower().replace('_', ' '))}"
    return f"tls: {reason.lower().replace('_', ' ') or e}"


def _host_error(peer: dict, host: str) -> str | None:
    """Go's HostnameError for a verified certificate that does not name `host`, or None: an IP is
    matched against the IP SANs, a name against the DNS SANs (a `*.` one covering one label)."""
    sans = peer.get("subjectAltName") or ()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        ips = [ipaddress.ip_address(value.strip()) for kind, value in sans if kind == "IP Address"]
        if ip in ips:
            return None
        if not ips:
            return f"x509: cannot validate certificate for {host} because it doesn't contain any IP SANs"
        valid = ", ".join(map(str, ips))
    else:
        names = [value for kind, value in sans if kind == "DNS"]
        wanted = host.lower().rstrip(".")
        if any(n.lower() == wanted or (n.startswith("*.") and "." in wanted
                                       and wanted.split(".", 1)[1] == n[2:].lower()) for n in names):
            return None
        valid = ", ".join(names)
    if not valid:
        return f"x509: certificate is not valid for any names, but wanted to match {host}"
    return f"x509: certificate is valid for {valid}, not {host}"


#: NewGenericServerResponse's reason and message by the kubelet's code (None: the kubelet's own text)
_ANSWERS = {401: ("Unauthorized", "the server has asked for the client to provide credentials"), 403: ("Forbidden", None),
            404: ("NotFound", "the server could not find the requested resource"),
            405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
            409: ("Conflict", "the server reported a conflict"),
            422: ("Invalid", "the server rejected our request due to an error in our request"),
            429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
            503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
            504: ("Timeout", "the server was unable to return a response in the time allotted, but may still be "
                             "processing the request")}


def _refused(status: int, text: str, pod: str) -> errors.APIError:
    """GenericHttpResponseChecker of pods/log: the kubelet's 500 an internal error and its 400 a bad
    request, each of its text; any other code NewGenericServerResponse's, naming `pods/log <pod>`
    (a 403's text kept: `Forbidden (user=..., ...) ( pods/log <pod>)`)."""
    if status == 500:
        return errors.internal(text)
    if status == 400:
        return errors.bad_request(text)
    reason, message = _ANSWERS.get(status) or (
        ("InternalError", f"an error on the server ({json.dumps(text)}) has prevented the request from succeeding")
        if status > 500 else ("", f"the server responded with the status code {status} but did not return more information"))
    return errors.APIError(status, reason, f"{message or text} ( pods/log {pod})", {"name": pod, "kind": "pods/log"})


class KubeletConnection:
    """One kubelet as the proxy dials it: `host` and `connect()`, as proxy.Backend's. `opened` is
    told of each connection made (Kubelets closes them when its client certificate changes)."""

    def __init__(self, address: str, port: int, tls: ssl.SSLContext, opened: Callable[[asyncio.StreamWriter], None]):
        self.address, self.port, self.tls, self.opened = address, port, tls, opened

    @property
    def host(self) -> str:
        return join_host_port(self.address, self.port)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.address, self.port, ssl=self.tls),
                                                    DIAL_TIMEOUT)
        except ssl.SSLCertVerificationError as e:
            raise DialError(f"tls: failed to verify certificate: {_x509_error(e)}") from None
        except ssl.SSLError as e:
            raise DialError(_tls_error(e)) from None
        except ConnectionResetError as e:
            if e.errno is None:  # the kubelet hung up in the handshake
                raise DialError("EOF") from None
            raise DialError(f"dial tcp {self.host}: connect: {os.strerror(e.errno).lower()}") from None
        except (OSError, TimeoutError) as e:
            why = "i/o timeout" if isinstance(e, TimeoutError) else (os.strerror(e.errno) if e.errno else str(e)).lower()
            raise DialError(f"dial tcp {self.host}: connect: {why}") from None
        if self.tls.verify_mode == ssl.CERT_REQUIRED:  # the chain verified; now the name dialled
            why = _host_error(writer.get_extra_info("peercert") or {}, self.address)
            if why is not None:
                writer.close()
                raise DialError(f"tls: failed to verify certificate: {why}")
        self.opened(writer)
        return reader, writer

    async def get(self, path: str) -> tuple[int, AsyncIterator[bytes]]:
        """A GET of `path` (with its query): the status and the body as it arrives (the connection
        closed at its end)."""
        reader, writer = await self.connect()
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            status, _, headers = await _read_head(reader)
        except BaseException:
            writer.close()
            raise

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in _body(reader, headers):
                    yield chunk
            finally:
                writer.close()

        return status, body()


def client_context(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext:
    """A client context presenting the client certificate, verifying the kubelet's chain by
    `ca_file` (the host is checked after the handshake, for Go's words) or, with none, taking any:
    built without the system's CA bundle, which would verify nothing here and cost every API
    server 25 ms of CPU at start."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    if ca_file:
        tls.load_verify_locations(cafile=ca_file)
    else:
        tls.verify_mode = ssl.CERT_NONE
    if cert_file:
        tls.load_cert_chain(cert_file, key_file)
    return tls


#: how often a dial looks at the client certificate's files for a change: upstream's loaders poll a
#: minute apart (client-go's five), this checks the files' metadata, a second apart at most
CHECK_EVERY = 1.0


def _stamp(*files: str) -> tuple:
    """What tells a rewritten file without reading it: each one's inode, size and modification time
    (none when one is missing)."""
    try:
        return tuple((st.st_ino, st.st_size, st.st_mtime_ns) for st in map(os.stat, files))
    except OSError:
        return ()


class Kubelets:
    """How the API server reaches node `name`'s kubelet: `in_process` lookups (a node agent's
    KubeletServer, None: not theirs), else a TLS connection to the Node's preferred address."""

    def __init__(self, get_node: Callable[[str], dict], get_pod: Callable[[str, str], dict],
                 in_process: list[Callable[[str], object | None]], clock: Clock = REAL):
        self.get_node, self.get_pod, self.in_process, self.clock = get_node, get_pod, in_process, clock
        #: --kubelet-preferred-address-types
        self.preferred = PREFERRED_ADDRESS_TYPES
        self.cert_file = self.key_file = self.ca_file = ""
        #: the client certificate's and key's files as last read, and when they were last looked at
        self._stamp: tuple = ()
        self._checked = float("-inf")
        self.tls = client_context("", "", "")
        #: the context that takes any serving certificate, made when first asked for (`dial`)
        self._insecure: ssl.SSLContext | None = self.tls
        #: the connections open to kubelets, closed when the client certificate changes
        self._open: weakref.WeakSet[asyncio.StreamWriter] = weakref.WeakSet()

    def use(self, cert_file: str, key_file: str, ca_file: str = "") -> None:
        """--kubelet-client-certificate/-key and --kubelet-certificate-authority: read now (an
        OSError or ssl.SSLError for files that do not load)."""
        stamp = _stamp(cert_file, key_file)  # (before the read: a write after it is seen at the next dial)
        tls = client_context(ca_file, cert_file, key_file)
        self.cert_file, self.key_file, self.ca_file, self.tls, self._stamp = cert_file, key_file, ca_file, tls, stamp
        self._insecure = None if ca_file else tls

    def _reload(self) -> None:
        """A client certificate or key rewritten since it was read is read again, and the connections
        that presented the old one are closed (client-go's dynamic client certificate; a pair that
        does not load yet, half written, leaves the old one in use), looked at CHECK_EVERY at most."""
        now = self.clock.monotonic()
        if not self.cert_file or now - self._checked < CHECK_EVERY:
            return
        self._checked = now
        if _stamp(self.cert_file, self.key_file) in (self._stamp, ()):
            return
        try:
            self.use(self.cert_file, self.key_file, self.ca_file)
        except (OSError, ssl.SSLError) as e:
            log.warning("reloading the kubelet client certificate %s failed: %s", self.cert_file, e)
            return
        log.info("the kubelet client certificate %s changed: closing %d kubelet connections", self.cert_file,
                 len(self._open))
        for writer in list(self._open):
            writer.close()

    def local(self, name: str):
        """The in-process kubelet endpoints of `name`, None when no agent here runs it."""
        return next((k for lookup in self.in_process if (k := lookup(name)) is not None), None)

    def location(self, node: dict) -> tuple[str, int]:
        return location(node, self.preferred)

    def dial(self, name: str, verify: bool = True) -> KubeletConnection:
        """The connection to `name`'s kubelet at its Node's address (the Node's 404 when it has none);
        not `verify`: its serving certificate taken unverified (insecureSkipTLSVerifyBackend)."""
        self._reload()
        if not verify and self._insecure is None:
            self._insecure = client_context("", self.cert_file, self.key_file)
        return KubeletConnection(*self.location(self.get_node(name)), self.tls if verify else self._insecure,
                                 self._open.add)

    async def serve(self, request: web.Request, name: str, target: str) -> web.StreamResponse:
        """nodes/proxy's answer from the kubelet's `target` path."""
        local = self.local(name)
        if local is not None:
            request[PROXIED] = True  # (a stream it prepares itself gets NO_CACHE before its own Cache-Control)
            return await relayed(request, await local.serve(request, target or "/"))
        return await forward(request, self.dial(name), target)

    async def stream(self, request: web.Request, pod: dict, sub: str, container: str) -> web.StreamResponse:
        """pods/exec, attach or portforward of a pod on a node no agent here runs: the request
        upgraded at the kubelet's streaming path, the two connections then joined."""
        md = pod["metadata"]
        path = f"/{_STREAM_PATHS[sub]}/{quote(md['namespace'])}/{quote(md['name'])}"
        if sub != "portforward":
            path += f"/{quote(container)}"
        query = request.rel_url.raw_query_string
        return await upgrade(request, self.dial(pod["spec"]["nodeName"]), path + (f"?{query}" if query else ""))

    async def read_log(self, namespace: str, name: str, container: str,
                       query: dict[str, str]) -> bytes | AsyncIterator[bytes] | None:
        """Subresources.kubelet_log: for a pod on a node no agent here runs, the kubelet's
        /containerLogs, a stream when following. A request that does not reach it is a 500 with
        Go's url.Error (`Get "https://...": ...`), as LocationStreamer's error reaches upstream's
        responder unwrapped; one the kubelet refuses, GenericHttpResponseChecker's error."""
        node = self.get_pod(namespace, name)["spec"]["nodeName"]
        if self.local(node) is not None:
            return None
        query = dict(query)
        verify = query.pop("insecureSkipTLSVerifyBackend", "") != "true"
        path = f"/containerLogs/{quote(namespace)}/{quote(name)}/{quote(container)}"
        path += f"?{urlencode(query)}" if query else ""
        kubelet = self.dial(node, verify)
        try:
            status, body = await kubelet.get(path)
        except DialError as e:
            raise errors.APIError(500, "", f'Get "https://{kubelet.host}{path}": {e}') from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            raise errors.APIError(500, "", f'Get "https://{kubelet.host}{path}": EOF') from None
        if not 200 <= status <= 206:
            raise _refused(status, b"".join([c async for c in body]).decode("utf-8", "replace"), name)
        if query.get("follow") == "true":
            return body
        return b"".join([c async for c in body])
