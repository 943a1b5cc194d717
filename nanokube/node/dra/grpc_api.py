"""The two gRPC services a DRA driver's kubelet plugin serves, as method
paths with their protobuf messages: Registration (pluginregistration, on the
socket it puts in the kubelet's plugins_registry directory) and DRAPlugin
(NodePrepareResources / NodeUnprepareResources, on its endpoint socket).

A plugin names the DRAPlugin services it serves in its PluginInfo's
supported_versions as "<package's last element>.<service>": "v1.DRAPlugin"
is package k8s.io.kubelet.pkg.apis.dra.v1, "v1beta1.DRAPlugin" its
v1beta1 twin, whose messages are the same on the wire. A plugin that also
lists a DRAResourceHealth service (KEP-4680) streams its devices' health
from NodeWatchResources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .proto import dra_health_pb2 as health
from .proto import dra_pb2 as dra
from .proto import pluginregistration_pb2 as registration

# grpc is imported where a call is made: `nanokube simulate`'s kubelets make none, and each
# of its runs would pay for the import (3.5% of a small run's instructions)
if TYPE_CHECKING:
    import grpc

#: the plugin type a DRA driver registers with
DRA_PLUGIN_TYPE = "DRAPlugin"
REGISTRATION_SERVICE = "pluginregistration.Registration"
#: supported_versions entry -> the gRPC service's full name, the kubelet's choice first
DRA_SERVICES = {
    "v1.DRAPlugin": "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
    "v1beta1.DRAPlugin": "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
}

#: the health services the kubelet consumes, its choice first (package and service name alike)
HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1beta1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")

#: method -> (request message, response message)
REGISTRATION_METHODS = {
    "GetInfo": (registration.InfoRequest, registration.PluginInfo),
    "NotifyRegistrationStatus": (registration.RegistrationStatus, registration.RegistrationStatusResponse),
}
DRA_METHODS = {
    "NodePrepareResources": (dra.NodePrepareResourcesRequest, dra.NodePrepareResourcesResponse),
    "NodeUnprepareResources": (dra.NodeUnprepareResourcesRequest, dra.NodeUnprepareResourcesResponse),
}
#: server-streaming
HEALTH_METHODS = {"NodeWatchResources": (health.NodeWatchResourcesRequest, health.NodeWatchResourcesResponse)}


def target(socket_path: str) -> str:
    """The gRPC target of a unix socket."""
    return "unix://" + socket_path if socket_path.startswith("/") else "unix:" + socket_path


def stub(channel: grpc.Channel, service: str, methods: dict, streaming: bool = False) -> dict:
    """Callables for each method of `service` on `channel`, by method name."""
    make = channel.unary_stream if streaming else channel.unary_unary
    return {name: make(f"/{service}/{name}", request_serializer=req.SerializeToString,
                       response_deserializer=resp.FromString)
            for name, (req, resp) in methods.items()}


def handler(service: str, methods: dict, impl: dict, streaming: bool = False) -> grpc.GenericRpcHandler:
    """A server's handler for `service`: `impl` maps a method name to fn(request, context)
    (for `streaming` methods, a generator of responses)."""
    import grpc

    make = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
    return grpc.method_handlers_generic_handler(service, {
        name: make(impl[name], request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
        for name, (req, resp) in methods.items() if name in impl})
