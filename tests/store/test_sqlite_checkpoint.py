"""The SQLite store's WAL is copied into the database by a thread of its own (Checkpointer), not in
a COMMIT on the loop, and stays bounded under a steady stream of writes."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

from nanokube.store import sqlite
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import eventually, tries

VALUE = b"x" * 3000


def _record_checkpoints(monkeypatch) -> list[tuple[str, tuple[int, int] | None]]:
    """Each checkpoint's thread and result."""
    done: list[tuple[str, tuple[int, int] | None]] = []
    real = sqlite.checkpoint

    def checkpoint(db):
        result = real(db)
        done.append((threading.current_thread().name, result))
        return result

    monkeypatch.setattr(sqlite, "checkpoint", checkpoint)
    return done


async def _write(store: SQLiteStore, start: int, count: int, batch: int = 8) -> None:
    """Creates keys start..start+count-1, `batch` of them per loop turn (one transaction each)."""
    for i in range(start, start + count, batch):
        await asyncio.gather(*(store.create(f"/registry/pods/ns/p{j:06d}", VALUE) for j in range(i, i + batch)))


async def _wal_pages(path: str) -> int:
    """The WAL's pages, as a PASSIVE checkpoint of a connection of the test's own counts them,
    retried while a store's checkpoint runs (it is then busy)."""
    db = sqlite3.connect(path)
    try:
        for _ in tries():
            busy, pages, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if not busy:
                return pages
            await asyncio.sleep(0.01)
    finally:
        db.close()
    raise AssertionError("a checkpoint stayed busy")


async def test_the_wal_is_checkpointed_by_the_thread_not_by_a_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite, "CHECKPOINT_BYTES", 64 << 10)
    done = _record_checkpoints(monkeypatch)
    store = SQLiteStore(str(tmp_path / "state.db"))
    await store.start()
    try:
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        await _write(store, 0, 400)

        async def copied_frames():
            # a PASSIVE checkpoint racing the writes may copy only part of the WAL (CI's loaded
            # runners saw every one partial), so what counts is that the thread's copied frames
            return any(r and r[1] > 0 for _, r in done)

        await eventually(copied_frames)
        assert {name for name, _ in done} == {"sqlite-checkpoint"}
    finally:
        await store.close()


async def test_past_the_wal_limit_a_commit_copies_what_is_left_and_the_wal_starts_over(tmp_path, monkeypatch):
    """The thread's checkpoints end while the loop's next transaction is open, so by them alone the
    WAL would never be written from its start again under a steady stream of writes. Past
    WAL_LIMIT pages the thread says it is `behind`; the next commit then checkpoints on the
    loop, and the transaction after it starts the WAL over."""
    monkeypatch.setattr(sqlite, "CHECKPOINT_BYTES", 64 << 10)
    monkeypatch.setattr(sqlite, "WAL_LIMIT", 64)
    done = _record_checkpoints(monkeypatch)
    path = str(tmp_path / "state.db")
    store = SQLiteStore(path)
    await store.start()
    written = 0
    try:
        for _ in range(500):
            if store._checkpointer.behind:
                break
            await _write(store, written, 16)
            written += 16
        assert store._checkpointer.behind
        loop_done = len([name for name, _ in done if name != "sqlite-checkpoint"])
        for _ in range(500):  # the thread's last checkpoint may hold the lock a little longer
            await _write(store, written, 8)
            written += 8
            if not store._checkpointer.behind:
                break
        assert not store._checkpointer.behind
        ours = [result for name, result in done if name != "sqlite-checkpoint"][loop_done:]
        assert ours and ours[-1] is not None and ours[-1][0] == ours[-1][1]  # all of it copied, on the loop
        await _write(store, written, 8)
        written += 8
        assert 0 < await _wal_pages(path) < 64  # the last transaction's pages only: the WAL started over
    finally:
        await store.close()
    reopened = SQLiteStore(path)
    await reopened.start()
    try:
        kvs, rev = await reopened.list("/registry/pods/")
        assert len(kvs) == written == rev and kvs[-1].value == VALUE
    finally:
        await reopened.close()


async def test_if_the_thread_fails_sqlites_automatic_checkpoint_takes_over(tmp_path):
    store = SQLiteStore(str(tmp_path / "state.db"))
    await store.start()
    try:
        store._checkpointer.close()
        store._checkpointer = sqlite.Checkpointer(str(tmp_path / "missing" / "state.db"))
        store._checkpointer._thread.join()
        assert store._checkpointer.failed and store._checkpointer.behind
        await _write(store, 0, 8)
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
        assert not store._checkpointer.behind
    finally:
        await store.close()


async def test_shared_workers_checkpoint_from_their_threads_and_the_wal_starts_over(tmp_path, monkeypatch):
    """Shared mode (`--api-workers N`): each worker's writes poke its own thread; past the limit the
    worker's next commit copies the rest, and the WAL starts over for both."""
    monkeypatch.setattr(sqlite, "CHECKPOINT_BYTES", 64 << 10)
    monkeypatch.setattr(sqlite, "WAL_LIMIT", 64)
    done = _record_checkpoints(monkeypatch)
    path = str(tmp_path / "state.db")
    a, b = SQLiteStore(path, shared=True), SQLiteStore(path, shared=True)
    await a.start()
    await b.start()
    written = 0

    async def both() -> None:
        nonlocal written
        await asyncio.gather(_write(a, written, 8), _write(b, written + 8, 8))
        written += 16

    try:
        for _ in range(500):
            if a._checkpointer.behind or b._checkpointer.behind:
                break
            await both()
        assert a._checkpointer.behind or b._checkpointer.behind
        for _ in range(500):
            await both()
            if not (a._checkpointer.behind or b._checkpointer.behind):
                break
        assert not (a._checkpointer.behind or b._checkpointer.behind)
        assert any(name == "sqlite-checkpoint" and r for name, r in done)
        await both()
        assert 0 < await _wal_pages(path) < 200  # the last writes' pages (and a few before): the WAL started over
        assert await a.current_revision() == await b.current_revision() == written
    finally:
        await a.close()
        await b.close()
