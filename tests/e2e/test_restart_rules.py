"""A container's restart rules (KEP-5307) and RestartAllContainers (KEP-5532), as kubectl shows a
simulated node carrying them out: kubectl's STATUS and RESTARTS columns and the statuses it reads."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    """The module's cluster: its kubelets' crash-loop back-off at most 1 s
    (crashLoopBackOff.maxContainerRestartPeriod; 5 min, from 10 s, by default)."""
    with running_cluster("restart-rules", env={"NANOKUBE_MAX_CONTAINER_RESTART_PERIOD": "1"}) as c:
        yield c


def create(c, name: str, exit_codes: str, action: str, inits: bool = False) -> None:
    spec = {"restartPolicy": "Never",
            "containers": [{"name": "app", "image": "busybox:1.36", "restartPolicy": "Never",
                            "restartPolicyRules": [{"action": action,
                                                    "exitCodes": {"operator": "In", "values": [42]}}]}]}
    if inits:
        spec["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {
        "name": name, "annotations": {"sim.nanokube.io/run-seconds": "1", "sim.nanokube.io/exit-code": exit_codes}}}
    c.kubectl("create", "-f", "-", input=json.dumps(pod))


def row(c, name: str, status: str):
    def check():
        cols = c.kubectl("get", "pod", name, "--no-headers").stdout.split()
        return cols if len(cols) > 3 and cols[2] == status else None
    return check


def test_a_rule_restarts_the_container_then_its_never_policy_ends_the_pod(cluster):
    c = cluster
    create(c, "ruled", "42,1", "Restart")
    create(c, "gang", "42,0", "RestartAllContainers", inits=True)
    cols = wait_for(row(c, "ruled", "Error"), what="ruled Error after one restart")  # 1 s, back-off 1 s, 1 s
    assert cols[3] == "1", cols
    got = c.kubectl("get", "pod", "ruled", "-o", "jsonpath={.status.phase} "
                    "{.status.containerStatuses[0].lastState.terminated.exitCode} "
                    "{.status.containerStatuses[0].state.terminated.exitCode}").stdout
    assert got == "Failed 42 1"

    cols = wait_for(row(c, "gang", "Completed"), what="gang Completed after restarting in place")
    assert cols[3] == "1", cols
    got = c.kubectl_json("get", "pod", "gang")
    setup = got["status"]["initContainerStatuses"][0]
    assert setup["restartCount"] == 1 and setup["lastState"]["terminated"]["reason"] == "Completed"
    restarting = next(x for x in got["status"]["conditions"] if x["type"] == "AllContainersRestarting")
    assert (restarting["status"], restarting["reason"]) == ("False", "PodCompleted")
    # the kubelet writes its Events from a queue, maybe after the status above
    wait_for(lambda: "spec.initContainers{setup}=2" in c.kubectl(
        "get", "events", "--field-selector", "involvedObject.name=gang,reason=Started",
        "-o", "jsonpath={range .items[*]}{.involvedObject.fieldPath}={.count} {end}").stdout, 30,
        "the init container's second Started")
    node = c.kubectl_json("get", "pod", "gang")["spec"]["nodeName"]
    config = json.loads(c.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/configz").stdout)["kubeletconfig"]
    assert config["crashLoopBackOff"] == {"maxContainerRestartPeriod": "1s"}


@pytest.mark.parametrize("env, error", [
    ({"NANOKUBE_MAX_CONTAINER_RESTART_PERIOD": "0.5"}, "maxContainerRestartPeriod must be between 1s and 300s"),
    ({"NANOKUBE_JOB_POD_FAILURE_BACKOFF": "-1"}, "must be a positive number of seconds"),
])
def test_a_shortening_knob_out_of_range_is_refused(tmp_path, env, error):
    """`nanokube up` refuses it with exit code 2 and says why (before, the restart period's was a
    traceback once the controllers ran, and a negative Job backoff removed the backoff)."""
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", "0"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert r.returncode == 2 and error in r.stderr and "Traceback" not in r.stderr
