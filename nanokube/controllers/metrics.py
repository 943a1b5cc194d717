"""kube-controller-manager's controller metrics, under upstream names, on a
registry of the manager's own (served with the API server's /metrics by `up`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.cronjob_creation_skew = Histogram(
            "cronjob_controller_job_creation_skew_duration_seconds",
            "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
            buckets=tuple(2.0 ** i for i in range(10)), registry=self.registry)
        #: reason: new, recreate_terminating_or_failed, recreate_failed; status: succeeded, failed
        self.job_pods_creation = Counter(
            "job_controller_job_pods_creation",
            "The number of Pods created by the Job controller labelled with a reason for the Pod creation.",
            ["reason", "status"], registry=self.registry)
