"""kube-scheduler's /metrics/resources collector (pkg/scheduler/metrics/resources): each pod's
requests and limits as the scheduler counts them, labelled as upstream labels them; and the
scheduler's metrics reset (DELETE /metrics)."""

from prometheus_client import generate_latest

from nanokube.scheduler import resource_metrics
from nanokube.scheduler.metrics import Metrics


def pod(name, containers, *, node="", phase="Running", init=(), overhead=None, priority=None, pod_level=None):
    spec = {"containers": containers, "initContainers": list(init), "schedulerName": "default-scheduler",
            "nodeName": node}
    if overhead:
        spec["overhead"] = overhead
    if priority is not None:
        spec["priority"] = priority
    if pod_level:
        spec["resources"] = pod_level
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": {"phase": phase}}


def c(requests=None, limits=None, **kw):
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **kw}


def samples(pods):
    text = generate_latest(resource_metrics.registry(lambda: pods)).decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kube_pod_resource"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out, text


def key(metric, pod, resource, unit, node="n1", priority=""):
    return (f'{metric}{{namespace="ns",node="{node}",pod="{pod}",priority="{priority}",resource="{resource}",'
            f'scheduler="default-scheduler",unit="{unit}"}}')


def test_requests_and_limits_by_pod_and_resource():
    web = pod("web", [c({"cpu": "250m", "memory": "64Mi"}, {"cpu": "1", "memory": "128Mi"}),
                      c({"cpu": "250m", "hugepages-2Mi": "4Mi", "example.com/gpu": "1"}, {"example.com/gpu": "1"})],
              node="n1", priority=1000, overhead={"cpu": "100m", "memory": "10Mi"})
    got, text = samples([web])
    assert "# TYPE kube_pod_resource_request gauge" in text and "# TYPE kube_pod_resource_limit gauge" in text
    assert "# HELP kube_pod_resource_request [STABLE] Resources requested by workloads on the cluster" in text
    assert got == {
        # requests: both containers, then the overhead on every resource
        key("kube_pod_resource_request", "web", "cpu", "cores", priority="1000"): 0.6,
        key("kube_pod_resource_request", "web", "memory", "bytes", priority="1000"): (64 + 10) * 2 ** 20,
        key("kube_pod_resource_request", "web", "hugepages-2Mi", "bytes", priority="1000"): 4 * 2 ** 20,
        key("kube_pod_resource_request", "web", "example.com/gpu", "", priority="1000"): 1,
        # limits: the overhead only where a limit is set
        key("kube_pod_resource_limit", "web", "cpu", "cores", priority="1000"): 1.1,
        key("kube_pod_resource_limit", "web", "memory", "bytes", priority="1000"): (128 + 10) * 2 ** 20,
        key("kube_pod_resource_limit", "web", "example.com/gpu", "", priority="1000"): 1,
    }


def test_init_containers_sidecars_and_pod_level_resources():
    sidecar = c({"cpu": "100m"}, {"cpu": "200m"}, restartPolicy="Always")
    setup = c({"cpu": "2"}, {"cpu": "3"})
    p = pod("p", [c({"cpu": "500m", "memory": "1Gi"}, {"memory": "2Gi"})], node="n1", init=[sidecar, setup],
            pod_level={"limits": {"memory": "4Gi"}})
    got, _ = samples([p])
    # an ordinary init container runs beside the sidecars before it and outweighs the rest
    assert got[key("kube_pod_resource_request", "p", "cpu", "cores")] == 2.1
    assert got[key("kube_pod_resource_limit", "p", "cpu", "cores")] == 3.2
    assert got[key("kube_pod_resource_request", "p", "memory", "bytes")] == 2 ** 30
    assert got[key("kube_pod_resource_limit", "p", "memory", "bytes")] == 4 * 2 ** 30, "pod-level limits win"


def test_terminal_pods_are_left_out_only_when_bound():
    pods = [pod("done", [c({"cpu": "1"})], node="n1", phase="Succeeded"),
            pod("failed", [c({"cpu": "1"})], node="n1", phase="Failed"),
            pod("pending", [c({"cpu": "1"})]),
            pod("unbound-failed", [c({"cpu": "1"})], phase="Failed"),
            pod("nothing", [c()], node="n1")]
    got, _ = samples(pods)
    assert {s.split('pod="')[1].split('"')[0] for s in got} == {"pending", "unbound-failed"}
    assert got[key("kube_pod_resource_request", "pending", "cpu", "cores", node="")] == 1


def test_reset_starts_counters_and_histograms_again():
    m = Metrics()
    m.schedule_attempts.labels("scheduled", "default-scheduler").inc()
    held = m.attempt_duration.labels("scheduled", "default-scheduler")
    held.observe(0.01)
    m.pod_scheduling_attempts.observe(1)
    m.reset()
    r = m.registry
    assert r.get_sample_value("scheduler_schedule_attempts_total", {"result": "scheduled",
                                                                    "profile": "default-scheduler"}) is None
    assert r.get_sample_value("scheduler_scheduling_attempt_duration_seconds_count",
                              {"result": "scheduled", "profile": "default-scheduler"}) is None
    assert r.get_sample_value("scheduler_pod_scheduling_attempts_count") == 1, "a plain histogram has no reset"
    held.observe(0.02)  # a series a caller holds counts again, and is exposed again
    assert r.get_sample_value("scheduler_scheduling_attempt_duration_seconds_count",
                              {"result": "scheduled", "profile": "default-scheduler"}) == 1
