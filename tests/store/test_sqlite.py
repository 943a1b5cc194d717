"""The SQLite store's table: a rowid table for new databases; one made WITHOUT ROWID before is used as it is."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from nanokube.store.interface import DELETE, KeyExists, RevisionMismatch
from nanokube.store.sqlite import SQLiteStore


def _one(path: str, query: str):
    """The first column of `query`'s first row, read on a connection of its own."""
    db = sqlite3.connect(path)
    try:
        return db.execute(query).fetchone()[0]
    finally:
        db.close()


def _kv_sql(path: str) -> str:
    return _one(path, "SELECT sql FROM sqlite_master WHERE name='kv'")


async def _use(path: str) -> None:
    store = SQLiteStore(path)
    await store.start()
    try:
        kv = await store.create("/registry/pods/ns/a", b"a" * 5000)
        with pytest.raises(KeyExists):
            await store.create("/registry/pods/ns/a", b"again")
        await store.update("/registry/pods/ns/a", b"b" * 5000, kv.mod_revision)
        await store.create("/registry/pods/ns/b", b"c")
        await store.delete("/registry/pods/ns/b")
        kvs, rev = await store.list("/registry/pods/")
        assert [(k.key, k.value[:1], k.create_revision) for k in kvs] == [("/registry/pods/ns/a", b"b", kv.mod_revision)]
    finally:
        await store.close()
    reopened = SQLiteStore(path)
    await reopened.start()
    try:
        assert await reopened.current_revision() == rev
        assert (await reopened.get("/registry/pods/ns/a")).value == b"b" * 5000
    finally:
        await reopened.close()


async def test_a_new_database_keeps_objects_in_a_rowid_table(tmp_path):
    path = str(tmp_path / "new.db")
    await _use(path)
    assert "WITHOUT ROWID" not in _kv_sql(path)


async def test_a_database_made_without_rowid_is_used_as_it_is(tmp_path):
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, create_rev INTEGER NOT NULL, "
                     "mod_rev INTEGER NOT NULL) WITHOUT ROWID;")
    db.close()
    await _use(path)
    assert "WITHOUT ROWID" in _kv_sql(path)


async def test_reads_and_writes_on_the_stores_one_cursor_leave_no_snapshot_open(tmp_path):
    """Every statement runs on one cursor (SQLiteStore._cur) and reads its one row at once, so none
    keeps a read transaction open between turns: another connection's checkpoint can copy and truncate
    the whole WAL, and what that connection wrote is read at once."""
    path = str(tmp_path / "db")
    store = SQLiteStore(path)
    await store.start()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        kv = await store.create("/registry/pods/ns/a", b"a")
        await store.update("/registry/pods/ns/a", b"b", kv.mod_revision)
        with pytest.raises(RevisionMismatch) as stale:
            await store.update("/registry/pods/ns/a", b"c", kv.mod_revision)
        assert (stale.value.current.value, stale.value.current.create_revision) == (b"b", kv.mod_revision)
        assert (await store.get("/registry/pods/ns/a")).value == b"b"
        other.execute("UPDATE kv SET value=x'7a' WHERE key='/registry/pods/ns/a'")
        assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # not busy: no reader holds the WAL
        assert (await store.get("/registry/pods/ns/a")).value == b"z"
    finally:
        other.close()
        await store.close()


def _meta_revision(path: str) -> int:
    return _one(path, "SELECT value FROM meta WHERE name='revision'")


@pytest.mark.parametrize("shared", [False, True])
async def test_the_revision_goes_on_across_restarts_whether_a_deletion_or_an_update_was_last(tmp_path, shared):
    """A create or update leaves its revision in its row; only a transaction holding a deletion
    bumps the meta row. A start (either mode) takes the higher, so revisions never repeat."""
    path = str(tmp_path / "db")
    store = SQLiteStore(path)
    await store.start()
    try:
        a = await store.create("/registry/pods/ns/a", b"a")
        b = await store.create("/registry/pods/ns/b", b"b")
        gone = await store.delete("/registry/pods/ns/b", b.mod_revision)
        after_delete = await store.current_revision()
        assert gone.mod_revision == after_delete
        updated = await store.update("/registry/pods/ns/a", b"a2", a.mod_revision)
        last = await store.current_revision()
        assert updated.mod_revision == last > after_delete
    finally:
        await store.close()
    assert _meta_revision(path) == after_delete  # the update's transaction left the meta row alone
    reopened = SQLiteStore(path, shared=shared)
    await reopened.start()
    try:
        assert await reopened.current_revision() == last
        c = await reopened.create("/registry/pods/ns/c", b"c")
        assert c.mod_revision == last + 1
        gone = await reopened.delete("/registry/pods/ns/c", c.mod_revision)
    finally:
        await reopened.close()
    again = SQLiteStore(path)
    await again.start()
    try:  # the deletion was the last write: its revision is the meta row's
        assert await again.current_revision() == gone.mod_revision == last + 2
        assert (await again.create("/registry/pods/ns/d", b"d")).mod_revision == last + 3
    finally:
        await again.close()


async def test_an_update_handed_the_kv_it_replaces_reads_no_row_and_the_statement_checks_its_revision(tmp_path):
    """An update handed the key's KV at the expected revision (the watch cache's) runs the
    conditional UPDATE alone and publishes that KV as its event's prev; the UPDATE itself checks
    the revision: a write of the same turn's open batch, or one by another connection, makes it a
    RevisionMismatch carrying the row, read then, and nothing is written. Without a KV the row is
    read first."""
    path = str(tmp_path / "db")
    store = SQLiteStore(path)
    await store.start()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        kv = await store.create("/registry/pods/ns/a", b"a")
        events, statements = [], []
        store.follow(kv.mod_revision, events.append)
        store._db.set_trace_callback(statements.append)
        first, second = await asyncio.gather(store.update("/registry/pods/ns/a", b"b", kv.mod_revision, kv),
                                             store.update("/registry/pods/ns/a", b"c", kv.mod_revision, kv),
                                             return_exceptions=True)
        assert (first.value, first.create_revision, first.mod_revision) == (b"b", kv.mod_revision, kv.mod_revision + 1)
        assert isinstance(second, RevisionMismatch) and second.current.value == b"b"
        assert [(e.kv, e.prev) for e in events] == [(first, kv)]
        assert len([q for q in statements if q.startswith("SELECT")]) == 1  # the refused one's
        other.execute("UPDATE kv SET value=x'7a', mod_rev=mod_rev+100 WHERE key='/registry/pods/ns/a'")
        with pytest.raises(RevisionMismatch) as stale:
            await store.update("/registry/pods/ns/a", b"d", first.mod_revision, first)
        assert (stale.value.current.value, stale.value.current.mod_revision) == (b"z", first.mod_revision + 100)
        assert (await store.get("/registry/pods/ns/a")).value == b"z" and len(events) == 1
        statements.clear()
        plain = await store.update("/registry/pods/ns/a", b"e", first.mod_revision + 100)
        assert [q for q in statements if q.startswith("SELECT")]
        assert [(e.kv, e.prev.value) for e in events[1:]] == [(plain, b"z")]
    finally:
        other.close()
        await store.close()


async def test_a_delete_handed_the_kv_it_removes_reads_no_row_and_the_statement_checks_its_revision(tmp_path):
    """A delete handed the key's KV (the watch cache's) runs the DELETE conditional on its revision
    alone, and the event's prev is that KV; a row another connection moved makes a conditional
    delete a RevisionMismatch carrying the row, read then, and an unconditional one deletes (and
    publishes) the row as it is. Without a KV the row is read first."""
    path = str(tmp_path / "db")
    store = SQLiteStore(path)
    await store.start()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        a, b, c = [await store.create(f"/registry/pods/ns/{n}", n.encode()) for n in "abc"]
        events, statements = [], []
        store.follow(c.mod_revision, events.append)
        store._db.set_trace_callback(statements.append)
        gone = await store.delete(a.key, a.mod_revision, a)
        assert (gone.value, gone.create_revision, gone.mod_revision) == (b"a", a.create_revision, c.mod_revision + 1)
        assert [(e.type, e.kv, e.prev) for e in events] == [(DELETE, gone, a)]
        assert not [q for q in statements if q.startswith("SELECT")]
        other.execute("UPDATE kv SET value=x'7a', mod_rev=mod_rev+100 WHERE key IN ('/registry/pods/ns/b', '/registry/pods/ns/c')")
        with pytest.raises(RevisionMismatch) as stale:
            await store.delete(b.key, b.mod_revision, b)
        assert (stale.value.current.value, stale.value.current.mod_revision) == (b"z", b.mod_revision + 100)
        assert (await store.get(b.key)).value == b"z" and len(events) == 1
        statements.clear()
        moved = await store.delete(c.key, None, c)
        assert [q for q in statements if q.startswith("SELECT")]
        assert [(e.kv, e.prev.value, e.prev.mod_revision) for e in events[1:]] == [(moved, b"z", c.mod_revision + 100)]
        assert moved.value == b"z" and await store.get(c.key) is None
    finally:
        other.close()
        await store.close()
