"""Workload-aware preemption through kubectl on the default simulated
cluster (two 64-CPU nodes). Two low-priority `disruptionMode: all` gangs
fill the CPUs; a high-priority gang with `preemptionPolicy: Never` preempts
nothing, while a high-priority gang of the same size evicts exactly one of
the two groups, whole, and runs."""

from __future__ import annotations

import pytest
import yaml

from .conftest import wait_for


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority") -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": policy}


def gang(name: str, size: int, cpu: str, klass: str, mode: str = "single") -> list[dict]:
    docs = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": size}}, "priorityClassName": klass,
                      "disruptionMode": {mode: {}}}}]
    for i in range(size):
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{i}", "namespace": "default"},
                     "spec": {"schedulingGroup": {"podGroupName": name}, "priorityClassName": klass,
                              "terminationGracePeriodSeconds": 0,
                              "containers": [{"name": "c", "image": "busybox",
                                              "resources": {"requests": {"cpu": cpu}}}]}})
    return docs


def pods(cluster) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in cluster.kubectl_json("get", "pods", "-n", "default")["items"]}


def running(cluster, names: list[str]) -> bool:
    got = pods(cluster)
    return all(got.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)


LOW = ["low-a-0", "low-a-1", "low-b-0", "low-b-1"]


@pytest.fixture(scope="module")
def full(cluster):
    """Both nodes' 128 CPUs held by two low-priority `all` gangs of 2 x 32 CPU."""
    docs = [priority_class("low", 10), priority_class("high", 1000), priority_class("high-polite", 1000, "Never")]
    docs += gang("low-a", 2, "32", "low", "all") + gang("low-b", 2, "32", "low", "all")
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    wait_for(lambda: running(cluster, LOW))
    return cluster


def test_preemption_policy_never_preempts_nothing(full):
    full.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(gang("polite", 2, "32", "high-polite")))

    def failed():
        return full.kubectl("get", "podgroup", "polite", "-n", "default", "-o",
                            "jsonpath={.status.conditions[?(@.type=='PodGroupInitiallyScheduled')].message}").stdout
    assert wait_for(failed).endswith(", pod group preemption: not eligible due to preemptionPolicy=Never.")
    got = pods(full)
    assert all(not got[n]["metadata"].get("deletionTimestamp") for n in LOW)
    assert [got[f"polite-{i}"]["spec"].get("nodeName") for i in range(2)] == [None, None]
    assert not full.kubectl_json("get", "events", "-n", "default", "--field-selector", "reason=Preempted")["items"]
    full.kubectl("delete", "pod", "polite-0", "polite-1", "-n", "default", "--wait=false")
    full.kubectl("delete", "podgroup", "polite", "-n", "default", "--wait=false")
    wait_for(lambda: not any(n.startswith("polite-") for n in pods(full)))


def test_high_priority_gang_preempts_exactly_one_whole_all_group(full):
    full.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(gang("high", 2, "32", "high")))
    wait_for(lambda: running(full, ["high-0", "high-1"]))
    left = sorted(n for n in pods(full) if n.startswith("low-"))
    assert left in (["low-a-0", "low-a-1"], ["low-b-0", "low-b-1"])
    victim = "low-b" if left[0].startswith("low-a") else "low-a"
    preempted = full.kubectl_json("get", "events", "-n", "default", "--field-selector", "reason=Preempted")["items"]
    assert sorted(e["involvedObject"]["name"] for e in preempted) == [f"{victim}-0", f"{victim}-1"]
    assert all("pod group default/high" in e["message"] for e in preempted)
    pg = full.kubectl_json("get", "podgroup", victim, "-n", "default")
    cond = next(c for c in pg["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    failed = full.kubectl_json("get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling")["items"]
    assert {"high-0", "high-1"} <= {e["involvedObject"]["name"] for e in failed}
