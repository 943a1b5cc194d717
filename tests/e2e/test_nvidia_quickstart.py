"""NVIDIA's DRA driver quickstart against `nanokube up --cluster
examples/nvidia-quickstart/cluster.yaml`: each example (written here in the
published examples' form) applies with kubectl, its pods run, and the
allocations match the example's intent; a bad GpuConfig leaves its pod
ContainerCreating with the driver's error; a DeviceTaintRule and an XID
fault on a gpu.nvidia.com device evict as with the nanokube driver."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import running_cluster, wait_for

CLUSTER = str(Path(__file__).resolve().parents[2] / "examples" / "nvidia-quickstart" / "cluster.yaml")
#: the example's nodes: a half-balanced (static MIG) DGX A100, a DynamicMIG A100 node, an H100 node
DRIVER = "gpu.nvidia.com"
TOLERATE = """
      tolerations:
      - key: "nvidia.com/gpu"
        operator: "Exists"
        effect: "NoSchedule"
"""
SMI = 'command: ["bash", "-c"]\n        args: ["nvidia-smi -L; trap \'exit 0\' TERM; sleep 9999 & wait"]'


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("nvidia-quickstart", extra=("--cluster", CLUSTER),
                         env={"NANOKUBE_DEVICE_TAINT_RULE_STATUS_PERIOD": "1"}) as c:
        yield c


def apply(c, manifest: str) -> None:
    c.kubectl("apply", "-f", "-", input=manifest)


def running(c, ns: str, count: int, timeout: float = 90) -> list[dict]:
    def check():
        pods = c.kubectl_json("get", "pods", "-n", ns)["items"]
        ok = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
        return ok if len(ok) == count else None
    return wait_for(check, timeout=timeout, what=f"{count} running pods in {ns}")


def results(c, ns: str) -> dict[str, list[dict]]:
    """Allocation results of every claim in the namespace, by claim name."""
    return {cl["metadata"]["name"]: cl["status"]["allocation"]["devices"]["results"]
            for cl in c.kubectl_json("get", "resourceclaims", "-n", ns)["items"]}


def slice_devices(c) -> dict[tuple[str, str], dict]:
    return {(s["spec"]["pool"]["name"], d["name"]): d for s in c.kubectl_json("get", "resourceslices")["items"]
            if s["spec"]["driver"] == DRIVER for d in s["spec"].get("devices") or []}


def attr(dev: dict, name: str):
    return next(iter(dev["attributes"][name].values()))


def smi_uuids(text: str) -> list[str]:
    return re.findall(r"\(UUID: ([^)]+)\)", text)


def test_slices_and_device_classes_are_the_drivers(cluster):
    devs = wait_for(lambda: (d := slice_devices(cluster)) and len({p for p, _ in d}) == 3 and d)
    whole = devs[("h100-0", "gpu-3")]
    assert attr(whole, "productName") == "NVIDIA H100 80GB HBM3" and attr(whole, "index") == 3
    assert whole["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert whole["capacity"]["memory"] == {"value": "80Gi"}
    assert attr(devs[("a100-0", "gpu-0-mig-3g20gb-9-4")], "profile") == "3g.20gb"
    assert "uuid" not in devs[("a100-0", "gpu-0-mig-3g20gb-9-4")]["attributes"]  # created at prepare
    # the half-balanced DGX: GPUs 0-3 exist only as their MIG devices, each with its UUID
    static = devs[("dgxa100-0", "gpu-2-mig-3g20gb-9-4")]
    assert attr(static, "uuid").startswith("MIG-") and attr(static, "parentUUID").startswith("GPU-")
    assert static["capacity"]["memorySlice7"] == {"value": "1"} and "consumesCounters" not in static
    assert ("dgxa100-0", "gpu-2") not in devs and ("dgxa100-0", "gpu-4") in devs
    assert sorted(n for p, n in devs if p == "dgxa100-0" and n.startswith("gpu-0-")) == [
        "gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-2g10gb-14-2", "gpu-0-mig-3g20gb-9-4"]
    classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
               for c in cluster.kubectl_json("get", "deviceclasses")["items"]}
    assert "device.attributes['gpu.nvidia.com'].type == 'mig'" in classes["mig.nvidia.com"]
    assert "device.attributes['gpu.nvidia.com'].type == 'gpu'" in classes["gpu.nvidia.com"]


def test_cel_selector_on_product_name_and_index_with_time_slicing(cluster):
    apply(cluster, f"""
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test6
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test6
  name: a100
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: |
                device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$') &&
                device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('39Gi')) >= 0 &&
                (device.attributes['gpu.nvidia.com'].index == 0 || device.attributes['gpu.nvidia.com'].index == 2 ||
                 device.attributes['gpu.nvidia.com'].index == 4 || device.attributes['gpu.nvidia.com'].index == 6)
      config:
      - requests: ["gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing:
              strategy: TimeSlicing
              timeSlicingConfig:
                interval: Long
---
apiVersion: apps/v1
kind: Deployment
metadata:
  namespace: gpu-test6
  name: pod
spec:
  replicas: 4
  selector:
    matchLabels:
      app: pod
  template:
    metadata:
      labels:
        app: pod
    spec:
      containers:
      - name: ctr
        image: ubuntu:22.04
        {SMI}
        resources:
          claims:
          - name: a100
      resourceClaims:
      - name: a100
        resourceClaimTemplateName: a100{TOLERATE}""")
    running(cluster, "gpu-test6", 4)
    devs = slice_devices(cluster)
    picked = [(r["pool"], r["device"]) for rs in results(cluster, "gpu-test6").values() for r in rs]
    assert len(set(picked)) == 4
    for pool, name in picked:
        dev = devs[(pool, name)]
        assert "A100" in attr(dev, "productName") and attr(dev, "index") in (0, 2, 4, 6)
    claim = cluster.kubectl_json("get", "resourceclaims", "-n", "gpu-test6")["items"][0]
    [config] = claim["status"]["allocation"]["devices"]["config"]
    assert config["opaque"]["parameters"]["sharing"]["timeSlicingConfig"] == {"interval": "Long"}


def test_two_pods_get_distinct_gpus(cluster):
    pod = """
apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-test1
  name: {name}
  labels:
    app: pod
spec:
  containers:
  - name: ctr
    image: ubuntu:22.04
    command: ["bash", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
    resources:
      claims:
      - name: gpu
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: single-gpu"""
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test1
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test1
  name: single-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
---""" + pod.format(name="pod1") + "\n---" + pod.format(name="pod2"))
    running(cluster, "gpu-test1", 2)
    picked = [(r["pool"], r["device"]) for rs in results(cluster, "gpu-test1").values() for r in rs]
    assert len(picked) == 2 and len(set(picked)) == 2
    devs = slice_devices(cluster)
    logs = cluster.kubectl("logs", "-n", "gpu-test1", "-l", "app=pod").stdout
    assert sorted(smi_uuids(logs)) == sorted(attr(devs[p], "uuid") for p in picked)
    out = cluster.kubectl("exec", "-n", "gpu-test1", "pod1", "--", "nvidia-smi", "-L").stdout
    assert re.fullmatch(r"GPU 0: NVIDIA (A100-SXM4-40GB|H100 80GB HBM3) \(UUID: GPU-[0-9a-f-]+\)\n", out)


def test_two_containers_share_one_gpu(cluster):
    ctr = """
  - name: {name}
    image: ubuntu:22.04
    command: ["bash", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
    resources:
      claims:
      - name: shared-gpu"""
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test2
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test2
  name: single-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
---
apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-test2
  name: pod
spec:
  containers:""" + ctr.format(name="ctr0") + ctr.format(name="ctr1") + """
  resourceClaims:
  - name: shared-gpu
    resourceClaimTemplateName: single-gpu""")
    running(cluster, "gpu-test2", 1)
    [claim] = results(cluster, "gpu-test2").values()
    assert len(claim) == 1
    logs = [smi_uuids(cluster.kubectl("logs", "-n", "gpu-test2", "pod", "-c", c).stdout) for c in ("ctr0", "ctr1")]
    assert logs[0] == logs[1] and len(logs[0]) == 1


def test_a_global_claim_is_shared_by_two_pods(cluster):
    pod = """
apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-test3
  name: {name}
spec:
  containers:
  - name: ctr
    image: ubuntu:22.04
    command: ["bash", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
    resources:
      claims:
      - name: shared-gpu
  resourceClaims:
  - name: shared-gpu
    resourceClaimName: single-gpu"""
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test3
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  namespace: gpu-test3
  name: single-gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
---""" + pod.format(name="pod1") + "\n---" + pod.format(name="pod2"))
    running(cluster, "gpu-test3", 2)
    claim = cluster.kubectl_json("get", "resourceclaim", "-n", "gpu-test3", "single-gpu")
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["pod1", "pod2"]
    uuids = [smi_uuids(cluster.kubectl("logs", "-n", "gpu-test3", p).stdout) for p in ("pod1", "pod2")]
    assert uuids[0] == uuids[1] and len(uuids[0]) == 1


def test_four_mig_devices_on_one_gpu_per_replica(cluster):
    def ctr(i: int, request: str) -> str:
        return f"""
      - name: ctr{i}
        image: ubuntu:22.04
        {SMI}
        resources:
          claims:
          - name: mig-devices
            request: {request}"""

    def req(name: str, profile: str) -> str:
        return f"""
      - name: {name}
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel:
              expression: "device.attributes['gpu.nvidia.com'].profile == '{profile}'\""""
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test4
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test4
  name: mig-devices
spec:
  spec:
    devices:
      requests:""" + req("mig-1g-5gb-0", "1g.5gb") + req("mig-1g-5gb-1", "1g.5gb") + req("mig-2g-10gb", "2g.10gb")
          + req("mig-3g-20gb", "3g.20gb") + """
      constraints:
      - requests: []
        matchAttribute: "gpu.nvidia.com/parentUUID"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  namespace: gpu-test4
  name: pod
spec:
  replicas: 4
  selector:
    matchLabels:
      app: pod
  template:
    metadata:
      labels:
        app: pod
    spec:
      resourceClaims:
      - name: mig-devices
        resourceClaimTemplateName: mig-devices
      containers:""" + ctr(0, "mig-1g-5gb-0") + ctr(1, "mig-1g-5gb-1") + ctr(2, "mig-2g-10gb")
          + ctr(3, "mig-3g-20gb") + TOLERATE)
    pods = running(cluster, "gpu-test4", 4, timeout=120)
    devs = slice_devices(cluster)
    parents = set()
    for rs in results(cluster, "gpu-test4").values():
        assert [r["request"] for r in rs] == ["mig-1g-5gb-0", "mig-1g-5gb-1", "mig-2g-10gb", "mig-3g-20gb"]
        [parent] = {attr(devs[(r["pool"], r["device"])], "parentUUID") for r in rs}
        assert [attr(devs[(r["pool"], r["device"])], "profile") for r in rs] == ["1g.5gb", "1g.5gb", "2g.10gb",
                                                                                 "3g.20gb"]
        parents.add(parent)
    assert len(parents) == 4
    name = pods[0]["metadata"]["name"]
    lines = cluster.kubectl("logs", "-n", "gpu-test4", name, "-c", "ctr3").stdout.splitlines()
    assert re.fullmatch(r"GPU 0: NVIDIA A100-SXM4-40GB \(UUID: GPU-[0-9a-f-]+\)", lines[-2])
    assert re.fullmatch(r"  MIG 3g.20gb +Device  0: \(UUID: MIG-[0-9a-f-]+\)", lines[-1])


def test_mig_devices_created_up_front_are_allocated_with_their_uuids(cluster):
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-static-mig
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-static-mig
  name: two-small
spec:
  spec:
    devices:
      requests:
      - name: small
        exactly:
          deviceClassName: mig.nvidia.com
          count: 2
          selectors:
          - cel:
              expression: "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
      constraints:
      - matchAttribute: "gpu.nvidia.com/parentUUID"
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: MigDeviceConfig
            sharing:
              strategy: MPS
---
apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-static-mig
  name: pod
spec:
  nodeSelector:
    kubernetes.io/hostname: dgxa100-0
  containers:
  - name: ctr
    image: ubuntu:22.04
    command: ["bash", "-c"]
    args: ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"]
    resources:
      claims:
      - name: mig
  resourceClaims:
  - name: mig
    resourceClaimTemplateName: two-small""")
    running(cluster, "gpu-static-mig", 1)
    [rs] = results(cluster, "gpu-static-mig").values()
    devs = slice_devices(cluster)
    picked = [devs[(r["pool"], r["device"])] for r in rs]
    assert {r["pool"] for r in rs} == {"dgxa100-0"} and all(attr(d, "profile") == "1g.5gb" for d in picked)
    out = cluster.kubectl("exec", "-n", "gpu-static-mig", "pod", "--", "nvidia-smi", "-L").stdout
    assert smi_uuids(out) == [attr(picked[0], "parentUUID")] + [attr(d, "uuid") for d in picked]


def test_time_slicing_and_mps_configs_reach_the_driver(cluster):
    def ctr(name: str, request: str) -> str:
        return f"""
  - name: {name}
    image: nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04
    command: ["bash", "-c"]
    args: ["trap 'exit 0' TERM; /tmp/sample --benchmark --numbodies=4226000 & wait"]
    resources:
      claims:
      - name: shared-gpus
        request: {request}"""
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test5
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: gpu-test5
  name: multiple-gpus
spec:
  spec:
    devices:
      requests:
      - name: ts-gpu
        exactly:
          deviceClassName: gpu.nvidia.com
      - name: mps-gpu
        exactly:
          deviceClassName: gpu.nvidia.com
      config:
      - requests: ["ts-gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing:
              strategy: TimeSlicing
              timeSlicingConfig:
                interval: Long
      - requests: ["mps-gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing:
              strategy: MPS
              mpsConfig:
                defaultActiveThreadPercentage: 50
                defaultPinnedDeviceMemoryLimit: 10Gi
---
apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-test5
  name: pod0
spec:
  containers:""" + ctr("ts-ctr0", "ts-gpu") + ctr("ts-ctr1", "ts-gpu") + ctr("mps-ctr0", "mps-gpu")
          + ctr("mps-ctr1", "mps-gpu") + """
  resourceClaims:
  - name: shared-gpus
    resourceClaimTemplateName: multiple-gpus""")
    running(cluster, "gpu-test5", 1)
    [rs] = results(cluster, "gpu-test5").values()
    assert [r["request"] for r in rs] == ["ts-gpu", "mps-gpu"]
    assert (rs[0]["pool"], rs[0]["device"]) != (rs[1]["pool"], rs[1]["device"])
    seen = {c: cluster.kubectl("exec", "-n", "gpu-test5", "pod0", "-c", c, "--", "nvidia-smi", "-L").stdout
            for c in ("ts-ctr0", "ts-ctr1", "mps-ctr0", "mps-ctr1")}
    assert seen["ts-ctr0"] == seen["ts-ctr1"] != seen["mps-ctr0"] == seen["mps-ctr1"]


def test_an_invalid_gpu_config_leaves_the_pod_container_creating_with_the_drivers_error(cluster):
    apply(cluster, """
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-test-bad
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  namespace: gpu-test-bad
  name: gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing:
            strategy: MPS
            mpsConfig:
              defaultActiveThreadPercentage: 150
---
apiVersion: v1
kind: Pod
metadata:
  namespace: gpu-test-bad
  name: pod
spec:
  containers:
  - name: ctr
    image: ubuntu:22.04
    resources:
      claims:
      - name: gpu
  resourceClaims:
  - name: gpu
    resourceClaimName: gpu""")

    def event():
        items = cluster.kubectl_json("get", "events", "-n", "gpu-test-bad")["items"]
        return next((e for e in items if e["reason"] == "FailedPrepareDynamicResources"), None)
    ev = wait_for(event)
    assert ev["type"] == "Warning" and ev["message"].startswith(
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
        "ResourceClaim gpu: error preparing devices for claim gpu-test-bad/gpu:")
    assert ev["message"].endswith(": prepare devices failed: error validating GPU config: "
                                  "active thread percentage must not be greater than 100")
    pod = cluster.kubectl_json("get", "pod", "-n", "gpu-test-bad", "pod")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"


def evicted(c, ns: str, name: str) -> bool:
    r = c.kubectl("get", "pod", "-n", ns, name, "-o", "json", check=False)
    return r.returncode != 0 or bool(json.loads(r.stdout)["metadata"].get("deletionTimestamp"))


def gpu_pod(c, ns: str) -> tuple[str, str]:
    apply(c, f"""
apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  namespace: {ns}
  name: gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
---
apiVersion: v1
kind: Pod
metadata:
  namespace: {ns}
  name: pod
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: ctr
    image: ubuntu:22.04
    resources:
      claims:
      - name: gpu
  resourceClaims:
  - name: gpu
    resourceClaimName: gpu""")
    running(c, ns, 1)
    [[r]] = results(c, ns).values()
    return r["pool"], r["device"]


def test_a_device_taint_rule_on_a_gpu_nvidia_com_device_evicts(cluster):
    node, device = gpu_pod(cluster, "gpu-taint-rule")
    apply(cluster, json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "nvidia-maintenance"},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": node, "device": device},
                 "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}}))
    assert wait_for(lambda: evicted(cluster, "gpu-taint-rule", "pod"))
    cluster.kubectl("delete", "devicetaintrule", "nvidia-maintenance")


def test_an_xid_fault_taints_the_gpu_and_evicts_its_pod(cluster):
    node, device = gpu_pod(cluster, "gpu-xid")
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", "gpu", node, device, "--kind", "xid",
                        "--kubeconfig", cluster.kubeconfig], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr

    def taints():
        return slice_devices(cluster)[(node, device)].get("taints")
    [taint] = wait_for(taints)
    assert (taint["key"], taint["effect"]) == (f"{DRIVER}/xid", "NoExecute")
    wait_for(lambda: evicted(cluster, "gpu-xid", "pod"))
