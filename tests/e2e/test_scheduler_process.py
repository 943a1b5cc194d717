"""`nanokube scheduler` in its own processes over HTTPS: with
`up --scheduler=none` the external schedulers bind the pods, one at a time
through the kube-scheduler Lease; when the leader stops, the standby takes
over. A configuration kube-scheduler would refuse stops it at start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import fresh_store, running_cluster, start_cluster, wait_for
from .test_component_serving import get
from .test_kube_proxy import free_port


def scheduler(c, log: Path, *extra: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", c.kubeconfig,
                                 "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
                                 "--leader-elect-retry-period", "500ms", "--secure-port", "0", *extra],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def bare():
    with running_cluster("sched", ("--scheduler", "none")) as c:
        yield c


def holder(c, field: str = "holderIdentity") -> str:
    r = c.kubectl("get", "lease", "-n", "kube-system", "kube-scheduler", "-o", f"jsonpath={{.spec.{field}}}",
                  check=False)
    return r.stdout if r.returncode == 0 else ""


def campaigning(c, port: int) -> str:
    """Waits for the scheduler serving `port` to campaign, and returns the lease's renewTime then:
    kube-scheduler syncs its informers, then (its /readyz passing) asks for the lease, and again
    every retry period."""
    wait_for(lambda: reachable(port) and get(port, "/readyz")[0] == 200, what="the standby ready")
    return holder(c, "renewTime")


def renewed(c, since: str, times: int) -> None:
    """Waits for the leader to renew the lease `times` times after `since`: a standby that took the
    lease meanwhile would hold it, and the leader's renewals would have failed."""
    for _ in range(times):
        since = wait_for(lambda last=since: (t := holder(c, "renewTime")) != last and t,
                         what="the leader renewing the lease")


def reachable(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


def ready_replicas(c, name) -> int:
    return int(c.kubectl("get", "deployment", name, "-o", "jsonpath={.status.readyReplicas}").stdout or 0)


def unbound(c) -> list[str]:
    out = c.kubectl("get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}")
    return [line.split()[0] for line in out.stdout.splitlines() if len(line.split()) == 1]


def test_external_schedulers_take_turns_through_the_lease(bare):
    c = bare
    c.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3")
    wait_for(lambda: len(unbound(c)) == 3, what="three pending pods")
    # a pod bound by name runs: the node agents have acted on a pod made after the three, which a
    # scheduler would have bound by then (and marked PodScheduled, bound or not)
    node = c.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    c.kubectl("run", "bound-by-name", "--image=nginx", f"--overrides={json.dumps({'spec': {'nodeName': node}})}")
    wait_for(lambda: c.kubectl("get", "pod", "bound-by-name", "-o", "jsonpath={.status.phase}").stdout == "Running",
             what="the pod bound by name running")
    assert len(unbound(c)) == 3, "nothing binds pods without a scheduler"
    conditions = c.kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.conditions[*].type}")
    assert "PodScheduled" not in conditions.stdout
    assert holder(c) == "", "up --scheduler=none does not campaign"

    # both start together; the one that takes the lease leads, the other stands by
    ports = free_port(), free_port()
    logs = [c.data_dir / f"sched-{i}.log" for i in (1, 2)]
    procs = [scheduler(c, log, "--secure-port", str(port), "--bind-address", "127.0.0.1")
             for log, port in zip(logs, ports)]
    try:
        leader = wait_for(lambda: holder(c), what="a lease holder")
        leading = wait_for(lambda: [i for i, log in enumerate(logs) if "became leader" in log.read_text()],
                           what="the leader's log")
        assert len(leading) == 1
        first, second = leading[0], 1 - leading[0]
        wait_for(lambda: ready_replicas(c, "web") == 3, what="3 ready replicas")
        # its first try, and the next 0.5 s later, while the leader renews every 0.5 s
        renewed(c, campaigning(c, ports[second]), 2)
        assert holder(c) == leader, "the second scheduler stands by"
        assert "became leader" not in logs[second].read_text()

        procs[first].terminate()
        assert procs[first].wait(20) == 0
        wait_for(lambda: holder(c) not in ("", leader), what="the standby holding the lease")
        c.kubectl("scale", "deployment", "web", "--replicas=5")
        wait_for(lambda: ready_replicas(c, "web") == 5, what="5 ready replicas")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    first_log = logs[first].read_text()
    assert "became leader" in first_log and "scheduling pods for profiles: default-scheduler" in first_log
    assert "became leader" in logs[second].read_text()
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
            port = free_port()
            external = scheduler(c, tmp_path / "external.log", "--secure-port", str(port), "--bind-address", "127.0.0.1")
            wait_for(lambda: "attempting to acquire leader lease kube-system/kube-scheduler"
                     in (tmp_path / "external.log").read_text(), what="the external scheduler campaigning")
            since = campaigning(c, port)
            c.kubectl("create", "deployment", "api", "--image=nginx", "--replicas=2")
            wait_for(lambda: ready_replicas(c, "api") == 2, what="2 ready replicas")
            renewed(c, since, 1)  # up's scheduler renews every 2 s (the default retry period), the external tries every 0.5 s
            assert holder(c) == leader
        finally:
            if external is not None:
                external.terminate()
                external.wait(20)
            c.stop()
    log = (tmp_path / "external.log").read_text()
    assert "became leader" not in log and "scheduling pods" not in log
