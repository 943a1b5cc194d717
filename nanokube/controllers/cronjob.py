"""CronJob controller (upstream's cronjob_controllerv2): starts a Job for the
most recent unmet scheduled time, named `<cronjob>-<minutes since epoch>` so a
time is never started twice; honours concurrencyPolicy, startingDeadlineSeconds
and suspend; keeps status.active, lastScheduleTime and lastSuccessfulTime; and
deletes the oldest finished Jobs beyond the history limits.

All time comes from the injected Clock, and each CronJob is requeued for its
next scheduled time, so it runs the same in virtual time.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import logging

from ..client.http import EXPECTED
from ..client.informer import InformerFactory, key_of
from ..clock import Clock, format_time, parse_time
from ..machinery import cron
from ..machinery.errors import NAMESPACE_TERMINATING, APIError, has_status_cause
from ..machinery.meta import controller_ref
from .base import Controller
from .job import finished as job_finished
from ..client.record import CoreEventRecorder
from .metrics import ControllerMetrics
from .replicaset import owner_reference

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = 0.1  # upstream pads each requeue for clock skew
TOO_MANY_MISSED = 100
#: the zone of a schedule without timeZone: kube-controller-manager's local zone, UTC here
LOCAL_ZONE = dt.timezone.utc

log = logging.getLogger(__name__)


def job_name(cronjob: dict, scheduled: float) -> str:
    return f"{cronjob['metadata']['name']}-{int(scheduled) // 60}"


def most_recent_schedule_time(cj: dict, now: float, schedule: cron.Schedule, zone: dt.tzinfo,
                              with_deadline: bool) -> tuple[float, float | None, int]:
    """(earliest, most recent unmet time or None, number missed), as mostRecentScheduleTime."""
    status, spec = cj.get("status") or {}, cj.get("spec") or {}
    earliest = parse_time(status.get("lastScheduleTime") or cj["metadata"]["creationTimestamp"])
    deadline = spec.get("startingDeadlineSeconds")
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - deadline)
    if now < earliest:  # (its next time is later still: none is met, as a lastScheduleTime of year 9999 says)
        return earliest, None, 0
    t1 = schedule.next(earliest, zone)
    t2 = schedule.next(t1, zone)
    if now < t1:
        return earliest, None, 0
    if now < t2:
        return earliest, t1, 1
    between = round(t2 - t1)
    if between < 1:
        raise ValueError("time difference between two schedules is less than 1 second")
    missed = int(now - t1) // between + 1
    recent = t1 + (missed - 1) * between
    # irregular schedules: step back below `now`, then forward through every time up to it
    while recent > now:
        recent -= between
    t = schedule.next(recent, zone)
    while t <= now:
        recent, t = t, schedule.next(t, zone)
    return earliest, recent, missed


def schedule_of(spec: dict) -> tuple[cron.Schedule, dt.tzinfo]:
    """formatSchedule and its parse: the schedule with the zone it runs in (a timeZone that does not
    load leaves the local zone, as upstream then parses the schedule alone)."""
    text, zone = spec.get("schedule", ""), LOCAL_ZONE
    if "TZ" not in text and spec.get("timeZone") is not None:
        try:
            zone = cron.load_zone(spec["timeZone"])
        except cron.ScheduleError:
            pass
    return cron.parse(text), zone


#: time.Duration's largest, in seconds (what Time.Sub saturates at)
MAX_DURATION = (2**63 - 1) / 1e9


class ReplaceFailed(Exception):
    """A running Job that concurrencyPolicy Replace must delete was not: the sync is retried."""


class EmptyName(Exception):
    """An active reference without a name (a status a user wrote): client-go's Get refuses it before
    any request, so upstream's syncCronJob fails on it, retried, until the reference goes."""


class CronJobController(Controller):
    name = "cronjob-controller"
    queue_name = "cronjob"
    retriable = (ReplaceFailed, EmptyName)

    def __init__(self, client, clock: Clock | None = None, metrics: ControllerMetrics | None = None,
                 informers: InformerFactory | None = None):
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.metrics = metrics or ControllerMetrics()
        self.cronjobs = client.resource("batch", "v1", "cronjobs")
        self.jobs = client.resource("batch", "v1", "jobs")
        self.recorder = CoreEventRecorder(client, "cronjob-controller", self.clock)
        self.cj_inf = self.informer_factory.informer(self.cronjobs)
        self.job_inf = self.informer_factory.informer(self.jobs)
        self.cj_inf.add_handlers(on_add=self._enqueue, on_update=self._cronjob_updated)
        self.job_inf.add_handlers(on_add=self._job_changed, on_update=lambda o, n: self._job_changed(n),
                                  on_delete=self._job_changed)

    def informers(self):
        return [self.cj_inf, self.job_inf]

    def _enqueue(self, cj: dict) -> None:
        self.queue.add(key_of(cj))

    def _cronjob_updated(self, old: dict, cj: dict) -> None:
        """updateCronJob: a new schedule or time zone is synced at its next scheduled time, not at
        once; any other change at once. (A schedule the API server took always parses; one that never
        fires is synced at once, as upstream's negative delay does, and the sync reports it.)"""
        before, spec = old.get("spec") or {}, cj.get("spec") or {}
        if (before.get("schedule"), before.get("timeZone")) != (spec.get("schedule"), spec.get("timeZone")):
            now = self.clock.now()
            try:
                schedule, zone = schedule_of(spec)
                self.queue.add_after(key_of(cj), self._next_delay(cj, now, schedule, zone))
                return
            except ValueError:
                pass
        self._enqueue(cj)

    def _job_changed(self, job: dict) -> None:
        ref = controller_ref(job)
        if ref and ref.get("kind") == "CronJob":
            self.queue.add(f"{job['metadata']['namespace']}/{ref['name']}")

    def _owned_jobs(self, cj: dict) -> list[dict]:
        uid, ns = cj["metadata"]["uid"], cj["metadata"]["namespace"]
        return [j for j in self.job_inf.list_namespace(ns) if (controller_ref(j) or {}).get("uid") == uid]

    async def sync(self, key: str) -> None:
        cj = self.cj_inf.get(key)
        if cj is None:
            return
        jobs = self._owned_jobs(cj)
        listed = {r.get("uid") for r in (cj.get("status") or {}).get("active") or []}
        if any(j["metadata"]["uid"] not in listed and not job_finished(j) for j in jobs):
            # an unlisted running Job: re-read the CronJob, whose status our informer may not show yet
            try:
                cj = await self.cronjobs.get(cj["metadata"]["name"], cj["metadata"]["namespace"])
            except APIError as e:
                if e.code == 404:
                    return
                raise
        status = dict(cj.get("status") or {})
        before = dict(status)
        # upstream's order: cleanupFinishedJobs, then syncCronJob, on one copy of the status
        await self._cleanup_finished(cj, status, jobs)
        failure = None
        try:
            requeue = await self._sync_cronjob(cj, status, jobs)
        except EXPECTED + self.retriable as e:
            failure, requeue = e, None  # what changed before it is written all the same
        for st in (status, before):  # an empty field is no change: upstream writes only what it changed
            for f in ("active", "lastScheduleTime", "lastSuccessfulTime"):
                if not st.get(f):
                    st.pop(f, None)
        if status != before:
            try:
                await self.cronjobs.update({**cj, "status": status}, subresource="status")
            except APIError as e:
                if e.code != 404:
                    raise
        if failure is not None:
            raise failure
        if requeue is not None:
            self.queue.add_after(key, requeue)

    async def _sync_cronjob(self, cj: dict, status: dict, jobs: list[dict]) -> float | None:
        """syncCronJob: reconcile status with the Jobs, then start one if due;
        returns the delay to the next scheduled time."""
        active = list(status.get("active") or [])
        by_uid = {j["metadata"]["uid"]: j for j in jobs}
        for job in jobs:
            uid, finished = job["metadata"]["uid"], job_finished(job)
            listed = any(r.get("uid") == uid for r in active)
            if not listed and not finished:
                await self.recorder.emit(cj, "Warning", "UnexpectedJob",
                                         f"Saw a job that the controller did not create or forgot: {job['metadata']['name']}")
            elif listed and finished:
                active = [r for r in active if r.get("uid") != uid]
                await self.recorder.emit(cj, "Normal", "SawCompletedJob",
                                         f"Saw completed job: {job['metadata']['name']}, condition: {finished}")
            if finished == "Complete":
                done = (job.get("status") or {}).get("completionTime")
                last = status.get("lastSuccessfulTime")
                if done and (last is None or parse_time(done) > parse_time(last)):
                    status["lastSuccessfulTime"] = done
        for ref in list(active):
            if ref.get("uid") in by_uid:
                continue
            if not ref.get("name"):
                raise EmptyName("resource name may not be empty")
            try:
                await self.jobs.get(ref["name"], ref.get("namespace") or cj["metadata"]["namespace"])
            except APIError as e:
                if e.code != 404:
                    raise
                await self.recorder.emit(cj, "Normal", "MissingJob", f"Active job went missing: {ref['name']}")
                active = [r for r in active if r.get("uid") != ref.get("uid")]
        status["active"] = active
        if cj["metadata"].get("deletionTimestamp"):
            return None
        spec = cj.get("spec") or {}
        zone_name = spec.get("timeZone")
        zone = LOCAL_ZONE
        if zone_name is not None:
            try:
                zone = cron.load_zone(zone_name)
            except cron.ScheduleError as e:
                await self.recorder.emit(cj, "Warning", "UnknownTimeZone", f'invalid timeZone: "{zone_name}": {e}')
                return None
        if spec.get("suspend"):
            return None
        text = spec.get("schedule", "")
        if "TZ" in text:
            await self.recorder.emit(cj, "Warning", "UnsupportedSchedule",
                                     f'CRON_TZ or TZ used in schedule "{text}" is not officially supported, see '
                                     "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details")
        try:
            schedule = cron.parse(text)
        except cron.ScheduleError as e:
            await self.recorder.emit(cj, "Warning", "UnparseableSchedule", f'unparseable schedule: "{text}" : {e}')
            return None
        now = self.clock.now()
        cj_now = {**cj, "status": status}
        try:
            _, scheduled, missed = most_recent_schedule_time(cj_now, now, schedule, zone, True)
        except ValueError as e:
            await self.recorder.emit(cj, "Warning", "InvalidSchedule", f"invalid schedule: {text} : {e}")
            return None
        if scheduled is None:
            return self._next_delay(cj_now, now, schedule, zone)
        if missed > TOO_MANY_MISSED:
            await self.recorder.emit(cj, "Warning", "TooManyMissedTimes", "too many missed start times. Set or "
                                     "decrease .spec.startingDeadlineSeconds or check clock skew")
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and scheduled + deadline < now:
            when = email.utils.format_datetime(dt.datetime.fromtimestamp(scheduled, dt.timezone.utc))
            await self.recorder.emit(cj, "Warning", "MissSchedule", f"Missed scheduled time to start a job: {when}")
            return self._next_delay(cj_now, now, schedule, zone)
        name = job_name(cj, scheduled)
        if any(r.get("name") == name for r in active) or status.get("lastScheduleTime") == format_time(scheduled):
            return self._next_delay(cj_now, now, schedule, zone)
        if spec.get("concurrencyPolicy") == "Forbid" and active:
            await self.recorder.emit(cj, "Normal", "JobAlreadyActive",
                                     "Not starting job because prior execution is running and concurrency policy is Forbid")
            return self._next_delay(cj_now, now, schedule, zone)
        if spec.get("concurrencyPolicy") == "Replace":
            for ref in active:
                ns = ref.get("namespace") or cj["metadata"]["namespace"]
                try:
                    running = await self.jobs.get(ref["name"], ns)
                except APIError as e:
                    await self.recorder.emit(cj, "Warning", "FailedGet", f"Get job: {e.message}")
                    raise
                if not await self._delete_job(cj, status, running):
                    raise ReplaceFailed(f"could not replace job {ns}/{ref['name']}")
            active = status["active"]
        job = await self._create_job(cj, name, scheduled, zone)
        if job is None:
            return None
        if not any(r.get("uid") == job["metadata"]["uid"] for r in active):
            active.append({"kind": "Job", "namespace": job["metadata"]["namespace"], "name": job["metadata"]["name"],
                           "uid": job["metadata"]["uid"], "apiVersion": "batch/v1",
                           "resourceVersion": job["metadata"]["resourceVersion"]})
        status["lastScheduleTime"] = format_time(scheduled)
        return self._next_delay({**cj, "status": status}, now, schedule, zone)

    @staticmethod
    def _next_delay(cj: dict, now: float, schedule: cron.Schedule, zone: dt.tzinfo) -> float:
        """nextScheduleTimeDuration: until the time after the most recent one, plus 100 ms; a time past
        year 9999 (a lastScheduleTime of 9999 set by a status write), where Go's time goes on, is Sub's
        duration clamped to its largest."""
        earliest, recent, _ = most_recent_schedule_time(cj, now, schedule, zone, False)
        try:
            return schedule.next(recent if recent is not None else earliest, zone) + NEXT_SCHEDULE_DELTA - now
        except OverflowError:
            return MAX_DURATION

    async def _create_job(self, cj: dict, name: str, scheduled: float, zone: dt.tzinfo) -> dict | None:
        """getJobFromTemplate2 and create; an existing Job of ours (a status
        update lost earlier) is taken as created, anyone else's is left alone."""
        template = (cj.get("spec") or {}).get("jobTemplate") or {}
        tmd = template.get("metadata") or {}
        stamp = dt.datetime.fromtimestamp(scheduled, zone).isoformat().replace("+00:00", "Z")
        md = {"name": name, "namespace": cj["metadata"]["namespace"],
              "labels": dict(tmd.get("labels") or {}),
              "annotations": {**(tmd.get("annotations") or {}), SCHEDULED_TIMESTAMP: stamp},
              "ownerReferences": [owner_reference(cj, "batch/v1", "CronJob")]}
        if not md["labels"]:
            md.pop("labels")
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": template.get("spec") or {}}
        try:
            job = await self.jobs.create(body)
        except APIError as e:
            if e.code != 409 or e.reason != "AlreadyExists":
                if not has_status_cause(e, NAMESPACE_TERMINATING):  # every create there fails: no news
                    await self.recorder.emit(cj, "Warning", "FailedCreate", f"Error creating job: {e.message}")
                raise
            job = await self.jobs.get(name, cj["metadata"]["namespace"])
            if (controller_ref(job) or {}).get("uid") != cj["metadata"]["uid"]:
                return None
            return job
        self.metrics.cronjob_creation_skew.observe(max(0.0, self.clock.now() - scheduled))
        await self.recorder.emit(cj, "Normal", "SuccessfulCreate", f"Created job {name}")
        return job

    async def _delete_job(self, cj: dict, status: dict, job: dict) -> bool:
        """deleteJob: delete `job` and drop it from status.active; a failure (not found included) is
        a FailedDelete Event, not an error, so the sync goes on. Whether it was deleted."""
        md = job["metadata"]
        try:
            await self.jobs.delete(md["name"], md["namespace"], propagation_policy="Background")
        except APIError as e:
            await self.recorder.emit(cj, "Warning", "FailedDelete", f"Deleted job: {e.message}")
            log.warning("cronjob %s/%s: deleting job %s failed: %s", cj["metadata"]["namespace"],
                        cj["metadata"]["name"], md["name"], e.message)
            return False
        status["active"] = [r for r in status.get("active") or [] if r.get("uid") != md["uid"]]
        await self.recorder.emit(cj, "Normal", "SuccessfulDelete", f"Deleted job {md['name']}")
        return True

    async def _cleanup_finished(self, cj: dict, status: dict, jobs: list[dict]) -> None:
        """cleanupFinishedJobs: the oldest finished Jobs beyond each history limit go (by start
        time, none last, then by name: byJobStartTime), each deleted one out of status.active
        too, so syncCronJob after it reports no SawCompletedJob for it."""
        spec = cj.get("spec") or {}
        for kind, limit in (("Complete", spec.get("successfulJobsHistoryLimit")),
                            ("Failed", spec.get("failedJobsHistoryLimit"))):
            if limit is None:
                continue
            done = [j for j in jobs if job_finished(j) == kind]
            if len(done) <= limit:
                continue
            done.sort(key=_by_start_time)
            for job in done[:len(done) - limit]:
                await self._delete_job(cj, status, job)


def _by_start_time(job: dict) -> tuple:
    """byJobStartTime's order as a sort key: a Job not started yet counts as the newest."""
    start = (job.get("status") or {}).get("startTime")
    return start is None, parse_time(start) if start else 0.0, job["metadata"]["name"]
