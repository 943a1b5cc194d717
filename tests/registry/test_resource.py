"""resource.k8s.io registry: DRA kinds, v1beta1 conversion, validation, columns."""

import copy

import pytest

from nanokube.registry import resource_validation as rv
from nanokube.registry.base import all_resources
from nanokube.registry.resource import (
    DeviceClassStrategy,
    DeviceTaintRuleStrategy,
    ResourceClaimStrategy,
    ResourceClaimTemplateStrategy,
    ResourceSliceStrategy,
)

NOW = "2026-07-01T12:00:00Z"


def errors(errs):
    return [(e.field, e.reason) for e in errs]


def test_registration():
    res = {r.plural: r for r in all_resources() if r.group == "resource.k8s.io"}
    assert res["resourceclaims"].versions == ["v1", "v1beta2", "v1beta1"] and res["resourceclaims"].subresources == ("status",)
    assert res["devicetaintrules"].versions == ["v1", "v1beta2", "v1alpha3"] and not res["devicetaintrules"].namespaced
    assert all(r.storage_version == "v1" for r in res.values() if r.plural != "resourcepoolstatusrequests")  # v1alpha3 only
    assert res["resourceclaimtemplates"].namespaced and not res["resourceslices"].namespaced


# --- ResourceClaim -----------------------------------------------------------------

def claim(requests=None, **devices):
    requests = requests if requests is not None else [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
    return {"metadata": {"name": "c", "namespace": "ml"}, "spec": {"devices": {"requests": requests, **devices}}}


def test_claim_defaults_and_valid():
    s = ResourceClaimStrategy()
    obj = claim([
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "tolerations": [{"key": "example.com/unhealthy", "effect": "NoExecute"}]}},
        {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com", "allocationMode": "All"}]},
    ], constraints=[{"requests": ["gpu", "nic/fast"], "matchAttribute": "example.com/numa"}],
        config=[{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {"mode": "shared"}}}])
    s.default(obj, "v1")
    exact = obj["spec"]["devices"]["requests"][0]["exactly"]
    assert (exact["allocationMode"], exact["count"], exact["tolerations"][0]["operator"]) == ("ExactCount", 1, "Equal")
    assert "count" not in obj["spec"]["devices"]["requests"][1]["firstAvailable"][0]
    assert s.validate(obj) == []


@pytest.mark.parametrize(
    "requests, extra, field, reason",
    [
        ([{"name": "gpu"}], {}, "spec.devices.requests[0]", "FieldValueRequired"),
        ([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}, "firstAvailable": [{"name": "a", "deviceClassName": "c"}]}], {}, "spec.devices.requests[0]", "FieldValueInvalid"),
        ([{"name": "gpu", "exactly": {"allocationMode": "ExactCount", "count": 1}}], {}, "spec.devices.requests[0].exactly.deviceClassName", "FieldValueRequired"),
        ([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": -1}}], {}, "spec.devices.requests[0].exactly.count", "FieldValueInvalid"),
        ([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2}}], {}, "spec.devices.requests[0].exactly.count", "FieldValueInvalid"),
        ([{"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "Some", "count": 1}}], {}, "spec.devices.requests[0].exactly.allocationMode", "FieldValueNotSupported"),
        ([{"name": "Gpu", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}}], {}, "spec.devices.requests[0].name", "FieldValueInvalid"),
        ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}}] * 2, {}, "spec.devices.requests[1]", "FieldValueDuplicate"),
        ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1, "selectors": [{}]}}], {}, "spec.devices.requests[0].exactly.selectors[0].cel", "FieldValueRequired"),
        ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1, "selectors": [{"cel": {"expression": "x" * 10241}}]}}], {}, "spec.devices.requests[0].exactly.selectors[0].cel.expression", "FieldValueTooLong"),
        ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1, "tolerations": [{"operator": "Exists", "value": "v"}]}}], {}, "spec.devices.requests[0].exactly.tolerations[0].value", "FieldValueInvalid"),
        ([{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "ExactCount", "count": 1, "tolerations": [{"key": "k", "operator": "Equal", "effect": "PreferNoSchedule"}]}}], {}, "spec.devices.requests[0].exactly.tolerations[0].effect", "FieldValueNotSupported"),
        ([{"name": "a", "firstAvailable": [{"name": f"s{i}", "deviceClassName": "c", "allocationMode": "ExactCount", "count": 1} for i in range(9)]}], {}, "spec.devices.requests[0].firstAvailable", "FieldValueTooMany"),
        (None, {"constraints": [{"requests": ["nope"], "matchAttribute": "example.com/numa"}]}, "spec.devices.constraints[0].requests[0]", "FieldValueInvalid"),
        (None, {"constraints": [{"matchAttribute": "numa"}]}, "spec.devices.constraints[0].matchAttribute", "FieldValueInvalid"),
        (None, {"constraints": [{}]}, "spec.devices.constraints[0]", "FieldValueRequired"),
        (None, {"config": [{"opaque": {"driver": "Bad_Driver", "parameters": {}}}]}, "spec.devices.config[0].opaque.driver", "FieldValueInvalid"),
        (None, {"config": [{"opaque": {"driver": "gpu.example.com", "parameters": []}}]}, "spec.devices.config[0].opaque.parameters", "FieldValueInvalid"),
    ],
)
def test_claim_spec_rules(requests, extra, field, reason):
    obj = claim(requests, **extra)
    ResourceClaimStrategy().default(obj, "v1")
    assert (field, reason) in errors(ResourceClaimStrategy().validate(obj))


def test_claim_spec_immutable():
    s = ResourceClaimStrategy()
    old = claim()
    new = copy.deepcopy(old)
    new["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other"
    [e] = s.validate_update(new, old)
    assert (e.field, e.detail) == ("spec", "field is immutable")
    assert s.validate_update(copy.deepcopy(old), old) == []


def test_claim_v1beta1_round_trip():
    s = ResourceClaimStrategy()
    beta = claim([{"name": "gpu", "deviceClassName": "gpu.example.com", "count": 2},
                  {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com"}]}])
    s.default(beta, "v1beta1")
    stored = s.to_storage(beta, "v1beta1")
    reqs = stored["spec"]["devices"]["requests"]
    assert reqs[0] == {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2, "allocationMode": "ExactCount"}}
    assert "exactly" not in reqs[1] and reqs[1]["firstAvailable"][0]["count"] == 1
    assert s.validate(stored) == []
    snapshot = copy.deepcopy(stored)
    back = s.from_storage(stored, "v1beta1")
    assert stored == snapshot
    gpu, nic = beta["spec"]["devices"]["requests"]
    assert back["spec"]["devices"]["requests"] == [gpu, {**nic, "deviceClassName": ""}]  # no omitempty in v1beta1
    assert s.from_storage(stored, "v1beta2") is stored


ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}}
POD = {"resource": "pods", "name": "p", "uid": "0b5f6d4e-0000-4000-8000-000000000001"}


def with_status(**status):
    obj = claim()
    obj["status"] = status
    return obj


def status_errors(status, old_status=None, deleting=False):
    new, old = with_status(**status), with_status(**(old_status or {}))
    if deleting:
        new["metadata"]["deletionTimestamp"] = NOW
    return errors(ResourceClaimStrategy().validate_status_update(new, old))


def test_claim_status_allocation_and_network_data():
    device_status = {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0",
                     "conditions": [{"type": "Ready", "status": "True", "reason": "Configured", "lastTransitionTime": NOW}],
                     "networkData": {"interfaceName": "eth1", "ips": ["192.0.2.5/24", "2001:db8::5/64"], "hardwareAddress": "ea:9f:00:00:00:01"}}
    assert status_errors({"allocation": ALLOCATION, "reservedFor": [POD], "devices": [device_status]}) == []
    bad_ip = copy.deepcopy(device_status)
    bad_ip["networkData"]["ips"] = ["192.0.2.5", "2001:DB8::5/64"]
    assert status_errors({"allocation": ALLOCATION, "devices": [bad_ip]}) == [
        ("status.devices[0].networkData.ips[0]", "FieldValueInvalid"), ("status.devices[0].networkData.ips[1]", "FieldValueInvalid")]
    long_names = copy.deepcopy(device_status)
    long_names["networkData"].update(interfaceName="i" * 257, hardwareAddress="h" * 129)
    assert status_errors({"allocation": ALLOCATION, "devices": [long_names]}) == [
        ("status.devices[0].networkData.interfaceName", "FieldValueTooLong"), ("status.devices[0].networkData.hardwareAddress", "FieldValueTooLong")]
    stranger = dict(device_status, device="gpu-9")
    assert status_errors({"allocation": ALLOCATION, "devices": [stranger]}) == [("status.devices[0]", "FieldValueInvalid")]
    assert status_errors({"allocation": ALLOCATION, "devices": [device_status, device_status]}) == [("status.devices[1]", "FieldValueDuplicate")]


def test_claim_status_reservations():
    assert status_errors({"reservedFor": [POD]}) == [("status.reservedFor", "FieldValueForbidden")]
    assert status_errors({"allocation": ALLOCATION, "reservedFor": [POD, POD]}) == [("status.reservedFor[1]", "FieldValueDuplicate")]
    many = [dict(POD, uid=f"uid-{i}") for i in range(257)]
    assert status_errors({"allocation": ALLOCATION, "reservedFor": many}) == [("status.reservedFor", "FieldValueTooMany")]
    assert status_errors({"allocation": ALLOCATION, "reservedFor": [{"resource": "pods"}]}) == [
        ("status.reservedFor[0].name", "FieldValueRequired"), ("status.reservedFor[0].uid", "FieldValueRequired")]
    assert status_errors({"allocation": ALLOCATION, "reservedFor": [POD]}, {"allocation": ALLOCATION}, deleting=True) == [
        ("status.reservedFor", "FieldValueForbidden")]


def test_claim_status_allocation_rules():
    changed = copy.deepcopy(ALLOCATION)
    changed["devices"]["results"][0]["device"] = "gpu-1"
    assert status_errors({"allocation": changed}, {"allocation": ALLOCATION}) == [("status.allocation", "FieldValueInvalid")]
    wrong = {"devices": {"results": [{"request": "nope", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}}
    assert status_errors({"allocation": wrong}) == [("status.allocation.devices.results[0].request", "FieldValueInvalid")]
    cfg = {"devices": {"results": ALLOCATION["devices"]["results"], "config": [{"source": "FromNowhere", "opaque": {"driver": "gpu.example.com", "parameters": {}}}]}}
    assert status_errors({"allocation": cfg}) == [("status.allocation.devices.config[0].source", "FieldValueNotSupported")]


def test_claim_state_column():
    state = ResourceClaimStrategy.columns[1].fn
    assert state(claim()) == "pending"
    assert state(with_status(allocation=ALLOCATION)) == "allocated"
    assert state(with_status(allocation=ALLOCATION, reservedFor=[POD])) == "allocated,reserved"
    gone = with_status(allocation=ALLOCATION)
    gone["metadata"]["deletionTimestamp"] = NOW
    assert state(gone) == "deleted,allocated,deallocating"


def test_claim_template():
    s = ResourceClaimTemplateStrategy()
    beta = {"metadata": {"name": "t", "namespace": "ml"},
            "spec": {"metadata": {"labels": {"app": "train"}}, "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com"}]}}}}
    s.default(beta, "v1beta1")
    stored = s.to_storage(beta, "v1beta1")
    assert stored["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    assert s.validate(stored) == []
    assert s.from_storage(stored, "v1beta1")["spec"]["spec"]["devices"]["requests"] == beta["spec"]["spec"]["devices"]["requests"]
    bad = copy.deepcopy(stored)
    bad["spec"]["metadata"]["labels"] = {"bad key!": "x"}
    assert ("spec.metadata.labels", "FieldValueInvalid") in errors(s.validate(bad))
    assert errors(s.validate_update(bad, stored)) == [("spec", "FieldValueInvalid")]


def test_claim_template_metadata_may_only_carry_labels_and_annotations():
    """ValidateTemplateObjectMeta: the fuzzer's probe stored a template whose claims' metadata named
    them (and any other ObjectMeta field); upstream forbids all but labels and annotations."""
    s = ResourceClaimTemplateStrategy()
    t = {"metadata": {"name": "t", "namespace": "ml"}, "spec": {
        "metadata": {"name": "x", "uid": "u", "generation": 0, "namespace": "", "finalizers": [], "labels": {"a": "b"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}
    s.default(t, "v1")
    assert [str(e) for e in s.validate(t)] == ["spec.metadata.name: Forbidden: cannot be set",
                                               "spec.metadata.uID: Forbidden: cannot be set",
                                               "spec.metadata.finalizers: Forbidden: cannot be set"]


# --- ResourceSlice ---------------------------------------------------------------------------

def rslice(devices=None, **spec):
    base = {"driver": "gpu.example.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1}, "nodeName": "node-1",
            "devices": devices if devices is not None else [{
                "name": "gpu-0",
                "attributes": {"model": {"string": "A100"}, "gpu.example.com/driverVersion": {"version": "1.2.3"}},
                "capacity": {"memory": {"value": "80Gi"}}}]}
    base.update(spec)
    return {"metadata": {"name": "node-1-gpu"}, "spec": {k: v for k, v in base.items() if v is not None}}


def test_slice_valid_and_columns():
    s = ResourceSliceStrategy(now=lambda: NOW)
    obj = rslice()
    assert s.validate(obj) == []
    assert [c.fn(obj) for c in s.columns if c.name != "Age"] == ["node-1-gpu", "node-1", "gpu.example.com", "node-1"]
    assert s.columns[1].fn(rslice(nodeName=None, allNodes=True)) == "<none>"
    assert s.field_selectors["spec.driver"](obj) == "gpu.example.com"


def test_slice_taint_time_added():
    s = ResourceSliceStrategy(now=lambda: NOW)
    obj = rslice([{"name": "gpu-0", "taints": [{"key": "example.com/unhealthy", "effect": "NoSchedule"}]}])
    s.prepare_for_create(obj)
    assert obj["spec"]["devices"][0]["taints"][0]["timeAdded"] == NOW
    new = rslice([{"name": "gpu-0", "taints": [{"key": "example.com/unhealthy", "effect": "NoSchedule"}]}])
    ResourceSliceStrategy(now=lambda: "2030-01-01T00:00:00Z").prepare_for_update(new, obj)
    assert new["spec"]["devices"][0]["taints"][0]["timeAdded"] == NOW
    assert s.validate(new) == []


@pytest.mark.parametrize(
    "obj, field, reason",
    [
        (rslice(nodeName=None), "spec", "FieldValueRequired"),
        (rslice(allNodes=True), "spec", "FieldValueInvalid"),
        (rslice(allNodes=False), "spec.allNodes", "FieldValueInvalid"),
        (rslice(driver="Not_A_Driver"), "spec.driver", "FieldValueInvalid"),
        (rslice(driver="a" * 64 + ".com"), "spec.driver", "FieldValueTooLong"),
        (rslice(pool={"name": "a/B", "generation": 0, "resourceSliceCount": 0}), "spec.pool.name", "FieldValueInvalid"),
        (rslice(pool={"name": "p", "generation": 0, "resourceSliceCount": 0}), "spec.pool.resourceSliceCount", "FieldValueInvalid"),
        (rslice([{"name": f"d{i}"} for i in range(129)]), "spec.devices", "FieldValueTooMany"),
        (rslice([{"name": f"d{i}", "taints": [{"key": "k", "effect": "NoSchedule"}]} for i in range(65)]), "spec.devices", "FieldValueTooMany"),
        (rslice([{"name": "d"}, {"name": "d"}]), "spec.devices[1]", "FieldValueDuplicate"),
        (rslice([{"name": "d", "attributes": {"model": {}}}]), "spec.devices[0].attributes[model]", "FieldValueInvalid"),
        (rslice([{"name": "d", "attributes": {"model": {"string": "a", "int": 1}}}]), "spec.devices[0].attributes[model]", "FieldValueInvalid"),
        (rslice([{"name": "d", "attributes": {"model": {"string": "x" * 65}}}]), "spec.devices[0].attributes[model].string", "FieldValueTooLong"),
        (rslice([{"name": "d", "attributes": {"v": {"version": "1.2"}}}]), "spec.devices[0].attributes[v].version", "FieldValueInvalid"),
        (rslice([{"name": "d", "attributes": {"9lives": {"int": 9}}}]), "spec.devices[0].attributes[9lives]", "FieldValueInvalid"),
        (rslice([{"name": "d", "attributes": {f"a{i}": {"int": i} for i in range(33)}}]), "spec.devices[0]", "FieldValueInvalid"),
        (rslice([{"name": "d", "capacity": {"mem": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}}}]), "spec.devices[0].capacity[mem].requestPolicy", "FieldValueForbidden"),
        (rslice([{"name": "d", "taints": [{"key": "k", "effect": "PreferNoSchedule"}]}]), "spec.devices[0].taints[0].effect", "FieldValueNotSupported"),
        (rslice([{"name": "d", "taints": [{"key": "k"}]}]), "spec.devices[0].taints[0].effect", "FieldValueRequired"),
        (rslice([{"name": "d", "nodeName": "n"}]), "spec.devices[0]", "FieldValueInvalid"),
        (rslice([{"name": "d"}], nodeName=None, perDeviceNodeSelection=True), "spec.devices[0]", "FieldValueRequired"),
        (rslice(sharedCounters=[{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}]), "spec", "FieldValueInvalid"),
        (rslice(None, sharedCounters=[{"name": "mem"}]), "spec.sharedCounters[0].counters", "FieldValueRequired"),
        (rslice([{"name": "d", "bindingConditions": ["Ready"]}]), "spec.devices[0].bindingFailureConditions", "FieldValueInvalid"),
    ],
)
def test_slice_rules(obj, field, reason):
    assert (field, reason) in errors(ResourceSliceStrategy().validate(obj))


_GPU = {"name": "gpu-0", "attributes": {"model": {"string": "A100"}, "index": {"int": 0}, "rdma": {"bool": True},
                                       "gpu.example.com/cuda": {"version": "12.4.0"}},
        "capacity": {"memory": {"value": "80Gi"}},
        "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}]}


_VALID_CHANGES = ({}, {"attributes": {"model": {"string": "a", "int": None}}},
                  {"bindingConditions": ["Ready"], "bindingFailureConditions": ["Failed"]},
                  {"taints": []}, {"nodeName": None, "allNodes": None},
                  {"capacity": {"memory": {"value": "1", "requestPolicy": None}}})


@pytest.mark.parametrize("change", [*_VALID_CHANGES,
    {"name": "GPU_0"},
    {"name": ""},
    {"attributes": {"model": {"string": "A100"}, "Bad-Key": {"int": 1}}},
    {"attributes": {"model": {"string": None}}},
    {"attributes": {"model": {"strings": ["a"], "int": 1}}},
    {"attributes": {"model": {"version": "12.4"}}},
    {"attributes": {"model": {"version": "1." * 40 + "0"}}},
    {"attributes": {"model": {"string": "x" * 65}}},
    {"capacity": {"memory": {"value": "1"}, "9x": {"value": "1"}}},
    {"attributes": {"model": {"other": "x"}}},
    {"capacity": {"memory": {"value": "1", "requestPolicy": {"default": "1"}}}},
    {"capacity": {"9mem": {"value": "1"}}},
    {"consumesCounters": [{"counterSet": "a", "counters": {"m": {"value": "1"}}}] * 2},
    {"consumesCounters": [{"counterSet": "a", "counters": {}}]},
    {"consumesCounters": [{"counterSet": "A", "counters": {"m": {"value": "1"}}}]},
    {"consumesCounters": [{"counterSet": "a", "counters": {"M": {"value": "1"}}}]},
    {"consumesCounters": [{"counterSet": "a", "counters": {f"m{i}": {"value": "1"} for i in range(33)}}]},
    {"consumesCounters": [{"counterSet": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(3)]},
    {"taints": [{"key": "k", "effect": "Sometimes"}]},
    {"bindingConditions": ["Ready"]},
    {"allNodes": True},
])
def test_slice_devices_get_the_full_checks_verdict(change):
    """The common device shape is checked without building errors (and names
    once); whatever that check passes, the full device validation passes too."""
    dev = {**copy.deepcopy(_GPU), **change}
    full = rv.device(copy.deepcopy(dev), "spec.devices[0]", None, False)
    for _ in range(2):  # the second time with the names' verdicts memoised
        assert ResourceSliceStrategy().validate(rslice([copy.deepcopy(dev)])) == full
    assert not full if change in _VALID_CHANGES else full


def test_slice_update_immutability():
    old = rslice()
    new = rslice(driver="other.example.com", nodeName="node-2")
    new["spec"]["pool"]["name"] = "node-2"
    assert {("spec.driver", "FieldValueInvalid"), ("spec.nodeName", "FieldValueInvalid"), ("spec.pool.name", "FieldValueInvalid")} <= set(
        errors(ResourceSliceStrategy().validate_update(new, old)))


def test_slice_v1beta1_basic_wrapper():
    s = ResourceSliceStrategy()
    beta = rslice([{"name": "gpu-0", "basic": {"attributes": {"model": {"string": "A100"}}, "capacity": {"memory": {"value": "80Gi"}}}}])
    stored = s.to_storage(beta, "v1beta1")
    assert stored["spec"]["devices"] == [{"name": "gpu-0", "attributes": {"model": {"string": "A100"}}, "capacity": {"memory": {"value": "80Gi"}}}]
    assert s.from_storage(stored, "v1beta1")["spec"]["devices"] == beta["spec"]["devices"]
    assert s.from_storage(stored, "v1") is stored


# --- DeviceClass -------------------------------------------------------------------------------

def test_device_class():
    s = DeviceClassStrategy()
    obj = {"metadata": {"name": "gpu.example.com"}, "spec": {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
        "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "timeSlicing"}}}],
        "extendedResourceName": "example.com/gpu"}}
    assert s.validate(obj) == []
    bad = copy.deepcopy(obj)
    bad["spec"]["extendedResourceName"] = "gpu"
    bad["spec"]["selectors"] = [{"cel": {"expression": "true"}}] * 33
    assert errors(s.validate(bad)) == [("spec.selectors", "FieldValueTooMany"), ("spec.extendedResourceName", "FieldValueInvalid")]
    big = copy.deepcopy(obj)
    big["spec"]["config"][0]["opaque"]["parameters"] = {"blob": "x" * 11000}
    assert errors(s.validate(big)) == [("spec.config[0].opaque.parameters", "FieldValueTooLong")]
    assert s.validate_update(big, big) == []
    assert [c.name for c in s.columns] == ["Name", "Age"]


# --- DeviceTaintRule -------------------------------------------------------------------------------

def rule(effect="NoExecute", **taint):
    return {"metadata": {"name": "maintenance"}, "spec": {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": "example.com/maintenance", "value": "planned", "effect": effect, **taint}}}


def test_taint_rule_valid_defaults_and_columns():
    s = DeviceTaintRuleStrategy(now=lambda: NOW)
    obj = rule("None")
    s.prepare_for_create(obj)
    assert obj["spec"]["taint"]["timeAdded"] == NOW
    assert s.validate(obj) == []
    assert [c.fn(obj) for c in s.columns[1:3]] == ["None", "example.com/maintenance"]


def test_taint_rule_time_added_restamped_on_effect_change():
    old = rule("NoSchedule", timeAdded="2026-01-01T00:00:00Z")
    new = rule("NoExecute", timeAdded="2026-01-01T00:00:00Z")
    DeviceTaintRuleStrategy(now=lambda: NOW).prepare_for_update(new, old)
    assert new["spec"]["taint"]["timeAdded"] == NOW
    same = rule("NoSchedule")
    DeviceTaintRuleStrategy(now=lambda: NOW).prepare_for_update(same, old)
    assert same["spec"]["taint"]["timeAdded"] == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "obj, field, reason",
    [
        (rule("PreferNoSchedule"), "spec.taint.effect", "FieldValueNotSupported"),
        (rule(""), "spec.taint.effect", "FieldValueRequired"),
        (rule(key=""), "spec.taint.key", "FieldValueRequired"),
        (rule(value="not valid!"), "spec.taint.value", "FieldValueInvalid"),
    ],
)
def test_taint_rule_rules(obj, field, reason):
    assert (field, reason) in errors(DeviceTaintRuleStrategy().validate(obj))


def test_taint_rule_selector_and_status():
    s = DeviceTaintRuleStrategy()
    obj = rule()
    obj["spec"]["deviceSelector"] = {"driver": "Bad_Driver", "device": "GPU"}
    assert errors(s.validate(obj)) == [("spec.deviceSelector.driver", "FieldValueInvalid"), ("spec.deviceSelector.device", "FieldValueInvalid")]
    cond = {"type": "EvictionInProgress", "status": "False", "reason": "Completed", "lastTransitionTime": NOW}
    ok = rule()
    ok["status"] = {"conditions": [cond]}
    assert s.validate_status_update(ok, rule()) == []
    ok["status"]["conditions"] = [dict(cond, type=f"T{i}") for i in range(9)]
    assert errors(s.validate_status_update(ok, rule())) == [("status.conditions", "FieldValueTooMany")]


# --- field selectors, over HTTP ---------------------------------------------------


async def test_slice_field_selector_refusal_names_the_requested_version(tmp_path):
    """Each resource.k8s.io version registers its own ResourceSlice conversion func, whose error
    names that version's GroupVersionKind; the labels it knows still select."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        apis = {"v1": client.ResourceV1Api, "v1beta2": client.ResourceV1beta2Api, "v1beta1": client.ResourceV1beta1Api}
        for version, api in apis.items():
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(api(api_client).list_resource_slice, field_selector="spec.pool.name=p")
            assert (e.value.status, json.loads(e.value.body)["message"]) == (
                400, f"field label not supported for resource.k8s.io/{version}, Kind=ResourceSlice: spec.pool.name")
        slices = await asyncio.to_thread(client.ResourceV1Api(api_client).list_resource_slice,
                                         field_selector="spec.driver=gpu.example.com,spec.nodeName=n1")
        assert slices.items == []


async def test_over_http_a_deleted_claim_is_the_answer(tmp_path):
    """A ResourceClaim's DELETE answers with the claim, as upstream's store returns the deleted
    object: the kubernetes client reads it as a V1ResourceClaim, which a Status is not."""
    import asyncio

    from kubernetes import client

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        api = client.ResourceV1Api(api_client)
        await asyncio.to_thread(api.create_namespaced_resource_claim, "default", {
            "metadata": {"name": "c"}, "spec": claim()["spec"]})
        deleted = await asyncio.to_thread(api.delete_namespaced_resource_claim, "c", "default")
        assert deleted.kind == "ResourceClaim" and deleted.metadata.name == "c"
        assert deleted.spec.devices.requests[0].exactly.device_class_name == "gpu.example.com"


async def test_over_http_each_kind_deletes_as_its_upstream_storage_answers(tmp_path):
    """DeviceClass, ResourceSlice and ResourceClaimTemplate storage return the deleted object, which
    the kubernetes client reads as its kind; DeviceTaintRule's does at v1beta2 and v1alpha3, while
    its v1 storage answers with a Status."""
    import asyncio

    from kubernetes import client

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        v1 = client.ResourceV1Api(api_client)
        call = asyncio.to_thread
        await call(v1.create_device_class, {"metadata": {"name": "gpu.example.com"}, "spec": {}})
        deleted = await call(v1.delete_device_class, "gpu.example.com")
        assert isinstance(deleted, client.V1DeviceClass) and deleted.metadata.name == "gpu.example.com"
        await call(v1.create_resource_slice, {"metadata": {"name": "s"}, "spec": {
            "driver": "gpu.example.com", "nodeName": "node-1", "pool": {"name": "p", "generation": 1,
                                                                        "resourceSliceCount": 1}}})
        deleted = await call(v1.delete_resource_slice, "s")
        assert isinstance(deleted, client.V1ResourceSlice) and deleted.spec.pool.name == "p"
        await call(v1.create_namespaced_resource_claim_template, "default", {
            "metadata": {"name": "t"}, "spec": {"spec": claim()["spec"]}})
        deleted = await call(v1.delete_namespaced_resource_claim_template, "t", "default")
        assert isinstance(deleted, client.V1ResourceClaimTemplate)
        assert deleted.spec.spec.devices.requests[0].exactly.device_class_name == "gpu.example.com"
        await call(v1.create_device_taint_rule, rule())
        status = await call(v1.delete_device_taint_rule, "maintenance")
        assert status["kind"] == "Status" and status["details"]["name"] == "maintenance"
        beta = client.ResourceV1beta2Api(api_client)
        await call(beta.create_device_taint_rule, rule())
        deleted = await call(beta.delete_device_taint_rule, "maintenance")
        assert isinstance(deleted, client.V1beta2DeviceTaintRule) and deleted.spec.taint.key == "example.com/maintenance"


async def test_over_http_slice_node_selector_terms_print_as_internal_core_terms(tmp_path):
    """validateNodeSelector hands field.Invalid the []core.NodeSelectorTerm: Go field names, unset lists null."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    body = {"metadata": {"name": "s"}, "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                                                 "nodeSelector": {"nodeSelectorTerms": [term, {"matchFields": [
                                                     {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    async with served(tmp_path) as (_, api_client):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(client.ResourceV1Api(api_client).create_resource_slice, body)
    assert e.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [(
        "spec.nodeSelector.nodeSelectorTerms",
        'Invalid value: [{"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["a"]}],"MatchFields":null},'
        '{"MatchExpressions":null,"MatchFields":[{"Key":"metadata.name","Operator":"In","Values":["n1"]}]}]: '
        "must have exactly one node selector term")]


async def test_over_http_a_slice_node_selector_is_also_cores_node_selector(tmp_path):
    """validateResourceSliceSpec runs core's ValidateNodeSelector before its own one-term rule."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    body = {"metadata": {"name": "s"}, "spec": {"driver": "gpu.example.com",
                                                 "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                                                 "nodeSelector": {"nodeSelectorTerms": []}}}
    async with served(tmp_path) as (_, api_client):
        slices = client.ResourceV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(slices.create_resource_slice, body)
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.nodeSelector.nodeSelectorTerms", "Required value: must have at least one node selector term"),
            ("spec.nodeSelector.nodeSelectorTerms", "Invalid value: []: must have exactly one node selector term")]
        body["spec"]["nodeSelector"]["nodeSelectorTerms"] = [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(slices.create_resource_slice, body)
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
             'Invalid value: "Near": not a valid selector operator')]


async def test_over_http_v1beta1_requests_are_exact_only_with_a_field_set(tmp_path):
    """Convert_v1beta1_DeviceRequest_To_v1: a request is exact when hasAnyMainRequestFieldsSet, so the
    `deviceClassName: ""` a Go client sends with firstAvailable (the field has no omitempty) is no
    exact request; served back at v1beta1 such a request carries `deviceClassName: ""`."""
    import asyncio
    import json

    from kubernetes import client

    from tests.served import served

    sub = {"name": "fast", "deviceClassName": "nic.example.com"}
    body = {"metadata": {"name": "c"}, "spec": {"devices": {"requests": [
        {"name": "nic", "deviceClassName": "", "firstAvailable": [sub]},
        {"name": "gpu", "deviceClassName": "gpu.example.com"}]}}}
    async with served(tmp_path) as (_, api_client):
        beta, v1 = client.ResourceV1beta1Api(api_client), client.ResourceV1Api(api_client)
        created = json.loads((await asyncio.to_thread(beta.create_namespaced_resource_claim, "default", body,
                                                      _preload_content=False)).data)
        nic, gpu = created["spec"]["devices"]["requests"]
        assert nic["deviceClassName"] == "" and nic["firstAvailable"][0]["deviceClassName"] == "nic.example.com"
        assert not {"allocationMode", "count"} & set(nic)
        assert (gpu["deviceClassName"], gpu["allocationMode"], gpu["count"]) == ("gpu.example.com", "ExactCount", 1)
        stored = json.loads((await asyncio.to_thread(v1.read_namespaced_resource_claim, "c", "default",
                                                     _preload_content=False)).data)
        nic, gpu = stored["spec"]["devices"]["requests"]
        assert "exactly" not in nic and gpu["exactly"]["deviceClassName"] == "gpu.example.com"


async def test_over_http_a_v1beta1_request_without_a_class_is_neither_kind(tmp_path):
    """v1beta1's SetDefaults_DeviceRequest defaults allocationMode and count only with a deviceClassName:
    a request with neither a class nor firstAvailable has no main field set, so it converts to a v1
    request that is neither exact nor firstAvailable."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    body = {"metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "gpu"}]}}}
    async with served(tmp_path) as (_, api_client):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(client.ResourceV1beta1Api(api_client).create_namespaced_resource_claim,
                                    "default", body)
        assert e.value.status == 422
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.devices.requests[0]", "Required value: exactly one of `exactly` or `firstAvailable` is required")]


async def test_over_http_a_selector_past_the_cost_limit_is_refused(tmp_path):
    """validateCELSelector refuses an expression whose worst case on any device (32 attributes a domain, strings
    of 64 characters: the sizes upstream declares on kubernetes.DRADevice) exceeds CELSelectorExpressionMaxCost,
    in a class or a claim (fuzz50: four comprehensions over the attributes, ~3.4 M, were stored); three pass."""
    from tests.served import send, served

    nested = "device.attributes.all(d, device.attributes[d].all(a, device.attributes[d].all(b, {})))"
    three, four = nested.format("true"), nested.format("device.attributes[d].all(c, true)")
    async with served(tmp_path) as (_, api):
        def dc(name: str, expression: str) -> dict:
            return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": expression}}]}}
        code, got = await send(api, "POST", "/apis/resource.k8s.io/v1/deviceclasses", dc("four", four))
        assert (code, got["details"]["causes"]) == (422, [{"reason": "FieldValueForbidden", "message": "Forbidden: too complex, "
                                                            "exceeds cost limit", "field": "spec.selectors[0].cel.expression"}])
        code, got = await send(api, "POST", "/apis/resource.k8s.io/v1/deviceclasses", dc("three", three))
        assert code == 201, got
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "three", "selectors": [{"cel": {"expression": four}}]}}]}}}
        code, got = await send(api, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim)
        assert (code, [c["field"] for c in got["details"]["causes"]]) == (
            422, ["spec.devices.requests[0].exactly.selectors[0].cel.expression"])
