"""HTTP endpoints of the metrics APIs, answered in-process the way an
aggregated adapter would answer them: `external.metrics.k8s.io/v1beta1`
(ExternalMetricValueList), `custom.metrics.k8s.io/v1beta2` (MetricValueList
for namespaced and cluster-scoped objects, `*` with a labelSelector for many)
and `metrics.k8s.io/v1beta1` nodes and pods (NodeMetrics, PodMetrics, as
metrics-server serves them), with the group and resource discovery
documents for each."""

from __future__ import annotations

from aiohttp import web

from ..machinery import errors
from ..machinery.responses import error_response, json_response
from ..machinery.quantity import parse_quantity
from ..machinery.queryparams import integer
from ..machinery.selectors import parse_label_selector
from .provider import MetricsProvider, MetricsUnavailable, cpu_quantity, memory_quantity

EXTERNAL = "external.metrics.k8s.io"
CUSTOM = "custom.metrics.k8s.io"
RESOURCE = "metrics.k8s.io"
VERSION = "v1beta1"
CUSTOM_VERSION = "v1beta2"
GROUPS = {EXTERNAL: VERSION, CUSTOM: CUSTOM_VERSION, RESOURCE: VERSION}


def group_document(group: str) -> dict:
    gv = {"groupVersion": f"{group}/{GROUPS[group]}", "version": GROUPS[group]}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}


def resource_list(group: str) -> dict:
    if group == EXTERNAL:
        resources = [{"name": "externalmetrics", "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList",
                      "verbs": ["get"]}]
    elif group == CUSTOM:
        resources = [{"name": f"{r}/*", "singularName": "", "namespaced": r != "nodes", "kind": "MetricValueList",
                      "verbs": ["get"]} for r in ("pods", "services", "deployments.apps", "nodes")]
    else:
        resources = [{"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
                      "verbs": ["get", "list"]},
                     {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
                      "verbs": ["get", "list"]}]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{GROUPS[group]}",
            "resources": resources}


def _static(doc: dict):
    async def handler(request: web.Request) -> web.Response:
        return json_response(doc)
    return handler


class MetricsAPI:
    def __init__(self, provider: MetricsProvider):
        self.provider = provider

    def discovery(self) -> list[tuple[dict, dict]]:
        """(APIGroup, APIResourceList) for each group, for the server's /apis."""
        return [(group_document(g), resource_list(g)) for g in GROUPS]

    def add_routes(self, app: web.Application) -> None:
        for group, version in GROUPS.items():
            app.router.add_get(f"/apis/{group}", _static(group_document(group)))
            app.router.add_get(f"/apis/{group}/{version}", _static(resource_list(group)))
        app.router.add_get(f"/apis/{EXTERNAL}/{VERSION}/namespaces/{{namespace}}/{{metric}}", self.external)
        custom = f"/apis/{CUSTOM}/{CUSTOM_VERSION}"
        app.router.add_get(custom + "/namespaces/{name}/metrics/{metric}", self.custom_namespace)
        app.router.add_get(custom + "/namespaces/{namespace}/{resource}/{name}/{metric}", self.custom)
        app.router.add_get(custom + "/{resource}/{name}/{metric}", self.custom)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/namespaces/{{namespace}}/pods", self.pods)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/namespaces/{{namespace}}/pods/{{name}}", self.pods)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/pods", self.pods)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/nodes", self.nodes)
        app.router.add_get(f"/apis/{RESOURCE}/{VERSION}/nodes/{{name}}", self.nodes)

    async def external(self, request: web.Request) -> web.Response:
        ns, metric = request.match_info["namespace"], request.match_info["metric"]
        try:
            return json_response(await self.provider.external_metric_list(ns, metric, request.query.get("labelSelector", "")))
        except MetricsUnavailable as e:
            return error_response(errors.APIError(404, "NotFound", str(e)))

    async def custom(self, request: web.Request) -> web.Response:
        m = request.match_info
        return await self._custom(m.get("namespace"), m["resource"], m["name"], m["metric"], request)

    async def custom_namespace(self, request: web.Request) -> web.Response:
        """A metric about a Namespace object itself."""
        m = request.match_info
        return await self._custom(None, "namespaces", m["name"], m["metric"], request)

    async def _custom(self, namespace: str | None, resource: str, name: str, metric: str,
                      request: web.Request) -> web.Response:
        try:
            return json_response(await self.provider.custom_metric_list(
                namespace, resource, name, metric, request.query.get("labelSelector", "")))
        except MetricsUnavailable as e:
            return error_response(errors.APIError(404, "NotFound", str(e)))
        except errors.APIError as e:
            return error_response(e)

    async def pods(self, request: web.Request) -> web.Response:
        """PodMetrics as metrics-server serves them: a list (label selector, its parse error a 400) or one
        pod (a get reads no selector)."""
        ns, name = request.match_info.get("namespace"), request.match_info.get("name", "")
        try:
            _list_options(request, name, "pods")
            items = await self.provider.pod_metrics(ns, "" if name else request.query.get("labelSelector", ""), name)
        except errors.APIError as e:
            return error_response(e)
        if name and not items:
            return error_response(errors.APIError(404, "NotFound", f'podmetrics.metrics.k8s.io "{ns}/{name}" not found',
                                                  {"name": f"{ns}/{name}", "group": RESOURCE, "kind": "podmetrics"}))
        if _wants_table(request):
            return json_response(_table(items, _pod_total))
        if name:
            return json_response(items[0])
        return json_response({"kind": "PodMetricsList", "apiVersion": f"{RESOURCE}/{VERSION}", "metadata": {}, "items": items})

    async def nodes(self, request: web.Request) -> web.Response:
        """NodeMetrics: a list (label selector, its parse error a 400) or one node (no selector)."""
        name = request.match_info.get("name", "")
        try:
            _list_options(request, name, "nodes")
            items = await self.provider.node_metrics("" if name else request.query.get("labelSelector", ""), name)
        except errors.APIError as e:
            return error_response(e)
        if name and not items:
            return error_response(errors.APIError(404, "NotFound", f'nodemetrics.metrics.k8s.io "{name}" not found',
                                                  {"name": name, "group": RESOURCE, "kind": "nodemetrics"}))
        if _wants_table(request):
            return json_response(_table(items, lambda nm: {r: parse_quantity(q) for r, q in nm["usage"].items()}))
        if name:
            return json_response(items[0])
        return json_response({"kind": "NodeMetricsList", "apiVersion": f"{RESOURCE}/{VERSION}", "metadata": {},
                              "items": items})


def _list_options(request: web.Request, name: str, plural: str) -> None:
    """A list's options decoded as ListResource decodes them (a named get reads none): an integer that does
    not parse is a 400 before the selector is read. metrics-server's storage lists but does not watch: a
    list's ?watch is refused once its label selector is read (405, naming the resource), not answered as a
    list that a watching client cannot decode."""
    if name:
        return
    integer(request.query, "timeoutSeconds")
    integer(request.query, "limit")
    watch = request.query.get("watch")
    if watch is None or watch == "0" or watch.lower() == "false":
        return
    if request.query.get("labelSelector"):
        parse_label_selector(request.query["labelSelector"])
    raise errors.method_not_supported(RESOURCE, plural, "watch")


def _wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _pod_total(pm: dict) -> dict:
    total: dict = {}
    for c in pm["containers"]:
        for r, q in c["usage"].items():
            total[r] = total.get(r, 0) + parse_quantity(q)
    return total


def _table(items: list[dict], usage_of) -> dict:
    """metrics-server's Table: Name, one quantity column per resource, Window."""
    columns = [{"name": "Name", "type": "string", "format": "name", "description": "Name of the resource",
                "priority": 0}]
    columns += [{"name": r, "type": "string", "format": "quantity", "description": "", "priority": 0}
                for r in ("cpu", "memory")]
    columns.append({"name": "Window", "type": "string", "format": "duration", "description": "", "priority": 0})
    rows = []
    for it in items:
        usage = usage_of(it)
        cells = [it["metadata"]["name"], cpu_quantity(int(usage.get("cpu", 0) * 1000)),
                 memory_quantity(int(usage.get("memory", 0))), it["window"]]
        rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                                "metadata": it["metadata"]}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": columns,
            "rows": rows}
