"""Every write the SQLite store acknowledged survives `kill -9` of its process."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

from nanokube.store.sqlite import SQLiteStore

# Writes until killed: creates, and every third step deletes an earlier key, so
# the revision counter must survive deletions too. Prints "PUT|DEL key rev"
# only after the store call returned.
_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from nanokube.store.sqlite import SQLiteStore

    async def main(path):
        store = SQLiteStore(path)
        await store.start()
        i = 0
        while True:
            kv = await store.create(f"/registry/k/{i:08d}", b"x" * 512)
            print("PUT", kv.key, kv.mod_revision, flush=True)
            if i % 3 == 2:
                gone = await store.delete(f"/registry/k/{i - 1:08d}")
                print("DEL", gone.key, gone.mod_revision, flush=True)
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


def _run_and_kill(path: str, after_lines: int) -> list[tuple[str, str, int]]:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, path], stdout=subprocess.PIPE, cwd=repo, env={**os.environ, "PYTHONPATH": repo}
    )
    try:
        head = [proc.stdout.readline() for _ in range(after_lines)]
        os.kill(proc.pid, signal.SIGKILL)
        tail = proc.stdout.read().splitlines(keepends=True)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    acked = []
    for line in head + tail:
        if line.endswith(b"\n"):
            op, key, rev = line.decode().split()
            acked.append((op, key, int(rev)))
    return acked


async def test_acknowledged_writes_survive_kill_9(tmp_path, caplog):
    path = str(tmp_path / "state.db")
    acked = _run_and_kill(path, after_lines=600)
    assert len(acked) >= 600
    revs = [rev for _, _, rev in acked]
    assert revs == list(range(1, len(revs) + 1))

    wal_kib = os.path.getsize(path + "-wal") >> 10
    store = SQLiteStore(path)
    with caplog.at_level(logging.WARNING, "nanokube.store.sqlite"):
        await store.start()
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} was not closed cleanly: recovered its write-ahead log "
        f"({wal_kib} KiB of committed writes), at revision {await store.current_revision()}"]
    try:
        deleted = {key for op, key, _ in acked if op == "DEL"}
        # the kill may land between a delete's commit and its acknowledgement:
        # that one unacknowledged delete may or may not have happened
        last_op, last_key, _ = acked[-1]
        last_i = int(last_key.rsplit("/", 1)[1])
        in_flight = f"/registry/k/{last_i - 1:08d}" if last_op == "PUT" and last_i % 3 == 2 else None
        for op, key, rev in acked:
            kv = await store.get(key)
            if key in deleted or (kv is None and key == in_flight):
                assert kv is None, key
            else:
                assert kv is not None and kv.mod_revision == rev, key
        current = await store.current_revision()
        assert current >= revs[-1]
        nxt = await store.create("/registry/after-crash", b"y")
        assert nxt.mod_revision == current + 1
    finally:
        await store.close()
    caplog.clear()
    again = SQLiteStore(path)
    with caplog.at_level(logging.WARNING, "nanokube.store.sqlite"):
        await again.start()  # after a clean close: nothing to recover, nothing said
    await again.close()
    assert caplog.records == []
