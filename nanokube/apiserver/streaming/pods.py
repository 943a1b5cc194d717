"""pods/exec, pods/attach and pods/portforward: checked as kube-apiserver
checks them (container defaulting, a host assigned, a running pod), then
upgraded and proxied to the node agent that runs the pod (`NodeStreaming`,
the kubelet's streaming server here) over whichever transport the client
speaks: WebSocket channels (v5/v4), kubectl's SPDY-in-WebSocket
port-forward tunnel, or SPDY/3.1 itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from ...machinery import errors
from ..auth.authorizer import USER, Attributes, forbidden
from ..subresources import pod_container
from ...machinery.streaming import (ERROR, PORT_FORWARD, STDERR, STDOUT, TUNNELED_PORT_FORWARD, V4, V4_BASE64, V5,
                                    NodeStreaming, StreamFailed, StreamSession, exit_status, failure_status)
from .spdy import SpdySession, SpdyStream
from .transports import (WebSocketChannels, is_spdy, is_websocket, offered, resize_stream_reader,
                         spdy_over_websocket, upgrade_to_spdy)

log = logging.getLogger(__name__)

#: the channel protocols before v4 (wsstream's; no protocol at all is the first): the error channel
#: carries a failure's message alone, and nothing on success
_PRE_V4, _PRE_V4_BASE64 = "channel.k8s.io", "base64.channel.k8s.io"
#: how long the client has to open the streams it asked for (the kubelet's streamCreationTimeout)
STREAM_CREATION_TIMEOUT = 30.0
_COPY = 32 * 1024


def _bool(v: str | None) -> bool:
    return v in ("true", "1", "True")


def connect_options(sub: str, q) -> dict:
    """The Pod*Options a connect request carries in its query, as admission sees them."""
    if sub == "portforward":
        ports = [int(p) for v in q.getall("ports", []) for p in v.split(",") if p.strip().isdigit()]
        return {"kind": "PodPortForwardOptions", "apiVersion": "v1", **({"ports": ports} if ports else {})}
    out: dict = {"kind": "PodExecOptions" if sub == "exec" else "PodAttachOptions", "apiVersion": "v1"}
    for k in ("stdin", "stdout", "stderr", "tty"):
        if _bool(q.get(k)):
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
        #: the authorizer chain, `authorize(user, groups, attributes) -> Decision`; None serves unchecked
        self.authorize: Callable | None = None
        #: CONNECT admission, `await admit(subresource, namespace, name, options, user)`; None admits all
        self.admit: Callable[..., Awaitable[None]] | None = None
        self._sessions: set[asyncio.Task] = set()

    async def close(self) -> None:
        """End every open session (server shutdown): long-lived exec, attach and
        port-forward connections must not hold the server up."""
        for t in list(self._sessions):
            t.cancel()
        await asyncio.gather(*self._sessions, return_exceptions=True)

    def _check_create(self, request: web.Request, namespace: str, name: str, sub: str) -> None:
        """A WebSocket upgrade is a GET, authorized as `get`; it also needs `create`
        on the subresource (AuthorizePodWebsocketUpgradeCreatePermission, on in 1.37)."""
        user = request.get(USER)
        if self.authorize is None or user is None:
            return
        attrs = Attributes("create", request.path, True, "", "v1", "pods", sub, namespace, name)
        decision = self.authorize(user.name, user.groups, attrs)
        if not decision.allowed:
            raise forbidden(user.name, attrs, decision.reason)

    async def handle(self, request: web.Request, namespace: str, name: str, sub: str) -> web.StreamResponse:
        if request.method not in ("GET", "POST"):
            raise errors.method_not_allowed()
        if request.method == "GET":
            self._check_create(request, namespace, name, sub)
        task = asyncio.current_task()
        self._sessions.add(task)
        try:
            return await self._serve(request, namespace, name, sub)
        finally:
            self._sessions.discard(task)

    async def _serve(self, request: web.Request, namespace: str, name: str, sub: str) -> web.StreamResponse:
        if self.admit is not None and (user := request.get(USER)) is not None:
            await self.admit(sub, namespace, name, connect_options(sub, request.query), user)
        pod = self.get_pod(namespace, name)
        if sub == "portforward":
            md = pod["metadata"]
            return await serve_port_forward(request, self._node(pod), md["namespace"], md["name"], md.get("uid", ""))
        q = request.query
        container = pod_container(pod, q.get("container", ""))
        node = self._node(pod)
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            verb = "exec into" if sub == "exec" else "attach to"
            raise errors.bad_request(f"cannot {verb} a container in a completed pod; current phase is {phase}")
        if not node.has_container(namespace, name, pod["metadata"].get("uid", ""), container):
            # the kubelet's answer, which clients print as "unable to upgrade connection: ..."
            return web.Response(status=404, text=f'container not found ("{container}")')
        if sub == "exec" and not q.getall("command", []):
            raise errors.bad_request("you must specify at least one command for the container")
        if not any(_bool(q.get(k)) for k in ("stdin", "stdout", "stderr")):
            raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
        return await serve_command(request, node, namespace, name, pod["metadata"].get("uid", ""), container, sub)

    # --- checks -------------------------------------------------------------------------

    def _node(self, pod: dict) -> NodeStreaming:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise errors.bad_request(f"pod {pod['metadata']['name']} does not have a host assigned")
        for lookup in self.node_servers:
            server = lookup(node)
            if server is not None:
                return server
        raise errors.APIError(500, "InternalError", f"Internal error occurred: error dialing backend: no node agent "
                                                    f"serves streaming for node \"{node}\"")


# --- the upgraded streams, as the kubelet's streaming server serves them -------------------

async def serve_command(request: web.Request, node: NodeStreaming, ns: str, name: str, uid: str, container: str,
                        sub: str) -> web.StreamResponse:
    """exec (`sub` "exec": the query's `command`) or attach to a checked container, over the WebSocket
    channel protocol or SPDY the client upgrades to (the kubelet's remotecommand server, which the
    API server's pods/exec and pods/attach and the kubelet's own /exec and /attach reach)."""
    q = request.query
    stdin, stdout, stderr, tty = (_bool(q.get(k)) for k in ("stdin", "stdout", "stderr", "tty"))
    if tty:
        stderr = False
    command = q.getall("command", [])

    async def run(session: StreamSession) -> dict:
        try:
            if sub == "exec":
                return exit_status(await node.exec(ns, name, uid, container, command, session), command)
            await node.attach(ns, name, uid, container, session)
            return exit_status(0, [])  # the kubelet reports success however the container ended
        except StreamFailed as e:
            what = "executing command in" if sub == "exec" else "attaching to"
            return failure_status(f"error {what} container: {e}")

    flags = (stdin, stdout, stderr, tty)
    if is_websocket(request):
        asked = offered(request, "Sec-WebSocket-Protocol")
        proto = next((p for p in asked if p in (V5, V4, V4_BASE64, _PRE_V4, _PRE_V4_BASE64)), None if asked else "")
        if proto is None:
            raise errors.bad_request(f"unable to upgrade: no supported channel protocol ({V5}, {V4}, "
                                     f"{V4_BASE64}, {_PRE_V4}, {_PRE_V4_BASE64}) requested")
        return await _command_over_websocket(request, proto, flags, run)
    if is_spdy(request):
        protos = offered(request, "X-Stream-Protocol-Version")
        proto = next((p for p in (V4, V5) if p in protos), None)
        if proto is None:
            raise errors.bad_request(f"unable to upgrade: unable to negotiate protocol: client supports {protos}, "
                                     f"server supports [{V4} {V5}]")
        return await _command_over_spdy(request, proto, flags, run)
    raise errors.bad_request("Upgrade request required")


async def serve_port_forward(request: web.Request, node: NodeStreaming, ns: str, name: str, uid: str,
                             ports_param: str = "ports") -> web.StreamResponse:
    """Port-forward to the pod over kubectl's SPDY-in-WebSocket tunnel, the native WebSocket
    protocol (the ports from the query's `ports_param`: the API server's `ports`, the kubelet's
    `port`), or SPDY/3.1."""
    if is_websocket(request):
        protos = offered(request, "Sec-WebSocket-Protocol")
        if TUNNELED_PORT_FORWARD in protos:
            ws = web.WebSocketResponse(protocols=(TUNNELED_PORT_FORWARD,), max_msg_size=0)
            await ws.prepare(request)
            spdy, pump = spdy_over_websocket(ws)
            try:
                await _spdy_port_forward(spdy, node, ns, name, uid)
            finally:
                pump.cancel()
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await ws.close()
            return ws
        if any(p.startswith("SPDY/") for p in protos):
            raise errors.bad_request("unable to upgrade: no tunneling spdy protocols provided")
        ports = []
        for p in request.query.getall(ports_param, []):
            for part in p.split(","):
                if not part.strip().isdigit() or not 0 < int(part) < 65536:
                    raise errors.bad_request(f'invalid port "{part}"')
                ports.append(int(part))
        if not ports:
            raise errors.bad_request('query parameter "port" is required')
        ws = web.WebSocketResponse(protocols=(V4,), max_msg_size=0)
        await ws.prepare(request)
        await _websocket_port_forward(WebSocketChannels(ws), node, ns, name, uid, ports)
        return ws
    if is_spdy(request):
        if PORT_FORWARD not in offered(request, "X-Stream-Protocol-Version"):
            raise errors.bad_request("unable to upgrade: unable to negotiate protocol: client supports "
                                     f"{offered(request, 'X-Stream-Protocol-Version')}, server supports "
                                     f"[{PORT_FORWARD}]")
        spdy, resp = await upgrade_to_spdy(request, PORT_FORWARD)
        await _spdy_port_forward(spdy, node, ns, name, uid)
        return resp
    raise errors.bad_request("Upgrade request required")


# --- exec and attach over the transports ------------------------------------------------

async def _command_over_websocket(request: web.Request, proto: str, flags, run) -> web.StreamResponse:
    stdin, stdout, stderr, tty = flags
    ws = web.WebSocketResponse(protocols=(proto,) if proto else (), max_msg_size=0)
    await ws.prepare(request)
    ch = WebSocketChannels(ws, base64=proto in (V4_BASE64, _PRE_V4_BASE64))
    session = StreamSession(stdin, stdout, stderr, tty, lambda d: ch.send(STDOUT, d), lambda d: ch.send(STDERR, d))
    await ch.send(STDOUT if stdout else STDERR if stderr else ERROR, b"")
    pump = asyncio.ensure_future(ch.pump_into(session))
    runner = asyncio.ensure_future(run(session))
    try:
        await asyncio.wait([runner, pump], return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            status = runner.result()
            if proto in (V5, V4, V4_BASE64):
                await ch.send(ERROR, orjson.dumps(status))
            elif status["status"] != "Success":
                await ch.send(ERROR, status["message"].encode())
    finally:
        runner.cancel()
        pump.cancel()
        await asyncio.gather(runner, pump, return_exceptions=True)
        await ch.close()
    return ws


async def _command_over_spdy(request: web.Request, proto: str, flags, run) -> web.StreamResponse:
    stdin, stdout, stderr, tty = flags
    spdy, resp = await upgrade_to_spdy(request, proto)
    serving = asyncio.ensure_future(spdy.serve())
    expected = {"error"} | {k for k, on in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr),
                                            ("resize", tty)) if on}
    streams: dict[str, SpdyStream] = {}
    tasks: list[asyncio.Future] = []
    try:
        async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
            while not expected <= streams.keys():
                s = await spdy.incoming.get()
                if s is None:
                    return resp
                streams[s.headers.get("streamtype", "")] = s
        out, err = streams.get("stdout"), streams.get("stderr")
        session = StreamSession(stdin, stdout, stderr, tty, out.write if out else _discard,
                                err.write if err else _discard)
        if "stdin" in streams:
            tasks.append(asyncio.ensure_future(_feed_stdin(streams["stdin"].reader, session)))
        if "resize" in streams:
            tasks.append(asyncio.ensure_future(resize_stream_reader(session, streams["resize"].reader)))
        runner = asyncio.ensure_future(run(session))
        tasks.append(runner)
        gone = asyncio.ensure_future(spdy.done.wait())
        tasks.append(gone)
        await asyncio.wait([runner, gone], return_when=asyncio.FIRST_COMPLETED)
        if runner.done():
            for s in (out, err):
                if s is not None:
                    await s.close()
            await streams["error"].write(orjson.dumps(runner.result()))
            await streams["error"].close()
            await spdy.go_away()
    except (TimeoutError, ConnectionError):
        pass
    finally:
        for t in tasks:
            t.cancel()
        serving.cancel()
        await asyncio.gather(serving, *tasks, return_exceptions=True)
    return resp


async def _discard(_data: bytes) -> None:
    return None


async def _feed_stdin(reader: asyncio.StreamReader, session: StreamSession) -> None:
    while chunk := await reader.read(_COPY):
        session.stdin_data.put_nowait(chunk)
    session.stdin_data.put_nowait(None)


# --- port-forward over the transports ---------------------------------------------------

def _forward_error(port: int, name: str, uid: str, e: Exception) -> bytes:
    return f"error forwarding port {port} to pod {name}, uid {uid}: {e}".encode()


async def _copy_to_pod(read: Callable[[int], Awaitable[bytes]], writer: asyncio.StreamWriter) -> None:
    while chunk := await read(_COPY):
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def _spdy_port_forward(spdy: SpdySession, node: NodeStreaming, ns: str, name: str, uid: str) -> None:
    """Pairs of data and error streams, one pair per client connection, each
    forwarded to its `port` in the pod until the client leaves."""
    serving = asyncio.ensure_future(spdy.serve())
    pairs: dict[str, dict[str, SpdyStream]] = {}
    tasks: set[asyncio.Task] = set()

    async def forward(port: int, data: SpdyStream, error: SpdyStream) -> None:
        try:
            reader, writer = await node.port_forward(ns, name, uid, port)
        except (StreamFailed, OSError) as e:
            await error.write(_forward_error(port, name, uid, e))
            await error.close()
            await data.close()
            return
        up = asyncio.ensure_future(_copy_to_pod(data.reader.read, writer))
        try:
            while chunk := await reader.read(_COPY):
                await data.write(chunk)
            await up
        except (ConnectionError, OSError):
            pass
        finally:
            up.cancel()
            writer.close()
            with contextlib.suppress(ConnectionError, RuntimeError):
                await data.close()
                await error.close()

    try:
        while (s := await spdy.incoming.get()) is not None:
            rid = s.headers.get("requestid") or str(s.id - (2 if s.headers.get("streamtype") == "data" else 0))
            pair = pairs.setdefault(rid, {})
            pair[s.headers.get("streamtype", "")] = s
            if "data" in pair and "error" in pair:
                del pairs[rid]
                port = s.headers.get("port", "")
                if not port.isdigit():
                    await pair["error"].write(f'invalid port "{port}"'.encode())
                    await pair["error"].close()
                    continue
                t = asyncio.ensure_future(forward(int(port), pair["data"], pair["error"]))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
    finally:
        for t in list(tasks):
            t.cancel()
        serving.cancel()
        await asyncio.gather(serving, *tasks, return_exceptions=True)


async def _websocket_port_forward(ch: WebSocketChannels, node: NodeStreaming, ns: str, name: str, uid: str,
                                  ports: list[int]) -> None:
    """The kubelet's native WebSocket port-forward: channel 2i carries port i's
    data, 2i+1 its errors; each starts with the port as two little-endian
    bytes. The connection ends when every port's connection has."""
    to_pod = {i: asyncio.StreamReader() for i in range(len(ports))}

    async def on_data(channel: int, data: bytes) -> None:
        if channel % 2 == 0 and channel // 2 in to_pod:
            to_pod[channel // 2].feed_data(data)

    for i, port in enumerate(ports):
        await ch.send(2 * i, port.to_bytes(2, "little"))
        await ch.send(2 * i + 1, port.to_bytes(2, "little"))

    async def forward(i: int, port: int) -> None:
        try:
            reader, writer = await node.port_forward(ns, name, uid, port)
        except (StreamFailed, OSError) as e:
            await ch.send(2 * i + 1, _forward_error(port, name, uid, e))
            return
        up = asyncio.ensure_future(_copy_to_pod(to_pod[i].read, writer))
        try:
            while chunk := await reader.read(_COPY):
                await ch.send(2 * i, chunk)
        except (ConnectionError, OSError):
            pass
        finally:
            up.cancel()
            writer.close()

    pump = asyncio.ensure_future(ch.pump_into(None, on_data))
    forwards = asyncio.ensure_future(asyncio.gather(*(forward(i, p) for i, p in enumerate(ports))))
    try:
        await asyncio.wait([pump, forwards], return_when=asyncio.FIRST_COMPLETED)
    finally:
        forwards.cancel()
        pump.cancel()
        await asyncio.gather(pump, forwards, return_exceptions=True)
        await ch.close()
