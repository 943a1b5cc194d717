"""The OpenAPI definitions of metrics.k8s.io/v1beta1 (NodeMetrics, PodMetrics and their
lists), as metrics-server publishes them and kube-aggregator merges them into /openapi/v2
and /openapi/v3: what `kubectl explain podmetrics` reads. In the schema module's JSON
Schema form, so the API server's OpenAPI builder renders them as it renders the built-in
kinds; `define` adds them."""

from __future__ import annotations

from .. import schema
from .api import RESOURCE as GROUP
from .api import VERSION

_P = "io.k8s.metrics.pkg.apis.metrics.v1beta1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
DURATION = _META + "Duration"
#: the kinds served, (plural, kind, namespaced), as metrics-server's REST storage registers them
KINDS = (("nodes", "NodeMetrics", False), ("pods", "PodMetrics", True))


def _ref(name: str, description: str = "") -> dict:
    return {"$ref": schema.REF_PREFIX + name, **({"description": description} if description else {})}


def _gvk(kind: str) -> list[dict]:
    return [{"group": GROUP, "kind": kind, "version": VERSION}]


def _usage() -> dict:
    return {"description": "The memory usage is the memory working set.", "type": "object",
            "additionalProperties": _ref("io.k8s.apimachinery.pkg.api.resource.Quantity")}


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
    }


def define() -> None:
    """Add the definitions to the schema's (idempotent)."""
    schema.define(_definitions())
