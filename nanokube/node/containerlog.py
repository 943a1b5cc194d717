"""Container logs as the kubelet keeps and serves them: each container
instance's output as timestamped records (`<RFC3339Nano> <stream> <F|P>
<line>`, the CRI log format), rotated at a size limit; served with
PodLogOptions' previous, timestamps, since, tailLines, limitBytes and
follow.

`ContainerLog` keeps records in memory (simulated containers write a few
lifecycle lines); `FileContainerLog` writes them to a CRI log file with
rotation (process containers' real stdout and stderr). Readers snapshot the
records and subscribe to new ones in one step, so `follow` loses and repeats
nothing. An attached client (`attach`) gets what is written as it is
written instead: a shell's prompt shows before its line ends, as a
runtime's attach streams a process's output, though the log keeps an
unfinished line until it ends.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timezone

from ..machinery.streaming import LogOptions

#: the kubelet's containerLogMaxSize and containerLogMaxFiles defaults
MAX_SIZE = 10 * 1024 * 1024
MAX_FILES = 5
#: an unfinished line longer than this is logged as a partial record
PARTIAL_MAX = 16 * 1024


@dataclass(slots=True)
class LogRecord:
    time: float
    stream: str  # stdout | stderr
    line: bytes  # with its newline unless partial


def rfc3339nano(t: float) -> str:
    whole = int(t)
    nanos = int(round((t - whole) * 1e9))
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    base = datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f".{nanos:09d}".rstrip("0").rstrip(".")
    return f"{base}{frac}Z"


def _parse_time(text: str) -> float:
    main, _, frac = text.rstrip("Z").partition(".")
    t = datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + (int(frac.ljust(9, "0")[:9]) / 1e9 if frac else 0.0)


class ContainerLog:
    """One container instance's log, in memory (thousands of simulated pods
    keep one each: followers and unfinished lines take room only when present)."""

    __slots__ = ("_records", "_subscribers", "_attached", "_partial", "closed", "size")

    def __init__(self) -> None:
        self._records: list[LogRecord] = []
        self._subscribers: set[asyncio.Queue] | None = None
        self._attached: set[asyncio.Queue] | None = None
        self._partial: dict[str, tuple[float, bytes]] | None = None  # stream -> (time it started, text so far)
        self.closed = False
        #: the bytes its records take as the kubelet's CRI log file (`cri_line`), which the node's disk holds
        self.size = 0

    def records(self) -> list[LogRecord]:
        return list(self._records)

    def _store(self, rec: LogRecord) -> None:
        self._records.append(rec)
        self.size += cri_size(rec)

    def append(self, t: float, stream: str, data: bytes) -> None:
        """Add what a stream wrote at `t`: complete lines become records (a line
        written in pieces takes the time of its first piece); a long
        unfinished line is kept as a partial record, as the CRI does."""
        for q in self._attached or ():
            q.put_nowait((stream, data))
        start, pending = self._partial.pop(stream, (t, b"")) if self._partial else (t, b"")
        lines = (pending + data).splitlines(keepends=True)
        if lines and not lines[-1].endswith(b"\n") and len(lines[-1]) < PARTIAL_MAX:
            if self._partial is None:
                self._partial = {}
            self._partial[stream] = (start if len(lines) == 1 else t, lines.pop())
        for i, line in enumerate(lines):
            self._add(LogRecord(start if i == 0 else t, stream, line))

    def _add(self, rec: LogRecord) -> None:
        self._store(rec)
        for q in self._subscribers or ():
            q.put_nowait(rec)

    def close(self) -> None:
        """The instance exited: followers get the rest and end."""
        for stream, (t, text) in (self._partial or {}).items():
            self._add(LogRecord(t, stream, text))
        self._partial = None
        self.closed = True
        for q in (*(self._subscribers or ()), *(self._attached or ())):
            q.put_nowait(None)

    def attach(self) -> AsyncIterator[tuple[str, bytes]] | None:
        """What the instance writes from now on, as it writes it ((stream, data)), until it exits;
        None if it has."""
        if self.closed:
            return None
        q: asyncio.Queue = asyncio.Queue()
        if self._attached is None:
            self._attached = set()
        self._attached.add(q)
        return self._attach(q)

    async def _attach(self, q: asyncio.Queue) -> AsyncIterator[tuple[str, bytes]]:
        try:
            while (written := await q.get()) is not None:
                yield written
        finally:
            if self._attached is not None:
                self._attached.discard(q)

    def serve(self, opts: LogOptions) -> bytes | AsyncIterator[bytes]:
        records = self.records()
        if opts.stream is not None:
            records = [r for r in records if r.stream == opts.stream]
        if opts.since is not None:
            records = [r for r in records if r.time >= opts.since]
        if opts.tail_lines is not None:
            records = records[len(records) - opts.tail_lines:] if opts.tail_lines else []
        head = b"".join(_render(r, opts.timestamps) for r in records)
        if not opts.follow or self.closed:
            return head[:opts.limit_bytes] if opts.limit_bytes is not None else head
        q: asyncio.Queue = asyncio.Queue()
        if self._subscribers is None:
            self._subscribers = set()
        self._subscribers.add(q)
        return self._follow(head, q, opts)

    async def _follow(self, head: bytes, q: asyncio.Queue, opts: LogOptions) -> AsyncIterator[bytes]:
        left = opts.limit_bytes
        try:
            chunk = head
            while True:
                if chunk:
                    if left is not None:
                        chunk = chunk[:left]
                        left -= len(chunk)
                    yield chunk
                    if left == 0:
                        return
                rec = await q.get()
                if rec is None:
                    return
                chunk = _render(rec, opts.timestamps) if opts.stream in (None, rec.stream) else b""
        finally:
            if self._subscribers is not None:
                self._subscribers.discard(q)


def cri_line(rec: LogRecord) -> bytes:
    """The record as one line of a CRI log file: `<RFC3339Nano> <stream> <F|P> <content>`."""
    tag = b"F" if rec.line.endswith(b"\n") else b"P"
    content = rec.line[:-1] if tag == b"F" else rec.line
    return rfc3339nano(rec.time).encode() + b" " + rec.stream.encode() + b" " + tag + b" " + content + b"\n"


def cri_size(rec: LogRecord) -> int:
    """len(cri_line(rec)), without formatting its time: RFC3339Nano's 20 characters, and the
    fraction's digits left once its trailing zeros go."""
    nanos = int(round((rec.time - int(rec.time)) * 1e9)) % 1_000_000_000
    stamp = 20 + (1 + len(str(nanos).rjust(9, "0").rstrip("0")) if nanos else 0)
    return stamp + len(rec.stream) + len(rec.line) + (4 if rec.line.endswith(b"\n") else 5)


def _render(rec: LogRecord, timestamps: bool) -> bytes:
    return (rfc3339nano(rec.time).encode() + b" " + rec.line) if timestamps else rec.line


class FileContainerLog(ContainerLog):
    """A container instance's log in a CRI log file, rotated to `path.1` ...
    when it grows past `max_size`, keeping `max_files` files in all."""

    def __init__(self, path: str, max_size: int = MAX_SIZE, max_files: int = MAX_FILES):
        super().__init__()
        self.path = path
        self.max_size = max_size
        self.max_files = max_files
        self._file = open(path, "ab")
        self._size = self._file.tell()

    def _store(self, rec: LogRecord) -> None:
        entry = cri_line(rec)
        if self._size + len(entry) > self.max_size and self._size:
            self._rotate()
        self._file.write(entry)
        self._file.flush()
        self._size += len(entry)

    def _rotate(self) -> None:
        self._file.close()
        for i in range(self.max_files - 1, 0, -1):
            src = self.path if i == 1 else f"{self.path}.{i - 1}"
            if os.path.exists(src):
                os.replace(src, f"{self.path}.{i}")
        self._file = open(self.path, "ab")
        self._size = 0

    def close(self) -> None:
        super().close()
        self._file.close()

    def remove(self) -> None:
        """Delete the files of an instance no longer served."""
        self._file.close()
        for path in [self.path] + [f"{self.path}.{i}" for i in range(1, self.max_files)]:
            if os.path.exists(path):
                os.unlink(path)

    def records(self) -> list[LogRecord]:
        out: list[LogRecord] = []
        for path in [f"{self.path}.{i}" for i in range(self.max_files - 1, 0, -1)] + [self.path]:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            for entry in data.splitlines():
                parts = entry.split(b" ", 3)
                if len(parts) < 3:
                    continue
                content = parts[3] if len(parts) == 4 else b""
                out.append(LogRecord(_parse_time(parts[0].decode()), parts[1].decode(),
                                     content + (b"\n" if parts[2] == b"F" else b"")))
        return out
