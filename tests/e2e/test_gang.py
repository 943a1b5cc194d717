"""Gang scheduling through kubectl on the default simulated cluster (two
64-CPU nodes): a gang that fits runs whole; one that cannot fit binds none
of its pods and every pod gets FailedScheduling."""

from __future__ import annotations

import yaml

from .conftest import wait_for


def gang(name: str, size: int, cpu: str) -> str:
    docs = [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}}]
    for i in range(size):
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{i}", "namespace": "default"},
                     "spec": {"schedulingGroup": {"podGroupName": name},
                              "containers": [{"name": "c", "image": "busybox",
                                              "resources": {"requests": {"cpu": cpu}}}]}})
    return yaml.safe_dump_all(docs)


def phases(cluster, name: str) -> list[tuple[str, str | None]]:
    items = cluster.kubectl_json("get", "pods", "-n", "default")["items"]
    return sorted((p["status"].get("phase"), p["spec"].get("nodeName"))
                  for p in items if p["metadata"]["name"].startswith(f"{name}-"))


def test_gang_that_fits_runs_and_is_shown_scheduled(cluster):
    cluster.kubectl("apply", "-f", "-", input=gang("fits", 3, "1"))
    running = wait_for(lambda: (lambda got: got if [p for p, _ in got] == ["Running"] * 3 else None)(phases(cluster, "fits")))
    assert all(node for _, node in running)
    table = wait_for(lambda: (lambda out: out if "Scheduled" in out else None)(
        cluster.kubectl("get", "podgroups", "-n", "default").stdout))
    header, row = table.splitlines()[0].split(), next(line.split() for line in table.splitlines() if line.startswith("fits"))
    assert header == ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"]  # upstream's printPodGroup
    assert row[1:4] == ["Gang", "<none>", "Scheduled"]


def test_gang_too_large_stays_pending_with_events_on_every_pod(cluster):
    cluster.kubectl("apply", "-f", "-", input=gang("huge", 3, "40"))

    def all_failed():
        events = cluster.kubectl("get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling",
                                 "-o", "jsonpath={.items[*].involvedObject.name}").stdout.split()
        return {"huge-0", "huge-1", "huge-2"} <= set(events)
    wait_for(all_failed)
    assert phases(cluster, "huge") == [("Pending", None)] * 3
    pg = cluster.kubectl_json("get", "podgroup", "huge", "-n", "default")
    cond = next(c for c in pg["status"]["conditions"] if c["type"] == "PodGroupInitiallyScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == ("minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
                               "pod group preemption: No preemption victims found for incoming preemptor")
    # the two members that fitted carry the group's message, the one that did not its own diagnosis
    events = cluster.kubectl_json("get", "events", "-n", "default", "--field-selector", "reason=FailedScheduling")["items"]
    said = {e["involvedObject"]["name"]: e["message"] for e in events if e["involvedObject"]["name"].startswith("huge-")}
    assert sorted(said.values()) == sorted([cond["message"]] * 2 + ["0/2 nodes are available: 2 Insufficient cpu."])
