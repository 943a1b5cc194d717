"""Forwarding to extension API servers (kube-aggregator's handler_proxy.go).

The APIService's Service is resolved to one ready endpoint of its
EndpointSlices; the request goes there over HTTPS with the same path, query
and body, authenticated by the front-proxy client certificate, and the
authenticated user travels in the request-header identity headers
(X-Remote-User, one X-Remote-Group per group, X-Remote-Extra-<key>,
X-Remote-Uid), replacing any the client sent. An upgrade request (WebSocket,
SPDY) goes the way of the proxy subresources' (streaming.proxy.upgrade): the
same identity headers, the connection to the extension server spliced to the
client's once it answers 101.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import random
import socket
import ssl
from contextvars import ContextVar
from urllib.parse import quote

import aiohttp
from aiohttp import hdrs, web

from .. import expect
from ..apf import DELEGATED, PF_HEADERS
from ..audit import NO_CACHE
from ..streaming.proxy import DialError, upgrade
from ...machinery.errors import APIError
from ...machinery.hostport import join_host_port

log = logging.getLogger(__name__)

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
               "transfer-encoding", "upgrade", "content-length", "host"}
#: a backend's headers not relayed: its Content-Length is (UpgradeAwareHandler's), its body relayed
#: unchanged (never decompressed: the session's auto_decompress is off), so the answer is not chunked
_RESPONSE_DROPPED = _HOP_BY_HOP - {"content-length"}
_IDENTITY_PREFIXES = ("x-remote-", "impersonate-")
#: the most bytes of a client's body copied to the backend at a time
_CHUNK = 64 * 1024
#: how long the upgrade path waits for the extension server's TCP and TLS handshakes
_DIAL_TIMEOUT = 5.0
#: OpenSSL's verify codes for a chain that ends at no trusted CA (Go's UnknownAuthorityError)
_UNKNOWN_AUTHORITY = frozenset((18, 19, 20, 21))


class ResolveError(Exception):
    """Why a Service has no endpoint to send to (the availability reason and message)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def resolve_endpoint(client, namespace: str, name: str, port: int) -> tuple[str, int]:
    """(address, port) of a ready endpoint of Service `namespace/name`'s port `port`."""
    try:
        svc = await client.resource("", "v1", "services").get(name, namespace)
    except APIError as e:
        if e.code == 404:
            raise ResolveError("ServiceNotFound", f'service/{name} in "{namespace}" is not present') from None
        raise
    sport = next((p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("port") == port), None)
    if sport is None:
        raise ResolveError("ServicePortError", f'service/{name} in "{namespace}" is not listening on port {port}')
    slices, _ = await client.resource("discovery.k8s.io", "v1", "endpointslices").list(
        namespace, label_selector=f"kubernetes.io/service-name={name}")
    if not slices:
        raise ResolveError("EndpointsNotFound", f'cannot find endpointslices for service/{name} in "{namespace}"')
    candidates = []
    for s in slices:
        ports = [p.get("port") for p in s.get("ports") or [] if (p.get("name") or "") == (sport.get("name") or "")]
        for ep in s.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            candidates += [(addr, p) for addr in ep.get("addresses") or [] for p in ports if p]
    if not candidates:
        raise ResolveError("MissingEndpoints", f'endpoints for service/{name} in "{namespace}" have no addresses '
                                               f'with port name "{sport.get("name") or ""}"')
    return random.choice(candidates)


def go_dial_error(host: str, e: BaseException) -> str:
    """What Go's transport says of a connection to `host` (address:port) that could not be made:
    net.Dial's error, or crypto/tls's after it, as the aggregator's responder and the availability
    check pass it on. A connection the server closed before answering is Go's EOF."""
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        e = e.certificate_error
    elif isinstance(e, aiohttp.ClientConnectorError) and not isinstance(e, ssl.SSLError):
        e = e.os_error
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return "EOF"
    if isinstance(e, ConnectionRefusedError):
        return f"dial tcp {host}: connect: connection refused"
    if isinstance(e, (TimeoutError, aiohttp.ServerTimeoutError)):
        return f"dial tcp {host}: i/o timeout"
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_code in _UNKNOWN_AUTHORITY:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"tls: failed to verify certificate: x509: {e.verify_message}"
    if isinstance(e, OSError) and not isinstance(e, ssl.SSLError) and e.errno:
        return f"dial tcp {host}: connect: {os.strerror(e.errno).lower()}"
    return str(e) or type(e).__name__


def proxy_error(message: str, status: int = 503) -> web.Response:
    """handler_proxy.go's proxyError and responder.Error: net/http's http.Error, the text and a newline."""
    return web.Response(status=status, text=f"{message}\n", headers={"X-Content-Type-Options": "nosniff"})


def tls_context(spec: dict, client_cert: str, client_key: str) -> ssl.SSLContext:
    """Verify the extension server with the APIService's caBundle (or not at all
    with insecureSkipTLSVerify); present the front-proxy client certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if spec.get("insecureSkipTLSVerify"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif spec.get("caBundle"):
        ctx.load_verify_locations(cadata=base64.b64decode(spec["caBundle"]).decode())
    ctx.load_cert_chain(client_cert, client_key)
    return ctx


def _extra_key(key: str) -> str:
    """headerKeyEscape: percent-encode what may not appear in a header name, and '%'."""
    return quote(key, safe="!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def identity_headers(user) -> list[tuple[str, str]]:
    headers = [("X-Remote-User", user.name)]
    headers += [("X-Remote-Group", g) for g in user.groups]
    for key, values in (getattr(user, "extra", None) or {}).items():
        headers += [(f"X-Remote-Extra-{_extra_key(key)}", v) for v in values]
    if getattr(user, "uid", ""):
        headers.append(("X-Remote-Uid", user.uid))
    return headers


#: the client request whose answer `forward` is fetching: where the extension server's interim answers go
_RELAY_TO: ContextVar[web.Request | None] = ContextVar("nanokube.aggregated_request", default=None)


class InterimRelayed(aiohttp.ClientResponse):
    """An extension server's answer whose informational answers before it (1xx but 101: 100 Continue,
    102 Processing, 103 Early Hints) go on to the client as they come, as httputil.ReverseProxy's
    Got1xxResponse writes each (aiohttp's own response would skip them)."""

    async def start(self, connection) -> aiohttp.ClientResponse:
        client, protocol = _RELAY_TO.get(), connection.protocol
        if client is None or protocol is None:
            return await super().start(connection)
        read = protocol.read

        async def relaying():
            message, payload = await read()
            if 100 <= message.code < 200 and message.code != 101:
                await expect.informational(client, message.code, message.headers)
            return message, payload
        protocol.read = relaying
        try:
            return await super().start(connection)
        finally:
            del protocol.read


class ExpectForwarded(aiohttp.ClientRequest):
    """A request to an extension server as the Go transport of kube-apiserver's proxy sends it (its
    ExpectContinueTimeout is 0): the client's `Expect: 100-continue` goes along, as
    httputil.ReverseProxy keeps it, but the body follows the head at once instead of waiting for the
    backend's 100 Continue (a backend that sends none would never get it); the backend's interim
    answers are relayed (InterimRelayed)."""

    def update_expect_continue(self, expect: bool = False) -> None:
        """No wait for a 100 Continue, whatever the headers say."""


async def _body(request: web.Request):
    """The client's body as the backend connection takes it in: the 100 Continue the client may wait
    for goes out on its first read, as net/http's does when the reverse proxy's transport starts
    copying the body, so a backend that cannot be reached is answered without the body."""
    await expect.continued(request)
    async for chunk in request.content.iter_chunked(_CHUNK):
        yield chunk


async def forward(session: aiohttp.ClientSession, request: web.Request, base: str, server_name: str,
                  ctx: ssl.SSLContext, user) -> web.StreamResponse:
    """Send `request` to `base` (https://host:port), its body streamed with the length it came with
    (`session` makes ExpectForwarded requests), and stream the answer back. The request's deadline
    is the server's (timeout.within), as upstream's proxy runs inside its timeout filter."""
    headers = [(k, v) for k, v in request.headers.items()
               if k.lower() not in _HOP_BY_HOP and k.lower() != "authorization"
               and not k.lower().startswith(_IDENTITY_PREFIXES)]
    headers += identity_headers(user)
    body = None
    if request.body_exists:
        body = _body(request)
        if request.content_length is not None:
            headers.append(("Content-Length", str(request.content_length)))
    if (delegated := request.get(DELEGATED)) is not None:  # RequestDelegated: a watch lets its APF seat go
        delegated()
    relaying = _RELAY_TO.set(request)
    try:
        upstream = await session.request(request.method, base + request.rel_url.raw_path_qs, headers=headers,
                                         data=body, ssl=ctx, server_hostname=server_name, allow_redirects=False)
    except (aiohttp.ClientError, OSError, TimeoutError) as e:  # the reverse proxy's ErrorHandler: the responder's 503
        return proxy_error(go_dial_error(base.removeprefix("https://"), e))
    finally:
        _RELAY_TO.reset(relaying)
    try:
        # the PF filter's headers first, as it set them before the proxy added the backend's
        resp = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=request.get(PF_HEADERS))
        resp.headers.add(hdrs.CACHE_CONTROL, NO_CACHE)  # (the backend's own, if any, after it)
        for k, v in upstream.headers.items():
            if k.lower() not in _RESPONSE_DROPPED:
                resp.headers.add(k, v)
        await resp.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
        except aiohttp.ClientPayloadError as e:
            # ReverseProxy's copyResponse: the head went out, so the error is logged and the client's
            # connection cut (panic(http.ErrAbortHandler)), its body short of the length it was told
            log.warning("httputil: ReverseProxy read error during body copy: %s", e)
            if request.transport is not None:
                request.transport.close()
            return resp
        await resp.write_eof()
        return resp
    finally:
        upstream.release()


class ExtensionServer:
    """An endpoint of an APIService's Service as the upgrade path dials it: TLS with the APIService's
    context (its CA, the front-proxy client certificate), from `socket_factory` where the API server
    reaches Services through one (netns.dialer), as the proxy's transport does."""

    def __init__(self, address: str, port: int, ctx: ssl.SSLContext, server_name: str, socket_factory=None):
        self.address, self.port, self.ctx, self.server_name = address, port, ctx, server_name
        self.socket_factory = socket_factory

    @property
    def host(self) -> str:
        return join_host_port(self.address, self.port)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(_DIAL_TIMEOUT):
                if self.socket_factory is None:
                    return await asyncio.open_connection(self.address, self.port, ssl=self.ctx,
                                                         server_hostname=self.server_name)
                family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
                sock = self.socket_factory((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                                            (self.address, self.port)))
                try:
                    sock.setblocking(False)
                    await asyncio.get_running_loop().sock_connect(sock, (self.address, self.port))
                    return await asyncio.open_connection(sock=sock, ssl=self.ctx, server_hostname=self.server_name)
                except BaseException:
                    sock.close()
                    raise
        except (ssl.SSLError, OSError) as e:
            raise DialError(go_dial_error(self.host, e)) from None


async def forward_upgrade(request: web.Request, backend: ExtensionServer, user) -> web.StreamResponse:
    """An upgrade request to an extension server (handler_proxy.go sets the identity headers on it
    before the UpgradeAwareHandler dials); what fails before the 101 is the aggregator responder's
    503 with the error's text."""
    try:
        return await upgrade(request, backend, request.rel_url.raw_path_qs, identity_headers(user))
    except APIError as e:
        return proxy_error(e.message)
