"""`nanokube up` that cannot serve says why and exits, on every store."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from .conftest import fresh_store

pytestmark = pytest.mark.store


def test_a_port_in_use_is_reported_and_up_exits(tmp_path):
    """The bind comes before anything starts, and the store `up` opened is closed again (when the
    bind came later, the etcd watch cache's follower once spun forever on the closed store, and
    `up` never exited)."""
    with socket.socket() as taken, fresh_store() as store:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", str(port),
                            "--store", store], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and f"cannot listen on 127.0.0.1:{port}: " in r.stderr
