"""A device plugin that registered over gRPC (upstream's endpoint and plugin client): the
manager's ListAndWatch is the plugin's stream, Allocate its RPC. Once dialled, its options come
from its GetDevicePluginOptions, as upstream's PluginConnected asks them (not those of the
RegisterRequest). When the stream ends (the plugin stopped, its socket went) it tells the
manager (None for a list), which marks the devices unhealthy as upstream's PluginDisconnected
does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from ..dra.grpc_api import stub, target
from .plugin import Allocation, PluginDevice, PluginError
from .proto import deviceplugin_pb2 as pb

log = logging.getLogger(__name__)

SERVICE = "v1beta1.DevicePlugin"
METHODS = {"GetDevicePluginOptions": (pb.Empty, pb.DevicePluginOptions),
           "Allocate": (pb.AllocateRequest, pb.AllocateResponse),
           "GetPreferredAllocation": (pb.PreferredAllocationRequest, pb.PreferredAllocationResponse),
           "PreStartContainer": (pb.PreStartContainerRequest, pb.PreStartContainerResponse)}
STREAMS = {"ListAndWatch": (pb.Empty, pb.ListAndWatchResponse)}
#: how long a dial and an Allocate may take
TIMEOUT = 10.0


def _code(e: grpc.aio.AioRpcError) -> str:
    """A gRPC status code as Go's codes.Code prints it (InvalidArgument)."""
    return "".join(w.capitalize() for w in e.code().name.split("_"))


class GRPCPlugin:
    """The DevicePlugin service of `resource`'s plugin on unix socket `socket`."""

    def __init__(self, resource: str, socket: str):
        self.resource = resource
        self.socket = socket
        self.options = pb.DevicePluginOptions()
        self.pre_start_required = False
        self.channel = grpc.aio.insecure_channel(target(socket))
        self._calls = stub(self.channel, SERVICE, METHODS)
        self._streams = stub(self.channel, SERVICE, STREAMS, streaming=True)
        self.devices: list[PluginDevice] = []
        self._task: asyncio.Task | None = None

    async def connect(self) -> None:
        """Dial the plugin and ask its options; PluginError with upstream's words if it does
        not answer in time or refuses."""
        try:
            await asyncio.wait_for(self.channel.channel_ready(), TIMEOUT)
            self.options = await self._calls["GetDevicePluginOptions"](pb.Empty(), timeout=TIMEOUT)
        except asyncio.TimeoutError:
            await self.channel.close()
            raise PluginError(f"failed to dial device plugin: {self.socket} not ready in {TIMEOUT:g}s") from None
        except grpc.aio.AioRpcError as e:
            await self.channel.close()
            raise PluginError(f"failed to get device plugin options: rpc error: code = {_code(e)} "
                              f"desc = {e.details()}") from None
        self.pre_start_required = self.options.pre_start_required

    def watch(self, send: Callable[[list[PluginDevice] | None], None]) -> None:
        self._task = asyncio.create_task(self._list_and_watch(send))

    async def _list_and_watch(self, send: Callable[[list[PluginDevice] | None], None]) -> None:
        try:
            async for resp in self._streams["ListAndWatch"](pb.Empty()):
                self.devices = [PluginDevice(d.ID, d.health, tuple(n.ID for n in d.topology.nodes))
                                for d in resp.devices]
                send(self.devices)
        except grpc.aio.AioRpcError as e:
            log.info("device plugin %s: ListAndWatch ended: %s", self.resource, e.details() or e.code())
        send(None)

    async def preferred(self, available: list[str], must_include: list[str], size: int) -> list[str] | None:
        """GetPreferredAllocation, if the plugin's options offer it."""
        if not self.options.get_preferred_allocation_available:
            return None
        request = pb.PreferredAllocationRequest(container_requests=[pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=size)])
        try:
            resp = await self._calls["GetPreferredAllocation"](request, timeout=TIMEOUT)
        except grpc.aio.AioRpcError as e:
            raise PluginError(f"device plugin GetPreferredAllocation rpc failed with err: rpc error: code = "
                              f"{_code(e)} desc = {e.details()}") from None
        return [i for r in resp.container_responses for i in r.deviceIDs]

    async def allocate(self, device_ids: list[str]) -> Allocation:
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=device_ids)])
        try:
            resp = await self._calls["Allocate"](request, timeout=TIMEOUT)
        except grpc.aio.AioRpcError as e:
            raise PluginError(f"rpc error: code = {_code(e)} desc = {e.details()}") from None
        if len(resp.container_responses) != 1:
            raise PluginError(f"failed to allocate devices of {self.resource}: the plugin answered "
                              f"{len(resp.container_responses)} containers, not 1")
        r = resp.container_responses[0]
        return Allocation(dict(r.envs), dict(r.annotations))

    async def pre_start(self, device_ids: list[str]) -> None:
        try:
            await self._calls["PreStartContainer"](pb.PreStartContainerRequest(devices_ids=device_ids),
                                                   timeout=TIMEOUT)
        except grpc.aio.AioRpcError as e:
            raise PluginError(f"rpc error: code = {_code(e)} desc = {e.details()}") from None

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.channel.close()
