"""The Job controller's metrics under upstream's names (pkg/controller/job/metrics), on
kube-controller-manager's registry: syncs by completion mode, result and action, finished Jobs by
reason, finished pods and indexes as the status counts them, failures a podFailurePolicy rule
handled, terminated pods holding the tracking finalizer, and Jobs another controller manages.
(job_pods_creation_total is ControllerMetrics' own.)"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ..machinery.jobindexes import Indexes
from ..machinery.metrics import Family, exponential_buckets

#: manageJob's actions: waiting on its own creates/deletes, nothing to do, pods created, pods deleted
RECONCILING, TRACKING, PODS_CREATED, PODS_DELETED = "reconciling", "tracking", "pods_created", "pods_deleted"


def completion_mode(spec: dict) -> str:
    return spec.get("completionMode") or "NonIndexed"


class JobMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["completion_mode", "result", "action"]
        self.sync_duration = Family("histogram", "job_controller_job_sync_duration_seconds",
                                    "[STABLE] The time it took to sync a job", labels, registry,
                                    exponential_buckets(0.004, 2, 15))
        self.syncs = Family("counter", "job_controller_job_syncs_total", "[STABLE] The number of job syncs",
                            labels, registry)
        #: reason: the Complete or Failed condition's
        self.finished = Family("counter", "job_controller_jobs_finished_total", "[STABLE] The number of finished jobs",
                               ["completion_mode", "result", "reason"], registry)
        self.external = Family("counter", "job_controller_jobs_by_external_controller_total",
                               "[ALPHA] The number of Jobs managed by an external controller",
                               ["controller_name"], registry)
        self.pods_finished = Family("counter", "job_controller_job_pods_finished_total",
                                    "[STABLE] The number of finished Pods that are fully tracked",
                                    ["completion_mode", "result"], registry)
        self.failure_policy = Family(
            "counter", "job_controller_pod_failures_handled_by_failure_policy_total",
            "[BETA] The number of failed Pods handled by failure policy with respect to the failure policy action "
            "applied based on the matched rule. Possible values of the action label correspond to the possible "
            'values for the failure policy rule action, which are: "FailJob", "Ignore" and "Count".',
            ["action"], registry)
        self.tracking_finalizer = Family(
            "counter", "job_controller_terminated_pods_tracking_finalizer_total",
            "[BETA] The number of terminated pods (phase=Failed|Succeeded) that have the finalizer "
            'batch.kubernetes.io/job-tracking. The event label can be "add" or "delete".', ["event"], registry)
        self.indexes_finished = Family(
            "counter", "job_controller_job_finished_indexes_total",
            '[ALPHA] The number of finished indexes. Possible values for the status label are: "succeeded", '
            '"failed". Possible values for the backoffLimit label are: "perIndex" and "global"',
            ["status", "backoffLimit"], registry)

    def sync(self, spec: dict, ok: bool, action: str, seconds: float) -> None:
        series = (completion_mode(spec), "success" if ok else "error", action)
        self.sync_duration.labels(*series).observe(seconds)
        self.syncs.labels(*series).inc()

    def status_written(self, spec: dict, old: dict, new: dict) -> None:
        """recordJobPodFinished: what a status write added to the counts of finished pods (an Indexed
        Job's successes by its completedIndexes within completions, and its indexes by outcome)."""
        mode = completion_mode(spec)
        if mode == "Indexed":
            n = spec.get("completions") or 0
            label = "perIndex" if spec.get("backoffLimitPerIndex") is not None else "global"
            done = _count(new.get("completedIndexes"), n) - _count(old.get("completedIndexes"), n) \
                if new.get("completedIndexes") != old.get("completedIndexes") else 0
            self.indexes_finished.labels("succeeded", label).inc(done)
            if label == "perIndex" and new.get("failedIndexes") != old.get("failedIndexes"):
                if (lost := _count(new.get("failedIndexes"), n) - _count(old.get("failedIndexes"), n)) > 0:
                    self.indexes_finished.labels("failed", label).inc(lost)
        else:
            done = new.get("succeeded", 0) - old.get("succeeded", 0)
        self.pods_finished.labels(mode, "succeeded").inc(done)
        self.pods_finished.labels(mode, "failed").inc(new.get("failed", 0) - old.get("failed", 0))

    def finished_job(self, spec: dict, condition: dict) -> None:
        result = "succeeded" if condition["type"] == "Complete" else "failed"
        self.finished.labels(completion_mode(spec), result, condition.get("reason", "")).inc()

    def pod_changed(self, old: dict | None, new: dict | None, finalizer: str) -> None:
        """recordFinishedPodWithTrackingFinalizer: a terminated pod gained or lost the tracking finalizer
        (or came or went holding it)."""
        was, now = _held(old, finalizer), _held(new, finalizer)
        if was != now:
            self.tracking_finalizer.labels("add" if now else "delete").inc()


def _count(indexes: str | None, completions: int) -> int:
    return len(Indexes.parse(indexes, completions))


def _held(pod: dict | None, finalizer: str) -> bool:
    return pod is not None and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") \
        and finalizer in (pod["metadata"].get("finalizers") or ())
