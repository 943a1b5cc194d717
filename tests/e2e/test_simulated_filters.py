"""Filters reading a stream on the simulated runtime, through kubectl: `kubectl exec -i pod --
grep ...` and a `cat` container that `kubectl run -i` attaches to answer each line as it is sent,
before the client's stdin ends, as the real commands do."""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from tests.e2e.conftest import KUBECTL, wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): its three pods (sink, catter, piper) stay, without
    requests."""
    return session_cluster


def _kubectl(cluster, *args: str) -> subprocess.Popen:
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    return subprocess.Popen([KUBECTL, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)


def _read_line(p: subprocess.Popen, timeout: float = 30) -> bytes:
    """One line of the client's stdout, as soon as it comes."""
    out, end = b"", time.monotonic() + timeout
    while not out.endswith(b"\n") and time.monotonic() < end:
        if select.select([p.stdout], [], [], 0.2)[0]:
            chunk = os.read(p.stdout.fileno(), 1)
            if not chunk:
                break
            out += chunk
    return out


def test_exec_i_of_grep_answers_each_line_before_stdin_ends(cluster):
    cluster.kubectl("run", "sink", "--image=busybox", "--", "sleep", "infinity")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "sink")["status"].get("phase") == "Running", 60,
             "sink Running")
    p = _kubectl(cluster, "exec", "-i", "sink", "--", "grep", "-v", "debug")
    try:
        p.stdin.write(b"step 1\n")
        p.stdin.flush()
        assert _read_line(p) == b"step 1\n"  # while the client's stdin is still open
        p.stdin.write(b"debug: x\nstep 2\n")
        p.stdin.flush()
        assert _read_line(p) == b"step 2\n"
        p.stdin.close()
        assert p.wait(30) == 0 and p.stdout.read() == b""
    finally:
        p.kill()
        p.wait()


def test_run_i_of_cat_echoes_each_line_and_completes_at_eof(cluster):
    p = _kubectl(cluster, "run", "-i", "--restart=Never", "catter", "--image=busybox", "--", "cat")
    try:
        wait_for(lambda: cluster.kubectl("get", "pod", "catter", "--ignore-not-found",
                                         "-o", "jsonpath={.status.phase}").stdout == "Running", 60, "catter Running")
        p.stdin.write(b"hello\n")
        p.stdin.flush()
        assert _read_line(p) == b"hello\n"
        p.stdin.close()
        assert p.wait(30) == 0
    finally:
        p.kill()
        p.wait()
    wait_for(lambda: cluster.kubectl_json("get", "pod", "catter")["status"].get("phase") == "Succeeded", 30,
             "catter Succeeded")
    assert cluster.kubectl("logs", "catter").stdout == "hello\n"


def test_exec_i_of_a_pipeline_of_filters_answers_each_line_before_stdin_ends(cluster):
    cluster.kubectl("run", "piper", "--image=busybox", "--", "sleep", "infinity")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "piper")["status"].get("phase") == "Running", 60,
             "piper Running")
    p = _kubectl(cluster, "exec", "-i", "piper", "--", "sh", "-c", "grep -v debug | sed 's/loss/LOSS/'")
    try:
        p.stdin.write(b"debug: x\nstep 1 loss 0.5\n")
        p.stdin.flush()
        assert _read_line(p) == b"step 1 LOSS 0.5\n"  # while the client's stdin is still open
        p.stdin.close()
        assert p.wait(30) == 0
    finally:
        p.kill()
        p.wait()
