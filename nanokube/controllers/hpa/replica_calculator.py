"""Per-metric replica proposals, as upstream's replica_calculator computes them.

Pure functions over already-fetched pods and metric values, so every branch
can be checked against the number upstream would produce. Metric values are
integers in milli-units (Go's `Quantity.MilliValue()`), and the same integer
truncations upstream performs are kept (utilization and averages are int64).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...clock import parse_time
from ...machinery.conditions import find_condition
from ...machinery.quantity import parse_quantity
from ..replicaset import pod_is_ready


class MetricError(Exception):
    """A metric could not be turned into a proposal; the message is upstream's."""


@dataclass(frozen=True)
class Tolerances:
    """How far the usage ratio may stray from 1 before scaling, per direction."""

    down: float = 0.1
    up: float = 0.1

    def within(self, ratio: float) -> bool:
        return 1.0 - self.down <= ratio <= 1.0 + self.up


@dataclass(frozen=True)
class PodMetric:
    value: int  # milli-units
    timestamp: float = 0.0
    window: float = 60.0


@dataclass(frozen=True)
class Timing:
    """Controller flags that decide when a cpu sample of a young pod counts."""

    now: float
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0


NO_PODS = "no pods returned by selector while calculating replica count"
NO_METRICS = "did not receive metrics for targeted pods (pods might be unready)"


def _cpu_sample_unready(pod: dict, metric: PodMetric, timing: Timing) -> bool:
    """Whether a cpu sample is ignored: the pod is not ready, or too young for the sample to be trusted."""
    cond = find_condition((pod.get("status") or {}).get("conditions"), "Ready")
    start = (pod.get("status") or {}).get("startTime")
    if cond is None or not start:
        return True
    started = parse_time(start)
    transition = parse_time(cond["lastTransitionTime"]) if cond.get("lastTransitionTime") else started
    if started + timing.cpu_initialization_period > timing.now:
        return cond.get("status") == "False" or metric.timestamp < transition + metric.window
    return cond.get("status") == "False" and started + timing.initial_readiness_delay > transition


@dataclass
class PodGroups:
    ready: int
    unready: set[str]
    missing: set[str]
    ignored: set[str]


def group_pods(pods: list[dict], metrics: dict[str, PodMetric], resource: str, timing: Timing) -> PodGroups:
    """groupPods: ready count, and the pods that are unready, without metrics, or gone."""
    g = PodGroups(0, set(), set(), set())
    for pod in pods:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Failed", "Succeeded"):  # IsPodTerminal
            g.ignored.add(name)
        elif phase == "Pending":
            g.unready.add(name)
        elif name not in metrics:
            g.missing.add(name)
        elif resource == "cpu" and _cpu_sample_unready(pod, metrics[name], timing):
            g.unready.add(name)
        else:
            g.ready += 1
    return g


def _milli(q) -> int:
    return math.ceil(parse_quantity(str(q)) * 1000)


def pod_requests(pods: list[dict], resource: str, container: str = "") -> dict[str, int]:
    """calculateRequests: milli-unit requests per pod. One container's when the metric names one;
    else the pod-level request (PodLevelResources) where the pod sets it, or the sum over the app
    containers and the restartable init containers (sidecars), whose usage metrics-server reports too."""
    out = {}
    for pod in pods:
        spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
        pod_level = ((spec.get("resources") or {}).get("requests") or {})
        if not container and resource in pod_level:  # (PodRequests: a resource the pod leaves out sums its containers')
            out[name] = _milli(pod_level[resource])
            continue
        sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        total, found = 0, False
        for c in [*(spec.get("containers") or []), *sidecars]:
            if container and c.get("name") != container:
                continue
            req = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            if req is None:
                raise MetricError(f"missing request for {resource} in container {c.get('name')} of Pod {name}")
            total, found = total + _milli(req), True
        if container and not found:
            raise MetricError(f"container {container} not found in Pod {name}")
        out[name] = total
    return out


def utilization_ratio(metrics: dict[str, PodMetric], requests: dict[str, int], target: int) -> tuple[float, int, int]:
    """GetResourceUtilizationRatio: (ratio, utilization %, average raw usage)."""
    used = req = n = 0
    for name, m in metrics.items():
        if name in requests:
            used += m.value
            req += requests[name]
            n += 1
    if req == 0:
        raise MetricError("no metrics returned matched known pods")
    util = used * 100 // req
    return util / target, util, used // n


def usage_ratio(metrics: dict[str, PodMetric], target: int) -> tuple[float, int]:
    """GetMetricUsageRatio: (ratio, average usage)."""
    avg = sum(m.value for m in metrics.values()) // len(metrics)
    return avg / target, avg


def _adjusted(current: int, metrics: dict[str, PodMetric], groups: PodGroups, ratio: float, tol: Tolerances,
              fallback, recompute) -> int:
    """The shared second pass: fill in missing and unready pods in the direction
    that damps the change, then keep `current` if the direction flipped."""
    up_with_unready = bool(groups.unready) and ratio > 1.0
    if not up_with_unready and not groups.missing:
        return current if tol.within(ratio) else math.ceil(ratio * groups.ready)
    metrics = dict(metrics)
    if groups.missing and ratio != 1.0:  # at exactly the target the missing pods move nothing
        for name in groups.missing:
            metrics[name] = PodMetric(fallback(name) if ratio < 1.0 else 0)
    if up_with_unready:
        for name in groups.unready:
            metrics[name] = PodMetric(0)
    new_ratio = recompute(metrics)
    if tol.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    proposed = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and proposed > current) or (new_ratio > 1.0 and proposed < current):
        return current
    return proposed


def _usable(pods: list[dict], metrics: dict[str, PodMetric], resource: str, timing: Timing):
    if not pods:
        raise MetricError(NO_PODS)
    groups = group_pods(pods, metrics, resource, timing)
    kept = {k: v for k, v in metrics.items() if k not in groups.ignored and k not in groups.unready}
    if not kept:
        raise MetricError(NO_METRICS)
    return groups, kept


def resource_utilization_replicas(current: int, target_utilization: int, resource: str, pods: list[dict],
                                  metrics: dict[str, PodMetric], tol: Tolerances, timing: Timing,
                                  container: str = "") -> tuple[int, int, int]:
    """Resource/ContainerResource with an Utilization target: (replicas, utilization %, raw average)."""
    groups, kept = _usable(pods, metrics, resource, timing)
    requests = pod_requests(pods, resource, container)
    ratio, util, raw = utilization_ratio(kept, requests, target_utilization)
    fallback_pct = max(100, target_utilization)
    replicas = _adjusted(current, kept, groups, ratio, tol, lambda n: requests[n] * fallback_pct // 100,
                         lambda ms: utilization_ratio(ms, requests, target_utilization)[0])
    return replicas, util, raw


def plain_metric_replicas(current: int, target: int, pods: list[dict], metrics: dict[str, PodMetric],
                          tol: Tolerances, timing: Timing, resource: str = "") -> tuple[int, int]:
    """Pods metrics, and Resource with an AverageValue target: (replicas, average usage)."""
    groups, kept = _usable(pods, metrics, resource, timing)
    ratio, avg = usage_ratio(kept, target)
    replicas = _adjusted(current, kept, groups, ratio, tol, lambda n: target, lambda ms: usage_ratio(ms, target)[0])
    return replicas, avg


def ready_pod_count(pods: list[dict]) -> int:
    if not pods:
        raise MetricError(NO_PODS)
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and pod_is_ready(p))


def ratio_replicas(current: int, ratio: float, tol: Tolerances, pods: list[dict]) -> int:
    """getUsageRatioReplicaCount: scale the ready pods by the ratio; from zero, ceil(ratio)."""
    if current == 0:
        return math.ceil(ratio)
    if tol.within(ratio):
        return current
    return math.ceil(ratio * ready_pod_count(pods))


def value_replicas(current: int, usage: int, target: int, tol: Tolerances, pods: list[dict]) -> int:
    """Object and External metrics with a Value target."""
    return ratio_replicas(current, usage / target, tol, pods)


def per_pod_replicas(status_replicas: int, usage: int, target_average: int, tol: Tolerances) -> tuple[int, int]:
    """Object and External metrics with an AverageValue target: (replicas, usage per current replica,
    0 when none runs: getPerPodUsage)."""
    wanted = math.ceil(usage / target_average)
    if status_replicas == 0:
        return wanted, 0
    replicas = status_replicas
    if not tol.within(usage / (target_average * status_replicas)):
        replicas = wanted
    return replicas, math.ceil(usage / status_replicas)
