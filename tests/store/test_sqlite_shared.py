"""The SQLite store's shared mode: several stores (workers) writing one database keep one global
revision order, check preconditions against what every worker committed, and hand each other's
writes to their watchers in order, through the change log."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from nanokube.store import sqlite as sqlite_mod
from nanokube.store.interface import DELETE, PUT, Compacted, KeyExists, KeyNotFound, RevisionMismatch
from nanokube.store.sqlite import SQLiteStore


async def _open(path: str) -> SQLiteStore:
    store = SQLiteStore(path, shared=True)
    await store.start()
    return store


class Follower:
    """What a store's follower (the watch cache) is handed."""

    def __init__(self, store: SQLiteStore, rev: int = 0) -> None:
        self.events = []
        self.lost = False
        self.changed = asyncio.Event()
        self.stop = store.follow(rev or store._rev, self._apply, self._lost)

    def _apply(self, ev) -> None:
        self.events.append((ev.type, ev.kv.key, ev.revision))
        self.changed.set()

    def _lost(self) -> None:
        self.lost = True
        self.changed.set()

    async def until(self, pred) -> None:
        async with asyncio.timeout(10):
            while not pred():
                self.changed.clear()
                await self.changed.wait()


@pytest.fixture
async def pair(tmp_path):
    path = str(tmp_path / "state.db")
    a, b = await _open(path), await _open(path)
    yield a, b
    await a.close()
    await b.close()


async def test_writes_of_two_workers_share_one_revision_order_and_every_follower_sees_all(pair):
    a, b = pair
    fa, fb = Follower(a), Follower(b)
    written = []
    for i in range(20):
        store = (a, b)[i % 2]
        kvs = await asyncio.gather(store.create(f"/registry/k/{i}a", b"x"), store.create(f"/registry/k/{i}b", b"y"))
        written += [(PUT, kv.key, kv.mod_revision) for kv in kvs]
    gone = await b.delete("/registry/k/0a")
    written.append((DELETE, gone.key, gone.mod_revision))
    revs = [r for _, _, r in written]
    assert revs == list(range(revs[0], revs[0] + len(revs)))  # one sequence, no revision given twice
    await fa.until(lambda: len(fa.events) == len(written))
    await fb.until(lambda: len(fb.events) == len(written))
    assert fa.events == fb.events == written
    assert await a.current_revision() == await b.current_revision() == revs[-1]
    kvs, rev = await a.list("/registry/k/")
    assert rev == revs[-1] and len(kvs) == 39


async def test_a_precondition_is_checked_against_the_other_workers_commits(pair):
    a, b = pair
    kv = await a.create("/registry/k/x", b"1")
    await b.update("/registry/k/x", b"2", kv.mod_revision)
    stale, fresh = await asyncio.gather(a.update("/registry/k/x", b"3", kv.mod_revision),
                                        a.create("/registry/k/y", b"y"), return_exceptions=True)
    assert isinstance(stale, RevisionMismatch) and stale.current.value == b"2"
    assert fresh.key == "/registry/k/y"  # one failed write fails nothing else of its batch
    with pytest.raises(KeyExists):
        await a.create("/registry/k/x", b"again")
    await b.delete("/registry/k/y")
    with pytest.raises(KeyNotFound):
        await a.delete("/registry/k/y")
    assert (await a.get("/registry/k/x")).value == b"2"


async def test_an_update_handed_the_kv_it_replaces_reads_no_row_unless_another_worker_moved_it(pair):
    """A worker's update handed the key's KV at the expected revision runs the conditional UPDATE
    alone and publishes that KV as the event's prev; once another worker has written the key, the
    same KV is stale: refused with what that worker wrote, nothing written."""
    a, b = pair
    kv = await a.create("/registry/k/x", b"1")
    prevs, statements = [], []
    a.follow(kv.mod_revision, lambda ev: prevs.append((ev.kv, ev.prev)))
    a._db.set_trace_callback(statements.append)
    first = await a.update("/registry/k/x", b"2", kv.mod_revision, kv)
    assert not [q for q in statements if "FROM kv" in q]
    assert prevs == [(first, kv)] and first.create_revision == kv.create_revision
    moved = await b.update("/registry/k/x", b"3", first.mod_revision, first)
    with pytest.raises(RevisionMismatch) as stale:
        await a.update("/registry/k/x", b"4", first.mod_revision, first)
    assert stale.value.current == moved
    assert (await a.get("/registry/k/x")).value == b"3"


async def test_a_delete_handed_the_kv_it_removes_reads_no_row_unless_another_worker_moved_it(pair):
    """A worker's delete handed the key's KV runs the conditional DELETE alone, the event's prev
    that KV; once another worker has written the key, a conditional delete with the same KV is
    refused with what that worker wrote, and an unconditional one deletes and publishes that."""
    a, b = pair
    x, y = await a.create("/registry/k/x", b"1"), await a.create("/registry/k/y", b"1")
    events, statements = [], []
    a.follow(y.mod_revision, events.append)
    a._db.set_trace_callback(statements.append)
    gone = await a.delete(x.key, x.mod_revision, x)
    assert not [q for q in statements if q.startswith("SELECT") and "FROM kv" in q]
    assert [(e.type, e.kv, e.prev) for e in events] == [(DELETE, gone, x)] and gone.value == b"1"
    moved = await b.update(y.key, b"2", y.mod_revision, y)
    with pytest.raises(RevisionMismatch) as stale:
        await a.delete(y.key, y.mod_revision, y)
    assert stale.value.current == moved
    last = await a.delete(y.key, None, y)
    assert (last.value, last.create_revision) == (b"2", y.create_revision)
    assert (events[-1].type, events[-1].kv, events[-1].prev) == (DELETE, last, moved)
    assert (await b.current_revision(), await b.get(y.key)) == (last.mod_revision, None)


async def test_an_idle_worker_is_rung_and_a_consistent_read_catches_up(pair):
    a, b = pair
    fa = Follower(a)
    kv = await b.create("/registry/k/rung", b"v")
    await fa.until(lambda: fa.events)  # a's loop read the doorbell: nothing asked it
    assert fa.events == [(PUT, "/registry/k/rung", kv.mod_revision)]
    a._bell._loop.remove_reader(a._bell.sock.fileno())  # a's loop is busy: the consistent read alone must catch up
    kv2 = await b.create("/registry/k/quiet", b"v")
    assert fa.events[-1][1] == "/registry/k/rung"
    assert await a.current_revision() == kv2.mod_revision
    assert fa.events[-1] == (PUT, "/registry/k/quiet", kv2.mod_revision)


async def test_a_worker_behind_the_trimmed_log_starts_its_history_over(pair, monkeypatch):
    monkeypatch.setattr(sqlite_mod, "LOG_WINDOW", 10)
    monkeypatch.setattr(sqlite_mod, "LOG_TRIM", 5)
    a, b = pair
    a._bell._loop.remove_reader(a._bell.sock.fileno())  # a neither reads its rings nor writes: it falls behind
    start = await a.current_revision()
    fa = Follower(a)
    watch = a.watch(start)
    for i in range(30):
        await b.create(f"/registry/k/{i}", b"v")
    assert await a.current_revision() == start + 30
    assert fa.lost and fa.events == []  # told to relist instead of handed a history with a hole
    with pytest.raises(Compacted):
        await anext(watch)
    with pytest.raises(Compacted):
        await anext(a.watch(start))
    kvs, rev = await a.list("/registry/k/")
    assert (len(kvs), rev) == (30, start + 30)
    f2 = Follower(a, rev)
    a._bell._loop.add_reader(a._bell.sock.fileno(), a._bell._read)
    kv = await b.create("/registry/k/after", b"v")
    await f2.until(lambda: f2.events)
    assert f2.events == [(PUT, kv.key, kv.mod_revision)]


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from nanokube.store.sqlite import SQLiteStore

    async def main(path, tag, n):
        store = SQLiteStore(path, shared=True)
        await store.start()
        for i in range(0, n, 4):
            kvs = await asyncio.gather(*(store.create(f"/registry/k/{tag}{j:05d}", b"v") for j in range(i, i + 4)))
            for kv in kvs:
                print(kv.key, kv.mod_revision, flush=True)
        await store.close()

    asyncio.run(main(*sys.argv[1:3], int(sys.argv[3])))
    """
)


async def test_two_processes_writing_at_once_interleave_in_one_order(tmp_path):
    path = str(tmp_path / "state.db")
    store = await _open(path)  # created first, so both writers find the shared tables
    follower = Follower(store)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": repo}
    procs = [await asyncio.create_subprocess_exec(sys.executable, "-c", _WRITER, path, tag, "400", cwd=repo, env=env,
                                                  stdout=subprocess.PIPE) for tag in "pq"]
    outs = [(await p.communicate())[0].decode().split("\n") for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    acked = {line.split()[0]: int(line.split()[1]) for out in outs for line in out if line}
    assert len(acked) == 800 and len(set(acked.values())) == 800
    await follower.until(lambda: len(follower.events) == 800)
    assert [(k, r) for _, k, r in follower.events] == sorted(acked.items(), key=lambda kr: kr[1])
    revs = [r for _, _, r in follower.events]
    assert revs == list(range(revs[0], revs[0] + 800))
    await store.close()


async def test_a_worker_closed_while_it_greets_ends_its_start_and_leaves_no_task(tmp_path):
    """A peer that does not answer (a stopped worker) holds a starting worker's greeting for up to
    five seconds; a close meanwhile ends the start at once, with no task of the greeting left
    pending (wait_for's was, and was destroyed pending when its loop closed)."""
    path = str(tmp_path / "state.db")
    first = await _open(path)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    silent_path = os.path.join(first._bell.dir, "silent")
    silent.bind(silent_path)
    silent.setblocking(False)
    with open(silent_path + ".flag", "wb") as f:
        f.write(b"\0")
    await first.close()
    store = SQLiteStore(path, shared=True)
    try:
        starting = asyncio.create_task(store.start())
        async with asyncio.timeout(30):
            hello = await asyncio.get_running_loop().sock_recv(silent, 256)  # it greets, and waits for an answer
        assert hello.startswith(b"h") and not starting.done()
        await store.close()
        assert asyncio.all_tasks() == {asyncio.current_task(), starting}
        async with asyncio.timeout(30):
            await starting
        assert asyncio.all_tasks() == {asyncio.current_task()}
    finally:
        silent.close()
        for p in (silent_path, silent_path + ".flag"):
            os.unlink(p)
        os.rmdir(os.path.dirname(silent_path))  # (the last worker's close found the silent peer's files there)
