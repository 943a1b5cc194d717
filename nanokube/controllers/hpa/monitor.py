"""The HPA controller's metrics under upstream's names (pkg/controller/podautoscaler/monitor), on
kube-controller-manager's registry: each reconcile and each metric computation counted and timed by
what it decided (`action`) and how it failed (`error`), the number of HPAs the controller tracks,
and each HPA's desired replicas (a deleted HPA's series stays until the process ends: upstream's
monitor deletes none)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ...machinery.metrics import Family, exponential_buckets

#: action labels: what a reconcile (or one metric's proposal) would do to the target
SCALE_UP, SCALE_DOWN, NONE = "scale_up", "scale_down", "none"
#: error labels: `spec` for an HPA whose spec the controller cannot act on, else `internal`
SPEC, INTERNAL = "spec", "internal"

_ACTION = "The label 'action' should be either 'scale_down', 'scale_up', or 'none'."
_ERROR = "the label 'error' should be either 'spec', 'internal', or 'none'."
_FIRST = ("Note that if both spec and internal errors happen during a reconciliation, the first one to occur is "
          "reported in `error` label.")
_TYPE = "The label 'metric_type' corresponds to HPA.spec.metrics[*].type"


def action(proposed: int, current: int) -> str:
    return SCALE_UP if proposed > current else SCALE_DOWN if proposed < current else NONE


class HPAMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        buckets = exponential_buckets(0.001, 2, 15)
        self.reconciliations = Family(
            "counter", "horizontal_pod_autoscaler_controller_reconciliations_total",
            f"[ALPHA] Number of reconciliations of HPA controller. {_ACTION} Also, {_ERROR} {_FIRST}",
            ["action", "error"], registry)
        self.reconciliation_duration = Family(
            "histogram", "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds",
            f"[ALPHA] The time(seconds) that the HPA controller takes to reconcile once. {_ACTION} Also, {_ERROR} {_FIRST}",
            ["action", "error"], registry, buckets)
        self.metric_computations = Family(
            "counter", "horizontal_pod_autoscaler_controller_metric_computation_total",
            f"[ALPHA] Number of metric computations. {_ACTION} Also, {_ERROR} {_TYPE}",
            ["action", "error", "metric_type"], registry)
        self.metric_computation_duration = Family(
            "histogram", "horizontal_pod_autoscaler_controller_metric_computation_duration_seconds",
            f"[ALPHA] The time(seconds) that the HPA controller takes to calculate one metric. {_ACTION} "
            f"T{_ERROR[1:]} {_TYPE}", ["action", "error", "metric_type"], registry, buckets)
        self.hpas = Family("gauge", "horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers",
                           "[ALPHA] Current number of controlled HPA objects.", [], registry)
        self.desired_replicas = Family("gauge", "horizontal_pod_autoscaler_controller_desired_replicas",
                                       "[ALPHA] Current desired replica count for HPA objects.",
                                       ["hpa_name", "namespace"], registry)

    def reconciled(self, action_: str, error: str, seconds: float) -> None:
        self.reconciliations.labels(action_, error).inc()
        self.reconciliation_duration.labels(action_, error).observe(seconds)

    def computed(self, action_: str, error: str, seconds: float, metric_type: str) -> None:
        self.metric_computations.labels(action_, error, metric_type).inc()
        self.metric_computation_duration.labels(action_, error, metric_type).observe(seconds)
