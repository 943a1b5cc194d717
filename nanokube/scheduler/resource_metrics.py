"""kube-scheduler's /metrics/resources (pkg/scheduler/metrics/resources): the requests and limits
of every pod the scheduler knows, as it and the kubelet count them (`resources.pod_requests` and
`pod_limits`), one series per pod and resource. Computed when scraped, from the informer's pods."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from .resources import Resources, pod_limits, pod_requests

_LABELS = ("namespace", "pod", "node", "scheduler", "priority", "resource", "unit")
_ABOUT = ("This shows the resource usage the scheduler and kubelet expect per pod for resources along with "
          "the unit for the resource if any.")
_BYTES = ("memory", "ephemeral-storage", "storage")


def _unit(name: str) -> str:
    if name == "cpu":
        return "cores"
    if name in _BYTES or name.startswith("hugepages-"):
        return "bytes"
    if name.startswith("attachable-volumes-"):
        return "integer"
    return ""


def _amounts(r: Resources) -> list[tuple[str, float]]:
    """(resource, amount) for each resource `r` holds, CPU in cores; zero amounts are left out."""
    out = [("cpu", r.milli_cpu / 1000), ("memory", r.memory), ("ephemeral-storage", r.ephemeral),
           *sorted(r.scalars.items())]
    return [(name, float(v)) for name, v in out if v]


class PodResourceCollector:
    """kube_pod_resource_request and kube_pod_resource_limit for the pods `pods()` gives. A pod
    bound to a node that has Succeeded or Failed is left out (terminal pods hold nothing); an
    unbound pod counts whatever its phase, as upstream's podRequestsAndLimitsByLifecycle."""

    def __init__(self, pods: Callable[[], Iterable[dict]]) -> None:
        self.pods = pods

    def describe(self) -> list[Metric]:
        return self._families()

    def _families(self) -> list[Metric]:
        return [Metric("kube_pod_resource_request",
                       "[STABLE] Resources requested by workloads on the cluster, broken down by pod. " + _ABOUT, "gauge"),
                Metric("kube_pod_resource_limit",
                       "[STABLE] Resources limit for workloads on the cluster, broken down by pod. " + _ABOUT, "gauge")]

    def collect(self) -> list[Metric]:
        requests, limits = families = self._families()
        for pod in self.pods():
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            node = spec.get("nodeName") or ""
            if node and status.get("phase") in ("Succeeded", "Failed"):
                continue
            md = pod["metadata"]
            priority = spec.get("priority")
            who = (md.get("namespace", ""), md["name"], node, spec.get("schedulerName") or "",
                   "" if priority is None else str(priority))
            for family, total in ((requests, pod_requests(spec)), (limits, pod_limits(spec))):
                for name, amount in _amounts(total):
                    family.add_sample(family.name, dict(zip(_LABELS, (*who, name, _unit(name)))), amount)
        return families


def registry(pods: Callable[[], Iterable[dict]]) -> CollectorRegistry:
    """A registry of its own with only the pod resource collector, as upstream's resources.Handler."""
    r = CollectorRegistry(auto_describe=False)
    r.register(PodResourceCollector(pods))
    return r
