"""`kill -9` during a burst of writes loses no acknowledged write, the
resourceVersion sequence continues after restart, and a client in another
process (an external scheduler) rides the restart out."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import STORE, start_cluster, wait_for

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store


@pytest.mark.skipif(STORE == "memory", reason="the memory store is not durable by design")
def test_kill_9_keeps_acknowledged_writes_and_an_external_scheduler_resumes(store_url):
    """`nanokube up --scheduler none`, killed and started again on its port: the external
    scheduler's lease renewals fail for under the renew deadline and its watches are cut
    mid-stream, which it rides out (no lost lease, no informer failure), then schedules what is
    created afterwards; on SQLite the restart says it recovered the write-ahead log."""
    from .test_kube_proxy import free_port

    d = Path(tempfile.mkdtemp(prefix="nanokube-durable-"))
    up = ("--scheduler", "none", "--port", str(free_port()))
    c = start_cluster(d, store_url, up)
    acked: dict[str, str] = {}
    with open(d / "sched.log", "wb") as log:  # (the child keeps its own copy of the descriptor)
        sched = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", c.kubeconfig,
                                  "--leader-elect-retry-period", "500ms", "--secure-port", "0",
                                  # the restart must fit in the renew deadline: 10 s by default, which a
                                  # loaded CI machine's `up` can overrun; the point is riding the gap out
                                  "--leader-elect-renew-deadline", "60s", "--leader-elect-lease-duration", "90s"],
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    pod = {"metadata": {"name": "before"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    try:
        api = client.CoreV1Api(c.client())
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                try:
                    cm = api.create_namespaced_config_map("default", {"metadata": {"name": f"burst-{i}"}, "data": {"i": str(i)}})
                except Exception:
                    return
                acked[cm.metadata.name] = cm.metadata.resource_version
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        # the burst goes on while the scheduler starts and binds a pod: its watches are open at the kill
        api.create_namespaced_pod("default", pod)
        wait_for(lambda: api.read_namespaced_pod("before", "default").spec.node_name, what="before bound", every=0.05)
        while len(acked) < 150 and t.is_alive():  # (a writer that failed early fails the assertion below)
            t.join(0.05)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        stop.set()
        t.join(30)
        assert len(acked) >= 150
        last_rv = max(int(v) for v in acked.values())

        c2 = start_cluster(d, store_url, up)
        try:
            api2 = client.CoreV1Api(c2.client())
            items = {cm.metadata.name: cm for cm in api2.list_namespaced_config_map("default").items}
            for name, rv in acked.items():
                assert name in items, f"acknowledged write {name} lost"
                assert items[name].metadata.resource_version == rv
            fresh = api2.create_namespaced_config_map("default", {"metadata": {"name": "after-restart"}})
            assert int(fresh.metadata.resource_version) > last_rv
            api2.create_namespaced_pod("default", {**pod, "metadata": {"name": "after"}})
            wait_for(lambda: api2.read_namespaced_pod("after", "default").spec.node_name, what="after bound", every=0.05)
            log = (d / "sched.log").read_text()
            assert "lost the lease" not in log and "Traceback" not in log, log
            if STORE == "sqlite":
                assert "was not closed cleanly: recovered its write-ahead log" in c2.log_path.read_text()
        finally:
            c2.stop()
    finally:
        sched.terminate()
        try:
            sched.wait(20)
        except subprocess.TimeoutExpired:  # (stopped all the same, and the cluster after it)
            sched.kill()
            sched.wait()
        c.stop()
        shutil.rmtree(d, ignore_errors=True)
