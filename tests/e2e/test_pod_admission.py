"""The kubelet's admission, seen with kubectl as on a real cluster: a pod bound to a node by name
(`kubectl run --overrides` with spec.nodeName, no scheduler involved) that does not fit there is
rejected by the node, `kubectl get` shows OutOfcpu, `kubectl describe` the message and the Event;
a critical one that does not fit preempts a pod there instead, and runs."""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def admission_cluster(store_url):
    with running_cluster("admission", store=store_url) as c:
        yield c


def run_on(c, name: str, node: str, cpu: str, **spec) -> None:
    overrides = {"apiVersion": "v1", "spec": {"nodeName": node, "containers": [
        {"name": name, "image": "busybox:1.36", "command": ["sleep", "infinity"],
         "resources": {"requests": {"cpu": cpu}}}], **spec}}
    c.kubectl("run", name, "--image=busybox:1.36", "--restart=Never", f"--overrides={json.dumps(overrides)}")


def status_of(c, name: str) -> str:
    row = c.kubectl("get", "pod", name, "--no-headers").stdout.split()
    return row[2] if len(row) > 2 else ""


def test_a_pod_bound_by_name_that_overfills_its_node_is_out_of_cpu(admission_cluster):
    c = admission_cluster
    run_on(c, "big", "gpu-0", "48")
    wait_for(lambda: status_of(c, "big") == "Running", what="big Running")
    run_on(c, "bigger", "gpu-0", "32")
    wait_for(lambda: status_of(c, "bigger") == "OutOfcpu", what="bigger OutOfcpu")
    message = c.kubectl("get", "pod", "bigger", "-o", "jsonpath={.status.phase} {.status.message}").stdout
    found = re.fullmatch(r"Failed Pod was rejected: Node didn't have enough resource: cpu, requested: 32000, "
                         r"used: (\d+), capacity: 64000", message)
    assert found and 48000 <= int(found[1]) <= 64000, message
    # the kubelet's Warning event, which describe lists (written from its queue, maybe after the status)
    wait_for(lambda: re.search(r"Warning\s+OutOfcpu\s+\S+\s+kubelet\s+Node didn't have enough resource: cpu",
                               c.kubectl("describe", "pod", "bigger").stdout), 30, "the OutOfcpu event in describe")
    described = c.kubectl("describe", "pod", "bigger").stdout
    assert re.search(r"Status:\s+Failed", described) and re.search(r"Reason:\s+OutOfcpu", described), described
    assert re.search(r"Message:\s+Pod was rejected: Node didn't have enough resource: cpu", described), described
    # the pod admitted first runs on; one that fits beside it is admitted
    assert status_of(c, "big") == "Running"
    run_on(c, "small", "gpu-0", "1")
    wait_for(lambda: status_of(c, "small") == "Running", what="small Running")


def test_a_system_node_critical_pod_bound_to_a_full_node_preempts_a_pod_and_runs(admission_cluster):
    c = admission_cluster
    # `sleep` as PID 1 ignores SIGTERM: the kubelet's kill of the preempted pod took the default 30 s grace
    run_on(c, "filler", "gpu-1", "60", terminationGracePeriodSeconds=1)
    wait_for(lambda: status_of(c, "filler") == "Running", what="filler Running")
    run_on(c, "node-agent", "gpu-1", "8", priorityClassName="system-node-critical")
    wait_for(lambda: status_of(c, "node-agent") == "Running", what="node-agent Running")
    # the preempted pod's status says why, and that it was a disruption
    got = c.kubectl("get", "pod", "filler", "-o", "jsonpath={.status.phase}|{.status.reason}|{.status.message}|"
                    "{.status.conditions[?(@.type=='DisruptionTarget')].reason}").stdout
    assert got == "Failed|Preempting|Preempted in order to admit critical pod|TerminationByKubelet", got
    wait_for(lambda: re.search(r"Warning\s+Preempting\s+\S+\s+kubelet\s+Preempted in order to admit critical pod",
                               c.kubectl("describe", "pod", "filler").stdout), 30, "the Preempting event in describe")
