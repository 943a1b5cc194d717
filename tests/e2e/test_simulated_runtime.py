"""The default simulated runtime as a first-day user meets it, through kubectl:
each container of a pod lives its own life (its own exit, exit code and
restart count; a sidecar independent of the app containers)."""

from __future__ import annotations

import json

from tests.e2e.conftest import wait_for

PAIR = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pair", "namespace": "default"}, "spec": {
    "initContainers": [{"name": "proxy", "image": "busybox", "restartPolicy": "Always"}],
    "containers": [{"name": "shell", "image": "busybox", "stdin": True, "stdinOnce": True},
                   {"name": "web", "image": "nginx"}]}}


def _statuses(cluster, pod: str) -> dict:
    st = cluster.kubectl_json("get", "pod", pod)["status"]
    return {s["name"]: s for key in ("initContainerStatuses", "containerStatuses") for s in st.get(key) or ()}


def test_a_container_that_exits_restarts_alone_while_the_others_run_on(cluster):
    """Closing one container's stdin ends that container only: it exits 0 and, under
    restartPolicy Always, waits to restart with a restartCount of its own, while the other app
    container and the sidecar keep running (before, the pod's containers shared one lifetime)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(PAIR))
    wait_for(lambda: "running" in (_statuses(cluster, "pair").get("shell") or {}).get("state", {}), 60,
             "shell running")
    cluster.kubectl("attach", "-i", "pair", "-c", "shell", input="", check=False, timeout=60)
    shell = wait_for(lambda: (s := _statuses(cluster, "pair")["shell"])["restartCount"] == 1 and s, 30,
                     "shell restarted")
    assert shell["lastState"]["terminated"]["exitCode"] == 0
    assert shell["lastState"]["terminated"]["reason"] == "Completed"
    statuses = _statuses(cluster, "pair")
    for name in ("web", "proxy"):
        assert "running" in statuses[name]["state"], statuses[name]
        assert statuses[name]["restartCount"] == 0 and statuses[name]["lastState"] == {}
    assert cluster.kubectl_json("get", "pod", "pair")["status"]["phase"] == "Running"
    assert "exited" not in cluster.kubectl("logs", "pair", "-c", "web").stdout
