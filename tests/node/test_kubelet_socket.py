"""A kubelet socket's lazily started gRPC server, reached by real gRPC clients over the unix socket."""

import asyncio
import os
import shutil
import tempfile

import grpc
import uvloop

from nanokube.node.kubelet_socket import KubeletSocket


def echo() -> list[grpc.GenericRpcHandler]:
    """A service answering each request with its own bytes."""
    return [grpc.method_handlers_generic_handler(
        "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: request)})]


async def serve_two_clients(directory: str) -> list[bytes]:
    server = KubeletSocket(os.path.join(directory, "kubelet.sock"), echo, "echo", "n1")
    await server.start()
    channels = [grpc.aio.insecure_channel("unix://" + server.path) for _ in range(2)]
    try:
        return await asyncio.gather(*(c.unary_unary("/test.Echo/Echo")(f"hi {i}".encode(), timeout=10)
                                      for i, c in enumerate(channels)))
    finally:
        for c in channels:
            await c.close()
        await server.stop()
        assert not os.path.exists(server.path)


def test_clients_are_relayed_on_uvloop_as_nanokube_up_runs_the_nodes():
    """`nanokube up` runs on uvloop, whose open_unix_connection refuses the abstract address the
    gRPC server listens on: the relay still reaches it, for concurrent clients."""
    directory = tempfile.mkdtemp(prefix="ks-")
    try:
        assert uvloop.run(serve_two_clients(directory)) == [b"hi 0", b"hi 1"]
    finally:
        shutil.rmtree(directory)


async def test_clients_are_relayed_on_asyncios_loop():
    directory = tempfile.mkdtemp(prefix="ks-")
    try:
        assert await serve_two_clients(directory) == [b"hi 0", b"hi 1"]
    finally:
        shutil.rmtree(directory)
