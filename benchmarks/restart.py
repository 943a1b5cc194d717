"""Restart to ready with many stored objects (issue 18): `nanokube up` on a
SQLite data dir holding N ConfigMaps, timed from process start to the first
200 from /readyz.

    .venv/bin/python -m benchmarks.restart --counts 0,10000,30000,100000

The data dir is made once by a first start (cluster CA, bootstrap objects);
the ConfigMaps are then written straight through the store, as the server
would have stored them, and each count is measured `--runs` times (best kept).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import orjson

from nanokube.store.sqlite import SQLiteStore


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: Path) -> tuple[subprocess.Popen, float]:
    """Start `nanokube up`; (process, seconds from its start until /readyz answered 200)."""
    port = _free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(data_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    while True:
        if proc.poll() is not None:
            raise RuntimeError("nanokube up exited")
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=30) as r:
                if r.status == 200:
                    return proc, time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.01)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _populate(db: Path, total: int) -> None:
    """Bring the number of benchmark ConfigMaps in the store to `total`."""
    store = SQLiteStore(str(db))
    await store.start()
    try:
        if await store.get("/registry/namespaces/bench") is None:
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": "bench", "uid": str(uuid.uuid4()), "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            await store.create("/registry/namespaces/bench", orjson.dumps(ns))
        kvs, _ = await store.list("/registry/configmaps/bench/")
        for i in range(len(kvs), total):
            name = f"cm-{i:06d}"
            obj = {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": "bench", "uid": str(uuid.uuid4()),
                                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "bench"}},
                   "data": {"key": "value " * 8}}
            await store.create(f"/registry/configmaps/bench/{name}", orjson.dumps(obj))
    finally:
        await store.close()


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.restart", description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", default="0,10000,30000,100000", help="stored ConfigMaps to measure at, ascending")
    p.add_argument("--runs", type=int, default=2)
    args = p.parse_args()
    d = Path(tempfile.mkdtemp(prefix="nanokube-restart-"))
    try:
        proc, first = _start(d)
        _stop(proc)
        print(f"first start (CA, bootstrap): {first:.2f} s")
        print("stored ConfigMaps | restart to ready (s)")
        for n in (int(c) for c in args.counts.split(",")):
            asyncio.run(_populate(d / "state.db", n))
            times = []
            for _ in range(args.runs):
                proc, took = _start(d)
                _stop(proc)
                times.append(took)
            print(f"{n:>17} | {min(times):.2f}  (runs: {', '.join(f'{t:.2f}' for t in times)})", flush=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
