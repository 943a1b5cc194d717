"""Disruptions against `nanokube up`: the disruption controller's
PodDisruptionBudget status as kubectl shows it, the eviction subresource
(through the official Python client) allowing one eviction and then refusing
with 429, and a node that stops heartbeating having its pods evicted after
their toleration."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from nanokube.clock import parse_time
from tests.e2e.conftest import FAST_HEARTBEATS, running_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    """Nodes renew their leases every 0.5s; the lifecycle controller waits 3s for one."""
    with running_cluster("disruption", env=FAST_HEARTBEATS) as c:
        yield c


def _pdb(name: str, app: str, **spec) -> str:
    return json.dumps({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"selector": {"matchLabels": {"app": app}}, **spec}})


def _status(cluster, name: str) -> dict:
    return cluster.kubectl_json("get", "pdb", name).get("status") or {}


def _evict(api: k8s.CoreV1Api, name: str) -> None:
    api.create_namespaced_pod_eviction(name, "default", k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=name, namespace="default")))


def test_a_budget_allows_one_eviction_then_refuses(cluster):
    for i in range(3):  # `sleep` as PID 1 ignores SIGTERM: the evicted pod went after the default 30 s grace
        cluster.kubectl("run", f"guarded-{i}", "--image=busybox:1.36", "--labels=app=guarded",
                        "--overrides", '{"spec": {"terminationGracePeriodSeconds": 1}}', "--", "sleep", "infinity")
    cluster.kubectl("create", "-f", "-", input=_pdb("guarded", "guarded", minAvailable=2))
    st = wait_for(lambda: (s := _status(cluster, "guarded")).get("currentHealthy") == 3 and s)
    assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"], st["observedGeneration"]) == (3, 2, 1, 1)
    [cond] = st["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionAllowed", "True", "SufficientPods")
    assert cluster.kubectl("get", "pdb", "guarded").stdout.splitlines()[1].split()[:4] == ["guarded", "2", "N/A", "1"]

    api = k8s.CoreV1Api(cluster.client())
    _evict(api, "guarded-0")
    with pytest.raises(ApiException) as refused:
        _evict(api, "guarded-1")
    assert refused.value.status == 429
    body = json.loads(refused.value.body)
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    # the eviction spent the budget in the PDB's status; the count is the controller's last one (3, or 2 once it caught up)
    assert body["details"]["causes"][0]["message"] in (
        f"The disruption budget guarded needs 2 healthy pods and has {n} currently" for n in (2, 3))

    st = wait_for(lambda: (s := _status(cluster, "guarded")).get("expectedPods") == 2 and s)
    assert (st["currentHealthy"], st["disruptionsAllowed"], st["conditions"][0]["reason"]) == (2, 0, "InsufficientPods")
    assert "disruptedPods" not in st
    with pytest.raises(ApiException) as refused:
        _evict(api, "guarded-1")
    assert json.loads(refused.value.body)["details"]["causes"][0]["message"] == \
        "The disruption budget guarded needs 2 healthy pods and has 2 currently"


def test_max_unavailable_counts_the_deployment_scale(cluster):
    cluster.kubectl("create", "deployment", "scaled", "--image=busybox:1.36", "--replicas=4",
                    "--", "sleep", "infinity")
    cluster.kubectl("create", "-f", "-", input=_pdb("scaled", "scaled", maxUnavailable="25%"))
    st = wait_for(lambda: (s := _status(cluster, "scaled")).get("currentHealthy") == 4 and s)
    assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"]) == (4, 3, 1)
    cluster.kubectl("scale", "deployment/scaled", "--replicas=8")
    st = wait_for(lambda: (s := _status(cluster, "scaled")).get("currentHealthy") == 8 and s)
    assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"]) == (8, 6, 2)


def test_a_node_that_stops_heartbeating_has_its_pods_evicted_after_their_toleration(cluster):
    hold = "e2e.nanokube.io/hold"
    tolerations = [{"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 4} for k in ("unreachable", "not-ready")]
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stranded", "namespace": "default", "finalizers": [hold]},
        "spec": {"nodeName": "gpu-0", "tolerations": tolerations, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "stranded")["status"].get("phase") == "Running")
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", "node", "gpu-0", "--lease-stop",
                        "--kubeconfig", cluster.kubeconfig], check=False, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr

    def unreachable():
        taints = cluster.kubectl_json("get", "node", "gpu-0")["spec"].get("taints") or []
        return next((t for t in taints if t["key"] == "node.kubernetes.io/unreachable"), None)
    taint = wait_for(unreachable)
    # the taint the controller added is counted under the node's zone key (GetZoneKey: region, NUL, zone)
    wait_for(lambda: 'node_collector_evictions_total{zone=":\x00:zone-a"} 1\n' in cluster.kubectl("get", "--raw", "/metrics").stdout)
    pod = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "stranded"))["metadata"].get("deletionTimestamp") and p)
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (cond["reason"], cond["message"]) == ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
    # not before the toleration ends; seconds-truncated times and a loaded machine may add one or two
    assert 4 <= parse_time(cond["lastTransitionTime"]) - parse_time(taint["timeAdded"]) <= 6
    cluster.kubectl("patch", "pod", "stranded", "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", "node", "gpu-0", "--clear",
                    "--kubeconfig", cluster.kubeconfig], capture_output=True, text=True, timeout=30, check=True)
