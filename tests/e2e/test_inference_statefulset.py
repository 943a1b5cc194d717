"""An LLM inference StatefulSet against `nanokube up`, driven with kubectl as a platform engineer
would: model-cache claims from volumeClaimTemplates owned as the retention policy says, the
change-cause of each revision in `rollout history`, a claim grown in place, and an autoscaler
whose container metric cannot be read saying why in `describe hpa`."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module deletes its StatefulSets and
    autoscaler and puts the `standard` StorageClass back as it found it."""
    return session_cluster


def _server(name: str, replicas: int, **spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"kubernetes.io/change-cause": "serve v0.6.0"}},
            "spec": {"serviceName": name, "replicas": replicas, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                                      "name": "server", "image": "vllm/vllm-openai:v0.6.0",
                                      "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
                                      "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache"}]}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "cache"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}],
                     **spec}}


def test_cache_claims_history_and_resize(cluster):
    try:  # (the `standard` StorageClass and the set are put back even if it fails: the cluster is shared)
        cluster.kubectl("apply", "-f", "-", input=json.dumps(_server(
            "llm", 2, persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete", "whenScaled": "Retain"})))
        cluster.kubectl("rollout", "status", "statefulset/llm", "--timeout=90s", timeout=100)
        sts_uid = cluster.kubectl_json("get", "sts", "llm")["metadata"]["uid"]
        for claim in cluster.kubectl_json("get", "pvc", "-l", "app=llm")["items"]:
            assert claim["metadata"]["ownerReferences"] == [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llm", "uid": sts_uid,
                "controller": True, "blockOwnerDeletion": True}]

        cluster.kubectl("annotate", "sts", "llm", "--overwrite", "kubernetes.io/change-cause=serve v0.6.1")
        cluster.kubectl("set", "image", "sts/llm", "server=vllm/vllm-openai:v0.6.1")
        cluster.kubectl("rollout", "status", "statefulset/llm", "--timeout=90s", timeout=100)
        history = cluster.kubectl("rollout", "history", "sts/llm").stdout.strip().splitlines()
        assert [line.split(None, 1) for line in history[2:]] == [["1", "serve v0.6.0"], ["2", "serve v0.6.1"]]

        cluster.kubectl("patch", "storageclass", "standard", "-p", '{"allowVolumeExpansion": true}')
        cluster.kubectl("patch", "pvc", "cache-llm-0", "-p", '{"spec": {"resources": {"requests": {"storage": "40Gi"}}}}')

        def grown():
            status = cluster.kubectl_json("get", "pvc", "cache-llm-0").get("status") or {}
            return (status.get("allocatedResourceStatuses") or {}).get("storage") == "NodeResizePending" and status
        # the volume grew; its filesystem waits for the pod's kubelet (RecoverVolumeExpansionFailure's states)
        status = wait_for(grown, what="the claim's volume grown, NodeResizePending")
        assert status["allocatedResources"] == {"storage": "40Gi"} and status["capacity"] == {"storage": "20Gi"}
        cluster.kubectl("delete", "pod", "llm-0")  # "(re-)start a pod": its new kubelet mount finishes the resize
        wait_for(lambda: (cluster.kubectl_json("get", "pvc", "cache-llm-0").get("status") or {}).get("capacity")
                 == {"storage": "40Gi"}, what="the claim's capacity at 40Gi")
        # the kubelet's recorder writes its Events from a queue, maybe after the capacity it reports
        wait_for(lambda: {"Resizing", "FileSystemResizeRequired", "FileSystemResizeSuccessful"} <= {e["reason"] for e in
                          cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=cache-llm-0")["items"]},
                 30, "the claim's resize Events")
        cluster.kubectl("delete", "sts", "llm")
        wait_for(lambda: not cluster.kubectl_json("get", "pvc", "-l", "app=llm")["items"],
                 what="the set's claims deleted with it")
    finally:
        cluster.kubectl("patch", "storageclass", "standard", "-p", '{"allowVolumeExpansion": null}')
        cluster.kubectl("delete", "sts", "llm", "--ignore-not-found", "--wait=false")


def test_autoscaler_on_a_container_the_pods_lack_says_which(cluster):
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(_server("chat", 1)))
        cluster.kubectl("rollout", "status", "statefulset/chat", "--timeout=90s", timeout=100)
        cluster.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "chat"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "chat"},
                     "minReplicas": 1, "maxReplicas": 3, "metrics": [{"type": "ContainerResource", "containerResource": {
                         "name": "cpu", "container": "sidecar",
                         "target": {"type": "Utilization", "averageUtilization": 60}}}]}}))
        cause = ("failed to get cpu utilization: unable to get metrics for resource cpu: failed to get container metrics: "
                 "container sidecar not present in metrics for pod default/chat-0")

        def active():
            conds = (cluster.kubectl_json("get", "hpa", "chat").get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "ScalingActive"), None)
        cond = wait_for(active, timeout=60, what="the autoscaler's ScalingActive condition")
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False", "FailedGetContainerResourceMetric", f"the HPA was unable to compute the replica count: {cause}")
        described = cluster.kubectl("describe", "hpa", "chat").stdout
        assert f"first error is: failed to get sidecar container metric value: {cause}" in described
    finally:
        cluster.kubectl("delete", "hpa/chat", "statefulset/chat", "--ignore-not-found", "--wait=false")
