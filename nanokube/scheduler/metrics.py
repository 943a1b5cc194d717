"""kube-scheduler's Prometheus metrics, under upstream names, labels, buckets and HELP texts
(pkg/scheduler/metrics; component-base prefixes each HELP with its stability level), on a registry
of the scheduler's own (served by whoever mounts /metrics). The counters and
histograms are plain numbers (machinery's Family, exposed as prometheus_client's):
a pod that fits nowhere updates four series per attempt, and prometheus_client's
lock, observability checks and bucket loop cost ~22 k instructions of it."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

from ..machinery.metrics import Family, exponential_buckets

_ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
_E2E_BUCKETS = exponential_buckets(0.01, 2, 20)
_PLUGIN_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
_VICTIM_BUCKETS = exponential_buckets(1, 2, 11)
_EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)


class _Children:
    """A prometheus_client Gauge with its children cached by label values; `labels()` as its own."""

    def __init__(self, family) -> None:
        self.family = family
        self._children: dict[tuple, object] = {}

    def labels(self, *values: str):
        try:
            return self._children[values]
        except KeyError:
            child = self._children[values] = self.family.labels(*values)
            return child


def _code(status) -> str:
    """A status label as upstream's Code.String(): Success, Unschedulable, UnschedulableAndUnresolvable..."""
    return "Success" if status is None else status.code.name.title().replace("_", "")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        #: (extension point, status code or None, profile) -> its extension_point_duration series
        self._point_series: dict[tuple, object] = {}
        r = self.registry
        self.schedule_attempts = Family(
            "counter", "scheduler_schedule_attempts", "[STABLE] Number of attempts to schedule pods, by the result. "
            "'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], r)
        self.attempt_duration = Family(
            "histogram", "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], r, _ATTEMPT_BUCKETS)
        self.algorithm_duration = Family(
            "histogram", "scheduler_scheduling_algorithm_duration_seconds", "[ALPHA] Scheduling algorithm latency in "
            "seconds", [], r, _ATTEMPT_BUCKETS).labels()
        self.pod_scheduling_sli_duration = Family(
            "histogram", "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            ["attempts"], r, _E2E_BUCKETS)
        self.pod_scheduling_attempts = Family(
            "histogram", "scheduler_pod_scheduling_attempts", "[STABLE] Number of attempts to successfully schedule a pod.",
            [], r, (1, 2, 4, 8, 16)).labels()
        self.pending_pods = _Children(Gauge(
            "scheduler_pending_pods", "[STABLE] Number of pending pods, by the queue type. 'active' means number of "
            "pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of "
            "unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            ["queue"], registry=r))
        self.preemption_attempts = Family(
            "counter", "scheduler_preemption_attempts_total", "[STABLE] Total preemption attempts in the cluster till now",
            [], r).labels()
        self.preemption_victims = Family(
            "histogram", "scheduler_preemption_victims", "[STABLE] Number of selected preemption victims", [], r,
            exponential_buckets(1, 2, 7)).labels()
        self.queue_incoming = Family(
            "counter", "scheduler_queue_incoming_pods", "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], r)
        self.extension_point_duration = Family(
            "histogram", "scheduler_framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], r, _EXTENSION_POINT_BUCKETS)
        self.plugin_execution = Family(
            "histogram", "scheduler_plugin_execution_duration_seconds",
            "[ALPHA] Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], r, _PLUGIN_BUCKETS)
        self.unschedulable_pods = _Children(Gauge(
            "scheduler_unschedulable_pods", "[ALPHA] The number of unschedulable pods broken down by plugin name. "
            "A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have "
            "meaning only when broken down by plugin.", ["plugin", "profile"], registry=r))

        self.podgroup_schedule_attempts = Family(
            "counter", "scheduler_podgroup_schedule_attempts",
            "[ALPHA] Number of attempts to schedule pod group, by the result, scheduler profile and entity type "
            "('podgroup' or 'compositepodgroup'). 'unschedulable' means a pod group could not be scheduled, while "
            "'error' means an internal scheduler problem.", ["result", "profile", "type"], r)
        self.podgroup_attempt_duration = Family(
            "histogram", "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "[ALPHA] Pod group scheduling attempt latency in seconds, by the result, scheduler profile and entity type.",
            ["result", "profile", "type"], r, _ATTEMPT_BUCKETS)
        self.podgroup_algorithm_duration = Family(
            "histogram", "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            "[ALPHA] Pod group scheduling algorithm latency in seconds, by scheduler profile and entity type.",
            ["profile", "type"], r, _ATTEMPT_BUCKETS)
        self.workload_preemption_attempts = Family(
            "counter", "scheduler_workload_preemption_attempts",
            "[ALPHA] Total preemption attempts initiated by workload (including pod groups) in the cluster till now.",
            ["result"], r)
        self.workload_preemption_victims = Family(
            "histogram", "scheduler_workload_preemption_victims",
            "[ALPHA] Number of pod preemption victims caused by workload preemption.", [], r, _VICTIM_BUCKETS).labels()
        self.preemption_workload_disruptions = Family(
            "histogram", "scheduler_preemption_workload_disruptions",
            "[ALPHA] Number of workload preemption units being preempted. A single preemption unit can be all pods in a "
            "pod group (in case of DisruptionMode=all), or a single pod (in case of DisruptionMode=single).",
            ["preemptor"], r, _VICTIM_BUCKETS)

    def reset(self) -> None:
        """DELETE /metrics (kube-scheduler's legacyregistry.HandlerWithReset): the counters and
        histograms start again. The pending and unschedulable pods gauges are kept: they hold the
        queue's state, which clearing them would misstate until each series next changed."""
        for family in vars(self).values():
            if isinstance(family, Family):
                family.reset()

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

    def pod_scheduled(self, attempts: int, since_queued: float) -> None:
        """A pod bound after `attempts` attempts, `since_queued` seconds after it entered the queue;
        the SLI's attempts label stops at "15+" (getAttemptsLabel), as upstream's cardinality does."""
        self.pod_scheduling_sli_duration.labels(str(attempts) if attempts < 15 else "15+").observe(since_queued)
        self.pod_scheduling_attempts.observe(attempts)

    def extension_point(self, point: str, status, profile: str, seconds: float) -> None:
        """Two per attempt of a pod that fits nowhere (PreFilter, PostFilter): the series is found
        by the status code itself, its label text built once (a reset zeroes series in place)."""
        key = (point, None if status is None else status.code, profile)
        series = self._point_series.get(key)
        if series is None:
            series = self._point_series[key] = self.extension_point_duration.labels(point, _code(status), profile)
        series.observe(seconds)

    def plugin_duration(self, plugin: str, point: str, status, seconds: float) -> None:
        self.plugin_execution.labels(plugin, point, _code(status)).observe(seconds)

    def pending_from(self, counts: Callable[[], tuple[int, int, int, int]]) -> None:
        """The pending-pods gauge, read from the queue's (active, backoff, unschedulable, gated)
        sizes when scraped: they change several times per pod, and setting four gauges on each
        change cost more than the change."""
        for i, q in enumerate(("active", "backoff", "unschedulable", "gated")):
            self.pending_pods.labels(q).set_function(lambda i=i: counts()[i])
