"""Job controller: runs pods until `completions` succeed (NonIndexed or
Indexed), or the Job fails by backoffLimit or activeDeadlineSeconds.

Finished pods are counted through `status.uncountedTerminatedPods` and the
`batch.kubernetes.io/job-tracking` finalizer, as upstream does: a pod's uid is
recorded first (at most 500 a sync), its finalizer removed next, and only then
is it counted, so no pod is lost or counted twice across restarts. An Indexed
Job's succeeded pod is counted by its index at once instead, in
`status.completedIndexes`, before its finalizer goes.

With `backoffLimitPerIndex` an Indexed Job counts failures per index: an
index past its limit (or hit by a FailIndex rule) lands in
`status.failedIndexes` and is not run again while the others go on. The
newest failed pod of an index waiting for its replacement keeps its
finalizer until then, so its failure counts reach the replacement.

A Job with `spec.scheduling` first gets its Workload and PodGroup
(job_workload.py); its pods are created only once both exist.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
from collections.abc import Callable, Mapping

from ..machinery import envknob
from ..machinery.backoff import doubling
from ..machinery.conditions import find_condition, is_condition_true, remove_condition
from ..machinery.errors import APIError
from ..machinery.featuregates import enabled
from ..machinery.jobindexes import Indexes
from ..machinery.meta import controller_ref
from ..machinery.selectors import matches_labels, selector_from_object
from ..client.informer import InformerFactory, key_of
from ..client.workqueue import WorkQueue
from ..clock import Clock, format_time, parse_time
from . import job_failure_policy, job_metrics
from .base import Controller, in_turns
from ..client.record import CoreEventRecorder
from .job_workload import JobWorkloads, uses_workload
from .metrics import ControllerMetrics
from .replicaset import (
    Expectations,
    claim_objects,
    create_pods,
    delete_pods,
    ignore_missing,
    owned_by,
    owner_reference,
    pod_from_template,
    pod_is_ready,
    pod_is_terminal,
    pod_updated,
    selecting,
)

TRACKING = "batch.kubernetes.io/job-tracking"
JOB_NAME = "batch.kubernetes.io/job-name"
INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "JOB_COMPLETION_INDEX"
#: spec.managedBy's value (and its default meaning when unset) for this controller
JOB_CONTROLLER = "kubernetes.io/job-controller"
#: the key of the Job a pod's controller reference names
_JOB = owned_by("Job")
BACKOFF_BASE, BACKOFF_MAX = 10.0, 360.0  # upstream's pod re-creation backoff after failures
#: a shorter base of that backoff (seconds) `nanokube up` reads, as upstream's integration tests set
#: DefaultJobPodFailureBackOff
BACKOFF_ENV = "NANOKUBE_JOB_POD_FAILURE_BACKOFF"
#: upstream's DefaultJobApiBackOff and MaxJobApiBackOff: a failed sync (a pod create refused by a quota)
#: is retried after 1 s, doubling to a minute, not the other controllers' 5 ms
API_BACKOFF, API_BACKOFF_MAX = 1.0, 60.0
#: upstream's syncJobBatchPeriod: how long a sync that pod events (or the Job's status writes) ask for waits
SYNC_BATCH_PERIOD = 1.0
#: upstream's MaxPodCreateDeletePerSync
MAX_POD_CREATE_DELETE_PER_SYNC = 500
#: upstream's MaxUncountedPods: the most UIDs status.uncountedTerminatedPods holds, so its status stays
#: small and one sync of a big Job removes at most as many finalizers; the rest wait for later syncs
MAX_UNCOUNTED_PODS = 500


def success_policy_match(policy: dict | None, completions: int, done: Indexes) -> str | None:
    """The message of the first successPolicy rule an Indexed Job meets: all
    (or succeededCount) of its succeededIndexes, or succeededCount overall."""
    if not policy or not done:
        return None
    for i, rule in enumerate(policy.get("rules") or []):
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            required = Indexes.parse(rule["succeededIndexes"], completions)
            if not required:
                continue
            if done.shared(required) >= (len(required) if count is None else count):
                return f"Matched rules at index {i}"
        elif count is not None and len(done) >= count:
            return f"Matched rules at index {i}"
    return None


def transition_events(old: list[dict], new: list[dict]) -> list[tuple[str, str, str]]:
    """Upstream's events for conditions that just turned: completion,
    failure (with the failure's reason and message), suspend and resume. A condition a status write
    left without its type or status has Go's "" there."""
    old, new = [_condition(c) for c in old], [_condition(c) for c in new]
    before = {c["type"]: c["status"] for c in old}
    out = []
    for c in new:
        if before.get(c["type"]) == c["status"]:
            continue
        if c["type"] == "Complete" and c["status"] == "True":
            out.append(("Normal", "Completed", "Job completed"))
        elif c["type"] == "Failed" and c["status"] == "True":
            out.append(("Warning", c.get("reason", ""), c.get("message", "")))
        elif c["type"] == "Suspended" and c["status"] == "True":
            out.append(("Normal", "Suspended", "Job suspended"))
        elif c["type"] == "Suspended" and before.get("Suspended") == "True":
            out.append(("Normal", "Resumed", "Job resumed"))
    return out


def _condition(c: dict) -> dict:
    """A condition with the type and status JobCondition's Go struct always has."""
    return c if "type" in c and "status" in c else {"type": "", "status": "", **c}


def job_selector(job: dict):
    return selector_from_object(job["spec"].get("selector"))


def pod_index(pod: dict) -> int | None:
    v = (pod["metadata"].get("annotations") or {}).get(INDEX)
    return int(v) if v is not None and v.isdigit() else None


def managed_externally(job: dict) -> bool:
    """managedByExternalController: spec.managedBy names another controller (Kueue's MultiKueue, ...),
    which creates the pods and writes the status; this controller leaves the Job alone."""
    owner = job["spec"].get("managedBy")
    return owner is not None and owner != JOB_CONTROLLER


def _with_index_env(container: dict) -> dict:
    """addCompletionIndexEnvVariable: JOB_COMPLETION_INDEX from the index annotation, unless the
    container sets that variable itself."""
    env = container.get("env") or []
    if any(v.get("name") == INDEX_ENV for v in env):
        return container
    return {**container, "env": [*env, {"name": INDEX_ENV, "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX}']"}}}]}


def past_backoff_limit_on_failure(spec: dict, pods: list[dict]) -> bool:
    """pastBackoffLimitOnFailure: with restartPolicy OnFailure a failing container restarts in its pod,
    so the restarts of the running and pending pods' containers count against backoffLimit."""
    if (spec.get("template") or {}).get("spec", {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(c.get("restartCount", 0) for p in pods
                   if (p.get("status") or {}).get("phase") in ("Running", "Pending")
                   for part in ("initContainerStatuses", "containerStatuses") for c in p["status"].get(part) or ())
    limit = spec.get("backoffLimit", 6)
    return restarts > 0 if limit == 0 else restarts >= limit


def finished(job: dict) -> str | None:
    """The type of the Complete or Failed condition that is True, if any (jobutil.IsJobFinished)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c["type"]
    return None


def wanted_active(spec: dict, succeeded: int, active: int) -> int:
    """How many pods a NonIndexed Job should be running: without completions, parallelism until a
    pod succeeds, then those still running (manageJob leaves them running, creating no more)."""
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    if completions is None:
        return active if succeeded > 0 else parallelism
    return max(0, min(parallelism, completions - succeeded))


_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def removal_rank(pod: dict) -> tuple:
    """controller.ActivePods' order, which activePodsForRemoval deletes from the front of (a Job's
    pods have no deletion cost or rank, unlike a ReplicaSet's): unscheduled, then pending before
    unknown before running, not ready before ready, of two ready pods the one ready latest, more
    container restarts, then the newest."""
    md, st = pod["metadata"], pod.get("status") or {}
    ready = pod_is_ready(pod)
    since = (find_condition(st.get("conditions"), "Ready") or {}).get("lastTransitionTime") if ready else None
    restarts = max((c.get("restartCount") or 0 for c in st.get("containerStatuses") or ()), default=0)
    created = md.get("creationTimestamp")
    return (bool((pod.get("spec") or {}).get("nodeName")), _PHASE_ORDER.get(st.get("phase"), 0), ready,
            (1, -parse_time(since)) if since else (0,), -restarts, (1, -parse_time(created)) if created else (0,))


def indexed_removals(active: list[dict], completions: int, at_least: int) -> list[dict]:
    """activePodsForRemoval for an Indexed Job: its pods without a valid index or with one past
    completions (ElasticIndexedJob shrinks them), all but one of each repeated index (the one
    deleted last stays), then those the ActivePods order deletes first until `at_least` go."""
    doomed, by_index = [], {}
    for p in active:
        i = pod_index(p)
        if i is None or i >= completions:
            doomed.append(p)
        else:
            by_index.setdefault(i, []).append(p)
    left = []
    for same in by_index.values():
        same.sort(key=removal_rank)
        doomed += same[:-1]
        left.append(same[-1])
    if len(doomed) < at_least:
        doomed += heapq.nsmallest(at_least - len(doomed), left, key=removal_rank)
    return doomed


def pod_succeeded(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Succeeded"


def replaces_only_failed(spec: dict) -> bool:
    """podReplacementPolicy Failed (the default with a podFailurePolicy)."""
    return (spec.get("podReplacementPolicy")
            or ("Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")) == "Failed"


def finish_time(pod: dict) -> float | None:
    """When a finished pod stopped: its containers' last finishedAt, else when it
    stopped being Ready."""
    st = pod.get("status") or {}
    ends = [parse_time(t) for cs in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])
            if (t := ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))]
    if ends:
        return max(ends)
    ready = find_condition(st.get("conditions"), "Ready")
    return parse_time(ready["lastTransitionTime"]) if ready and ready.get("lastTransitionTime") else None


def _ended(pod: dict) -> float | None:
    """getFinishedTime, for the pod failure backoff: finish_time, else for a pod being deleted when
    its grace period began; None for one with neither (a status no kubelet wrote)."""
    if (end := finish_time(pod)) is not None:
        return end
    md = pod["metadata"]
    return parse_time(md["deletionTimestamp"]) - (md.get("deletionGracePeriodSeconds") or 0) \
        if md.get("deletionTimestamp") else None


def options_from_env(env: Mapping[str, str] = os.environ) -> dict[str, float]:
    """The pod failure backoff's base from NANOKUBE_JOB_POD_FAILURE_BACKOFF (its cap stays BACKOFF_MAX).
    A base of 0 or less would start replacements at once, with no backoff at all: refused."""
    base = envknob.seconds(env, BACKOFF_ENV, lambda s: 0 < s < math.inf,
                           "the pod failure backoff must be a positive number of seconds")
    return {} if base is None else {"backoff_base": base}


def indexes_ready(todo: list[int], replaced: dict[int, dict], now: float,
                  base: float = BACKOFF_BASE) -> tuple[list[int], float]:
    """Per-index backoff: the indexes whose last failure is old enough
    (`base`, 10s, doubling per failure of that index, at most 360s), and, when none
    is, the seconds until the first one is."""
    ready, waits = [], []
    for i in todo:
        pod = replaced.get(i)
        end = finish_time(pod) if pod is not None else None
        left = 0.0 if end is None else \
            end + doubling(base, sum(job_failure_policy.failure_counts(pod)), BACKOFF_MAX) - now
        if left > 0:
            waits.append(left)
        else:
            ready.append(i)
    return ready, (0.0 if ready or not waits else min(waits))


async def failed_indexes(spec: dict, st: dict, pods: list[dict], only_failed_phase: bool) -> Indexes:
    """status.failedIndexes plus the indexes whose not yet counted pod just
    failed them (below completions only). A pass in turns (in_turns), as the next one."""
    completions = spec.get("completions") or 0
    out = Indexes.parse(st.get("failedIndexes"), completions)
    async for part in in_turns(pods):
        for p in part:
            i = pod_index(p)
            if i is not None and i < completions and TRACKING in (p["metadata"].get("finalizers") or []) \
                    and pod_failed(p, only_failed_phase) and job_failure_policy.index_failed(spec, p):
                out.add(i)
    return out


async def awaiting_replacement(spec: dict, pods: list[dict], settled: Indexes, active: list[dict],
                               only_failed_phase: bool) -> dict[int, dict]:
    """Per index still to run and with no active pod, its newest failed pod
    that still holds the finalizer: the one its replacement's counts come from."""
    completions = spec.get("completions") or 0
    busy = {pod_index(p) async for part in in_turns(active) for p in part}
    out: dict[int, dict] = {}
    async for part in in_turns(pods):
        for p in part:
            i = pod_index(p)
            if i is None or i >= completions or i in settled or i in busy or TRACKING not in (p["metadata"].get("finalizers") or []) \
                    or not pod_failed(p, only_failed_phase):
                continue
            age = (sum(job_failure_policy.failure_counts(p)), finish_time(p) or 0.0)
            if i not in out or age >= (sum(job_failure_policy.failure_counts(out[i])), finish_time(out[i]) or 0.0):
                out[i] = p
    return out


def creation_reason(spec: dict, failed: int, terminating: int) -> str:
    """The reason label of job_pods_creation_total for a sync's creates (recordJobPodsCreationTotal):
    replacements of failed pods under podReplacementPolicy Failed, of failed or terminating ones
    otherwise, or new pods."""
    if failed and replaces_only_failed(spec):
        return "recreate_failed"
    return "recreate_terminating_or_failed" if failed or terminating else "new"


def failure_verdict(spec: dict, pod: dict) -> tuple | None:
    """The podFailurePolicy's verdict on a finished pod: None for one that succeeded or matched no rule."""
    return None if pod_succeeded(pod) else job_failure_policy.match(spec.get("podFailurePolicy"), pod)


def fail_job_message(verdict: tuple | None) -> str | None:
    """A FailJob verdict's message, else None."""
    return verdict[1] if verdict and verdict[0] == "FailJob" else None


def pod_failed(pod: dict, only_failed_phase: bool) -> bool:
    """A Failed pod; with TerminatingOrFailed also one being deleted before it
    succeeded, since an orphaned pod may never reach a phase."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed" or only_failed_phase:
        return phase == "Failed"
    return bool(pod["metadata"].get("deletionTimestamp")) and phase != "Succeeded"


class JobController(Controller):
    name = "job-controller"
    queue_name = "job"
    workers = 2

    def __init__(self, client, clock: Clock | None = None, informers: InformerFactory | None = None,
                 metrics: ControllerMetrics | None = None, backoff_base: float = BACKOFF_BASE):
        """`backoff_base`: the pod failure backoff's first step (BACKOFF_BASE; options_from_env)."""
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.queue = WorkQueue(self.clock, API_BACKOFF, API_BACKOFF_MAX)
        self.metrics = metrics or ControllerMetrics()
        self.backoff_base = backoff_base
        #: newBackoffRecord's per Job: failures since its last success, and when the last of them ended
        self.backoffs: dict[str, tuple[int, float]] = {}
        self.jobs = client.resource("batch", "v1", "jobs")
        self.pods = client.resource("", "v1", "pods")
        self.job_inf = self.informer_factory.informer(self.jobs)
        self.pod_inf = self.informer_factory.informer(self.pods)
        self.expectations = Expectations(self.clock)
        self.recorder = CoreEventRecorder(client, "job-controller", self.clock)
        #: WorkloadWithJob: a Job's Workload and PodGroup; off, none is read (the API drops spec.scheduling)
        self.workloads = JobWorkloads(client, self.queue.add, self.informer_factory) \
            if enabled("WorkloadWithJob") else None
        self.job_inf.add_handlers(on_add=self._job_added, on_update=self._job_updated, on_delete=self._job_deleted)
        self.pod_inf.add_handlers(on_add=self._pod_added, on_update=self._pod_updated,
                                  on_delete=self._pod_removed)

    def informers(self):
        return [self.job_inf, self.pod_inf, *(self.workloads.informers() if self.workloads else ())]

    def _enqueue(self, job: dict) -> None:
        """enqueueSyncJobImmediately: a Job's creation, deletion or spec change."""
        self.queue.add(key_of(job))

    def _enqueue_batched(self, key: str) -> None:
        """enqueueSyncJobBatched: pod events and the Job's status writes wait SYNC_BATCH_PERIOD, so a
        burst of them costs one sync (a key already waiting keeps its earlier time)."""
        self.queue.add_after(key, SYNC_BATCH_PERIOD)

    def _enqueue_with_delay(self, key: str, delay: float) -> None:
        """enqueueSyncJobWithDelay: a delayed sync (a replacement's backoff) never comes sooner than a batch."""
        self.queue.add_after(key, max(delay, SYNC_BATCH_PERIOD))

    def _job_added(self, job: dict) -> None:
        """addJob: also counts a Job another controller manages, by that controller's name."""
        self._enqueue(job)
        if managed_externally(job):
            self.metrics.job.external.labels(job["spec"]["managedBy"]).inc()

    def _job_updated(self, old: dict, job: dict) -> None:
        """updateJob: a spec change (a new generation) is synced at once, a status write batched."""
        if old["metadata"].get("generation") != job["metadata"].get("generation"):
            self._enqueue(job)
        else:
            self._enqueue_batched(key_of(job))

    def _job_deleted(self, job: dict) -> None:
        """deleteJob, with cleanupPodFinalizers: the pods this Job (by uid) controls lose the tracking
        finalizer through the orphan queue, which checks again that no Job controls them."""
        self._enqueue(job)
        controls = self._controls(job)
        for pod in self.pod_inf.list_namespace(job["metadata"]["namespace"]):
            if controls(pod) and TRACKING in (pod["metadata"].get("finalizers") or ()):
                self._orphan_finalizer(pod)

    def _resolve(self, pod: dict, ref: dict) -> dict | None:
        """resolveControllerRef: the Job the reference names, if the cache holds it with that uid."""
        key = _JOB(pod, ref)
        job = self.job_inf.get(key) if key else None
        return job if job is not None and job["metadata"]["uid"] == ref.get("uid") else None

    def _pod_added(self, pod: dict) -> None:
        """addPod: the Job controlling the pod, or every Job selecting an orphan (one may adopt it); a pod
        already being deleted when first seen (after a restart) counts as a deletion, not a creation."""
        self.metrics.job.pod_changed(None, pod, TRACKING)
        if pod["metadata"].get("deletionTimestamp"):
            self._pod_deleted(pod)
            return
        ref = controller_ref(pod)
        if ref is None:
            if TRACKING in (pod["metadata"].get("finalizers") or ()):
                self._orphan_finalizer(pod)
            self._enqueue_selecting(pod)
        elif key := _JOB(pod, ref):
            self.expectations.observed_add(key)
            self._enqueue_batched(key)

    def _pod_updated(self, old: dict, pod: dict) -> None:
        """updatePod: a pod being deleted is handled as a deletion at once (its Job may replace it
        before it is gone); else the Job controlling the pod, the one that did when its reference
        moved, and for an orphan whose labels or reference changed, every Job selecting it."""
        self.metrics.job.pod_changed(old, pod, TRACKING)
        if pod["metadata"].get("deletionTimestamp"):
            self._pod_deleted(pod)
            return
        pod_updated(old, pod, _JOB, self._enqueue_batched, self._enqueue_selecting)
        if TRACKING in (pod["metadata"].get("finalizers") or ()) and controller_ref(pod) is None:
            self._orphan_finalizer(pod)

    def _orphan_finalizer(self, pod: dict) -> None:
        """enqueueOrphanPod, for an orphan keeping the tracking finalizer (its Job's reference
        removed, say by an orphaning delete): it is removed unless a Job adopts the pod first."""
        self.queue.add(("orphan", key_of(pod)))

    def _pod_removed(self, pod: dict) -> None:
        """The informer's delete (deletePod's final one): the pod is gone from the cache."""
        self.metrics.job.pod_changed(pod, None, TRACKING)
        self._pod_deleted(pod)

    def _pod_deleted(self, pod: dict) -> None:
        """deletePod: the controlling Job observes the deletion; a pod whose Job is gone (or another one
        of that name) or finished, which no sync will count, has its tracking finalizer removed."""
        ref = controller_ref(pod)
        job = self._resolve(pod, ref) if ref is not None else None
        if job is None or finished(job):
            if TRACKING in (pod["metadata"].get("finalizers") or ()):
                self._orphan_finalizer(pod)
            return
        key = key_of(job)
        self.expectations.observed_del(key)
        self._enqueue_batched(key)

    def _enqueue_selecting(self, pod: dict) -> None:
        for job in selecting(self.job_inf, pod, job_selector):
            self._enqueue_batched(key_of(job))

    @staticmethod
    def _controls(job: dict) -> Callable[[dict], bool]:
        """Whether the Job controls a pod and still selects it."""
        uid, sel = job["metadata"]["uid"], job_selector(job)
        return lambda p: (controller_ref(p) or {}).get("uid") == uid and matches_labels(sel, p["metadata"].get("labels"))

    async def _claim(self, job: dict) -> list[dict]:
        """getPodsForJob: its pods, orphans it selects adopted with the tracking finalizer, and its
        pods it no longer selects released (their finalizer removed with the reference)."""
        return await claim_objects(self.pods, self.pod_inf.list_namespace(job["metadata"]["namespace"]), job,
                                   job_selector(job), "batch/v1", "Job", finalizer=TRACKING)

    async def sync(self, key: str | tuple[str, str]) -> None:
        if isinstance(key, tuple):
            await self._sync_orphan(key[1])
            return
        job = self.job_inf.get(key)
        if job is None:
            self.expectations.forget(key)  # its pods' finalizers went through the orphan queue
            self.backoffs.pop(key, None)
            return
        if managed_externally(job):
            return
        if finished(job):
            self.backoffs.pop(key, None)
            controls = self._controls(job)
            await self._remove_finalizers([p async for part in in_turns(self.pod_inf.list_namespace(
                job["metadata"]["namespace"])) for p in part
                if TRACKING in (p["metadata"].get("finalizers") or []) and controls(p)])
            return
        # judged before the pods are listed, as upstream's syncJob: a pod that comes while they are
        # claimed (claim_objects lets the loop run) then counts in the next sync, not as missing now
        satisfied = self.expectations.satisfied(key)
        start, action, failure = self.clock.now(), job_metrics.RECONCILING, True
        try:
            action, failure = await self._sync_job(key, job, await self._claim(job), satisfied)
        finally:  # syncJob's deferred job_syncs_total and job_sync_duration_seconds
            self.metrics.job.sync(job["spec"], failure is None, action, self.clock.now() - start)
        if failure is not None:
            raise failure

    async def _sync_orphan(self, key: str) -> None:
        """syncOrphanPod: the tracking finalizer goes from a pod still without a Job to count it
        (no controller, or a batch/v1 Job that is gone, another one, or finished)."""
        pod = self.pod_inf.get(key)
        if pod is None or TRACKING not in (pod["metadata"].get("finalizers") or ()):
            return
        if (ref := controller_ref(pod)) is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return
            job = self.job_inf.get(f"{pod['metadata']['namespace']}/{ref['name']}")
            if job is not None and managed_externally(job):
                return  # its finalizer is the other controller's to remove
            if job is not None and job["metadata"]["uid"] == ref.get("uid") and not finished(job):
                return  # adopted meanwhile
        await self._remove_finalizers([pod])

    async def _remove_finalizers(self, pods: list[dict]) -> None:
        for p in pods:
            fins = [f for f in p["metadata"].get("finalizers") or [] if f != TRACKING]
            await ignore_missing(self.pods.patch(p["metadata"]["name"], {"metadata": {
                "finalizers": fins or None, "resourceVersion": p["metadata"]["resourceVersion"]}},
                namespace=p["metadata"]["namespace"]))

    async def _sync_job(self, key: str, job: dict, pods: list[dict],
                        satisfied: bool) -> tuple[str, Exception | None]:
        """manageJob's action (job_metrics) and the first failure of its creates or deletes, raised once
        the status is written. Its passes over the Job's pods let the loop run every TURN pods (in_turns).
        A Job being deleted (a foreground delete waiting on its pods) is tracked as any, its finished pods
        counted before their finalizers go, but manageJob neither creates nor deletes pods for it, nor
        does its Suspended condition change, as syncJob skips manageJob while a deletionTimestamp is set."""
        spec, now = job["spec"], self.clock.now()
        manage = satisfied and not job["metadata"].get("deletionTimestamp")
        st = dict(job.get("status") or {})
        uncounted = {k: list(v) for k, v in (st.get("uncountedTerminatedPods") or {}).items()}
        indexed = spec.get("completionMode") == "Indexed"
        per_index = indexed and spec.get("backoffLimitPerIndex") is not None
        replace_failed = replaces_only_failed(spec)
        done_idx = Indexes.parse(st.get("completedIndexes"), spec.get("completions") or 0)
        active, terminating = [], []  # terminating: CountTerminatingPods's, before this sync's deletes
        async for part in in_turns(pods):
            for p in part:
                if not pod_is_terminal(p):
                    (terminating if p["metadata"].get("deletionTimestamp") else active).append(p)
        failed_idx = await failed_indexes(spec, st, pods, replace_failed) if per_index else Indexes()
        # indexes whose pod succeeded but is not counted yet must not run again either
        finishing = {pod_index(p) async for part in in_turns(pods) for p in part
                     if pod_succeeded(p) and pod_index(p) is not None
                     and TRACKING in (p["metadata"].get("finalizers") or [])}
        delayed = await awaiting_replacement(spec, pods, done_idx | finishing | failed_idx, active,
                                             replace_failed) if per_index else {}
        held = {p["metadata"]["uid"] for p in delayed.values()}
        held_verdicts = [job_failure_policy.match(spec.get("podFailurePolicy"), p) for p in delayed.values()]
        # 1. record newly finished pods that still carry the finalizer; the
        #    podFailurePolicy may ignore a failure or fail the Job at once.
        #    Once the Job is failing, the pods it stops count as failed.
        failing = is_condition_true(st.get("conditions"), "FailureTarget")
        ignored: list[dict] = []
        actions: dict[str, int] = {}  # the podFailurePolicy actions on the failures recorded now
        # an Indexed Job's succeeded pods are counted by their index at once, never listed by uid (as
        # upstream's newSucceededIndexes); their finalizers go once the status is written
        released: list[dict] = []
        fail_job = next((v[1] for v in held_verdicts if v and v[0] == "FailJob"), None)
        new_indexes = 0
        listed = sum(len(v) for v in uncounted.values())
        before = {uid for v in uncounted.values() for uid in v}
        ends: tuple[list[float], list[float]] = ([], [])  # the newly finished pods' failures', successes' ends
        async for part in in_turns(pods):
            for p in part:
                if TRACKING in (p["metadata"].get("finalizers") or []) and p["metadata"]["uid"] not in held and \
                        (pod_succeeded(p) or pod_failed(p, replace_failed and not failing)):
                    if p["metadata"]["uid"] not in before and (end := _ended(p)) is not None:
                        ends[pod_succeeded(p)].append(end)
                    if listed >= MAX_UNCOUNTED_PODS:  # left to a later sync, but a FailJob rule is read on
                        message = fail_job_message(failure_verdict(spec, p))  # every failed pod (getFailJobMessage)
                    elif indexed and pod_succeeded(p):
                        if p["metadata"]["uid"] not in uncounted.get("succeeded", ()):  # else listed before: step 2
                            released.append(p)
                            i = pod_index(p)
                            if i is not None and i < (spec.get("completions") or 0) and done_idx.add(i):
                                st["succeeded"] = st.get("succeeded", 0) + 1
                                new_indexes += 1
                        message = None
                    else:
                        message = self._record(spec, p, uncounted, ignored, actions)
                    listed = sum(len(v) for v in uncounted.values()) + new_indexes
                    fail_job = fail_job or message
        self._note_finished(key, *ends)
        # 2. count recorded pods whose finalizer is gone
        tracked = {p["metadata"]["uid"]: p async for part in in_turns(pods) for p in part}
        for kind in ("succeeded", "failed"):
            keep = []
            for uid in uncounted.get(kind, []):
                p = tracked.get(uid)
                if p is not None and TRACKING in (p["metadata"].get("finalizers") or []):
                    keep.append(uid)
                    continue
                if kind == "succeeded" and indexed and p is not None and pod_index(p) is not None:
                    if done_idx.add(pod_index(p)):
                        st["succeeded"] = st.get("succeeded", 0) + 1
                else:
                    st[kind] = st.get(kind, 0) + 1
            uncounted[kind] = keep
        if indexed:
            st["completedIndexes"] = str(done_idx)
        if per_index:
            st["failedIndexes"] = str(failed_idx)
        succeeded = len(done_idx) if indexed else st.get("succeeded", 0) + len(uncounted.get("succeeded", []))
        failed = st.get("failed", 0) + len(uncounted.get("failed", [])) + \
            sum(1 for v in held_verdicts if not (v and v[0] == "Ignore"))

        suspended = bool(spec.get("suspend"))
        if not suspended and not st.get("startTime"):
            st["startTime"] = format_time(now)
        outcome = self._outcome(key, spec, st, succeeded, failed, active, indexed, done_idx, failed_idx, now,
                                past_backoff_limit_on_failure(spec, pods))
        made, removed, manage_failure, action = 0, [], None, job_metrics.RECONCILING
        if fail_job and (outcome is None or outcome[0] != "FailureTarget"):
            outcome = ("FailureTarget", job_failure_policy.REASON, fail_job)
        if outcome:
            # a finished Job waits for no replacement: held pods are counted now
            for p in delayed.values():
                self._record(spec, p, uncounted, ignored, actions)
        st["uncountedTerminatedPods"] = {k: v for k, v in uncounted.items() if v}
        if outcome:  # deleteActivePods: the finalizers stay, so the pods it stops count as failed
            removed, manage_failure = await self._delete_pods(key, job, active)
        elif suspended and manage:  # manageJob's, which runs once the expectations are met
            removed, manage_failure = await self._delete_pods(key, job, active, untrack=True)
            action = job_metrics.PODS_DELETED
        elif manage:
            try:
                made, removed, manage_failure, action = await self._manage(
                    key, job, active, terminating, pods, succeeded, failed, done_idx | finishing | failed_idx,
                    delayed, now)
            except APIError as e:
                manage_failure = e
        if not job["metadata"].get("deletionTimestamp"):
            self._set_suspended(st, suspended, now)
        # manageJob's counts: the pods it just made are active, those it just deleted (a failed delete
        # left out, as upstream's deleteJobPods counts) terminating
        gone = {p["metadata"]["uid"] for p in removed}
        active = [p for p in active if p["metadata"]["uid"] not in gone]
        st["active"] = len(active) + made
        st["ready"] = sum([1 async for part in in_turns(active) for p in part if pod_is_ready(p)])
        st["terminating"] = len(removed) + len(terminating)
        # enactJobFinished: Complete or Failed only once no pod is left running or terminating, nor
        # any finalizer to remove
        if outcome and not st["uncountedTerminatedPods"] and not released and not active and not st["terminating"]:
            self._finish(st, outcome, now)
        elif outcome:
            self._add_condition(st, *outcome[:1], "True", *outcome[1:], now)
        events = transition_events((job.get("status") or {}).get("conditions") or [], st.get("conditions") or [])
        if await self._write_status(job, st):
            self._count_written(job, st, actions)
        for type_, reason, message in events:
            await self.recorder.emit(job, type_, reason, message)
        recorded = set(st["uncountedTerminatedPods"].get("succeeded", [])) | set(
            st["uncountedTerminatedPods"].get("failed", []))
        await self._remove_finalizers(ignored + released + [p async for part in in_turns(pods) for p in part
                                                           if p["metadata"]["uid"] in recorded])
        return action, manage_failure

    @staticmethod
    def _record(spec: dict, pod: dict, uncounted: dict, ignored: list[dict], actions: dict[str, int]) -> str | None:
        """Add a finished pod to uncountedTerminatedPods (or to `ignored` when
        the podFailurePolicy says so), its rule's action to `actions`; the FailJob message if a rule says that."""
        uid = pod["metadata"]["uid"]
        if uid in uncounted.get("succeeded", []) + uncounted.get("failed", []):
            return None
        verdict = failure_verdict(spec, pod)
        if verdict:
            actions[verdict[0]] = actions.get(verdict[0], 0) + 1
        if verdict and verdict[0] == "Ignore":
            ignored.append(pod)
            return None
        uncounted.setdefault("succeeded" if pod_succeeded(pod) else "failed", []).append(uid)
        return fail_job_message(verdict)

    def _outcome(self, key, spec, st, succeeded, failed, active, indexed, done_idx, failed_idx, now, restarted_out):
        """(target condition, reason, message) once the Job's fate is decided
        (a FailureTarget or SuccessCriteriaMet already set stays decided), in syncJob's order:
        failures, then the success policy, then the completions count. `restarted_out`: the restarts of
        an OnFailure Job's live pods reached its backoffLimit."""
        for c in st.get("conditions") or []:
            if c.get("type") in ("FailureTarget", "SuccessCriteriaMet") and c.get("status") == "True":
                return c["type"], c.get("reason", ""), c.get("message", "")
        completions = spec.get("completions")
        if failed > spec.get("backoffLimit", 6) or restarted_out:
            return ("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None and st.get("startTime") and not spec.get("suspend"):
            left = parse_time(st["startTime"]) + deadline - now
            if left <= 0:
                return ("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline")
            self.queue.add_after(key, left + 0.05)
        if spec.get("maxFailedIndexes") is not None and len(failed_idx) > spec["maxFailedIndexes"]:
            return ("FailureTarget", "MaxFailedIndexesExceeded",
                    "Job has exceeded the specified maximal number of failed indexes")
        if failed_idx and len(failed_idx) + len(done_idx) >= (completions or 0):
            return ("FailureTarget", "FailedIndexes", "Job has failed indexes")
        if indexed and (matched := success_policy_match(spec.get("successPolicy"), completions or 0, done_idx)):
            return ("SuccessCriteriaMet", "SuccessPolicy", matched)
        if indexed and completions is not None and len(done_idx) >= completions or \
                not indexed and (completions is not None and succeeded >= completions
                                 or completions is None and succeeded > 0 and not active):
            return ("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
        return None

    def _add_condition(self, st: dict, ctype: str, status: str, reason: str, message: str, now: float) -> None:
        old = find_condition(st.get("conditions"), ctype)
        if old and old.get("status") == status and old.get("reason") == reason:
            return
        t = format_time(now)
        st["conditions"] = remove_condition(st.get("conditions"), ctype) + [{
            "type": ctype, "status": status, "lastProbeTime": t, "lastTransitionTime": t, "reason": reason,
            "message": message}]

    def _finish(self, st: dict, outcome: tuple, now: float) -> None:
        ctype, reason, message = outcome
        self._add_condition(st, ctype, "True", reason, message, now)
        if ctype == "SuccessCriteriaMet":
            self._add_condition(st, "Complete", "True", reason, message, now)
            st["completionTime"] = format_time(now)
        else:
            self._add_condition(st, "Failed", "True", reason, message, now)

    def _set_suspended(self, st: dict, suspended: bool, now: float) -> None:
        old = find_condition(st.get("conditions"), "Suspended")
        if suspended:
            self._add_condition(st, "Suspended", "True", "JobSuspended", "Job suspended", now)
        elif old and old.get("status") == "True":
            self._add_condition(st, "Suspended", "False", "JobResumed", "Job resumed", now)
            st["startTime"] = format_time(now)

    async def _delete_pods(self, key: str, job: dict, victims: list[dict],
                           untrack: bool = False) -> tuple[list[dict], Exception | None]:
        """Delete `victims`: those deleted, and the first failure (raised once the status is written).
        `untrack`: deleteJobPods, for a suspended Job's pods and those over its parallelism, first
        removes their tracking finalizer, so they are no failure of the Job; a pod whose patch fails
        is not deleted."""
        failure = None
        if untrack:
            results = await asyncio.gather(*(self._untrack(p) for p in victims), return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Exception):
                    raise r
            failure = next((r for r in results if r is not None), None)
            victims = [p for p, r in zip(victims, results) if r is None]
        if not victims:
            return [], failure
        deleted, failed = await delete_pods(self.pods, self.expectations, key, victims, self.recorder, job)
        return deleted, failure or failed

    async def _untrack(self, pod: dict) -> None:
        """removeTrackingFinalizerPatch: the tracking finalizer off the pod, whatever else it holds."""
        if TRACKING in (pod["metadata"].get("finalizers") or ()):
            await ignore_missing(self.pods.patch(
                pod["metadata"]["name"], {"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING]}},
                "application/strategic-merge-patch+json", namespace=pod["metadata"]["namespace"]))

    async def _manage(self, key, job, active, terminating, pods, succeeded, failed, settled, replaced,
                      now) -> tuple[int, list[dict], Exception | None, str]:
        """Create or delete pods towards the wanted count, at most MAX_POD_CREATE_DELETE_PER_SYNC:
        how many were created, the pods deleted, the first failure, and the action (job_metrics:
        pods_created also when the pods wanted wait out a backoff). `terminating`: the pods being
        deleted that have not finished. `settled` are the indexes that never run again; `replaced`
        maps an index to the failed pod its next pod replaces (backoffLimitPerIndex only)."""
        spec = job["spec"]
        per_index = spec.get("backoffLimitPerIndex") is not None and spec.get("completionMode") == "Indexed"
        group = None
        if self.workloads and uses_workload(job) and (group := await self.workloads.ensure(job)) is None:
            return 0, [], None, job_metrics.TRACKING
        if not per_index and (wait := self._backoff_left(key, now)) > 0:
            self._enqueue_with_delay(key, wait + 0.05)
            return 0, [], None, job_metrics.PODS_CREATED
        # with podReplacementPolicy Failed a terminating pod is replaced only once it has failed
        waited = terminating if replaces_only_failed(spec) else []
        if spec.get("completionMode") == "Indexed":
            if doomed := [p async for part in in_turns(active) for p in part if pod_index(p) in settled]:
                return 0, *await self._delete_pods(key, job, doomed[:MAX_POD_CREATE_DELETE_PER_SYNC], untrack=True), \
                    job_metrics.PODS_DELETED
            # a lowered parallelism or completions: the pods over what is wanted go first
            want = wanted_active(spec, succeeded, len(active))
            if extra := indexed_removals(active, spec.get("completions") or 0, len(active) - want):
                return 0, *await self._delete_pods(key, job, extra[:MAX_POD_CREATE_DELETE_PER_SYNC], untrack=True), \
                    job_metrics.PODS_DELETED
            busy = {pod_index(p) async for part in in_turns(active + waited) for p in part}
            todo = settled.first_missing(max(0, spec.get("parallelism", 1) - len(active)),
                                         spec.get("completions") or 0, busy)
            action = job_metrics.PODS_CREATED if todo else job_metrics.TRACKING
            if per_index:
                todo, wait = indexes_ready(todo, replaced, now, self.backoff_base)
                if wait > 0:
                    self._enqueue_with_delay(key, wait + 0.05)
        else:
            n = wanted_active(spec, succeeded, len(active)) - len(active)
            if n < 0:
                # activePodsForRemoval: controller.ActivePods' order (unscheduled, pending, not ready, newest first)
                ranks = [removal_rank(p) async for part in in_turns(active) for p in part]
                extra = [active[i] for i in heapq.nsmallest(min(-n, MAX_POD_CREATE_DELETE_PER_SYNC),
                                                            range(len(active)), key=ranks.__getitem__)]
                return 0, *await self._delete_pods(key, job, extra, untrack=True), job_metrics.PODS_DELETED
            todo = [None] * max(0, n - len(waited))
            action = job_metrics.PODS_CREATED if n > 0 else job_metrics.TRACKING
        todo = todo[:MAX_POD_CREATE_DELETE_PER_SYNC]
        if not todo:
            return 0, [], None, action
        count = self._creations(creation_reason(spec, failed, len(terminating)))
        made, failure = await create_pods(self.pods, self.expectations, key,
                                          [self._pod(job, i, group, replaced.get(i) if per_index else None)
                                           for i in todo], self.recorder, job, answered=count)
        return made, [], failure, action

    def _creations(self, reason: str) -> Callable[[bool], None]:
        """recordJobPodsCreationTotal, per create the server answered. Upstream's manageJob adds a
        failed create to the succeeded count as well as to the failed one (its goroutine goes on to
        the success count after the failure's), and so does this, for the same series."""
        succeeded = self.metrics.job_pods_creation.labels(reason, "succeeded")

        def count(ok: bool) -> None:
            succeeded.inc()
            if not ok:
                self.metrics.job_pods_creation.labels(reason, "failed").inc()
        return count

    def _note_finished(self, key: str, failures: list[float], successes: list[float]) -> None:
        """newBackoffRecord: a success starts the count of failures over from the failures that ended
        after it; a failure the podFailurePolicy ignores counts too, as upstream's."""
        count, last = self.backoffs.get(key, (0, 0.0))
        if successes:
            failures = [t for t in failures if t > max(successes)]
            count, last = 0, 0.0
        if failures:
            self.backoffs[key] = (count + len(failures), max(failures + [last]))
        elif successes:
            self.backoffs.pop(key, None)

    def _backoff_left(self, key: str, now: float) -> float:
        """Seconds before a replacement may start (getRemainingTime): `backoff_base` (10s) doubling per
        failure since the last success, from the end of the last of them."""
        count, last = self.backoffs.get(key, (0, 0.0))
        if not count:
            return 0.0
        return last + doubling(self.backoff_base, count - 1, BACKOFF_MAX) - now

    def _pod(self, job: dict, index: int | None, group: str | None = None, replaced: dict | None = None) -> dict:
        md = job["metadata"]
        tmpl = job["spec"]["template"]
        name = f"{md['name']}-" if index is None else f"{md['name']}-{index}-"
        pod = pod_from_template(tmpl, job, owner_reference(job, "batch/v1", "Job"), name)
        pmd = pod["metadata"]
        pmd["finalizers"] = list(pmd.get("finalizers") or []) + [TRACKING]
        if index is not None:
            for part in ("initContainers", "containers"):
                if part in pod["spec"]:
                    pod["spec"][part] = [_with_index_env(c) for c in pod["spec"][part]]
            pmd["annotations"] = {**(pmd.get("annotations") or {}), INDEX: str(index)}
            pmd["labels"] = {**(pmd.get("labels") or {}), INDEX: str(index)}
            pod["spec"] = {**pod["spec"], "hostname": f"{md['name']}-{index}"}
            if job["spec"].get("backoffLimitPerIndex") is not None:
                counted, ignored = job_failure_policy.counts_after(job["spec"], replaced)
                pmd["annotations"][job_failure_policy.FAILURE_COUNT] = str(counted)
                if ignored:
                    pmd["annotations"][job_failure_policy.IGNORED_COUNT] = str(ignored)
        if group is not None:
            pod["spec"] = {**pod["spec"], "schedulingGroup": {"podGroupName": group}}
        return pod

    def _count_written(self, job: dict, st: dict, actions: dict[str, int]) -> None:
        """What upstream records once a status write succeeds: finished pods and indexes, the
        podFailurePolicy's actions, and a Job that just finished by its condition's reason."""
        old = job.get("status") or {}
        self.metrics.job.status_written(job["spec"], old, st)
        for action, n in actions.items():
            self.metrics.job.failure_policy.labels(action).inc(n)
        if (done := finished(job)) is None and (done := finished({"status": st})) is not None:
            self.metrics.job.finished_job(job["spec"], find_condition(st["conditions"], done))

    async def _write_status(self, job: dict, st: dict) -> bool:
        """Whether the status was written (not unchanged, nor the Job gone)."""
        for f in ("active", "succeeded", "failed", "completedIndexes"):
            if not st.get(f):
                st.pop(f, None)
        if st == (job.get("status") or {}):
            return False
        try:
            await self.jobs.update({**job, "status": st}, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
            return False
        return True
