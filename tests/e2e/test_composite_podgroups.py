"""CompositePodGroups through kubectl on the default simulated cluster (two
nodes of 8 GPUs): a tree of two 2-pod gangs under a root that needs both
runs whole; a second tree whose two gangs cannot both fit in what is left
places neither (zero pods bound, zero GPUs held) and its root says why; a
tree spanning two Workloads is refused as Invalid. The scheduler's
podgroup metrics count the composite attempts on the API server's /metrics."""

from __future__ import annotations

import time

import yaml

from tests.e2e.test_gang_gpus import gpu_pod, gpus_held, pods_of, template, wait_for

S = "scheduling.k8s.io"


def composite(name: str, min_groups: int, workload: str = "train") -> dict:
    return {"apiVersion": f"{S}/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"workloadRef": {"workloadName": workload, "templateName": name},
                     "schedulingPolicy": {"gang": {"minGroupCount": min_groups}}}}


def leaf(name: str, parent: str, workload: str = "train") -> dict:
    return {"apiVersion": f"{S}/v1beta1", "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "parentCompositePodGroupName": parent,
                     "workloadRef": {"workloadName": workload, "templateName": name}}}


def tree(root: str, leaves: list[str], claim_template: str, workloads: tuple[str, ...] = ()) -> list[dict]:
    docs = [composite(root, len(leaves))]
    for i, name in enumerate(leaves):
        docs.append(leaf(name, root, workloads[i] if workloads else "train"))
        docs += [gpu_pod(f"{name}-{j}", claim_template, name) for j in range(2)]
    return docs


def condition(cluster, name: str) -> dict | None:
    obj = cluster.kubectl_json("get", "compositepodgroup", name, "-n", "default")
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == "CompositePodGroupInitiallyScheduled"), None)


def running(cluster, *groups: str):
    pods = [p for g in groups for p in pods_of(cluster, g)]
    return pods if len(pods) == 2 * len(groups) and all(p["status"].get("phase") == "Running" for p in pods) else None


def test_tree_runs_whole_and_a_tree_that_does_not_fit_holds_nothing(cluster):
    docs = [template("two-gpus", 2), template("four-gpus", 4), *tree("first", ["fa", "fb"], "two-gpus")]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    wait_for(lambda: running(cluster, "fa", "fb"))
    assert gpus_held(cluster, "fa") + gpus_held(cluster, "fb") == 8
    assert wait_for(lambda: condition(cluster, "first"))["status"] == "True"
    rows = cluster.kubectl("get", "compositepodgroups", "-n", "default").stdout.split("\n")
    assert rows[0].split() == ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"]
    assert rows[1].split()[:4] == ["first", "Gang", "train", "Scheduled"]

    # 8 GPUs are left; this tree needs 16
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(tree("second", ["sa", "sb"], "four-gpus")))
    cond = wait_for(lambda: (c := condition(cluster, "second")) and c["status"] == "False" and c)
    assert cond["reason"] == "Unschedulable" and cond["message"].startswith("minGroupCount (2) cannot be satisfied")
    for _ in range(3):
        assert [p["spec"].get("nodeName") for g in ("sa", "sb") for p in pods_of(cluster, g)] == [None] * 4
        assert gpus_held(cluster, "sa") + gpus_held(cluster, "sb") == 0
        time.sleep(0.5)
    events = cluster.kubectl_json("get", "events", "-n", "default")["items"]
    assert any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "sa-0" for e in events)

    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("scheduler_podgroup_schedule_attempts_total{")}
    by_result = {}
    for key, value in samples.items():
        if 'type="compositepodgroup"' in key:
            result = key.split('result="', 1)[1].split('"', 1)[0]
            by_result[result] = by_result.get(result, 0) + value
    assert by_result.get("scheduled", 0) >= 1 and by_result.get("unschedulable", 0) >= 1


def test_tree_over_two_workloads_is_invalid(cluster):
    docs = [template("two-gpus", 2), *tree("mixed", ["ma", "mb"], "two-gpus", workloads=("train", "serve"))]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    cond = wait_for(lambda: (c := condition(cluster, "mixed")) and c["reason"] == "Invalid" and c)
    assert cond["status"] == "False"
    assert cond["message"] == 'the composite pod group hierarchy spans more than one Workload: "serve", "train"'
    rows = cluster.kubectl("get", "compositepodgroup", "mixed", "-n", "default").stdout.split("\n")
    assert rows[1].split()[3] == "Unschedulable"  # printPodGroup's cell for a False condition, whatever its reason
    assert [p["spec"].get("nodeName") for g in ("ma", "mb") for p in pods_of(cluster, g)] == [None] * 4
