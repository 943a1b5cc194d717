"""A process container's stdio and what the API server streams from it:
its output is copied, as it arrives, to the container's log (CRI format,
rotated; containerlog.py) and to every attached client; `stdin: true`
containers keep a stdin pipe that attach writes to, `tty: true` ones run on
a pseudo-terminal. Exec runs a command the way the container runs (its
namespaces, env, working directory and volumes, through launch.py) with the
client's stdin, stdout, stderr and terminal; port-forward opens a socket
inside the pod's network namespace and connects to the port on localhost,
as the CRI's PortForward does.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import struct
import termios
from collections.abc import Awaitable, Callable, Sequence

from ...machinery.hostport import join_host_port
from ...machinery.streaming import StreamFailed, StreamSession
from ..containerlog import ContainerLog
from . import cgroup as cgroups
from .netns import open_in_netns

_CHUNK = 32 * 1024
#: the flag of a task that has begun to exit (include/linux/sched.h)
PF_EXITING = 0x4


class ContainerIO:
    """The stdio of a container's current instance."""

    def __init__(self) -> None:
        self.stdin: asyncio.StreamWriter | None = None
        self.pty: int | None = None
        self.attached: set[asyncio.Queue] = set()
        self.pumps: list[asyncio.Task] = []

    def publish(self, log: ContainerLog, stream: str, data: bytes, now: float) -> None:
        log.append(now, stream, data)
        for q in self.attached:
            q.put_nowait((stream, data))

    def ended(self) -> None:
        for q in self.attached:
            q.put_nowait(None)


async def launch(argv: list[str], cgroup: str | None = None, joins: Sequence[str] = (),
                 **streams) -> tuple[asyncio.subprocess.Process, int]:
    """Start launch.py's `argv` in a session of its own (in `cgroup`, where given, and the v1 cgroups
    of limits.py `joins` names) with `streams`:
    the process and, once the command's process exists, that one's PID (0: it never started; see
    launch.py). Cancelled, it kills what it started."""
    loop = asyncio.get_running_loop()
    r, w = os.pipe()
    fds = [w]
    try:
        for path in (cgroup, *joins):  # (each opened as the list holds it: one that fails leaks no other)
            if path is not None:
                fds.append(cgroups.open_procs(path))
        proc = await asyncio.create_subprocess_exec(*argv, *map(str, fds), pass_fds=fds, start_new_session=True,
                                                    **streams)
    except BaseException:
        os.close(r)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r, "rb", 0))
    read = asyncio.ensure_future(reader.read())
    try:
        return proc, int(await asyncio.shield(read) or 0)
    except asyncio.CancelledError:
        kill(proc, int(await read or 0), signal.SIGKILL, cgroup)  # the command's PID first: the shim reaps it
        await proc.wait()
        raise
    finally:
        transport.close()


def kill(proc: asyncio.subprocess.Process, pid: int, sig: int, cgroup: str | None = None) -> None:
    """Signal a launched command: SIGTERM through its shim (which passes it on; under hostPID the
    command is the process), SIGKILL to every process of its `cgroup` (where it has one) and its
    process group (all of its PID namespace where it is that one's PID 1), after which the shim
    exits as the command did; a command that has not yet made its own group (launch.py reports
    its PID at once) is killed by its PID. A launch that never started its command is killed
    itself."""
    if sig == signal.SIGKILL:
        cgroups.kill(cgroup)
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        if sig != signal.SIGKILL:
            os.kill(proc.pid, sig)
            return
        try:
            os.killpg(pid or proc.pid, sig)
        except ProcessLookupError:
            if not pid:
                raise
            os.kill(pid, sig)


async def exited(proc: asyncio.subprocess.Process) -> None:
    """Until the process exits: its pidfd says so, where asyncio's wait also waits for its output
    pipes to close, which a command it left in the background holds open."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:  # exited and reaped already
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def ending(proc: asyncio.subprocess.Process, pid: int) -> bool:
    """Whether a launched command (its launcher `proc`, its PID `pid`) has ended or is on its way
    out (the kernel's PF_EXITING): a PID namespace's first process ends only once the kernel
    killed and reaped the rest of its namespace, and those may be seen gone first. A process
    reaped between the open and the read of its stat file fails the read with ESRCH."""
    if proc.returncode is not None:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return fields[0] in "ZX" or bool(int(fields[6]) & PF_EXITING)


async def run_to_end(argv: list[str], cgroup: str | None, timeout: float | None, joins: Sequence[str] = (),
                     **streams) -> tuple[int | None, bytes, bytes]:
    """Launch `argv` in `cgroup` (an exec's own, removed after) and collect its output to its end:
    its launcher's return code, stdout and stderr. Past `timeout` seconds, or cancelled, it is
    killed with all it started (its cgroup, its process group), as containerd kills a timed-out or
    cancelled ExecSync's process: then None and what it wrote by then are returned (cancelled:
    raised), whatever still holds its output open. What a finished command left running stays,
    in its container's cgroup."""
    try:
        proc, pid = await launch(argv, cgroup, joins, stdin=asyncio.subprocess.DEVNULL, **streams)
    except BaseException:
        await asyncio.to_thread(cgroups.remove, cgroup)
        raise
    chunks: dict[str, list[bytes]] = {name: [] for name in ("stdout", "stderr") if getattr(proc, name) is not None}
    waits = [asyncio.ensure_future(exited(proc)),
             *(asyncio.ensure_future(_collect(getattr(proc, name), chunks[name])) for name in chunks)]
    code = None
    try:
        if not (await asyncio.wait(waits, timeout=timeout))[1]:
            code = await proc.wait()
            cgroups.release(cgroup)
    finally:
        for t in waits:
            t.cancel()
        if code is None:  # timed out, or cancelled
            kill(proc, pid, signal.SIGKILL, cgroup)
            await exited(proc)
            await asyncio.to_thread(cgroups.remove, cgroup)
    return code, b"".join(chunks.get("stdout", ())), b"".join(chunks.get("stderr", ()))


async def _collect(reader: asyncio.StreamReader, into: list[bytes]) -> None:
    while chunk := await reader.read(_CHUNK):
        into.append(chunk)


async def spawn(argv: list[str], spec: dict, log: ContainerLog, io: ContainerIO, now: Callable[[], float],
                cgroup: str | None = None, joins: Sequence[str] = ()) -> tuple[asyncio.subprocess.Process, int]:
    """Start a container process (in `cgroup`, and `joins`) whose output goes to `log` and attached clients (launch)."""
    loop = asyncio.get_running_loop()
    if spec.get("tty"):
        master, slave = os.openpty()
        try:
            proc, pid = await launch(argv, cgroup, joins, stdin=slave, stdout=slave, stderr=slave)
        finally:
            os.close(slave)
        io.pty = master
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(master, "rb", 0))
        io.stdin = _PtyWriter(master) if spec.get("stdin") else None
        io.pumps = [asyncio.ensure_future(_pump(reader, "stdout", log, io, now, transport))]
        return proc, pid
    proc, pid = await launch(argv, cgroup, joins,
                             stdin=asyncio.subprocess.PIPE if spec.get("stdin") else asyncio.subprocess.DEVNULL,
                             stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    io.stdin = proc.stdin
    io.pumps = [asyncio.ensure_future(_pump(proc.stdout, "stdout", log, io, now)),
                asyncio.ensure_future(_pump(proc.stderr, "stderr", log, io, now))]
    return proc, pid


async def _pump(reader: asyncio.StreamReader, stream: str, log: ContainerLog, io: ContainerIO,
                now: Callable[[], float], transport=None) -> None:
    try:
        while True:
            try:
                chunk = await reader.read(_CHUNK)
            except OSError:  # a pty whose last writer closed reads EIO
                chunk = b""
            if not chunk:
                return
            io.publish(log, stream, chunk, now())
    finally:
        if transport is not None:
            transport.close()


async def finished(io: ContainerIO, log: ContainerLog) -> None:
    """After the process exits: the rest of its output, then attached clients and followers end."""
    if io.pumps:
        await asyncio.wait(io.pumps, timeout=2)
    for t in io.pumps:
        t.cancel()
    io.ended()
    log.close()


class _PtyWriter:
    """stdin of a tty container: writes to the terminal's master side."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.fd, data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


def set_window(fd: int | None, width: int, height: int) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


async def _resizes(session: StreamSession, fd: int | None) -> None:
    while True:
        width, height = await session.resizes.get()
        set_window(fd, width, height)


async def _stdin_to(session: StreamSession, write, close) -> None:
    while data := await session.read_stdin():
        write(data)
        await asyncio.sleep(0)
    close()


async def attach(io: ContainerIO, proc: asyncio.subprocess.Process, session: StreamSession,
                 exit_code: Callable[[int], int], stdin_once: bool = False) -> int | None:
    """Join a running container's stdio until it exits (its exit code) or the
    client leaves; with `stdinOnce` the container's stdin closes when the client's does."""
    q: asyncio.Queue = asyncio.Queue()
    io.attached.add(q)
    tasks = []
    if session.stdin and io.stdin is not None:
        stdin = io.stdin
        tasks.append(asyncio.ensure_future(_stdin_to(session, stdin.write,
                                                     stdin.close if stdin_once else (lambda: None))))
    if session.tty:
        tasks.append(asyncio.ensure_future(_resizes(session, io.pty)))
    try:
        while (item := await q.get()) is not None:
            stream, data = item
            write = session.write_stderr if stream == "stderr" and session.stderr else session.write_stdout
            if session.stdout or session.stderr:
                await write(data)
        return exit_code(await proc.wait())
    finally:
        io.attached.discard(q)
        for t in tasks:
            t.cancel()


async def run(argv: list[str], session: StreamSession, exit_code: Callable[[int], int],
              cgroup: str | None = None, joins: Sequence[str] = ()) -> int:
    """An exec: `argv` with the client's streams, in its container's `cgroup` (a kill of the
    container takes what it started too) and `joins` (its limits count what it uses); its exit code (the process is killed if the client leaves)."""
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Future] = []
    outputs: list[asyncio.Future] = []
    if session.tty:
        master, slave = os.openpty()
        try:
            proc, pid = await launch(argv, cgroup, joins, stdin=slave, stdout=slave, stderr=slave)
        finally:
            os.close(slave)
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                    os.fdopen(master, "rb", 0))
        outputs.append(asyncio.ensure_future(_copy(reader, session.write_stdout)))
        tasks.append(asyncio.ensure_future(_resizes(session, master)))
        if session.stdin:
            pty = _PtyWriter(master)
            tasks.append(asyncio.ensure_future(_stdin_to(session, pty.write, lambda: pty.write(b"\x04"))))
    else:
        transport = None
        proc, pid = await launch(
            argv, cgroup, joins, stdin=asyncio.subprocess.PIPE if session.stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if session.stdout else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE if session.stderr else asyncio.subprocess.DEVNULL)
        if session.stdout:
            outputs.append(asyncio.ensure_future(_copy(proc.stdout, session.write_stdout)))
        if session.stderr:
            outputs.append(asyncio.ensure_future(_copy(proc.stderr, session.write_stderr)))
        if session.stdin:
            tasks.append(asyncio.ensure_future(_stdin_to(session, proc.stdin.write, _closer(proc.stdin))))
    tasks += outputs
    try:
        code = await proc.wait()
        if outputs:
            await asyncio.wait(outputs, timeout=2)
        return exit_code(code)
    finally:
        for t in tasks:
            t.cancel()
        if proc.returncode is None:
            kill(proc, pid, signal.SIGKILL)
            await proc.wait()
        if transport is not None:
            transport.close()


def _closer(w: asyncio.StreamWriter):
    def close() -> None:
        with contextlib.suppress(OSError):
            w.close()
    return close


async def _copy(reader: asyncio.StreamReader, write: Callable[[bytes], Awaitable[None]]) -> None:
    while True:
        try:
            chunk = await reader.read(_CHUNK)
        except OSError:
            return
        if not chunk:
            return
        await write(chunk)


async def connect(netns: str, port: int, sandbox: str, shown: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to localhost:`port` inside `netns`, dialled as containerd's port-forward dials it:
    IPv4 first, then IPv6 (a server may listen on one family only; localhost's IPv6 address as the
    host's resolver gives it). Refused by both: containerd's error, naming the network namespace as
    `shown` (its path, or "host") and the pod as its `sandbox` ID."""
    try:
        return await _dial(await asyncio.to_thread(open_in_netns, netns), "127.0.0.1", port)
    except ConnectError as e:
        v4 = f"dial tcp4 127.0.0.1:{port}: connect: {e}"
    try:
        v6_addr = (await asyncio.to_thread(socket.getaddrinfo, "localhost", port, socket.AF_INET6,
                                           socket.SOCK_STREAM))[0][4][0]
    except (OSError, IndexError):
        v6 = "dial tcp6: address localhost: no suitable address found"
    else:
        try:
            return await _dial(await asyncio.to_thread(open_in_netns, netns, socket.AF_INET6), v6_addr, port)
        except ConnectError as e:
            v6 = f"dial tcp6 {join_host_port(v6_addr, port)}: connect: {e}"
    raise StreamFailed(f'failed to execute portforward in network namespace "{shown}": failed to connect to '
                       f'localhost:{port} inside namespace "{sandbox}", IPv4: {v4} IPv6 {v6} ')


class ConnectError(Exception):
    """A connect(2) that failed, in Go's syscall.Errno words: the C library's text, first letter lower case."""


async def _dial(sock: socket.socket, address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (address, port))
    except OSError as e:
        sock.close()
        why = os.strerror(e.errno) if e.errno else (e.strerror or str(e) or type(e).__name__)
        raise ConnectError(f"{why[:1].lower()}{why[1:]}") from None
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)
