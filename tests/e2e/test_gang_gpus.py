"""The seed's promise with numbers, through kubectl on the default simulated
cluster (two nodes of 8 GPUs, DRA): a 4-GPU pod leaves 12 GPUs free, then
two 8-GPU gangs (4 pods x 2 GPUs) arrive together. One runs; the other holds
zero GPUs and zero bound pods until the first ends, then runs. With basic
groups the same shape is placed piecemeal: all 12 GPUs end up held by 6
pods and a group runs incomplete."""

from __future__ import annotations

import time

import pytest
import yaml

from .conftest import wait_for

GPU_CLASS = "gpu.nanokube.io"


def template(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": count}}]}}}}


def gpu_pod(name: str, claim_template: str, group: str | None = None, run_seconds: int | None = None) -> dict:
    spec: dict = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim_template}],
                  "terminationGracePeriodSeconds": 0, "restartPolicy": "Never",
                  "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                  "resources": {"claims": [{"name": "gpu"}]}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    md: dict = {"name": name, "namespace": "default"}
    if run_seconds:
        md["annotations"] = {"sim.nanokube.io/run-seconds": str(run_seconds)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def group(name: str, policy: dict) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"schedulingPolicy": policy}}


def pods_of(cluster, prefix: str) -> list[dict]:
    return [p for p in cluster.kubectl_json("get", "pods", "-n", "default")["items"]
            if p["metadata"]["name"].startswith(f"{prefix}-")]


def gpus_held(cluster, prefix: str) -> int:
    """Devices allocated to claims owned by the group's pods."""
    held = 0
    for c in cluster.kubectl_json("get", "resourceclaims", "-n", "default")["items"]:
        owners = [r["name"] for r in c["metadata"].get("ownerReferences") or []]
        if any(o.startswith(f"{prefix}-") for o in owners):
            held += len(((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])
    return held


@pytest.fixture(scope="module")
def hog(cluster):
    """A lone pod holding 4 of the 16 GPUs for the whole module."""
    docs = [template("two-gpus", 2), template("four-gpus", 4), gpu_pod("hog", "four-gpus")]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "hog", "-n", "default")["status"].get("phase") == "Running")
    return "hog"


def test_two_gangs_one_runs_the_other_holds_nothing_until_it_ends(cluster, hog):
    docs = [group(g, {"gang": {"minCount": 4}}) for g in ("g1", "g2")]
    docs += [gpu_pod(f"{g}-{i}", "two-gpus", g, run_seconds=12) for i in range(4) for g in ("g1", "g2")]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def one_running():
        for first, second in (("g1", "g2"), ("g2", "g1")):
            pods = pods_of(cluster, first)
            if len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods):
                return first, second
        return None
    first, second = wait_for(one_running)
    # while the first gang's 12 s run lasts. A loaded machine's kubectl calls can take a second
    # each, so what is read of the second gang, its group and the claims counts only while the
    # first gang, read after them, still runs
    looked, conds = 0, []
    while looked < 3:
        waiting, pg = pods_of(cluster, second), cluster.kubectl_json("get", "podgroup", second, "-n", "default")
        held = gpus_held(cluster, second), gpus_held(cluster, first)
        running = pods_of(cluster, first)
        if any(p["status"].get("phase") != "Running" for p in running):
            break
        looked += 1
        assert len(running) == 4
        assert [p["spec"].get("nodeName") for p in waiting] == [None] * 4, \
            [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase")) for p in running + waiting]
        assert held == (0, 8)
        conds.append(next((c for c in (pg.get("status") or {}).get("conditions") or ()
                           if c["type"] == "PodGroupInitiallyScheduled"), {}))
        time.sleep(0.5)
    assert looked, "the first gang ended before the second was looked at"
    assert conds[-1].get("status") == "False" and conds[-1].get("reason") == "Unschedulable", conds[-1]

    def second_runs():
        pods = pods_of(cluster, second)
        return all(p["status"].get("phase") in ("Running", "Succeeded") for p in pods) and pods
    wait_for(second_runs)
    assert all(p["status"]["phase"] == "Succeeded" for p in pods_of(cluster, first))
    # the second gang has shown what it had to: its GPUs go back now, not after its 12 s run
    cluster.kubectl("delete", "pod", "-n", "default", *(p["metadata"]["name"] for p in pods_of(cluster, second)))


def test_basic_groups_are_placed_piecemeal(cluster, hog):
    docs = [group(g, {"basic": {}}) for g in ("b1", "b2")]
    docs += [gpu_pod(f"{g}-{i}", "two-gpus", g) for i in range(4) for g in ("b1", "b2")]
    wait_for(lambda: all(p["status"].get("phase") == "Succeeded" for p in pods_of(cluster, "g1") + pods_of(cluster, "g2"))
             and gpus_held(cluster, "g1") + gpus_held(cluster, "g2") == 0, what="the gangs' GPUs free")
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def no_room(p: dict) -> bool:
        """The scheduler's verdict on a pod whose claims exist: no node can allocate them."""
        return any(c["type"] == "PodScheduled" and (c["status"], c.get("reason")) == ("False", "Unschedulable")
                   and "cannot allocate all claims" in c.get("message", "")
                   for c in p["status"].get("conditions") or ())

    def settled():
        """Six pods bound and the other two found without room (had the scheduler found room for
        them, it would have bound them instead)."""
        pods = {g: pods_of(cluster, g) for g in ("b1", "b2")}
        bound = {g: sum(1 for p in ps if p["spec"].get("nodeName")) for g, ps in pods.items()}
        refused = sum(1 for ps in pods.values() for p in ps if not p["spec"].get("nodeName") and no_room(p))
        return bound if sum(bound.values()) == 6 and refused == 2 else None
    bound = wait_for(settled, what="six pods bound, two without room")
    assert min(bound.values()) < 4 and max(bound.values()) >= 2
    assert gpus_held(cluster, "b1") + gpus_held(cluster, "b2") == 12
    incomplete = min(bound, key=bound.get)
    assert gpus_held(cluster, incomplete) == 2 * bound[incomplete] > 0
