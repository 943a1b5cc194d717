"""autoscaling: HorizontalPodAutoscalers, stored at v2 and served at v2 and v1.

autoscaling/v1 only knows a CPU utilization target, so the v2 parts it cannot
express (other metrics, current metrics, conditions, behavior) travel in
`autoscaling.alpha.kubernetes.io/*` annotations, as upstream does, and come
back intact when a v1 object is written.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .apps import age_column, api_doc, name_column
from .base import Column, Obj, Resource, Strategy, register
from ..machinery import gojson
from ..machinery.featuregates import enabled
from ..machinery.quantity import QuantityError, parse_quantity
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    forbidden,
    invalid,
    not_supported,
    path_segment_name,
    required,
)

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
_ROUND_TRIP = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION)

DEFAULT_CPU_UTILIZATION = 80
_MAX_PERIOD_SECONDS = 1800
_MAX_STABILIZATION_WINDOW = 3600
_METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
_SOURCE_FIELD = {"Object": "object", "Pods": "pods", "Resource": "resource", "External": "external",
                 "ContainerResource": "containerResource"}


# --- defaults ---------------------------------------------------------------------


def _scale_up_rules() -> dict:
    return {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ]}


def _scale_down_rules() -> dict:
    return {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _fill_rules(given: dict | None, defaults: dict) -> dict:
    """copyHPAScalingRules: the defaults, overridden by every non-nil field given."""
    for f, v in (given or {}).items():
        if v is not None:
            defaults[f] = v
    return defaults


def default_v2(obj: Obj) -> None:
    """SetDefaults_HorizontalPodAutoscaler (autoscaling/v2)."""
    spec = obj.setdefault("spec", {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    behavior = spec.get("behavior")
    if behavior is not None:
        behavior["scaleUp"] = _fill_rules(behavior.get("scaleUp"), _scale_up_rules())
        behavior["scaleDown"] = _fill_rules(behavior.get("scaleDown"), _scale_down_rules())


def _cpu_metric(utilization: int) -> dict:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}}


# --- v1 <-> v2 conversion ---------------------------------------------------------


def _drop(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys and v is not None}


def _is_cpu_utilization(m: dict) -> bool:
    r = m.get("resource") or {}
    return m.get("type") == "Resource" and r.get("name") == "cpu" and (r.get("target") or {}).get("averageUtilization") is not None


def _metric_spec_to_v1(m: dict) -> dict:
    """A v2 MetricSpec in autoscaling/v1's annotation shape (the v2beta1 field names)."""
    out: dict[str, Any] = {"type": m.get("type")}
    if (o := m.get("object")) is not None:
        t = o.get("target") or {}
        out["object"] = _drop({"target": o.get("describedObject"), "metricName": (o.get("metric") or {}).get("name"),
                               "targetValue": t.get("value", "0"), "selector": (o.get("metric") or {}).get("selector"),
                               "averageValue": t.get("averageValue")})
    if (p := m.get("pods")) is not None:
        out["pods"] = _drop({"metricName": (p.get("metric") or {}).get("name"),
                             "targetAverageValue": (p.get("target") or {}).get("averageValue", "0"),
                             "selector": (p.get("metric") or {}).get("selector")})
    for key in ("resource", "containerResource"):
        if (r := m.get(key)) is not None:
            t = r.get("target") or {}
            out[key] = _drop({"name": r.get("name"), "targetAverageUtilization": t.get("averageUtilization"),
                              "targetAverageValue": t.get("averageValue"), "container": r.get("container")})
    if (e := m.get("external")) is not None:
        t = e.get("target") or {}
        out["external"] = _drop({"metricName": (e.get("metric") or {}).get("name"),
                                 "metricSelector": (e.get("metric") or {}).get("selector"),
                                 "targetValue": t.get("value"), "targetAverageValue": t.get("averageValue")})
    return out


def _metric_spec_from_v1(m: dict) -> dict:
    out: dict[str, Any] = {"type": m.get("type", "")}
    if (o := m.get("object")) is not None:
        out["object"] = _drop({
            "describedObject": o.get("target") or {},
            "metric": _drop({"name": o.get("metricName", ""), "selector": o.get("selector")}),
            "target": _drop({"type": "Value" if o.get("averageValue") is None else "AverageValue",
                             "value": o.get("targetValue", "0"), "averageValue": o.get("averageValue")})})
    if (p := m.get("pods")) is not None:
        out["pods"] = {"metric": _drop({"name": p.get("metricName", ""), "selector": p.get("selector")}),
                       "target": {"type": "AverageValue", "averageValue": p.get("targetAverageValue", "0")}}
    for key in ("resource", "containerResource"):
        if (r := m.get(key)) is not None:
            util = r.get("targetAverageUtilization")
            out[key] = _drop({"name": r.get("name", ""), "container": r.get("container"), "target": _drop({
                "type": "AverageValue" if util is None else "Utilization",
                "averageUtilization": util, "averageValue": r.get("targetAverageValue")})})
    if (e := m.get("external")) is not None:
        value = e.get("targetValue")
        out["external"] = {"metric": _drop({"name": e.get("metricName", ""), "selector": e.get("metricSelector")}),
                           "target": _drop({"type": "AverageValue" if value is None else "Value", "value": value,
                                            "averageValue": e.get("targetAverageValue")})}
    return out


def _metric_status_to_v1(m: dict) -> dict:
    out: dict[str, Any] = {"type": m.get("type")}
    if (o := m.get("object")) is not None:
        c = o.get("current") or {}
        out["object"] = _drop({"target": o.get("describedObject"), "metricName": (o.get("metric") or {}).get("name"),
                               "currentValue": c.get("value", "0"), "selector": (o.get("metric") or {}).get("selector"),
                               "averageValue": c.get("averageValue")})
    if (p := m.get("pods")) is not None:
        out["pods"] = _drop({"metricName": (p.get("metric") or {}).get("name"),
                             "currentAverageValue": (p.get("current") or {}).get("averageValue", "0"),
                             "selector": (p.get("metric") or {}).get("selector")})
    for key in ("resource", "containerResource"):
        if (r := m.get(key)) is not None:
            c = r.get("current") or {}
            out[key] = _drop({"name": r.get("name"), "currentAverageUtilization": c.get("averageUtilization"),
                              "currentAverageValue": c.get("averageValue", "0"), "container": r.get("container")})
    if (e := m.get("external")) is not None:
        c = e.get("current") or {}
        out["external"] = _drop({"metricName": (e.get("metric") or {}).get("name"),
                                 "metricSelector": (e.get("metric") or {}).get("selector"),
                                 "currentValue": c.get("value", "0"), "currentAverageValue": c.get("averageValue")})
    return out


def _metric_status_from_v1(m: dict) -> dict:
    out: dict[str, Any] = {"type": m.get("type", "")}
    if (o := m.get("object")) is not None:
        out["object"] = _drop({
            "describedObject": o.get("target") or {},
            "metric": _drop({"name": o.get("metricName", ""), "selector": o.get("selector")}),
            "current": _drop({"value": o.get("currentValue", "0"), "averageValue": o.get("averageValue")})})
    if (p := m.get("pods")) is not None:
        out["pods"] = {"metric": _drop({"name": p.get("metricName", ""), "selector": p.get("selector")}),
                       "current": {"averageValue": p.get("currentAverageValue", "0")}}
    for key in ("resource", "containerResource"):
        if (r := m.get(key)) is not None:
            out[key] = _drop({"name": r.get("name", ""), "container": r.get("container"), "current": _drop({
                "averageValue": r.get("currentAverageValue", "0"),
                "averageUtilization": r.get("currentAverageUtilization")})})
    if (e := m.get("external")) is not None:
        out["external"] = {"metric": _drop({"name": e.get("metricName", ""), "selector": e.get("metricSelector")}),
                           "current": _drop({"value": e.get("currentValue", "0"),
                                             "averageValue": e.get("currentAverageValue")})}
    return out


def _dump(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"))


def v2_to_v1(obj: Obj) -> Obj:
    """Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    meta = dict(obj.get("metadata") or {})
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _ROUND_TRIP}
    metrics = spec.get("metrics") or []
    other = [_metric_spec_to_v1(m) for m in metrics if not _is_cpu_utilization(m)]
    if other:
        ann[METRICS_ANNOTATION] = _dump(other)
    if status.get("currentMetrics"):
        ann[CURRENT_METRICS_ANNOTATION] = _dump([_metric_status_to_v1(m) for m in status["currentMetrics"]])
    if spec.get("behavior") is not None:
        ann[BEHAVIOR_ANNOTATION] = _dump(_behavior_go_json(spec["behavior"]))
    if status.get("conditions"):
        ann[CONDITIONS_ANNOTATION] = _dump(status["conditions"])
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    v1_spec = _drop({"scaleTargetRef": spec.get("scaleTargetRef"), "minReplicas": spec.get("minReplicas"),
                     "maxReplicas": spec.get("maxReplicas")})
    cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
    if cpu is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
    v1_status = _drop({k: status.get(k) for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")})
    v1_status.setdefault("currentReplicas", 0)
    v1_status.setdefault("desiredReplicas", 0)
    for m in status.get("currentMetrics") or []:
        r = m.get("resource") or {}
        if m.get("type") == "Resource" and r.get("name") == "cpu" and (r.get("current") or {}).get("averageUtilization") is not None:
            v1_status["currentCPUUtilizationPercentage"] = r["current"]["averageUtilization"]
    out = {k: v for k, v in obj.items() if k not in ("metadata", "spec", "status")}
    return {**out, "metadata": meta, "spec": v1_spec, "status": v1_status}


def v1_to_v2(obj: Obj) -> Obj:
    """Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    meta = dict(obj.get("metadata") or {})
    given = meta.get("annotations") or {}
    ann = {k: v for k, v in given.items() if k not in _ROUND_TRIP}
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    metrics: list[dict] = []
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(spec["targetCPUUtilizationPercentage"]))
    if (other := _annotation(given, METRICS_ANNOTATION)) is not None:  # (a null item: Go's zero value)
        metrics = [_metric_spec_from_v1(m or {}) for m in other] + metrics
    if not metrics:
        metrics = [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    v2_spec = _drop({"scaleTargetRef": spec.get("scaleTargetRef"), "minReplicas": spec.get("minReplicas"),
                     "maxReplicas": spec.get("maxReplicas"), "metrics": metrics})
    if (behavior := _annotation(given, BEHAVIOR_ANNOTATION)) is not None:
        v2_spec["behavior"] = _lower_keys(behavior)
    v2_status = _drop({k: status.get(k) for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")})
    current: list[dict] = []
    if status.get("currentCPUUtilizationPercentage") is not None:
        current.append({"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]}}})
    if (statuses := _annotation(given, CURRENT_METRICS_ANNOTATION)) is not None:  # every one, the CPU one included
        current = [_metric_status_from_v1(m or {}) for m in statuses]
    if current:
        v2_status["currentMetrics"] = current
    if (conditions := _annotation(given, CONDITIONS_ANNOTATION)) is not None:
        v2_status["conditions"] = [c or {} for c in conditions]
    out = {k: v for k, v in obj.items() if k not in ("metadata", "spec", "status")}
    return {**out, "metadata": meta, "spec": v2_spec, "status": v2_status}


#: the Go types autoscaling/v1's round-trip annotations decode into, by struct: field -> (the type an
#: error names, what it is: a struct of this table, a definition, "string" or "int32"; "[]" a list of it)
_META_DEF, _AS_DEF = "io.k8s.apimachinery.pkg.apis.meta.v1.", "io.k8s.api.autoscaling.v1."
_QUANTITY_DEF, _SELECTOR_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity", _META_DEF + "LabelSelector"
_REF_DEF = _AS_DEF + "CrossVersionObjectReference"
_Q, _SEL, _NAME = ("resource.Quantity", _QUANTITY_DEF), ("v1.LabelSelector", _SELECTOR_DEF), ("v1.ResourceName", "string")
_UTIL = ("int32", "int32")
_ANNOTATION_TYPES: dict[str, dict[str, tuple[str, str]]] = {
    "v1.MetricSpec": {"type": ("v1.MetricSourceType", "string"), "object": ("v1.ObjectMetricSource", "v1.ObjectMetricSource"),
                      "pods": ("v1.PodsMetricSource", "v1.PodsMetricSource"),
                      "resource": ("v1.ResourceMetricSource", "v1.ResourceMetricSource"),
                      "containerResource": ("v1.ContainerResourceMetricSource", "v1.ContainerResourceMetricSource"),
                      "external": ("v1.ExternalMetricSource", "v1.ExternalMetricSource")},
    "v1.ObjectMetricSource": {"target": ("v1.CrossVersionObjectReference", _REF_DEF), "metricName": ("string", "string"),
                              "targetValue": _Q, "selector": _SEL, "averageValue": _Q},
    "v1.PodsMetricSource": {"metricName": ("string", "string"), "targetAverageValue": _Q, "selector": _SEL},
    "v1.ResourceMetricSource": {"name": _NAME, "targetAverageUtilization": _UTIL, "targetAverageValue": _Q},
    "v1.ContainerResourceMetricSource": {"name": _NAME, "targetAverageUtilization": _UTIL, "targetAverageValue": _Q,
                                         "container": ("string", "string")},
    "v1.ExternalMetricSource": {"metricName": ("string", "string"), "metricSelector": _SEL, "targetValue": _Q,
                                "targetAverageValue": _Q},
    "v1.MetricStatus": {"type": ("v1.MetricSourceType", "string"), "object": ("v1.ObjectMetricStatus", "v1.ObjectMetricStatus"),
                        "pods": ("v1.PodsMetricStatus", "v1.PodsMetricStatus"),
                        "resource": ("v1.ResourceMetricStatus", "v1.ResourceMetricStatus"),
                        "containerResource": ("v1.ContainerResourceMetricStatus", "v1.ContainerResourceMetricStatus"),
                        "external": ("v1.ExternalMetricStatus", "v1.ExternalMetricStatus")},
    "v1.ObjectMetricStatus": {"target": ("v1.CrossVersionObjectReference", _REF_DEF), "metricName": ("string", "string"),
                              "currentValue": _Q, "selector": _SEL, "averageValue": _Q},
    "v1.PodsMetricStatus": {"metricName": ("string", "string"), "currentAverageValue": _Q, "selector": _SEL},
    "v1.ResourceMetricStatus": {"name": _NAME, "currentAverageUtilization": _UTIL, "currentAverageValue": _Q},
    "v1.ContainerResourceMetricStatus": {"name": _NAME, "currentAverageUtilization": _UTIL, "currentAverageValue": _Q,
                                         "container": ("string", "string")},
    "v1.ExternalMetricStatus": {"metricName": ("string", "string"), "metricSelector": _SEL, "currentValue": _Q,
                                "currentAverageValue": _Q},
    "v1.HorizontalPodAutoscalerCondition": {
        "type": ("v1.HorizontalPodAutoscalerConditionType", "string"), "status": ("v1.ConditionStatus", "string"),
        "lastTransitionTime": ("v1.Time", _META_DEF + "Time"), "reason": ("string", "string"), "message": ("string", "string")},
    # the internal type, without json tags: its field names, matched whatever their case (`_lower_keys`)
    "autoscaling.HorizontalPodAutoscalerBehavior": {
        "scaleup": ("autoscaling.HPAScalingRules", "autoscaling.HPAScalingRules"),
        "scaledown": ("autoscaling.HPAScalingRules", "autoscaling.HPAScalingRules")},
    "autoscaling.HPAScalingRules": {
        "stabilizationwindowseconds": _UTIL, "selectpolicy": ("autoscaling.ScalingPolicySelect", "string"),
        "policies": ("[]autoscaling.HPAScalingPolicy", "[]autoscaling.HPAScalingPolicy"), "tolerance": _Q},
    "autoscaling.HPAScalingPolicy": {"type": ("autoscaling.HPAScalingPolicyType", "string"), "value": _UTIL,
                                     "periodseconds": _UTIL},
}
#: each round-trip annotation, in the order upstream's conversion decodes them, with the Go type it decodes into
_ANNOTATION_VALUES = ((METRICS_ANNOTATION, "[]v1.MetricSpec"), (CURRENT_METRICS_ANNOTATION, "[]v1.MetricStatus"),
                      (BEHAVIOR_ANNOTATION, "autoscaling.HorizontalPodAutoscalerBehavior"),
                      (CONDITIONS_ANNOTATION, "[]v1.HorizontalPodAutoscalerCondition"))


def _annotation_value_error(v: Any, go: str, shown: str, struct: str, fields: tuple[str, ...]) -> str | None:
    """json.Unmarshal's error for the decoded value `v` of Go type `go` (`_ANNOTATION_TYPES`; `shown`: as an
    error names it), at `fields` of the struct `struct`; None when it decodes."""
    def mismatch(kind: str) -> str:
        where = f"Go struct field {struct}.{'.'.join(fields)}" if fields else "Go value"
        return f"json: cannot unmarshal {kind} into {where} of type {shown}"

    if v is None:
        return None
    if go.startswith("[]"):
        if not isinstance(v, list):
            return mismatch(gojson.value_kind(v))
        return next((e for x in v if (e := _annotation_value_error(x, go[2:], go[2:], struct, fields)) is not None), None)
    if go in _ANNOTATION_TYPES:
        if not isinstance(v, dict):
            return mismatch(gojson.value_kind(v))
        table, owner, folded = _ANNOTATION_TYPES[go], go.rpartition(".")[2], go.startswith("autoscaling.")
        for k, x in v.items():
            field_shown, kind = table.get(k.lower() if folded else k, ("", ""))
            if kind and (e := _annotation_value_error(x, kind, field_shown, owner, (*fields, k))) is not None:
                return e
        return None
    if go == "string":
        return None if isinstance(v, str) else mismatch(gojson.value_kind(v))
    if go == "int32":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return mismatch(gojson.value_kind(v))
        return None if float(v).is_integer() and -(2**31) <= v < 2**31 else mismatch(f"number {v}")
    from ..apiserver import structural

    return next(iter(structural.definition_errors(v, go)), None)


def _decode_annotation(text: Any, go: str) -> tuple[Any, str | None]:
    """A round-trip annotation's value and the error json.Unmarshal returns for it as Go type `go` (None
    when it decodes). A value nested past what Python's decoder recurses through (Go's limit is 10,000;
    only an unknown field could hold one that decodes) is refused as too deep."""
    if not isinstance(text, str):  # (an apply configuration's null: no value)
        return None, None
    data = text.encode()
    syntax, _ = gojson.check_valid(data)
    if syntax is not None:
        return None, syntax
    try:
        value = json.loads(data)
    except RecursionError:
        return None, "invalid character '[' exceeded max depth"
    return value, _annotation_value_error(value, go, go, "", ())


def annotation_error(obj: Obj) -> str | None:
    """The error upstream's v1 -> internal conversion returns for a round-trip annotation that does not
    decode into its Go type (json.Unmarshal's), so that the body cannot be handled as a
    HorizontalPodAutoscaler."""
    given = (obj.get("metadata") or {}).get("annotations") or {}
    return next((e for key, go in _ANNOTATION_VALUES if key in given
                 and (e := _decode_annotation(given[key], go)[1]) is not None), None)


def _annotation(given: dict, key: str) -> Any:
    """The value of a round-trip annotation that decodes (None otherwise: `annotation_error` refuses
    the body, but a server-side apply converts what it merged before the result is decoded)."""
    value, err = _decode_annotation(given.get(key), dict(_ANNOTATION_VALUES)[key])
    return None if err is not None else value


def _behavior_go_json(b: dict) -> dict:
    """The behavior as Go marshals upstream's internal type: exported field names, nil as null."""
    def rules(r: dict | None) -> dict | None:
        if r is None:
            return None
        return {"StabilizationWindowSeconds": r.get("stabilizationWindowSeconds"), "SelectPolicy": r.get("selectPolicy"),
                "Policies": [{"Type": p.get("type"), "Value": p.get("value"), "PeriodSeconds": p.get("periodSeconds")}
                             for p in r.get("policies") or []] if r.get("policies") is not None else None,
                "Tolerance": r.get("tolerance")}
    return {"ScaleUp": rules(b.get("scaleUp")), "ScaleDown": rules(b.get("scaleDown"))}


def _lower_keys(v: Any) -> Any:
    """Behavior annotations written by Go from the internal type carry field names
    like `ScaleUp`; Go's decoder matches them case-insensitively, so do we."""
    if isinstance(v, dict):
        return {k[:1].lower() + k[1:]: _lower_keys(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_lower_keys(x) for x in v]
    return v


def _without_round_trip(obj: Obj) -> Obj:
    """v2 carries everything natively: v1's round-trip annotations never survive it."""
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    if not any(k in ann for k in _ROUND_TRIP):
        return obj
    out = copy.copy(obj)
    out["metadata"] = dict(obj["metadata"])
    rest = {k: v for k, v in ann.items() if k not in _ROUND_TRIP}
    if rest:
        out["metadata"]["annotations"] = rest
    else:
        out["metadata"].pop("annotations")
    return out


# --- validation ---------------------------------------------------------------


def _cross_version_ref(ref: dict | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for f in ("kind", "name"):
        v = (ref or {}).get(f, "")
        if not v:
            errs.append(required(f"{path}.{f}"))
        else:
            errs += [invalid(f"{path}.{f}", v, m) for m in path_segment_name(v)]
    return errs


def _sign(q: Any) -> int:
    try:
        v = parse_quantity(str(q))
    except QuantityError:
        return 0
    return (v > 0) - (v < 0)


def _metric_target(t: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = t.get("type", "")
    if not kind:
        errs.append(required(f"{path}.type", "must specify a metric target type"))
    if kind not in ("Utilization", "Value", "AverageValue"):
        errs.append(invalid(f"{path}.type", kind, "must be either Utilization, Value, or AverageValue"))
    for f in ("value", "averageValue"):
        if t.get(f) is not None and _sign(t[f]) != 1:
            errs.append(invalid(f"{path}.{f}", t[f], "must be positive"))
    if t.get("averageUtilization") is not None and t["averageUtilization"] < 1:
        errs.append(invalid(f"{path}.averageUtilization", t["averageUtilization"], "must be greater than 0"))
    return errs


def _metric_identifier(mid: dict | None, path: str) -> list[FieldError]:
    name = (mid or {}).get("name", "")
    if not name:
        return [required(f"{path}.name", "must specify a metric name")]
    return [invalid(f"{path}.name", name, m) for m in path_segment_name(name)]


def _source_errors(kind: str, src: dict, path: str) -> list[FieldError]:
    t = src.get("target") or {}
    tpath = f"{path}.target"
    errs = _metric_target(t, tpath)
    if kind == "object":
        errs = _cross_version_ref(src.get("describedObject"), f"{path}.describedObject") + \
            _metric_identifier(src.get("metric"), f"{path}.metric") + errs
        if t.get("value") is None and t.get("averageValue") is None:
            errs.append(required(f"{tpath}.averageValue", "must set either a target value or averageValue"))
    elif kind == "external":
        errs = _metric_identifier(src.get("metric"), f"{path}.metric") + errs
        if t.get("value") is None and t.get("averageValue") is None:
            errs.append(required(f"{tpath}.averageValue", "must set either a target value for metric or a per-pod target"))
        if t.get("value") is not None and t.get("averageValue") is not None:
            errs.append(forbidden(f"{tpath}.value", "may not set both a target value for metric and a per-pod target"))
    elif kind == "pods":
        errs = _metric_identifier(src.get("metric"), f"{path}.metric") + errs
        if t.get("averageValue") is None:
            errs.append(required(f"{tpath}.averageValue", "must specify a positive target averageValue"))
    else:
        pre: list[FieldError] = []
        if not src.get("name"):
            pre.append(required(f"{path}.name", "must specify a resource name"))
        if kind == "containerResource":
            container = src.get("container", "")
            if not container:
                pre.append(required(f"{path}.container", "must specify a container"))
            else:
                pre += [invalid(f"{path}.container", container, m) for m in dns1123_label(container)]
        errs = pre + errs
        if t.get("averageUtilization") is None and t.get("averageValue") is None:
            errs.append(required(f"{tpath}.averageUtilization", "must set either a target raw value or a target utilization"))
        if t.get("averageUtilization") is not None and t.get("averageValue") is not None:
            errs.append(forbidden(f"{tpath}.averageValue", "may not set both a target raw value and a target utilization"))
    return errs


def _metric_spec(m: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = m.get("type", "")
    if not kind:
        errs.append(required(f"{path}.type", "must specify a metric source type"))
    if kind not in _METRIC_TYPES:
        errs.append(not_supported(f"{path}.type", kind, _METRIC_TYPES))
    present = [f for f in ("object", "external", "pods", "resource", "containerResource") if m.get(f) is not None]
    if present:
        errs += _source_errors(present[0], m[present[0]], f"{path}.{present[0]}")
    expected = _SOURCE_FIELD.get(kind)
    if expected is None:
        errs.append(not_supported(f"{path}.type", kind, _METRIC_TYPES))
    elif m.get(expected) is None:
        errs.append(required(f"{path}.{expected}", "must populate information for the given metric source"))
    if len(present) != 1:
        errs += [forbidden(f"{path}.{f}", "must populate the given metric source only") for f in present if f != expected]
    return errs


def _scaling_rules(rules: dict | None, path: str) -> list[FieldError]:
    if rules is None:
        return []
    errs: list[FieldError] = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None and window < 0:
        errs.append(invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"))
    if window is not None and window > _MAX_STABILIZATION_WINDOW:
        errs.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                            f"must be less than or equal to {_MAX_STABILIZATION_WINDOW}"))
    sp = rules.get("selectPolicy")
    if sp is not None and sp not in ("Disabled", "Max", "Min"):
        errs.append(not_supported(f"{path}.selectPolicy", sp, ["Disabled", "Max", "Min"]))
    tol = rules.get("tolerance")
    if tol is not None and _sign(tol) < 0:
        errs.append(invalid(f"{path}.tolerance", tol, "must be greater than or equal to zero"))
    policies = rules.get("policies") or []
    if not policies:
        errs.append(required(f"{path}.policies", "must specify at least one Policy"))
    for i, p in enumerate(policies):
        pp = f"{path}.policies[{i}]"
        if p.get("type") not in ("Pods", "Percent"):
            errs.append(not_supported(f"{pp}.type", p.get("type", ""), ["Percent", "Pods"]))
        if p.get("value", 0) <= 0:
            errs.append(invalid(f"{pp}.value", p.get("value", 0), "must be greater than zero"))
        period = p.get("periodSeconds", 0)
        if period <= 0:
            errs.append(invalid(f"{pp}.periodSeconds", period, "must be greater than zero"))
        if period > _MAX_PERIOD_SECONDS:
            errs.append(invalid(f"{pp}.periodSeconds", period, f"must be less than or equal to {_MAX_PERIOD_SECONDS}"))
    return errs


def validate_hpa_spec(spec: dict, lowest: int) -> list[FieldError]:
    """validateHorizontalPodAutoscalerSpec; `lowest` minReplicas: 0 with HPAScaleToZero on (or an
    update of one at 0 already), else 1."""
    errs: list[FieldError] = []
    lo, hi = spec.get("minReplicas"), spec.get("maxReplicas", 0)
    if lo is not None and lo < lowest:
        errs.append(invalid("spec.minReplicas", lo, f"must be greater than or equal to {lowest}"))
    if hi < 1:
        errs.append(invalid("spec.maxReplicas", hi, "must be greater than 0"))
    if lo is not None and hi < lo:
        errs.append(invalid("spec.maxReplicas", hi, "must be greater than or equal to `minReplicas`"))
    errs += _cross_version_ref(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    metrics = spec.get("metrics") or []
    for i, m in enumerate(metrics):
        errs += _metric_spec(m, f"spec.metrics[{i}]")
    if lo == 0 and not any(m.get("type") in ("Object", "External") for m in metrics):
        errs.append(forbidden("spec.metrics", "must specify at least one Object or External metric to support scaling to zero replicas"))
    behavior = spec.get("behavior")
    if behavior is not None:
        errs += _scaling_rules(behavior.get("scaleUp"), "spec.behavior.scaleUp")
        errs += _scaling_rules(behavior.get("scaleDown"), "spec.behavior.scaleDown")
    return errs


# --- printing ---------------------------------------------------------------------


def _q(v: Any) -> str:
    return "<nil>" if v is None else str(v)


def _format_metric(spec: dict, status: dict | None) -> str:
    kind = spec.get("type")
    key = _SOURCE_FIELD.get(kind or "")
    src = (spec.get(key) or {}) if key else {}
    target = src.get("target") or {}
    cur = ((status or {}).get(key) or {}) if key else {}
    current = cur.get("current") or {}
    if kind in ("External", "Object"):
        if target.get("averageValue") is not None:
            now = _q(current.get("averageValue")) if current.get("averageValue") is not None else "<unknown>"
            return f"{now}/{target['averageValue']} (avg)"
        now = _q(current.get("value")) if cur else "<unknown>"
        return f"{now}/{_q(target.get('value'))}"
    if kind == "Pods":
        now = _q(current.get("averageValue")) if cur else "<unknown>"
        return f"{now}/{_q(target.get('averageValue'))}"
    if kind in ("Resource", "ContainerResource"):
        name = src.get("name", "")
        if target.get("averageValue") is not None:
            now = _q(current.get("averageValue")) if cur else "<unknown>"
            return f"{name}: {now}/{target['averageValue']}"
        now = f"{current['averageUtilization']}%" if current.get("averageUtilization") is not None else "<unknown>"
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        return f"{name}: {now}/{goal}"
    return "<unknown type>"


def format_hpa_metrics(obj: Obj) -> str:
    """formatHPAMetrics: the first two metrics as current/target, then '+ N more...'."""
    specs = (obj.get("spec") or {}).get("metrics") or []
    statuses = (obj.get("status") or {}).get("currentMetrics") or []
    if not specs:
        return "<none>"
    cells = [_format_metric(m, statuses[i] if i < len(statuses) else None) for i, m in enumerate(specs)]
    if len(cells) > 2:
        return f"{', '.join(cells[:2])} + {len(cells) - 2} more..."
    return ", ".join(cells)


_SPEC = "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec"


class HorizontalPodAutoscalerStrategy(Strategy):
    columns = [
        name_column(),
        Column("Reference", "string", lambda o: "{kind}/{name}".format(
            kind=((o.get("spec") or {}).get("scaleTargetRef") or {}).get("kind", ""),
            name=((o.get("spec") or {}).get("scaleTargetRef") or {}).get("name", "")), api_doc(_SPEC, "scaleTargetRef")),
        Column("Targets", "string", format_hpa_metrics, api_doc(_SPEC, "metrics")),
        Column("MinPods", "string", lambda o: "<unset>" if (o.get("spec") or {}).get("minReplicas") is None
               else str(o["spec"]["minReplicas"]), api_doc(_SPEC, "minReplicas")),
        Column("MaxPods", "string", lambda o: (o.get("spec") or {}).get("maxReplicas", 0), api_doc(_SPEC, "maxReplicas")),
        Column("Replicas", "string", lambda o: (o.get("status") or {}).get("currentReplicas", 0),
               api_doc("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", "currentReplicas")),
        age_column(),
    ]

    def default(self, obj: Obj, version: str) -> None:
        if version == "v2":
            default_v2(obj)
        elif (obj.setdefault("spec", {})).get("minReplicas") is None:
            obj["spec"]["minReplicas"] = 1

    def to_storage(self, obj: Obj, version: str) -> Obj:
        return v1_to_v2(obj) if version == "v1" else _without_round_trip(obj)

    def conversion_error(self, obj: Obj, version: str) -> str | None:
        return annotation_error(obj) if version == "v1" else None

    def from_storage(self, obj: Obj, version: str) -> Obj:
        return v2_to_v1(obj) if version == "v1" else _without_round_trip(obj)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_hpa_spec(obj.get("spec") or {}, 0 if enabled("HPAScaleToZero") else 1)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        zero = enabled("HPAScaleToZero") or (old.get("spec") or {}).get("minReplicas") == 0
        return validate_hpa_spec(new.get("spec") or {}, 0 if zero else 1)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        return [invalid(f"status.{f}", status[f], "must be greater than or equal to 0")
                for f in ("currentReplicas", "desiredReplicas") if status.get(f, 0) < 0]


register(Resource("autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler", ["v2", "v1"], namespaced=True,
                  storage_version="v2", short_names=("hpa",), categories=("all",), subresources=("status",),
                  strategy=HorizontalPodAutoscalerStrategy()))
