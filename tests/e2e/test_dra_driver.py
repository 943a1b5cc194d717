"""The simulated DRA drivers seen through kubectl: every node of the default
cluster publishes a GPU and a NIC pool, both DeviceClasses exist, and a pod
whose claim is allocated by hand runs with NIC network data in the claim."""

from __future__ import annotations

import json

from tests.e2e.test_nodes import phase, wait_for


def test_resourceslices_list_gpu_and_nic_pools_per_node(cluster):
    nodes = [n["metadata"]["name"] for n in wait_for(lambda: cluster.kubectl_json("get", "nodes")["items"])]

    def all_published():
        items = cluster.kubectl_json("get", "resourceslices")["items"]
        pools = {(s["spec"]["nodeName"], s["spec"]["driver"]): s for s in items}
        return pools if len(pools) == 2 * len(nodes) else None
    pools = wait_for(all_published)
    for node in nodes:
        gpu, nic = pools[(node, "gpu.nanokube.io")]["spec"], pools[(node, "nic.nanokube.io")]["spec"]
        assert gpu["pool"]["name"] == nic["pool"]["name"] == node
        assert len(gpu["devices"]) == 8 and len(nic["devices"]) == 8
        assert gpu["devices"][0]["capacity"]["memory"]["value"] == "80Gi"
        assert nic["devices"][0]["attributes"]["rdma"] == {"bool": True}
    table = cluster.kubectl("get", "resourceslices").stdout
    assert table.split()[:4] == ["NAME", "NODE", "DRIVER", "POOL"]
    assert f"{nodes[0]}-gpu.nanokube.io-0" in table and f"{nodes[0]}-nic.nanokube.io-0" in table


def test_deviceclasses_for_gpus_and_rdma_nics(cluster):
    names = cluster.kubectl("get", "deviceclasses", "-o", "name").stdout.split()
    assert {"deviceclass.resource.k8s.io/gpu.nanokube.io", "deviceclass.resource.k8s.io/rdma.nanokube.io"} <= set(names)
    rdma = cluster.kubectl_json("get", "deviceclass", "rdma.nanokube.io")
    assert "nic.nanokube.io" in rdma["spec"]["selectors"][0]["cel"]["expression"]


def test_hand_allocated_claim_runs_the_pod_and_carries_network_data(cluster):
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "e2e-train", "namespace": "default"},
             "spec": {"devices": {"requests": [
                 {"name": "gpus", "exactly": {"deviceClassName": "gpu.nanokube.io", "count": 2, "selectors": [
                     {"cel": {"expression": "device.capacity['gpu.nanokube.io'].memory.compareTo(quantity('40Gi')) >= 0"}}]}},
                 {"name": "nic", "exactly": {"deviceClassName": "rdma.nanokube.io"}}]}}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(claim))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-trainer", "namespace": "default"},
           "spec": {"nodeName": "gpu-1", "schedulerName": "manual-binding", "terminationGracePeriodSeconds": 1,
                    "resourceClaims": [{"name": "acc", "resourceClaimName": "e2e-train"}],
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                                    "resources": {"claims": [{"name": "acc"}]}}]}}
    created = json.loads(cluster.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(pod)).stdout)
    wait_for(lambda: any(e["reason"] == "FailedPrepareDynamicResources"
                         for e in cluster.kubectl_json("get", "events", "--field-selector",
                                                       "involvedObject.name=e2e-trainer")["items"]))
    assert cluster.kubectl_json("get", "pod", "e2e-trainer")["status"]["phase"] == "Pending"

    c = cluster.kubectl_json("get", "resourceclaim", "e2e-train")
    c["status"] = {"allocation": {
        "devices": {"results": [
            {"request": "gpus", "driver": "gpu.nanokube.io", "pool": "gpu-1", "device": "gpu-2"},
            {"request": "gpus", "driver": "gpu.nanokube.io", "pool": "gpu-1", "device": "gpu-3"},
            {"request": "nic", "driver": "nic.nanokube.io", "pool": "gpu-1", "device": "nic-2"}]},
        "nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "e2e-trainer", "uid": created["metadata"]["uid"]}]}
    cluster.kubectl("replace", "--subresource", "status", "-f", "-", input=json.dumps(c))
    wait_for(phase(cluster, "e2e-trainer", "Running"), timeout=60)
    [dev] = cluster.kubectl_json("get", "resourceclaim", "e2e-train")["status"]["devices"]
    assert dev["device"] == "nic-2" and dev["conditions"][0]["type"] == "Ready"
    assert dev["networkData"]["interfaceName"] == "ib2" and dev["networkData"]["ips"] == ["100.66.0.2/16"]

    cluster.kubectl("delete", "pod", "e2e-trainer", "--wait=false")
    wait_for(lambda: not cluster.kubectl_json("get", "resourceclaim", "e2e-train")["status"].get("devices"))
