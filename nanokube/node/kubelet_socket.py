"""A kubelet's local gRPC service on a unix socket (the pod resources API, the device plugin
Registration service), served so that thousands of simulated nodes in one process cost little.

Few nodes are ever asked: a gRPC server each would cost ~0.3 ms of start-up and ~13 KiB a node,
for nothing. So a node listens on its socket with a bare unix socket on the event loop
(~0.5 KiB), and starts its gRPC server only when a client first connects, on a unix socket
behind it; each connection to the public socket is relayed byte for byte to that server, so a
client speaks gRPC to the socket as to a kubelet's. That hidden socket is a file in a directory of
its own that only this process's user may enter (0700, removed when the node stops), not an
abstract socket: those have no permissions, so any process in the network namespace could reach
the server past the public socket's (register a device plugin, read the pod resources).

Thousands of nodes hold as many sockets: the first one raises the process's soft limit on open
files to its hard limit, as Go's runtime does for every kubelet, and the sockets and servers of
all nodes take at most half of it, leaving the rest to the API server, its clients and stores;
the nodes past that (or one that cannot listen) serve without the service, which the log says
once. A path past a unix socket's 107 bytes is bound through /proc/self/fd, so that a long data
directory still serves (a client then needs a short path to it: a symlink).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import shutil
import socket
import tempfile
from collections.abc import Callable, Sequence

import grpc

log = logging.getLogger(__name__)

#: the longest path a unix socket binds to (sun_path less its terminating NUL)
MAX_SOCKET_PATH = 107
#: pending connections a socket holds (Go's net.Listen takes the kernel's somaxconn)
BACKLOG = 64
#: how long accepting waits after the process ran out of files (as Go's http server backs off)
ACCEPT_RETRY = 1.0


@functools.cache
def file_budget() -> int:
    """How many files the sockets of a process hold at most: half its limit, the soft
    RLIMIT_NOFILE first raised to the hard one (once per process)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2


class KubeletSocket:
    """Serves the gRPC `handlers()` give on the unix socket `path`, for node `node`; `what`
    names the service in the log."""

    #: the files this process's sockets hold (listening sockets and started gRPC servers)
    files = 0
    #: the services refused a socket for the process's open files (each logged once)
    _over_budget: set[str] = set()

    def __init__(self, path: str, handlers: Callable[[], Sequence[grpc.GenericRpcHandler]], what: str,
                 node: str = ""):
        self.path = path
        self.handlers = handlers
        self.what = what
        self.node = node
        #: the public socket, listening
        self._listener: socket.socket | None = None
        #: the gRPC server behind it, once a client connected, its socket's path and private directory
        self._server: grpc.aio.Server | None = None
        self._address = ""
        self._directory = ""
        self._starting: asyncio.Lock | None = None
        self._relays: set[asyncio.Task] = set()

    @property
    def listening(self) -> bool:
        return self._listener is not None

    async def start(self) -> None:
        """Listen on the path (a previous run's socket there removed), within the budget."""
        if KubeletSocket.files >= file_budget():
            if self.what not in KubeletSocket._over_budget:
                KubeletSocket._over_budget.add(self.what)
                log.warning("node %s and those starting after it: no %s (the node servers hold half the process's "
                            "limit on open files)", self.node, self.what)
            return
        directory, name = os.path.split(self.path)
        os.makedirs(directory, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    sock.bind(f"/proc/self/fd/{fd}/{name}")
                finally:
                    os.close(fd)
            else:
                sock.bind(self.path)
            sock.listen(BACKLOG)
        except OSError as e:
            sock.close()
            log.warning("node %s: no %s on %s: %s", self.node, self.what, self.path, e)
            return
        self._listener = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept)
        KubeletSocket.files += 1

    async def stop(self) -> None:
        """Stop listening (the socket file removed), end the connections and the gRPC server."""
        if self._listener is not None:
            self._stop_accepting()
            self._listener.close()
            self._listener = None
            KubeletSocket.files -= 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._server is not None:
            await self._server.stop(None)
            self._server = None
            KubeletSocket.files -= 1
        if self._directory:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = self._address = ""

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
                log.warning("node %s: %s: accept: %s; retrying in %gs", self.node, self.what, e, ACCEPT_RETRY)
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
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(address)
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
            log.info("node %s: %s connection ended: %s", self.node, self.what, e)
        finally:
            if not writers:
                conn.close()
            for w in writers:
                w.close()

    async def _grpc_server(self) -> str:
        """The gRPC server's socket path, the server started at the first call ("" if it cannot
        listen)."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._server is None:
                server = grpc.aio.server(handlers=list(self.handlers()))
                try:
                    # mkdtemp: a fresh 0700 directory, so processes in PID namespaces of their own
                    # (each PID 1, say) never meet either
                    directory = tempfile.mkdtemp(prefix="nanokube-kubelet-", dir=_private_root())
                except OSError as e:
                    log.warning("node %s: no %s server: %s", self.node, self.what, e)
                    await server.stop(None)
                    return ""
                address = os.path.join(directory, "grpc.sock")
                try:
                    server.add_insecure_port("unix:" + address)
                    await server.start()
                except BaseException as e:
                    await server.stop(None)
                    shutil.rmtree(directory, ignore_errors=True)
                    if not isinstance(e, RuntimeError):
                        raise
                    # grpc's words for any failed bind (out of file descriptors, say)
                    log.warning("node %s: no %s server: %s", self.node, self.what, e)
                    return ""
                self._server, self._address, self._directory = server, address, directory
                KubeletSocket.files += 1
        return self._address


@functools.cache
def _private_root() -> str:
    """Where the gRPC servers' private directories go: the temporary directory, or /tmp where its
    path leaves no room for theirs within a unix socket's MAX_SOCKET_PATH."""
    root = tempfile.gettempdir()
    longest = os.path.join(root, "nanokube-kubelet-" + "x" * 8, "grpc.sock")
    return root if len(os.fsencode(longest)) <= MAX_SOCKET_PATH else "/tmp"


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
