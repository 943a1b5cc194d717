"""Eviction by the kubelet through `nanokube up` and kubectl: a pod writing past its emptyDir's
sizeLimit is evicted without node pressure; a ReplicaSet's pod whose memory use (the usage
annotation `kubectl top` reads) fills its node is evicted by the node's kubelet, and the
ReplicaSet's replacement runs on the other node. On a cluster of its own (conftest's module
`cluster`), not the session's: the node stays under MemoryPressure, tainted for it, for the 5-minute
transition period after."""

from __future__ import annotations

import json

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for


REPLICASET = {
    "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "trainer"},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer"}}, "template": {
        "metadata": {"labels": {"app": "trainer"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                 "resources": {"requests": {"memory": "64Mi"}}}]}}}}


CACHE_HOG = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cache-hog"},
    "spec": {"restartPolicy": "Never", "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}],
             "containers": [{"name": "main", "image": "busybox:1.36",
                             "command": ["sh", "-c", "dd if=/dev/zero of=/cache/blob bs=1M count=2; sleep 3600"],
                             "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}]}}


def test_a_pod_writing_past_its_empty_dirs_size_limit_is_evicted(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(CACHE_HOG))
    status = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "cache-hog"))["status"].get("phase") == "Failed"
                      and p["status"], what="the pod evicted")
    why = 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". '
    assert (status["reason"], status["message"]) == ("Evicted", why), status
    assert "DisruptionTarget" not in [c["type"] for c in status.get("conditions") or ()]
    events = cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=cache-hog")["items"]
    assert ("Warning", "Evicted", why) in [(e["type"], e["reason"], e["message"]) for e in events]
    node = cluster.kubectl_json("get", "pod", "cache-hog")["spec"]["nodeName"]
    metrics = cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics").stdout
    assert 'kubelet_evictions{eviction_signal="emptydirfs.limit"} 1' in metrics.splitlines()
    conditions = cluster.kubectl_json("get", "node", node)["status"]["conditions"]
    assert ("DiskPressure", "False") in [(c["type"], c["status"]) for c in conditions]
    cluster.kubectl("delete", "pod", "cache-hog")


@PROCESS_RUNTIME
def test_a_real_process_writing_past_its_empty_dirs_size_limit_is_evicted(store_url):
    """On `nanokube up --runtime process` the emptyDir is a directory on the node that the process
    fills for real (busybox's head, no simulated dd): the kubelet measures it and evicts the pod."""
    hog = json.loads(json.dumps(CACHE_HOG))
    hog["spec"]["containers"][0]["command"] = ["sh", "-c", "head -c 2097152 /dev/zero > /cache/blob && sleep 3600"]
    with process_cluster(store_url, "evict") as c:
        c.kubectl("apply", "-f", "-", input=json.dumps(hog))
        status = wait_for(lambda: (p := c.kubectl_json("get", "pod", "cache-hog"))["status"].get("phase") == "Failed"
                          and p["status"], 90, "the pod evicted")
        assert (status["reason"], status["message"]) == (
            "Evicted", 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". '), status


def test_a_pod_filling_its_node_is_evicted_and_its_replicaset_replaces_it_elsewhere(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(REPLICASET))

    def pods() -> list[dict]:
        return cluster.kubectl_json("get", "pods", "-l", "app=trainer")["items"]
    [first] = wait_for(lambda: [p for p in pods() if p["status"].get("phase") == "Running"], what="the pod Running")
    name, node = first["metadata"]["name"], first["spec"]["nodeName"]
    capacity = cluster.kubectl_json("get", "node", node)["status"]["capacity"]["memory"]
    cluster.kubectl("annotate", "pod", name, f"sim.nanokube.io/memory-usage={capacity}")

    evicted = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", name))["status"].get("phase") == "Failed"
                       and p["status"], what="the pod evicted")
    why = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 0. "
           f"Container main was using {capacity}, request is 64Mi, has larger consumption of memory. ")
    assert (evicted["reason"], evicted["message"]) == ("Evicted", why), evicted
    assert ("DisruptionTarget", "True", "TerminationByKubelet") in [
        (c["type"], c["status"], c.get("reason")) for c in evicted["conditions"]]
    events = cluster.kubectl_json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    assert ("Warning", "Evicted", why) in [(e["type"], e["reason"], e["message"]) for e in events]
    [evicted_event] = [e for e in events if e["reason"] == "Evicted"]
    assert evicted_event["metadata"]["annotations"] == {
        "offending_containers": "main", "offending_containers_usage": capacity, "starved_resource": "memory"}
    conditions = cluster.kubectl_json("get", "node", node)["status"]["conditions"]
    assert ("MemoryPressure", "True") in [(c["type"], c["status"]) for c in conditions]

    replacement = wait_for(lambda: [p for p in pods() if p["metadata"]["name"] != name
                                    and p["status"].get("phase") == "Running"], what="a replacement Running")
    assert replacement[0]["spec"]["nodeName"] != node, replacement
    metrics = cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics").stdout
    assert 'kubelet_evictions{eviction_signal="memory.available"} 1' in metrics.splitlines()
    cluster.kubectl("delete", "replicaset", "trainer")
