import pytest

from nanokube.clock import VirtualClock, format_time
from nanokube.controllers.base import TURN
from nanokube.machinery.errors import APIError
from nanokube.machinery.jobindexes import Indexes
from nanokube.controllers.job import (
    INDEX,
    SYNC_BATCH_PERIOD,
    JobController,
    success_policy_match,
    transition_events,
    wanted_active,
)
from tests.controllers import becomes, event_counts, eventually, make_stack, pod_quota, ticking, turns_during
from tests.controllers.test_pod_update_handlers import informing, seen, stopped
from tests.controllers.test_replicaset import stop

TRACKING = "batch.kubernetes.io/job-tracking"


def job(name="pi", **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {**spec, "template": {"spec": {"restartPolicy": "Never",
                                                   "containers": [{"name": "c", "image": "busybox"}]}}}}


@pytest.fixture
async def env():
    s = await make_stack()
    clock = VirtualClock()
    ctrl = JobController(s.client, clock=clock)
    await ctrl.start()
    yield s.client, ctrl, clock
    await stop(ctrl)
    await s.close()


async def live_pods(client, n):
    items, _ = await client.resource("", "v1", "pods").list("default")
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")
            and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    return live if len(live) == n else None


async def finish(client, pod, phase):
    pods = client.resource("", "v1", "pods")
    cur = await pods.get(pod["metadata"]["name"], "default")
    await pods.update({**cur, "status": {"phase": phase}}, subresource="status")


async def job_condition(client, ctype, name="pi"):
    j = await client.resource("batch", "v1", "jobs").get(name, "default")
    conds = {c["type"]: c for c in (j.get("status") or {}).get("conditions") or []}
    return j if conds.get(ctype, {}).get("status") == "True" else None


async def test_runs_completions_with_parallelism_then_completes(env):
    client, _, clock = env
    created = await client.resource("batch", "v1", "jobs").create(job(completions=3, parallelism=2))
    first = await ticking(clock, lambda: live_pods(client, 2))
    md = first[0]["metadata"]
    assert md["generateName"] == "pi-" and TRACKING in md["finalizers"]
    assert md["labels"]["batch.kubernetes.io/job-name"] == "pi"
    assert md["labels"]["controller-uid"] == created["metadata"]["uid"]
    assert md["ownerReferences"][0]["kind"] == "Job" and md["ownerReferences"][0]["blockOwnerDeletion"]
    for p in first:
        await finish(client, p, "Succeeded")
    last = await ticking(clock, lambda: live_pods(client, 1))
    await finish(client, last[0], "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    st = j["status"]
    assert st["succeeded"] == 3 and "active" not in st and st["uncountedTerminatedPods"] == {}
    assert st["startTime"] and st["completionTime"]
    types = {c["type"]: c["reason"] for c in st["conditions"]}
    assert types == {"SuccessCriteriaMet": "CompletionsReached", "Complete": "CompletionsReached"}
    items, _ = await client.resource("", "v1", "pods").list("default")
    assert len(items) == 3 and all(TRACKING not in (p["metadata"].get("finalizers") or []) for p in items)


async def test_backoff_limit_exceeded_fails_job(env):
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(backoffLimit=0))
    pods = await ticking(clock, lambda: live_pods(client, 1))
    await finish(client, pods[0], "Failed")
    j = await ticking(clock, lambda: job_condition(client, "Failed"))
    assert j["status"]["failed"] == 1
    failed = next(c for c in j["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert "FailureTarget" in {c["type"] for c in j["status"]["conditions"]}


async def test_indexed_job_labels_pods_and_records_completed_indexes(env):
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(completions=2, parallelism=2, completionMode="Indexed"))
    pods = await ticking(clock, lambda: live_pods(client, 2))
    idx = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert idx == ["0", "1"]
    for p in pods:
        i = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == i
        assert p["metadata"]["generateName"] == f"pi-{i}-" and p["spec"]["hostname"] == f"pi-{i}"
        await finish(client, p, "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    assert j["status"]["completedIndexes"] == "0,1" and j["status"]["succeeded"] == 2


async def test_indexed_job_pods_get_the_completion_index_env_var(env):
    """addCompletionIndexEnvVariables: every container and init container reads JOB_COMPLETION_INDEX
    from the pod's index annotation through the downward API; one the template sets is kept."""
    client, _, clock = env
    body = job(completions=1, completionMode="Indexed")
    spec = body["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "init", "image": "busybox", "env": [{"name": "A", "value": "1"}]}]
    spec["containers"].append({"name": "own", "image": "busybox", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "7"}]})
    await client.resource("batch", "v1", "jobs").create(body)
    [pod] = await ticking(clock, lambda: live_pods(client, 1))
    index_env = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    assert pod["spec"]["initContainers"][0]["env"] == [{"name": "A", "value": "1"}, index_env]
    assert pod["spec"]["containers"][0]["env"] == [index_env]
    assert pod["spec"]["containers"][1]["env"] == [{"name": "JOB_COMPLETION_INDEX", "value": "7"}]


async def test_a_job_managed_by_another_controller_is_left_alone(env):
    """spec.managedBy other than kubernetes.io/job-controller: syncJob skips the Job (JobManagedBy, GA in
    1.35), so no pods and no status from this controller; its own name is managed as usual."""
    client, _, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job("external", managedBy="kueue.x-k8s.io/multikueue"))
    await jobs.create(job("builtin", managedBy="kubernetes.io/job-controller"))
    [pod] = await ticking(clock, lambda: live_pods(client, 1))
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "builtin"
    await clock.advance(30)
    assert await live_pods(client, 1)
    assert (await jobs.get("external", "default")).get("status") in (None, {})


async def test_on_failure_restarts_count_against_the_backoff_limit(env):
    """restartPolicy OnFailure: a failing container restarts inside its pod, which never fails, so
    pastBackoffLimitOnFailure counts the live pods' container restarts; reaching backoffLimit fails the
    Job (BackoffLimitExceeded) and stops its pod."""
    client, _, clock = env
    body = job(backoffLimit=2)
    body["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    await client.resource("batch", "v1", "jobs").create(body)
    [pod] = await ticking(clock, lambda: live_pods(client, 1))
    pods = client.resource("", "v1", "pods")

    async def restarted(n):
        cur = await pods.get(pod["metadata"]["name"], "default")
        await pods.update({**cur, "status": {"phase": "Running", "containerStatuses": [{
            "name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": n,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}, subresource="status")

    await restarted(1)
    await clock.advance(5)
    assert await job_condition(client, "FailureTarget") is None
    await restarted(2)
    j = await ticking(clock, lambda: job_condition(client, "FailureTarget"))
    reasons = {c["type"]: c["reason"] for c in j["status"]["conditions"]}
    assert reasons["FailureTarget"] == "BackoffLimitExceeded"
    assert (await pods.get(pod["metadata"]["name"], "default"))["metadata"].get("deletionTimestamp")


async def test_active_deadline_fails_and_deletes_pods(env):
    client, ctrl, clock = env
    await client.resource("batch", "v1", "jobs").create(job(activeDeadlineSeconds=5))
    await ticking(clock, lambda: live_pods(client, 1))
    await clock.advance(6)  # the deadline's own delayed sync
    j = await ticking(clock, lambda: job_condition(client, "Failed"))
    assert next(c for c in j["status"]["conditions"] if c["type"] == "Failed")["reason"] == "DeadlineExceeded"
    assert await live_pods(client, 0) == []


async def test_suspended_job_runs_nothing(env):
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(suspend=True))
    j = await ticking(clock, lambda: job_condition(client, "Suspended"))
    assert "startTime" not in j["status"]
    assert await live_pods(client, 0) == []


def test_wanted_active_caps_by_remaining_completions():
    assert wanted_active({"parallelism": 4, "completions": 5}, 3, 4) == 2
    assert wanted_active({"parallelism": 2}, 0, 1) == 2
    assert wanted_active({"parallelism": 3}, 1, 2) == 2  # after a success: those running, no more


async def test_a_work_queue_job_lets_its_other_pods_finish_after_one_succeeds(env):
    """No completions (a work queue): once a pod succeeds no pod is created, and those still running
    are left to finish (upstream's manageJob wants as many as are active); the Job completes when the
    last one does, every pod counted as succeeded. They were deleted, and counted as failed."""
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(parallelism=2))
    first, second = await ticking(clock, lambda: live_pods(client, 2))
    await finish(client, first, "Succeeded")
    j = await ticking(clock, lambda: _job_counted(client, succeeded=1))
    assert j["status"]["active"] == 1 and not j["status"].get("failed")
    for _ in range(5):  # syncs go by: the running pod stays, none is added
        await clock.advance(SYNC_BATCH_PERIOD)
    [running] = await live_pods(client, 1)
    assert running["metadata"]["name"] == second["metadata"]["name"]
    await finish(client, second, "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    assert j["status"]["succeeded"] == 2 and not j["status"].get("failed")


async def _job_counted(client, succeeded: int):
    j = await client.resource("batch", "v1", "jobs").get("pi", "default")
    return j if (j.get("status") or {}).get("succeeded") == succeeded else None


async def fail_with(client, pod, exit_code, conditions=()):
    pods = client.resource("", "v1", "pods")
    cur = await pods.get(pod["metadata"]["name"], "default")
    await pods.update({**cur, "status": {"phase": "Failed", "conditions": list(conditions), "containerStatuses": [
        {"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": exit_code}}}]}}, subresource="status")


POLICY = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}


async def test_pod_failure_policy_fail_job_fails_at_once_and_stops_the_rest(env):
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(completions=2, parallelism=2, backoffLimit=6,
                                                            podFailurePolicy=POLICY))
    pods = await ticking(clock, lambda: live_pods(client, 2))
    await fail_with(client, pods[0], 42)
    j = await ticking(clock, lambda: job_condition(client, "Failed"))
    conds = {c["type"]: c for c in j["status"]["conditions"]}
    msg = f"Container c for pod default/{pods[0]['metadata']['name']} failed with exit code 42 matching FailJob rule at index 1"
    assert (conds["Failed"]["reason"], conds["Failed"]["message"]) == ("PodFailurePolicy", msg)
    assert (conds["FailureTarget"]["reason"], conds["FailureTarget"]["message"]) == ("PodFailurePolicy", msg)
    assert j["status"]["failed"] == 2  # the pod it stopped counts as failed too, as upstream

    async def none_live():
        return await live_pods(client, 0) == []
    assert await ticking(clock, none_live)


async def ended(client, clock, pod, phase):
    """The pod's one container ended now: its finishedAt and the pod's Ready turning False, as a kubelet writes them."""
    pods = client.resource("", "v1", "pods")
    cur = await pods.get(pod["metadata"]["name"], "default")
    code, now = 0 if phase == "Succeeded" else 1, format_time(clock.now())
    ready = {"type": "Ready", "status": "False", "reason": "PodCompleted" if code == 0 else "PodFailed",
             "lastTransitionTime": now}
    await pods.update({**cur, "status": {"phase": phase, "conditions": [ready], "containerStatuses": [
        {"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": code, "finishedAt": now}}}]}}, subresource="status")


async def test_the_pod_failure_backoff_starts_over_after_a_success(env):
    """The replacement backoff doubles per failure since the last success (upstream's backoff record,
    failuresAfterLastSuccess): 10 s, then 20 s; a success lets the next pod start at once and the
    failure after it waits 10 s again. nanokube doubled per failure of the Job's life (status.failed),
    so that third failure waited 40 s."""
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(completions=3, parallelism=1, backoffLimit=6))

    async def replaced(pod) -> float:
        """Virtual seconds until a pod other than `pod` runs."""
        start = clock.now()
        [new] = await ticking(clock, lambda: live_pods(client, 1), step=0.5)
        assert new["metadata"]["name"] != pod["metadata"]["name"]
        return clock.now() - start

    [first] = await ticking(clock, lambda: live_pods(client, 1))
    await ended(client, clock, first, "Failed")
    [second] = await ticking(clock, lambda: live_pods(client, 1))
    await ended(client, clock, second, "Failed")
    assert 19 <= await replaced(second) <= 22
    [third] = await live_pods(client, 1)
    await ended(client, clock, third, "Succeeded")
    assert await replaced(third) <= 2  # the pod batch, no backoff
    [fourth] = await live_pods(client, 1)
    await ended(client, clock, fourth, "Failed")
    assert 9 <= await replaced(fourth) <= 12


async def test_a_failure_the_policy_ignores_still_backs_off_the_replacement(env):
    """newBackoffRecord takes every newly failed pod, whatever the podFailurePolicy does with it: a
    pod whose failure a rule ignores (as a drained pod's, Ignore on DisruptionTarget) is replaced
    after the 10 s backoff, and counts as no failure. nanokube skipped the backoff while
    status.failed was 0 and replaced it at once."""
    client, _, clock = env
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]}
    await client.resource("batch", "v1", "jobs").create(job(backoffLimit=0, podFailurePolicy=policy))
    [first] = await ticking(clock, lambda: live_pods(client, 1))
    await ended(client, clock, first, "Failed")
    start = clock.now()
    [again] = await ticking(clock, lambda: live_pods(client, 1), step=0.5)
    assert again["metadata"]["name"] != first["metadata"]["name"] and 9 <= clock.now() - start <= 12
    j = await client.resource("batch", "v1", "jobs").get("pi", "default")
    assert "failed" not in j["status"] and not j["status"].get("conditions")


async def test_pod_failure_policy_ignore_does_not_count_and_replaces_the_pod(env):
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(completions=1, backoffLimit=0, podFailurePolicy=POLICY))
    [first] = await ticking(clock, lambda: live_pods(client, 1))
    await fail_with(client, first, 137, [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}])

    async def replaced():
        live = await live_pods(client, 1)
        return live and live[0]["metadata"]["uid"] != first["metadata"]["uid"] and live
    await ticking(clock, replaced)

    async def released():
        p = await client.resource("", "v1", "pods").get(first["metadata"]["name"], "default")
        return TRACKING not in (p["metadata"].get("finalizers") or [])
    await ticking(clock, released)
    j = await client.resource("batch", "v1", "jobs").get("pi", "default")
    assert "failed" not in j["status"] and not await job_condition(client, "Failed")


async def test_a_deleted_pod_counts_as_failed_unless_only_failed_pods_are_replaced(env):
    client, _, clock = env
    jobs, pods = client.resource("batch", "v1", "jobs"), client.resource("", "v1", "pods")
    await jobs.create(job("plain", completions=1))
    await jobs.create(job("strict", completions=1, podReplacementPolicy="Failed"))

    async def live_of(name):
        items, _ = await pods.list("default")
        live = [p for p in items if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == name
                and not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == 1 else None
    for name in ("plain", "strict"):
        [p] = await ticking(clock, lambda name=name: live_of(name))
        await pods.delete(p["metadata"]["name"], "default")

    async def plain_failed():
        st = (await jobs.get("plain", "default")).get("status") or {}
        return st.get("failed") == 1 and await live_of("plain")
    await ticking(clock, plain_failed)

    async def strict_terminating():
        st = (await jobs.get("strict", "default")).get("status") or {}
        return st.get("terminating") == 1 and st
    assert "failed" not in await ticking(clock, strict_terminating)
    assert await live_of("strict") is None


def test_success_policy_rules_by_indexes_and_by_count():
    def done(*indexes):
        return Indexes((i, i) for i in indexes)
    policy = {"rules": [{"succeededIndexes": "0,2-3", "succeededCount": 2}, {"succeededCount": 3}]}
    assert success_policy_match(policy, 5, done(0, 1)) is None
    assert success_policy_match(policy, 5, done(0, 3)) == "Matched rules at index 0"
    assert success_policy_match(policy, 5, done(1, 4, 0)) == "Matched rules at index 1"
    assert success_policy_match({"rules": [{"succeededIndexes": "1-2"}]}, 5, done(1)) is None
    assert success_policy_match({"rules": [{"succeededIndexes": "1-2"}]}, 5, done(1, 2)) == "Matched rules at index 0"
    assert success_policy_match({"rules": [{"succeededIndexes": "7"}]}, 5, done(1)) is None
    assert success_policy_match(None, 5, done(1)) is None
    big = 2**31 - 1  # a rule naming two billion indexes, all but one done: counted by interval
    rule = {"rules": [{"succeededIndexes": f"0-{big - 1}"}]}
    assert success_policy_match(rule, big, Indexes([(0, big - 2)])) is None
    assert success_policy_match(rule, big, Indexes([(0, big - 1)])) == "Matched rules at index 0"


async def test_success_policy_completes_an_indexed_job_early(env):
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(
        completions=3, parallelism=3, completionMode="Indexed", successPolicy={"rules": [{"succeededIndexes": "0"}]}))
    pods = await ticking(clock, lambda: live_pods(client, 3))
    leader = next(p for p in pods if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0")
    await finish(client, leader, "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    conds = {c["type"]: (c["reason"], c["message"]) for c in j["status"]["conditions"]}
    assert conds["SuccessCriteriaMet"] == conds["Complete"] == ("SuccessPolicy", "Matched rules at index 0")
    assert j["status"]["completedIndexes"] == "0" and j["status"]["succeeded"] == 1


async def test_success_policy_is_weighed_before_completions(env):
    """Every index done in one sync: upstream's syncJob matches the success policy first, so the reason is
    SuccessPolicy, not CompletionsReached."""
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(
        completions=3, parallelism=3, completionMode="Indexed", successPolicy={"rules": [{"succeededIndexes": "0"}]}))
    for p in await ticking(clock, lambda: live_pods(client, 3)):
        await finish(client, p, "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    conds = {c["type"]: (c["reason"], c["message"]) for c in j["status"]["conditions"]}
    assert conds["SuccessCriteriaMet"] == conds["Complete"] == ("SuccessPolicy", "Matched rules at index 0")


async def test_backoff_limit_is_weighed_before_completions(env):
    """A work queue Job (no completions) whose one pod succeeds while the other fails past backoffLimit
    in the same sync fails, as upstream's syncJob decides failures before it counts completions."""
    client, _, clock = env
    await client.resource("batch", "v1", "jobs").create(job(parallelism=2, backoffLimit=0))
    first, second = await ticking(clock, lambda: live_pods(client, 2))
    await finish(client, first, "Succeeded")
    await finish(client, second, "Failed")
    j = await ticking(clock, lambda: job_condition(client, "Failed"))
    assert {c["type"]: c["reason"] for c in j["status"]["conditions"]}["Failed"] == "BackoffLimitExceeded"


def test_transition_events_follow_upstream():
    done = [{"type": "Complete", "status": "True"}]
    failed = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
               "message": "Job has reached the specified backoff limit"}]
    assert transition_events([], done) == [("Normal", "Completed", "Job completed")]
    assert transition_events(done, done) == []
    assert transition_events([], failed) == [("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]
    suspended = [{"type": "Suspended", "status": "True"}]
    resumed = [{"type": "Suspended", "status": "False"}]
    assert transition_events([], suspended) == [("Normal", "Suspended", "Job suspended")]
    assert transition_events(suspended, resumed) == [("Normal", "Resumed", "Job resumed")]
    assert transition_events([], resumed) == []


def manual(name="pi", **spec):
    """A Job selecting app=batch itself (manualSelector), so pods it did not create can match it."""
    j = job(name, manualSelector=True, selector={"matchLabels": {"app": "batch"}}, **spec)
    j["spec"]["template"]["metadata"] = {"labels": {"app": "batch"}}
    return j


def bare(name, app="batch"):
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}


async def test_an_orphan_it_selects_is_adopted_with_the_tracking_finalizer_and_counted(env):
    client, ctrl, clock = env
    pods = client.resource("", "v1", "pods")
    await pods.create(bare("early"))  # there before the Job: adopted on its first sync
    created = await client.resource("batch", "v1", "jobs").create(manual(parallelism=2, completions=3))
    uid = created["metadata"]["uid"]
    first = await ticking(clock, lambda: live_pods(client, 2))
    early = next(p for p in first if p["metadata"]["name"] == "early")
    assert [(r["kind"], r["uid"], r["controller"]) for r in early["metadata"]["ownerReferences"]] == [("Job", uid, True)]
    assert early["metadata"]["finalizers"] == [TRACKING]
    await finish(client, next(p for p in first if p["metadata"]["name"] != "early"), "Succeeded")

    async def idle():  # the replacement made and seen: no sync left that could adopt by chance
        j = await client.resource("batch", "v1", "jobs").get("pi", "default")
        return (j.get("status") or {}).get("succeeded") == 1 and (j.get("status") or {}).get("active") == 2 \
            and not len(ctrl.queue) and not ctrl.queue._processing
    await ticking(clock, idle)
    late = bare("late")
    late["spec"]["nodeName"] = "n1"  # scheduled: never the one of three the Job deletes
    late = await pods.create(late)
    await pods.create(bare("other", app="web"))

    async def adopted():
        p = await pods.get("late", "default")
        return p if (p["metadata"].get("ownerReferences") or [{}])[0].get("uid") == uid else None
    p = await ticking(clock, adopted)
    assert p["metadata"]["uid"] == late["metadata"]["uid"] and p["metadata"]["finalizers"] == [TRACKING]
    live = await ticking(clock, lambda: live_pods(client, 3))  # parallelism 2, and "other"
    for p in live:
        if p["metadata"]["name"] != "other":
            await finish(client, p, "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    assert j["status"]["succeeded"] == 3
    other = await pods.get("other", "default")
    assert "ownerReferences" not in other["metadata"] and "finalizers" not in other["metadata"]


async def test_a_pod_it_no_longer_selects_is_released_with_its_finalizer(env):
    client, _, clock = env
    pods = client.resource("", "v1", "pods")
    await client.resource("batch", "v1", "jobs").create(manual())
    [p] = await ticking(clock, lambda: live_pods(client, 1))
    await pods.patch(p["metadata"]["name"], {"metadata": {"labels": {"app": "elsewhere"}}}, namespace="default")

    async def released():
        cur = await pods.get(p["metadata"]["name"], "default")
        md = cur["metadata"]
        return cur if not md.get("ownerReferences") and not md.get("finalizers") else None
    cur = await ticking(clock, released)
    assert not cur["metadata"].get("ownerReferences") and TRACKING not in (cur["metadata"].get("finalizers") or [])
    # the released pod and its replacement
    assert p["metadata"]["name"] in {q["metadata"]["name"] for q in await ticking(clock, lambda: live_pods(client, 2))}


async def test_an_orphan_keeping_the_tracking_finalizer_loses_it_and_only_it(env):
    client, _, clock = env
    pods = client.resource("", "v1", "pods")
    stray = bare("stray", app="none")  # no Job selects it: nothing will count it
    stray["metadata"]["finalizers"] = ["example.com/keep", TRACKING]
    await pods.create(stray)

    async def cleaned():
        p = await pods.get("stray", "default")
        return p if p["metadata"].get("finalizers") == ["example.com/keep"] else None
    assert (await ticking(clock, cleaned))["metadata"]["finalizers"] == ["example.com/keep"]


def idle(ctrl):
    """Nothing queued, being synced or waiting to be queued: the Job has settled."""
    async def check():
        q = ctrl.queue
        return not len(q) and not q._processing and not q._timers
    return check


async def test_pod_events_within_the_batch_period_cost_one_sync(env):
    """syncJobBatchPeriod: each pod's event asks for a sync a second later, and a sync already
    waiting keeps its time, so four pods finishing at one instant are counted by one sync."""
    client, ctrl, clock = env
    await client.resource("batch", "v1", "jobs").create(job(completions=4, parallelism=4))
    pods = await ticking(clock, lambda: live_pods(client, 4))
    await ticking(clock, idle(ctrl))
    synced, sync = [], ctrl.sync

    async def counted(key):
        synced.append((clock.monotonic(), key))
        await sync(key)
    ctrl.sync = counted
    t0 = clock.monotonic()
    for p in pods:
        await finish(client, p, "Succeeded")
        await clock.advance(0)  # its event handled before the next pod's
    assert synced == []
    await clock.advance(SYNC_BATCH_PERIOD)
    assert synced == [(t0 + SYNC_BATCH_PERIOD, "default/pi")]
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    assert j["status"]["succeeded"] == 4


async def test_a_spec_change_is_synced_at_once_and_a_status_write_batched(env):
    client, ctrl, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job(parallelism=1, completions=4))
    await ticking(clock, lambda: live_pods(client, 1))
    await ticking(clock, idle(ctrl))
    await jobs.patch("pi", {"spec": {"parallelism": 2}}, namespace="default")
    await clock.advance(0)  # no virtual time passes: the new generation's sync runs at once
    assert len(await live_pods(client, 2)) == 2
    cur = await jobs.get("pi", "default")
    await jobs.update({**cur, "status": {**cur["status"], "active": 7}}, subresource="status")
    await clock.advance(0)
    assert (await jobs.get("pi", "default"))["status"]["active"] == 7  # not yet put right
    await clock.advance(SYNC_BATCH_PERIOD)
    assert (await jobs.get("pi", "default"))["status"]["active"] == 2


async def test_an_indexed_job_scaled_down_deletes_the_pods_over_its_parallelism_and_completions(env):
    """activePodsForRemoval for Indexed Jobs: a lowered parallelism deletes the pods over it, and
    ElasticIndexedJob's lowered completions (with parallelism) those of the indexes past it. Both
    kept running: nanokube's Indexed branch only created pods. The deleted pods lose the tracking
    finalizer first, so none counts as failed."""
    client, _, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job(completions=4, parallelism=4, completionMode="Indexed"))
    await ticking(clock, lambda: live_pods(client, 4))
    await jobs.patch("pi", {"spec": {"parallelism": 2}}, namespace="default")
    two = await ticking(clock, lambda: live_pods(client, 2))
    assert len({p["metadata"]["annotations"][INDEX] for p in two}) == 2
    await becomes(lambda: _deletes(client), 2)
    await jobs.patch("pi", {"spec": {"parallelism": 1, "completions": 1}}, namespace="default")
    [last] = await ticking(clock, lambda: _live_with_index(client, "0"))
    await finish(client, last, "Succeeded")
    j = await ticking(clock, lambda: job_condition(client, "Complete"))
    assert j["status"]["completedIndexes"] == "0" and j["status"]["succeeded"] == 1
    assert "failed" not in j["status"]


async def test_pods_over_a_lowered_parallelism_go_in_active_pods_order(env):
    """activePodsForRemoval sorts by controller.ActivePods: of ready pods the one ready latest goes
    first, then the one whose containers restarted more. nanokube's order stopped at readiness and
    then took the newest created, and these were made in the same second: it took the first two
    the controller's cache lists, here the one ActivePods keeps."""
    client, ctrl, clock = env
    jobs, pods = client.resource("batch", "v1", "jobs"), client.resource("", "v1", "pods")
    await jobs.create(job(completions=3, parallelism=3))
    await ticking(clock, lambda: live_pods(client, 3))
    a, b, c = ctrl.pod_inf.list_namespace("default")
    for p, ready_at, restarts in ((a, "2026-01-01T00:00:00Z", 0), (b, "2026-01-01T00:05:00Z", 0),
                                  (c, "2026-01-01T00:00:00Z", 2)):
        cur = await pods.get(p["metadata"]["name"], "default")
        await pods.update({**cur, "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": ready_at}], "containerStatuses": [
            {"name": "c", "image": "busybox", "imageID": "", "ready": True, "restartCount": restarts,
             "state": {"running": {}}}]}}, subresource="status")
    await ticking(clock, lambda: job_ready(client, 3))
    await jobs.patch("pi", {"spec": {"parallelism": 1}}, namespace="default")
    [kept] = await ticking(clock, lambda: live_pods(client, 1))
    assert kept["metadata"]["name"] == a["metadata"]["name"]


async def job_ready(client, n):
    j = await client.resource("batch", "v1", "jobs").get("pi", "default")
    return j if (j.get("status") or {}).get("ready") == n else None


async def _deletes(client) -> int:
    return (await event_counts(client, "Job")).get("SuccessfulDelete", 0)


async def _live_with_index(client, index: str):
    live = await live_pods(client, 1)
    return live if live and live[0]["metadata"]["annotations"][INDEX] == index else None


async def test_a_deleted_jobs_own_pods_lose_the_tracking_finalizer_others_of_its_name_keep_theirs(env):
    """cleanupPodFinalizers matches the pods a Job controls by uid: a pod naming another Job "pi" (a
    newer one the cache does not show yet) keeps its finalizer when this "pi" goes."""
    client, ctrl, clock = env
    pods, jobs = client.resource("", "v1", "pods"), client.resource("batch", "v1", "jobs")
    await jobs.create(job())
    [mine] = await ticking(clock, lambda: live_pods(client, 1))
    other = bare("other", app="none")
    other["metadata"].update(finalizers=[TRACKING], ownerReferences=[{
        "apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "0f6b5e3c-5d2a-4d7e-9c1b-8a3f2e1d0c9b",
        "controller": True}])
    await pods.create(other)
    await ticking(clock, lambda: live_pods(client, 2))
    await jobs.delete("pi", "default")  # background, with no garbage collector here: its pod stays

    async def released():
        p = await pods.get(mine["metadata"]["name"], "default")
        return p if TRACKING not in (p["metadata"].get("finalizers") or []) else None
    assert (await ticking(clock, released))["metadata"]["ownerReferences"][0]["uid"] == \
        mine["metadata"]["ownerReferences"][0]["uid"]
    await ticking(clock, idle(ctrl))
    assert (await pods.get("other", "default"))["metadata"]["finalizers"] == [TRACKING]


async def test_a_job_being_deleted_counts_its_finished_pods_and_starts_no_more(env):
    """syncJob goes on tracking a Job whose foreground delete waits on its pods: a pod that succeeds
    meanwhile is counted before its finalizer goes, and manageJob, skipped while the deletionTimestamp
    is set, makes no pod for the completions left (the finalizers were removed at once, uncounted)."""
    client, ctrl, clock = env
    pods, jobs = client.resource("", "v1", "pods"), client.resource("batch", "v1", "jobs")
    await jobs.create(job(completions=3, parallelism=1))
    [first] = await ticking(clock, lambda: live_pods(client, 1))
    await jobs.delete("pi", "default", propagation_policy="Foreground")  # no garbage collector: it stays
    await finish(client, first, "Succeeded")

    async def counted():
        j = await jobs.get("pi", "default")
        return j if (j.get("status") or {}).get("succeeded") == 1 else None
    assert (await ticking(clock, counted))["metadata"]["deletionTimestamp"]

    async def released():
        p = await pods.get(first["metadata"]["name"], "default")
        return TRACKING not in (p["metadata"].get("finalizers") or [])
    await ticking(clock, released)
    await ticking(clock, idle(ctrl))
    items, _ = await pods.list("default")
    assert [p["metadata"]["name"] for p in items] == [first["metadata"]["name"]]
    j = await jobs.get("pi", "default")
    assert "Suspended" not in {c["type"] for c in j["status"].get("conditions") or []}


async def test_creates_in_slow_start_batches_then_writes_its_status():
    """manageJob's slow start: five indexes to run, room for two pods. Batches of 1 and 2: the third
    create is refused and the last two are not tried; the status (startTime) is written all the same
    and the error returned; the next sync, once the quota allows, runs the indexes still missing."""
    s = await make_stack()
    client = s.client
    ctrl = await informing(JobController(client, clock=VirtualClock()))
    try:
        await pod_quota(client, 2)
        await seen(ctrl.job_inf, await client.resource("batch", "v1", "jobs").create(
            job(completions=5, parallelism=5, completionMode="Indexed")))
        with pytest.raises(APIError) as e:
            await ctrl.sync("default/pi")
        assert e.value.code == 403 and "exceeded quota: pods" in e.value.message
        assert await becomes(lambda: event_counts(client, "Job"), {"SuccessfulCreate": 2, "FailedCreate": 1})
        made = {p["metadata"]["labels"][INDEX] for p in await live_pods(client, 2)}
        assert "0" in made and made <= {"0", "1", "2"}
        st = (await client.resource("batch", "v1", "jobs").get("pi", "default"))["status"]
        assert st["startTime"] and st["active"] == 2, "manageJob's count: the two pods just made"

        async def made_ones_seen():
            return ctrl.expectations.satisfied("default/pi")
        await eventually(made_ones_seen)
        await pod_quota(client, 5)
        await ctrl.sync("default/pi")
        assert await becomes(lambda: event_counts(client, "Job"), {"SuccessfulCreate": 5, "FailedCreate": 1})
        assert sorted(p["metadata"]["labels"][INDEX] for p in await live_pods(client, 5)) == ["0", "1", "2", "3", "4"]
        assert (await client.resource("batch", "v1", "jobs").get("pi", "default"))["status"]["active"] == 5
    finally:
        await stopped(ctrl)
        await s.close()


async def test_a_sync_failed_by_a_quota_is_retried_after_a_second_then_less_often(env):
    """The Job controller's queue backs off as upstream's (DefaultJobApiBackOff 1 s doubling to
    MaxJobApiBackOff, a minute): a Job whose pods a quota refuses tries again after a second, then 2,
    4, 8 s..., not every few milliseconds, which wrote ten FailedCreate Events in the first seconds."""
    client, _, clock = env
    await pod_quota(client, 1)
    await client.resource("batch", "v1", "jobs").create(job(parallelism=3, completions=3))
    await ticking(clock, lambda: live_pods(client, 1), step=0.01)
    # slow start: a batch of 1 made, then one of 2 refused
    assert await becomes(lambda: event_counts(client, "Job"), {"SuccessfulCreate": 1, "FailedCreate": 2})
    for _ in range(9):
        await clock.advance(0.1)
    assert (await event_counts(client, "Job"))["FailedCreate"] == 2
    for _ in range(60):
        await clock.advance(1)
    # a batch of 1 refused each retry: about 1, 2, 4, 8, 16, 32 s after the first
    assert 4 <= (await event_counts(client, "Job"))["FailedCreate"] - 2 <= 7


async def test_a_create_refused_in_a_terminating_namespace_is_no_failure(env, caplog):
    """A pod refused because the Job's namespace is being deleted is no failure: no FailedCreate
    Event and nothing logged."""
    client, _, clock = env
    namespaces, jobs = client.resource("", "v1", "namespaces"), client.resource("batch", "v1", "jobs")
    await namespaces.create({"metadata": {"name": "doomed", "finalizers": ["e2e.nanokube.io/hold"]}})
    body = job(suspend=True)
    body["metadata"]["namespace"] = "doomed"
    await jobs.create(body)

    async def suspended():
        j = await jobs.get("pi", "doomed")
        return any(c["type"] == "Suspended" for c in (j.get("status") or {}).get("conditions") or [])
    await ticking(clock, suspended)
    await namespaces.delete("doomed")
    await jobs.patch("pi", {"spec": {"suspend": False}}, namespace="doomed")

    async def resumed():
        j = await jobs.get("pi", "doomed")
        return any(c["type"] == "Suspended" and c["status"] == "False" for c in j["status"].get("conditions") or [])
    await ticking(clock, resumed)
    assert await becomes(lambda: event_counts(client, "Job", "doomed"), {"Suspended": 1, "Resumed": 1})
    assert [r.getMessage() for r in caplog.records if "being terminated" in r.getMessage()] == []


async def test_one_sync_creates_at_most_500_pods():
    """MaxPodCreateDeletePerSync: 600 pods wanted, 500 made by one sync (its status counts them)."""
    s = await make_stack()
    client = s.client
    ctrl = await informing(JobController(client, clock=VirtualClock()))
    try:
        await seen(ctrl.job_inf, await client.resource("batch", "v1", "jobs").create(job(parallelism=600)))
        await ctrl.sync("default/pi")
        assert len(await live_pods(client, 500)) == 500
        assert (await client.resource("batch", "v1", "jobs").get("pi", "default"))["status"]["active"] == 500
    finally:
        await stopped(ctrl)
        await s.close()


async def test_failed_waits_for_the_deleted_pods_to_terminate(env):
    """enactJobFinished: past its deadline the Job deletes its running pod at once (FailureTarget,
    status.terminating 1 from that very sync) but is Failed only once the pod is gone."""
    client, _, clock = env
    jobs, pods = client.resource("batch", "v1", "jobs"), client.resource("", "v1", "pods")
    await jobs.create(job(activeDeadlineSeconds=5))
    (pod,) = await ticking(clock, lambda: live_pods(client, 1))
    name = pod["metadata"]["name"]
    await pods.create_subresource(name, "binding", {"metadata": {"name": name},
                                                    "target": {"kind": "Node", "name": "node-a"}}, namespace="default")
    await clock.advance(6)  # the deadline's own delayed sync: the bound pod is deleted gracefully

    async def failing():
        j = await jobs.get("pi", "default")
        return j if job_condition_of(j, "FailureTarget") and j["status"].get("terminating") == 1 else None
    j = await ticking(clock, failing)
    assert not job_condition_of(j, "Failed") and "active" not in j["status"]
    assert (await pods.get(name, "default"))["metadata"]["deletionTimestamp"]
    await ticking(clock, lambda: tracking_removed(pods, name))
    await pods.delete(name, "default", grace_period_seconds=0)  # the kubelet's part
    j = await ticking(clock, lambda: job_condition(client, "Failed"))
    assert j["status"]["terminating"] == 0 and j["status"]["failed"] == 1


def job_condition_of(j: dict, ctype: str) -> bool:
    return any(c["type"] == ctype and c["status"] == "True" for c in (j.get("status") or {}).get("conditions") or [])


async def tracking_removed(pods, name) -> bool:
    return TRACKING not in ((await pods.get(name, "default"))["metadata"].get("finalizers") or [])


async def keep_labelled_pods(client) -> None:
    """A ValidatingAdmissionPolicy (and its binding) refusing the deletion of a pod labelled keep."""
    g = "admissionregistration.k8s.io"
    await client.resource(g, "v1", "validatingadmissionpolicies").create({
        "metadata": {"name": "keep-pods"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "operations": ["DELETE"], "resources": ["pods"]}]},
                 "validations": [{"expression": "!has(oldObject.metadata.labels) || !('keep' in oldObject.metadata.labels)",
                                  "message": "kept"}]}})
    await client.resource(g, "v1", "validatingadmissionpolicybindings").create({
        "metadata": {"name": "keep-pods"}, "spec": {"policyName": "keep-pods", "validationActions": ["Deny"]}})


async def test_a_failed_delete_leaves_the_others_counted_as_gone(env):
    """deleteJobPods: suspending a Job deletes its 3 pods, one of which the API refuses to delete;
    status.active drops by the 2 deleted (terminating counts them), the Suspended condition is
    written, and the FailedDelete is reported. Before, the failure skipped the status write."""
    client, _, clock = env
    jobs, pods = client.resource("batch", "v1", "jobs"), client.resource("", "v1", "pods")
    await jobs.create(job(parallelism=3, completions=3))
    running = await ticking(clock, lambda: live_pods(client, 3))
    kept = running[0]["metadata"]["name"]
    await pods.patch(kept, {"metadata": {"labels": {"keep": "yes"}}}, namespace="default")
    await keep_labelled_pods(client)
    await jobs.patch("pi", {"spec": {"suspend": True}}, namespace="default")
    j = await ticking(clock, lambda: job_condition(client, "Suspended"))
    assert j["status"]["active"] == 1
    assert [p["metadata"]["name"] for p in await live_pods(client, 1)] == [kept]

    async def reported():  # written from the recorder's queue, maybe after the status
        counts = await event_counts(client, "Job")
        return counts.get("SuccessfulDelete") == 2 and counts.get("FailedDelete", 0) >= 1
    assert await eventually(reported)


def creations(ctrl, reason: str, status: str) -> float:
    return ctrl.metrics.registry.get_sample_value("job_controller_job_pods_creation_total",
                                                  {"reason": reason, "status": status}) or 0.0


async def test_pod_creations_are_counted_by_reason_and_status(env):
    """job_controller_job_pods_creation_total, as upstream's manageJob counts: the first pods are
    `new`; one refused by a quota counts as failed and, as upstream's goroutine goes on to count it,
    as succeeded too; a replacement of a failed pod is `recreate_terminating_or_failed` (the
    default podReplacementPolicy)."""
    client, ctrl, clock = env
    await pod_quota(client, 2)
    await client.resource("batch", "v1", "jobs").create(job(parallelism=3, completions=4))
    first = await ticking(clock, lambda: live_pods(client, 2))
    refused = await ticking(clock, lambda: _async(creations(ctrl, "new", "failed")))
    assert creations(ctrl, "new", "succeeded") == 2 + refused  # the 2 made, and each refused one
    await pod_quota(client, 10)
    await ticking(clock, lambda: live_pods(client, 3))
    await finish(client, first[0], "Failed")
    await ticking(clock, lambda: _async(creations(ctrl, "recreate_terminating_or_failed", "succeeded")))
    assert await live_pods(client, 3)
    assert creations(ctrl, "recreate_terminating_or_failed", "succeeded") == 1
    assert creations(ctrl, "recreate_failed", "succeeded") == creations(ctrl, "recreate_failed", "failed") == 0
    assert creations(ctrl, "recreate_terminating_or_failed", "failed") == 0


async def _async(value):
    return value


async def test_a_sync_over_many_pods_lets_the_loop_run(env):
    """The passes of a Job's sync over its pods (the active ones, those finished, the tracked and
    ready ones) let the loop run every TURN pods, as its claim does: a Job of 300,000 pods held the
    API server's loop for seconds each. This sync writes nothing, so its claim gave it the only turns."""
    _, ctrl, _ = env
    n = 3 * TURN + 1
    labels = {"job": "big"}
    big = job("big", parallelism=n, completions=n, selector={"matchLabels": labels})
    big["metadata"].update(uid="job-uid", generation=1)
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "big", "uid": "job-uid", "controller": True}
    pods = [{"metadata": {"name": f"big-{i}", "namespace": "default", "uid": f"u{i}", "labels": labels,
                          "finalizers": [TRACKING], "ownerReferences": [ref]},
             "spec": {}, "status": {"phase": "Running"}} for i in range(n)]
    big["status"] = {"active": n, "ready": 0, "terminating": 0, "startTime": "2026-01-01T00:00:00Z",
                     "uncountedTerminatedPods": {}}
    ctrl.job_inf.get = lambda key: big if key == "default/big" else None
    ctrl.pod_inf.list_namespace = lambda ns: pods if ns == "default" else []
    writes = []
    ctrl._write_status = lambda j, st: _async(writes.append(st))
    during, _ = await turns_during(ctrl.sync("default/big"))
    assert [st["active"] for st in writes] == [n]
    assert during >= 7 * 3  # claim, active/terminating, finishing, recorded, tracked, ready, finalizers


async def test_suspending_deletes_the_pods_without_counting_them_as_failed(env):
    """deleteJobPods removes the tracking finalizer before it deletes a suspended Job's pod (or one
    over its parallelism), so the pods a suspension stops are no failures: status.failed stays unset,
    where they were counted as 2 failures (toward backoffLimit)."""
    client, _, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job(parallelism=2, completions=4, backoffLimit=1))
    await ticking(clock, lambda: live_pods(client, 2))
    await jobs.patch("pi", {"spec": {"suspend": True}}, namespace="default")
    await ticking(clock, lambda: job_condition(client, "Suspended"))
    for _ in range(3):
        await clock.advance(SYNC_BATCH_PERIOD)
    st = (await jobs.get("pi", "default"))["status"]
    assert "failed" not in st and "active" not in st and st["uncountedTerminatedPods"] == {}
    assert (await client.resource("", "v1", "pods").list("default"))[0] == []
    await jobs.patch("pi", {"spec": {"suspend": False}}, namespace="default")
    await ticking(clock, lambda: live_pods(client, 2))
    assert not await job_condition(client, "Failed")


async def test_pods_over_parallelism_are_deleted_without_counting_as_failed(env):
    client, _, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job(parallelism=3, completions=6))
    await ticking(clock, lambda: live_pods(client, 3))
    await jobs.patch("pi", {"spec": {"parallelism": 1}}, namespace="default")
    await ticking(clock, lambda: live_pods(client, 1))
    for _ in range(3):
        await clock.advance(SYNC_BATCH_PERIOD)
    st = (await jobs.get("pi", "default"))["status"]
    assert st["active"] == 1 and "failed" not in st


async def test_a_suspended_job_deletes_its_pods_once_while_the_deletions_are_unobserved():
    """Suspension deletes through manageJob, which waits for the expectations: a second sync before
    the informer shows the deletions (its informers stopped here) deletes nothing again."""
    s = await make_stack()
    ctrl = await informing(JobController(s.client, clock=VirtualClock()))
    try:
        jobs = s.client.resource("batch", "v1", "jobs")
        await seen(ctrl.job_inf, await jobs.create(job(parallelism=2, completions=4)))
        await ctrl.sync("default/pi")
        running = await live_pods(s.client, 2)
        await eventually(lambda: _async(ctrl.expectations.satisfied("default/pi")))
        await seen(ctrl.job_inf, await jobs.patch("pi", {"spec": {"suspend": True}}, namespace="default"))
        await stopped(ctrl)  # what the informers hold stays as it is
        deletes = []
        delete = ctrl.pods.delete
        ctrl.pods.delete = lambda name, *a, **kw: (deletes.append(name), delete(name, *a, **kw))[1]
        await ctrl.sync("default/pi")
        with pytest.raises(APIError) as e:  # the Job it holds is older than the first sync's status
            await ctrl.sync("default/pi")
        assert e.value.code == 409
        assert sorted(deletes) == sorted(p["metadata"]["name"] for p in running)
    finally:
        await stopped(ctrl)
        await s.close()


async def test_a_sync_lists_at_most_500_finished_pods_as_uncounted(env):
    """MaxUncountedPods: of 600 finished pods still holding the tracking finalizer, one sync lists 500
    in status.uncountedTerminatedPods and removes their finalizers; the Job is not complete until a
    later sync has counted the rest. A FailJob rule is still read on a failed pod past the 500."""
    _, ctrl, _ = env
    n = 600
    labels = {"job": "big"}
    big = job("big", parallelism=n, completions=n, selector={"matchLabels": labels}, podFailurePolicy={"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]})
    big["metadata"].update(uid="job-uid", generation=1)
    big["status"] = {"startTime": "2026-01-01T00:00:00Z", "uncountedTerminatedPods": {}}
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "big", "uid": "job-uid", "controller": True}
    pods = [{"metadata": {"name": f"big-{i}", "namespace": "default", "uid": f"u{i}", "labels": labels,
                          "finalizers": [TRACKING], "ownerReferences": [ref], "resourceVersion": "1"},
             "spec": {}, "status": {"phase": "Succeeded"}} for i in range(n)]
    ctrl.job_inf.get = lambda key: big if key == "default/big" else None
    ctrl.pod_inf.list_namespace = lambda ns: pods if ns == "default" else []
    writes, untracked = [], []
    ctrl._write_status = lambda j, st: _async(writes.append(st))
    ctrl._remove_finalizers = lambda ps: _async(untracked.extend(ps))
    await ctrl.sync("default/big")
    [st] = writes
    assert len(st["uncountedTerminatedPods"]["succeeded"]) == 500 and len(untracked) == 500
    assert not any(c["type"] == "Complete" for c in st.get("conditions") or [])
    pods[-1]["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "c", "state": {"terminated": {"exitCode": 42}}}]}
    writes.clear()
    await ctrl.sync("default/big")
    assert [c["reason"] for c in writes[0]["conditions"] if c["type"] == "FailureTarget"] == ["PodFailurePolicy"]


async def test_an_indexed_jobs_succeeded_pods_count_by_index_at_once(env):
    """Upstream counts an Indexed Job's succeeded pod by its index in the sync that sees it
    (completedIndexes, succeeded), never listing its uid in uncountedTerminatedPods, and removes its
    finalizer after that status write; Complete waits for the finalizers to be gone."""
    _, ctrl, _ = env
    labels = {"job": "ix"}
    ix = job("ix", parallelism=2, completions=2, completionMode="Indexed", selector={"matchLabels": labels})
    ix["metadata"].update(uid="job-uid", generation=1)
    ix["status"] = {"startTime": "2026-01-01T00:00:00Z", "uncountedTerminatedPods": {}}
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "ix", "uid": "job-uid", "controller": True}
    pods = [{"metadata": {"name": f"ix-{i}", "namespace": "default", "uid": f"u{i}", "labels": labels,
                          "annotations": {INDEX: str(i)}, "finalizers": [TRACKING], "ownerReferences": [ref],
                          "resourceVersion": "1"}, "spec": {}, "status": {"phase": "Succeeded"}} for i in range(2)]
    ctrl.job_inf.get = lambda key: ix if key == "default/ix" else None
    ctrl.pod_inf.list_namespace = lambda ns: pods if ns == "default" else []
    writes, untracked = [], []
    ctrl._write_status = lambda j, st: _async(writes.append(st))
    ctrl._remove_finalizers = lambda ps: _async(untracked.extend(p["metadata"]["name"] for p in ps))
    await ctrl.sync("default/ix")
    [st] = writes
    assert (st["completedIndexes"], st["succeeded"], st["uncountedTerminatedPods"]) == ("0,1", 2, {})
    conds = {c["type"] for c in st["conditions"]}
    assert "SuccessCriteriaMet" in conds and "Complete" not in conds
    assert sorted(untracked) == ["ix-0", "ix-1"]
    for p in pods:
        p["metadata"]["finalizers"] = []
    ix["status"] = st
    writes.clear()
    await ctrl.sync("default/ix")
    assert {c["type"] for c in writes[0]["conditions"]} == {"SuccessCriteriaMet", "Complete"}


async def test_an_index_list_of_two_billion_indexes_is_read_as_intervals(env):
    """An Indexed Job without backoffLimitPerIndex may have 2^31-1 completions, so its completedIndexes
    may name two billion indexes: the controller holds the list as intervals (upstream's orderedIntervals)
    and walks their gaps for the pending indexes, where a set of the indexes took gigabytes."""
    client, ctrl, _ = env
    completions = 2**31 - 1
    big = job("big", parallelism=2, completions=completions, completionMode="Indexed",
              selector={"matchLabels": {"job": "big"}})
    big["metadata"].update(uid="big-uid", generation=1)
    big["status"] = {"startTime": "2026-01-01T00:00:00Z", "uncountedTerminatedPods": {}, "succeeded": completions - 3,
                     "completedIndexes": f"0-{completions - 5},{completions - 3}"}
    ctrl.job_inf.get = lambda key: big if key == "default/big" else None
    ctrl.pod_inf.list_namespace = lambda ns: []
    writes = []
    ctrl._write_status = lambda j, st: _async(writes.append(st))
    await ctrl.sync("default/big")
    [st] = writes
    assert (st["completedIndexes"], st["succeeded"], st["active"]) == (big["status"]["completedIndexes"],
                                                                         completions - 3, 2)
    items, _ = await client.resource("", "v1", "pods").list("default")
    assert sorted(int(p["metadata"]["annotations"][INDEX]) for p in items) == [completions - 4, completions - 2]


async def test_pods_over_parallelism_go_pending_first_as_active_pods_orders_them(env):
    """activePodsForRemoval sorts by controller.ActivePods: a pending pod goes before a running one
    that is not ready, whichever the informer lists first (it went by readiness and list order)."""
    client, ctrl, clock = env
    jobs, pods = client.resource("batch", "v1", "jobs"), client.resource("", "v1", "pods")
    await jobs.create(job(parallelism=3, completions=6))
    await ticking(clock, lambda: live_pods(client, 3))
    listed = [p for p in ctrl.pod_inf.list_namespace("default") if not p["metadata"].get("deletionTimestamp")]
    first, second, last = listed
    for p, ready in ((first, "False"), (second, "True")):
        cur = await pods.get(p["metadata"]["name"], "default")
        await pods.update({**cur, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}},
                          subresource="status")
    await eventually(lambda: _async(all((ctrl.pod_inf.get(f"default/{p['metadata']['name']}")["status"] or {})
                                       .get("phase") == "Running" for p in (first, second))))
    await jobs.patch("pi", {"spec": {"parallelism": 2}}, namespace="default")
    left = await ticking(clock, lambda: live_pods(client, 2))
    assert sorted(p["metadata"]["name"] for p in left) == sorted(p["metadata"]["name"] for p in (first, second))


async def test_conditions_written_without_type_or_status_are_read_as_go_zero_values(env, caplog):
    """A status write may leave a condition's type or status out (upstream serves them as ""): the
    controller reads them so, sets Suspended back to True and reports it; it was a KeyError and its
    traceback on every sync (fuzz60)."""
    client, _, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    await jobs.create(job(suspend=True))
    await ticking(clock, lambda: job_condition(client, "Suspended"))

    async def suspended():
        j = await jobs.get("pi", "default")
        return [c for c in j["status"]["conditions"] if c.get("type") == "Suspended" and c.get("status") == "True"]
    for conditions in ([{"type": "Suspended"}], [{"status": "True"}, {"type": "Suspended", "status": "False"}]):
        j = await jobs.get("pi", "default")
        await jobs.update({**j, "status": {**j["status"], "conditions": conditions}}, subresource="status")
        await ticking(clock, suspended)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
