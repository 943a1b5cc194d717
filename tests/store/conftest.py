"""Store test fixtures: a throwaway etcd server and one opener per backend.

The etcd server is shared by the whole session (starting one takes about a
second), so every test works under its own key prefix. Its process is killed
and its data dir removed when the session ends; on Linux it is also asked to
die with the test process should pytest itself be killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from nanokube.store.interface import Store
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore

_PR_SET_PDEATHSIG = 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class EtcdServer:
    """One single-member etcd on loopback ports, restartable on the same data."""

    binary: str
    data_dir: Path
    client_port: int = field(default_factory=_free_port)
    peer_port: int = field(default_factory=_free_port)
    proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        client, peer = f"http://{self.endpoint}", f"http://127.0.0.1:{self.peer_port}"
        log = open(self.data_dir / "etcd.log", "ab")
        self.proc = subprocess.Popen(
            [
                self.binary, "--name", "nk", "--data-dir", str(self.data_dir / "member-data"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"nk={peer}", "--log-level", "error",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=_die_with_parent,
        )
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Polls /health until etcd serves; this is setup, not an assertion."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}; see {self.data_dir / 'etcd.log'}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as r:
                    if b'"true"' in r.read():
                        return
            time.sleep(0.05)
        raise RuntimeError(f"etcd did not become healthy; see {self.data_dir / 'etcd.log'}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def etcd_server():
    binary = shutil.which("etcd") or next((p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if Path(p).exists()), None)
    if binary is None:
        pytest.skip("etcd binary not found (scripts/etcd.sh installs it)")
    data_dir = Path(tempfile.mkdtemp(prefix="nanokube-etcd-"))
    server = EtcdServer(binary, data_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@dataclass
class Backend:
    """Opens stores of one kind; `reopen` closes one and opens it again on the
    same durable state (for etcd, across a server restart)."""

    name: str
    opener: Callable[[], Store]
    restart_server: Callable[[], None] | None = None
    opened: list[Store] = field(default_factory=list)

    async def open(self) -> Store:
        store = self.opener()
        await store.start()
        self.opened.append(store)
        return store

    async def reopen(self, store: Store) -> Store:
        await store.close()
        if self.restart_server:
            self.restart_server()
        return await self.open()

    @property
    def durable(self) -> bool:
        return self.name != "memory"


@pytest.fixture(params=["memory", "sqlite", "etcd"])
async def backend(request, tmp_path):
    if request.param == "memory":
        b = Backend("memory", MemoryStore)
    elif request.param == "sqlite":
        b = Backend("sqlite", lambda: SQLiteStore(str(tmp_path / "state.db")))
    else:
        from nanokube.store.etcd import EtcdStore

        server = request.getfixturevalue("etcd_server")
        b = Backend("etcd", lambda: EtcdStore([server.endpoint]), server.restart)
    yield b
    for store in b.opened:
        await store.close()


@pytest.fixture
async def store(backend) -> Store:
    return await backend.open()


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses (the etcd server is shared)."""
    return f"/registry/t{uuid.uuid4().hex[:12]}/"
