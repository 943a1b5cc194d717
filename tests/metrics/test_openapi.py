"""metrics.k8s.io's definitions in the API server's Swagger document: every reference resolves,
and the paths carry the operation ids metrics-server's installer gives them."""

import re

import orjson

from nanokube.apiserver import openapi
from nanokube.apiserver.app import _METRICS_RESOURCES
from nanokube.metrics import openapi as metrics_openapi
from nanokube.registry.base import all_resources


def test_the_swagger_document_holds_the_metrics_kinds_and_their_paths():
    metrics_openapi.define()
    doc = orjson.loads(openapi.build_v2(all_resources() + _METRICS_RESOURCES))
    refs = {m.decode() for m in re.findall(rb'"\$ref":"#/definitions/([^"]+)"', orjson.dumps(doc))}
    assert "io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics" in refs
    assert refs <= set(doc["definitions"])
    ops = {p: v["get"]["operationId"] for p, v in doc["paths"].items() if p.startswith("/apis/metrics.k8s.io/")}
    root = "/apis/metrics.k8s.io/v1beta1"
    assert ops == {f"{root}/nodes": "listMetricsV1beta1NodeMetrics",
                   f"{root}/nodes/{{name}}": "readMetricsV1beta1NodeMetrics",
                   f"{root}/namespaces/{{namespace}}/pods": "listMetricsV1beta1NamespacedPodMetrics",
                   f"{root}/namespaces/{{namespace}}/pods/{{name}}": "readMetricsV1beta1NamespacedPodMetrics",
                   f"{root}/pods": "listMetricsV1beta1PodMetricsForAllNamespaces"}
    pod = doc["definitions"]["io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics"]
    assert pod["required"] == ["timestamp", "window", "containers"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "metrics.k8s.io", "kind": "PodMetrics", "version": "v1beta1"}]
    assert doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.Duration"]["type"] == "string"


def test_the_adapters_kinds_are_defined_with_their_metric_named_routes():
    """custom.metrics.k8s.io and external.metrics.k8s.io are answered on metric-named routes, not a resource's:
    the paths custom-metrics-apiserver's installer registers, each listing its kind."""
    metrics_openapi.define()
    doc = orjson.loads(openapi.build_v2(all_resources() + _METRICS_RESOURCES))
    external = doc["definitions"]["io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue"]
    assert external["required"] == ["metricName", "metricLabels", "timestamp", "value"]
    assert external["properties"]["window"] == {"description": external["properties"]["window"]["description"],
                                                "type": "integer", "format": "int64"}
    value = doc["definitions"]["io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValue"]
    assert value["properties"]["metric"]["$ref"] == "#/definitions/io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricIdentifier"
    assert value["x-kubernetes-group-version-kind"] == [
        {"group": "custom.metrics.k8s.io", "kind": "MetricValue", "version": "v1beta2"}]
    ops = {p: v["get"]["operationId"] for p, v in doc["paths"].items()
           if p.startswith(("/apis/custom.metrics.k8s.io/", "/apis/external.metrics.k8s.io/"))}
    custom = "/apis/custom.metrics.k8s.io/v1beta2"
    assert ops == {f"{custom}/{{resource}}/{{name}}/{{subresource}}": "listMetricValue",
                   f"{custom}/namespaces/{{namespace}}/{{resource}}/{{name}}/{{subresource}}": "listNamespacedMetricValue",
                   f"{custom}/namespaces/{{namespace}}/metrics/{{name}}": "readMetricValueForNamespace",
                   "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{resource}": "listExternalMetricValue"}
