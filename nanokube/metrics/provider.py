"""The built-in metrics provider: what metrics-server, a custom-metrics adapter
and an external-metrics adapter would answer, derived from API objects so that
every process (API server, controller manager) sees the same values.

Sources (all values are Kubernetes quantities):
- Resource metrics (metrics.k8s.io): every pod with a running container
  (those containers) and every node, as
  metrics-server reports them: measured for pods a usage source knows (the
  process runtime), else the usage model of `usage.py` (a share of the
  requests; the pod annotations `sim.nanokube.io/cpu-usage` and
  `sim.nanokube.io/memory-usage` override it), plus what a running node
  manager charges to a container's memory (`memory_charges`: the pages of a
  memory-backed emptyDir it mounts, as the kubelet's summary counts them).
- Custom metrics (custom.metrics.k8s.io): the annotation
  `metrics.sim.nanokube.io/<metric>` on a pod (Pods metrics) or on any other
  object (Object metrics).
- External metrics (external.metrics.k8s.io): the ConfigMap
  `nanokube-external-metrics` in the HPA's namespace; each key is a metric
  name and its value either a quantity (one series without labels) or a JSON
  list of `{"labels": {...}, "value": "<quantity>"}` series. For example
  `kubectl create configmap nanokube-external-metrics --from-literal=queue_length=12`.
  A missing ConfigMap, key or garbage value is an unavailable metric.

A metric source (the Prometheus one, `prometheus.py`) may be composed in:
custom and external metrics its rules cover come from it, the rest from the
sources above. `nanokube up` sets `MetricsProvider.default_source` once at
start-up, so the API server's metrics APIs and the in-process HPA agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import orjson

from ..machinery.errors import APIError
from ..machinery.selectors import matches_labels, parse_label_selector
from ..clock import REAL, Clock
from ..machinery.quantity import QuantityError, format_quantity, parse_quantity
from ..node import faults
from .usage import (CPU_ANNOTATION, MEMORY_ANNOTATION, MEMORY_THRESHOLD, SYSTEM_CPU, SYSTEM_MEMORY, WINDOW, Usage,
                    simulated_usage, with_leak)
from .usage import scraped_at

__all__ = ["CPU_ANNOTATION", "MEMORY_ANNOTATION", "MetricsProvider", "MetricsUnavailable"]

CUSTOM_PREFIX = "metrics.sim.nanokube.io/"
EXTERNAL_CONFIGMAP = "nanokube-external-metrics"
WINDOW_SECONDS = 30
_RESOURCES = ("cpu", "memory")


class MetricsUnavailable(Exception):
    """The metric cannot be read (absent, malformed, or its object is gone)."""


@dataclass(frozen=True)
class Sample:
    value: int  # milli-units
    timestamp: float
    window: float = WINDOW_SECONDS


@dataclass(frozen=True)
class ExternalSample:
    labels: dict
    value: int  # milli-units


def milli(q) -> int:
    """Go's Quantity.MilliValue (rounds up); MetricsUnavailable on garbage."""
    try:
        return math.ceil(parse_quantity(str(q)) * 1000)
    except QuantityError as e:
        raise MetricsUnavailable(f"invalid quantity {q!r}: {e}") from None


def from_milli(v: int) -> str:
    return format_quantity(Fraction(v, 1000))


def _pressure_faults(node: dict, now: float) -> frozenset[str]:
    """The pressure conditions the node's faults (its `sim.nanokube.io/fault` annotation) hold now;
    none for a value its agent would not understand either."""
    try:
        return faults.parse((node["metadata"].get("annotations") or {}).get(faults.ANNOTATION)).at(now).pressure
    except ValueError:
        return frozenset()


def _integer(q) -> int:
    try:
        return math.ceil(parse_quantity(str(q)))
    except QuantityError:
        return 0


def _running(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def cpu_quantity(millicores: int) -> str:
    """CPU as metrics-server serves it: its nanocores quantity in canonical form (250000000n is 250m, as
    Quantity.String() writes it)."""
    return format_quantity(Fraction(millicores, 1000))


def memory_quantity(size: int) -> str:
    """Bytes in BinarySI's canonical form (1Gi, 1536Ki, 1000)."""
    for suffix, unit in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


class MetricsProvider:
    #: the source every provider of this process composes in unless given one
    default_source = None
    #: measured usage: `source(pod) -> {container: Usage}` or None for pods it does not run, those
    #: of every provider of this process unless given its own: `nanokube up` sets them as it starts
    #: (the process runtime's, or none) and clears them as it stops, so a later cluster in the same
    #: process measures nothing of an earlier one's runtime
    usage_sources: tuple = ()
    #: memory charged to a container beyond what its processes use: `charge(pod) -> {container:
    #: bytes}` or None for pods it does not know, those of every provider of this process (a node
    #: manager adds its agents' while it runs: the pages of a memory-backed emptyDir, which count
    #: in the working set of the container that mounts it)
    memory_charges: tuple = ()

    def __init__(self, client, clock: Clock = REAL, source=None, usage_sources: tuple | None = None):
        self.client = client
        self.clock = clock
        self.source = source if source is not None else self.default_source
        if usage_sources is not None:
            self.usage_sources = usage_sources
        self.pods = client.resource("", "v1", "pods")
        self.configmaps = client.resource("", "v1", "configmaps")

    async def _pods(self, namespace: str | None, selector: str) -> list[dict]:
        items, _ = await self.pods.list(namespace, label_selector=selector)
        return items

    # --- metrics.k8s.io ---------------------------------------------------

    def usage(self, pod: dict) -> dict[str, Usage]:
        """A pod's usage per running container: measured, or the usage model's; with what is
        charged to their memory besides (`memory_charges`)."""
        got = next((got for source in self.usage_sources if (got := source(pod)) is not None), None)
        if got is None:
            got = simulated_usage(pod)
        for charge in self.memory_charges:
            if extra := charge(pod):
                got = {name: replace(u, memory=u.memory + extra.get(name, 0)) for name, u in got.items()}
        return got

    def _stamp(self) -> tuple[str, str]:
        return self.clock.rfc3339(scraped_at(self.clock.now())), f"{WINDOW:g}s"

    async def pod_metrics(self, namespace: str | None, selector: str = "", name: str = "") -> list[dict]:
        """PodMetrics objects (metrics.k8s.io/v1beta1) of the pods with a running container."""
        pods = await self._pods(namespace, selector)
        timestamp, window = self._stamp()
        out = []
        for pod in pods:
            md = pod["metadata"]
            if name and md["name"] != name:
                continue
            usage = self.usage(pod)
            if not usage:  # no container running (crash-looping, say): metrics-server has no point for it
                continue
            out.append({
                "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": _metadata(md, self.clock.rfc3339()),
                "timestamp": timestamp, "window": window,
                "containers": [{"name": c, "usage": {"cpu": cpu_quantity(u.cpu), "memory": memory_quantity(u.memory)}}
                               for c, u in usage.items()],
            })
        return out

    async def node_metrics(self, selector: str = "", name: str = "") -> list[dict]:
        """NodeMetrics objects: each node's running containers plus the system's share, and a
        memory-pressure fault's leak (usage.with_leak), as its kubelet's summary reports them."""
        nodes, _ = await self.client.resource("", "v1", "nodes").list(label_selector=selector)
        totals: dict[str, list[int]] = {}
        for pod in await self._pods(None, ""):
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                t = totals.setdefault(node, [0, 0])
                for u in self.usage(pod).values():
                    t[0] += u.cpu
                    t[1] += u.memory
        timestamp, window = self._stamp()
        out = []
        for node in nodes:
            md = node["metadata"]
            if name and md["name"] != name:
                continue
            cpu, mem = totals.get(md["name"], (0, 0))
            mem += SYSTEM_MEMORY
            if "MemoryPressure" in _pressure_faults(node, self.clock.now()):
                capacity = ((node.get("status") or {}).get("capacity") or {}).get("memory")
                if capacity is not None:
                    mem = with_leak(mem, _integer(capacity), MEMORY_THRESHOLD)
            out.append({"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                        "metadata": _metadata(md, self.clock.rfc3339()),
                        "timestamp": timestamp, "window": window,
                        "usage": {"cpu": cpu_quantity(cpu + SYSTEM_CPU),
                                  "memory": memory_quantity(mem)}})
        return out

    async def resource_metric(self, namespace: str, selector: str, resource: str, container: str = "") -> dict[str, Sample]:
        """Per-pod usage of one resource (summed over containers, or one container)."""
        if resource not in _RESOURCES:
            raise MetricsUnavailable(f"no metrics known for resource {resource}")
        stamp = scraped_at(self.clock.now())
        out = {}
        for pm in await self.pod_metrics(namespace, selector):
            cs = [c for c in pm["containers"] if not container or c["name"] == container]
            if not cs:  # getContainerMetrics: one pod without the container fails the metric
                raise MetricsUnavailable(f"failed to get container metrics: container {container} not present in "
                                         f"metrics for pod {pm['metadata']['namespace']}/{pm['metadata']['name']}")
            out[pm["metadata"]["name"]] = Sample(sum(milli(c["usage"][resource]) for c in cs), stamp, WINDOW)
        if not out:
            raise MetricsUnavailable("no metrics returned from resource metrics API")
        return out

    # --- custom.metrics.k8s.io --------------------------------------------

    async def _values(self, namespace: str | None, res, objs: list[dict], metric: str) -> dict[str, int]:
        """Each object's custom metric in milli-units (running pods only):
        from the source when one of its rules covers the metric, else from
        the objects' annotations."""
        if res.plural == "pods" and not res.group:
            objs = [o for o in objs if _running(o)]
        if self.source is not None:
            got = await self.source.object_values(namespace, res, [o["metadata"]["name"] for o in objs], metric)
            if got is not None:
                return got
        out = {}
        for obj in objs:
            v = (obj["metadata"].get("annotations") or {}).get(CUSTOM_PREFIX + metric)
            if v is not None:
                out[obj["metadata"]["name"]] = milli(v)
        return out

    async def pods_metric(self, namespace: str, selector: str, metric: str) -> dict[str, Sample]:
        now = self.clock.now()
        values = await self._values(namespace, self.resolve("pods"), await self._pods(namespace, selector), metric)
        if not values:
            raise MetricsUnavailable("no metrics returned from custom metrics API")
        return {name: Sample(v, now) for name, v in values.items()}

    async def object_metric(self, namespace: str, metric: str, ref: dict) -> int:
        api_version = ref.get("apiVersion") or "v1"
        group = api_version.split("/")[0] if "/" in api_version else ""
        version = api_version.split("/")[-1]
        res = await self.client.mapping(group, ref.get("kind", ""))
        if res is None:
            raise MetricsUnavailable(f'no matches for kind "{ref.get("kind")}" in group "{group}"')
        try:
            obj = await self.client.resource(group, version, res.plural).get(ref.get("name", ""), namespace if res.namespaced else None)
        except (APIError, LookupError) as e:
            raise MetricsUnavailable(str(e)) from None
        values = await self._values(namespace if res.namespaced else None, res, [obj], metric)
        if obj["metadata"]["name"] not in values:
            raise MetricsUnavailable(f"the server could not find the metric {metric} for {ref.get('kind', '').lower()}s {ref.get('name')}")
        return values[obj["metadata"]["name"]]

    def resolve(self, resource: str):
        """The served Resource for a custom-metrics resource name (`pods`,
        `deployments.apps`); MetricsUnavailable if none."""
        plural, _, group = resource.partition(".")
        res = next((r for r in self.client.index.resources if r.plural == plural and r.group == group), None)
        if res is None:
            raise MetricsUnavailable(f'the server could not find the requested resource "{resource}"')
        return res

    async def custom_metric_list(self, namespace: str | None, resource: str, name: str, metric: str,
                                 selector: str = "") -> dict:
        """A custom.metrics.k8s.io/v1beta2 MetricValueList for one object, or
        for every object a label selector picks when `name` is `*`."""
        res = self.resolve(resource)
        client = self.client.resource(res.group, res.storage_version, res.plural)
        if name == "*":
            objs, _ = await client.list(namespace if res.namespaced else None, label_selector=selector)
        else:
            try:
                objs = [await client.get(name, namespace if res.namespaced else None)]
            except APIError as e:
                raise MetricsUnavailable(e.message) from None
        ts = self.clock.rfc3339()
        values = await self._values(namespace if res.namespaced else None, res, objs, metric)
        items = []
        for obj in objs:
            v = values.get(obj["metadata"]["name"])
            if v is None:
                continue
            md = obj["metadata"]
            described = {"kind": res.kind, "name": md["name"], "apiVersion": res.api_version(res.storage_version)}
            if md.get("namespace"):
                described["namespace"] = md["namespace"]
            item = {"describedObject": described, "metric": {"name": metric}, "timestamp": ts,
                    "windowSeconds": WINDOW_SECONDS, "value": from_milli(v)}
            if selector:
                item["metric"]["selector"] = _selector_object(selector)
            items.append(item)
        if not items:
            what = f"{resource} {name}" if name != "*" else resource
            raise MetricsUnavailable(f"the server could not find the metric {metric} for {what}")
        return {"kind": "MetricValueList", "apiVersion": "custom.metrics.k8s.io/v1beta2", "metadata": {},
                "items": items}

    # --- external.metrics.k8s.io ------------------------------------------

    async def external_metric(self, namespace: str, metric: str, selector: str = "") -> list[ExternalSample]:
        """The series of an external metric matching a label selector."""
        if self.source is not None:
            got = await self.source.external_metric(namespace, metric, selector)
            if got is not None:
                return got
        try:
            cm = await self.configmaps.get(EXTERNAL_CONFIGMAP, namespace)
        except APIError as e:
            raise MetricsUnavailable(f"no external metrics in namespace {namespace}: {e.message}") from None
        raw = (cm.get("data") or {}).get(metric)
        if raw is None:
            raise MetricsUnavailable(f"no metrics returned from external metrics API for {metric}")
        series = parse_series(raw)
        if not selector:
            return series
        reqs = parse_label_selector(selector)
        return [s for s in series if matches_labels(reqs, s.labels)]

    async def external_metric_list(self, namespace: str, metric: str, selector: str = "") -> dict:
        """An ExternalMetricValueList as the adapter API serves it."""
        ts = self.clock.rfc3339()
        return {"kind": "ExternalMetricValueList", "apiVersion": "external.metrics.k8s.io/v1beta1", "metadata": {},
                "items": [{"metricName": metric, "metricLabels": s.labels, "timestamp": ts,
                           "value": from_milli(s.value)} for s in await self.external_metric(namespace, metric, selector)]}


def parse_series(raw: str) -> list[ExternalSample]:
    text = raw.strip()
    if not text.startswith("["):
        return [ExternalSample({}, milli(text))]
    try:
        items = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise MetricsUnavailable(f"malformed external metric series: {e}") from None
    out = []
    for it in items:
        if not isinstance(it, dict) or "value" not in it or not isinstance(it.get("labels", {}), dict):
            raise MetricsUnavailable("each external metric series needs a value and optional labels")
        out.append(ExternalSample({str(k): str(v) for k, v in (it.get("labels") or {}).items()}, milli(it["value"])))
    return out


def _selector_object(selector: str) -> dict:
    """A label selector string as the LabelSelector object MetricIdentifier carries."""
    labels, exprs = {}, []
    for key, op, values in parse_label_selector(selector):
        if op == "=":
            labels[key] = values[0]
        elif op in _OPERATORS:
            exprs.append({"key": key, "operator": _OPERATORS[op], "values": sorted(values)})
        else:  # gt, lt: no LabelSelector operator (metav1.ParseToLabelSelector)
            raise MetricsUnavailable(f'"{op}" is not a valid label selector operator')
    out: dict = {"matchLabels": labels}
    if exprs:
        out["matchExpressions"] = exprs
    return out


_OPERATORS = {"!=": "NotIn", "in": "In", "notin": "NotIn", "exists": "Exists", "!": "DoesNotExist"}


def _metadata(md: dict, now: str) -> dict:
    """A PodMetrics' or NodeMetrics' metadata, as metrics-server's: its object's name, namespace
    and labels (none when it has none: ObjectMeta's omitempty), created now."""
    out = {"name": md["name"], "namespace": md.get("namespace"), "creationTimestamp": now}
    if md.get("labels"):
        out["labels"] = md["labels"]
    return {k: v for k, v in out.items() if v is not None}
