"""Embedded SQLite backend, the default.

WAL journal with synchronous=NORMAL: a committed write survives `kill -9` of the
process (not a power cut), and readers never block the writer. The global
revision continues across restarts: a create or update leaves it in its row
(mod_rev), and a transaction holding a deletion, which leaves no row, bumps the
meta row too; a start takes the higher of the two. (Bumping the meta row in every
transaction cost one more statement and WAL page per commit: ~21 k instructions.)

Group commit, as etcd batches its writes: the writes issued during one turn of
the event loop share one transaction, committed at the start of the next turn.
Each write is checked and executed at once (in revision order, seeing the
batch's earlier writes), but acknowledged, and published to watchers, only once
its transaction has committed; a failed commit fails every write of the batch.
A single transaction per write cost most of a write's time (76 us of CPU and
about 350 us with the loop blocked, against 39 and 143 us in batches of eight).

Shared mode (`shared=True`, for `nanokube up --api-workers N`): several processes
write one database, and the write lock is never held across a loop turn (that would
serialise the workers). The writes of a turn are queued and executed at its end in
one short BEGIN IMMEDIATE transaction, which first catches up on what the other
workers committed since this one's last revision, then checks each write's
precondition (a failed one fails that write only) and gives it the next global
revision; the meta row stays the one sequencer. Every write also goes to the
`changes` table (the change log), from which the other workers take it into their
history in revision order: when they are rung (a datagram after each commit, see
Doorbell), before a consistent read (`current_revision`, which the watch cache's
consistent reads wait for) and before their own writes. Events taken from the log
carry no `prev` (nothing reads it of a local store's events). The log keeps the
last LOG_WINDOW revisions; a worker that fell further behind starts its history
over, and its watch cache relists (History.reset).

Checkpoints run off the loop (see Checkpointer): SQLite's automatic one ran inside the COMMIT
that took the WAL past 1000 pages, copying them into the database with two fsyncs while the
loop waited (6-62 ms, 43 times in a 5000-pod benchmark run).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import mmap
import os
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from typing import AsyncIterator

from .history import History
from .interface import DELETE, KV, PUT, Event, KeyExists, KeyNotFound, RevisionMismatch, Store, Unavailable

log = logging.getLogger(__name__)

#: kv is a rowid table (the key's uniqueness an index of its own): SQLite stores a WITHOUT ROWID
#: table's whole rows in its key's B-tree, which suits rows of under a twentieth of a page, not
#: objects of a few KB, each of which then filled a leaf of the tree and split it (a pod create,
#: its status patch and its Event: 65-100 us of CPU against 48-60 here, and a database 37 instead
#: of 21 MiB). Databases made WITHOUT ROWID before keep their table; the statements are the same.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL,
  create_rev INTEGER NOT NULL,
  mod_rev INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('revision', 0);
"""

#: shared mode's change log: every write, by its revision (a deletion keeps the last value)
_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS changes (
  rev INTEGER PRIMARY KEY,
  key TEXT NOT NULL,
  deleted INTEGER NOT NULL,
  value BLOB NOT NULL,
  create_rev INTEGER NOT NULL
);
"""

#: revisions the change log keeps; trimmed in steps of LOG_TRIM (a DELETE per commit cost more)
LOG_WINDOW = 10_000
LOG_TRIM = 1_000
#: how long BEGIN IMMEDIATE blocks the loop waiting for another worker's commit (each holds the
#: lock for its batch's statements only, well under this) before trying again a loop turn later;
#: writes fail with Unavailable once they have waited BUSY_GIVE_UP in all
BUSY_WAIT = 0.05
BUSY_GIVE_UP = 10.0
#: bytes written (each write counted as its value and a page: a pod create of 3 KB adds 1.7 pages
#: to the WAL in batches of eight) after which the checkpointer runs: SQLite's own 1000 pages
CHECKPOINT_BYTES = 4 << 20
#: WAL pages past which a commit checkpoints on the loop too (see Checkpointer)
WAL_LIMIT = 16_000
_PAGE = 4096


def _acknowledge(batch: list[tuple[asyncio.Future, Event]]) -> None:
    for fut, event in batch:
        if not fut.done():
            fut.set_result(event.kv)


def _settle(results: list[tuple[asyncio.Future, Event | BaseException]]) -> None:
    for fut, result in results:
        if not fut.done():
            if isinstance(result, BaseException):
                fut.set_exception(result)
            else:
                fut.set_result(result.kv)


class Doorbell:
    """Tells the other workers of a shared database that it changed, and lets each learn cheaply
    whether it was told. Each worker has a flag (a one-byte file every worker maps) and a Unix
    datagram socket, in a directory named by the database's path (under the temporary directory:
    a data dir's path can exceed a socket address's 107 bytes). After a commit a worker raises
    each peer's flag and, only where it was down, sends a datagram that wakes the peer's loop; a
    peer lowers its flag before it catches up. So a busy peer costs a memory write per commit,
    not a system call on both sides (the datagrams alone were 7% of worker 0's time), and whether
    a catch-up is due is a memory read (see SQLiteStore.current_revision). A worker that starts
    greets the others and waits until each has welcomed it, so none commits unseen by it; a peer
    whose socket refuses (killed) is dropped and its files removed."""

    def __init__(self, db_path: str, on_ring: Callable[[], None]) -> None:
        digest = hashlib.sha256(os.path.abspath(db_path).encode()).hexdigest()[:16]
        self.dir = os.path.join(tempfile.gettempdir(), f"nanokube-bell-{digest}")
        os.makedirs(self.dir, exist_ok=True)
        self.name = f"{os.getpid()}-{id(self):x}"
        self.path = os.path.join(self.dir, self.name)
        self.on_ring = on_ring
        self.flag = self._map(self.path + ".flag", create=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind(self.path)
        #: peer name -> (a socket connected to it, its flag)
        self.peers: dict[str, tuple[socket.socket, mmap.mmap]] = {}
        self._unwelcomed: set[str] = set()
        self._welcomed = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._read)
        self._refresh()

    async def greet(self, timeout: float = 5.0) -> None:
        """Tells every peer of this worker; returns once each has answered, or after `timeout` (one
        that is stopped answers later), or once the bell is closed. It waits in its caller's task:
        wait_for's task of its own was left pending by a store closed meanwhile."""
        self._unwelcomed = set(self.peers)
        for name in list(self.peers):
            self._send(name, b"h" + self.name.encode())
        self._unwelcomed &= set(self.peers)
        if self._unwelcomed:
            try:
                async with asyncio.timeout(timeout):
                    await self._welcomed.wait()
            except TimeoutError:
                pass

    @staticmethod
    def _map(path: str, create: bool = False) -> mmap.mmap:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
        try:
            if create:
                os.ftruncate(fd, 1)
            return mmap.mmap(fd, 1)
        finally:
            os.close(fd)

    def _refresh(self) -> None:
        for name in os.listdir(self.dir):
            if name.endswith(".flag") or name == self.name or name in self.peers:
                continue
            path = os.path.join(self.dir, name)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            try:
                sock.connect(path)
                self.peers[name] = (sock, self._map(path + ".flag"))
            except (OSError, ValueError) as e:  # gone, or killed (its socket refuses), or not yet mapped
                sock.close()
                if isinstance(e, ConnectionRefusedError):
                    self._remove(name)

    def _remove(self, name: str) -> None:
        for path in (os.path.join(self.dir, name), os.path.join(self.dir, name + ".flag")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(256)
            except (BlockingIOError, InterruptedError):
                break
            if data[:1] == b"h":  # a new worker: a peer from now on, and told so
                self._refresh()
                self._send(data[1:].decode(), b"w" + self.name.encode())
            elif data[:1] == b"w":
                self._unwelcomed.discard(data[1:].decode())
                if not self._unwelcomed:
                    self._welcomed.set()
        if self.rung():
            self.on_ring()

    def rung(self) -> bool:
        """Whether a peer committed since the last call. A worker rings before it acknowledges a
        write, so a request that follows an acknowledged write through another worker finds the
        flag raised, or lowered by a catch-up that came after that write."""
        if self.flag[0]:
            self.flag[0] = 0
            return True
        return False

    def ring(self) -> None:
        for name, (_, flag) in list(self.peers.items()):
            if not flag[0]:
                flag[0] = 1
                self._send(name, b"r")

    def _send(self, name: str, data: bytes) -> None:
        peer = self.peers.get(name)
        if peer is None:
            return
        try:
            peer[0].send(data)
        except BlockingIOError:  # its queue is full: it has datagrams to read already
            pass
        except OSError as e:
            del self.peers[name]
            peer[0].close()
            peer[1].close()
            if isinstance(e, ConnectionRefusedError):  # nobody reads it: a killed worker's
                self._remove(name)

    def close(self) -> None:
        self._welcomed.set()  # a greeting still waiting ends
        self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
        for sock, flag in self.peers.values():
            sock.close()
            flag.close()
        self.flag.close()
        self._remove(self.name)
        try:
            os.rmdir(self.dir)  # the last worker's
        except OSError:
            pass


class Checkpointer:
    """Copies the WAL into the database from a thread with a connection of its own, instead of
    SQLite's automatic checkpoint inside a COMMIT on the loop (`PRAGMA wal_autocheckpoint=0`).
    Its checkpoints are PASSIVE, as the automatic one: they take no lock a writer or a reader
    waits for, and SQLite releases the GIL while they copy and sync. Durability is unchanged: a
    write is in the WAL, and acknowledged, once its COMMIT returns, whoever copies it on.

    The WAL is written from its start again only by a write transaction that begins when all of
    it was copied. The automatic checkpoint ran between a COMMIT and the next BEGIN; the
    thread's checkpoints end at any moment, mostly while the loop's next transaction is open
    already (a turn's writes commit at the start of the next), so under a steady stream of
    writes the WAL would grow without end. Once it is past WAL_LIMIT pages, the thread checkpoints once more
    (what came in meanwhile) and sets `behind`, and the store's next commit checkpoints what
    is left (a few milliseconds' writes) on the loop, between its COMMIT and its next BEGIN, as
    SQLite did. Every worker of a shared database runs one; SQLite runs one checkpoint at a
    time (another returns at once)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._due = threading.Event()
        self._closing = False
        #: the WAL is past WAL_LIMIT pages (see above)
        self.behind = False
        #: the thread failed (and set `behind`): the loop's connection checkpoints by itself again
        self.failed = False
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """About CHECKPOINT_BYTES were committed since the last poke."""
        self._due.set()

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self._path, isolation_level=None)
            try:
                self._serve(db)
            finally:
                db.close()
        except Exception:
            log.exception("the checkpoint thread of %s failed; SQLite's automatic checkpoint takes over", self._path)
            self.failed = self.behind = True

    def _serve(self, db: sqlite3.Connection) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            if self._closing:
                return
            if self.behind:  # the checkpoint lock is left to the loop's part
                continue
            wal = checkpoint(db)
            if wal is not None and wal[0] > WAL_LIMIT:
                self.behind = True
                checkpoint(db)  # what came in meanwhile, so that the loop's part is smaller

    def close(self) -> None:
        self._closing = True
        self._due.set()
        self._thread.join()


def checkpoint(db: sqlite3.Connection) -> tuple[int, int] | None:
    """A PASSIVE checkpoint: the WAL's pages and how many of them are copied; None when it could
    not run (another connection's checkpoint ran)."""
    try:
        busy, pages, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error:
        return None
    return None if busy else (pages, copied)


_CREATE, _UPDATE, _DELETE = 0, 1, 2


class SQLiteStore(Store):
    def __init__(self, path: str, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self._db: sqlite3.Connection | None = None
        #: the cursor the loop's statements run on: one made per statement (`Connection.execute`)
        #: cost ~1.4 k instructions, a few per write (each result is read whole at once)
        self._cur: sqlite3.Cursor | None = None
        self._rev = 0
        #: the revision of the last committed write (self._rev runs ahead while a batch is open)
        self._committed = 0
        #: the open transaction's writes, acknowledged when it commits: (future, event)
        self._batch: list[tuple[asyncio.Future, Event]] | None = None
        #: the open transaction holds a deletion: its commit bumps the meta row
        self._deleted = False
        self._history: History | None = None
        #: shared mode: the writes queued for the end of this turn (op, key, value, expected revision, future, prev),
        #: when they first waited for the lock (0: not yet), the log's oldest revision, the doorbell
        self._queued: list[tuple] | None = None
        self._busy_since = 0.0
        self._log_start = 0
        self._bell: Doorbell | None = None
        self._checkpointer: Checkpointer | None = None
        #: bytes committed since the checkpointer was last poked (each write: its value and a page)
        self._unchecked = 0

    def size(self) -> int | None:
        """The database file's size (one stat, cheap enough for every scrape); its WAL apart, as
        etcd's dbSize is its bolt file's."""
        try:
            return os.stat(self.path).st_size
        except OSError:
            return None

    async def start(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # a clean close checkpoints the WAL and removes it: one left with frames means the last
        # process was killed, and opening the database replays its committed transactions
        wal = self.path + "-wal"
        left = 0 if self.shared or not os.path.exists(wal) else os.path.getsize(wal)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                             timeout=BUSY_WAIT if self.shared else 5.0)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.executescript(_SCHEMA + (_LOG_SCHEMA if self.shared else ""))
        self._db = db
        self._cur = db.cursor()
        self._checkpointer = Checkpointer(self.path)
        self._rev = self._committed = max(db.execute("SELECT value FROM meta WHERE name='revision'").fetchone()[0],
                                          db.execute("SELECT max(mod_rev) FROM kv").fetchone()[0] or 0)
        self._history = History(self._rev)
        if left:
            log.warning("%s was not closed cleanly: recovered its write-ahead log (%d KiB of committed "
                        "writes), at revision %d", self.path, left >> 10, self._rev)
        if self.shared:
            self._log_start = db.execute("SELECT min(rev) FROM changes").fetchone()[0] or self._rev
            self._bell = Doorbell(self.path, self._catch_up)
            await self._bell.greet()
            if self._db is None:  # closed while it greeted
                return
            self._catch_up()  # what the others committed before they knew of this worker

    async def close(self) -> None:
        if self._batch is not None:
            self._commit()
        if self._queued:
            self._db.execute(f"PRAGMA busy_timeout={int(BUSY_GIVE_UP * 1000)}")
            self._flush()
            if self._queued:  # still locked after all that time
                _settle([(op[4], Unavailable("database locked")) for op in self._queued])
                self._queued = None
        if self._bell is not None:
            self._bell.close()
            self._bell = None
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        if self._history:
            self._history.close()
        if self._db:
            self._db.close()
            self._db = self._cur = None

    def _row(self, key: str) -> KV | None:
        r = self._cur.execute("SELECT value, create_rev, mod_rev FROM kv WHERE key=?", (key,)).fetchone()
        return KV(key, r[0], r[1], r[2]) if r else None

    async def get(self, key: str) -> KV | None:
        return self._row(key)

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        if self._batch is not None:  # a list is consistent with committed writes only
            self._commit()
        db = self._db
        if self.shared:  # the rows and the history up to the revision they reflect, from one snapshot
            db.execute("BEGIN")
            try:
                self._catch_up()
                rows = self._list_rows(prefix)
            finally:
                db.execute("COMMIT")
        else:
            rows = self._list_rows(prefix)
        return [KV(*r) for r in rows], self._rev

    def _list_rows(self, prefix: str) -> list[tuple]:
        return self._db.execute(
            "SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, prefix + "\U0010ffff"),
        ).fetchall()

    def _write(self, sql: str, args: tuple) -> int:
        """Executes one write in the open batch (opening one, and scheduling its commit, if none is)."""
        if self._batch is None:
            self._cur.execute("BEGIN IMMEDIATE")
            self._batch = []
            asyncio.get_running_loop().call_soon(self._commit)
        self._cur.execute(sql, args)
        self._rev += 1
        return self._rev

    async def _acknowledged(self, event: Event) -> KV:
        """Waits until the batch holding `event` has committed."""
        fut = asyncio.get_running_loop().create_future()
        self._batch.append((fut, event))
        return await fut

    def _commit(self) -> None:
        batch, self._batch = self._batch, None
        if batch is None:
            return
        db = self._db
        try:
            if self._deleted:
                self._cur.execute("UPDATE meta SET value=? WHERE name='revision'", (self._rev,))
            self._cur.execute("COMMIT")
        except BaseException as e:
            self._deleted = False
            if db.in_transaction:
                db.execute("ROLLBACK")
            self._rev = self._committed
            for fut, _ in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        self._committed = self._rev
        self._deleted = False
        size = self._unchecked
        for _, event in batch:
            size += len(event.kv.value) + _PAGE
            self._history.append(event)
        self._checkpoint_after_commit(size)
        # acknowledged a turn later, once the watch cache has taken the events: as with one
        # transaction per write, watchers are handed an event before its writer is answered
        asyncio.get_running_loop().call_soon(_acknowledge, batch)

    def _checkpoint_after_commit(self, size: int) -> None:
        """After a commit of `size` bytes since the last poke: pokes the checkpointer when due,
        and checkpoints here when it is behind."""
        if size >= CHECKPOINT_BYTES:
            size = 0
            self._checkpointer.poke()
        self._unchecked = size
        ckpt = self._checkpointer
        if ckpt.behind:  # see Checkpointer: what the thread left, here
            if ckpt.failed:
                self._db.execute("PRAGMA wal_autocheckpoint=1000")
                ckpt.failed = ckpt.behind = False
                return
            wal = checkpoint(self._db)
            if wal is not None and wal[1] >= wal[0]:
                ckpt.behind = False

    # --- shared mode ------------------------------------------------------

    def _queue(self, op: int, key: str, value: bytes, expected: int | None, prev: KV | None = None) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self._queued is None:
            self._queued = []
            loop.call_soon(self._flush)
        self._queued.append((op, key, value, expected, fut, prev))
        return fut

    def _catch_up(self) -> None:
        """Takes the writes the other workers committed since this one's revision into the history."""
        rows = self._db.execute("SELECT rev, key, deleted, value, create_rev FROM changes WHERE rev > ? ORDER BY rev",
                                (self._rev,)).fetchall()
        if not rows:
            return
        if rows[0][0] != self._rev + 1:  # trimmed before this worker read them: start over from the newest
            self._rev = self._committed = rows[-1][0]
            self._history.reset(self._rev)
            return
        history = self._history
        for rev, key, deleted, value, create_rev in rows:
            history.append(Event(DELETE if deleted else PUT, KV(key, value, create_rev, rev), None))
        self._rev = self._committed = rows[-1][0]

    def _flush(self) -> None:
        """Executes the queued writes in one transaction (see the module's docstring)."""
        ops = self._queued
        if not ops:
            return
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:  # another worker commits: again a turn later, within bounds
            now = time.monotonic()
            self._busy_since = self._busy_since or now
            if now - self._busy_since < BUSY_GIVE_UP:
                asyncio.get_running_loop().call_later(0.001, self._flush)
                return
            self._queued, self._busy_since = None, 0.0
            _settle([(op[4], Unavailable(f"database locked: {e}")) for op in ops])
            return
        self._queued, self._busy_since = None, 0.0
        results: list[tuple[asyncio.Future, Event | BaseException]] = []
        events: list[Event] = []
        try:
            self._catch_up()
            rev = self._rev
            for op, key, value, expected, fut, prev in ops:
                event = self._execute(op, key, value, expected, rev + 1, prev)
                if isinstance(event, Event):
                    rev += 1
                    kv = event.kv
                    self._cur.execute("INSERT INTO changes VALUES (?,?,?,?,?)",
                               (rev, key, event.type == DELETE, kv.value, kv.create_revision))
                    events.append(event)
                results.append((fut, event))
            if events:
                db.execute("UPDATE meta SET value=? WHERE name='revision'", (rev,))
                if rev - self._log_start > LOG_WINDOW + LOG_TRIM:
                    db.execute("DELETE FROM changes WHERE rev <= ?", (rev - LOG_WINDOW,))
                    self._log_start = rev - LOG_WINDOW
            db.execute("COMMIT")
        except BaseException as e:
            if db.in_transaction:
                db.execute("ROLLBACK")
            _settle([(op[4], e) for op in ops])
            return
        self._rev = self._committed = rev
        size = self._unchecked
        for event in events:
            size += len(event.kv.value) + _PAGE
            self._history.append(event)
        if events:
            self._bell.ring()
            self._checkpoint_after_commit(size)
        asyncio.get_running_loop().call_soon(_settle, results)

    def _execute(self, op: int, key: str, value: bytes, expected: int | None, rev: int,
                 prev: KV | None) -> Event | BaseException:
        """One queued write at revision `rev`, inside the transaction: its event, or why it failed.
        A `prev` (at the expected revision) is the row if the conditional UPDATE (DELETE) changes it."""
        cur = self._cur
        if op == _CREATE:
            try:
                cur.execute("INSERT INTO kv VALUES (?,?,?,?)", (key, value, rev, rev))
            except sqlite3.IntegrityError:
                return KeyExists(key)
            return Event(PUT, KV(key, value, rev, rev), None)
        if prev is not None:
            if op == _UPDATE:
                cur.execute("UPDATE kv SET value=?, mod_rev=? WHERE key=? AND mod_rev=?",
                            (value, rev, key, prev.mod_revision))
                if cur.rowcount == 1:
                    return Event(PUT, KV(key, value, prev.create_revision, rev), prev)
            else:
                cur.execute("DELETE FROM kv WHERE key=? AND mod_rev=?", (key, prev.mod_revision))
                if cur.rowcount == 1:
                    return Event(DELETE, KV(key, prev.value, prev.create_revision, rev), prev)
        now = self._row(key)
        if now is None:
            return KeyNotFound(key)
        if expected is not None and now.mod_revision != expected:
            return RevisionMismatch(key, now)
        if op == _UPDATE:
            cur.execute("UPDATE kv SET value=?, mod_rev=? WHERE key=?", (value, rev, key))
            return Event(PUT, KV(key, value, now.create_revision, rev), now)
        cur.execute("DELETE FROM kv WHERE key=?", (key,))
        return Event(DELETE, KV(key, now.value, now.create_revision, rev), now)

    # --- writes -------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KV:
        if self.shared:
            return await self._queue(_CREATE, key, value, None)
        rev = self._rev + 1
        try:  # the primary key refuses an existing key: no read first (the statement alone is undone)
            self._write("INSERT INTO kv VALUES (?,?,?,?)", (key, value, rev, rev))
        except sqlite3.IntegrityError:
            raise KeyExists(key) from None
        return await self._acknowledged(Event(PUT, KV(key, value, rev, rev), None))

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        """`prev` at the expected revision (the watch cache's KV) is taken as the event's prev without
        reading the row first (~26 k instructions). (A map of the 8,192 keys written last served
        that before; the scheduler's status patches at 5,000 nodes, seconds behind the creates,
        mostly missed it, and every write paid for its upkeep.)"""
        if prev is None or prev.mod_revision != expected_mod_revision or prev.key != key:
            prev = None
        if self.shared:
            return await self._queue(_UPDATE, key, value, expected_mod_revision, prev)
        if prev is not None:
            # the row is that KV if its revision is still the one expected, which the UPDATE checks
            rev = self._write("UPDATE kv SET value=?, mod_rev=? WHERE key=? AND mod_rev=?",
                              (value, self._rev + 1, key, expected_mod_revision))
            if self._cur.rowcount == 1:
                return await self._acknowledged(Event(PUT, KV(key, value, prev.create_revision, rev), prev))
            self._rev -= 1  # (no row changed: a write since, this batch's uncommitted ones too, moved it) read below
        cur = self._row(key)
        if cur is None:
            raise KeyNotFound(key)
        if cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        rev = self._rev + 1
        self._write("UPDATE kv SET value=?, mod_rev=? WHERE key=?", (value, rev, key))
        return await self._acknowledged(Event(PUT, KV(key, value, cur.create_revision, rev), cur))

    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        """`prev` as `update`'s: the deleted row if the DELETE conditional on its revision removes
        one (no read first); without an expected revision, a stale prev leaves the row read."""
        if prev is not None and (prev.key != key or expected_mod_revision not in (None, prev.mod_revision)):
            prev = None
        if self.shared:
            return await self._queue(_DELETE, key, b"", expected_mod_revision, prev)
        if prev is not None:
            rev = self._write("DELETE FROM kv WHERE key=? AND mod_rev=?", (key, prev.mod_revision))
            if self._cur.rowcount == 1:
                self._deleted = True
                return await self._acknowledged(Event(DELETE, KV(key, prev.value, prev.create_revision, rev), prev))
            self._rev -= 1  # (no row removed: a write since moved it) read below
        cur = self._row(key)
        if cur is None:
            raise KeyNotFound(key)
        if expected_mod_revision is not None and cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        rev = self._write("DELETE FROM kv WHERE key=?", (key,))
        self._deleted = True
        return await self._acknowledged(Event(DELETE, KV(key, cur.value, cur.create_revision, rev), cur))

    async def current_revision(self) -> int:
        """The latest revision; in shared mode, that of every write any worker has acknowledged (a
        consistent read waits for it): each rang this worker before acknowledging, so a catch-up is
        due only after a ring (a memory read instead of a query of the change log)."""
        if self.shared and self._bell.rung():
            self._catch_up()
        return self._rev

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self._history.watch(from_revision)

    def follow(self, from_revision: int, apply: Callable[[Event], None],
               lost: Callable[[], None] | None = None) -> Callable[[], None]:
        return self._history.follow(from_revision, apply, lost)

    async def compact(self, revision: int) -> None:
        self._history.compact(revision)

    @property
    def compacted_revision(self) -> int:
        return self._history.compacted_revision
