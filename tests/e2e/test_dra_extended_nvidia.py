"""NVIDIA's extended resource example (demo/specs/extended-resources/gpu-full.yaml, in its
published form) against the quickstart cluster: `nvidia.com/gpu` in a container's limits
is served through the gpu.nvidia.com DeviceClass's extendedResourceName, and the container's
`nvidia-smi -L` lists the GPUs its claim's requests gave it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.conftest import running_cluster, wait_for

CLUSTER = str(Path(__file__).resolve().parents[2] / "examples" / "nvidia-quickstart" / "cluster.yaml")
GPU_FULL = """
apiVersion: v1
kind: Namespace
metadata:
  name: extended-resource-gpu-full
---
apiVersion: v1
kind: Pod
metadata:
  namespace: extended-resource-gpu-full
  name: gpu-full-pod
spec:
  restartPolicy: Never
  containers:
  - name: cuda-container
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    command: ["bash", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
    resources:
      limits:
        nvidia.com/gpu: "2"
  - name: sidecar
    image: ubuntu:22.04
    command: ["bash", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
"""


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("nvidia-extended", extra=("--cluster", CLUSTER)) as c:
        yield c


def test_nvidia_gpu_limit_is_served_through_the_device_class(cluster):
    cluster.kubectl("apply", "-f", "-", input=GPU_FULL)
    ns = ("-n", "extended-resource-gpu-full")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "gpu-full-pod", *ns)["status"].get("phase") == "Running",
             what="gpu-full-pod running", timeout=90)
    status = cluster.kubectl_json("get", "pod", "gpu-full-pod", *ns)["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [{"containerName": "cuda-container", "resourceName": "nvidia.com/gpu",
                                          "requestName": "container-0-request-0"}]
    claim = cluster.kubectl_json("get", "resourceclaim", status["resourceClaimName"], *ns)
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    uuids = {r["device"] for r in claim["status"]["allocation"]["devices"]["results"]}
    assert len(uuids) == 2

    def listed(container: str) -> list[str] | None:
        logs = cluster.kubectl("logs", "gpu-full-pod", "-c", container, *ns).stdout
        return re.findall(r"^GPU \d+: .*$", logs, re.M)
    gpus = wait_for(lambda: listed("cuda-container"), what="nvidia-smi -L of cuda-container")
    assert [g.split(":")[0] for g in gpus] == ["GPU 0", "GPU 1"]
    assert cluster.kubectl("logs", "gpu-full-pod", "-c", "sidecar", *ns).stdout.count("GPU ") == 0
