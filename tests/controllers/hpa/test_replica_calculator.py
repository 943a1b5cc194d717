"""Table-driven replica calculations, each with the number upstream computes."""

import pytest

from nanokube.controllers.hpa import normalize
from nanokube.controllers.hpa import replica_calculator as calc

NOW = 1_800_000_000.0
T = calc.Tolerances()
TIMING = calc.Timing(NOW)


def pod(name, phase="Running", ready=True, cpu="1", started=NOW - 3600):
    from nanokube.clock import format_time
    cond = {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": format_time(started)}
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase, "startTime": format_time(started), "conditions": [cond]}}


def usage(**milli):
    return {k: calc.PodMetric(v, NOW - 10) for k, v in milli.items()}


@pytest.mark.parametrize("current,usage_,target,tol,pods,want", [
    (2, 30_000, 10_000, T, 2, 6),            # ratio 3 × 2 ready pods
    (2, 10_500, 10_000, T, 2, 2),            # within 0.1
    (2, 12_000, 10_000, T, 2, 3),            # ceil(1.2 × 2)
    (2, 12_000, 10_000, calc.Tolerances(up=0.25), 2, 2),   # per-direction up tolerance
    (4, 5_000, 10_000, calc.Tolerances(down=0.6), 4, 4),  # per-direction down tolerance
    (0, 12_000, 5_000, T, 0, 3),             # wake from zero: ceil(ratio)
    (0, 0, 5_000, T, 0, 0),
    (3, 0, 5_000, T, 3, 0),                  # ceil(0 × 3)
])
def test_value_targets(current, usage_, target, tol, pods, want):
    assert calc.value_replicas(current, usage_, target, tol, [pod(f"p{i}") for i in range(pods)]) == want


@pytest.mark.parametrize("status_replicas,usage_,target,want", [
    (2, 30_000, 5_000, (6, 15_000)),         # sum/target, status averageValue = sum/current
    (3, 15_500, 5_000, (3, 5167)),           # |15.5/15 − 1| within tolerance
    (0, 7_000, 5_000, (2, 0)),               # from zero; no replica to average over (getPerPodUsage)
])
def test_average_value_targets(status_replicas, usage_, target, want):
    assert calc.per_pod_replicas(status_replicas, usage_, target, T) == want


def test_value_with_no_pods_is_an_error():
    with pytest.raises(calc.MetricError, match="no pods returned"):
        calc.value_replicas(2, 30_000, 10_000, T, [])


@pytest.mark.parametrize("pods,metrics,target,want", [
    # 2 pods at 100% of a 1-cpu request, target 50% → 4
    ([pod("a"), pod("b")], usage(a=1000, b=1000), 50, (4, 100, 1000)),
    # within tolerance
    ([pod("a"), pod("b")], usage(a=520, b=500), 50, (2, 51, 510)),
    # scaling up with a missing pod: it counts as 0 → ratio (2000/3000)/0.5 = 1.33 → ceil(4) = 4
    ([pod("a"), pod("b"), pod("c")], usage(a=1000, b=1000), 50, (4, 100, 1000)),
    # scaling down with a missing pod: it counts as 100% of request → stays at 3
    ([pod("a"), pod("b"), pod("c")], usage(a=100, b=100), 50, (3, 10, 100)),
    # scaling up with an unready pod: it counts as 0 usage → ratio 1.33 → 4
    ([pod("a"), pod("b"), pod("c", ready=False, started=NOW - 60)], usage(a=1000, b=1000, c=1000), 50, (4, 100, 1000)),
    # failed pods are ignored
    ([pod("a"), pod("b", phase="Failed")], usage(a=1000, b=5000), 50, (2, 100, 1000)),
])
def test_resource_utilization(pods, metrics, target, want):
    assert calc.resource_utilization_replicas(len(pods) - sum(p["status"]["phase"] == "Failed" for p in pods),
                                              target, "cpu", pods, metrics, T, TIMING) == want


def test_resource_utilization_without_metrics_is_an_error():
    with pytest.raises(calc.MetricError, match="did not receive metrics"):
        calc.resource_utilization_replicas(1, 50, "cpu", [pod("a")], {}, T, TIMING)


def test_pods_metric_average():
    assert calc.plain_metric_replicas(2, 500, [pod("a"), pod("b")], usage(a=1500, b=500), T, TIMING) == (4, 1000)


@pytest.mark.parametrize("rules,ups,downs,current,want", [
    ({"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}, [], [], 10, 20),
    ({"selectPolicy": "Min", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}, [], [], 10, 14),
    ({"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}, [(NOW - 30, 2)], [], 5, 5),
    ({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}, [], [], 3, 5),
    ({"selectPolicy": "Disabled", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}, [], [], 3, 3),
])
def test_scale_up_limit(rules, ups, downs, current, want):
    assert normalize.scale_up_limit(current, rules, normalize.History([], ups, downs), NOW) == want


@pytest.mark.parametrize("rules,downs,current,want", [
    ({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}, [], 10, 0),
    ({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 30, "periodSeconds": 60},
                                          {"type": "Pods", "value": 1, "periodSeconds": 60}]}, [], 10, 7),
    ({"selectPolicy": "Min", "policies": [{"type": "Percent", "value": 30, "periodSeconds": 60},
                                          {"type": "Pods", "value": 1, "periodSeconds": 60}]}, [], 10, 9),
    ({"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}, [(NOW - 10, 2)], 8, 8),
])
def test_scale_down_limit(rules, downs, current, want):
    assert normalize.scale_down_limit(current, rules, normalize.History([], [], downs), NOW) == want


def test_legacy_caps_scale_up_and_stabilizes_down():
    h = normalize.History()
    out = normalize.legacy(2, 20, 1, 10, 300, h, NOW)
    assert (out.replicas, out.limited, out.limit[0]) == (4, True, "ScaleUpLimit")
    out = normalize.legacy(4, 1, 1, 10, 300, h, NOW + 10)
    # the recommendation of 20 still holds inside the window, capped at max(2×4, 4)
    assert (out.replicas, out.able[0], out.limit[0]) == (8, "ScaleDownStabilized", "ScaleUpLimit")
    out = normalize.legacy(4, 1, 1, 10, 300, h, NOW + 400)
    assert (out.replicas, out.able[0]) == (1, "ReadyForNewScale")


def test_behavior_scale_up_window_takes_the_lowest_recommendation():
    h = normalize.History(recommendations=[(NOW - 30, 3)])
    b = {"scaleUp": {"stabilizationWindowSeconds": 60, "policies": [{"type": "Pods", "value": 100, "periodSeconds": 15}]}}
    out = normalize.with_behavior(2, 8, 1, 10, b, 300, h, NOW)
    assert (out.replicas, out.able[0]) == (3, "ScaleUpStabilized")
