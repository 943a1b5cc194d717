"""HTTP endpoints of the metrics APIs, answered in-process the way an
aggregated adapter would answer them: `external.metrics.k8s.io/v1beta1`
(ExternalMetricValueList), `custom.metrics.k8s.io/v1beta2` (MetricValueList
for namespaced and cluster-scoped objects, `*` with a labelSelector for many)
and `metrics.k8s.io/v1beta1` nodes and pods (NodeMetrics, PodMetrics, as
metrics-server serves them), with the group and resource discovery
documents for each."""

from __future__ import annotations

import re
from collections.abc import Mapping

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


#: (path pattern, MetricsAPI method) of every GET the metrics APIs answer; a `{name}` is one path segment
_ROUTES = [
    (f"/apis/{EXTERNAL}/{VERSION}/namespaces/{{namespace}}/{{metric}}", "external"),
    (f"/apis/{CUSTOM}/{CUSTOM_VERSION}/namespaces/{{name}}/metrics/{{metric}}", "custom_namespace"),
    (f"/apis/{CUSTOM}/{CUSTOM_VERSION}/namespaces/{{namespace}}/{{resource}}/{{name}}/{{metric}}", "custom"),
    (f"/apis/{CUSTOM}/{CUSTOM_VERSION}/{{resource}}/{{name}}/{{metric}}", "custom"),
    (f"/apis/{RESOURCE}/{VERSION}/namespaces/{{namespace}}/pods", "pods"),
    (f"/apis/{RESOURCE}/{VERSION}/namespaces/{{namespace}}/pods/{{name}}", "pods"),
    (f"/apis/{RESOURCE}/{VERSION}/pods", "pods"),
    (f"/apis/{RESOURCE}/{VERSION}/nodes", "nodes"),
    (f"/apis/{RESOURCE}/{VERSION}/nodes/{{name}}", "nodes"),
]


def _pattern(route: str) -> re.Pattern:
    """A route as aiohttp matches it: each `{name}` one segment."""
    return re.compile(re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^{}/]+)", re.escape(route)))


class MetricsAPI:
    """The answers, each `(match, query, accept) -> document` raising APIError: served over HTTP by
    the routes `add_routes` adds, and in-process by `get` (the server's answer to its loopback
    clients' GETs of these groups)."""

    def __init__(self, provider: MetricsProvider):
        self.provider = provider
        self._documents = {f"/apis/{g}": group_document(g) for g in GROUPS}
        self._documents.update({f"/apis/{g}/{v}": resource_list(g) for g, v in GROUPS.items()})
        self._compiled = [(_pattern(route), getattr(self, name)) for route, name in _ROUTES]
        #: the groups it no longer serves (their APIService was deleted): not found, as upstream, which
        #: has no built-in adapter, answers a group nothing serves
        self.withdrawn: frozenset[str] = frozenset()

    def discovery(self) -> list[tuple[dict, dict]]:
        """(APIGroup, APIResourceList) for each group it serves, for the server's /apis."""
        return [(group_document(g), resource_list(g)) for g in GROUPS if g not in self.withdrawn]

    def add_routes(self, app: web.Application) -> None:
        for path, doc in self._documents.items():
            app.router.add_get(path, _http(self._served(path, lambda match, query, accept, doc=doc: _document(doc))))
        for route, name in _ROUTES:
            app.router.add_get(route, _http(self._served(route, getattr(self, name))))

    def _served(self, route: str, answer):
        """`answer`, or route_not_found while the route's group is withdrawn."""
        group = route.split("/")[2]

        async def served(match: dict, query: Mapping[str, str], accept: str) -> dict:
            if group in self.withdrawn:
                raise errors.route_not_found()
            return await answer(match, query, accept)
        return served

    async def get(self, path: str, query: Mapping[str, str], accept: str = "") -> dict:
        """The document a GET of `path` answers; APIError where it fails, route_not_found where no
        route takes it."""
        if path.split("/", 3)[2] in self.withdrawn:
            raise errors.route_not_found()
        if (doc := self._documents.get(path)) is not None:
            return doc
        for pattern, answer in self._compiled:
            if m := pattern.fullmatch(path):
                return await answer(m.groupdict(), query, accept)
        raise errors.route_not_found()

    async def external(self, m: dict, query: Mapping[str, str], accept: str) -> dict:
        try:
            return await self.provider.external_metric_list(m["namespace"], m["metric"], query.get("labelSelector", ""))
        except MetricsUnavailable as e:
            raise errors.APIError(404, "NotFound", str(e)) from None

    async def custom(self, m: dict, query: Mapping[str, str], accept: str) -> dict:
        return await self._custom(m.get("namespace"), m["resource"], m["name"], m["metric"], query)

    async def custom_namespace(self, m: dict, query: Mapping[str, str], accept: str) -> dict:
        """A metric about a Namespace object itself."""
        return await self._custom(None, "namespaces", m["name"], m["metric"], query)

    async def _custom(self, namespace: str | None, resource: str, name: str, metric: str,
                      query: Mapping[str, str]) -> dict:
        try:
            return await self.provider.custom_metric_list(namespace, resource, name, metric,
                                                          query.get("labelSelector", ""))
        except MetricsUnavailable as e:
            raise errors.APIError(404, "NotFound", str(e)) from None

    async def pods(self, m: dict, query: Mapping[str, str], accept: str) -> dict:
        """PodMetrics as metrics-server serves them: a list (label selector, its parse error a 400) or one
        pod (a get reads no selector)."""
        ns, name = m.get("namespace"), m.get("name", "")
        _list_options(query, name, "pods")
        items = await self.provider.pod_metrics(ns, "" if name else query.get("labelSelector", ""), name)
        if name and not items:
            raise errors.APIError(404, "NotFound", f'podmetrics.metrics.k8s.io "{ns}/{name}" not found',
                                  {"name": f"{ns}/{name}", "group": RESOURCE, "kind": "podmetrics"})
        if _wants_table(accept):
            return _table(items, _pod_total)
        if name:
            return items[0]
        return {"kind": "PodMetricsList", "apiVersion": f"{RESOURCE}/{VERSION}", "metadata": {}, "items": items}

    async def nodes(self, m: dict, query: Mapping[str, str], accept: str) -> dict:
        """NodeMetrics: a list (label selector, its parse error a 400) or one node (no selector)."""
        name = m.get("name", "")
        _list_options(query, name, "nodes")
        items = await self.provider.node_metrics("" if name else query.get("labelSelector", ""), name)
        if name and not items:
            raise errors.APIError(404, "NotFound", f'nodemetrics.metrics.k8s.io "{name}" not found',
                                  {"name": name, "group": RESOURCE, "kind": "nodemetrics"})
        if _wants_table(accept):
            return _table(items, lambda nm: {r: parse_quantity(q) for r, q in nm["usage"].items()})
        if name:
            return items[0]
        return {"kind": "NodeMetricsList", "apiVersion": f"{RESOURCE}/{VERSION}", "metadata": {}, "items": items}


async def _document(doc: dict) -> dict:
    return doc


def _http(answer):
    """An aiohttp handler of an answer: its document, or its APIError's Status."""
    async def handler(request: web.Request) -> web.Response:
        try:
            return json_response(await answer(dict(request.match_info), request.query, request.headers.get("Accept", "")))
        except errors.APIError as e:
            return error_response(e)
    return handler


def _list_options(query: Mapping[str, str], name: str, plural: str) -> None:
    """A list's options decoded as ListResource decodes them (a named get reads none): an integer that does
    not parse is a 400 before the selector is read. metrics-server's storage lists but does not watch: a
    list's ?watch is refused once its label selector is read (405, naming the resource), not answered as a
    list that a watching client cannot decode."""
    if name:
        return
    integer(query, "timeoutSeconds")
    integer(query, "limit")
    watch = query.get("watch")
    if watch is None or watch == "0" or watch.lower() == "false":
        return
    if query.get("labelSelector"):
        parse_label_selector(query["labelSelector"])
    raise errors.method_not_supported(RESOURCE, plural, "watch")


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept


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
