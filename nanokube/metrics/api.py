"""HTTP endpoints of the metrics APIs, answered in-process the way an
aggregated adapter would answer them: `external.metrics.k8s.io/v1beta1`
(ExternalMetricValueList) and `metrics.k8s.io/v1beta1` pods (PodMetricsList),
with the group and resource discovery documents for both."""

from __future__ import annotations

from aiohttp import web

from ..apiserver import errors
from ..apiserver.handlers import error_response, json_response
from .provider import MetricsProvider, MetricsUnavailable

EXTERNAL = "external.metrics.k8s.io"
RESOURCE = "metrics.k8s.io"
VERSION = "v1beta1"


def group_document(group: str) -> dict:
    gv = {"groupVersion": f"{group}/{VERSION}", "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}


def resource_list(group: str) -> dict:
    if group == EXTERNAL:
        resources = [{"name": "externalmetrics", "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList",
                      "verbs": ["get"]}]
    else:
        resources = [{"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]}]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{VERSION}", "resources": resources}


class MetricsAPI:
    def __init__(self, provider: MetricsProvider):
        self.provider = provider

    def discovery(self) -> list[tuple[dict, dict]]:
        """(APIGroup, APIResourceList) for each group, for the server's /apis."""
        return [(group_document(g), resource_list(g)) for g in (EXTERNAL, RESOURCE)]

    def add_routes(self, app: web.Application) -> None:
        for group in (EXTERNAL, RESOURCE):
            app.router.add_get(f"/apis/{group}", lambda r, g=group: self._json(group_document(g)))
            app.router.add_get(f"/apis/{group}/{VERSION}", lambda r, g=group: self._json(resource_list(g)))
        app.router.add_get(f"/apis/{EXTERNAL}/{VERSION}/namespaces/{{namespace}}/{{metric}}", self.external)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/namespaces/{{namespace}}/pods", self.pods)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/pods", self.pods)

    async def _json(self, obj: dict) -> web.Response:
        return json_response(obj)

    async def external(self, request: web.Request) -> web.Response:
        ns, metric = request.match_info["namespace"], request.match_info["metric"]
        try:
            return json_response(await self.provider.external_metric_list(ns, metric, request.query.get("labelSelector", "")))
        except MetricsUnavailable as e:
            return error_response(errors.APIError(404, "NotFound", str(e)))

    async def pods(self, request: web.Request) -> web.Response:
        items = await self.provider.pod_metrics(request.match_info.get("namespace"), request.query.get("labelSelector", ""))
        return json_response({"kind": "PodMetricsList", "apiVersion": f"{RESOURCE}/{VERSION}", "metadata": {}, "items": items})
