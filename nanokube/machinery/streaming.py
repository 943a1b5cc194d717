"""What the API server and the node agents share about streaming (upstream's
apimachinery remotecommand and portforward packages): the channels, the exit
status a remote command reports, and the interface a node agent serves for
exec, attach, port-forward and logs (upstream's kubelet server, reached
in-process here: agents register a `NodeStreaming` per node with the API
server, which proxies clients to it as kube-apiserver proxies to the kubelet).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from . import validation

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
#: v5.channel.k8s.io: a client frame [CLOSE, channel] half-closes that channel
CLOSE = 255
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
#: v4 with text frames: '0'+channel, then the payload in base64 (for browsers)
V4_BASE64 = "v4.base64.channel.k8s.io"
PORT_FORWARD = "portforward.k8s.io"
#: kubectl (1.31+) tunnels SPDY port-forwarding through a WebSocket
TUNNELED_PORT_FORWARD = "SPDY/3.1+portforward.k8s.io"


class StreamFailed(Exception):
    """The command could not be run at all (reported as an InternalError
    Status on the error channel, as the kubelet does)."""


def sandbox_id(uid: str) -> str:
    """The ID of pod `uid`'s sandbox as the runtime names it (a containerd ID, 64 hex digits): what
    the CRI streaming server calls the pod in a port-forward's error."""
    return hashlib.sha256(f"{uid}/sandbox".encode()).hexdigest()


def _not_in_path(command: str) -> str:
    """runc's words for a process whose binary the container does not have."""
    return f'unable to start container process: exec: "{command}": executable file not found in $PATH: unknown'


def executable_not_found(exec_id: str, command: str) -> StreamFailed:
    """What containerd answers for an exec of a binary the container does not have."""
    return StreamFailed(f'failed to exec in container: failed to start exec "{exec_id}": OCI runtime exec failed: '
                        f"exec failed: {_not_in_path(command)}")


def start_not_found(command: str) -> str:
    """What containerd answers when a container's own command is a binary its image does not have:
    the task is never created (the container's StartError, exit code 128)."""
    return ("failed to create containerd task: failed to create shim task: OCI runtime create failed: "
            f"runc create failed: {_not_in_path(command)}")


def exit_status(code: int, command: list[str]) -> dict:
    """The error channel's Status for a finished command (v4 and later)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command {_go_list(command)}, "
                       f"exit code {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def failure_status(message: str) -> dict:
    return {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
            "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500}


def _go_list(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"


#: stdin a session holds for its command before the client is made to wait (kubectl writes 32 KiB at a time)
STDIN_BUFFER = 1 << 20
#: how many client frames an upgraded connection's reader (WebSocket, SPDY) takes before it lets the
#: event loop run others: frames already read come without a loop turn
YIELD_EVERY = 64


@dataclass
class StreamSession:
    """One exec or attach as the node sees it: what the client sends (stdin,
    terminal sizes) and where output goes. The transport fills `stdin` (None
    marks its end) and `resizes`, and supplies the writers."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool
    write_stdout: Callable[[bytes], Awaitable[None]]
    write_stderr: Callable[[bytes], Awaitable[None]]
    stdin_data: asyncio.Queue = field(default_factory=asyncio.Queue)
    resizes: asyncio.Queue = field(default_factory=asyncio.Queue)
    #: bytes fed (`feed_stdin`) and not yet read, and the event a read sets
    _unread: int = 0
    _read: asyncio.Event = field(default_factory=asyncio.Event)

    async def feed_stdin(self, data: bytes | None) -> None:
        """Queue a piece of stdin (None: its end); while more than STDIN_BUFFER bytes wait for the
        command, wait for it to read, so a client that writes faster than the command reads is slowed
        through its connection, as upstream's stdin pipe slows it, instead of held in memory."""
        self.stdin_data.put_nowait(data)
        if data:
            self._unread += len(data)
        while self._unread > STDIN_BUFFER:
            self._read.clear()
            await self._read.wait()

    async def read_stdin(self) -> bytes:
        """The next piece of stdin; b"" at its end."""
        data = await self.stdin_data.get()
        if data is None:
            self.stdin_data.put_nowait(None)
            return b""
        self._unread = max(0, self._unread - len(data))
        self._read.set()
        return data


class NodeStreaming(Protocol):
    """What a node agent serves for the pods it runs (the kubelet's
    /exec, /attach, /portForward and /containerLogs)."""

    def has_container(self, namespace: str, pod: str, uid: str, container: str) -> bool:
        """Whether the container is running (the kubelet answers 404 `container not found` before
        upgrading otherwise: its findContainer looks among the runtime's running containers)."""

    async def exec(self, namespace: str, pod: str, uid: str, container: str, command: list[str],
                   session: StreamSession) -> int:
        """Run `command` in the container; its exit code. StreamFailed when it cannot run."""

    async def attach(self, namespace: str, pod: str, uid: str, container: str, session: StreamSession) -> int | None:
        """Join the container's stdio until it exits (its exit code) or the client leaves (None)."""

    async def port_forward(self, namespace: str, pod: str, uid: str,
                           port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to `port` in the pod's network namespace. StreamFailed when refused."""

    async def logs(self, namespace: str, pod: str, uid: str, container: str,
                   options: LogOptions) -> bytes | AsyncIterable[bytes]:
        """The container's log, or a stream of it for `follow`."""


@dataclass
class LogOptions:
    """PodLogOptions as the kubelet applies them."""

    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    since: float | None = None  # seconds since the epoch (sinceSeconds or sinceTime)
    tail_lines: int | None = None
    limit_bytes: int | None = None
    stream: str | None = None  # "stdout" or "stderr": that stream's lines only (PodLogOptions.stream)


#: PodLogOptions.stream's values
LOG_STREAMS = ("Stdout", "Stderr", "All")


def log_stream_errors(stream: str, tail_lines: int | None) -> list[validation.FieldError]:
    """PodLogOptions.stream's checks, the API server's and the kubelet's alike: one of LOG_STREAMS,
    and one stream is not yet read from its end (a CRI log interleaves both)."""
    errs = []
    if stream not in LOG_STREAMS:
        errs.append(validation.not_supported("stream", stream, LOG_STREAMS))
    if stream != "All" and tail_lines is not None:
        errs.append(validation.forbidden("[]", "`tailLines` and specific `stream` are mutually exclusive for now"))
    return errs
