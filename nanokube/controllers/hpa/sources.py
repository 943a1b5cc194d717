"""One metric spec → (replica proposal, metric name, status entry), reading
the metrics provider and applying the replica calculator. Every failure is a
`SourceError` carrying the ScalingActive reason upstream reports for it."""

from __future__ import annotations

from dataclasses import dataclass

from ...machinery.selectors import go_label_selector, selector_to_string
from ...metrics.provider import MetricsUnavailable, from_milli, milli
from . import replica_calculator as calc


class SourceError(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass
class Proposal:
    replicas: int
    name: str
    status: dict


@dataclass
class Target:
    """What the metrics are judged against: the scale target's replica counts and pods."""

    namespace: str
    spec_replicas: int
    status_replicas: int
    pods: list[dict]
    selector: str


_REASONS = {"Resource": "FailedGetResourceMetric", "ContainerResource": "FailedGetContainerResourceMetric",
            "Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric", "External": "FailedGetExternalMetric"}


async def propose(provider, spec: dict, target: Target, tol: calc.Tolerances, timing: calc.Timing) -> Proposal:
    kind = spec.get("type", "")
    if kind not in _REASONS:
        raise SourceError("InvalidMetricSourceType", f"unknown metric source type {kind!r}")
    try:
        return await _PROPOSERS[kind](provider, spec, target, tol, timing)
    except (MetricsUnavailable, calc.MetricError) as e:
        raise SourceError(_REASONS[kind], f"the HPA was unable to compute the replica count: {e}") from None


async def _resource(provider, spec, target: Target, tol, timing, container: str = "") -> Proposal:
    src = spec["containerResource" if container else "resource"]
    name, t = src["name"], src["target"]
    samples = await provider.resource_metric(target.namespace, target.selector, name, container)
    metrics = {k: calc.PodMetric(s.value, s.timestamp, s.window) for k, s in samples.items()}
    prefix = f"{container} container resource" if container else f"{name} resource"
    current: dict
    if t.get("averageUtilization") is not None:
        replicas, util, raw = calc.resource_utilization_replicas(target.spec_replicas, t["averageUtilization"], name,
                                                                 target.pods, metrics, tol, timing, container)
        label, current = f"{prefix} utilization (percentage of request)", {"averageUtilization": util, "averageValue": from_milli(raw)}
    else:
        replicas, avg = calc.plain_metric_replicas(target.spec_replicas, milli(t["averageValue"]), target.pods, metrics,
                                                   tol, timing, name)
        label, current = prefix, {"averageValue": from_milli(avg)}
    key = "containerResource" if container else "resource"
    body = {"name": name, "current": current, **({"container": container} if container else {})}
    return Proposal(replicas, label, {"type": spec["type"], key: body})


async def _container_resource(provider, spec, target, tol, timing) -> Proposal:
    return await _resource(provider, spec, target, tol, timing, spec["containerResource"]["container"])


async def _pods(provider, spec, target: Target, tol, timing) -> Proposal:
    src = spec["pods"]
    metric = src["metric"]
    samples = await provider.pods_metric(target.namespace, target.selector, metric["name"])
    metrics = {k: calc.PodMetric(s.value, s.timestamp, s.window) for k, s in samples.items()}
    replicas, avg = calc.plain_metric_replicas(target.spec_replicas, milli(src["target"]["averageValue"]),
                                               target.pods, metrics, tol, timing)
    return Proposal(replicas, f"pods metric {metric['name']}",
                    {"type": "Pods", "pods": {"metric": metric, "current": {"averageValue": from_milli(avg)}}})


def _value_or_average(target: Target, usage: int, t: dict, tol) -> tuple[int, dict]:
    if t.get("value") is not None:
        return calc.value_replicas(target.spec_replicas, usage, milli(t["value"]), tol, target.pods), {"value": from_milli(usage)}
    replicas, avg = calc.per_pod_replicas(target.status_replicas, usage, milli(t["averageValue"]), tol)
    return replicas, {"averageValue": from_milli(avg)}


async def _object(provider, spec, target: Target, tol, timing) -> Proposal:
    src = spec["object"]
    usage = await provider.object_metric(target.namespace, src["metric"]["name"], src["describedObject"])
    replicas, current = _value_or_average(target, usage, src["target"], tol)
    return Proposal(replicas, f"{src['describedObject']['kind']} metric {src['metric']['name']}",
                    {"type": "Object", "object": {"describedObject": src["describedObject"], "metric": src["metric"],
                                                  "current": current}})


async def _external(provider, spec, target: Target, tol, timing) -> Proposal:
    src = spec["external"]
    metric = src["metric"]
    series = await provider.external_metric(target.namespace, metric["name"], selector_to_string(metric.get("selector")))
    if not series:
        raise MetricsUnavailable("no metrics returned from external metrics API")
    usage = sum(s.value for s in series)
    replicas, current = _value_or_average(target, usage, src["target"], tol)
    return Proposal(replicas, f"external metric {metric['name']}({go_label_selector(metric.get('selector'))})",
                    {"type": "External", "external": {"metric": metric, "current": current}})


_PROPOSERS = {"Resource": _resource, "ContainerResource": _container_resource, "Pods": _pods,
              "Object": _object, "External": _external}
