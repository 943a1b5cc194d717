"""The OpenAPI definitions of the metrics APIs answered in-process: metrics.k8s.io/v1beta1
(NodeMetrics, PodMetrics and their lists) as metrics-server publishes them, and
custom.metrics.k8s.io/v1beta2 (MetricValue) and external.metrics.k8s.io/v1beta1
(ExternalMetricValue) as a custom-metrics adapter publishes them; kube-aggregator merges
them into /openapi/v2 and /openapi/v3, which `kubectl explain podmetrics` reads. In the
schema module's JSON Schema form, so the API server's OpenAPI builder renders them as it
renders the built-in kinds; `define` adds them."""

from __future__ import annotations

from .. import schema
from .api import CUSTOM, CUSTOM_VERSION, EXTERNAL, VERSION
from .api import RESOURCE as GROUP

_P = "io.k8s.metrics.pkg.apis.metrics.v1beta1."
_CUSTOM = "io.k8s.metrics.pkg.apis.custom_metrics.v1beta2."
_EXTERNAL = "io.k8s.metrics.pkg.apis.external_metrics.v1beta1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
DURATION = _META + "Duration"
#: the kinds described, (group, version, plural, kind, namespaced, verbs): metrics-server's two
#: as its REST storage registers them; the adapters' two with no verbs, as their metric-named
#: routes are no resource's paths (ROUTES describes them)
KINDS = ((GROUP, VERSION, "nodes", "NodeMetrics", False, ("get", "list")),
         (GROUP, VERSION, "pods", "PodMetrics", True, ("get", "list")),
         (CUSTOM, CUSTOM_VERSION, "metricvalues", "MetricValue", True, ()),
         (EXTERNAL, VERSION, "externalmetrics", "ExternalMetricValue", True, ()))
#: the group-versions whose documents /openapi/v3 serves though no stored resource is in them
GROUP_VERSIONS = frozenset((group, version) for group, version, *_ in KINDS)
_DESCRIBED = "list custom metrics describing an object or objects"
#: the adapters' metric-named GET routes, as custom-metrics-apiserver's installer registers them (its
#: CMHandlers and EMHandlers), by group and kind: (the path after the group-version, the path parameters the
#: route declares (the external one names `name`, though its path holds `{resource}`), its operation
#: id, description and query parameters beside ListOptions'); each answers the kind's List
ROUTES = {
    (CUSTOM, "MetricValue"): (
        ("{resource}/{name}/{subresource}", ("resource", "name", "subresource"), "listMetricValue", _DESCRIBED,
         ("metricLabelSelector",)),
        ("namespaces/{namespace}/{resource}/{name}/{subresource}", ("namespace", "resource", "name", "subresource"),
         "listNamespacedMetricValue", _DESCRIBED, ("metricLabelSelector",)),
        ("namespaces/{namespace}/metrics/{name}", ("namespace", "name"), "readMetricValueForNamespace", _DESCRIBED,
         ("metricLabelSelector",))),
    (EXTERNAL, "ExternalMetricValue"): (
        ("namespaces/{namespace}/{resource}", ("namespace", "name"), "listExternalMetricValue",
         "list external metrics", ()),),
}


def _ref(name: str, description: str = "") -> dict:
    return {"$ref": schema.REF_PREFIX + name, **({"description": description} if description else {})}


def _gvk(kind: str, group: str = GROUP, version: str = VERSION) -> list[dict]:
    return [{"group": group, "kind": kind, "version": version}]


def _usage() -> dict:
    return {"description": "The memory usage is the memory working set.", "type": "object",
            "additionalProperties": _ref(_QUANTITY)}


def _definitions() -> dict[str, dict]:
    # apiVersion, kind, metadata and a list's metadata described as every built-in kind's
    pod = schema.builtin_definitions()["io.k8s.api.core.v1.Pod"]["properties"]
    pod_list = schema.builtin_definitions()["io.k8s.api.core.v1.PodList"]["properties"]
    common = {"apiVersion": pod["apiVersion"], "kind": pod["kind"],
              "metadata": _ref(_META + "ObjectMeta", pod["metadata"]["description"])}
    window = {"timestamp": _ref(_META + "Time", "The following fields define time interval from which metrics were "
                                                "collected from the interval [Timestamp-Window, Timestamp]."),
              "window": _ref(DURATION)}

    def listed(kind: str, what: str) -> dict:
        return {"description": f"{kind}List is a list of {kind}.", "type": "object", "required": ["items"],
                "properties": {"apiVersion": pod_list["apiVersion"],
                               "items": {"description": f"List of {what} metrics.", "type": "array",
                                         "items": _ref(_P + kind)},
                               "kind": pod_list["kind"],
                               "metadata": _ref(_META + "ListMeta", pod_list["metadata"]["description"])},
                "x-kubernetes-group-version-kind": _gvk(kind + "List")}

    return {
        DURATION: {"description": "Duration is a wrapper around time.Duration which supports correct marshaling to "
                                  "YAML and JSON. In particular, it marshals into strings, which can be used as map "
                                  "keys in json.", "type": "string"},
        _P + "ContainerMetrics": {
            "description": "ContainerMetrics sets resource usage metrics of a container.", "type": "object",
            "required": ["name", "usage"],
            "properties": {"name": {"description": "Container name corresponding to the one from pod.spec.containers.",
                                    "type": "string"},
                           "usage": _usage()}},
        _P + "NodeMetrics": {
            "description": "NodeMetrics sets resource usage metrics of a node.", "type": "object",
            "required": ["timestamp", "window", "usage"],
            "properties": {**common, **window, "usage": _usage()},
            "x-kubernetes-group-version-kind": _gvk("NodeMetrics")},
        _P + "NodeMetricsList": listed("NodeMetrics", "node"),
        _P + "PodMetrics": {
            "description": "PodMetrics sets resource usage metrics of a pod.", "type": "object",
            "required": ["timestamp", "window", "containers"],
            "properties": {**common, **window,
                           "containers": {"description": "Metrics for all containers are collected within the same "
                                                         "time window.", "type": "array",
                                          "items": _ref(_P + "ContainerMetrics"), "x-kubernetes-list-type": "atomic"}},
            "x-kubernetes-group-version-kind": _gvk("PodMetrics")},
        _P + "PodMetricsList": listed("PodMetrics", "pod"),
        **_adapter_definitions(pod["apiVersion"], pod["kind"], pod_list["metadata"]["description"]),
    }


def _adapter_definitions(api_version: dict, kind: dict, list_meta: str) -> dict[str, dict]:
    """custom.metrics.k8s.io's MetricValue and external.metrics.k8s.io's ExternalMetricValue, with their lists
    (k8s.io/metrics' types): the items carry apiVersion and kind but no metadata."""
    window = ("indicates the window ([Timestamp-Window, Timestamp]) from which these metrics were calculated, when "
              "returning rate metrics calculated from cumulative metrics (or zero for non-calculated instantaneous "
              "metrics).")
    timestamp = _ref(_META + "Time", "indicates the time at which the metrics were produced")

    def listed(prefix: str, kind_name: str, group: str, version: str, description: str, items: str) -> dict:
        return {"description": description, "type": "object", "required": ["items"],
                "properties": {"apiVersion": api_version,
                               "items": {"description": items, "type": "array", "items": _ref(prefix + kind_name)},
                               "kind": kind, "metadata": _ref(_META + "ListMeta", list_meta)},
                "x-kubernetes-group-version-kind": _gvk(kind_name + "List", group, version)}

    return {
        _CUSTOM + "MetricIdentifier": {
            "description": "MetricIdentifier identifies a metric by name and, optionally, selector", "type": "object",
            "required": ["name"],
            "properties": {"name": {"description": "name is the name of the given metric", "type": "string"},
                           "selector": _ref(_META + "LabelSelector",
                                            "selector represents the label selector that could be used to select "
                                            "this metric, and will generally just be the selector passed in to the "
                                            "query used to fetch this metric. When left blank, only the metric's "
                                            "Name will be used to gather metrics.")}},
        _CUSTOM + "MetricValue": {
            "description": "MetricValue is the metric value for some object", "type": "object",
            "required": ["describedObject", "metric", "timestamp", "value"],
            "properties": {"apiVersion": api_version, "kind": kind,
                           "describedObject": _ref("io.k8s.api.core.v1.ObjectReference",
                                                   "a reference to the described object"),
                           "metric": _ref(_CUSTOM + "MetricIdentifier"), "timestamp": timestamp,
                           "windowSeconds": {"description": window, "type": "integer", "format": "int64"},
                           "value": _ref(_QUANTITY, "the value of the metric for this")},
            "x-kubernetes-group-version-kind": _gvk("MetricValue", CUSTOM, CUSTOM_VERSION)},
        _CUSTOM + "MetricValueList": listed(
            _CUSTOM, "MetricValue", CUSTOM, CUSTOM_VERSION,
            "MetricValueList is a list of values for a given metric for some set of objects",
            "the value of the metric across the described objects"),
        _EXTERNAL + "ExternalMetricValue": {
            "description": "ExternalMetricValue is a metric value for external metric A single metric value is "
                           "identified by metric name and a set of string labels. For one metric there can be "
                           "multiple values with different sets of labels.", "type": "object",
            "required": ["metricName", "metricLabels", "timestamp", "value"],
            "properties": {"apiVersion": api_version, "kind": kind,
                           "metricName": {"description": "the name of the metric", "type": "string"},
                           "metricLabels": {"description": "a set of labels that identify a single time series for "
                                                           "the metric", "type": "object",
                                            "additionalProperties": {"type": "string", "default": ""}},
                           "timestamp": timestamp,
                           "window": {"description": window, "type": "integer", "format": "int64"},
                           "value": _ref(_QUANTITY, "the value of the metric")},
            "x-kubernetes-group-version-kind": _gvk("ExternalMetricValue", EXTERNAL, VERSION)},
        _EXTERNAL + "ExternalMetricValueList": listed(
            _EXTERNAL, "ExternalMetricValue", EXTERNAL, VERSION,
            "ExternalMetricValueList is a list of values for a given metric for some set labels",
            "value of the metric matching a given set of labels"),
    }


def define() -> None:
    """Add the definitions to the schema's (idempotent)."""
    schema.define(_definitions())
