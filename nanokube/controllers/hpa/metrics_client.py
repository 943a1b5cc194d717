"""The HPA's metrics, read through the API server as upstream's REST metrics
client (pkg/controller/podautoscaler/metrics, rest_metrics_client.go) reads
them: metrics.k8s.io for Resource and ContainerResource metrics,
custom.metrics.k8s.io for Pods and Object metrics, external.metrics.k8s.io
for External ones. Whoever the APIServices name serves them: the built-in
adapter, or an extension server (metrics-server, prometheus-adapter, KEDA)
the aggregator proxies to. Every failure is a MetricsUnavailable in
upstream's words."""

from __future__ import annotations

import re

from ...clock import REAL, Clock, parse_time
from ...machinery.errors import UNEXPECTED_RESPONSE, APIError
from ...metrics.provider import MetricsUnavailable, Sample, milli

RESOURCE = "/apis/metrics.k8s.io/v1beta1"
CUSTOM_GROUP = "/apis/custom.metrics.k8s.io"
#: the custom metrics versions the client reads (their MetricValueLists carry the same fields it reads)
CUSTOM_VERSIONS = ("v1beta2", "v1beta1")
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"
#: metricServerDefaultMetricWindow: a custom metric's window when its adapter gives none
DEFAULT_WINDOW = 60.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _seconds(duration: str) -> float:
    """A metav1.Duration's text (`15s`, `1m0s`) in seconds."""
    return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(duration or ""))


def _message(e: APIError, what: str) -> str:
    """The error's text as client-go's typed clients word it: an answer that was no Status names the
    request (`(get queue.external.metrics.k8s.io)`)."""
    causes = (e.details or {}).get("causes") or []
    if any(c.get("reason") == UNEXPECTED_RESPONSE for c in causes):
        return f"{e.message} (get {what})"
    return e.message


class RESTMetricsClient:
    """`client`: the controller's API client (LocalClient or HTTPClient), whose `get_raw` GETs a path.
    `apis`: the clients the resource, custom and external metrics APIs are read over, by default
    `client` (kube-controller-manager builds a clientset for each, so each has a rate limit of its
    own). The custom metrics API's version is discovered over `client` as the custom metrics client's
    available-APIs getter does (the HPA clientset's discovery), and found again after `rediscover`
    seconds (kube-controller-manager invalidates it every HPA sync period)."""

    def __init__(self, client, clock: Clock = REAL, rediscover: float = 15.0, apis: tuple | None = None):
        self.client = client
        self.resource_api, self.custom_api, self.external_api = apis or (client, client, client)
        self.clock = clock
        self.rediscover = rediscover
        #: (path of the custom metrics API's preferred version, when to discover it again)
        self._custom: tuple[str, float] | None = None

    async def _custom_api(self) -> str:
        """chooseVersion: the group's preferred version if the client reads it, else its first one it does."""
        now = self.clock.monotonic()
        if self._custom is not None and now < self._custom[1]:
            return self._custom[0]
        try:
            group = await self.client.get_raw(CUSTOM_GROUP)
        except APIError as e:
            cause = "no custom metrics API (custom.metrics.k8s.io) registered" if e.code == 404 else e.message
            raise MetricsUnavailable(f"unable to fetch metrics from custom metrics API: {cause}") from None
        versions = [(group.get("preferredVersion") or {}).get("version")] + [v.get("version") for v in group.get("versions") or []]
        version = next((v for v in versions if v in CUSTOM_VERSIONS), None)
        if version is None:
            raise MetricsUnavailable("unable to fetch metrics from custom metrics API: no known available metric versions found")
        self._custom = (f"{CUSTOM_GROUP}/{version}", now + self.rediscover)
        return self._custom[0]

    async def _get(self, client, api: str, path: str, params: dict[str, str], what: str, wording: str) -> dict:
        try:
            return await client.get_raw(api + path, {k: v for k, v in params.items() if v})
        except APIError as e:
            raise MetricsUnavailable(f"unable to fetch metrics from {wording} metrics API: {_message(e, what)}") from None

    async def resource_metric(self, namespace: str, selector: str, resource: str, container: str = "") -> dict[str, Sample]:
        """GetResourceMetric: each pod's usage of `resource`, summed over its containers (a pod missing
        it in any is left out) or of one container (a pod without that container fails the metric)."""
        got = await self._get(self.resource_api, RESOURCE, f"/namespaces/{namespace}/pods", {"labelSelector": selector},
                              "pods.metrics.k8s.io", "resource")
        items = got.get("items") or []
        if not items:
            raise MetricsUnavailable("no metrics returned from resource metrics API")
        out = {}
        for pm in items:
            cs = pm.get("containers") or []
            if container:
                c = next((c for c in cs if c.get("name") == container), None)
                if c is None:
                    md = pm["metadata"]
                    raise MetricsUnavailable(f"failed to get container metrics: container {container} not present "
                                             f"in metrics for pod {md.get('namespace')}/{md['name']}")
                cs = [c]
            elif not cs:
                continue
            usages = [(c.get("usage") or {}).get(resource) for c in cs]
            if any(u is None for u in usages):
                continue
            out[pm["metadata"]["name"]] = Sample(sum(milli(u) for u in usages), parse_time(pm["timestamp"]),
                                                 _seconds(pm.get("window", "")))
        return out

    async def pods_metric(self, namespace: str, selector: str, metric: str, metric_selector: str = "") -> dict[str, Sample]:
        """GetRawMetric: a custom metric of every pod the selector picks."""
        got = await self._get(self.custom_api, await self._custom_api(), f"/namespaces/{namespace}/pods/*/{metric}",
                              {"labelSelector": selector, "metricLabelSelector": metric_selector},
                              "pods.custom.metrics.k8s.io *", "custom")
        items = got.get("items") or []
        if not items:
            raise MetricsUnavailable("no metrics returned from custom metrics API")
        return {m["describedObject"]["name"]: Sample(milli(m["value"]), parse_time(m["timestamp"]),
                                                     float(m.get("windowSeconds") or DEFAULT_WINDOW)) for m in items}

    async def object_metric(self, namespace: str, metric: str, ref: dict, metric_selector: str = "") -> int:
        """GetObjectMetric: a custom metric of one object; a Namespace's at the root-scoped path."""
        api_version = ref.get("apiVersion") or "v1"
        group = api_version.split("/")[0] if "/" in api_version else ""
        kind = ref.get("kind", "")
        if kind == "Namespace" and not group:
            path, what = f"/namespaces/{namespace}/metrics/{metric}", f"namespaces.custom.metrics.k8s.io {namespace}"
        else:
            res = await self.client.mapping(group, kind)
            if res is None:  # the custom metrics client's RESTMapping, under the REST client's words
                raise MetricsUnavailable(f"unable to fetch metrics from custom metrics API: unable to map kind "
                                         f"{kind}{'.' + group if group else ''} to resource: no matches for kind "
                                         f'"{kind}" in group "{group}"')
            resource = f"{res.plural}.{res.group}" if res.group else res.plural
            path = f"/namespaces/{namespace}/{resource}/{ref.get('name', '')}/{metric}"
            what = f"{resource}.custom.metrics.k8s.io {ref.get('name', '')}"
        got = await self._get(self.custom_api, await self._custom_api(), path, {"metricLabelSelector": metric_selector},
                              what, "custom")
        items = got.get("items") or []
        if len(items) != 1:
            raise MetricsUnavailable("unable to fetch metrics from custom metrics API: the custom metrics API server "
                                     f"returned {len(items)} results when we asked for exactly one")
        return milli(items[0]["value"])

    async def external_metric(self, namespace: str, metric: str, selector: str = "") -> list[int]:
        """GetExternalMetric: the value of each series of `metric` the selector picks."""
        got = await self._get(self.external_api, EXTERNAL, f"/namespaces/{namespace}/{metric}", {"labelSelector": selector},
                              f"{metric}.external.metrics.k8s.io", "external")
        items = got.get("items") or []
        if not items:
            raise MetricsUnavailable("no metrics returned from external metrics API")
        return [milli(m["value"]) for m in items]
