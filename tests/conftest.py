"""Shared fixtures: a throwaway etcd server for the session, and the cache mutation detector.

Starting etcd takes about a second, so one serves the whole session. Its
process is killed and its data dir removed when the session ends; on Linux it
is also asked to die with the test process should pytest itself be killed.

The cache mutation detector (nanokube/client/mutation.py) is on unless
NANOKUBE_CACHE_MUTATION_DETECTOR=false, here and in the processes the suite starts: a test after
which a handed-out object was found changed in place fails at teardown, and an e2e cluster whose
log reports one fails when it is stopped (tests/e2e/conftest.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# on unless set otherwise, before nanokube is imported; the processes the suite starts inherit it
os.environ.setdefault("NANOKUBE_CACHE_MUTATION_DETECTOR", "true")

from nanokube.client import mutation  # noqa: E402

if mutation.on_in_env():
    mutation.enable()

# A suite started in the background of a non-interactive shell (`nohup scripts/test.sh &`, a CI runner's
# script) begins with SIGINT ignored, and every process it starts would inherit that: the tests that stop
# `simulate` or `kubectl attach` with Ctrl-C would wait on programs that rightly keep running, as a
# shell's background jobs do. The suite's processes take Ctrl-C as a terminal would send it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: shared fixtures (`core`: the official client on an in-process server)
pytest_plugins = ["tests.served"]

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


def etcd_binary() -> str:
    binary = shutil.which("etcd") or next((p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if Path(p).exists()), None)
    if binary is None:
        pytest.skip("etcd binary not found (scripts/etcd.sh installs it)")
    return binary


@pytest.fixture(scope="session")
def etcd_server():
    binary = etcd_binary()
    data_dir = Path(tempfile.mkdtemp(prefix="nanokube-etcd-"))
    server = EtcdServer(binary, data_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
async def stack():
    """An in-process API server with its loopback client (`tests.controllers.make_stack`), closed
    after the test; a package or module needing more (a started scheduler, a namespace) defines
    its own."""
    from tests.controllers import make_stack

    s = await make_stack()
    yield s
    await s.close()


@pytest.fixture(autouse=True)
def _no_cache_mutations():
    """Fails a test after which an object that the loopback client or an informer handed out was
    found changed in place (each object is checked against its JSON when handed out)."""
    yield
    d = mutation.DETECTOR
    found = d.take_found() if d is not None else []
    if found:
        pytest.fail("cache mutation detector:\n" + "\n".join(found), pytrace=False)
