"""CronJob controller in virtual time: a VirtualClock drives the API server
(creation timestamps) and the controller (its requeues), so a simulated day
of an every-minute CronJob takes seconds."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from nanokube.apiserver.admission import Admission
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.clock import VirtualClock, format_time
from nanokube.controllers.cronjob import CronJobController, most_recent_schedule_time
from nanokube.machinery import cron
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore
from tests.controllers import becomes, eventually, tries
from tests.controllers.test_replicaset import stop

#: the controller the running test's env started
_controllers: list = []
START = 1_800_000_000.0 - 1_800_000_000.0 % 86400 + 30  # 00:00:30 UTC


async def start(clock: VirtualClock):
    """An in-process API server and a CronJob controller on `clock`; returns (client, stopper)."""
    store = MemoryStore()
    cache = WatchCache(store)
    rest = GenericREST(store, cache, ResourceIndex(all_resources()), clock)
    rest.admission = Admission(rest)
    await store.start()
    await cache.start()
    client = LocalClient(rest)
    await client.resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
    ctrl = CronJobController(client, clock=clock)
    await ctrl.start()
    _controllers[:] = [ctrl]

    async def close():
        await stop(ctrl)
        await cache.stop()
        await store.close()
    return client, close


@pytest.fixture
async def env():
    clock = VirtualClock(start=START)
    client, close = await start(clock)
    yield client, clock
    await close()


def cronjob(name="tick", schedule="*/1 * * * *", **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": schedule, "jobTemplate": {"metadata": {"labels": {"run": name}}, "spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}},
                **spec}}


async def soon(check):
    """`eventually` with a short poll: in virtual time the work is already due,
    only the loop has to run it."""
    for _ in tries():
        if got := await check():
            return got
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


async def finish(client, job: dict, clock, kind="Complete") -> None:
    """Play the Job controller: mark `job` finished now."""
    now = format_time(clock.now())
    conds = [{"type": "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget", "status": "True",
              "lastTransitionTime": now}, {"type": kind, "status": "True", "lastTransitionTime": now}]
    status = {"startTime": job["metadata"]["creationTimestamp"], "conditions": conds,
              "succeeded" if kind == "Complete" else "failed": 1}
    if kind == "Complete":
        status["completionTime"] = now
    await client.resource("batch", "v1", "jobs").update({**job, "status": status}, subresource="status")


async def jobs(client) -> list[dict]:
    items, _ = await client.resource("batch", "v1", "jobs").list("default")
    return [j for j in items if not j["metadata"].get("deletionTimestamp")]


async def events(client, reason=None) -> list[dict]:
    items, _ = await client.resource("", "v1", "events").list("default")
    return [e for e in items if reason is None or e["reason"] == reason]


async def test_every_minute_for_three_hours_to_midnight_keeps_history_limits(env):
    """180 runs, the last at the next day's 00:00: the history limits hold after each (the work is
    the same every minute, so more hours would add only time)."""
    client, clock = env
    await clock.advance(21 * 3600)  # 21:00:30, before any CronJob exists
    first = START + 21 * 3600
    cjs = client.resource("batch", "v1", "cronjobs")
    await cjs.create(cronjob())
    finished: set[str] = set()
    for minute in range(1, 3 * 60 + 1):
        await clock.advance(60)
        name = f"tick-{int(first + 60 * minute) // 60}"

        async def created():
            return next((j for j in await jobs(client) if j["metadata"]["name"] == name), None)
        job = await soon(created)
        assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
        await finish(client, job, clock, "Failed" if minute % 7 == 0 else "Complete")
        finished.add(name)

        async def settled():
            left = await jobs(client)
            st = (await cjs.get("tick", "default")).get("status") or {}
            return not st.get("active") and len(left) <= 4 and st.get("lastScheduleTime") == format_time(
                int(first + 60 * minute) // 60 * 60)
        await soon(settled)
    left = await jobs(client)
    kinds = sorted(j["status"]["conditions"][-1]["type"] for j in left)
    assert kinds == ["Complete", "Complete", "Complete", "Failed"], "3 successful and 1 failed are kept"
    newest = sorted(j["metadata"]["name"] for j in left if j["status"]["conditions"][-1]["type"] == "Complete")
    last = int(START + 86400) // 60
    assert newest == [f"tick-{last - 2}", f"tick-{last - 1}", f"tick-{last}"]
    assert format_time(last * 60).endswith("T00:00:00Z")
    st = (await cjs.get("tick", "default"))["status"]
    assert st["lastSuccessfulTime"] == format_time(clock.now())
    assert len(finished) == 180
    # client-go's event correlator (client/record.py): from the 10th similar message in 10 minutes
    # on, the creations count on one combined Event. The spam filter (25 events, then one every 5
    # minutes) is empty from about the 9th minute (resyncs on a lagging informer repeat some
    # SawCompletedJob, each taking a token), and as its bucket started at the first creation, each
    # later token is due at a creation instant: by client-go's float32 rate it is there, so the
    # combined Event is written, at the 10th or the 11th creation
    created = await events(client, "SuccessfulCreate")
    assert sorted(e["message"].startswith("(combined from similar events): ") for e in created) == [False] * 9 + [True]
    skew = _controllers[0].metrics.cronjob_creation_skew
    assert skew.collect()[0].samples[0].value == 180, "every job created within 1 s of its time"
    assert not await events(client, "UnexpectedJob")


async def test_history_cleanup_runs_before_the_job_reconcile(env):
    """sync runs cleanupFinishedJobs before syncCronJob: the old Job's SuccessfulDelete comes
    before the new one's SawCompletedJob, and a Job the cleanup deletes leaves status.active
    there, so with a history limit of 0 no SawCompletedJob is ever reported."""
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    _, rv = await client.resource("", "v1", "events").list("default")
    stream = await client.resource("", "v1", "events").watch("default", rv)
    added: list[tuple[str, str, str]] = []

    async def collect():
        async for typ, ev in stream:
            if typ == "ADDED":
                added.append((ev["involvedObject"]["name"], ev["reason"], ev["message"]))
    collector = asyncio.create_task(collect())
    await cjs.create(cronjob("keep1", successfulJobsHistoryLimit=1))
    await cjs.create(cronjob("keep0", successfulJobsHistoryLimit=0))
    names = []
    for minute in (1, 2):
        await clock.advance(60)
        minute_name = int(START + 60 * minute) // 60
        names.append(minute_name)
        for cj in ("keep1", "keep0"):
            job = await soon(lambda: _named(client, f"{cj}-{minute_name}"))
            await finish(client, job, clock)

        async def idle():
            st = [(await cjs.get(n, "default")).get("status") or {} for n in ("keep1", "keep0")]
            return all(not s.get("active") and s.get("lastSuccessfulTime") == format_time(clock.now()) for s in st)
        await soon(idle)
    await clock.advance(0)

    async def all_written():  # the recorder writes its Events from a queue, after the statuses seen above
        return len([a for a in added if a[0] == "keep1"]) >= 5 and \
            len([a for a in added if a[0] == "keep0" and a[1] != "MissingJob"]) >= 4
    await soon(all_written)
    collector.cancel()
    await asyncio.gather(collector, return_exceptions=True)
    await stream.aclose()
    first, second = names
    assert [(r, m) for n, r, m in added if n == "keep1"] == [
        ("SuccessfulCreate", f"Created job keep1-{first}"),
        ("SawCompletedJob", f"Saw completed job: keep1-{first}, condition: Complete"),
        ("SuccessfulCreate", f"Created job keep1-{second}"),
        ("SuccessfulDelete", f"Deleted job keep1-{first}"),
        ("SawCompletedJob", f"Saw completed job: keep1-{second}, condition: Complete")]
    # a resync right after the status write may still read the old status.active from the informer
    # and find that Job gone: MissingJob, as upstream's lister lag gives; it is no SawCompletedJob
    assert [(r, m) for n, r, m in added if n == "keep0" and r != "MissingJob"] == [
        ("SuccessfulCreate", f"Created job keep0-{first}"), ("SuccessfulDelete", f"Deleted job keep0-{first}"),
        ("SuccessfulCreate", f"Created job keep0-{second}"), ("SuccessfulDelete", f"Deleted job keep0-{second}")]
    assert [j["metadata"]["name"] for j in await jobs(client)] == [f"keep1-{second}"]


async def test_forbid_skips_while_a_job_runs_and_replace_replaces_it(env):
    client, clock = env
    await client.resource("batch", "v1", "cronjobs").create(cronjob("forbid", concurrencyPolicy="Forbid"))
    await client.resource("batch", "v1", "cronjobs").create(cronjob("replace", concurrencyPolicy="Replace"))
    await clock.advance(60)
    first = await eventually(lambda: _two(client))
    await clock.advance(60)
    await eventually(lambda: _has_event(client, "JobAlreadyActive"))
    names = {j["metadata"]["name"] for j in await jobs(client)}
    assert sum(n.startswith("forbid-") for n in names) == 1
    await eventually(lambda: _replaced(client, first))
    msgs = [e["message"] for e in await events(client, "JobAlreadyActive")]
    assert msgs == ["Not starting job because prior execution is running and concurrency policy is Forbid"]


async def _two(client):
    js = await jobs(client)
    return js if len(js) == 2 else None


async def _has_event(client, reason):
    return await events(client, reason)


async def _replaced(client, first):
    old = next(j["metadata"]["name"] for j in first if j["metadata"]["name"].startswith("replace-"))
    names = {j["metadata"]["name"] for j in await jobs(client) if j["metadata"]["name"].startswith("replace-")}
    return len(names) == 1 and old not in names


async def test_suspend_deadline_and_time_zone(env):
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    await cjs.create(cronjob("strict", suspend=True))
    await cjs.create(cronjob("late", suspend=True))
    await cjs.create(cronjob("berlin", schedule="0 2 * * *", timeZone="Europe/Berlin"))
    await clock.advance(3600)
    job = await eventually(lambda: _named(client, "berlin-"))
    stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    local = dt.datetime.fromisoformat(stamp)
    assert (local.hour, local.minute, local.utcoffset()) == (2, 0, dt.timedelta(hours=1)), "01:00 UTC, in January"
    assert job["metadata"]["name"] == f"berlin-{int(local.timestamp()) // 60}"
    assert not await _named(client, "strict-") and not await _named(client, "late-"), "suspended: nothing runs"
    # lifted 30 s after 01:00: without a deadline the missed 01:00 run starts late; with 10 s it is skipped
    await cjs.patch("strict", {"spec": {"suspend": False, "startingDeadlineSeconds": 10}}, namespace="default")
    await cjs.patch("late", {"spec": {"suspend": False}}, namespace="default")
    one_am = int(START - 30 + 3600) // 60
    late = await eventually(lambda: _named(client, "late-"))
    assert late["metadata"]["name"] == f"late-{one_am}"
    assert not await _named(client, "strict-")
    await clock.advance(31)  # requeued 100 ms after 01:01, as upstream pads for clock skew
    strict = await eventually(lambda: _named(client, "strict-"))
    assert strict["metadata"]["name"] == f"strict-{one_am + 1}"


async def _named(client, prefix):
    return next((j for j in await jobs(client) if j["metadata"]["name"].startswith(prefix)), None)


def test_most_recent_schedule_time_counts_missed_runs():
    sched = cron.parse("@hourly")
    cj = {"metadata": {"creationTimestamp": format_time(START)}, "spec": {}, "status": {}}
    utc = dt.timezone.utc
    assert most_recent_schedule_time(cj, START + 60, sched, utc, True)[1] is None
    _, recent, missed = most_recent_schedule_time(cj, START + 5 * 3600, sched, utc, True)
    assert (recent, missed) == (START - 30 + 5 * 3600, 5)
    _, recent, missed = most_recent_schedule_time({**cj, "spec": {"startingDeadlineSeconds": 600}},
                                                  START + 5 * 3600, sched, utc, True)
    assert (recent, missed) == (START - 30 + 5 * 3600, 1)
    _, recent, missed = most_recent_schedule_time(cj, START + 200 * 3600, sched, utc, True)
    assert missed == 200 and recent == START - 30 + 200 * 3600
    # a lastScheduleTime past now (year 9999, which a status write may set): none met, as schedule.Next is later still
    future = {**cj, "status": {"lastScheduleTime": "9999-12-31T23:59:59Z"}}
    assert most_recent_schedule_time(future, START, cron.parse("* * * * *"), utc, True)[1:] == (None, 0)
    assert CronJobController._next_delay(future, START, cron.parse("* * * * *"), utc) == (2**63 - 1) / 1e9


async def test_a_schedule_that_never_fires_is_reported_once_per_sync(env):
    client, clock = env
    await client.resource("batch", "v1", "cronjobs").create(cronjob("never", schedule="0 0 30 2 *"))
    await eventually(lambda: _has_event(client, "InvalidSchedule"))
    msg = (await events(client, "InvalidSchedule"))[0]["message"]
    assert msg == "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second"
    await clock.advance(3600)
    assert not await jobs(client)


async def test_creation_skew_is_observed(env):
    client, clock = env
    await client.resource("batch", "v1", "cronjobs").create(cronjob())
    await clock.advance(60)
    await eventually(lambda: _named(client, "tick-"))
    from nanokube.metrics.exposition import render

    ctrl_metrics = [c for c in _controllers if isinstance(c, CronJobController)][0].metrics
    text = render(ctrl_metrics.registry).decode()  # as /metrics serves it
    assert "cronjob_controller_job_creation_skew_duration_seconds_count 1\n" in text
    assert 'cronjob_controller_job_creation_skew_duration_seconds_bucket{le="1"} 1\n' in text
    assert ("# HELP cronjob_controller_job_creation_skew_duration_seconds [STABLE] Time between when a cronjob is "
            "scheduled to be run, and when the corresponding job is created\n") in text


async def deny_jobs(client, operation: str) -> None:
    """A ValidatingAdmissionPolicy (and its binding) refusing every `operation` on Jobs."""
    g = "admissionregistration.k8s.io"
    await client.resource(g, "v1", "validatingadmissionpolicies").create({
        "metadata": {"name": "keep-jobs"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"],
                                                         "operations": [operation], "resources": ["jobs"]}]},
                 "validations": [{"expression": "false", "message": f"no {operation} of jobs"}]}})
    await client.resource(g, "v1", "validatingadmissionpolicybindings").create({
        "metadata": {"name": "keep-jobs"}, "spec": {"policyName": "keep-jobs", "validationActions": ["Deny"]}})


async def test_a_finished_job_it_cannot_delete_is_a_failed_delete_and_the_sync_goes_on(env):
    """cleanupFinishedJobs: the delete of a Job past the history limit is refused: a FailedDelete
    Event, and syncCronJob runs on all the same, its status written (the Job seen completed)."""
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    await deny_jobs(client, "DELETE")
    await cjs.create(cronjob(successfulJobsHistoryLimit=0))
    await clock.advance(60)
    job = await soon(lambda: _named(client, "tick-"))
    await finish(client, job, clock)

    async def seen_completed():
        st = (await cjs.get("tick", "default")).get("status") or {}
        return st if st.get("lastSuccessfulTime") else None
    st = await soon(seen_completed)
    assert "active" not in st and st["lastSuccessfulTime"] == format_time(clock.now())
    failed = await soon(lambda: events(client, "FailedDelete"))
    assert failed[0]["message"].startswith("Deleted job: ")
    assert failed[0]["message"].endswith("denied request: no DELETE of jobs")

    async def saw():
        return [e["message"] for e in await events(client, "SawCompletedJob")]
    await becomes(saw, [f"Saw completed job: {job['metadata']['name']}, condition: Complete"])
    assert [j["metadata"]["name"] for j in await jobs(client)] == [job["metadata"]["name"]]


async def test_a_failed_create_still_writes_what_the_sync_found(env):
    """syncCronJob drops an active Job that is gone (MissingJob), then its create is refused: the
    FailedCreate is reported, the error returned, and status.active written without the lost Job."""
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    await deny_jobs(client, "CREATE")
    await cjs.create(cronjob())
    await clock.advance(60)
    await soon(lambda: events(client, "FailedCreate"))
    ghost = {"kind": "Job", "namespace": "default", "name": "ghost", "uid": "0-ghost", "apiVersion": "batch/v1"}
    await cjs.patch("tick", {"status": {"active": [ghost]}}, namespace="default", subresource="status")

    async def ghost_dropped():
        st = (await cjs.get("tick", "default")).get("status") or {}
        return [st] if (await events(client, "MissingJob")) and not st.get("active") else None
    (st,) = await soon(ghost_dropped)
    assert "lastScheduleTime" not in st
    assert [e["message"] for e in await events(client, "MissingJob")] == ["Active job went missing: ghost"]
    failed = await events(client, "FailedCreate")
    assert failed[0]["message"].startswith("Error creating job: ") and failed[0]["count"] >= 2
    assert not await jobs(client)


async def test_a_create_refused_in_a_terminating_namespace_is_not_reported(env, caplog):
    """CreateJob refused because the namespace is being deleted: no FailedCreate Event (the error is
    still returned, and logged, as upstream's sync does)."""
    client, clock = env
    namespaces, cjs = client.resource("", "v1", "namespaces"), client.resource("batch", "v1", "cronjobs")
    await namespaces.create({"metadata": {"name": "doomed", "finalizers": ["e2e.nanokube.io/hold"]}})
    body = cronjob()
    body["metadata"]["namespace"] = "doomed"
    await cjs.create(body)
    await namespaces.delete("doomed")
    await clock.advance(60)

    async def refused():
        return [r for r in caplog.records if "doomed/tick" in r.getMessage() and "being terminated" in r.getMessage()]
    await soon(refused)
    items, _ = await client.resource("", "v1", "events").list("doomed")
    assert [e["reason"] for e in items] == []
    assert not (await client.resource("batch", "v1", "jobs").list("doomed"))[0]


async def test_replace_stops_when_the_running_job_cannot_be_deleted(env, caplog):
    """concurrencyPolicy Replace and a running Job whose delete is refused: a FailedDelete Event, no
    new Job, and the sync fails with 'could not replace job' (retried), as upstream's syncCronJob."""
    client, clock = env
    await deny_jobs(client, "DELETE")
    await client.resource("batch", "v1", "cronjobs").create(cronjob("replace", concurrencyPolicy="Replace"))
    await clock.advance(60)
    first = await soon(lambda: _named(client, "replace-"))
    await clock.advance(60)
    failed = await soon(lambda: events(client, "FailedDelete"))
    assert failed[0]["message"].endswith("denied request: no DELETE of jobs")
    name = first["metadata"]["name"]

    async def retried():
        return [r for r in caplog.records if f"could not replace job default/{name}" in r.getMessage()]
    await soon(retried)
    assert [j["metadata"]["name"] for j in await jobs(client)] == [name]


async def test_a_new_schedule_is_synced_at_its_next_time_not_at_once(env):
    """updateCronJob: hourly, changed at 00:03 to every minute. The change is synced at the new
    schedule's next time (00:04 and 100 ms), so the Job started is 00:04's; syncing at once would have
    started one for 00:03 at once."""
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    await cjs.create(cronjob(schedule="0 * * * *"))
    await clock.advance(150)  # 00:03:00
    await cjs.patch("tick", {"spec": {"schedule": "*/1 * * * *"}}, namespace="default")
    for _ in range(50):
        await clock.advance(0)
        await asyncio.sleep(0.001)
    assert await jobs(client) == []
    await clock.advance(61)
    job = await soon(lambda: _named(client, "tick-"))
    assert job["metadata"]["name"] == f"tick-{int(START - 30 + 240) // 60}"
    assert [j["metadata"]["name"] for j in await jobs(client)] == [job["metadata"]["name"]]


async def test_a_new_schedule_that_never_fires_is_synced_and_reported_at_once(env):
    """A changed schedule with no next time (30 February) has no time to wait for: it is synced at
    once, and the sync reports it."""
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    await cjs.create(cronjob())
    await cjs.patch("tick", {"spec": {"schedule": "0 0 30 2 *"}}, namespace="default")
    got = await soon(lambda: events(client, "InvalidSchedule"))
    assert got[0]["message"] == "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second"


async def test_a_sync_that_changes_nothing_writes_no_status(env, tmp_path):
    """A CronJob whose every time falls outside startingDeadlineSeconds is synced each second and
    starts nothing: its status (no active Jobs) is not written again and again, as upstream's
    syncCronJob asks for a status update only where it changed one. Such a sync shows nothing, so
    the test runs five itself, once the controller's informer has the CronJob."""
    from nanokube.apiserver.audit import AuditLog

    async def cached():
        return ctrl.cj_inf.get("default/late")

    client, clock = env
    (ctrl,) = _controllers
    client.rest.audit = audit = AuditLog(str(tmp_path / "audit.log"))
    try:
        await client.resource("batch", "v1", "cronjobs").create(
            cronjob("late", schedule="@every 1s", startingDeadlineSeconds=0))
        assert await soon(cached)
        for _ in range(5):
            await clock.advance(1)
            await ctrl.sync("default/late")
    finally:
        audit.close()
        client.rest.audit = None
    writes = [line for line in (tmp_path / "audit.log").read_text().splitlines() if '"cronjobs"' in line]
    assert writes and all('"subresource":"status"' not in w for w in writes), writes
    assert not await jobs(client)


async def test_an_active_reference_without_a_name_fails_the_sync_without_a_traceback(env, caplog):
    """status.active of a reference a user wrote without a name: client-go's GetJob refuses the empty
    name, so upstream's syncCronJob returns that error (retried) and starts nothing; it was a KeyError
    and its traceback on every retry (fuzz60)."""
    client, clock = env
    cjs = client.resource("batch", "v1", "cronjobs")
    made = await cjs.create(cronjob("nameless"))
    await cjs.update({**made, "status": {"active": [{"kind": "Job", "uid": "u-1"}]}}, subresource="status")
    await clock.advance(60)

    async def refused():
        return [r for r in caplog.records if "default/nameless" in r.getMessage()
                and "resource name may not be empty" in r.getMessage()]
    await soon(refused)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert await jobs(client) == []
