"""`nanokube scheduler` in its own processes over HTTPS: with
`up --scheduler=none` the external schedulers bind the pods, one at a time
through the kube-scheduler Lease; when the leader stops, the standby takes
over. A configuration kube-scheduler would refuse stops it at start."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import fresh_store, running_cluster, start_cluster, wait_for


def scheduler(c, log: Path, *extra: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", c.kubeconfig,
                                 "--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
                                 "--leader-elect-retry-period", "0.5", "--secure-port", "0", *extra],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def bare():
    with running_cluster("sched", ("--scheduler", "none")) as c:
        yield c


def holder(c) -> str:
    r = c.kubectl("get", "lease", "-n", "kube-system", "kube-scheduler", "-o", "jsonpath={.spec.holderIdentity}",
                  check=False)
    return r.stdout if r.returncode == 0 else ""


def ready_replicas(c, name) -> int:
    return int(c.kubectl("get", "deployment", name, "-o", "jsonpath={.status.readyReplicas}").stdout or 0)


def unbound(c) -> list[str]:
    out = c.kubectl("get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}")
    return [line.split()[0] for line in out.stdout.splitlines() if len(line.split()) == 1]


def test_external_schedulers_take_turns_through_the_lease(bare):
    c = bare
    c.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3")
    wait_for(lambda: len(unbound(c)) == 3, what="three pending pods")
    time.sleep(2)
    assert len(unbound(c)) == 3, "nothing binds pods without a scheduler"
    assert holder(c) == "", "up --scheduler=none does not campaign"

    first = scheduler(c, c.data_dir / "sched-1.log")
    second = None
    try:
        leader = wait_for(lambda: holder(c), what="a lease holder")
        wait_for(lambda: ready_replicas(c, "web") == 3, what="3 ready replicas")
        second = scheduler(c, c.data_dir / "sched-2.log")
        time.sleep(3)
        assert holder(c) == leader, "the second scheduler stands by"

        first.terminate()
        assert first.wait(20) == 0
        wait_for(lambda: holder(c) not in ("", leader), what="the standby holding the lease")
        c.kubectl("scale", "deployment", "web", "--replicas=5")
        wait_for(lambda: ready_replicas(c, "web") == 5, what="5 ready replicas")
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    first_log = (c.data_dir / "sched-1.log").read_text()
    second_log = (c.data_dir / "sched-2.log").read_text()
    assert "became leader" in first_log and "scheduling pods for profiles: default-scheduler" in first_log
    assert "became leader" in second_log
    events = c.kubectl("get", "events.events.k8s.io", "--field-selector", "reason=Scheduled", "-o",
                       "jsonpath={.items[*].reportingController}").stdout.split()
    assert len(events) >= 5 and set(events) == {"default-scheduler"}


def test_bad_config_is_refused(bare, tmp_path):
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                   "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    filter:\n"
                   "      enabled:\n      - name: NoSuchPlugin\n")
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", bare.kubeconfig,
                        "--config", str(cfg)], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "NoSuchPlugin" in r.stderr and r.stderr.startswith("nanokube scheduler: --config: ")


def test_up_schedules_through_the_same_lease(tmp_path):
    """`up`'s own scheduler holds the lease, so an external one only stands by."""
    with fresh_store() as url:
        c = start_cluster(tmp_path / "up", url)
        external = None
        try:
            leader = wait_for(lambda: holder(c), what="a lease holder")
            assert "_up-" in leader
            external = scheduler(c, tmp_path / "external.log")
            wait_for(lambda: "attempting to acquire leader lease kube-system/kube-scheduler"
                     in (tmp_path / "external.log").read_text(), what="the external scheduler campaigning")
            c.kubectl("create", "deployment", "api", "--image=nginx", "--replicas=2")
            wait_for(lambda: ready_replicas(c, "api") == 2, what="2 ready replicas")
            time.sleep(2)
            assert holder(c) == leader
        finally:
            if external is not None:
                external.terminate()
                external.wait(20)
            c.stop()
    log = (tmp_path / "external.log").read_text()
    assert "became leader" not in log and "scheduling pods" not in log
