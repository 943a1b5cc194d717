"""kube-scheduler's Prometheus metrics, under upstream names, on a registry
of the scheduler's own (served by whoever mounts /metrics). Each family
remembers its labelled children: prometheus_client's own `labels()` costs
more than the scheduler's per-pod work it measures."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_ATTEMPT_BUCKETS = tuple(0.001 * 2 ** i for i in range(15))
_E2E_BUCKETS = tuple(0.01 * 2 ** i for i in range(20))
_PLUGIN_BUCKETS = tuple(0.00001 * 1.5 ** i for i in range(20))
_VICTIM_BUCKETS = tuple(2 ** i for i in range(11))


class _Children:
    """A metric family with its children cached by label values; `labels()` as prometheus_client's."""

    def __init__(self, family) -> None:
        self.family = family
        self._children: dict[tuple, object] = {}

    def labels(self, *values: str):
        try:
            return self._children[values]
        except KeyError:
            child = self._children[values] = self.family.labels(*values)
            return child


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = _Children(Counter(
            "scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result.",
            ["result", "profile"], registry=r))
        self.attempt_duration = _Children(Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"], buckets=_ATTEMPT_BUCKETS, registry=r))
        self.pod_scheduling_duration = _Children(Histogram(
            "scheduler_pod_scheduling_duration_seconds",
            "E2e latency for a pod being scheduled which may include multiple scheduling attempts.",
            ["attempts"], buckets=_E2E_BUCKETS, registry=r))
        self.pod_scheduling_sli_duration = _Children(Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue.",
            ["attempts"], buckets=_E2E_BUCKETS, registry=r))
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
            buckets=(1, 2, 4, 8, 16), registry=r)
        self.pending_pods = _Children(Gauge(
            "scheduler_pending_pods", "Number of pending pods, by the queue type.", ["queue"], registry=r))
        self.queue_incoming = _Children(Counter(
            "scheduler_queue_incoming_pods", "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], registry=r))
        self.plugin_execution = _Children(Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=_PLUGIN_BUCKETS, registry=r))
        self.unschedulable_pods = _Children(Gauge(
            "scheduler_unschedulable_pods", "The number of unschedulable pods broken down by plugin name.",
            ["plugin", "profile"], registry=r))

        self.podgroup_schedule_attempts = _Children(Counter(
            "scheduler_podgroup_schedule_attempts",
            "Number of attempts to schedule pod group, by the result, scheduler profile and entity type "
            "('podgroup' or 'compositepodgroup').", ["result", "profile", "type"], registry=r))
        self.podgroup_attempt_duration = _Children(Histogram(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "Pod group scheduling attempt latency in seconds, by the result, scheduler profile and entity type.",
            ["result", "profile", "type"], buckets=_ATTEMPT_BUCKETS, registry=r))
        self.podgroup_algorithm_duration = _Children(Histogram(
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            "Pod group scheduling algorithm latency in seconds, by scheduler profile and entity type.",
            ["profile", "type"], buckets=_ATTEMPT_BUCKETS, registry=r))
        self.workload_preemption_attempts = _Children(Counter(
            "scheduler_workload_preemption_attempts",
            "Number of workload-aware preemption attempts, by the PodGroupPostFilter status.", ["result"], registry=r))
        self.workload_preemption_victims = Histogram(
            "scheduler_workload_preemption_victims", "Number of pod preemption victims caused by workload preemption.",
            buckets=_VICTIM_BUCKETS, registry=r)
        self.preemption_workload_disruptions = _Children(Histogram(
            "scheduler_preemption_workload_disruptions",
            "Number of workload preemption units being preempted. A single preemption unit can be all pods in a "
            "pod group (in case of DisruptionMode=all), or a single pod (in case of DisruptionMode=single).",
            ["preemptor"], buckets=_VICTIM_BUCKETS, registry=r))

    def podgroup_attempt(self, result: str, profile: str, entity: str, seconds: float) -> None:
        """One workload cycle of a group: result is scheduled, unschedulable,
        waiting_on_preemption or error; entity podgroup or compositepodgroup."""
        self.podgroup_schedule_attempts.labels(result, profile, entity).inc()
        self.podgroup_attempt_duration.labels(result, profile, entity).observe(seconds)

    def workload_preemption(self, status: str, victim_pods: int, units: int, preemptor: str) -> None:
        """A PodGroupPostFilter run; victims are counted only when it chose some."""
        self.workload_preemption_attempts.labels(status).inc()
        if units:
            self.workload_preemption_victims.observe(victim_pods)
            self.preemption_workload_disruptions.labels(preemptor).observe(units)

    def plugin_duration(self, plugin: str, point: str, status, seconds: float) -> None:
        code = "Success" if status is None else status.code.name.title().replace("_", "")
        self.plugin_execution.labels(plugin, point, code).observe(seconds)

    def pending_from(self, counts: Callable[[], tuple[int, int, int, int]]) -> None:
        """The pending-pods gauge, read from the queue's (active, backoff, unschedulable, gated)
        sizes when scraped: they change several times per pod, and setting four gauges on each
        change cost more than the change."""
        for i, q in enumerate(("active", "backoff", "unschedulable", "gated")):
            self.pending_pods.labels(q).set_function(lambda i=i: counts()[i])
