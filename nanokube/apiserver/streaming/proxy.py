"""pods/proxy, services/proxy and nodes/proxy: kube-apiserver's connect
subresources that forward any HTTP request to a pod's port, a Service's
ready endpoint or a node's kubelet (pkg/registry/core/{pod,service,node}
ResourceLocation, apimachinery's UpgradeAwareHandler and proxy Transport).

kube-apiserver dials the pod's IP itself, and so does this API server for a
pod no agent of its own runs (a joined node's, whose pod network the node
routes); an in-process agent's pod is reached through the agent's
port-forward to the pod's port (what `kubectl port-forward` uses), as the API
server may have no route into the pod networks it simulates. A node's kubelet endpoints
are its agent's in-process server, or the kubelet dialled at the Node's
address (kubelet.py) for a node no agent here runs. What the client sees is upstream's: the
`[scheme:]name[:port]` forms, the request and response headers the reverse
proxy sets and strips, HTML links and redirects rewritten under the proxy
path, and a backend that cannot be reached as a 503 ServiceUnavailable
'error trying to reach service: ...'."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ipaddress
import os
import posixpath
import random
import re
import ssl
import zlib
from collections.abc import Callable, Iterable
from html.parser import HTMLParser
from urllib.parse import urlsplit, urlunsplit

from aiohttp import hdrs, web
from multidict import CIMultiDict

from .. import expect
from ...machinery import errors
from ...machinery.hostport import join_host_port
from ...machinery.streaming import NodeStreaming, StreamFailed
from ..audit import NO_CACHE
from ..auth.authorizer import USER
from ..rest import WriteOptions
from ...machinery.httpstream.transports import RawUpgrade, splice

_COPY = 32 * 1024
#: how long a dial of a pod's IP may take (the proxy transport's dialer's 30 s)
DIAL_TIMEOUT = 30.0
#: headers that describe one hop (httputil.ReverseProxy removes them both ways)
_HOP = frozenset(("connection", "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                  "trailer", "transfer-encoding", "upgrade"))
#: the credentials authentication consumed: kube-apiserver deletes them before anything is proxied
_CREDENTIALS = ("authorization", "impersonate-", "x-remote-")
#: CORS answers of the backend, which corsRemovingTransport drops
_CORS = frozenset(("access-control-allow-credentials", "access-control-allow-headers",
                   "access-control-allow-methods", "access-control-allow-origin"))
_VALID_SCHEMES = ("", "http", "https")
_NEWLINE_TO_SPACE = str.maketrans("\r\n", "  ")
#: tag -> attributes holding URLs, which the proxy rewrites in HTML (upstream's atomsToAttrs)
_URL_ATTRS = {
    "a": {"href"}, "applet": {"codebase"}, "area": {"href"}, "audio": {"src"}, "base": {"href"},
    "blockquote": {"cite"}, "body": {"background"}, "button": {"formaction"}, "command": {"icon"},
    "del": {"cite"}, "embed": {"src"}, "form": {"action"}, "frame": {"longdesc", "src"}, "head": {"profile"},
    "html": {"manifest"}, "iframe": {"longdesc", "src"}, "img": {"longdesc", "src", "usemap"},
    "input": {"src", "usemap", "formaction"}, "ins": {"cite"}, "link": {"href"},
    "object": {"classid", "codebase", "data", "usemap"}, "q": {"cite"}, "script": {"src"}, "source": {"src"},
    "video": {"poster", "src"},
}
#: the encodings of an HTML page the proxy rewrites (decode, encode); others pass unchanged.
#: "deflate" is raw DEFLATE, as Go's compress/flate reads and writes it
def _inflate(data: bytes) -> bytes:
    return zlib.decompress(data, -15)


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


_CODECS = {"": (bytes, bytes), "gzip": (gzip.decompress, gzip.compress), "deflate": (_inflate, _deflate)}
#: connect options kind by resource, as admission sees the request
_OPTIONS_KIND = {"pods": "PodProxyOptions", "services": "ServiceProxyOptions", "nodes": "NodeProxyOptions"}


def split_scheme_name_port(id_: str) -> tuple[str, str, str] | None:
    """`name`, `name:port` or `scheme:name:port` (utilnet.SplitSchemeNamePort); None when malformed."""
    parts = id_.split(":")
    if len(parts) > 3:
        return None
    scheme, name, port = parts if len(parts) == 3 else ("", parts[0], parts[1] if len(parts) == 2 else "")
    if not name or scheme not in _VALID_SCHEMES:
        return None
    return scheme, name, port


def _clean(p: str) -> str:
    """Go's path.Clean for a non-empty absolute or relative path."""
    out = posixpath.normpath(p)
    return "/" + out.lstrip("/") if out.startswith("//") else out


def join_preserving_trailing_slash(base: str, sub: str) -> str:
    """net.JoinPreservingTrailingSlash(base, sub)."""
    joined = "/".join(x for x in (base, sub) if x)
    result = _clean(joined) if joined else ""
    last = sub or base
    if last.endswith("/") and not result.endswith("/"):
        result += "/"
    return result


def service_unavailable(message: str) -> errors.APIError:
    return errors.APIError(503, "ServiceUnavailable", message)


def unreachable(why: str) -> errors.APIError:
    """The proxy Transport's answer when its round trip fails."""
    return service_unavailable(f"error trying to reach service: {why}")


class Backend:
    """Where a proxied request goes: a pod's port through its node agent, or its IP without one."""

    def __init__(self, node: NodeStreaming | None, pod: dict, ip: str, port: str, scheme: str):
        self.node, self.pod, self.ip, self.port, self.scheme = node, pod, ip, port, scheme

    @property
    def host(self) -> str:
        """The location's host (net.JoinHostPort)."""
        return join_host_port(self.ip, self.port)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the backend; DialError says why there is none, in Go's words."""
        if not self.port.isdigit() or not 0 < int(self.port) < 65536:
            # Go's transport reads a host whose port is not a number as a host name to look up
            raise DialError(f"dial tcp: lookup {self.ip}:{self.port}: no such host")
        if self.node is None:  # no agent here runs it (a joined node's pod): its IP, as kube-apiserver dials it
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(self.ip, int(self.port)), DIAL_TIMEOUT)
            except TimeoutError:
                raise DialError(f"dial tcp {self.host}: i/o timeout") from None
            except OSError as e:
                why = os.strerror(e.errno).lower() if e.errno else str(e)
                raise DialError(f"dial tcp {self.host}: connect: {why}") from None
        else:
            md = self.pod["metadata"]
            try:
                reader, writer = await self.node.port_forward(md["namespace"], md["name"], md.get("uid", ""),
                                                              int(self.port))
            except (StreamFailed, OSError):
                raise DialError(f"dial tcp {self.host}: connect: connection refused") from None
        if self.scheme == "https":  # the proxy transport does not verify the backend's certificate
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            try:
                await writer.start_tls(ctx, server_hostname=self.ip)
            except (ssl.SSLError, OSError) as e:
                writer.close()
                raise DialError(str(e)) from None
        return reader, writer


class DialError(Exception):
    """The backend cannot be reached (Go's dial error text)."""


class ProxySubresources:
    """Serves the proxy subresources. `node_servers` are the streaming servers' lookups by node name
    (PodStreaming's); `kubelets` are the in-process lookups of a node's kubelet endpoints:
    `await serve(request, path) -> web.StreamResponse` (None: not theirs), other nodes' dialled."""

    def __init__(self, rest, index, node_servers: list[Callable[[str], NodeStreaming | None]]):
        self.rest = rest
        self.index = index
        self.node_servers = node_servers
        self.kubelets: list[Callable[[str], object | None]] = []
        #: how a node's kubelet is reached (kubelet.Kubelets, whose in-process lookups are `kubelets`)
        self.nodes = None

    async def handle(self, request: web.Request, plural: str, namespace: str | None, id_: str,
                     after: list[str], trailing_slash: bool) -> web.StreamResponse:
        """`after`: the decoded path's parts after `proxy`, the path forwarded."""
        if request.method not in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
            raise errors.method_not_allowed()
        sub = _subpath(after, trailing_slash)
        user = request.get(USER)
        if user is not None:
            res = self.index.get("", "v1", plural)
            await self.rest.admit_subresource_create(
                res, "v1", "proxy", {"group": "", "version": "v1", "kind": _OPTIONS_KIND[plural]}, namespace or "",
                id_, {"kind": _OPTIONS_KIND[plural], "apiVersion": "v1", **({"path": sub} if sub else {})},
                WriteOptions(user=user), operation="CONNECT")
        parsed = split_scheme_name_port(id_)
        if parsed is None:
            raise errors.bad_request(f"invalid {plural[:-1]} request \"{id_}\"")
        scheme, name, port = parsed
        if plural == "nodes":
            return await self._node(request, name, port, sub)
        backend = await (self._pod(namespace, name, port, scheme) if plural == "pods"
                         else self._service(namespace, id_, name, port, scheme))
        return await forward(request, backend, join_preserving_trailing_slash("", sub))

    # --- where to ------------------------------------------------------------------------

    def _get(self, plural: str, namespace: str | None, name: str) -> dict:
        return self.rest._entry(self.index.get("", "v1", plural), namespace, name).obj

    def _agent(self, pod: dict) -> NodeStreaming | None:
        node = (pod.get("spec") or {}).get("nodeName")
        for lookup in self.node_servers if node else ():
            server = lookup(node)
            if server is not None:
                return server
        return None

    async def _pod(self, namespace: str, name: str, port: str, scheme: str) -> Backend:
        """pod.ResourceLocation: the first declared container port when none is named; the pod's IP."""
        pod = self._get("pods", namespace, name)
        spec = pod.get("spec") or {}
        if not port:
            port = next((str(c["ports"][0].get("containerPort")) for c in spec.get("containers") or []
                         if c.get("ports")), "")
        ips = (pod.get("status") or {}).get("podIPs") or []
        ip = ips[0].get("ip", "") if ips else ""
        if not _global_unicast(ip):
            raise errors.bad_request("address not allowed")
        # no port at all: the URL's, as Go's transport defaults it for the scheme
        return Backend(self._agent(pod), pod, ip, port or ("443" if scheme == "https" else "80"), scheme)

    async def _service(self, namespace: str, id_: str, name: str, port: str, scheme: str) -> Backend:
        """The Service storage's ResourceLocation: a port number names the service port; a ready
        endpoint (of the primary IP family first) of the EndpointSlices serving that port."""
        svc = self._get("services", namespace, name)
        spec = svc.get("spec") or {}
        if re.fullmatch(r"[+-]?\d+", port):  # a number (strconv.ParseInt's) names the service port
            declared = next((p for p in spec.get("ports") or [] if p.get("port") == int(port)), None)
            if declared is None:
                raise service_unavailable(f'no service port {int(port)} found for service "{name}"')
            port = declared.get("name", "")
        slices, _ = await self.rest.list(self.index.get("discovery.k8s.io", "v1", "endpointslices"), "v1", namespace,
                                         label_selector=f"kubernetes.io/service-name={name}")
        if not slices:
            raise service_unavailable(f'no endpoints available for service "{name}"')
        families = spec.get("ipFamilies") or []
        random.shuffle(slices)
        if families:
            slices.sort(key=lambda s: s.get("addressType") != families[0])
        for s in slices:
            for p in s.get("ports") or []:
                if p.get("name") is None or p["name"] != port or p.get("port") is None:
                    continue
                endpoints = s.get("endpoints") or []
                offset = random.randrange(len(endpoints)) if endpoints else 0
                for i in range(len(endpoints)):
                    ep = endpoints[(i + offset) % len(endpoints)]
                    if (ep.get("conditions") or {}).get("ready") is False:
                        continue
                    return self._endpoint(ep, str(p["port"]), scheme)
        raise service_unavailable(f'no endpoints available for service "{id_}"')

    def _endpoint(self, ep: dict, port: str, scheme: str) -> Backend:
        ip = (ep.get("addresses") or [""])[0]
        ref = ep.get("targetRef") or {}
        pod = None
        if ref.get("kind") == "Pod":
            with contextlib.suppress(errors.APIError):
                pod = self._get("pods", ref.get("namespace"), ref.get("name", ""))
        if pod is None or ip not in {i.get("ip") for i in (pod.get("status") or {}).get("podIPs") or []}:
            return Backend(None, {}, ip, port, scheme)  # not a pod a node agent runs: dialled at its address
        return Backend(self._agent(pod), pod, ip, port, scheme)

    async def _node(self, request: web.Request, name: str, port: str, sub: str) -> web.StreamResponse:
        """node.ResourceLocation: the kubelet's endpoint when no port or the kubelet's is named."""
        host, kubelet_port = self.nodes.location(self._get("nodes", None, name))
        if port and port != str(kubelet_port):
            raise unreachable(f"dial tcp {join_host_port(host, port)}: connect: connection refused")
        target = join_preserving_trailing_slash("", sub)
        if not target and request.method in ("GET", "HEAD"):
            return _redirect_to_slash(request)
        return await self.nodes.serve(request, name, target)


async def relayed(request: web.Request, answer: web.StreamResponse) -> web.StreamResponse:
    """A kubelet's whole answer sent on as a backend's is: as it came. The API server's own answers
    are negotiated (YAML, protobuf, pretty-printed for curl) and gzipped; a proxied one never is."""
    if type(answer) is not web.Response:
        return answer
    headers = CIMultiDict({hdrs.CACHE_CONTROL: NO_CACHE})  # (the kubelet's own, if any, after it)
    headers.extend(answer.headers)
    resp = web.StreamResponse(status=answer.status, reason=answer.reason, headers=headers)
    body = answer.body or b""
    resp.content_length = len(body)
    await resp.prepare(request)
    if request.method != "HEAD":
        await resp.write(body)
    await resp.write_eof()
    return resp


def _global_unicast(ip: str) -> bool:
    try:
        a = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return not (a.is_loopback or a.is_multicast or a.is_unspecified or a.is_link_local
                or (a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255")))


def _subpath(after: list[str], trailing_slash: bool) -> str:
    """The `path` connect option: the path's parts after `proxy`, with a leading slash and the
    request's trailing slash (the connect handler's getRequestOptions)."""
    sub = "/" + "/".join(after) if after else ""
    if trailing_slash and not sub.endswith("/"):
        sub += "/"
    return sub


def _redirect_to_slash(request: web.Request) -> web.StreamResponse:
    """A GET or HEAD of the proxy root without its slash (issue 4958's redirect)."""
    query = f"?{request.rel_url.raw_query_string}" if request.rel_url.raw_query_string else ""
    return web.Response(status=301, headers={"Location": request.rel_url.raw_path + "/" + query})


# --- the reverse proxy ------------------------------------------------------------------------

async def forward(request: web.Request, backend: Backend, target: str) -> web.StreamResponse:
    """UpgradeAwareHandler.ServeHTTP: an upgrade joins the two connections (`upgrade`); otherwise one
    request to `target` on the backend, its answer streamed back with hop-by-hop and CORS headers
    dropped and links rewritten."""
    # the location's path gets the request's trailing slash; the proxy path before it is what links
    # and redirects are rewritten under (defaultProxyTransport's PathPrepend)
    suffix = target + ("/" if request.path.endswith("/") and not target.endswith("/") else "")
    prefix = request.path[:len(request.path) - len(suffix)] if suffix and request.path.endswith(suffix) \
        else request.path
    if is_upgrade(request):
        return await upgrade(request, backend, target)
    target = suffix
    if not target and request.method in ("GET", "HEAD"):
        return _redirect_to_slash(request)
    try:
        reader, writer = await backend.connect()
    except DialError as e:
        raise unreachable(str(e)) from None
    try:
        await _send_request(request, writer, target, prefix)
        try:
            status, reason, headers = await _read_head(reader)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            raise unreachable("EOF") from None  # the backend hung up without an answer
        return await _relay_response(request, reader, status, reason, headers, prefix, backend.host)
    finally:
        writer.close()


def is_upgrade(request: web.Request) -> bool:
    """httpstream.IsUpgradeRequest: a Connection header naming upgrade."""
    return any(t.strip().lower() == "upgrade" for v in request.headers.getall("Connection", [])
               for t in v.split(","))


async def upgrade(request: web.Request, backend: Backend, location: str,
                  identity: Iterable[tuple[str, str]] = ()) -> web.StreamResponse:
    """UpgradeAwareHandler.tryUpgrade: the request as it came (its Connection and Upgrade headers
    too, less the credentials, plus the `identity` headers) to the location, which carries a query
    only where the caller put one; a 101 joins the two connections, an error answer is passed back,
    anything else is refused. Failures here reach the responder unwrapped: a 500 with Go's error
    text. `backend` is anything with `host` and `connect()` (an extension API server's too)."""
    try:
        reader, writer = await backend.connect()
    except DialError as e:
        raise errors.APIError(500, "", f"error dialing backend: {e}") from None
    try:
        lines = [f"{request.method} {location or '/'} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in request.headers.items()
                  if not k.lower().startswith(_CREDENTIALS) and k.lower() != "x-forwarded-for"]
        # net/http writes a newline in a header value as a space: a value cannot add a header
        lines += [f"{k}: {v.translate(_NEWLINE_TO_SPACE).strip()}" for k, v in identity]
        forwarded_for = request.headers.get("X-Forwarded-For")
        lines.append(f"X-Forwarded-For: {forwarded_for + ', ' if forwarded_for else ''}{request.remote or ''}")
        await expect.continued(request)
        body = await request.read() if request.body_exists else b""
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body)
        await writer.drain()
        try:
            status, reason, headers = await _read_head(reader)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            raise errors.APIError(500, "", "EOF") from None
        if status != 101 and status < 400:
            raise errors.APIError(500, "", f"invalid upgrade response: status code {status}")
        if status != 101:
            return await _refused(request, reader, status, reason, headers)
        return await splice(request, RawUpgrade(status=101, reason=reason or None, headers=headers),
                            reader, writer)
    finally:
        writer.close()


async def _send_request(request: web.Request, writer: asyncio.StreamWriter, target: str, prefix: str) -> None:
    uri = (target or "/") + (f"?{request.rel_url.raw_query_string}" if request.rel_url.raw_query_string else "")
    connection_named = {t.strip().lower() for t in request.headers.get("Connection", "").split(",")}
    lines = [f"{request.method} {uri} HTTP/1.1"]
    forwarded_for = request.headers.get("X-Forwarded-For")
    for k, v in request.headers.items():
        low = k.lower()
        if low in _HOP or low in connection_named or low.startswith(_CREDENTIALS) or low in (
                "content-length", "x-forwarded-for", "x-forwarded-uri", "expect"):
            continue
        lines.append(f"{k}: {v}")
    client = request.remote or ""
    if client:
        lines.append(f"X-Forwarded-For: {forwarded_for + ', ' if forwarded_for else ''}{client}")
    forwarded_uri = posixpath.join(prefix, target.lstrip("/")) if target else prefix
    lines.append(f"X-Forwarded-Uri: {_clean(forwarded_uri) + ('/' if target.endswith('/') else '')}")
    length = request.content_length
    chunked = request.body_exists and length is None
    if length is not None:
        lines.append(f"Content-Length: {length}")
    elif chunked:
        lines.append("Transfer-Encoding: chunked")
    lines.append("Connection: close")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape"))
    if request.body_exists:
        await expect.continued(request)  # (the backend is sent no Expect: its body comes with the head)
        async for chunk in request.content.iter_chunked(_COPY):
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk)
            await writer.drain()
        if chunked:
            writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, str, CIMultiDict]:
    """The backend's status and headers; an informational answer (1xx but 101) before it is skipped."""
    while True:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("utf-8", "replace")
        status_line, *lines = head.split("\r\n")
        version, code, *reason = status_line.split(" ", 2)
        if not version.startswith("HTTP/") or not code.isdigit():
            raise ValueError(status_line)
        headers = CIMultiDict()
        for line in lines:
            if ":" in line:
                k, v = line.split(":", 1)
                headers.add(k.strip(), v.strip())
        if not 100 <= int(code) < 200 or int(code) == 101:
            return int(code), (reason[0] if reason else ""), headers


async def _body(reader: asyncio.StreamReader, headers: CIMultiDict):
    """The response body's bytes as they arrive: chunked, of a Content-Length, or until the end."""
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        while True:
            size = int((await reader.readline()).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()).strip():  # trailers
                    pass
                return
            yield await reader.readexactly(size)
            await reader.readline()
    elif "Content-Length" in headers:
        left = int(headers["Content-Length"])
        while left > 0 and (chunk := await reader.read(min(left, _COPY))):
            left -= len(chunk)
            yield chunk
    else:
        while chunk := await reader.read(_COPY):
            yield chunk


async def _relay_response(request: web.Request, reader: asyncio.StreamReader, status: int, reason: str,
                          headers: CIMultiDict, prefix: str, backend_host: str) -> web.StreamResponse:
    """The backend's answer to the client."""
    connection_named = {t.strip().lower() for t in headers.get("Connection", "").split(",")}
    out = CIMultiDict({hdrs.CACHE_CONTROL: NO_CACHE})  # the API server's, then the backend's own, if any
    for k, v in headers.items():
        low = k.lower()
        if low in _HOP or low in connection_named or low in _CORS:
            continue
        out.add(k, v)
    hosts = (request.host, backend_host)
    if "Location" in out:
        out["Location"] = rewrite_url(out["Location"], prefix, *hosts)
    bodyless = request.method == "HEAD" or status in (204, 304)
    ctype = out.get("Content-Type", "").split(";", 1)[0].strip()
    encoding = out.get("Content-Encoding", "")
    if not bodyless and ctype == "text/html" and encoding in _CODECS and "Location" not in headers:
        decode, encode = _CODECS[encoding]
        try:
            page = decode(b"".join([c async for c in _body(reader, headers)]))
        except (OSError, EOFError, zlib.error) as e:  # the Transport's error, which the responder gets
            raise errors.APIError(500, "", f"{encoding}: {e}") from None
        text = rewrite_html(page.decode("utf-8", "replace"), lambda u: rewrite_url(u, prefix, *hosts))
        out.popall("Content-Length", None)
        return web.Response(status=status, reason=reason or None, headers=out, body=encode(text.encode()))
    return await _relay_body(request, reader, headers, web.StreamResponse(status=status, reason=reason or None,
                                                                           headers=out), status)


async def _refused(request: web.Request, reader: asyncio.StreamReader, status: int, reason: str,
                   headers: CIMultiDict) -> web.StreamResponse:
    """An upgrade's refusal, which upstream writes as it came on the connection it hijacked, past
    the headers its filters set (Audit-Id, Cache-Control) and the reverse proxy's rewriting, and
    then closes: the backend's headers but its framing, which is the body's here."""
    out = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in ("transfer-encoding", "trailer"))
    resp = RawUpgrade(status=status, reason=reason or None, headers=out)
    resp.force_close()
    return await _relay_body(request, reader, headers, resp, status)


async def refused_upgrade(request: web.Request, status: int, text: str) -> web.StreamResponse:
    """An in-process kubelet's plain-text refusal of an upgrade, answered as a dialled one's is
    (`_refused`): its own headers only, then the connection closed."""
    body = text.encode()
    resp = RawUpgrade(status=status, headers={hdrs.CONTENT_TYPE: "text/plain; charset=utf-8"})
    resp.content_length = len(body)
    resp.force_close()
    await resp.prepare(request)
    await resp.write(body)
    await resp.write_eof()
    return resp


async def _relay_body(request: web.Request, reader: asyncio.StreamReader, headers: CIMultiDict,
                      resp: web.StreamResponse, status: int) -> web.StreamResponse:
    """`resp`'s head, then the backend's body as it comes."""
    bodyless = request.method == "HEAD" or status in (204, 304)
    if "Content-Length" in resp.headers:
        resp.content_length = int(resp.headers["Content-Length"])
    await resp.prepare(request)
    if not bodyless:
        with contextlib.suppress(ConnectionError):
            async for chunk in _body(reader, headers):
                await resp.write(chunk)
    await resp.write_eof()
    return resp


def rewrite_url(target: str, prefix: str, request_host: str, backend_host: str) -> str:
    """Transport.rewriteURL: an absolute path on the backend's or the client's host goes under the
    proxy prefix (the backend's host dropped, the client's kept); other hosts and relative URLs are
    left alone."""
    try:
        u = urlsplit(target)
    except ValueError:
        return target
    if (u.netloc and u.netloc not in (request_host, backend_host)) or not u.path.startswith("/"):
        return target
    path = u.path
    if not path.startswith(prefix):
        path = _clean(posixpath.join(prefix, path.lstrip("/"))) + ("/" if u.path.endswith("/") else "")
    if u.netloc == request_host:
        return urlunsplit((u.scheme, u.netloc, path, u.query, u.fragment))
    return urlunsplit(("", "", path, u.query, u.fragment))


class _Tags(HTMLParser):
    """Finds the start tags whose attributes hold URLs: (offset in the page, the tag's text)."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=False)
        self.lines = [0] + [i + 1 for i, ch in enumerate(page) if ch == "\n"]  # HTMLParser counts \n only
        self.found: list[tuple[int, str, set[str]]] = []

    def handle_starttag(self, tag, attrs):
        if tag in _URL_ATTRS and (text := self.get_starttag_text()):
            line, col = self.getpos()
            self.found.append((self.lines[line - 1] + col, text, _URL_ATTRS[tag]))

    handle_startendtag = handle_starttag


#: an attribute of a start tag: its name, then a quoted or a bare value
_ATTR = re.compile(r"""([^\s=/>]+)(\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


def rewrite_html(page: str, rewrite: Callable[[str], str]) -> str:
    """rewriteHTML: every URL attribute of the tags upstream lists passed through `rewrite`; the rest
    of the page is left as it was."""
    tags = _Tags(page)
    tags.feed(page)
    tags.close()
    out, at = [], 0
    for offset, text, names in tags.found:
        def one(m: re.Match, names=names) -> str:
            if m.group(1).lower() not in names:
                return m.group(0)
            for quote, value in (('"', m.group(3)), ("'", m.group(4)), ("", m.group(5))):
                if value is not None:
                    return f"{m.group(1)}{m.group(2)}{quote}{rewrite(value)}{quote}"
            return m.group(0)

        out += [page[at:offset], _ATTR.sub(one, text)]
        at = offset + len(text)
    out.append(page[at:])
    return "".join(out)
