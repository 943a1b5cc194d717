"""The Job controller's metrics, read as kube-controller-manager's /metrics serves them, against
upstream's pkg/controller/job/metrics: syncs by action, finished Jobs by reason, finished pods and
indexes, podFailurePolicy actions, the tracking finalizer on terminated pods, external Jobs."""

from prometheus_client.parser import text_string_to_metric_families

from nanokube.metrics.exposition import render
from tests.controllers import ticking
from tests.controllers.test_job import env, job, job_condition, live_pods  # noqa: F401  (the fixture)


def samples(ctrl) -> dict:
    text = render(ctrl.metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples if s.name.startswith("job_controller_")}


def value(got: dict, name: str, **labels) -> float:
    return got.get((f"job_controller_{name}", tuple(sorted(labels.items()))), 0.0)


async def end(client, pod, phase, code=None):
    pods = client.resource("", "v1", "pods")
    cur = await pods.get(pod["metadata"]["name"], "default")
    st = {"phase": phase}
    if code is not None:
        st["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": code}}}]
    await pods.update({**cur, "status": st}, subresource="status")


async def test_job_metrics_count_what_upstream_counts(env):  # noqa: F811
    client, ctrl, clock = env
    jobs = client.resource("batch", "v1", "jobs")
    # a work queue Job whose one failure a rule ignores
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [5]}}]}
    await jobs.create(job(completions=2, parallelism=2, podFailurePolicy=policy))
    first = await ticking(clock, lambda: live_pods(client, 2))
    await end(client, first[0], "Succeeded", 0)
    await end(client, first[1], "Failed", 5)
    again = await ticking(clock, lambda: live_pods(client, 1))
    await end(client, again[0], "Succeeded", 0)
    await ticking(clock, lambda: job_condition(client, "Complete"))
    # an Indexed Job whose index 1 fails with no retry left
    await jobs.create(job("idx", completions=2, parallelism=2, completionMode="Indexed", backoffLimitPerIndex=0))
    pods = sorted(await ticking(clock, lambda: live_pods(client, 2)),
                  key=lambda p: p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
    await end(client, pods[0], "Succeeded", 0)
    await end(client, pods[1], "Failed", 1)
    await ticking(clock, lambda: job_condition(client, "Failed", "idx"))
    await jobs.create(job("ext", managedBy="kueue.x-k8s.io/multikueue"))

    async def counted():
        got = samples(ctrl)
        return got if value(got, "jobs_by_external_controller_total", controller_name="kueue.x-k8s.io/multikueue") \
            and value(got, "terminated_pods_tracking_finalizer_total", event="delete") == 5 else None
    got = await ticking(clock, counted)
    assert value(got, "jobs_finished_total", completion_mode="NonIndexed", result="succeeded",
                 reason="CompletionsReached") == 1
    assert value(got, "jobs_finished_total", completion_mode="Indexed", result="failed", reason="FailedIndexes") == 1
    assert value(got, "job_pods_finished_total", completion_mode="NonIndexed", result="succeeded") == 2
    assert value(got, "job_pods_finished_total", completion_mode="NonIndexed", result="failed") == 0
    assert value(got, "job_pods_finished_total", completion_mode="Indexed", result="succeeded") == 1
    assert value(got, "job_pods_finished_total", completion_mode="Indexed", result="failed") == 1
    assert value(got, "job_finished_indexes_total", status="succeeded", backoffLimit="perIndex") == 1
    assert value(got, "job_finished_indexes_total", status="failed", backoffLimit="perIndex") == 1
    assert value(got, "pod_failures_handled_by_failure_policy_total", action="Ignore") == 1
    # five pods terminated holding the finalizer, which each lost once counted
    assert value(got, "terminated_pods_tracking_finalizer_total", event="add") == 5
    # reconciling: the syncs that decided the Job's end (deleteActivePods, no manageJob)
    for action in ("pods_created", "reconciling"):
        assert value(got, "job_syncs_total", completion_mode="NonIndexed", result="success", action=action) >= 1
    assert value(got, "job_sync_duration_seconds_count", completion_mode="Indexed", result="success",
                 action="pods_created") >= 1
    assert not any(k[0] == "job_controller_job_syncs_total" and ("result", "error") in k[1] for k in got)
    types = {f.name: f.type for f in text_string_to_metric_families(render(ctrl.metrics.registry).decode())}
    assert types["job_controller_job_sync_duration_seconds"] == "histogram"
