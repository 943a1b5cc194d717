"""kube-controller-manager's controller metrics, under upstream names, on a
registry of the manager's own (served with the API server's /metrics by `up`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from ..client.workqueue import WorkQueueMetrics
from ..clock import REAL, Clock
from ..machinery.metrics import Family
from .endpointslice_metrics import EndpointSliceMetrics
from .hpa.monitor import HPAMetrics
from .job_metrics import JobMetrics


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, clock: Clock = REAL) -> None:
        self.registry = registry or CollectorRegistry()
        #: client-go's workqueue_* metrics of the controllers' queues (see `meter`)
        self.workqueues = WorkQueueMetrics(clock)
        self.registry.register(self.workqueues)
        self.cronjob_creation_skew = Histogram(
            "cronjob_controller_job_creation_skew_duration_seconds",
            "[STABLE] Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
            buckets=tuple(2.0 ** i for i in range(10)), registry=self.registry)
        #: reason: new, recreate_terminating_or_failed, recreate_failed; status: succeeded, failed
        self.job_pods_creation = Counter(
            "job_controller_job_pods_creation",
            "[ALPHA] The number of Pods created by the Job controller labelled with a reason for the Pod creation.",
            ["reason", "status"], registry=self.registry)
        #: by zone key (GetZoneKey), each zone's from when the node lifecycle controller first sees it
        self.node_evictions = Family(
            "counter", "node_collector_evictions_total",
            "[STABLE] Number of Node evictions that happened since current instance of NodeController started.",
            ["zone"], self.registry)
        self.job = JobMetrics(self.registry)
        self.endpointslice = EndpointSliceMetrics(self.registry)
        self.hpa = HPAMetrics(self.registry)

    def meter(self, controllers) -> None:
        """Keep each controller's queue's workqueue metrics under its upstream queue name."""
        for c in controllers:
            c.queue.stats = self.workqueues.stats(c.queue_name)
