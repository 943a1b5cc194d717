"""A tiny external device plugin, as a vendor writes one against the v1beta1 API: it serves
DevicePlugin on a socket in the kubelet's device-plugins directory and registers over the
kubelet's Registration socket, with real gRPC. Messages come from the API's proto; the
method paths are written out here."""

from __future__ import annotations

import asyncio
import os

import grpc

from nanokube.node.devicemanager.proto import deviceplugin_pb2 as pb


class DevicePlugin:
    """`devices`: ID -> NUMA node (None: no topology); Allocate answers FPGA_DEVICES=<IDs>, or
    fails with `fail` when set; with `prefer`, GetPreferredAllocation is offered and answers
    the first `allocation_size` of those IDs; with `pre_start`, PreStartContainer is asked for
    (failing with `pre_start_fail` when set)."""

    def __init__(self, directory: str, resource: str, devices: dict[str, int | None], name: str = "fpga.sock",
                 prefer: list[str] | None = None, pre_start: bool = False):
        self.directory = directory
        self.resource = resource
        self.endpoint = name
        self.health = {d: "Healthy" for d in devices}
        self.numa = devices
        self.allocations: list[list[str]] = []
        self.fail = ""
        self.prefer = prefer
        self.pre_start = pre_start
        self.pre_start_fail = ""
        #: GetDevicePluginOptions answers Unimplemented (a plugin written against an older API)
        self.options_unimplemented = False
        #: the devices of each PreStartContainer call
        self.pre_started: list[list[str]] = []
        #: the GetPreferredAllocation requests: (available, must include, size)
        self.preference_asked: list[tuple[list[str], list[str], int]] = []
        self._changed = asyncio.Event()
        self.server: grpc.aio.Server | None = None

    def _list(self) -> pb.ListAndWatchResponse:
        return pb.ListAndWatchResponse(devices=[
            pb.Device(ID=d, health=h, topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=self.numa[d])])
                      if self.numa[d] is not None else None) for d, h in self.health.items()])

    async def _list_and_watch(self, request, context):
        while True:
            self._changed.clear()
            yield self._list()
            await self._changed.wait()

    async def _options(self, request: pb.Empty, context) -> pb.DevicePluginOptions:
        if self.options_unimplemented:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "unknown method GetDevicePluginOptions")
        return self.options()

    def options(self) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(get_preferred_allocation_available=self.prefer is not None,
                                      pre_start_required=self.pre_start)

    async def _allocate(self, request: pb.AllocateRequest, context) -> pb.AllocateResponse:
        ids = [list(c.devices_ids) for c in request.container_requests]
        self.allocations += ids
        if self.fail:
            await context.abort(grpc.StatusCode.UNKNOWN, self.fail)
        return pb.AllocateResponse(container_responses=[
            pb.ContainerAllocateResponse(envs={"FPGA_DEVICES": ",".join(i)}) for i in ids])

    async def _preferred(self, request: pb.PreferredAllocationRequest, context) -> pb.PreferredAllocationResponse:
        out = []
        for r in request.container_requests:
            self.preference_asked.append((list(r.available_deviceIDs), list(r.must_include_deviceIDs),
                                          r.allocation_size))
            out.append(pb.ContainerPreferredAllocationResponse(deviceIDs=self.prefer[:r.allocation_size]))
        return pb.PreferredAllocationResponse(container_responses=out)

    async def _pre_start(self, request: pb.PreStartContainerRequest, context) -> pb.PreStartContainerResponse:
        self.pre_started.append(list(request.devices_ids))
        if self.pre_start_fail:
            await context.abort(grpc.StatusCode.UNAVAILABLE, self.pre_start_fail)
        return pb.PreStartContainerResponse()

    def set_health(self, device: str, health: str) -> None:
        self.health[device] = health
        self._changed.set()

    async def start(self) -> DevicePlugin:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", {
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                self._options, request_deserializer=pb.Empty.FromString,
                response_serializer=pb.DevicePluginOptions.SerializeToString),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self._list_and_watch, request_deserializer=pb.Empty.FromString,
                response_serializer=pb.ListAndWatchResponse.SerializeToString),
            "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(
                self._preferred, request_deserializer=pb.PreferredAllocationRequest.FromString,
                response_serializer=pb.PreferredAllocationResponse.SerializeToString),
            "PreStartContainer": grpc.unary_unary_rpc_method_handler(
                self._pre_start, request_deserializer=pb.PreStartContainerRequest.FromString,
                response_serializer=pb.PreStartContainerResponse.SerializeToString),
            "Allocate": grpc.unary_unary_rpc_method_handler(
                self._allocate, request_deserializer=pb.AllocateRequest.FromString,
                response_serializer=pb.AllocateResponse.SerializeToString)})])
        server.add_insecure_port("unix://" + os.path.join(self.directory, self.endpoint))
        await server.start()
        self.server = server
        return self

    async def register(self, version: str = "v1beta1", resource: str | None = None) -> None:
        """Register with the kubelet (raises its refusal as grpc.aio.AioRpcError)."""
        async with grpc.aio.insecure_channel("unix://" + os.path.join(self.directory, "kubelet.sock")) as ch:
            register = ch.unary_unary("/v1beta1.Registration/Register",
                                      request_serializer=pb.RegisterRequest.SerializeToString,
                                      response_deserializer=pb.Empty.FromString)
            await register(pb.RegisterRequest(version=version, endpoint=self.endpoint,
                                              resource_name=resource or self.resource, options=self.options()),
                           timeout=20)

    async def stop(self) -> None:
        if self.server:
            await self.server.stop(None)
            self.server = None
