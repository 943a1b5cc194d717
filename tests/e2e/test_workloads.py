"""Workload controllers end to end: Deployments roll out and scale, Jobs
complete or fail, all driven through kubectl against simulated nodes."""

import json

import pytest
import yaml

from .conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    """The module's cluster: a failed pod's replacement waits the Job controller's pod failure backoff, 1 s
    here (10 s by default)."""
    with running_cluster("workloads", env={"NANOKUBE_JOB_POD_FAILURE_BACKOFF": "1"}) as c:
        yield c


def deployment(name, image, replicas):
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": image}]}}}})


def job(name, completions, parallelism, run_seconds, exit_code=0, backoff_limit=6):
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": completions, "parallelism": parallelism, "backoffLimit": backoff_limit,
                 "template": {"metadata": {"annotations": {"sim.nanokube.io/run-seconds": str(run_seconds),
                                                           "sim.nanokube.io/exit-code": str(exit_code)}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}})


def running_pods(cluster, app):
    items = cluster.kubectl_json("get", "pods", "-l", f"app={app}")["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return live if all(p["status"].get("phase") == "Running" for p in live) else None


def test_deployment_rolls_out_updates_and_scales(cluster):
    cluster.kubectl("apply", "-f", "-", input=deployment("web", "nginx:1.27", 3))
    cluster.kubectl("rollout", "status", "deployment/web", "--timeout=60s", timeout=70)
    pods = wait_for(lambda: (p := running_pods(cluster, "web")) and len(p) == 3 and p)
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"ReplicaSet"}

    cluster.kubectl("set", "image", "deployment/web", "c=nginx:1.28")
    out = cluster.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=100).stdout
    assert 'deployment "web" successfully rolled out' in out
    d = cluster.kubectl_json("get", "deployment", "web")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    rss = cluster.kubectl_json("get", "rs", "-l", "app=web")["items"]
    by_rev = {r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r for r in rss}
    assert by_rev["2"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert by_rev["2"]["status"]["readyReplicas"] == 3 and by_rev["1"]["spec"]["replicas"] == 0

    cluster.kubectl("scale", "deployment/web", "--replicas=1")
    wait_for(lambda: (p := running_pods(cluster, "web")) is not None and len(p) == 1)
    wait_for(lambda: cluster.kubectl_json("get", "deployment", "web")["status"].get("availableReplicas") == 1)


def test_job_completes(cluster):
    cluster.kubectl("apply", "-f", "-", input=job("batch3", 3, 2, 1))
    cluster.kubectl("wait", "--for=condition=Complete", "job/batch3", "--timeout=60s", timeout=70)
    st = cluster.kubectl_json("get", "job", "batch3")["status"]
    assert st["succeeded"] == 3 and st["completionTime"]
    pods = cluster.kubectl_json("get", "pods", "-l", "batch.kubernetes.io/job-name=batch3")["items"]
    assert len(pods) == 3 and all(p["status"]["phase"] == "Succeeded" for p in pods)


def test_job_fails_after_backoff_limit(cluster):
    cluster.kubectl("apply", "-f", "-", input=job("crash", 1, 1, 0, exit_code=1, backoff_limit=1))
    cluster.kubectl("wait", "--for=condition=Failed", "job/crash", "--timeout=60s", timeout=70)
    st = cluster.kubectl_json("get", "job", "crash")["status"]
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and st["failed"] == 2
    assert json.dumps(st["uncountedTerminatedPods"]) == "{}"
