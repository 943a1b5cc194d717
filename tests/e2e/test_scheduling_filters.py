"""Every scheduler filter reason through `nanokube up` and kubectl: a pod that
cannot fit gets a `FailedScheduling` event and PodScheduled=False with
upstream's "0/N nodes are available: ..." message, and once the cause is
fixed the queue retries it and it lands. Also default preemption: the
lowest-priority victim on one node is evicted, sparing the PDB-guarded one.

The cluster is examples/clusters/dra-e2e.yaml: h100-0 and h100-1 in zone-a,
a100-0 in zone-b, each with 4 CPUs and 16Gi."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import running_cluster, wait_for

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "dra-e2e.yaml"
HOLD = "e2e.nanokube.io/hold"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("filters", ("--cluster", str(CLUSTER_FILE))) as c:
        yield c


@pytest.fixture(autouse=True)
def clean(cluster):
    """Each test starts with no pods in `default`."""
    yield
    cluster.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: not cluster.kubectl_json("get", "pods")["items"], what="pods gone", every=0.1)


def create(c, obj: dict) -> None:
    c.kubectl("create", "-f", "-", input=json.dumps(obj))


def pod(name: str, labels: dict | None = None, cpu: str = "100m", memory: str = "64Mi", **spec) -> dict:
    container = {"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    container.update(spec.pop("container", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [container], **spec}}


def node_of(c, name: str) -> str | None:
    return c.kubectl_json("get", "pod", name)["spec"].get("nodeName")


def running(c, name: str) -> None:
    wait_for(lambda: c.kubectl_json("get", "pod", name)["status"].get("phase") == "Running", what=f"{name} running", every=0.1)


def failed_scheduling(c, name: str) -> str:
    """Wait for the pod's FailedScheduling event and Unschedulable condition; the event's message."""
    def event():
        items = c.kubectl_json("get", "events", "--field-selector", f"involvedObject.name={name},reason=FailedScheduling")["items"]
        return items and items[-1]["message"]
    message = wait_for(event, what=f"FailedScheduling for {name}", every=0.1)
    cond = wait_for(lambda: next((x for x in c.kubectl_json("get", "pod", name)["status"].get("conditions") or []
                                  if x["type"] == "PodScheduled"), None), what="PodScheduled condition", every=0.1)
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"].startswith("0/3 nodes are available: ")
    assert node_of(c, name) is None
    return message


def reasons(message: str) -> set[str]:
    """The "N reason" parts of the filter summary, without what PostFilter plugins add after it
    (DynamicResources' "still not schedulable", preemption's verdict)."""
    assert message.startswith("0/3 nodes are available: "), message
    summary = message.removeprefix("0/3 nodes are available: ").split(". ")[0].rstrip(".")
    return set(summary.split(", "))


def lands(c, name: str, on: str | set[str]) -> None:
    nodes = {on} if isinstance(on, str) else on
    assert wait_for(lambda: node_of(c, name), what=f"{name} scheduled", every=0.1) in nodes


def test_cordoned_node_then_uncordoned(cluster):
    cluster.kubectl("cordon", "h100-0")
    try:
        create(cluster, pod("pinned", nodeSelector={HOST: "h100-0"}))
        assert reasons(failed_scheduling(cluster, "pinned")) == {
            "1 node(s) were unschedulable", "2 node(s) didn't match Pod's node affinity/selector"}
    finally:
        cluster.kubectl("uncordon", "h100-0")
    lands(cluster, "pinned", "h100-0")


def test_node_selector_mismatch_then_node_labelled(cluster):
    create(cluster, pod("wants-ssd", nodeSelector={"disk": "ssd"}))
    assert failed_scheduling(cluster, "wants-ssd") == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    cluster.kubectl("label", "node", "a100-0", "disk=ssd")
    try:
        lands(cluster, "wants-ssd", "a100-0")
    finally:
        cluster.kubectl("label", "node", "a100-0", "disk-")


def test_required_node_affinity_mismatch(cluster):
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-c"]}]}]}}}
    create(cluster, pod("zone-c", affinity=affinity))
    assert reasons(failed_scheduling(cluster, "zone-c")) == {"3 node(s) didn't match Pod's node affinity/selector"}


def test_untolerated_taint_then_untainted(cluster):
    cluster.kubectl("taint", "node", "h100-1", "dedicated=infer:NoSchedule")
    try:
        create(cluster, pod("on-h100-1", nodeSelector={HOST: "h100-1"}))
        assert reasons(failed_scheduling(cluster, "on-h100-1")) == {
            "1 node(s) had untolerated taint {dedicated: infer}", "2 node(s) didn't match Pod's node affinity/selector"}
    finally:
        cluster.kubectl("taint", "node", "h100-1", "dedicated=infer:NoSchedule-")
    lands(cluster, "on-h100-1", "h100-1")


def test_insufficient_cpu_and_memory_then_room_freed(cluster):
    for node in ("h100-0", "h100-1", "a100-0"):
        create(cluster, pod(f"hog-{node}", cpu="3500m", memory="15Gi", nodeName=node))
    create(cluster, pod("big", cpu="1", memory="2Gi"))
    assert failed_scheduling(cluster, "big") == (
        "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    cluster.kubectl("delete", "pod", "hog-a100-0", "--grace-period=0", "--force")
    lands(cluster, "big", "a100-0")


def test_host_port_conflict_then_freed(cluster):
    ports = {"container": {"ports": [{"containerPort": 8080, "hostPort": 8080}]}}
    create(cluster, pod("port-a", nodeSelector={HOST: "h100-0"}, **ports))
    lands(cluster, "port-a", "h100-0")
    create(cluster, pod("port-b", nodeSelector={HOST: "h100-0"}, **ports))
    assert reasons(failed_scheduling(cluster, "port-b")) == {
        "1 node(s) didn't have free ports for the requested pod ports", "2 node(s) didn't match Pod's node affinity/selector"}
    cluster.kubectl("delete", "pod", "port-a", "--grace-period=0", "--force")
    lands(cluster, "port-b", "h100-0")


def test_topology_spread_do_not_schedule_then_skew_gone(cluster):
    cluster.kubectl("taint", "node", "a100-0", "maintenance=yes:NoSchedule")
    try:
        create(cluster, pod("spread-0", labels={"app": "spread"}, nodeName="h100-0"))
        spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": "spread"}}}]
        create(cluster, pod("spread-1", labels={"app": "spread"}, topologySpreadConstraints=spread))
        assert reasons(failed_scheduling(cluster, "spread-1")) == {
            "1 node(s) had untolerated taint {maintenance: yes}", "2 node(s) didn't match pod topology spread constraints"}
        cluster.kubectl("delete", "pod", "spread-0", "--grace-period=0", "--force")
        lands(cluster, "spread-1", {"h100-0", "h100-1"})
    finally:
        cluster.kubectl("taint", "node", "a100-0", "maintenance=yes:NoSchedule-")


def test_inter_pod_anti_affinity_then_peer_gone(cluster):
    create(cluster, pod("solo", labels={"app": "solo"}, nodeName="h100-1"))
    running(cluster, "solo")
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": ZONE}]}}
    create(cluster, pod("loner", affinity=anti, nodeSelector={ZONE: "zone-a"}))
    assert reasons(failed_scheduling(cluster, "loner")) == {
        "1 node(s) didn't match Pod's node affinity/selector", "2 node(s) didn't match pod anti-affinity rules"}
    cluster.kubectl("delete", "pod", "solo", "--grace-period=0", "--force")
    lands(cluster, "loner", {"h100-0", "h100-1"})


def test_existing_pods_anti_affinity_then_it_goes(cluster):
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}]}}
    create(cluster, pod("keeper", affinity=anti, nodeName="h100-0"))
    running(cluster, "keeper")
    create(cluster, pod("web", labels={"app": "web"}, nodeSelector={ZONE: "zone-a"}))
    assert reasons(failed_scheduling(cluster, "web")) == {
        "1 node(s) didn't match Pod's node affinity/selector", "2 node(s) didn't satisfy existing pods anti-affinity rules"}
    cluster.kubectl("delete", "pod", "keeper", "--grace-period=0", "--force")
    lands(cluster, "web", {"h100-0", "h100-1"})


def test_pod_affinity_without_a_peer_then_peer_arrives(cluster):
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}]}}
    create(cluster, pod("near-db", affinity=affinity))
    assert reasons(failed_scheduling(cluster, "near-db")) == {"3 node(s) didn't match pod affinity rules"}
    create(cluster, pod("db", labels={"app": "db"}, nodeName="a100-0"))
    lands(cluster, "near-db", "a100-0")


def test_dra_cannot_allocate_then_device_published(cluster):
    create(cluster, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": "b200", "namespace": "default"},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io", "selectors": [
                         {"cel": {"expression": "device.attributes['gpu.nanokube.io'].model == 'NVIDIA-B200'"}}]}}]}}})
    create(cluster, pod("wants-b200", resourceClaims=[{"name": "gpu", "resourceClaimName": "b200"}],
                        container={"resources": {"claims": [{"name": "gpu"}]}}))
    assert reasons(failed_scheduling(cluster, "wants-b200")) == {"3 cannot allocate all claims"}
    create(cluster, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "e2e-b200"},
                     "spec": {"driver": "gpu.nanokube.io", "nodeName": "h100-1",
                              "pool": {"name": "e2e-b200", "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": "b200-0", "attributes": {"model": {"string": "NVIDIA-B200"}},
                                           "capacity": {"memory": {"value": "180Gi"}}}]}})
    try:
        lands(cluster, "wants-b200", "h100-1")
        [result] = cluster.kubectl_json("get", "resourceclaim", "b200")["status"]["allocation"]["devices"]["results"]
        assert (result["pool"], result["device"]) == ("e2e-b200", "b200-0")
    finally:
        cluster.kubectl("delete", "pod", "wants-b200", "--grace-period=0", "--force")
        cluster.kubectl("delete", "resourceclaim", "b200", "--wait=false")
        cluster.kubectl("delete", "resourceslice", "e2e-b200")


def test_preemption_evicts_the_unguarded_lowest_priority_victim(cluster):
    for name, value in (("e2e-low", 100), ("e2e-mid", 500), ("e2e-high", 1000)):
        create(cluster, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": name}, "value": value})
    create(cluster, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": "default"},
                     "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    try:
        victims = [("low-guarded", "h100-0", "e2e-low", {"app": "guarded"}), ("low-free", "h100-0", "e2e-low", {}),
                   ("mid-0", "h100-1", "e2e-mid", {}), ("mid-1", "h100-1", "e2e-mid", {})]
        for name, node, prio, labels in victims:
            p = pod(name, labels=labels, cpu="1900m", nodeName=node, priorityClassName=prio)
            p["metadata"]["finalizers"] = [HOLD]
            create(cluster, p)
        for name, *_ in victims:
            running(cluster, name)
        wait_for(lambda: (s := cluster.kubectl_json("get", "pdb", "guarded").get("status") or {}).get("currentHealthy") == 1
                 and s.get("disruptionsAllowed") == 0, what="PDB status", every=0.1)

        create(cluster, pod("urgent", cpu="1500m", nodeSelector={ZONE: "zone-a"}, priorityClassName="e2e-high"))
        # nominated to h100-0, or already bound there: the binding clears the nomination
        # (ClearingNominatedNodeNameAfterBinding), and the victim's containers stop at once
        assert wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "urgent"))["status"].get("nominatedNodeName")
                        or p["spec"].get("nodeName"), what="nominatedNodeName", every=0.1) == "h100-0"
        gone = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "low-free"))["metadata"].get("deletionTimestamp") and p,
                        what="low-free evicted", every=0.1)
        cond = next(x for x in gone["status"]["conditions"] if x["type"] == "DisruptionTarget")
        assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
        for name in ("low-guarded", "mid-0", "mid-1"):
            assert cluster.kubectl_json("get", "pod", name)["metadata"].get("deletionTimestamp") is None
        # the victim's containers stop at once (no grace to wait out), so its node's resources free up
        # and the preemptor may bind while the finalizer still holds the victim's object, as upstream's would
        lands(cluster, "urgent", "h100-0")
        cluster.kubectl("patch", "pod", "low-free", "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    finally:
        for name in ("low-guarded", "low-free", "mid-0", "mid-1"):
            cluster.kubectl("patch", "pod", name, "--type=merge", "-p", '{"metadata": {"finalizers": null}}', check=False)
        cluster.kubectl("delete", "pdb", "guarded")
        cluster.kubectl("delete", "priorityclass", "e2e-low", "e2e-mid", "e2e-high")
