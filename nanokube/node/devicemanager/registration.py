"""The kubelet's device plugin Registration service (v1beta1), on `<node dir>/device-plugins/
kubelet.sock` as a kubelet serves it on /var/lib/kubelet/device-plugins/kubelet.sock: a plugin
calls Register with its API version, its extended resource and its own socket's name in that
directory; the kubelet dials it and starts its ListAndWatch. A plugin registering a resource
again (or one the node's simulated plugin served) takes its place. The refusals are upstream's:
an unsupported version, a name that is not an extended resource, a plugin it cannot dial.

At start, as upstream's CleanupPluginDirectory, every socket left in the directory is removed
(the checkpoint, other files and directories stay): a plugin of the previous run finds its
socket gone and registers again with the new kubelet.

The socket is a KubeletSocket (../kubelet_socket.py): a bare listening socket whose gRPC server
starts when a plugin first connects, within the open files the node servers of the process share.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat

import grpc

from ...quota.resources import is_extended
from ..dra.grpc_api import handler
from ..kubelet_socket import MAX_SOCKET_PATH, KubeletSocket
from . import checkpoint
from .endpoint import GRPCPlugin
from .manager import DEVICE_PLUGINS_DIR, DeviceManager
from .plugin import PluginError
from .proto import deviceplugin_pb2 as pb

log = logging.getLogger(__name__)

SOCKET_NAME = "kubelet.sock"
SERVICE = "v1beta1.Registration"
SUPPORTED_VERSIONS = ["v1beta1"]


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

    def __init__(self, node_dir: str, devices: DeviceManager, node: str = ""):
        self.dir = os.path.join(node_dir, DEVICE_PLUGINS_DIR)
        self.path = os.path.join(self.dir, SOCKET_NAME)
        self.devices = devices
        self.node = node
        self.socket = KubeletSocket(self.path, lambda: [handler(
            SERVICE, {"Register": (pb.RegisterRequest, pb.Empty)}, {"Register": self._register})],
            "device plugin registration", node)

    async def start(self) -> None:
        """Listen (a path too long to bind leaves the node without registration: the plugins'
        sockets beside it could not be dialled either)."""
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            log.warning("node %s: no device plugin registration: %s is longer than a unix socket's path",
                        self.node, self.path)
            return
        os.makedirs(self.dir, exist_ok=True)
        remove_stale_sockets(self.dir)  # kubelet.sock of a previous run among them
        await self.socket.start()

    async def stop(self) -> None:
        """Stop serving, and hang up on the plugins registered here."""
        await self.socket.stop()
        for plugin in list(self.devices.plugins.values()):
            if isinstance(plugin, GRPCPlugin):
                await plugin.close()

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

