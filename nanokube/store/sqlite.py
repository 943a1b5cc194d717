"""Embedded SQLite backend, the default.

WAL journal with synchronous=NORMAL: a committed write survives `kill -9` of the
process (not a power cut), and readers never block the writer. The global
revision lives in its own row, bumped in the same transaction as the write, so
the sequence continues across restarts even after deletions.

Group commit, as etcd batches its writes: the writes issued during one turn of
the event loop share one transaction, committed at the start of the next turn.
Each write is checked and executed at once (in revision order, seeing the
batch's earlier writes), but acknowledged, and published to watchers, only once
its transaction has committed; a failed commit fails every write of the batch.
A single transaction per write cost most of a write's time (76 us of CPU and
about 350 us with the loop blocked, against 39 and 143 us in batches of eight).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from typing import AsyncIterator

from .history import History
from .interface import DELETE, KV, PUT, Event, KeyExists, KeyNotFound, RevisionMismatch, Store

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


def _acknowledge(batch: list[tuple[asyncio.Future, Event]]) -> None:
    for fut, event in batch:
        if not fut.done():
            fut.set_result(event.kv)


class SQLiteStore(Store):
    def __init__(self, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._rev = 0
        #: the revision of the last committed write (self._rev runs ahead while a batch is open)
        self._committed = 0
        #: the open transaction's writes, acknowledged when it commits: (future, event)
        self._batch: list[tuple[asyncio.Future, Event]] | None = None
        self._history: History | None = None

    async def start(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        self._db = db
        self._rev = self._committed = db.execute("SELECT value FROM meta WHERE name='revision'").fetchone()[0]
        self._history = History(self._rev)

    async def close(self) -> None:
        if self._batch is not None:
            self._commit()
        if self._history:
            self._history.close()
        if self._db:
            self._db.close()
            self._db = None

    def _row(self, key: str) -> KV | None:
        r = self._db.execute("SELECT value, create_rev, mod_rev FROM kv WHERE key=?", (key,)).fetchone()
        return KV(key, r[0], r[1], r[2]) if r else None

    async def get(self, key: str) -> KV | None:
        return self._row(key)

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        if self._batch is not None:  # a list is consistent with committed writes only
            self._commit()
        rows = self._db.execute(
            "SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, prefix + "\U0010ffff"),
        ).fetchall()
        return [KV(*r) for r in rows], self._rev

    def _write(self, sql: str, args: tuple) -> int:
        """Executes one write in the open batch (opening one, and scheduling its commit, if none is)."""
        if self._batch is None:
            self._db.execute("BEGIN IMMEDIATE")
            self._batch = []
            asyncio.get_running_loop().call_soon(self._commit)
        self._db.execute(sql, args)
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
            db.execute("UPDATE meta SET value=? WHERE name='revision'", (self._rev,))
            db.execute("COMMIT")
        except BaseException as e:
            if db.in_transaction:
                db.execute("ROLLBACK")
            self._rev = self._committed
            for fut, _ in batch:
                if not fut.done():
                    fut.set_exception(e)
            return
        self._committed = self._rev
        for _, event in batch:
            self._history.append(event)
        # acknowledged a turn later, once the watch cache has taken the events: as with one
        # transaction per write, watchers are handed an event before its writer is answered
        asyncio.get_running_loop().call_soon(_acknowledge, batch)

    async def create(self, key: str, value: bytes) -> KV:
        rev = self._rev + 1
        try:  # the primary key refuses an existing key: no read first (the statement alone is undone)
            self._write("INSERT INTO kv VALUES (?,?,?,?)", (key, value, rev, rev))
        except sqlite3.IntegrityError:
            raise KeyExists(key) from None
        return await self._acknowledged(Event(PUT, KV(key, value, rev, rev), None))

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KV:
        cur = self._row(key)
        if cur is None:
            raise KeyNotFound(key)
        if cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        rev = self._rev + 1
        self._write("UPDATE kv SET value=?, mod_rev=? WHERE key=?", (value, rev, key))
        return await self._acknowledged(Event(PUT, KV(key, value, cur.create_revision, rev), cur))

    async def delete(self, key: str, expected_mod_revision: int | None = None) -> KV:
        cur = self._row(key)
        if cur is None:
            raise KeyNotFound(key)
        if expected_mod_revision is not None and cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        rev = self._write("DELETE FROM kv WHERE key=?", (key,))
        return await self._acknowledged(Event(DELETE, KV(key, cur.value, cur.create_revision, rev), cur))

    async def current_revision(self) -> int:
        return self._rev

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self._history.watch(from_revision)

    def follow(self, from_revision: int, apply: Callable[[Event], None]) -> Callable[[], None]:
        return self._history.follow(from_revision, apply)

    async def compact(self, revision: int) -> None:
        self._history.compact(revision)

    @property
    def compacted_revision(self) -> int:
        return self._history.compacted_revision
