"""DRA through kubectl against `nanokube up`: a DeviceClass and a
ResourceSlice for driver test.nanokube.io on one node, then a pod with a
claim is scheduled onto that node and the claim shows allocated,reserved."""

from __future__ import annotations

import json

import pytest

from .conftest import wait_for

DRIVER = "test.nanokube.io"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module's DeviceClass, slice, claim
    and pod are of a driver and names of its own, and hold no node's GPUs."""
    return session_cluster


def test_pod_with_claim_lands_on_the_node_with_the_device(cluster):
    node = cluster.kubectl_json("get", "nodes")["items"][0]["metadata"]["name"]
    objects = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "e2e-accel"},
         "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-e2e-accel"},
         "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "accel-0", "attributes": {"model": {"string": "a1"}}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "e2e-accel", "namespace": "default"},
         "spec": {"devices": {"requests": [{"name": "accel", "exactly": {
             "deviceClassName": "e2e-accel", "selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'a1'"}}]}}]}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-accel", "namespace": "default"},
         "spec": {"resourceClaims": [{"name": "accel", "resourceClaimName": "e2e-accel"}],
                  "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                                  "resources": {"claims": [{"name": "accel"}]}}]}},
    ]
    for obj in objects:
        cluster.kubectl("create", "-f", "-", input=json.dumps(obj))

    def scheduled():
        return cluster.kubectl_json("get", "pod", "e2e-accel")["spec"].get("nodeName")
    assert wait_for(scheduled) == node

    def state():
        out = cluster.kubectl("get", "resourceclaim", "e2e-accel").stdout
        return "allocated,reserved" in out and out
    assert wait_for(state)
    claim = cluster.kubectl_json("get", "resourceclaim", "e2e-accel")
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (DRIVER, node, "accel-0")
