"""`nanokube up --port 0`: the server binds port 0 itself and announces the port the kernel gave it,
which every worker listens on and the `kubernetes` Service targets. A port found free by a probe
and bound later could be taken in between: here another listener takes every port a socket that
was bound, never listened and never connected gives back, the moment it is closed (the probe's
pattern), and `up` must still start."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from .conftest import STORE, running_cluster, wait_for
from .test_api_workers import _children

#: imported first by every Python process that has its directory on PYTHONPATH
THIEF = textwrap.dedent('''
    import socket

    _close, _held = socket.socket.close, []

    def close(self):
        probe = False
        if self.fileno() != -1 and self.type == socket.SOCK_STREAM:
            try:
                self.getpeername()
            except OSError:  # never connected
                try:
                    listening = self.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                    addr = self.getsockname()
                    probe = not listening and addr[1] != 0
                except OSError:
                    pass
        _close(self)
        if probe:  # another process would take the port now
            thief = socket.socket(self.family, socket.SOCK_STREAM)
            try:
                thief.bind(addr[:2])
                thief.listen()
                _held.append(thief)
            except OSError:
                thief.close()

    socket.socket.close = close
''')


def _listening(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on."""
    inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f"socket:[{f[9]}]" in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.skipif(
    STORE == "memory", reason="the memory store serves one process"))])
def test_up_on_port_zero_serves_on_the_port_the_kernel_gave_it(tmp_path, workers):
    (tmp_path / "sitecustomize.py").write_text(THIEF)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    with running_cluster("port-zero", ("--api-workers", str(workers)), env={"PYTHONPATH": path}) as c:
        port = urlsplit(c.url).port
        assert port and c.url == f"https://127.0.0.1:{port}"
        pids = [c.proc.pid, *_children(c.proc.pid)]
        assert len(pids) == workers and all(port in _listening(pid) for pid in pids)
        core = client.CoreV1Api(c.client())
        svc = wait_for(lambda: core.list_namespaced_service("default", field_selector="metadata.name=kubernetes").items,
                       30, "the kubernetes Service")[0]
        assert (svc.spec.ports[0].port, svc.spec.ports[0].target_port) == (443, port)
