"""DRA structured allocation through `nanokube up` and kubectl, against the
simulated drivers' ResourceSlices of examples/clusters/dra-e2e.yaml (h100-0/1:
two 80Gi H100s and two RDMA NICs on the GPUs' PCIe roots; a100-0: one 40Gi
A100 partitionable into two 20Gi slices sharing its counters).

Covers CEL over attributes and capacity, `All`, `matchAttribute`,
`firstAvailable`, shared counters, adminAccess, device taints (slice taints
and DeviceTaintRules), and bad claims: each gives the pod a FailedScheduling
event naming the problem while other pods keep being scheduled."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import running_cluster, wait_for

CLUSTER_FILE = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "dra-e2e.yaml"
GPU = "gpu.nanokube.io"
RDMA = "rdma.nanokube.io"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
HOST = "kubernetes.io/hostname"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("dra-alloc", ("--cluster", str(CLUSTER_FILE))) as c:
        yield c


@pytest.fixture(autouse=True)
def clean(cluster):
    """Each test leaves no pods or claims behind in `default`, so devices are free again."""
    yield
    cluster.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: not cluster.kubectl_json("get", "pods")["items"], what="pods gone", every=0.1)
    cluster.kubectl("delete", "resourceclaims", "--all", "--wait=false")
    wait_for(lambda: not cluster.kubectl_json("get", "resourceclaims")["items"], what="claims gone", every=0.1)


def sel(expression: str) -> dict:
    return {"cel": {"expression": expression}}


def attr(name: str, driver: str = GPU) -> str:
    return f"device.attributes['{driver}'].{name}"


def exactly(name: str = "gpu", cls: str = GPU, *selectors: str, **extra) -> dict:
    return {"name": name, "exactly": {"deviceClassName": cls, "selectors": [sel(s) for s in selectors], **extra}}


def claim_pod(c, requests: list[dict], constraints: list | None = None, node: str | None = None,
              namespace: str = "default") -> str:
    """A claim with these requests and a pod using it; returns their name."""
    name = f"dra-{next(_names)}"
    devices: dict = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    c.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": devices}}))
    spec: dict = {"terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
                  "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                                  "resources": {"claims": [{"name": "dev"}]}}]}
    if node:
        spec["nodeSelector"] = {HOST: node}
    c.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}))
    return name


def allocated(c, name: str, namespace: str = "default") -> list[dict]:
    """Wait for the pod to be scheduled; its claim's allocation results."""
    wait_for(lambda: c.kubectl_json("get", "pod", name, "-n", namespace)["spec"].get("nodeName"), what=f"{name} scheduled", every=0.1)
    alloc = c.kubectl_json("get", "resourceclaim", name, "-n", namespace)["status"]["allocation"]
    return alloc["devices"]["results"]


def devices(results: list[dict]) -> set[tuple[str, str]]:
    return {(r["pool"], r["device"]) for r in results}


def failed_scheduling(c, name: str, namespace: str = "default") -> str:
    """Wait for the pod's FailedScheduling event; its message."""
    def event():
        items = c.kubectl_json("get", "events", "-n", namespace, "--field-selector",
                               f"involvedObject.name={name},reason=FailedScheduling")["items"]
        return items and items[-1]["message"]
    message = wait_for(event, what=f"FailedScheduling for {name}", every=0.1)
    assert c.kubectl_json("get", "pod", name, "-n", namespace)["spec"].get("nodeName") is None
    return message


def delete(c, name: str, namespace: str = "default") -> None:
    """Free a pod's claim: the pod goes first, then the claim."""
    c.kubectl("delete", "pod", name, "-n", namespace, "--grace-period=0", "--force")
    c.kubectl("delete", "resourceclaim", name, "-n", namespace)


def fault(c, *args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", *args, "--kubeconfig", c.kubeconfig],
                       check=False, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


# --- selection -----------------------------------------------------------------


def test_cel_over_attributes_picks_the_model(cluster):
    name = claim_pod(cluster, [exactly("gpu", GPU, f"{attr('model')} == 'NVIDIA-A100'", f"{attr('type')} == 'gpu'")])
    assert devices(allocated(cluster, name)) == {("a100-0", "gpu-0")}


def test_cel_over_capacity_with_quantity(cluster):
    big = f"device.capacity['{GPU}'].memory.compareTo(quantity('64Gi')) >= 0"
    name = claim_pod(cluster, [exactly("gpu", GPU, big, f"{attr('index')} == 1")])
    [(pool, device)] = devices(allocated(cluster, name))
    assert pool in ("h100-0", "h100-1") and device == "gpu-1"


def test_allocation_mode_all_takes_every_matching_device_on_the_node(cluster):
    name = claim_pod(cluster, [exactly("nics", RDMA, allocationMode="All")], node="h100-1")
    results = allocated(cluster, name)
    assert devices(results) == {("h100-1", "nic-0"), ("h100-1", "nic-1")}
    assert {r["driver"] for r in results} == {"nic.nanokube.io"}


def test_match_attribute_pairs_a_gpu_with_the_nic_on_its_pcie_root(cluster):
    requests = [exactly("gpu", GPU, f"{attr('index')} == 1"), exactly("nic", RDMA)]
    constraints = [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]
    name = claim_pod(cluster, requests, constraints, node="h100-0")
    by_request = {r["request"]: r["device"] for r in allocated(cluster, name)}
    assert by_request == {"gpu": "gpu-1", "nic": "nic-1"}


def test_match_attribute_that_no_pair_satisfies_is_unschedulable(cluster):
    requests = [exactly("gpu", GPU, f"{attr('type')} == 'gpu'"), exactly("nic", RDMA)]
    constraints = [{"requests": ["gpu", "nic"], "matchAttribute": f"{GPU}/uuid"}]
    name = claim_pod(cluster, requests, constraints)
    assert "0/3 nodes are available: 3 cannot allocate all claims" in failed_scheduling(cluster, name)


def test_first_available_falls_back_to_the_second_subrequest(cluster):
    request = {"name": "gpu", "firstAvailable": [
        {"name": "huge", "deviceClassName": GPU, "selectors": [sel(f"device.capacity['{GPU}'].memory.compareTo(quantity('100Gi')) >= 0")]},
        {"name": "a100", "deviceClassName": GPU, "selectors": [sel(f"{attr('model')} == 'NVIDIA-A100'"), sel(f"{attr('type')} == 'gpu'")]},
    ]}
    name = claim_pod(cluster, [request])
    [result] = allocated(cluster, name)
    assert (result["request"], result["pool"], result["device"]) == ("gpu/a100", "a100-0", "gpu-0")


# --- counters -----------------------------------------------------------------


def test_full_gpu_and_its_partitions_exclude_each_other(cluster):
    whole = exactly("gpu", GPU, f"{attr('model')} == 'NVIDIA-A100'", f"{attr('type')} == 'gpu'")
    part = exactly("gpu", GPU, f"{attr('type')} == 'mig'")
    full = claim_pod(cluster, [whole])
    assert devices(allocated(cluster, full)) == {("a100-0", "gpu-0")}
    slice_0 = claim_pod(cluster, [part])
    assert "cannot allocate all claims" in failed_scheduling(cluster, slice_0)

    delete(cluster, full)
    got = devices(allocated(cluster, slice_0))
    slice_1 = claim_pod(cluster, [part])
    got |= devices(allocated(cluster, slice_1))
    assert got == {("a100-0", "gpu-0-mig-0"), ("a100-0", "gpu-0-mig-1")}
    again = claim_pod(cluster, [whole])
    assert "cannot allocate all claims" in failed_scheduling(cluster, again)


# --- admin access -------------------------------------------------------------


@pytest.fixture
def admin_namespace(cluster):
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-admin", "labels": {ADMIN_LABEL: "true"}}}))
    yield "gpu-admin"
    cluster.kubectl("delete", "namespace", "gpu-admin", "--wait=false")


def test_admin_access_gets_a_device_already_in_use(cluster, admin_namespace):
    a100 = [f"{attr('model')} == 'NVIDIA-A100'", f"{attr('type')} == 'gpu'"]
    user = claim_pod(cluster, [exactly("gpu", GPU, *a100)])
    assert devices(allocated(cluster, user)) == {("a100-0", "gpu-0")}
    monitor = claim_pod(cluster, [exactly("gpu", GPU, *a100, adminAccess=True)], namespace=admin_namespace)
    [result] = allocated(cluster, monitor, admin_namespace)
    assert (result["pool"], result["device"], result.get("adminAccess")) == ("a100-0", "gpu-0", True)
    delete(cluster, monitor, admin_namespace)


def test_admin_access_outside_a_labelled_namespace_is_refused(cluster):
    r = cluster.kubectl("create", "-f", "-", check=False, input=json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "sneaky", "namespace": "default"},
        "spec": {"devices": {"requests": [exactly("gpu", GPU, adminAccess=True)]}}}))
    assert r.returncode != 0 and ADMIN_LABEL in r.stderr
    assert 'spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access to devices requires the ' \
           f'`{ADMIN_LABEL}: true` label on the containing namespace' in r.stderr


# --- device taints ----------------------------------------------------------


def test_no_schedule_tainted_device_is_skipped_and_a_tolerating_claim_uses_it(cluster):
    fault(cluster, "gpu", "h100-0", "gpu-0", "--kind", "ecc")
    try:
        wait_for(lambda: any(d["name"] == "gpu-0" and d.get("taints")
                             for s in cluster.kubectl_json("get", "resourceslices")["items"]
                             if s["spec"].get("nodeName") == "h100-0" and s["spec"]["driver"] == GPU
                             for d in s["spec"].get("devices") or []), what="gpu-0 tainted", every=0.1)
        both = claim_pod(cluster, [exactly("gpu", GPU, f"{attr('type')} == 'gpu'", count=2)], node="h100-0")
        assert "cannot allocate all claims" in failed_scheduling(cluster, both)
        one = claim_pod(cluster, [exactly("gpu", GPU)], node="h100-0")
        assert devices(allocated(cluster, one)) == {("h100-0", "gpu-1")}

        toleration = {"key": f"{GPU}/ecc", "operator": "Exists", "effect": "NoSchedule"}
        tolerant = claim_pod(cluster, [exactly("gpu", GPU, f"{attr('index')} == 0", tolerations=[toleration])], node="h100-0")
        [result] = allocated(cluster, tolerant)
        assert (result["device"], result["tolerations"]) == ("gpu-0", [toleration])
    finally:
        fault(cluster, "gpu", "h100-0", "gpu-0", "--clear")


def test_device_taint_rule_makes_a_whole_pool_unallocatable(cluster):
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "drain-h100-1"},
            "spec": {"deviceSelector": {"driver": GPU, "pool": "h100-1"},
                     "taint": {"key": "e2e.nanokube.io/drain", "effect": "NoSchedule"}}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(rule))
    try:
        name = claim_pod(cluster, [exactly("gpu", GPU)], node="h100-1")
        assert "cannot allocate all claims" in failed_scheduling(cluster, name)
    finally:
        cluster.kubectl("delete", "devicetaintrule", "drain-h100-1")
    assert devices(allocated(cluster, name)) <= {("h100-1", "gpu-0"), ("h100-1", "gpu-1")}


# --- bad input --------------------------------------------------------------


def test_selector_that_does_not_compile_is_refused_at_create(cluster):
    """As kube-apiserver's validation compiles every CEL selector, such a claim never reaches the scheduler."""
    r = cluster.kubectl("create", "-f", "-", check=False, input=json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "no-compile", "namespace": "default"},
        "spec": {"devices": {"requests": [exactly("gpu", GPU, "device.attributes[")]}}}))
    assert r.returncode != 0 and "is invalid" in r.stderr and "compilation failed" in r.stderr, r.stderr
    assert cluster.kubectl("get", "resourceclaim", "no-compile", check=False).returncode != 0


@pytest.mark.parametrize("request_, problem", [
    (exactly("gpu", "no-such-class"),
     ', request gpu: could not retrieve device class no-such-class: deviceclass.resource.k8s.io "no-such-class" not found'),
    # a selector's error names its claim, not the request
    (exactly("gpu", GPU, attr("model")), ": selector #0: CEL runtime error: must evaluate to bool"),
    (exactly("gpu", GPU, f"{attr('nosuch')} == 'x'"), ": selector #0: CEL runtime error: no such key: nosuch"),
], ids=["missing-class", "not-bool", "unknown-attribute"])
def test_bad_claim_is_reported_and_scheduling_goes_on(cluster, request_, problem):
    bad = claim_pod(cluster, [request_])
    message = failed_scheduling(cluster, bad)
    # a broken claim or class is the plugin's error, not a node's rejection: upstream's framework wraps it
    assert message.startswith(f'running "DynamicResources" filter plugin: claim default/{bad}{problem}'), message
    condition = next(c for c in cluster.kubectl_json("get", "pod", bad)["status"]["conditions"]
                     if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "SchedulerError", message)
    healthy = claim_pod(cluster, [exactly("nic", RDMA)])
    assert len(allocated(cluster, healthy)) == 1
    assert cluster.proc.poll() is None
