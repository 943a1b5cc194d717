"""DRA as a driver author drives it with the official `kubernetes` client
against `nanokube up`: publish a DeviceClass and ResourceSlices for a driver
of one's own, watch the scheduler allocate claims from them, and write the
claim status a kubelet plugin writes."""

from __future__ import annotations

import itertools

import pytest
from kubernetes import client

from tests.e2e.conftest import wait_for

DRIVER = "gpu.author.example.com"
_names = itertools.count()


@pytest.fixture(scope="module")
def resource_api(cluster):
    return client.ResourceV1Api(cluster.client())


@pytest.fixture(scope="module")
def core_api(cluster):
    return client.CoreV1Api(cluster.client())


@pytest.fixture(scope="module")
def node(core_api):
    return wait_for(lambda: core_api.list_node().items)[0].metadata.name


@pytest.fixture(scope="module")
def shared_gpus(resource_api, node):
    """One node's pool of two GPUs that several claims may share (consumable
    capacity): memory granted in whole Gi from a 1Gi minimum, compute as asked."""
    resource_api.create_device_class({"metadata": {"name": DRIVER}, "spec": {
        "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
    capacity = {"memory": {"value": "80Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}},
                "compute": {"value": "100", "requestPolicy": {"default": "10", "validRange": {"min": "1", "max": "100"}}}}
    resource_api.create_resource_slice({"metadata": {"name": f"{node}-{DRIVER}"}, "spec": {
        "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "allowMultipleAllocations": True, "capacity": capacity} for i in range(2)]}})
    return node


def _claim_and_pod(resource_api, core_api, capacity: dict | None) -> str:
    name = f"author-{next(_names)}"
    exactly: dict = {"deviceClassName": DRIVER}
    if capacity is not None:
        exactly["capacity"] = {"requests": capacity}
    resource_api.create_namespaced_resource_claim("default", {"metadata": {"name": name}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
    core_api.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"claims": [{"name": "gpu"}]}}]}})
    return name


def _allocated(resource_api, name: str) -> list[dict]:
    def results():
        status = resource_api.read_namespaced_resource_claim(name, "default").to_dict()["status"] or {}
        return ((status.get("allocation") or {}).get("devices") or {}).get("results")
    return wait_for(results, what=f"claim {name} allocated")


def test_consumed_capacity_keeps_the_format_of_the_quantity_it_came_from(resource_api, core_api, shared_gpus):
    """calculateConsumedCapacity hands back Quantities: the request as written
    (16Gi, 20), a step-rounded amount in the step's format (1.5Gi rounds up to 2Gi),
    the policy's default (1Gi, 10); their JSON is that format's, not the bytes."""
    asked = _claim_and_pod(resource_api, core_api, {"memory": "16Gi", "compute": "20"})
    [r] = _allocated(resource_api, asked)
    assert r["consumed_capacity"] == {"memory": "16Gi", "compute": "20"} and r["share_id"]

    rounded = _claim_and_pod(resource_api, core_api, {"memory": "1536Mi"})
    [r] = _allocated(resource_api, rounded)
    assert r["consumed_capacity"] == {"memory": "2Gi", "compute": "10"}

    defaults = _claim_and_pod(resource_api, core_api, None)
    [r] = _allocated(resource_api, defaults)
    assert r["consumed_capacity"] == {"memory": "1Gi", "compute": "10"}
