"""One metric spec → (replica proposal, metric name, status entry), reading
the metrics APIs (metrics_client) and applying the replica calculator. Every failure is a
`SourceError` carrying the ScalingActive reason upstream reports for it."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ...machinery.quantity import BINARY_SI, DECIMAL_SI, format_quantity
from ...machinery.selectors import go_label_selector, selector_to_string
from ...metrics.provider import MetricsUnavailable, from_milli, milli
from . import replica_calculator as calc


class SourceError(Exception):
    """A metric that could not be read, with upstream's three wordings of it: `detail` is what
    getUnableComputeReplicaCountCondition gets (the Warning event `reason` says it, the ScalingActive
    condition after `CONDITION_PREFIX`); str() is the error computeReplicasForMetric returns, which
    the FailedComputeMetricsReplicas event quotes."""

    def __init__(self, reason: str, detail: str, error: str = ""):
        super().__init__(error or detail)
        self.reason = reason
        self.detail = detail

    @property
    def condition_message(self) -> str:
        return CONDITION_PREFIX + self.detail


CONDITION_PREFIX = "the HPA was unable to compute the replica count: "


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


async def propose(client, spec: dict, target: Target, tol: calc.Tolerances, timing: calc.Timing) -> Proposal:
    kind = spec.get("type", "")
    if kind not in _REASONS:
        raise SourceError("InvalidMetricSourceType", f'unknown metric source type "{kind}"')
    try:
        return await _PROPOSERS[kind](client, spec, target, tol, timing)
    except (MetricsUnavailable, calc.MetricError) as e:
        detail, error = _wordings(spec, str(e))
        raise SourceError(_REASONS[kind], detail, error) from None


def _wordings(spec: dict, cause: str) -> tuple[str, str]:
    """(detail, error) for a failed metric, as computeStatusFor*Metric and computeReplicasForMetric
    wrap the replica calculator's error: a resource metric's detail already names the resource
    and the target kind, the other kinds' only their returned error."""
    kind = spec["type"]
    if kind in ("Resource", "ContainerResource"):
        src = spec["resource" if kind == "Resource" else "containerResource"]
        measure = "utilization" if src["target"].get("averageUtilization") is not None else "usage"
        detail = f"failed to get {src['name']} {measure}: {cause}"
        owner = f"{src['name']} resource" if kind == "Resource" else f"{src['container']} container"
        return detail, f"failed to get {owner} metric value: {detail}"
    if kind == "Pods":
        return cause, f"failed to get pods metric value: {cause}"
    if kind == "Object":
        src = spec["object"]
        inner = cause if src["target"].get("value") is not None else f"failed to get {src['metric']['name']} object metric: {cause}"
        return cause, f"failed to get object metric value: {inner}"
    name = spec["external"]["metric"]["name"]
    inner = f"failed to get external metric {name}: {cause}" if spec["external"]["target"].get("value") is not None \
        else f"failed to get {name} external metric: {cause}"
    return cause, f"failed to get {name} external metric value: {inner}"


async def _resource(client, spec, target: Target, tol, timing, container: str = "") -> Proposal:
    src = spec["containerResource" if container else "resource"]
    name, t = src["name"], src["target"]
    try:
        samples = await client.resource_metric(target.namespace, target.selector, name, container)
    except MetricsUnavailable as e:
        raise MetricsUnavailable(f"unable to get metrics for resource {name}: {e}") from None
    metrics = {k: calc.PodMetric(s.value, s.timestamp, s.window) for k, s in samples.items()}
    prefix = f"{container} container resource" if container else f"{name} resource"
    current: dict
    if t.get("averageUtilization") is not None:
        replicas, util, raw = calc.resource_utilization_replicas(target.spec_replicas, t["averageUtilization"], name,
                                                                 target.pods, metrics, tol, timing, container)
        label, current = f"{prefix} utilization (percentage of request)", {"averageUtilization": util, "averageValue": _usage(name, raw)}
    else:
        replicas, avg = calc.plain_metric_replicas(target.spec_replicas, milli(t["averageValue"]), target.pods, metrics,
                                                   tol, timing, name)
        label, current = prefix, {"averageValue": _usage(name, avg)}
    key = "containerResource" if container else "resource"
    body = {"name": name, "current": current, **({"container": container} if container else {})}
    return Proposal(replicas, label, {"type": spec["type"], key: body})


def _usage(resource: str, value: int) -> str:
    """buildQuantity: a resource's average usage as metrics-server writes it, memory in BinarySI (544Mi)."""
    return format_quantity(Fraction(value, 1000), BINARY_SI if resource == "memory" else DECIMAL_SI)


async def _container_resource(client, spec, target, tol, timing) -> Proposal:
    return await _resource(client, spec, target, tol, timing, spec["containerResource"]["container"])


async def _pods(client, spec, target: Target, tol, timing) -> Proposal:
    src = spec["pods"]
    metric = src["metric"]
    try:
        samples = await client.pods_metric(target.namespace, target.selector, metric["name"],
                                             selector_to_string(metric.get("selector")))
    except MetricsUnavailable as e:
        raise MetricsUnavailable(f"unable to get metric {metric['name']}: {e}") from None
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


async def _object(client, spec, target: Target, tol, timing) -> Proposal:
    src = spec["object"]
    ref = src["describedObject"]
    try:
        usage = await client.object_metric(target.namespace, src["metric"]["name"], ref,
                                             selector_to_string(src["metric"].get("selector")))
    except MetricsUnavailable as e:
        raise MetricsUnavailable(f"unable to get metric {src['metric']['name']} on {ref.get('kind')} "
                                 f"{target.namespace}/{ref.get('name')}: {e}") from None
    replicas, current = _value_or_average(target, usage, src["target"], tol)
    metric = src["metric"]
    # (upstream names an AverageValue Object metric as it names an External one)
    name = f"{ref['kind']} metric {metric['name']}" if src["target"].get("value") is not None \
        else f"external metric {metric['name']}({go_label_selector(metric.get('selector'))})"
    return Proposal(replicas, name,
                    {"type": "Object", "object": {"describedObject": src["describedObject"], "metric": src["metric"],
                                                  "current": current}})


async def _external(client, spec, target: Target, tol, timing) -> Proposal:
    src = spec["external"]
    metric = src["metric"]
    try:
        series = await client.external_metric(target.namespace, metric["name"], selector_to_string(metric.get("selector")))
    except MetricsUnavailable as e:
        raise MetricsUnavailable(f"unable to get external metric {target.namespace}/{metric['name']}/"
                                 f"{go_label_selector(metric.get('selector'))}: {e}") from None
    usage = sum(series)
    replicas, current = _value_or_average(target, usage, src["target"], tol)
    return Proposal(replicas, f"external metric {metric['name']}({go_label_selector(metric.get('selector'))})",
                    {"type": "External", "external": {"metric": metric, "current": current}})


_PROPOSERS = {"Resource": _resource, "ContainerResource": _container_resource, "Pods": _pods,
              "Object": _object, "External": _external}
