"""backoffLimitPerIndex end to end through kubectl.

The simulated runtime takes a pod's exit code from its annotations, and all
pods of a Job share one template, so the template holds its pods behind a
scheduling gate: the test plays the part of a flaky workload, giving each
pod of index 2 a failing exit code before it lets the pod be scheduled."""

import json

import pytest
import yaml

from .conftest import running_cluster, wait_for

GATE = "e2e.nanokube.io/hold"
INDEX = "batch.kubernetes.io/job-completion-index"


@pytest.fixture(scope="module")
def cluster():
    """The module's cluster: a failed pod's replacement waits the Job controller's pod failure backoff, 1 s
    here (10 s by default)."""
    with running_cluster("job-per-index", env={"NANOKUBE_JOB_POD_FAILURE_BACKOFF": "1"}) as c:
        yield c


def indexed_job(name, **spec):
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": 4, "parallelism": 4, "completionMode": "Indexed", **spec,
                 "template": {"metadata": {"annotations": {"sim.nanokube.io/run-seconds": "1"}},
                              "spec": {"restartPolicy": "Never", "schedulingGates": [{"name": GATE}],
                                       "containers": [{"name": "c", "image": "busybox"}]}}}})


def release_pods(cluster, job, failing_index, exit_code):
    """Ungate the Job's held pods, the failing index's with a failing exit code."""
    pods = cluster.kubectl_json("get", "pods", "-l", f"batch.kubernetes.io/job-name={job}")["items"]
    for p in pods:
        if not p["spec"].get("schedulingGates") or p["metadata"].get("deletionTimestamp"):
            continue
        ops = [{"op": "remove", "path": "/spec/schedulingGates"}]
        if p["metadata"]["annotations"][INDEX] == str(failing_index):
            ops.insert(0, {"op": "add", "path": "/metadata/annotations/sim.nanokube.io~1exit-code",
                           "value": str(exit_code)})
        cluster.kubectl("patch", "pod", p["metadata"]["name"], "--type=json", "-p", json.dumps(ops))
    return pods


def run_until_finished(cluster, job, failing_index, exit_code):
    def done():
        release_pods(cluster, job, failing_index, exit_code)
        st = cluster.kubectl_json("get", "job", job).get("status") or {}
        return st if any(c["type"] in ("Failed", "Complete") and c["status"] == "True"
                         for c in st.get("conditions") or []) else None
    return wait_for(done, timeout=90, what=f"job {job} finished", every=0.5)


def pods_of_index(cluster, job, index):
    pods = cluster.kubectl_json("get", "pods", "-l", f"batch.kubernetes.io/job-name={job},{INDEX}={index}")["items"]
    return sorted(pods, key=lambda p: int(p["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"]))


def test_an_index_past_its_backoff_limit_fails_the_job_once_the_rest_finish(cluster):
    cluster.kubectl("apply", "-f", "-", input=indexed_job("per-index", backoffLimitPerIndex=1))
    st = run_until_finished(cluster, "per-index", 2, 1)
    conds = {c["type"]: c for c in st["conditions"]}
    assert (conds["Failed"]["reason"], conds["Failed"]["message"]) == ("FailedIndexes", "Job has failed indexes")
    assert conds["FailureTarget"]["reason"] == "FailedIndexes"
    assert (st["failedIndexes"], st["completedIndexes"]) == ("2", "0,1,3")
    assert (st["succeeded"], st["failed"]) == (3, 2)
    assert st["uncountedTerminatedPods"] == {}
    tries = pods_of_index(cluster, "per-index", 2)
    assert [p["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"] for p in tries] == ["0", "1"]
    assert all(p["status"]["phase"] == "Failed" for p in tries)
    # the controller's recorder writes its Events from a queue, maybe after the status above
    wait_for(lambda: any(e["reason"] == "FailedIndexes" and e["type"] == "Warning" for e in cluster.kubectl_json(
        "get", "events", "--field-selector", "involvedObject.name=per-index")["items"]), 30, "the FailedIndexes Event")


def test_fail_index_rule_stops_the_index_without_retries(cluster):
    policy = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}]}
    cluster.kubectl("apply", "-f", "-", input=indexed_job("fail-index", backoffLimitPerIndex=5, podFailurePolicy=policy))
    st = run_until_finished(cluster, "fail-index", 2, 3)
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailedIndexes"
    assert (st["failedIndexes"], st["completedIndexes"], st["succeeded"], st["failed"]) == ("2", "0,1,3", 3, 1)
    assert len(pods_of_index(cluster, "fail-index", 2)) == 1
