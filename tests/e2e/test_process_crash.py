"""`nanokube up --runtime process` killed with SIGKILL and started again on its data dir: the
restarted node agent starts the running container again (the runtime's start ends what the crash
left: the runtime died with `up`, so its containers are not adopted) and counts that restart on from
the instances it had logged, as the kubelet counts from a container's log files where its runtime
lost the container: restartCount never goes back, the lastState is the kubelet's for a running
container its runtime lost (ContainerStatusUnknown, 137), and `kubectl logs --previous` still
serves the killed instance's output. Its crash-loop back-off starts over, as a restarted
kubelet's: the next exit restarts it at once.

Skipped (loudly) only without root, `ip` or `nft`, as the other process-runtime tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, STORE, start_cluster, wait_for

pytestmark = [PROCESS_RUNTIME, pytest.mark.skipif(STORE == "memory", reason="the memory store is not durable by design")]

POD = """
apiVersion: v1
kind: Pod
metadata: {name: survivor, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo started at $(date +%s%N); trap 'exit 143' TERM; sleep 4799 & wait"]
    resources: {limits: {memory: 64Mi}}
"""


def sleepers() -> list[int]:
    """The pids of the pod's `sleep 4799` running on the host."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == b"sleep\x004799\x00":
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _running(c) -> dict | None:
    st = c.kubectl_json("get", "pod", "survivor")["status"]
    cs = (st.get("containerStatuses") or [{}])[0]
    return cs if "running" in (cs.get("state") or {}) else None


def test_a_crashed_agent_counts_the_restart_on_and_keeps_the_previous_log(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-crash-"))
    c = start_cluster(d, store_url, ("--runtime", "process"))
    c2 = None
    try:
        c.kubectl("apply", "-f", "-", input=POD)
        before = wait_for(lambda: _running(c), what="survivor running")
        assert before["restartCount"] == 0
        first = wait_for(lambda: c.kubectl("logs", "survivor").stdout.strip(), what="its first line")
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()

        c2 = start_cluster(d, store_url, ("--runtime", "process"))
        after = wait_for(lambda: (s := _running(c2)) and s["state"]["running"]["startedAt"] !=
                         before["state"]["running"]["startedAt"] and s, what="survivor started again")
        assert after["restartCount"] == 1
        assert after["lastState"]["terminated"] == {
            "exitCode": 137, "reason": "ContainerStatusUnknown", "startedAt": None, "finishedAt": None,
            "message": "The container could not be located when the pod was deleted.  The container used to be Running"}
        assert after["containerID"] != before["containerID"]
        assert c2.kubectl("logs", "survivor", "--previous").stdout.strip() == first
        assert wait_for(lambda: c2.kubectl("logs", "survivor").stdout.strip(), what="its new line") != first
        # the crashed run's process was killed (its cgroups removed), not left running beside the new one
        wait_for(lambda: len(sleepers()) == 1, what="one sleeper")
        # a restarted kubelet has no back-off entry (they are in memory): the next exit restarts at once
        os.kill(sleepers()[0], signal.SIGKILL)
        wait_for(lambda: (s := _running(c2)) and s["restartCount"] == 2, what="survivor restarted again")
        events = c2.kubectl_json("get", "events", "--field-selector", "involvedObject.name=survivor")["items"]
        assert "BackOff" not in [e["reason"] for e in events]
    finally:
        c.stop()
        if c2 is not None:
            c2.stop()
        left = leftovers(d)
        shutil.rmtree(d, ignore_errors=True)
        assert left == [], f"namespaces or cgroup left after shutdown: {left}"


def test_an_up_that_fails_after_its_runtime_started_leaves_no_cgroup_or_namespace(store_url):
    """A start step after the runtime's fails (here the local-path provisioner's: its directory is
    a file): `up` exits with the error and its runtime closed, not leaving its cgroup trees and
    namespaces to the next start on the data dir."""
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-failed-up-"))
    try:
        (d / "volumes").write_text("")
        done = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(d), "--port", "0",
                               "--store", store_url, "--runtime", "process"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        assert done.returncode != 0 and b"FileExistsError" in done.stderr, done.stderr.decode()[-2000:]
        assert b"process runtime: " in done.stderr  # (it failed after the runtime had started)
        assert leftovers(d) == []
    finally:
        shutil.rmtree(d, ignore_errors=True)


def leftovers(d: Path) -> list[str]:
    """The network namespaces and cgroup trees of the cluster on data dir `d` still there."""
    from nanokube.node.runtime.cgroup import own_cgroup_dir
    from nanokube.node.runtime.limits import CONTROLLERS
    from nanokube.node.runtime.netns import PREFIX, cluster_tag, list_netns

    prefix = f"{PREFIX}{cluster_tag(str(d))}-"
    left = [n for n in list_netns() if n.startswith(prefix)]
    return left + [cgroup for base in (own_cgroup_dir(), *map(own_cgroup_dir, CONTROLLERS)) if base
                   and os.path.isdir(cgroup := os.path.join(base, f"nanokube-{cluster_tag(str(d))}"))]
