"""Scale to zero end to end with GPU inference pods: an HPA on an external
queue-length metric scales a Deployment whose pods each claim a GPU from 0 to
N (claims allocated, pods Running) and back to 0 (claims gone, GPUs free);
it stays at 0 while the metric source is broken, and never wakes a
Deployment a user scaled to zero by hand."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import running_cluster, wait_for

TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io"}}]}}}}


def deployment(name: str, replicas: int) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                         "containers": [{"name": "server", "image": "vllm/vllm-openai:latest",
                                         "resources": {"claims": [{"name": "gpu"}]}}]}}}}


def hpa(name: str, metric: str) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 0, "maxReplicas": 3,
                     "metrics": [{"type": "External", "external": {
                         "metric": {"name": metric}, "target": {"type": "AverageValue", "averageValue": "5"}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 2}}}}


@pytest.fixture(scope="module")
def gpu_hpa_cluster(store_url):
    with running_cluster("hpa-gpu", env={"NANOKUBE_HPA_SYNC_PERIOD": "1"}, store=store_url) as c:
        c.kubectl("apply", "-f", "-", input=json.dumps(TEMPLATE))
        yield c


def set_metric(c, name: str, value: str) -> None:
    c.kubectl("patch", "configmap", "nanokube-external-metrics", "--type=merge", "-p",
              json.dumps({"data": {name: value}}))


def replicas(c, name: str) -> int:
    return c.kubectl_json("get", "deployment", name)["spec"]["replicas"]


def allocated_gpus(c, app: str) -> list[tuple[str, str]]:
    claims = c.kubectl_json("get", "resourceclaims")["items"]
    pods = {p["metadata"]["name"] for p in c.kubectl_json("get", "pods", "-l", f"app={app}")["items"]}
    return [(r["pool"], r["device"]) for cl in claims if cl["metadata"]["ownerReferences"][0]["name"] in pods
            for r in ((cl.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])]


def scaling_active(c, name: str) -> str | None:
    """The HPA's ScalingActive status, once it has one."""
    conds = (c.kubectl_json("get", "hpa", name).get("status") or {}).get("conditions") or []
    return next((x["status"] for x in conds if x["type"] == "ScalingActive"), None)


def running(c, app: str) -> list[dict]:
    return [p for p in c.kubectl_json("get", "pods", "-l", f"app={app}")["items"]
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def test_gpu_inference_scales_from_zero_and_back_freeing_its_gpus(gpu_hpa_cluster):
    c = gpu_hpa_cluster
    c.kubectl("create", "configmap", "nanokube-external-metrics", "--from-literal=requests_queued=0")
    c.kubectl("apply", "-f", "-", input=json.dumps(deployment("infer", 1)))
    c.kubectl("apply", "-f", "-", input=json.dumps(hpa("infer", "requests_queued")))
    wait_for(lambda: replicas(c, "infer") == 0)
    wait_for(lambda: not c.kubectl_json("get", "pods", "-l", "app=infer")["items"])

    set_metric(c, "requests_queued", "12")
    wait_for(lambda: replicas(c, "infer") == 3)
    wait_for(lambda: len(running(c, "infer")) == 3, timeout=90)
    gpus = allocated_gpus(c, "infer")
    assert len(gpus) == 3 and len(set(gpus)) == 3, "each inference pod holds its own allocated GPU"

    set_metric(c, "requests_queued", "0")
    wait_for(lambda: replicas(c, "infer") == 0)
    wait_for(lambda: not c.kubectl_json("get", "pods", "-l", "app=infer")["items"], timeout=90)
    wait_for(lambda: not allocated_gpus(c, "infer"))
    assert not [cl for cl in c.kubectl_json("get", "resourceclaims")["items"]
                if cl["metadata"]["name"].startswith("infer-")], "the pods' claims are gone with them"

    set_metric(c, "requests_queued", "lots")
    wait_for(lambda: scaling_active(c, "infer") == "False", what="the broken metric seen")
    assert replicas(c, "infer") == 0, "a broken metric never scales"


def test_a_deployment_scaled_to_zero_by_hand_stays_asleep(gpu_hpa_cluster):
    c = gpu_hpa_cluster
    c.kubectl("apply", "-f", "-", input=json.dumps(deployment("batch", 1)))
    wait_for(lambda: len(running(c, "batch")) == 1, timeout=90)
    c.kubectl("scale", "deployment", "batch", "--replicas=0")
    c.kubectl("patch", "configmap", "nanokube-external-metrics", "--type=merge", "-p",
              json.dumps({"data": {"batch_queue": "50"}}))
    c.kubectl("apply", "-f", "-", input=json.dumps(hpa("batch", "batch_queue")))
    wait_for(lambda: scaling_active(c, "batch") == "False", what="the HPA's first look (ScalingDisabled)")
    assert replicas(c, "batch") == 0, "the HPA wakes only what it put to sleep"
