"""The audit log's file, rotated as kube-apiserver's log backend rotates it (it writes through
natefinch/lumberjack): a write that would take the file past `--audit-log-maxsize` MB first renames
it to a backup named after the time (UTC) with millisecond precision, `audit.log` becoming
`audit-2026-12-05T08-31-26.123.log`, and starts a new one with the same permissions; then, in the
background, backups beyond `--audit-log-maxbackup` (newest kept) or older than
`--audit-log-maxage` days (by the time in their name) are removed, and the rest gzipped to
`NAME.gz` with `--audit-log-compress`. A line longer than the limit is refused. 0 turns each limit
off (a size of 0 never rotates, as upstream since 1.36).

Lumberjack assumes one writing process; `up --api-workers N` has N appending to one file. Shared,
each write takes an exclusive flock of a lock file beside the log (`.audit.log.lock`) and checks
the file's size under it, so exactly one worker rotates at a limit and none writes past it; the
rotating one bumps a generation count kept in the lock file (mapped into every worker's memory),
and the others, seeing it changed once they hold the lock, reopen the path before they write. No
line goes to a backup after its rotation, so none is lost to compression or removal. Backups are
milled under a POSIX lock of another byte of that file, one worker at a time.

`--audit-log-mode batch` puts upstream's buffered backend in front of the file (`Batches`): events
wait in a buffer (`--audit-log-batch-buffer-size`; more are dropped) and are written in the
background, `--audit-log-batch-max-size` at a time (1) or what gathered within
`--audit-log-batch-max-wait`, throttled where `--audit-log-batch-throttle-enable` says."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import fcntl
import gzip
import logging
import mmap
import os
import re
import shutil
import struct
import sys
import threading
from dataclasses import dataclass

from ..clock import REAL, Clock
from .audit_truncate import Truncate

log = logging.getLogger(__name__)

MEGABYTE = 1024 * 1024
#: the time in a backup's name: lumberjack's backupTimeFormat, "2006-01-02T15-04-05.000"
_STAMP_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}")
_GZ = ".gz"
#: the lock file's layout: the generation (rotations so far), then the byte the mill locks
_GEN = struct.Struct("<Q")
_MILL_BYTE = _GEN.size


@dataclass(frozen=True, slots=True)
class LogOptions:
    """The --audit-log-* flags, with kube-apiserver 1.37's defaults."""
    format: str = "json"
    #: blocking; blocking-strict: a RequestReceived event the file does not take fails its request;
    #: batch: written in the background (`Batches`)
    mode: str = "blocking"
    #: MB, backups, days (0: no limit)
    max_size: int = 100
    max_backups: int = 100
    max_age: int = 366
    compress: bool = False
    #: batch mode's buffer, batch size and wait (s), and throttle (batches a second, burst) or None
    batch_buffer: int = 10_000
    batch_max_size: int = 1
    batch_max_wait: float = 0.0
    batch_throttle: tuple[float, int] | None = None
    #: --audit-log-truncate-*, where enabled
    truncate: Truncate | None = None


def ensure_log_file(path: str) -> None:
    """kube-apiserver's ensureLogFile, before it serves: the directories made (0700) and the file
    (0600, for what the events hold); an OSError worded as Go's (`open PATH: is a directory`)."""
    try:
        os.makedirs(os.path.dirname(path) or ".", 0o700, exist_ok=True)
        _open(path).close()
    except OSError as e:
        op = "mkdir" if e.filename != path else "open"
        raise OSError(e.errno, f"ensureLogFile: {op} {e.filename}: {(e.strerror or str(e)).lower()}") from None


def _open(path: str):
    """The file for appending, unbuffered, made 0600 where it is new (as upstream)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    return open(fd, "ab", buffering=0)  # noqa: SIM115 - held open for the server's life


class WriteTooLarge(OSError):
    """A line longer than the file may grow: lumberjack refuses it, and the event is lost."""


class LogFile:
    def __init__(self, path: str, clock: Clock = REAL, *, max_size: int = 100, max_backups: int = 100,
                 max_age: int = 366, compress: bool = False, shared: bool = False):
        """`max_size` MB, `max_backups` files, `max_age` days; `shared`: other processes append to
        the same file (the API workers), each with a LogFile of the same settings."""
        self.path, self.clock = path, clock
        self.max = max_size * MEGABYTE if max_size > 0 else 0
        self.max_backups, self.max_age, self.compress = max_backups, max_age, compress
        self.dir = os.path.dirname(path) or "."
        stem, self.ext = os.path.splitext(os.path.basename(path))
        self.prefix = stem + "-"
        # unbuffered: each line is one write(2), as upstream writes each event to the file
        self.raw = _open(path)
        #: bytes this LogFile may append before a rotation is due: its caller's fast path (`write`
        #: is a Python call, ~1 k instructions of a ~35 k loopback line) writes `raw` while a line
        #: fits; -1 where it is shared (every write takes the lock), the whole size without a limit
        self.room = (self.max or sys.maxsize) - os.fstat(self.raw.fileno()).st_size
        self._lock = self._shared = None
        self._gen = 0
        if shared:
            self.room = -1
            self._lock = os.open(os.path.join(self.dir, f".{os.path.basename(path)}.lock"),
                                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(self._lock, fcntl.LOCK_EX)
            try:
                if os.fstat(self._lock).st_size < _MILL_BYTE + 1:
                    os.ftruncate(self._lock, _MILL_BYTE + 1)
                self._shared = mmap.mmap(self._lock, _GEN.size)
                self._gen = _GEN.unpack_from(self._shared)[0]
                self._reopen()  # (another worker may have rotated since the open above)
            finally:
                fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._mill_state = threading.Lock()
        self._milling = self._mill_again = False
        self._mill_thread: threading.Thread | None = None
        self._mill_soon()  # as lumberjack's first write: backups past the limits go at start

    def write(self, line: bytes) -> None:
        """The whole line (the rest of a short write after it), after a rotation it calls for."""
        n = len(line)
        if self._lock is None:  # (the one writer: its count is the file's size)
            if n > self.room:
                if n > self.max:
                    raise WriteTooLarge(f"write length {n} exceeds maximum file size {self.max}")
                self._rotate()
            self.room -= n
            self.put(line)
            return
        if not self.max:
            self.put(line)
            return
        if n > self.max:
            raise WriteTooLarge(f"write length {n} exceeds maximum file size {self.max}")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            if _GEN.unpack_from(self._shared)[0] != self._gen:
                self._reopen()
            if os.lseek(self.raw.fileno(), 0, os.SEEK_END) + n > self.max:
                self._rotate()
            self.put(line)
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def put(self, line: bytes) -> None:
        """The whole line, the rest of a short write after it, with no rotation (`room`'s path)."""
        w = self.raw.write
        done = w(line)
        while done < len(line):
            line = line[done:]
            done = w(line)

    def close(self) -> None:
        t = self._mill_thread
        if t is not None:
            t.join()  # (a backup half compressed would be left behind, and compressed again next start)
        self.raw.close()
        if self._shared is not None:
            self._shared.close()
            os.close(self._lock)
            self._lock = self._shared = None

    # --- rotation ----------------------------------------------------------

    def _reopen(self) -> None:
        """The file now at the path, which another worker's rotation made (under the lock)."""
        self._gen = _GEN.unpack_from(self._shared)[0]
        old, self.raw = self.raw, _open(self.path)
        old.close()

    def _rotate(self) -> None:
        mode = os.fstat(self.raw.fileno()).st_mode & 0o7777
        try:
            os.rename(self.path, self._backup_name())
        except FileNotFoundError:  # removed under us: the new file starts it again
            pass
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, mode)
        old, self.raw = self.raw, open(fd, "ab", buffering=0)  # noqa: SIM115
        old.close()
        if self._shared is None:
            self.room = self.max
        else:
            self._gen += 1
            _GEN.pack_into(self._shared, 0, self._gen)
        self._mill_soon()

    def _backup_name(self) -> str:
        """DIR/STEM-2006-01-02T15-04-05.000EXT at the clock's time (UTC, milliseconds truncated, as
        Go formats them); a millisecond later while that name is taken (two rotations within one
        would otherwise lose the first backup)."""
        ms = int(self.clock.now() * 1000)
        while True:
            t = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc)
            name = os.path.join(self.dir, f"{self.prefix}{t:%Y-%m-%dT%H-%M-%S}.{ms % 1000:03d}{self.ext}")
            if not os.path.lexists(name) and not os.path.lexists(name + _GZ):
                return name
            ms += 1

    # --- the mill: removal and compression of backups ------------------------

    def _mill_soon(self) -> None:
        if not (self.max_backups or self.max_age or self.compress):
            return
        with self._mill_state:
            if self._milling:
                self._mill_again = True
                return
            self._milling = True
        self._mill_thread = threading.Thread(target=self._mill_loop, name="audit-log-mill", daemon=True)
        self._mill_thread.start()

    def _mill_loop(self) -> None:
        while True:
            try:
                self.mill()
            except OSError as e:
                log.error("audit log %s: backups: %s", self.path, e)
            with self._mill_state:
                if not self._mill_again:
                    self._milling = False
                    return
                self._mill_again = False

    def mill(self) -> None:
        """lumberjack's millRunOnce: the backups past --audit-log-maxbackup (newest first, a file and
        its .gz counted once) and those older than --audit-log-maxage days removed, the rest
        compressed with --audit-log-compress."""
        lock = self._lock
        if lock is not None:
            fcntl.lockf(lock, fcntl.LOCK_EX, 1, _MILL_BYTE)
        try:
            files = self._backups()
            remove = []
            if self.max_backups and self.max_backups < len(files):
                kept, remaining = set(), []
                for stamp, name in files:
                    kept.add(name.removesuffix(_GZ))
                    (remove if len(kept) > self.max_backups else remaining).append((stamp, name))
                files = remaining
            if self.max_age:
                cutoff = self.clock.now() - self.max_age * 86400
                remove += [f for f in files if f[0] < cutoff]
                files = [f for f in files if f[0] >= cutoff]
            for _, name in remove:
                try:
                    os.remove(os.path.join(self.dir, name))
                except FileNotFoundError:
                    pass
            if self.compress:
                for _, name in files:
                    if not name.endswith(_GZ):
                        _compress(os.path.join(self.dir, name))
        finally:
            if lock is not None:
                fcntl.lockf(lock, fcntl.LOCK_UN, 1, _MILL_BYTE)

    def _backups(self) -> list[tuple[float, str]]:
        """(the time in its name, name) of each backup, newest first."""
        out = []
        with os.scandir(self.dir) as entries:
            for e in entries:
                name = e.name
                if not name.startswith(self.prefix) or not e.is_file(follow_symlinks=False):
                    continue
                rest = name[len(self.prefix):].removesuffix(_GZ)
                if not rest.endswith(self.ext):
                    continue
                stamp = rest[:len(rest) - len(self.ext)] if self.ext else rest
                if not _STAMP_RE.fullmatch(stamp):
                    continue
                try:
                    t = dt.datetime.strptime(stamp + "000", "%Y-%m-%dT%H-%M-%S.%f").replace(tzinfo=dt.timezone.utc)
                except ValueError:
                    continue
                out.append((t.timestamp(), name))
        out.sort(reverse=True)
        return out


def _compress(src: str) -> None:
    """SRC gzipped to SRC.gz with its permissions, then SRC removed (lumberjack's compressLogFile)."""
    with open(src, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode & 0o7777
        fd = os.open(src + _GZ, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        with open(fd, "wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
            shutil.copyfileobj(f, gz, 1 << 20)
    os.remove(src)


class BufferFull(OSError):
    """Batch mode's buffer holds --audit-log-batch-buffer-size events: the event is dropped."""


class Batches:
    """plugin/pkg/audit/buffered in front of the log file (--audit-log-mode batch): `write` only
    queues; a task of the server's loop writes the lines in batches. Started in a running loop."""

    def __init__(self, file: LogFile, options: LogOptions, on_error) -> None:
        """`on_error(exc)`: a line the file did not take (logged and counted by the audit)."""
        from .audit_webhook import TokenBucket

        self.file, self.on_error = file, on_error
        self.buffer, self.max_batch, self.max_wait = options.batch_buffer, options.batch_max_size, options.batch_max_wait
        self._throttle = TokenBucket(*options.batch_throttle) if options.batch_throttle else None
        self.pending: collections.deque[bytes] = collections.deque()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def write(self, line: bytes) -> None:
        pending = self.pending
        if len(pending) >= self.buffer:
            raise BufferFull(f"audit buffer queue blocked: {self.buffer} events")
        pending.append(line)
        if len(pending) == 1 or len(pending) >= self.max_batch:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
            if len(self.pending) < self.max_batch and self.max_wait > 0:  # a batch fills, or its wait ends
                self._wake.clear()
                try:  # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel (close) that comes as the wake does
                    async with asyncio.timeout(self.max_wait):
                        await self._wake.wait()
                except TimeoutError:
                    pass
            if self._throttle is not None:
                await self._throttle.take()
            self._write(self.max_batch)

    def _write(self, n: int) -> None:
        pending = self.pending
        for _ in range(min(n, len(pending))):
            try:
                self.file.write(pending.popleft())
            except OSError as e:
                self.on_error(e)

    def close(self) -> None:
        """What is still buffered written now (the task stopped)."""
        self._task.cancel()
        self._write(len(self.pending))
