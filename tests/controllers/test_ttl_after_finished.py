"""TTL after finished: a finished Job is deleted ttlSecondsAfterFinished after
its Complete/Failed condition, never while running or without a TTL."""

import pytest

from nanokube.clock import format_time
from nanokube.controllers.ttl_after_finished import TTLAfterFinishedController, expires_at
from tests.controllers import eventually, make_stack
from tests.node import ManualClock


@pytest.fixture
async def env():
    s = await make_stack()
    clock = ManualClock()
    ctrl = TTLAfterFinishedController(s.client, clock)
    await ctrl.start()
    yield s.client, clock, ctrl
    await ctrl.stop()
    await s.close()


def job(name, ttl=None):
    spec = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def finish(client, name, at):
    jobs = client.resource("batch", "v1", "jobs")
    cur = await jobs.get(name, "default")
    t = format_time(at)
    conds = [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": t, "reason": "CompletionsReached"},
             {"type": "Complete", "status": "True", "lastTransitionTime": t, "reason": "CompletionsReached"}]
    await jobs.update({**cur, "status": {"conditions": conds, "startTime": t, "completionTime": t, "succeeded": 1}},
                      subresource="status")


def test_expiry_needs_a_ttl_and_a_finished_condition():
    running = job("a", ttl=5)
    assert expires_at(running) is None
    done = {**running, "status": {"conditions": [{"type": "Failed", "status": "True",
                                                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    assert expires_at(done) == expires_at({**done, "spec": {"ttlSecondsAfterFinished": 0}}) + 5
    assert expires_at({**done, "spec": {}}) is None


async def test_a_finished_job_is_deleted_after_its_ttl(env):
    client, clock, ctrl = env
    jobs = client.resource("batch", "v1", "jobs")
    for name, ttl in (("short", 30), ("forever", None)):
        await jobs.create(job(name, ttl))
        await finish(client, name, clock.now())
    await eventually(lambda: _async(ctrl.jobs.get("default/short") and expires_at(ctrl.jobs.get("default/short"))))
    await clock.advance(29)
    assert (await jobs.get("short", "default"))["metadata"].get("deletionTimestamp") is None
    await clock.advance(2)

    async def gone():
        items, _ = await jobs.list("default")
        return [j["metadata"]["name"] for j in items if not j["metadata"].get("deletionTimestamp")] == ["forever"]
    assert await eventually(gone)


async def _async(value):
    return value
