import copy
import json

from nanokube.registry import autoscaling as a
from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.group == "autoscaling")
S = RES.strategy


def hpa(**spec):
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 5, **spec}}


def external(name="queue", **target):
    return {"type": "External", "external": {"metric": {"name": name}, "target": target or {"type": "Value", "value": "10"}}}


def fields(errs):
    return [(e.reason, e.field) for e in errs]


def test_registration():
    assert (RES.versions, RES.storage_version, RES.short_names, RES.categories, RES.subresources) == (
        ["v2", "v1"], "v2", ("hpa",), ("all",), ("status",))


def test_v2_defaults():
    obj = hpa(behavior={"scaleDown": {"stabilizationWindowSeconds": 60}})
    S.default(obj, "v2")
    spec = obj["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    assert spec["behavior"]["scaleUp"]["policies"] == [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                                       {"type": "Percent", "value": 100, "periodSeconds": 15}]
    assert spec["behavior"]["scaleDown"] == {"selectPolicy": "Max", "stabilizationWindowSeconds": 60,
                                             "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def test_valid():
    obj = hpa()
    S.default(obj, "v2")
    assert RES.validate_create(obj) == []


def test_scale_to_zero_needs_object_or_external_metric():
    obj = hpa(minReplicas=0, metrics=[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    errs = S.validate(obj)
    assert [e.message for e in errs if e.field == "spec.metrics"] == [
        "Forbidden: must specify at least one Object or External metric to support scaling to zero replicas"]
    obj["spec"]["metrics"].append(external())
    assert S.validate(obj) == []


def test_replica_bounds():
    errs = S.validate(hpa(minReplicas=-1, maxReplicas=0))
    assert ("spec.minReplicas", "must be greater than or equal to 0") in [(e.field, e.detail) for e in errs]
    assert ("spec.maxReplicas", "must be greater than 0") in [(e.field, e.detail) for e in errs]
    errs = S.validate(hpa(minReplicas=6))
    assert [(e.field, e.detail) for e in errs] == [("spec.maxReplicas", "must be greater than or equal to `minReplicas`")]


def test_scale_target_ref_required():
    obj = hpa(minReplicas=1)
    obj["spec"]["scaleTargetRef"] = {"name": "a/b"}
    assert fields(S.validate(obj)) == [("FieldValueRequired", "spec.scaleTargetRef.kind"),
                                       ("FieldValueInvalid", "spec.scaleTargetRef.name")]


def test_metric_one_of():
    m = {"type": "Pods", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 5}}}
    errs = S.validate(hpa(metrics=[m]))
    assert ("FieldValueRequired", "spec.metrics[0].pods") in fields(errs)
    m["pods"] = {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "1"}}
    assert ("FieldValueForbidden", "spec.metrics[0].resource") in fields(S.validate(hpa(metrics=[m])))
    errs = S.validate(hpa(metrics=[{"type": "Bogus"}]))
    assert ("FieldValueNotSupported", "spec.metrics[0].type") in fields(errs)


def test_external_target_rules():
    both = external(type="Value", value="1", averageValue="2")
    errs = S.validate(hpa(metrics=[both]))
    assert [(e.field, e.detail) for e in errs] == [
        ("spec.metrics[0].external.target.value", "may not set both a target value for metric and a per-pod target")]
    neither = external(type="Value")
    errs = S.validate(hpa(metrics=[neither]))
    assert [(e.field, e.detail) for e in errs] == [
        ("spec.metrics[0].external.target.averageValue", "must set either a target value for metric or a per-pod target")]
    bad = external(type="Average", value="-1")
    assert {e.field for e in S.validate(hpa(metrics=[bad]))} == {"spec.metrics[0].external.target.type",
                                                                 "spec.metrics[0].external.target.value"}


def test_behavior_rules():
    obj = hpa(behavior={"scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Most", "tolerance": "-0.1",
                                    "policies": [{"type": "Pods", "value": 0, "periodSeconds": 2000}]},
                        "scaleDown": {"policies": []}})
    errs = {(e.field, e.detail) for e in S.validate(obj)}
    up = "spec.behavior.scaleUp"
    assert (f"{up}.stabilizationWindowSeconds", "must be less than or equal to 3600") in errs
    assert (f"{up}.tolerance", "must be greater than or equal to zero") in errs
    assert (f"{up}.policies[0].value", "must be greater than zero") in errs
    assert (f"{up}.policies[0].periodSeconds", "must be less than or equal to 1800") in errs
    assert ("spec.behavior.scaleDown.policies", "must specify at least one Policy") in errs
    assert any(f == f"{up}.selectPolicy" for f, _ in errs)


def test_v1_create_converts_to_v2():
    obj = hpa(targetCPUUtilizationPercentage=50)
    S.default(obj, "v1")
    stored = S.to_storage(obj, "v1")
    assert stored["spec"]["minReplicas"] == 1
    assert stored["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
    plain = S.to_storage(hpa(), "v1")
    assert plain["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def test_v2_to_v1_round_trip_through_annotations():
    stored = hpa(minReplicas=0, metrics=[
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
        external(type="AverageValue", averageValue="30"),
    ], behavior={"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}})
    stored["status"] = {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "100m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}]}
    before = copy.deepcopy(stored)
    v1 = S.from_storage(stored, "v1")
    assert stored == before
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 60
    assert v1["status"]["currentCPUUtilizationPercentage"] == 40
    ann = v1["metadata"]["annotations"]
    assert json.loads(ann[a.METRICS_ANNOTATION]) == [
        {"type": "External", "external": {"metricName": "queue", "targetAverageValue": "30"}}]
    assert json.loads(ann[a.BEHAVIOR_ANNOTATION])["ScaleUp"]["SelectPolicy"] == "Max"
    back = S.to_storage(v1, "v1")
    assert "annotations" not in back["metadata"]
    assert back["spec"]["metrics"] == [external(type="AverageValue", averageValue="30"), stored["spec"]["metrics"][0]]
    assert back["spec"]["behavior"] == stored["spec"]["behavior"]
    assert back["status"]["conditions"] == stored["status"]["conditions"]
    assert back["status"]["currentMetrics"] == stored["status"]["currentMetrics"]


def test_v2_reads_drop_round_trip_annotations():
    obj = hpa()
    obj["metadata"]["annotations"] = {a.METRICS_ANNOTATION: "[]", "keep": "me"}
    assert S.from_storage(obj, "v2")["metadata"]["annotations"] == {"keep": "me"}
    assert obj["metadata"]["annotations"][a.METRICS_ANNOTATION] == "[]"


def test_columns():
    obj = hpa(minReplicas=1, metrics=[
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
        external()])
    obj["status"] = {"currentReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50}}}]}
    cells = {c.name: c.fn(obj) for c in S.columns if c.name != "Age"}
    assert cells == {"Name": "web", "Reference": "Deployment/web", "MinPods": "1", "MaxPods": 5, "Replicas": 3,
                     "Targets": "cpu: 50%/80%, memory: <unknown>/1Gi + 1 more..."}
    obj["status"] = {}
    assert a.format_hpa_metrics(obj).startswith("cpu: <unknown>/80%")


def test_status_update():
    obj = hpa()
    obj["status"] = {"currentReplicas": -1, "desiredReplicas": 0}
    assert fields(S.validate_status_update(obj, obj)) == [("FieldValueInvalid", "status.currentReplicas")]
