"""A node pool that advertises an extended resource in its capacity, as NVIDIA's device plugin
does (`nvidia.com/gpu: 2`): the Node reports it, NodeResourcesFit counts it (no DRA claim), and
a pod asking for more than is left is 'Insufficient nvidia.com/gpu'."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import running_cluster, wait_for

CLUSTER = """\
pools:
  - name: plugin
    count: 1
    capacity: {cpu: "8", memory: 32Gi, nvidia.com/gpu: 2}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "cluster.yaml"
    path.write_text(CLUSTER)
    with running_cluster("device-plugin", ("--cluster", str(path))) as c:
        yield c


def gpu_pod(name: str, count: int) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources:
      limits: {{nvidia.com/gpu: {count}}}
"""


def test_an_advertised_extended_resource_is_counted_by_the_scheduler(cluster):
    node = cluster.kubectl_json("get", "node", "plugin-0")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "2"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    cluster.kubectl("apply", "-f", "-", input=gpu_pod("two", 2))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "two")["status"].get("phase") == "Running", what="two running")
    pod = cluster.kubectl_json("get", "pod", "two")
    assert pod["spec"]["nodeName"] == "plugin-0" and "extendedResourceClaimStatus" not in pod["status"]
    assert cluster.kubectl_json("get", "resourceclaims", "-A")["items"] == []

    cluster.kubectl("apply", "-f", "-", input=gpu_pod("three", 1))
    [event] = wait_for(lambda: cluster.kubectl_json("get", "events", "--field-selector",
                                                    "involvedObject.name=three,reason=FailedScheduling")["items"],
                       what="FailedScheduling")
    assert "Insufficient nvidia.com/gpu" in event["message"]
