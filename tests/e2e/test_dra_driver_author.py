"""DRA as a driver author drives it with the official `kubernetes` client
against `nanokube up`: publish a DeviceClass and ResourceSlices for a driver
of one's own, watch the scheduler allocate claims from them, and write the
claim status a kubelet plugin writes."""

from __future__ import annotations

import itertools
import json

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
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                        "resources": {"claims": [{"name": "gpu"}]}}]}})
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


BINDING_DRIVER = "fpga.author.example.com"


@pytest.fixture(scope="module")
def fpgas(resource_api, node):
    """Two devices the scheduler may bind a pod to only once the driver reports
    them attached (binding conditions, KEP-5007)."""
    resource_api.create_device_class({"metadata": {"name": BINDING_DRIVER}, "spec": {
        "selectors": [{"cel": {"expression": f"device.driver == '{BINDING_DRIVER}'"}}]}})
    resource_api.create_resource_slice({"metadata": {"name": f"{node}-{BINDING_DRIVER}"}, "spec": {
        "driver": BINDING_DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"fpga-{i}", "bindingConditions": ["attached"], "bindingFailureConditions": ["attach-failed"]}
                    for i in range(2)]}})
    return node


def _fpga_pod(resource_api, core_api) -> str:
    name = f"author-{next(_names)}"
    resource_api.create_namespaced_resource_claim("default", {"metadata": {"name": name}, "spec": {
        "devices": {"requests": [{"name": "fpga", "exactly": {"deviceClassName": BINDING_DRIVER}}]}}})
    core_api.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "fpga", "resourceClaimName": name}],
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                        "resources": {"claims": [{"name": "fpga"}]}}]}})
    return name


def _report(resource_api, name: str, condition: str, reason: str, message: str) -> None:
    """What the driver's controller writes once it has (or has not) attached the device."""
    [r] = _allocated(resource_api, name)
    resource_api.patch_namespaced_resource_claim_status(name, "default", {"status": {"devices": [{
        "driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": [{
            "type": condition, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}})


def _events(core_api, name: str, reason: str) -> list:
    return [e for e in core_api.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items
            if e.reason == reason]


def test_pod_binds_only_once_its_devices_binding_conditions_are_true(resource_api, core_api, fpgas):
    name = _fpga_pod(resource_api, core_api)
    [r] = _allocated(resource_api, name)
    assert r["binding_conditions"] == ["attached"] and r["binding_failure_conditions"] == ["attach-failed"]
    [pending] = wait_for(lambda: _events(core_api, name, "BindingConditionsPending"), what="BindingConditionsPending")
    assert pending.message == f"waiting for binding conditions for device on node {fpgas}" and pending.type == "Normal"
    claim = resource_api.read_namespaced_resource_claim(name, "default")
    assert [c.name for c in claim.status.reserved_for] == [name]
    assert core_api.read_namespaced_pod(name, "default").spec.node_name is None

    _report(resource_api, name, "attached", "Attached", "fpga attached to the node")
    assert wait_for(lambda: core_api.read_namespaced_pod(name, "default").spec.node_name, what=f"{name} bound") == fpgas


def test_a_true_binding_failure_condition_fails_the_binding_and_frees_the_claim(resource_api, core_api, fpgas):
    name = _fpga_pod(resource_api, core_api)
    wait_for(lambda: _events(core_api, name, "BindingConditionsPending"), what="BindingConditionsPending")
    _report(resource_api, name, "attach-failed", "NoPath", "no PCIe path")

    def failed():
        return [e.message for e in _events(core_api, name, "FailedScheduling")
                if 'binding failed: reason=NoPath, message="no PCIe path"' in e.message]
    assert wait_for(failed, what="FailedScheduling of the failed binding")
    assert core_api.read_namespaced_pod(name, "default").spec.node_name is None


FABRIC = "fabric.author.example.com"


def _selector(key: str, values: list[str]) -> dict:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": values}]}]}


@pytest.fixture(scope="module")
def fabric(resource_api, core_api, node):
    """Network-attached devices: a pool reachable from every node, whose device 0 binds to
    the node it is allocated for, and two pools each reachable from the nodes a selector picks."""
    zone = core_api.read_node(node).metadata.labels["topology.kubernetes.io/zone"]
    resource_api.create_device_class({"metadata": {"name": FABRIC}, "spec": {
        "selectors": [{"cel": {"expression": f"device.driver == '{FABRIC}'"}}]}})
    pools = {"everywhere": {"allNodes": True}, "zonal": {"nodeSelector": _selector("topology.kubernetes.io/zone", [zone])},
             "hosted": {"nodeSelector": _selector("kubernetes.io/hostname", [node])}}
    for pool, where in pools.items():
        devices = [{"name": f"dev-{i}", "attributes": {"pool": {"string": pool}, "index": {"int": i}},
                    **({"bindsToNode": True} if i == 0 and pool == "everywhere" else {})} for i in range(2)]
        resource_api.create_resource_slice({"metadata": {"name": f"{FABRIC}-{pool}"}, "spec": {
            "driver": FABRIC, **where, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
    return zone


def _fabric_allocation(resource_api, core_api, *devices: tuple[str, int]) -> tuple[dict, str]:
    """A pod's claim on these (pool, index) devices; its allocation and node once scheduled."""
    name = f"author-{next(_names)}"
    attr = f"device.attributes['{FABRIC}']"
    requests = [{"name": f"r{i}", "exactly": {"deviceClassName": FABRIC, "selectors": [
        {"cel": {"expression": f"{attr}.pool == '{pool}' && {attr}.index == {index}"}}]}}
        for i, (pool, index) in enumerate(devices)]
    resource_api.create_namespaced_resource_claim("default", {"metadata": {"name": name}, "spec": {
        "devices": {"requests": requests}}})
    core_api.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "net", "resourceClaimName": name}],
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                        "resources": {"claims": [{"name": "net"}]}}]}})
    _allocated(resource_api, name)
    node = wait_for(lambda: core_api.read_namespaced_pod(name, "default").spec.node_name, what=f"{name} scheduled")
    return resource_api.read_namespaced_resource_claim(name, "default").to_dict()["status"]["allocation"], node


def _by_name(node: str) -> dict:
    return {"node_selector_terms": [{"match_expressions": None, "match_fields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def test_allocation_node_selector_follows_where_the_devices_are(resource_api, core_api, node, fabric):
    """createNodeSelector: nil for devices every node reaches; pinned to the node for a device
    that binds to it (bindsToNode); one term holding each selector's requirements for devices
    of pools with different node selectors."""
    anywhere, _ = _fabric_allocation(resource_api, core_api, ("everywhere", 1))
    assert anywhere["node_selector"] is None
    bound, on = _fabric_allocation(resource_api, core_api, ("everywhere", 0))
    assert bound["node_selector"] == _by_name(on)
    merged, _ = _fabric_allocation(resource_api, core_api, ("zonal", 0), ("hosted", 0))
    assert merged["node_selector"] == {"node_selector_terms": [{"match_fields": None, "match_expressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [fabric]},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}


def test_deallocation_drops_the_device_status_of_the_freed_devices(resource_api, shared_gpus):
    """The status strategy's dropDeallocatedStatusDevices: a status write that clears the
    allocation drops the status.devices entries of its devices, so whoever deallocates (the
    resourceclaim controller, a scheduler's PostFilter) need not know about a driver's entries."""
    name = f"author-{next(_names)}"
    resource_api.create_namespaced_resource_claim("default", {"metadata": {"name": name}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 2}}]}}})
    claim = resource_api.read_namespaced_resource_claim(name, "default")
    results = [{"request": "gpu", "driver": DRIVER, "pool": shared_gpus, "device": f"gpu-{i}"} for i in range(2)]
    ready = [{"type": "Ready", "status": "True", "reason": "Configured", "message": "",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    body = client.ApiClient().sanitize_for_serialization(claim)
    body["status"] = {"allocation": {"devices": {"results": results}},
                      "devices": [{"driver": DRIVER, "pool": shared_gpus, "device": f"gpu-{i}", "conditions": ready} for i in range(2)]}
    body = client.ApiClient().sanitize_for_serialization(resource_api.replace_namespaced_resource_claim_status(name, "default", body))
    assert len(body["status"]["devices"]) == 2

    del body["status"]["allocation"]
    freed = resource_api.replace_namespaced_resource_claim_status(name, "default", body)
    assert freed.status.allocation is None and freed.status.devices is None


def test_device_status_errors_print_the_device_id_as_go_prints_it(resource_api, shared_gpus):
    """structured.SharedDeviceID is a fmt.Stringer: field.Error prints its String(),
    driver/pool/device, unquoted, both for a device the claim was not allocated and for
    a second entry of the same device."""
    name = f"author-{next(_names)}"
    resource_api.create_namespaced_resource_claim("default", {"metadata": {"name": name}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}})
    body = client.ApiClient().sanitize_for_serialization(resource_api.read_namespaced_resource_claim(name, "default"))
    body["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": shared_gpus, "device": "gpu-0"}]}}}
    body = client.ApiClient().sanitize_for_serialization(resource_api.replace_namespaced_resource_claim_status(name, "default", body))
    entry = {"driver": DRIVER, "pool": shared_gpus}
    body["status"]["devices"] = [{**entry, "device": "gpu-0"}, {**entry, "device": "gpu-0"}, {**entry, "device": "gpu-9"}]
    with pytest.raises(client.ApiException) as e:
        resource_api.replace_namespaced_resource_claim_status(name, "default", body)
    assert e.value.status == 422
    causes = {c["field"]: c["message"] for c in json.loads(e.value.body)["details"]["causes"]}
    assert causes == {"status.devices[1]": f"Duplicate value: {DRIVER}/{shared_gpus}/gpu-0",
                      "status.devices[2]": f"Invalid value: {DRIVER}/{shared_gpus}/gpu-9: must be an allocated device in the claim"}
