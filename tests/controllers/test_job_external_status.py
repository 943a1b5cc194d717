"""The status rules JobManagedBy puts on every Job, for the external controller that writes a Job's
status (MultiKueue's mirror of a worker cluster's Job): a finished Job's status must be whole."""

import pytest

from nanokube.machinery.errors import APIError
from tests.controllers import make_stack
from tests.controllers.test_job import job


@pytest.fixture
async def client():
    s = await make_stack()
    yield s.client
    await s.close()


def cond(ctype: str) -> dict:
    return {"type": ctype, "status": "True", "lastProbeTime": "2026-12-07T08:10:00Z",
            "lastTransitionTime": "2026-12-07T08:10:00Z", "reason": "CompletionsReached", "message": "done"}


async def refused(jobs, cur: dict, status: dict) -> list[str]:
    with pytest.raises(APIError) as e:
        await jobs.update({**cur, "status": status}, subresource="status")
    assert e.value.code == 422
    return [f"{c['field']}: {c['message']}" for c in e.value.details["causes"]]


async def test_a_finished_jobs_status_must_be_whole(client):
    jobs = client.resource("batch", "v1", "jobs")
    cur = await jobs.create(job("ext", managedBy="kueue.x-k8s.io/multikueue"))
    start = "2026-12-07T08:00:00Z"
    done = [cond("SuccessCriteriaMet"), cond("Complete")]
    assert await refused(jobs, cur, {"conditions": done}) == [
        "status.completionTime: Required value: completionTime is required for Complete jobs",
        "status.startTime: Required value: startTime is required for finished job"]
    assert await refused(jobs, cur, {
        "startTime": start, "completionTime": "2026-12-07T07:59:00Z", "active": 1, "conditions": done,
        "uncountedTerminatedPods": {"failed": ["u1"]}}) == [
        "status.completionTime: Invalid value: 2026-12-07 07:59:00 +0000 UTC: completionTime cannot be set before startTime",
        "status.active: Invalid value: 1: active>0 is invalid for finished job",
        'status.uncountedTerminatedPods: Invalid value: {"failed":["u1"]}: uncountedTerminatedPods needs to be '
        "empty for finished job"]
    assert await refused(jobs, cur, {"startTime": start, "completionTime": "2026-12-07T08:10:00Z",
                                     "conditions": [cond("Complete"), cond("Failed")]}) == [
        "status.conditions: Invalid value: cannot set Complete=True and Failed=true conditions",
        "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition",
        "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true "
        "condition"]
    assert await refused(jobs, cur, {"completionTime": "2026-12-07T08:10:00Z"}) == [
        "status.completionTime: Invalid value: 2026-12-07 08:10:00 +0000 UTC: cannot set completionTime when "
        "there is no Complete=True condition"]
    cur = await jobs.update({**cur, "status": {"startTime": start, "completionTime": "2026-12-07T08:10:00Z",
                                               "succeeded": 1, "conditions": done}}, subresource="status")
    moved = {**cur["status"], "completionTime": "2026-12-07T08:11:00Z"}
    assert await refused(jobs, cur, moved) == [
        "status.completionTime: Invalid value: 2026-12-07 08:11:00 +0000 UTC: completionTime cannot be mutated"]
    gone = {**cur["status"], "conditions": [cond("Complete")]}
    assert await refused(jobs, cur, gone) == [
        "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true "
        "condition",
        "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True condition"]


async def test_a_job_ends_through_its_interim_condition_with_its_pods_counted(client):
    """Failed only after FailureTarget, no terminating pods on a finished Job, never more ready pods
    than active ones: each rule checked only when a field it reads changes."""
    jobs = client.resource("batch", "v1", "jobs")
    cur = await jobs.create(job("ext", managedBy="kueue.x-k8s.io/multikueue"))
    start = "2026-12-07T08:00:00Z"
    assert await refused(jobs, cur, {"startTime": start, "conditions": [cond("Failed")]}) == [
        "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"]
    assert await refused(jobs, cur, {"startTime": start, "active": 1, "ready": 2}) == [
        "status.ready: Invalid value: 2: cannot set more ready pods than active"]
    cur = await jobs.update({**cur, "status": {"startTime": start, "terminating": 1,
                                               "conditions": [cond("FailureTarget")]}}, subresource="status")
    assert await refused(jobs, cur, {**cur["status"], "conditions": [cond("FailureTarget"), cond("Failed")]}) == [
        "status.terminating: Invalid value: 1: terminating>0 is invalid for finished job"]
    failed = await jobs.update({**cur, "status": {**cur["status"], "terminating": 0,
                                                  "conditions": [cond("FailureTarget"), cond("Failed")]}},
                               subresource="status")
    assert [c["type"] for c in failed["status"]["conditions"]] == ["FailureTarget", "Failed"]


async def test_an_unsuspended_jobs_start_time_stays_but_for_a_resume(client):
    """RejectStartTimeUpdateForUnsuspendedJob: once set, startTime is neither moved nor removed on a
    running Job, except in the write that resumes it (Suspended True to False), as the Job
    controller's own resume does."""
    jobs = client.resource("batch", "v1", "jobs")
    cur = await jobs.create(job("ext", managedBy="kueue.x-k8s.io/multikueue"))
    cur = await jobs.update({**cur, "status": {"startTime": "2026-12-07T08:00:00Z"}}, subresource="status")
    for status, bad in (({"startTime": "2026-12-07T08:05:00Z"}, "2026-12-07 08:05:00 +0000 UTC"), ({}, "null")):
        assert await refused(jobs, cur, status) == [
            f"status.startTime: Invalid value: {bad}: field is immutable for unsuspended job once set"]
    suspended = {**cond("Suspended"), "reason": "JobSuspended"}
    cur = await jobs.update({**cur, "status": {**cur["status"], "conditions": [suspended]}}, subresource="status")
    resumed = {**suspended, "status": "False", "reason": "JobResumed"}
    cur = await jobs.update({**cur, "status": {"startTime": "2026-12-07T08:05:00Z", "conditions": [resumed]}},
                            subresource="status")
    assert cur["status"]["startTime"] == "2026-12-07T08:05:00Z"
