"""kube-apiserver's kubelet client (pkg/kubelet/client, the node registry's ResourceLocation and the
pod streaming and log locations): a node's kubelet is reached at the first of its status.addresses
in the preferred address types' order and its daemonEndpoints.kubeletEndpoint.Port, over TLS with
the API server's kubelet client certificate, which the kubelet authenticates by its client CA and
authorizes with a SubjectAccessReview. The kubelet's serving certificate is verified only when a CA
is given (--kubelet-certificate-authority), as upstream's. A node an in-process agent runs is
answered by that agent's KubeletServer in place of the dial: its addresses are simulated ones that
nothing listens on."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote, urlencode

from aiohttp import web

from ...machinery import errors
from ...machinery.hostport import join_host_port
from .proxy import DialError, _body, _read_head, forward, relayed, upgrade

#: --kubelet-preferred-address-types' default
PREFERRED_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
#: the kubelet's port when the Node names none (ports.KubeletPort)
KUBELET_PORT = 10250
#: how long a dial may take (the kubelet client transport's dial timeout)
DIAL_TIMEOUT = 30.0
#: the streaming paths by subresource (the kubelet's /exec, /attach, /portForward)
_STREAM_PATHS = {"exec": "exec", "attach": "attach", "portforward": "portForward"}


def location(node: dict, preferred: tuple[str, ...] = PREFERRED_ADDRESS_TYPES) -> tuple[str, int]:
    """(host, port) of a Node's kubelet (GetPreferredNodeAddress): the first address of the first
    preferred type it has, else the node's name; the kubelet endpoint's port, else 10250."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or ()
    host = next((a["address"] for t in preferred for a in addresses if a.get("type") == t and a.get("address")),
                node["metadata"]["name"])
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or KUBELET_PORT
    return host, int(port)


def _unverified() -> ssl.SSLContext:
    """A client context that takes the kubelet's serving certificate unverified (no
    --kubelet-certificate-authority), built without the system's CA bundle: it would verify nothing,
    and loading it cost every API server 25 ms of CPU at start, twice."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    return tls


class KubeletConnection:
    """One kubelet as the proxy dials it: `host` and `connect()`, as proxy.Backend's."""

    def __init__(self, address: str, port: int, tls: ssl.SSLContext):
        self.address, self.port, self.tls = address, port, tls

    @property
    def host(self) -> str:
        return join_host_port(self.address, self.port)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.wait_for(asyncio.open_connection(
                self.address, self.port, ssl=self.tls,
                server_hostname=self.address if self.tls.check_hostname else None), DIAL_TIMEOUT)
        except ssl.SSLError as e:
            raise DialError(f"tls: {e.reason or e}") from None
        except (OSError, TimeoutError) as e:
            why = "i/o timeout" if isinstance(e, TimeoutError) else (os.strerror(e.errno) if e.errno else str(e)).lower()
            raise DialError(f"dial tcp {self.host}: connect: {why}") from None

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


class Kubelets:
    """How the API server reaches node `name`'s kubelet: `in_process` lookups (a node agent's
    KubeletServer, None: not theirs), else a TLS connection to the Node's preferred address."""

    def __init__(self, get_node: Callable[[str], dict], get_pod: Callable[[str, str], dict],
                 in_process: list[Callable[[str], object | None]]):
        self.get_node, self.get_pod, self.in_process = get_node, get_pod, in_process
        self.preferred = PREFERRED_ADDRESS_TYPES
        self.tls = _unverified()

    def use(self, cert_file: str, key_file: str, ca_file: str = "") -> None:
        """--kubelet-client-certificate/-key and --kubelet-certificate-authority."""
        tls = ssl.create_default_context(cafile=ca_file) if ca_file else _unverified()
        tls.load_cert_chain(cert_file, key_file)
        self.tls = tls

    def local(self, name: str):
        """The in-process kubelet endpoints of `name`, None when no agent here runs it."""
        return next((k for lookup in self.in_process if (k := lookup(name)) is not None), None)

    def location(self, node: dict) -> tuple[str, int]:
        return location(node, self.preferred)

    def dial(self, name: str) -> KubeletConnection:
        """The connection to `name`'s kubelet at its Node's address (the Node's 404 when it has none)."""
        return KubeletConnection(*self.location(self.get_node(name)), self.tls)

    async def serve(self, request: web.Request, name: str, target: str) -> web.StreamResponse:
        """nodes/proxy's answer from the kubelet's `target` path."""
        local = self.local(name)
        if local is not None:
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
        """Subresources.kubelet_log: for a pod on a node no agent here runs, the
        kubelet's /containerLogs, a stream when following."""
        node = self.get_pod(namespace, name)["spec"]["nodeName"]
        if self.local(node) is not None:
            return None
        path = f"/containerLogs/{quote(namespace)}/{quote(name)}/{quote(container)}"
        try:
            status, body = await self.dial(node).get(path + (f"?{urlencode(query)}" if query else ""))
        except DialError as e:
            raise errors.APIError(500, "InternalError", f"Internal error occurred: {e}") from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            raise errors.APIError(500, "InternalError", "Internal error occurred: EOF") from None
        if status != 200:
            text = b"".join([c async for c in body]).decode("utf-8", "replace").strip()
            raise errors.bad_request(text or f"the kubelet answered {status}")
        if query.get("follow") == "true":
            return body
        return b"".join([c async for c in body])
