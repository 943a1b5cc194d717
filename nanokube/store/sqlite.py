"""Embedded SQLite backend, the default.

WAL journal with synchronous=NORMAL: a committed write survives `kill -9` of the
process (not a power cut), and readers never block the writer. The global
revision lives in its own row, bumped in the same transaction as the write, so
the sequence continues across restarts even after deletions.
"""

from __future__ import annotations

import os
import sqlite3
from typing import AsyncIterator

from .history import History
from .interface import DELETE, KV, PUT, Event, KeyExists, KeyNotFound, RevisionMismatch, Store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL,
  create_rev INTEGER NOT NULL,
  mod_rev INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('revision', 0);
"""


class SQLiteStore(Store):
    def __init__(self, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._rev = 0
        self._history: History | None = None

    async def start(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        self._db = db
        self._rev = db.execute("SELECT value FROM meta WHERE name='revision'").fetchone()[0]
        self._history = History(self._rev)

    async def close(self) -> None:
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
        rows = self._db.execute(
            "SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, prefix + "\U0010ffff"),
        ).fetchall()
        return [KV(*r) for r in rows], self._rev

    def _write(self, sql: str, args: tuple) -> int:
        rev = self._rev + 1
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(sql, args)
            db.execute("UPDATE meta SET value=? WHERE name='revision'", (rev,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._rev = rev
        return rev

    async def create(self, key: str, value: bytes) -> KV:
        if self._row(key) is not None:
            raise KeyExists(key)
        rev = self._rev + 1
        self._write("INSERT INTO kv VALUES (?,?,?,?)", (key, value, rev, rev))
        kv = KV(key, value, rev, rev)
        self._history.append(Event(PUT, kv, None))
        return kv

    async def update(self, key: str, value: bytes, expected_mod_revision: int) -> KV:
        cur = self._row(key)
        if cur is None:
            raise KeyNotFound(key)
        if cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        rev = self._rev + 1
        self._write("UPDATE kv SET value=?, mod_rev=? WHERE key=?", (value, rev, key))
        kv = KV(key, value, cur.create_revision, rev)
        self._history.append(Event(PUT, kv, cur))
        return kv

    async def delete(self, key: str, expected_mod_revision: int | None = None) -> KV:
        cur = self._row(key)
        if cur is None:
            raise KeyNotFound(key)
        if expected_mod_revision is not None and cur.mod_revision != expected_mod_revision:
            raise RevisionMismatch(key, cur)
        rev = self._write("DELETE FROM kv WHERE key=?", (key,))
        gone = KV(key, cur.value, cur.create_revision, rev)
        self._history.append(Event(DELETE, gone, cur))
        return gone

    async def current_revision(self) -> int:
        return self._rev

    def watch(self, from_revision: int) -> AsyncIterator[Event]:
        return self._history.watch(from_revision)

    async def compact(self, revision: int) -> None:
        self._history.compact(revision)

    @property
    def compacted_revision(self) -> int:
        return self._history.compacted_revision
