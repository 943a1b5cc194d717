"""backoffLimitPerIndex, maxFailedIndexes and the FailIndex action, driven
through the in-process API: each case fails or finishes pods index by index
and checks the Job's status as upstream reports it."""

import pytest

from nanokube.controllers import job_failure_policy as jfp
from nanokube.controllers.job import indexes_ready, options_from_env
from tests.controllers import eventually, ticking
from tests.controllers.test_job import env, job  # noqa: F401  (the fixture)

INDEX = "batch.kubernetes.io/job-completion-index"
DISRUPTED = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]


def indexed(completions, per_index, **spec):
    return job(completions=completions, parallelism=completions, completionMode="Indexed",
               backoffLimitPerIndex=per_index, **spec)


async def live_pod(client, index):
    items, _ = await client.resource("", "v1", "pods").list("default")
    return next((p for p in items if p["metadata"]["annotations"][INDEX] == str(index)
                 and not p["metadata"].get("deletionTimestamp")
                 and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")), None)


async def end(client, pod, how):
    """Finish a pod: "ok" succeeds, an int fails with that exit code,
    "disrupted" fails with the DisruptionTarget condition."""
    pods = client.resource("", "v1", "pods")
    cur = await pods.get(pod["metadata"]["name"], "default")
    code = 0 if how == "ok" else 137 if how == "disrupted" else how
    await pods.update({**cur, "status": {
        "phase": "Succeeded" if how == "ok" else "Failed",
        "conditions": DISRUPTED if how == "disrupted" else [],
        "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
                               "state": {"terminated": {"exitCode": code}}}]}}, subresource="status")


async def finished(client):
    j = await client.resource("batch", "v1", "jobs").get("pi", "default")
    conds = {c["type"]: c for c in (j.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
    return (j, conds) if {"Complete", "Failed"} & set(conds) else None


FAIL_INDEX = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}]}
FAIL_JOB = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [7]}}]}
IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}

CASES = {
    # name: (job, [(index, how)], expected status, {index: failure-count annotations in creation order})
    "an index past its limit fails, the others complete": (
        indexed(3, 1), [(1, 1), (1, 1), (0, "ok"), (2, "ok")],
        {"reason": "FailedIndexes", "message": "Job has failed indexes", "failedIndexes": "1",
         "completedIndexes": "0,2", "failed": 2, "succeeded": 2},
        {1: [("0", None), ("1", None)]}),
    "failures within the limit are retried": (
        indexed(2, 2), [(0, 3), (0, 3), (0, "ok"), (1, "ok")],
        {"reason": "CompletionsReached", "failedIndexes": "", "completedIndexes": "0,1", "failed": 2,
         "succeeded": 2},
        {0: [("0", None), ("1", None), ("2", None)], 1: [("0", None)]}),
    # the pods it stops are failures too (podReplacementPolicy TerminatingOrFailed), so their indexes fail
    "maxFailedIndexes exceeded fails the Job and stops the rest": (
        indexed(4, 0, maxFailedIndexes=1), [(0, 1), (3, 1)],
        {"reason": "MaxFailedIndexesExceeded", "message": "Job has exceeded the specified maximal number of failed indexes",
         "failedIndexes": "0-3", "failed": 4},
        {}),
    "FailIndex fails the index at once": (
        indexed(2, 5, podFailurePolicy=FAIL_INDEX), [(0, 42), (1, "ok")],
        {"reason": "FailedIndexes", "message": "Job has failed indexes", "failedIndexes": "0",
         "completedIndexes": "1", "failed": 1, "succeeded": 1},
        {0: [("0", None)]}),
    "FailJob still fails the whole Job at once": (
        indexed(2, 3, podFailurePolicy=FAIL_JOB), [(0, 7)],
        {"reason": "PodFailurePolicy", "failedIndexes": "", "failed": 2},  # the stopped pod counts too
        {0: [("0", None)]}),
    "an ignored failure does not count against the index": (
        indexed(2, 0, podFailurePolicy=IGNORE_DISRUPTION), [(0, "disrupted"), (0, "ok"), (1, "ok")],
        {"reason": "CompletionsReached", "failedIndexes": "", "completedIndexes": "0,1", "succeeded": 2},
        {0: [("0", None), ("0", "1")]}),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_backoff_limit_per_index(env, name):  # noqa: F811
    client, _, clock = env
    spec, steps, want, annotations = CASES[name]
    await client.resource("batch", "v1", "jobs").create(spec)
    made: dict[str, int] = {}  # creation order, as each pod is seen live (a pod's resourceVersion moves with its writes)
    for index, how in steps:
        pod = await ticking(clock, lambda index=index: live_pod(client, index))
        made.setdefault(pod["metadata"]["name"], len(made))
        await end(client, pod, how)
    j, conds = await ticking(clock, lambda: finished(client))
    st = j["status"]
    final = conds.get("Failed") or conds["Complete"]
    assert final["reason"] == want["reason"]
    if "message" in want:
        assert final["message"] == want["message"]
        assert (conds["FailureTarget"]["reason"], conds["FailureTarget"]["message"]) == (want["reason"], want["message"])
    for field in ("failedIndexes", "completedIndexes", "failed", "succeeded"):
        assert st.get(field) == want.get(field), field
    assert st["uncountedTerminatedPods"] == {}
    items, _ = await client.resource("", "v1", "pods").list("default")
    for index, seen in annotations.items():
        mine = sorted((p for p in items if p["metadata"]["annotations"][INDEX] == str(index)),
                      key=lambda p: made.get(p["metadata"]["name"], len(made)))
        assert [(p["metadata"]["annotations"].get(jfp.FAILURE_COUNT),
                 p["metadata"]["annotations"].get(jfp.IGNORED_COUNT)) for p in mine] == seen
    if "message" in want:  # the Job's event follows its status write

        async def warned():
            events, _ = await client.resource("", "v1", "events").list("default")
            return any(e["reason"] == want["reason"] and e["type"] == "Warning" and e["message"] == want["message"]
                       for e in events)
        assert await eventually(warned)  # written from the recorder's queue: real time, not more virtual time


async def test_a_failed_index_is_not_restarted_while_others_run(env):  # noqa: F811
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(indexed(2, 0))
    await end(client, await ticking(clock, lambda: live_pod(client, 0)), 1)

    async def recorded():
        st = (await client.resource("batch", "v1", "jobs").get("pi", "default")).get("status") or {}
        return st.get("failedIndexes") == "0" and st.get("failed") == 1 and st
    st = await ticking(clock, recorded)
    assert st["active"] == 1 and not st.get("conditions")
    assert await live_pod(client, 0) is None and await live_pod(client, 1)


def pod(failed=0, ignored=None, exit_code=1, conditions=(), finished_at=None):
    ann = {jfp.FAILURE_COUNT: str(failed)}
    if ignored is not None:
        ann[jfp.IGNORED_COUNT] = str(ignored)
    term = {"exitCode": exit_code, **({"finishedAt": finished_at} if finished_at else {})}
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": ann},
            "status": {"phase": "Failed", "conditions": list(conditions),
                       "containerStatuses": [{"name": "c", "state": {"terminated": term}}]}}


@pytest.mark.parametrize("spec, failed_pod, counts, index_failed", [
    ({"backoffLimitPerIndex": 1}, pod(0), (1, 0), False),
    ({"backoffLimitPerIndex": 1}, pod(1), (2, 0), True),
    ({"backoffLimitPerIndex": 0}, pod(0), (1, 0), True),
    ({"backoffLimitPerIndex": 0, "podFailurePolicy": IGNORE_DISRUPTION}, pod(0, 2, 137, DISRUPTED), (0, 3), False),
    ({"backoffLimitPerIndex": 9, "podFailurePolicy": FAIL_INDEX}, pod(0, exit_code=42), (1, 0), True),
    ({"backoffLimitPerIndex": 9, "podFailurePolicy": FAIL_INDEX}, pod(0, exit_code=41), (1, 0), False),
    ({"backoffLimitPerIndex": 2}, {"metadata": {"annotations": {jfp.FAILURE_COUNT: "-3"}}, "status": {}}, (1, 0), False),
])
def test_failure_counts_and_index_failure(spec, failed_pod, counts, index_failed):
    assert jfp.counts_after(spec, failed_pod) == counts
    assert jfp.index_failed(spec, failed_pod) is index_failed


def test_new_pods_of_an_index_start_at_zero():
    assert jfp.counts_after({"backoffLimitPerIndex": 1}, None) == (0, 0)


T0 = 1_700_000_000.0


@pytest.mark.parametrize("replaced, now, want", [
    ({}, T0, ([0, 1], 0.0)),
    ({0: pod(0, finished_at="2023-11-14T22:13:20Z")}, T0 + 4, ([1], 0.0)),
    ({0: pod(0, finished_at="2023-11-14T22:13:20Z")}, T0 + 10, ([0, 1], 0.0)),
    ({0: pod(2, 1, finished_at="2023-11-14T22:13:20Z"), 1: pod(0, finished_at="2023-11-14T22:13:20Z")},
     T0 + 4, ([], 6.0)),
    ({0: pod(2, 1, finished_at="2023-11-14T22:13:20Z")}, T0 + 50, ([1], 0.0)),
    ({0: pod(40, finished_at="2023-11-14T22:13:20Z")}, T0 + 360, ([0, 1], 0.0)),
    ({0: pod(3, 1100, finished_at="2023-11-14T22:13:20Z")}, T0 + 359, ([1], 0.0)),
])
def test_backoff_is_per_index(replaced, now, want):
    """10s doubling with each failure of that index (ignored ones too), at most 360s; past a thousand
    failures too (ignored ones are not limited: 2**1024 raised OverflowError in the sync)."""
    assert indexes_ready([0, 1], replaced, now) == want


def test_a_shorter_backoff_base_from_the_environment_still_doubles():
    """NANOKUBE_JOB_POD_FAILURE_BACKOFF, as `nanokube up` passes it to the controller."""
    assert options_from_env({"NANOKUBE_JOB_POD_FAILURE_BACKOFF": "1"}) == {"backoff_base": 1.0}
    assert options_from_env({}) == {}
    for bad in ("0", "-1", "nan", "inf", "soon"):  # none of them a backoff
        with pytest.raises(ValueError, match="NANOKUBE_JOB_POD_FAILURE_BACKOFF"):
            options_from_env({"NANOKUBE_JOB_POD_FAILURE_BACKOFF": bad})
    replaced = {0: pod(0, finished_at="2023-11-14T22:13:20Z"), 1: pod(2, finished_at="2023-11-14T22:13:20Z")}
    assert indexes_ready([0, 1], replaced, T0 + 1, base=1.0) == ([0], 0.0)
    assert indexes_ready([1], replaced, T0 + 1, base=1.0) == ([], 3.0)
