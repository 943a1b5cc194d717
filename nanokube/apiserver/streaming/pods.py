"""pods/exec, pods/attach and pods/portforward: authorized and admitted, then checked as
kube-apiserver checks them (container defaulting, a host assigned, a running pod), and handed to
the node agent that runs the pod (`NodeStreaming`, the kubelet's streaming server here), whose
remote-command and port-forward servers (machinery/httpstream) speak whichever transport the
client does: WebSocket channels, kubectl's SPDY-in-WebSocket port-forward tunnel, or SPDY/3.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from ...machinery import errors
from ...machinery.httpstream.portforward import serve_port_forward
from ...machinery.httpstream.remotecommand import query_flag, serve_command
from ...machinery.streaming import NodeStreaming
from ..auth.authorizer import USER, Attributes, forbidden
from ..subresources import pod_container
from .proxy import is_upgrade, refused_upgrade


def connect_options(sub: str, q) -> dict:
    """The Pod*Options a connect request carries in its query, as admission sees them."""
    if sub == "portforward":
        ports = [int(p) for v in q.getall("ports", []) for p in v.split(",") if p.strip().isdigit()]
        return {"kind": "PodPortForwardOptions", "apiVersion": "v1", **({"ports": ports} if ports else {})}
    out: dict = {"kind": "PodExecOptions" if sub == "exec" else "PodAttachOptions", "apiVersion": "v1"}
    for k in ("stdin", "stdout", "stderr", "tty"):
        if query_flag(q.get(k)):
            out[k] = True
    if q.get("container"):
        out["container"] = q["container"]
    if sub == "exec":
        out["command"] = q.getall("command", [])
    return out


class PodStreaming:
    """Serves the three streaming subresources of pods. `node_servers` are
    lookups by node name that node agents register (None: not theirs)."""

    def __init__(self, get_pod: Callable[[str, str], dict]):
        self.get_pod = get_pod
        self.node_servers: list[Callable[[str], NodeStreaming | None]] = []
        #: the authorizer chain, `await authorize(user, attributes) -> Decision`; None serves unchecked
        self.authorize: Callable | None = None
        #: CONNECT admission, `await admit(subresource, namespace, name, options, user)`; None admits all
        self.admit: Callable[..., Awaitable[None]] | None = None
        self._sessions: set[asyncio.Task] = set()
        #: the kubelets of nodes no agent here runs (kubelet.Kubelets), which a stream is proxied to
        self.kubelets = None

    async def close(self) -> None:
        """End every open session (server shutdown): long-lived exec, attach and
        port-forward connections must not hold the server up."""
        for t in list(self._sessions):
            t.cancel()
        await asyncio.gather(*self._sessions, return_exceptions=True)

    async def _check_create(self, request: web.Request, namespace: str, name: str, sub: str) -> None:
        """A WebSocket upgrade is a GET, authorized as `get`; it also needs `create`
        on the subresource (AuthorizePodWebsocketUpgradeCreatePermission, on in 1.37). An
        authorizer's error refuses it first, as ensureAuthorizedForVerb returns it: a 500 Status
        carrying its text (no API status, so no reason)."""
        user = request.get(USER)
        if self.authorize is None or user is None:
            return
        attrs = Attributes("create", request.path, True, "", "v1", "pods", sub, namespace, name)
        decision = await self.authorize(user, attrs)
        if decision.allowed:
            return
        if decision.error:
            raise errors.APIError(500, "", decision.error)
        raise forbidden(user.name, attrs, decision.reason)

    async def handle(self, request: web.Request, namespace: str, name: str, sub: str) -> web.StreamResponse:
        if request.method not in ("GET", "POST"):
            raise errors.method_not_allowed()
        # (ConnectResource: CONNECT admission, then the connecter's own checks, create's first)
        if self.admit is not None and (user := request.get(USER)) is not None:
            await self.admit(sub, namespace, name, connect_options(sub, request.query), user)
        if request.method == "GET":
            await self._check_create(request, namespace, name, sub)
        task = asyncio.current_task()
        self._sessions.add(task)
        try:
            return await self._serve(request, namespace, name, sub)
        finally:
            self._sessions.discard(task)

    async def _serve(self, request: web.Request, namespace: str, name: str, sub: str) -> web.StreamResponse:
        pod = self.get_pod(namespace, name)
        q = request.query
        container = "" if sub == "portforward" else pod_container(pod, q.get("container", ""))
        node = self._node(pod)
        if node is None:  # the kubelet's own streaming server makes the checks below
            return await self.kubelets.stream(request, pod, sub, container)
        if sub == "portforward":
            md = pod["metadata"]
            return await serve_port_forward(request, node, md["namespace"], md["name"], md.get("uid", ""))
        if not node.has_container(namespace, name, pod["metadata"].get("uid", ""), container):
            # the kubelet's answer, which clients print as "unable to upgrade connection: ..."
            text = f'container not found ("{container}")'
            if is_upgrade(request):  # as a dialled kubelet's refusal comes: none of the API server's headers
                return await refused_upgrade(request, 404, text)
            return web.Response(status=404, text=text)
        if sub == "exec" and not q.getall("command", []):
            raise errors.bad_request("you must specify at least one command for the container")
        if not any(query_flag(q.get(k)) for k in ("stdin", "stdout", "stderr")):
            raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
        return await serve_command(request, node, namespace, name, pod["metadata"].get("uid", ""), container, sub)

    # --- checks -------------------------------------------------------------------------

    def _node(self, pod: dict) -> NodeStreaming | None:
        """The streaming server of the agent here that runs the pod; None where the pod's node
        is another's, its kubelet dialled."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise errors.bad_request(f"pod {pod['metadata']['name']} does not have a host assigned")
        for lookup in self.node_servers:
            server = lookup(node)
            if server is not None:
                return server
        if self.kubelets is not None:
            return None
        raise errors.APIError(500, "InternalError", f"Internal error occurred: error dialing backend: no node agent "
                                                    f"serves streaming for node \"{node}\"")
