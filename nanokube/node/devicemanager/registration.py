"""The kubelet's device plugin Registration service (v1beta1), on `<node dir>/device-plugins/
kubelet.sock` as a kubelet serves it on /var/lib/kubelet/device-plugins/kubelet.sock: a plugin
calls Register with its API version, its extended resource and its own socket's name in that
directory; the kubelet dials it and starts its ListAndWatch. A plugin registering a resource
again (or one the node's simulated plugin served) takes its place. The refusals are upstream's:
an unsupported version, a name that is not an extended resource, a plugin it cannot dial.

At start, as upstream's CleanupPluginDirectory, every socket left in the directory is removed
(the checkpoint, other files and directories stay): a plugin of the previous run finds its
socket gone and registers again with the new kubelet.

Thousands of simulated nodes share one process, and few of them ever see a plugin: a gRPC
server each would cost ~0.4 ms of start-up and ~13 KiB a node, for nothing. So a node listens
on its socket with a bare unix socket on the event loop (~0.5 KiB), and starts its gRPC server
only when a plugin first connects, on an abstract unix socket (no file) behind it; each
connection to the public socket is relayed byte for byte to that server, so a plugin speaks
gRPC to kubelet.sock as to a kubelet's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import stat

import grpc

from ...quota.resources import is_extended
from ..dra.grpc_api import handler
from ..podresources.server import MAX_SOCKET_PATH, PodResourcesServer, _file_budget
from . import checkpoint
from .endpoint import GRPCPlugin
from .manager import DEVICE_PLUGINS_DIR, DeviceManager
from .plugin import PluginError
from .proto import deviceplugin_pb2 as pb

log = logging.getLogger(__name__)

SOCKET_NAME = "kubelet.sock"
SERVICE = "v1beta1.Registration"
SUPPORTED_VERSIONS = ["v1beta1"]
#: pending connections the public socket holds (Go's net.Listen takes the kernel's somaxconn)
BACKLOG = 64
#: how long accepting waits after the process ran out of files (as Go's http server backs off)
ACCEPT_RETRY = 1.0
_names = itertools.count()


def remove_stale_sockets(directory: str) -> None:
    """Upstream's CleanupPluginDirectory: remove every socket in `directory` (following links),
    leaving the checkpoint, other files and subdirectories."""
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            try:
                if name == checkpoint.NAME or not stat.S_ISSOCK(os.stat(path).st_mode):
                    continue
                os.unlink(path)
            except OSError as e:
                if not isinstance(e, FileNotFoundError):
                    log.error("device manager: cannot remove %s: %s", path, e)


class RegistrationServer:
    """Registers device plugins with `devices`, the node's device manager."""

    #: whether a server was refused for the process's open files (logged once)
    _over_budget = False

    def __init__(self, node_dir: str, devices: DeviceManager, node: str = ""):
        self.dir = os.path.join(node_dir, DEVICE_PLUGINS_DIR)
        self.path = os.path.join(self.dir, SOCKET_NAME)
        self.devices = devices
        self.node = node
        #: the public socket, listening
        self._listener: socket.socket | None = None
        #: the gRPC server behind it, once a plugin connected, and its abstract socket's name
        self._server: grpc.aio.Server | None = None
        self._address = ""
        self._starting: asyncio.Lock | None = None
        self._relays: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Listen, within the open files the node servers of the process may hold (shared with
        the pod resources servers: past it, the node serves no registration, which is logged once)."""
        if PodResourcesServer.files >= _file_budget():
            if not RegistrationServer._over_budget:
                RegistrationServer._over_budget = True
                log.warning("node %s and those starting after it: no device plugin registration (the node servers "
                            "hold half the process's limit on open files)", self.node)
            return
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            log.warning("node %s: no device plugin registration: %s is longer than a unix socket's path",
                        self.node, self.path)
            return
        os.makedirs(self.dir, exist_ok=True)
        remove_stale_sockets(self.dir)  # kubelet.sock of a previous run among them
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.bind(self.path)
            sock.listen(BACKLOG)
        except OSError as e:
            sock.close()
            log.warning("node %s: no device plugin registration on %s: %s", self.node, self.path, e)
            return
        self._listener = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)
        PodResourcesServer.files += 1

    async def stop(self) -> None:
        """Stop serving, and hang up on the plugins registered here."""
        if self._listener is not None:
            self._stop_accepting()
            self._listener.close()
            self._listener = None
            PodResourcesServer.files -= 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._server is not None:
            await self._server.stop(None)
            self._server = None
            PodResourcesServer.files -= 1
        for plugin in list(self.devices.plugins.values()):
            if isinstance(plugin, GRPCPlugin):
                await plugin.close()

    # --- the public socket -------------------------------------------------------------------------

    def _stop_accepting(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._listener.fileno())

    def _accept(self) -> None:
        """Take every pending connection, each relayed to the gRPC server in its own task."""
        while self._listener is not None:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of files: the connection waits in the backlog meanwhile
                log.warning("node %s: device plugin registration: accept: %s; retrying in %gs", self.node, e,
                            ACCEPT_RETRY)
                self._stop_accepting()
                asyncio.get_running_loop().call_later(ACCEPT_RETRY, self._resume)
                return
            task = asyncio.ensure_future(self._relay(conn))
            self._relays.add(task)
            task.add_done_callback(self._relays.discard)

    def _resume(self) -> None:
        if self._listener is not None:
            asyncio.get_running_loop().add_reader(self._listener.fileno(), self._accept)

    async def _relay(self, conn: socket.socket) -> None:
        """Pass the connection's bytes to the gRPC server and back until either side closes."""
        writers = []
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn)
            writers.append(writer)
            address = await self._grpc_server()
            if not address:
                return
            upstream_reader, upstream_writer = await asyncio.open_unix_connection("\0" + address)
            writers.append(upstream_writer)
            pumps = [asyncio.ensure_future(_pump(reader, upstream_writer)),
                     asyncio.ensure_future(_pump(upstream_reader, writer))]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pumps:
                    p.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except OSError as e:
            log.info("node %s: device plugin registration connection ended: %s", self.node, e)
        finally:
            if not writers:
                conn.close()
            for w in writers:
                w.close()

    async def _grpc_server(self) -> str:
        """The gRPC server's abstract socket name, the server started at the first call ("" if it
        cannot listen)."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._server is None:
                address = f"nanokube-{os.getpid()}-device-plugins-{next(_names)}"
                server = grpc.aio.server(handlers=[handler(SERVICE, {"Register": (pb.RegisterRequest, pb.Empty)},
                                                           {"Register": self._register})])
                try:
                    server.add_insecure_port("unix-abstract:" + address)
                except RuntimeError as e:
                    log.warning("node %s: no device plugin registration server: %s", self.node, e)
                    await server.stop(None)
                    return ""
                await server.start()
                self._server, self._address = server, address
                PodResourcesServer.files += 1
        return self._address

    # --- the Registration service ------------------------------------------------------------------

    async def _register(self, request: pb.RegisterRequest, context) -> pb.Empty:
        self.devices.registration_requested(request.resource_name)
        if request.version not in SUPPORTED_VERSIONS:
            await context.abort(grpc.StatusCode.UNKNOWN, f"requested API version {json.dumps(request.version)} is "
                                f"not supported by kubelet. Supported versions are {json.dumps(SUPPORTED_VERSIONS)}")
        if not is_extended(request.resource_name):
            await context.abort(grpc.StatusCode.UNKNOWN, f"the ResourceName {json.dumps(request.resource_name)} "
                                "is invalid")
        plugin = GRPCPlugin(request.resource_name, os.path.join(self.dir, request.endpoint))
        try:
            await plugin.connect()
        except PluginError as e:
            await context.abort(grpc.StatusCode.UNKNOWN, str(e))
        log.info("node %s: device plugin for %s registered on %s", self.node, request.resource_name, plugin.socket)
        old = self.devices.register(plugin, counted=True)
        if isinstance(old, GRPCPlugin):
            await old.close()
        return pb.Empty()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
