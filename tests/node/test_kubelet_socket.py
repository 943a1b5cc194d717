"""A kubelet socket's lazily started gRPC server, reached by real gRPC clients over the unix socket."""

import asyncio
import contextlib
import os
import shutil
import socket
import stat
import struct
import sys
import tempfile
from pathlib import Path

import grpc
import uvloop

from nanokube.node.kubelet_socket import KubeletSocket
from tests.controllers import tries

ROOT = Path(__file__).resolve().parents[2]


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
    """`nanokube up` runs on uvloop: the relay reaches the gRPC server there too, for concurrent clients."""
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


#: a process serving echo on the kubelet socket given as argv[1]: it answers one client of its own, prints
#: what it got, and serves on until its stdin closes
SERVE_ONE = """
import asyncio, os, sys
import grpc
from nanokube.node.kubelet_socket import KubeletSocket
from tests.node.test_kubelet_socket import echo

async def main():
    server = KubeletSocket(sys.argv[1], echo, "echo")
    await server.start()
    async with grpc.aio.insecure_channel("unix://" + server.path) as c:
        try:
            print((await c.unary_unary("/test.Echo/Echo")(b"hi", timeout=10)).decode(), os.getpid(), flush=True)
        except grpc.aio.AioRpcError as e:
            print(e.code().name, os.getpid(), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop()

asyncio.run(main())
"""


async def test_two_processes_each_pid_1_of_its_own_namespace_serve_side_by_side(tmp_path):
    """Two `nanokube up`s in PID namespaces of their own (as in containers sharing the host's network)
    have the same PID: the sockets behind their kubelet sockets must not be named by it."""
    procs = []
    try:
        for n in range(2):
            procs.append(await asyncio.create_subprocess_exec(
                "unshare", "--pid", "--fork", sys.executable, "-c", SERVE_ONE, str(tmp_path / f"{n}.sock"),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT))
            # the first serves on while the second starts
            assert (await asyncio.wait_for(procs[-1].stdout.readline(), 60)).split() == [b"hi", b"1"]
    finally:
        for p in procs:
            p.stdin.close()
        for p in procs:
            if await asyncio.wait_for(p.wait(), 60) != 0:
                raise AssertionError(f"exit {p.returncode}")


async def test_a_client_gone_mid_request_leaves_no_relay_nor_file_open(tmp_path):
    """A plugin that hangs up halfway through its request (or resets the connection) ends its relay:
    its task, both of its sockets and the gRPC server's end of the connection go."""
    server = KubeletSocket(str(tmp_path / "kubelet.sock"), echo, "echo", "n1")
    await server.start()
    try:
        async with grpc.aio.insecure_channel("unix://" + server.path) as c:  # the gRPC server started
            assert await c.unary_unary("/test.Echo/Echo")(b"hi", timeout=10) == b"hi"
        await until(lambda: not server._relays)
        files = len(os.listdir("/proc/self/fd"))
        for n in range(20):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(server.path)
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00")  # the preface, then half a frame's head
            if n % 2:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
            sock.close()
        await until(lambda: not server._relays and len(os.listdir("/proc/self/fd")) == files)
    finally:
        await server.stop()


async def until(condition) -> None:
    for _ in tries():
        if condition():
            return
        await asyncio.sleep(0.02)
    assert condition()


def unix_sockets_held() -> set[str]:
    """The names of the unix sockets this process holds, from /proc/net/unix ('@' leads an abstract one)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table.read().splitlines()[1:]]
    return {row[7] for row in rows if len(row) > 7 and row[6] in inodes}


async def test_the_grpc_server_hides_behind_a_file_only_its_user_reaches(tmp_path):
    """Not an abstract socket, which any process in the network namespace could reach past the public
    socket's permissions: a socket file in a 0700 directory of its own, both gone when the node stops."""
    server = KubeletSocket(str(tmp_path / "kubelet.sock"), echo, "echo", "n1")
    before = unix_sockets_held()
    await server.start()
    try:
        async with grpc.aio.insecure_channel("unix://" + server.path) as c:
            assert await c.unary_unary("/test.Echo/Echo")(b"hi", timeout=10) == b"hi"
        held = unix_sockets_held() - before
        assert not [name for name in held if name.startswith("@")], held
        [hidden] = held - {server.path}
        directory = os.path.dirname(hidden)
        info = os.stat(directory)
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
        assert stat.S_ISSOCK(os.stat(hidden).st_mode)
    finally:
        await server.stop()
    assert not os.path.exists(hidden) and not os.path.exists(directory)
    assert hidden not in unix_sockets_held()


async def test_a_temporary_directory_too_long_for_a_socket_still_serves(tmp_path):
    """TMPDIR so long that no socket path under it binds: the hidden socket's directory goes to /tmp."""
    long_tmp = tmp_path / ("t" * 100)
    long_tmp.mkdir()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVE_ONE, str(tmp_path / "kubelet.sock"), env={**os.environ, "TMPDIR": str(long_tmp)},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    try:
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).split()[0] == b"hi"
    finally:
        assert await asyncio.wait_for(proc.wait(), 60) == 0
