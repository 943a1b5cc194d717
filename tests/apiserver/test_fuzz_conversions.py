"""Bodies of an older API version whose conversion to the stored one fails, found by a sweep of wrong
values at every path of each kind's non-preferred versions: upstream's conversion error makes the body
one that cannot be handled as its kind (a 400; a json or merge patch's result, the patchers' 422), never
a 500, and nothing is written."""

from __future__ import annotations


import pytest

from tests.served import send as _send
from tests.served import served

HPAS = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
METRICS = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT = "autoscaling.alpha.kubernetes.io/current-metrics"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
APPLY = "application/apply-patch+yaml"


def hpa(name: str, annotations: dict | None = None) -> dict:
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        v2 = {**hpa("web"), "apiVersion": "autoscaling/v2"}  # (an apply at v1 then views its fields at v2 too)
        v2["spec"] = {k: v for k, v in v2["spec"].items() if k != "targetCPUUtilizationPercentage"}
        assert (await _send(api_client, "POST", HPAS.replace("/v1/", "/v2/"), v2))[0] == 201
        yield api_client


def _handled(err: str) -> str:
    return f'HorizontalPodAutoscaler in version "v1" cannot be handled as a HorizontalPodAutoscaler: {err}'


@pytest.mark.parametrize("key,value,err", [
    (CONDITIONS, "", "unexpected end of JSON input"),
    (CONDITIONS, "x", "invalid character 'x' looking for beginning of value"),
    (CONDITIONS, "1Gi", "invalid character 'G' after top-level value"),
    (CONDITIONS, "{}", "json: cannot unmarshal object into Go value of type []v1.HorizontalPodAutoscalerCondition"),
    (CONDITIONS, '[{"type": 1}]', "json: cannot unmarshal number into Go struct field "
                                  "HorizontalPodAutoscalerCondition.type of type v1.HorizontalPodAutoscalerConditionType"),
    (METRICS, "[1]", "json: cannot unmarshal number into Go value of type v1.MetricSpec"),
    (METRICS, '[{"type": "Object", "object": {"metricName": []}}]',
     "json: cannot unmarshal array into Go struct field ObjectMetricSource.object.metricName of type string"),
    (METRICS, '[{"type": "Resource", "resource": {"name": "cpu", "targetAverageUtilization": 3000000000}}]',
     "json: cannot unmarshal number 3000000000 into Go struct field ResourceMetricSource.resource.targetAverageUtilization "
     "of type int32"),
    (CURRENT, '[{"type": "Pods", "pods": "x"}]',
     "json: cannot unmarshal string into Go struct field MetricStatus.pods of type v1.PodsMetricStatus"),
    (BEHAVIOR, '{"ScaleUp": {"Policies": {}}}', "json: cannot unmarshal object into Go struct field "
                                               "HPAScalingRules.ScaleUp.Policies of type []autoscaling.HPAScalingPolicy"),
])
async def test_a_round_trip_annotation_that_does_not_decode(api, key, value, err):
    """autoscaling/v1 carries what it cannot express in annotations, which its conversion decodes
    (json.Unmarshal into the Go type; its error fails the conversion): it was a 500 (Python's
    JSONDecodeError, or a field of the wrong type met by the converter)."""
    code, status = await _send(api, "POST", HPAS, hpa("new", {key: value}))
    assert (code, status["reason"], status["message"]) == (400, "BadRequest", _handled(err))
    code, status = await _send(api, "PUT", f"{HPAS}/web", hpa("web", {key: value}))
    assert (code, status["message"]) == (400, _handled(err))
    code, status = await _send(api, "PATCH", f"{HPAS}/web", {"metadata": {"annotations": {key: value}}},
                               "application/merge-patch+json")
    assert (code, status["reason"]) == (422, "Invalid") and status["details"]["causes"][0]["field"] == "patch"
    assert status["details"]["causes"][0]["message"].endswith(f": {err}")
    code, status = await _send(api, "PATCH", f"{HPAS}/web?fieldManager=a&force=true", hpa("web", {key: value}), APPLY)
    assert (code, status["message"]) == (400, _handled(err))
    assert (await _send(api, "GET", f"{HPAS}/new", None))[0] == 404
    code, stored = await _send(api, "GET", f"{HPAS}/web", None)
    assert code == 200 and key not in (stored["metadata"].get("annotations") or {})


async def test_round_trip_annotations_that_decode_are_taken(api):
    """Unknown fields of the annotations' values are skipped, nulls decode as nothing, and a time or a
    quantity is checked as its type is."""
    ok = {CONDITIONS: '[null, {"type": "AbleToScale", "status": "True", "bogus": [1], '
                      '"lastTransitionTime": "2026-01-01T00:00:00Z"}]',
          METRICS: '[{"type": "Pods", "pods": {"metricName": "q", "targetAverageValue": "1k", "selector": null}}]'}
    code, got = await _send(api, "POST", HPAS, hpa("fine", ok))
    assert code == 201, got
    code, status = await _send(api, "POST", HPAS, hpa("bad", {CONDITIONS: '[{"lastTransitionTime": "x"}]'}))
    assert code == 400 and status["message"].startswith(_handled('parsing time "x"'))


async def test_an_apply_of_a_null_round_trip_annotation(api):
    """A server-side apply converts what it merged before the result is decoded: an annotation the
    configuration sets to null was a 500 (json.loads of None) there."""
    code, got = await _send(api, "PATCH", f"{HPAS}/web?fieldManager=a&force=true", hpa("web", {CONDITIONS: None}), APPLY)
    assert code == 200, got


async def test_a_null_metric_is_the_zero_metric(api):
    """A null item of the metrics annotation decodes as Go's zero MetricSpec: its type is "" (required)."""
    code, status = await _send(api, "PUT", f"{HPAS}/web", hpa("web", {METRICS: "[null]"}))
    assert code == 422 and [(c["field"], c["message"]) for c in status["details"]["causes"]][:1] == [
        ("spec.metrics[0].type", "Required value: must specify a metric source type")]


@pytest.mark.parametrize("path,kind,spec,nulled", [
    ("resourceclaims", "ResourceClaim",
     {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
     {"devices": {"requests": [None]}}),
    ("resourceclaimtemplates", "ResourceClaimTemplate",
     {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}},
     {"spec": {"devices": {"requests": [None]}}}),
    ("resourceslices", "ResourceSlice",
     {"driver": "d.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n",
      "devices": [{"name": "g"}]},
     {"driver": "d.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n",
      "devices": [None]}),
])
async def test_an_apply_of_null_items_at_another_dra_version(api, path, kind, spec, nulled):
    """resource.k8s.io/v1beta1 moves a request's fields under `exactly` and a device's out of `basic`:
    an apply there of a null request or device, converted with what it merged before the result is
    decoded (a null item: Go's zero value), was a 500 ('NoneType' object has no attribute 'items')."""
    namespaced = path != "resourceslices"
    base = "/apis/resource.k8s.io/{}" + ("/namespaces/default/" if namespaced else "/") + path
    code, got = await _send(api, "POST", base.format("v1"),
                            {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "x"}, "spec": spec})
    assert code == 201, got
    code, got = await _send(api, "PATCH", base.format("v1beta1") + "/x?fieldManager=a&force=true&dryRun=All",
                            {"apiVersion": "resource.k8s.io/v1beta1", "kind": kind, "metadata": {"name": "x"}, "spec": nulled},
                            APPLY)
    assert code == 422 and got["reason"] == "Invalid", got
