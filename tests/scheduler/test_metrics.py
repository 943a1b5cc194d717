"""kube-scheduler's metrics as its /metrics serves them (exposition.render of its registry) after
pods were scheduled and one failed: upstream's names, labels, buckets and HELP texts (stable list of
pkg/scheduler/metrics), and none of the metrics upstream removed."""

import re

from nanokube.metrics.exposition import render
from tests.controllers import eventually
from tests.scheduler import node, pod
from tests.scheduler.test_scheduler import add_node, bound, strip_uid


def bounds(text: str, series: str) -> list[str]:
    return [re.search(r'[{,]le="([^"]+)"', line).group(1) for line in text.splitlines() if line.startswith(series + "{")]


async def test_scheduling_metrics_are_upstreams(stack):
    client, sched = stack
    await add_node(client, node("n1", "2", "4Gi"))
    await sched.start()
    pods = client.resource("", "v1", "pods")
    await pods.create(strip_uid(pod("fits", "1")))
    await pods.create(strip_uid(pod("too-big", "8")))
    assert await eventually(bound(pods, "fits")) == "n1"

    async def failed():
        return "default/too-big" in sched.queue.unschedulable
    await eventually(failed)
    text = render(sched.metrics.registry).decode()

    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1\n' in text
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1\n' in text
    assert ("# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result. "
            "'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler "
            "problem.\n") in text
    assert bounds(text, "scheduler_scheduling_attempt_duration_seconds_bucket") == [
        "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256", "0.512", "1.024", "2.048",
        "4.096", "8.192", "16.384", "+Inf", "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128",
        "0.256", "0.512", "1.024", "2.048", "4.096", "8.192", "16.384", "+Inf"]  # scheduled, then unschedulable
    sli = bounds(text, "scheduler_pod_scheduling_sli_duration_seconds_bucket")
    assert sli[:3] == ["0.01", "0.02", "0.04"] and sli[-3:] == ["2621.44", "5242.88", "+Inf"] and len(sli) == 21
    assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1\n' in text
    assert "# HELP scheduler_pod_scheduling_sli_duration_seconds [BETA] E2e latency for a pod being scheduled" in text
    assert bounds(text, "scheduler_pod_scheduling_attempts_bucket") == ["1", "2", "4", "8", "16", "+Inf"]
    # each extension point's run, by its status and profile (Filter, run per node, is not timed)
    point = 'scheduler_framework_extension_point_duration_seconds_count{{extension_point="{}",' \
            'profile="default-scheduler",status="{}"}}'
    for name in ("Reserve", "Permit", "PreBind", "Bind", "PostBind"):
        assert sample(text, point.format(name, "Success")) == 1, name
    assert sample(text, point.format("Score", "Success")) is None  # one feasible node: nothing to score
    assert sample(text, point.format("PreFilter", "Success")) >= 2  # both pods, the second as often as it was tried
    assert sample(text, point.format("PostFilter", "Unschedulable")) >= 1
    assert sample(text, point.format("Filter", "Success")) is None
    assert bounds(text, "scheduler_framework_extension_point_duration_seconds_bucket")[:12] == [
        "0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032", "0.0064", "0.0128", "0.0256", "0.0512", "0.1024",
        "0.2048"]
    # the algorithm's latency, once a host is found: the pod that fits, not the one that does not
    assert "scheduler_scheduling_algorithm_duration_seconds_count 1\n" in text
    assert bounds(text, "scheduler_scheduling_algorithm_duration_seconds_bucket")[:2] == ["0.001", "0.002"]
    assert 'scheduler_pending_pods{queue="unschedulable"} 1\n' in text
    assert 'scheduler_pending_pods{queue="active"} 0\n' in text
    assert 'scheduler_pending_pods{queue="gated"} 0\n' in text
    assert "# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type. 'active' means" in text
    # removed upstream in 1.33 (k/k #128906) for pod_scheduling_sli_duration_seconds
    assert "scheduler_pod_scheduling_duration_seconds" not in text


def test_the_sli_attempts_label_stops_at_15_plus():
    from nanokube.scheduler.metrics import Metrics

    m = Metrics()
    m.pod_scheduled(3, 0.5)
    m.pod_scheduled(15, 2.0)
    m.pod_scheduled(40, 2.0)
    text = render(m.registry).decode()
    assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="3"} 1\n' in text
    assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="15+"} 2\n' in text
    assert 'attempts="15"}' not in text and 'attempts="40"}' not in text


def test_extension_point_series_by_status_and_across_a_reset():
    """Each status code of an extension point is its own series, under upstream's label text; a
    reset (DELETE /metrics) zeroes them and the next runs count from there."""
    from nanokube.scheduler.framework import Code, Status
    from nanokube.scheduler.metrics import Metrics

    m = Metrics()
    count = 'scheduler_framework_extension_point_duration_seconds_count{{extension_point="PreFilter",' \
            'profile="p",status="{}"}}'
    for st in (None, None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["x"]), Status(Code.UNSCHEDULABLE, ["y"])):
        m.extension_point("PreFilter", st, "p", 0.001)
    text = render(m.registry).decode()
    assert (sample(text, count.format("Success")), sample(text, count.format("UnschedulableAndUnresolvable")),
            sample(text, count.format("Unschedulable"))) == (2, 1, 1)
    m.reset()
    m.extension_point("PreFilter", Status(Code.UNSCHEDULABLE, ["z"]), "p", 0.001)
    text = render(m.registry).decode()
    assert sample(text, count.format("Unschedulable")) == 1 and sample(text, count.format("Success")) is None


async def test_preemption_is_counted_with_its_victims(stack):
    """scheduler_preemption_attempts_total (every DefaultPreemption PostFilter run) and
    scheduler_preemption_victims (the chosen candidate's victims), both STABLE."""
    from tests.scheduler.test_default_preemption import pending, running, start

    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await start(client, sched, [node("n1", "2", "8Gi")], [running("low", "n1", 1, cpu="2")])
    await pods.create(pending("high", 10, cpu="2"))

    async def preempted():
        text = render(sched.metrics.registry).decode()
        return sample(text, "scheduler_preemption_victims_count") and text
    text = await eventually(preempted)
    # each preemption (the preemptor may try again while its victim terminates) picks the one pod
    count = sample(text, "scheduler_preemption_victims_count")
    assert sample(text, "scheduler_preemption_attempts_total") >= count >= 1
    assert sample(text, "scheduler_preemption_victims_sum") == count
    assert sample(text, 'scheduler_preemption_victims_bucket{le="1"}') == count
    assert bounds(text, "scheduler_preemption_victims_bucket") == ["1", "2", "4", "8", "16", "32", "64", "+Inf"]
    assert "# HELP scheduler_preemption_attempts_total [STABLE] Total preemption attempts in the cluster till now\n" \
        in text


def sample(text: str, series: str) -> float | None:
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(series + " ")), None)


def test_workload_scheduling_metrics_are_alpha_as_upstreams():
    """GenericWorkload's pod group and workload-aware preemption metrics are ALPHA: their names carry
    no stability prefix, their HELP texts do, as component-base writes every alpha metric's."""
    from prometheus_client.parser import text_string_to_metric_families

    from nanokube.scheduler.metrics import Metrics
    m = Metrics()
    m.podgroup_attempt("scheduled", "default-scheduler", "podgroup", 0.01)
    m.podgroup_algorithm_duration.labels("default-scheduler", "podgroup").observe(0.005)
    m.workload_preemption("Success", 3, 1, "podgroup")
    fams = {f.name: f for f in text_string_to_metric_families(render(m.registry).decode())}
    want = {
        "scheduler_podgroup_schedule_attempts": ("counter", {"result", "profile", "type"}),
        "scheduler_podgroup_scheduling_attempt_duration_seconds": ("histogram", {"result", "profile", "type", "le"}),
        "scheduler_podgroup_scheduling_algorithm_duration_seconds": ("histogram", {"profile", "type", "le"}),
        "scheduler_workload_preemption_attempts": ("counter", {"result"}),
        "scheduler_workload_preemption_victims": ("histogram", {"le"}),
        "scheduler_preemption_workload_disruptions": ("histogram", {"preemptor", "le"}),
    }
    for name, (kind, labels) in want.items():
        f = fams[name]
        assert f.type == kind and f.documentation.startswith("[ALPHA] "), name
        assert set().union(*(s.labels for s in f.samples)) == labels, name
    assert fams["scheduler_podgroup_schedule_attempts"].documentation.endswith(
        "'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.")
    assert fams["scheduler_workload_preemption_attempts"].documentation == (
        "[ALPHA] Total preemption attempts initiated by workload (including pod groups) in the cluster till now.")
    victims = [s.labels["le"] for s in fams["scheduler_workload_preemption_victims"].samples if s.name.endswith("_bucket")]
    assert victims == ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "+Inf"]
