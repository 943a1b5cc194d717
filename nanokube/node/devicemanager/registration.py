"""The kubelet's device plugin Registration service (v1beta1), on `<node dir>/device-plugins/
kubelet.sock` as a kubelet serves it on /var/lib/kubelet/device-plugins/kubelet.sock: a plugin
calls Register with its API version, its extended resource and its own socket's name in that
directory; the kubelet dials it and starts its ListAndWatch. A plugin registering a resource
again (or one the node's simulated plugin served) takes its place. The refusals are upstream's:
an unsupported version, a name that is not an extended resource, a plugin it cannot dial.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os

import grpc

from ...quota.resources import is_extended
from ..dra.grpc_api import handler, target
from ..podresources.server import MAX_SOCKET_PATH, PodResourcesServer, _file_budget
from .endpoint import GRPCPlugin
from .manager import DEVICE_PLUGINS_DIR, DeviceManager
from .plugin import PluginError
from .proto import deviceplugin_pb2 as pb

log = logging.getLogger(__name__)

SOCKET_NAME = "kubelet.sock"
SERVICE = "v1beta1.Registration"
SUPPORTED_VERSIONS = ["v1beta1"]


class RegistrationServer:
    """Registers device plugins with `devices`, the node's device manager."""

    #: whether a server was refused for the process's open files (logged once)
    _over_budget = False

    def __init__(self, node_dir: str, devices: DeviceManager, node: str = ""):
        self.dir = os.path.join(node_dir, DEVICE_PLUGINS_DIR)
        self.path = os.path.join(self.dir, SOCKET_NAME)
        self.devices = devices
        self.node = node
        self._server: grpc.aio.Server | None = None

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
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a previous run's
        server = grpc.aio.server(handlers=[handler(SERVICE, {"Register": (pb.RegisterRequest, pb.Empty)},
                                                   {"Register": self._register})])
        try:
            server.add_insecure_port(target(self.path))
        except RuntimeError as e:
            log.warning("node %s: no device plugin registration on %s: %s", self.node, self.path, e)
            await server.stop(None)
            return
        await server.start()
        self._server = server
        PodResourcesServer.files += 1

    async def stop(self) -> None:
        """Stop serving, and hang up on the plugins registered here."""
        if self._server is not None:
            await self._server.stop(None)
            self._server = None
            PodResourcesServer.files -= 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        for plugin in list(self.devices.plugins.values()):
            if isinstance(plugin, GRPCPlugin):
                await plugin.close()

    async def _register(self, request: pb.RegisterRequest, context) -> pb.Empty:
        if request.version not in SUPPORTED_VERSIONS:
            await context.abort(grpc.StatusCode.UNKNOWN, f"requested API version {json.dumps(request.version)} is "
                                f"not supported by kubelet. Supported versions are {json.dumps(SUPPORTED_VERSIONS)}")
        if not is_extended(request.resource_name):
            await context.abort(grpc.StatusCode.UNKNOWN, f"the ResourceName {json.dumps(request.resource_name)} "
                                "is invalid")
        plugin = GRPCPlugin(request.resource_name, os.path.join(self.dir, request.endpoint), request.options)
        try:
            await plugin.connect()
        except PluginError as e:
            await context.abort(grpc.StatusCode.UNKNOWN, str(e))
        log.info("node %s: device plugin for %s registered on %s", self.node, request.resource_name, plugin.socket)
        old = self.devices.register(plugin)
        if isinstance(old, GRPCPlugin):
            await old.close()
        return pb.Empty()
