"""PodDisruptionBudgets against `nanokube up`: the disruption controller's
status as kubectl shows it, and the eviction subresource (through the
official Python client) allowing one eviction and then refusing with 429."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException


def wait_for(check, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("condition never held")


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
    for i in range(3):
        cluster.kubectl("run", f"guarded-{i}", "--image=busybox:1.36", "--labels=app=guarded")
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
    assert body["details"]["causes"][0]["message"] == "The disruption budget guarded needs 2 healthy pods and has 2 currently"

    st = wait_for(lambda: (s := _status(cluster, "guarded")).get("expectedPods") == 2 and s)
    assert (st["currentHealthy"], st["disruptionsAllowed"], st["conditions"][0]["reason"]) == (2, 0, "InsufficientPods")
    assert "disruptedPods" not in st


def test_max_unavailable_counts_the_deployment_scale(cluster):
    cluster.kubectl("create", "deployment", "scaled", "--image=busybox:1.36", "--replicas=4")
    cluster.kubectl("create", "-f", "-", input=_pdb("scaled", "scaled", maxUnavailable="25%"))
    st = wait_for(lambda: (s := _status(cluster, "scaled")).get("currentHealthy") == 4 and s)
    assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"]) == (4, 3, 1)
    cluster.kubectl("scale", "deployment/scaled", "--replicas=8")
    st = wait_for(lambda: (s := _status(cluster, "scaled")).get("currentHealthy") == 8 and s)
    assert (st["expectedPods"], st["desiredHealthy"], st["disruptionsAllowed"]) == (8, 6, 2)
