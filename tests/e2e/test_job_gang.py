"""A Job with spec.scheduling through kubectl on the default simulated
cluster (two 64-CPU nodes): the Job controller creates its Workload and
PodGroup, the gang is placed whole and the Job completes; a gang that cannot
fit keeps every pod Pending."""

from __future__ import annotations

import yaml

from .conftest import wait_for


def gang_job(name: str, cpu: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
        "spec": {"parallelism": 3, "completions": 3,
                 "scheduling": {"schedulingPolicy": {"gang": {}}},
                 "template": {"metadata": {"annotations": {"sim.nanokube.io/run-seconds": "1"}},
                              "spec": {"restartPolicy": "Never", "containers": [
                                  {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}})


def job_pods(cluster, name: str) -> list[dict]:
    return cluster.kubectl_json("get", "pods", "-n", "default", "-l", f"batch.kubernetes.io/job-name={name}")["items"]


def owned_by_job(cluster, kind: str, uid: str) -> list[dict]:
    return [o for o in cluster.kubectl_json("get", kind, "-n", "default")["items"]
            if any(r.get("controller") and r["uid"] == uid for r in o["metadata"].get("ownerReferences") or [])]


def test_gang_job_gets_workload_and_pod_group_and_completes(cluster):
    cluster.kubectl("apply", "-f", "-", input=gang_job("trio", "1"))
    uid = cluster.kubectl_json("get", "job", "trio", "-n", "default")["metadata"]["uid"]
    [wl] = wait_for(lambda: owned_by_job(cluster, "workloads", uid))
    [pg] = wait_for(lambda: owned_by_job(cluster, "podgroups", uid))
    assert wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert pg["spec"]["workloadRef"]["workloadName"] == wl["metadata"]["name"]
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    table = cluster.kubectl("get", "workloads,podgroups", "-n", "default").stdout
    assert wl["metadata"]["name"] in table and pg["metadata"]["name"] in table
    # upstream's printers: a Workload is its name and age; a PodGroup names its Workload
    workloads, groups = table.split("\n\n")
    assert workloads.splitlines()[0].split() == ["NAME", "AGE"]
    assert groups.splitlines()[0].split() == ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"]
    assert groups.splitlines()[1].split()[1:3] == ["Gang", wl["metadata"]["name"]]

    def all_bound():
        pods = job_pods(cluster, "trio")
        return pods if len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods) else None
    pods = wait_for(all_bound)
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {pg["metadata"]["name"]}
    cluster.kubectl("wait", "--for=condition=Complete", "job/trio", "-n", "default", "--timeout=60s", timeout=70)
    assert cluster.kubectl_json("get", "job", "trio", "-n", "default")["status"]["succeeded"] == 3


def test_gang_job_that_cannot_fit_keeps_all_pods_pending(cluster):
    cluster.kubectl("apply", "-f", "-", input=gang_job("giant", "40"))
    uid = cluster.kubectl_json("get", "job", "giant", "-n", "default")["metadata"]["uid"]

    def refused():
        groups = owned_by_job(cluster, "podgroups", uid)
        conds = [c for g in groups for c in (g.get("status") or {}).get("conditions") or []]
        return any(c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "False" for c in conds)
    wait_for(refused)
    pods = job_pods(cluster, "giant")
    assert len(pods) == 3
    assert [(p["status"].get("phase"), p["spec"].get("nodeName")) for p in pods] == [("Pending", None)] * 3
