"""The HPA controller's reconcile, driven by hand with a manual clock: scale
to zero and waking, paused targets, stabilization, policies, failures."""

import copy

import pytest

from nanokube.apiserver.loopback import LocalClient
from nanokube.controllers.hpa import HPAController, options_from_env
from nanokube.machinery import featuregates
from nanokube.machinery.featuregates import NANOKUBE_DEFAULTS, FeatureGates
from nanokube.metrics.api import MetricsAPI
from nanokube.metrics.provider import MetricsProvider
from nanokube.registry.autoscaling import format_hpa_metrics
from tests.controllers import eventually, make_stack
from tests.node import ManualClock

NS = "default"


def deployment(replicas):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}


def external(value=None, average=None, name="queue"):
    target = {"type": "Value", "value": value} if value else {"type": "AverageValue", "averageValue": average}
    return {"type": "External", "external": {"metric": {"name": name}, "target": target}}


def hpa(metrics, lo=1, hi=10, behavior=None):
    spec = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": lo, "maxReplicas": hi, "metrics": metrics}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": NS}, "spec": spec}


class Env:
    def __init__(self, stack, clock):
        self.client = stack.client
        self.clock = clock
        self.ctrl = HPAController(stack.client, clock=clock)
        self.deploys = stack.client.resource("apps", "v1", "deployments")
        self.hpas = stack.client.resource("autoscaling", "v2", "horizontalpodautoscalers")
        self.cms = stack.client.resource("", "v1", "configmaps")
        self.pods = stack.client.resource("", "v1", "pods")
        self.events = stack.client.resource("", "v1", "events")

    async def set_metric(self, **values):
        body = {"metadata": {"name": "nanokube-external-metrics", "namespace": NS},
                "data": {k: str(v) for k, v in values.items()}}
        try:
            cm = await self.cms.get("nanokube-external-metrics", NS)
            await self.cms.update({**body, "metadata": cm["metadata"]})
        except Exception:
            await self.cms.create(body)

    async def set_replicas(self, n, ready_pods=None):
        d = await self.deploys.get("web", NS)
        d = await self.deploys.update({**d, "spec": {**d["spec"], "replicas": n}})
        await self.deploys.update({**d, "status": {"replicas": n}}, subresource="status")
        for p in (await self.pods.list(NS))[0]:
            await self.pods.delete(p["metadata"]["name"], NS, grace_period_seconds=0)
        for i in range(n if ready_pods is None else ready_pods):
            pod = await self.pods.create({"metadata": {"name": f"web-{i}", "namespace": NS, "labels": {"app": "web"}},
                                          "spec": {"containers": [{"name": "c", "image": "pause"}]}})
            ready = {"type": "Ready", "status": "True", "lastTransitionTime": self.clock.rfc3339()}
            await self.pods.update({**pod, "status": {"phase": "Running", "conditions": [ready]}}, subresource="status")

    async def replicas(self):
        return (await self.deploys.get("web", NS))["spec"]["replicas"]

    async def sync(self):
        await self.ctrl.reconcile(await self.hpas.get("web", NS))
        return await self.hpas.get("web", NS)

    async def reasons(self):
        return [e["reason"] for e in (await self.events.list(NS))[0]]

    async def reported(self, *reasons: str) -> list[dict]:
        """The namespace's Events once each of `reasons` is among them: the controller's recorder writes
        them from its queue, maybe after the sync that emitted them returned."""
        async def listed():
            items = (await self.events.list(NS))[0]
            return items if set(reasons) <= {e["reason"] for e in items} else None
        return await eventually(listed)


def cond(h, typ):
    return next(((c["status"], c["reason"]) for c in h["status"]["conditions"] if c["type"] == typ), None)


def serve_metrics(rest, clock) -> None:
    """The built-in metrics adapter answering the stack's loopback clients' GETs of the metrics APIs, as the
    API server's `get_raw` does, on the test's clock."""
    api = MetricsAPI(MetricsProvider(LocalClient(rest), clock))

    async def get_raw(path, query, user):
        return await api.get(path, query)
    rest.raw_get = get_raw


@pytest.fixture
async def env():
    s = await make_stack()
    clock = ManualClock()
    serve_metrics(s.rest, clock)
    e = Env(s, clock)
    await e.deploys.create(deployment(2))
    await e.set_replicas(2)
    yield e
    await s.close()


async def test_external_value_metric_scales_up_with_event_and_status(env):
    await env.set_metric(queue=30)
    await env.hpas.create(hpa([external(value="10")]))
    h = await env.sync()
    assert await env.replicas() == 4  # ratio 3 × 2 ready pods = 6, capped at max(2×2, 4)
    assert cond(h, "ScalingLimited") == ("True", "ScaleUpLimit")
    assert cond(h, "AbleToScale") == ("True", "SucceededRescale")
    assert cond(h, "ScalingActive") == ("True", "ValidMetricFound")
    assert cond(h, "ScaledToZero") == ("False", "NotScaledToZero")
    assert h["status"]["desiredReplicas"] == 4 and h["status"]["lastScaleTime"]
    assert h["status"]["currentMetrics"] == [{"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "30"}}}]
    events = await env.reported("SuccessfulRescale")
    assert [e["message"] for e in events if e["reason"] == "SuccessfulRescale"] == [
        "New size: 4; reason: external metric queue(nil) above target"]


async def test_current_replicas_are_the_scale_spec_and_averages_divide_by_its_status(env):
    """setStatus writes the scale's spec replicas as currentReplicas (`kubectl get hpa`'s REPLICAS, describe's
    "N current"), while an AverageValue metric divides by the replicas the status counts."""
    d = await env.deploys.get("web", NS)
    await env.deploys.update({**d, "spec": {**d["spec"], "replicas": 3}})  # status still 2
    await env.set_metric(queue=30)
    await env.hpas.create(hpa([external(average="10")]))
    h = await env.sync()
    assert await env.replicas() == 3
    assert (h["status"]["currentReplicas"], h["status"]["desiredReplicas"]) == (3, 3)
    assert h["status"]["currentMetrics"][0]["external"]["current"] == {"averageValue": "15"}


async def test_a_selected_external_metric_is_named_as_go_prints_its_selector(env):
    """The rescale reason names the metric with its selector as Go's %v prints a LabelSelector:
    every matchLabels entry followed by a comma, and the matchExpressions too."""
    await env.set_metric(queue='[{"labels": {"queue": "train", "tier": "gpu"}, "value": "30"}, {"labels": {"queue": "x"}, "value": "1"}]')
    metric = external(value="10")
    metric["external"]["metric"]["selector"] = {
        "matchLabels": {"queue": "train"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "tpu"]}]}
    await env.hpas.create(hpa([metric]))
    await env.sync()
    assert await env.replicas() == 4
    events = await env.reported("SuccessfulRescale")
    assert [e["message"] for e in events if e["reason"] == "SuccessfulRescale"] == [
        "New size: 4; reason: external metric queue(&LabelSelector{MatchLabels:map[string]string{queue: train,},"
        "MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[gpu tpu],},},}) "
        "above target"]


async def test_scale_to_zero_and_wake(env):
    await env.set_metric(queue=0)
    await env.hpas.create(hpa([external(value="5")], lo=0, behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))
    h = await env.sync()
    assert await env.replicas() == 0
    assert cond(h, "ScaledToZero") == ("True", "ScaledToZero")
    await env.set_replicas(0)
    env.clock.t += 15
    h = await env.sync()
    assert await env.replicas() == 0 and cond(h, "ScalingActive") == ("True", "ValidMetricFound")
    await env.set_metric(queue=12)
    env.clock.t += 15
    h = await env.sync()
    assert await env.replicas() == 3  # ceil(12/5) from zero
    assert cond(h, "ScaledToZero") == ("False", "NotScaledToZero")


async def test_with_hpa_scale_to_zero_off_a_target_at_zero_stays_paused(env, monkeypatch):
    """The gate turned off after the HPA scaled its target to zero: the ScaledToZero condition left
    wakes nothing (upstream's scaledToZeroCondition needs the gate), and no pass writes it anew."""
    await env.set_metric(queue=0)
    await env.hpas.create(hpa([external(value="5")], lo=0, behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))
    await env.sync()
    assert await env.replicas() == 0
    await env.set_replicas(0)
    monkeypatch.setattr(featuregates, "GATES", FeatureGates(NANOKUBE_DEFAULTS))
    featuregates.set_flag("HPAScaleToZero=false")
    await env.set_metric(queue=12)
    env.clock.t += 15
    h = await env.sync()
    assert await env.replicas() == 0 and cond(h, "ScalingActive") == ("False", "ScalingDisabled")
    await env.set_replicas(2)  # scaled up by hand: a rescale by the HPA leaves the old condition as it was
    env.clock.t += 15
    h = await env.sync()
    assert await env.replicas() == 5 and cond(h, "ScaledToZero") == ("True", "ScaledToZero")


async def test_a_raised_min_replicas_wakes_the_target_by_its_metrics(env):
    """A target the HPA scaled to zero whose minReplicas is then raised is woken by its metrics
    (from zero, ceil(12/5) = 3), not straight to minReplicas."""
    await env.set_metric(queue=0)
    await env.hpas.create(hpa([external(value="5")], lo=0, behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))
    await env.sync()
    assert await env.replicas() == 0
    await env.set_replicas(0)
    h = copy.deepcopy(await env.hpas.get("web", NS))
    h["spec"]["minReplicas"] = 1
    await env.hpas.update(h)
    await env.set_metric(queue=12)
    env.clock.t += 15
    h = await env.sync()
    assert await env.replicas() == 3 and cond(h, "ScalingActive") == ("True", "ValidMetricFound")
    events = await env.reported("SuccessfulRescale")
    assert "New size: 3; reason: external metric queue(nil) above target" in [e["message"] for e in events]


async def test_target_scaled_to_zero_by_hand_stays_paused(env):
    await env.set_metric(queue=10)
    await env.hpas.create(hpa([external(value="5")], lo=0))
    h = await env.sync()
    assert h["status"]["currentMetrics"] and await env.replicas() == 4
    await env.set_replicas(0)
    await env.set_metric(queue=50)
    h = await env.sync()
    assert await env.replicas() == 0
    assert cond(h, "ScalingActive") == ("False", "ScalingDisabled")
    # setStatus writes the metrics of this pass: none read, none shown (`<unknown>/5`), not the last pass's
    assert h["status"].get("currentMetrics") is None and format_hpa_metrics(h) == "<unknown>/5"
    assert [e["reason"] for e in await env.reported("SuccessfulRescale")].count("SuccessfulRescale") == 1


async def test_failing_metric_source_never_scales(env):
    await env.hpas.create(hpa([external(value="5")], lo=0, behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))
    h = await env.sync()
    assert await env.replicas() == 2
    assert cond(h, "ScalingActive")[:2] == ("False", "FailedGetExternalMetric")
    await env.set_metric(queue="garbage")
    h = await env.sync()
    assert await env.replicas() == 2 and cond(h, "ScalingActive") == ("False", "FailedGetExternalMetric")
    assert await env.reported("FailedComputeMetricsReplicas")


async def test_a_failure_repeated_each_sync_is_one_counted_event(env):
    """The HPA records through client-go's event correlator: the same warning every sync is one Event
    whose count grows (`kubectl describe hpa`: `(x3 over 30s)`), with its reporting controller."""
    await env.hpas.create(hpa([external(value="5", name="missing")]))
    for _ in range(3):
        await env.sync()
        await env.clock.advance(15)

    async def warned():  # the last sync's count is written from the recorder's queue, maybe after the sync
        found = [e for e in (await env.events.list(NS))[0] if e["reason"] == "FailedComputeMetricsReplicas"]
        return found if [e["count"] for e in found] == [3] else None
    warnings = await eventually(warned)
    assert [(e["count"], e["involvedObject"]["kind"], e["involvedObject"]["apiVersion"]) for e in warnings] == [
        (3, "HorizontalPodAutoscaler", "autoscaling/v2")]
    assert warnings[0]["source"] == {"component": "horizontal-pod-autoscaler"}
    assert warnings[0]["reportingComponent"] == "horizontal-pod-autoscaler"
    assert warnings[0]["lastTimestamp"] > warnings[0]["firstTimestamp"]


async def test_downscale_waits_for_the_default_stabilization_window(env):
    await env.set_metric(queue=0)
    await env.hpas.create(hpa([external(value="5")], lo=0))
    await env.set_metric(queue=5)
    h = await env.sync()  # ratio 1: recommendation 2 recorded
    assert await env.replicas() == 2
    await env.set_metric(queue=0)
    env.clock.t += 100
    h = await env.sync()
    assert await env.replicas() == 2 and cond(h, "AbleToScale") == ("True", "ScaleDownStabilized")
    env.clock.t += 201
    h = await env.sync()
    assert await env.replicas() == 0 and cond(h, "ScaledToZero") == ("True", "ScaledToZero")


@pytest.mark.parametrize("behavior, window", [(None, 300), ({"scaleDown": {"stabilizationWindowSeconds": 60}}, 60)])
async def test_a_new_hpa_counts_the_current_replicas_as_its_first_recommendation(env, behavior, window):
    """recordInitialRecommendation: an HPA created on an idle target keeps its replicas for the
    downscale window (the flag's, or behavior's) instead of scaling down on its first sync."""
    await env.set_metric(queue=0)
    await env.hpas.create(hpa([external(value="5")], behavior=behavior))
    h = await env.sync()
    assert await env.replicas() == 2 and cond(h, "AbleToScale") == ("True", "ScaleDownStabilized")
    env.clock.t += window - 1
    await env.sync()
    assert await env.replicas() == 2
    env.clock.t += 2
    await env.sync()
    assert await env.replicas() == 1


async def test_scale_up_policy_and_disabled(env):
    await env.set_metric(queue=100)
    pods1 = {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
    await env.hpas.create(hpa([external(average="1")], hi=50, behavior={"scaleUp": pods1}))
    h = await env.sync()
    assert await env.replicas() == 3 and cond(h, "ScalingLimited") == ("True", "ScaleUpLimit")
    await env.set_replicas(3)
    env.clock.t += 30
    await env.sync()
    assert await env.replicas() == 3  # one pod per 60s already used
    env.clock.t += 31
    await env.sync()
    assert await env.replicas() == 4
    h = copy.deepcopy(await env.hpas.get("web", NS))  # the loopback client's objects are the cache's
    h["spec"]["behavior"]["scaleUp"]["selectPolicy"] = "Disabled"
    await env.hpas.update(h)
    env.clock.t += 120
    h = await env.sync()
    assert await env.replicas() == 4 and cond(h, "ScalingLimited") == ("True", "ScaleUpLimit")


async def test_scale_events_before_behavior_was_set_do_not_count_against_its_policies(env):
    """storeScaleEvent keeps the scale events of HPAs with behavior only: a legacy rescale (2 -> 4) is not
    charged to a Pods policy added after it."""
    await env.set_metric(queue=100)
    await env.hpas.create(hpa([external(value="10")]))
    await env.sync()
    assert await env.replicas() == 4
    await env.set_replicas(4)
    h = copy.deepcopy(await env.hpas.get("web", NS))
    h["spec"]["behavior"] = {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    await env.hpas.update(h)
    env.clock.t += 15
    h = await env.sync()
    assert await env.replicas() == 5 and cond(h, "ScalingLimited") == ("True", "ScaleUpLimit")


async def test_per_direction_tolerance(env):
    await env.set_metric(queue=12)  # ratio 1.2 on 2 ready pods: 3 with the default 0.1
    await env.hpas.create(hpa([external(value="10")], behavior={"scaleUp": {"tolerance": "0.25"}}))
    h = await env.sync()
    assert await env.replicas() == 2 and h["status"]["desiredReplicas"] == 2


async def test_bounds_without_metrics(env):
    await env.set_metric(queue=0)
    await env.hpas.create(hpa([external(value="10")], lo=3))
    await env.sync()
    assert await env.replicas() == 3
    assert any("below Spec.MinReplicas" in e["message"] for e in await env.reported("SuccessfulRescale"))


def test_options_from_env():
    assert options_from_env({"NANOKUBE_HPA_SYNC_PERIOD": "1", "NANOKUBE_HPA_DOWNSCALE_STABILIZATION": "2",
                             "NANOKUBE_HPA_CPU_INITIALIZATION_PERIOD": "0"}) == {
        "sync_period": 1.0, "downscale_window": 2.0, "cpu_initialization_period": 0.0}


async def test_a_failed_resource_metric_is_worded_as_upstream_at_each_layer(env):
    """computeStatusForResourceMetricGeneric wraps the calculator's error ("failed to get cpu
    utilization: ..."), the FailedGetResourceMetric event says that, the ScalingActive condition
    prefixes it, and FailedComputeMetricsReplicas quotes computeReplicasForMetric's wrapping of it."""
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
    await env.hpas.create(hpa([cpu]))
    h = await env.sync()
    detail = "failed to get cpu utilization: did not receive metrics for targeted pods (pods might be unready)"
    active = next(c for c in h["status"]["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"], active["message"]) == (
        "False", "FailedGetResourceMetric", f"the HPA was unable to compute the replica count: {detail}")
    events = {e["reason"]: e["message"] for e in await env.reported("FailedGetResourceMetric",
                                                                    "FailedComputeMetricsReplicas")}
    assert events["FailedGetResourceMetric"] == detail
    assert events["FailedComputeMetricsReplicas"] == (
        f"invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: {detail}")


async def test_an_external_metric_failure_names_the_metric_in_the_returned_error(env):
    await env.hpas.create(hpa([external(average="5", name="missing")]))
    h = await env.sync()
    active = next(c for c in h["status"]["conditions"] if c["type"] == "ScalingActive")
    cause = active["message"].removeprefix("the HPA was unable to compute the replica count: ")
    assert cause.startswith("unable to get external metric default/missing/nil: ")
    events = {e["reason"]: e["message"] for e in await env.reported("FailedGetExternalMetric",
                                                                    "FailedComputeMetricsReplicas")}
    assert events["FailedGetExternalMetric"] == cause
    assert events["FailedComputeMetricsReplicas"] == ("invalid metrics (1 invalid out of 1), first error is: failed to get "
                                                      f"missing external metric value: failed to get missing external metric: {cause}")


async def test_pods_at_exactly_the_target_keep_the_replicas_whatever_the_missing_ones(env):
    """Missing pods are filled in only in a direction (the target's value scaling down, 0 scaling up): at
    a usage ratio of exactly 1 they are left out, and the ratio stays within tolerance."""
    await env.set_replicas(4)
    for name in ("web-0", "web-1"):
        pod = copy.deepcopy(await env.pods.get(name, NS))
        pod["metadata"]["annotations"] = {"metrics.sim.nanokube.io/tokens_per_second": "100"}
        await env.pods.update(pod)
    pods_metric = {"type": "Pods", "pods": {"metric": {"name": "tokens_per_second"},
                                            "target": {"type": "AverageValue", "averageValue": "100"}}}
    await env.hpas.create(hpa([pods_metric], behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}))
    h = await env.sync()
    assert await env.replicas() == 4 and h["status"]["desiredReplicas"] == 4
    assert h["status"]["currentMetrics"][0]["pods"]["current"] == {"averageValue": "100"}


async def test_utilization_counts_sidecar_requests_and_pod_level_requests(env):
    """calculateRequests sums the app containers and the restartable init containers (native sidecars, whose
    usage is reported too), or takes the pod-level request where the pod sets one; a Succeeded pod is ignored."""
    await env.set_replicas(2, ready_pods=0)
    one_gi = {"requests": {"memory": "1Gi"}}
    specs = {"web-0": {"containers": [{"name": "c", "image": "pause", "resources": one_gi}],
                       "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": one_gi}]},
             "web-1": {"resources": {"requests": {"memory": "2Gi"}}, "containers": [{"name": "c", "image": "pause"}]},
             "web-2": {"containers": [{"name": "c", "image": "pause", "resources": one_gi}]}}
    running = {"state": {"running": {"startedAt": env.clock.rfc3339()}}}
    for name, spec in specs.items():
        pod = await env.pods.create({"metadata": {"name": name, "namespace": NS, "labels": {"app": "web"},
                                                  "annotations": {"sim.nanokube.io/memory-usage": "1Gi"}}, "spec": spec})
        status = {"phase": "Succeeded" if name == "web-2" else "Running",
                  "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": env.clock.rfc3339()}],
                  "containerStatuses": [{"name": "c", **running}],
                  "initContainerStatuses": [{"name": c["name"], **running} for c in spec.get("initContainers", [])]}
        await env.pods.update({**pod, "status": status}, subresource="status")
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 50}}}
    await env.hpas.create(hpa([memory]))
    h = await env.sync()
    assert h["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 50
    assert await env.replicas() == 2 and cond(h, "ScalingActive") == ("True", "ValidMetricFound")


async def test_a_pods_metric_failure_names_the_metric(env):
    pods_metric = {"type": "Pods", "pods": {"metric": {"name": "tokens_per_second"},
                                            "target": {"type": "AverageValue", "averageValue": "100"}}}
    await env.hpas.create(hpa([pods_metric]))
    await env.sync()
    events = {e["reason"]: e["message"] for e in await env.reported("FailedGetPodsMetric",
                                                                    "FailedComputeMetricsReplicas")}
    # the rest metrics client's words around the adapter's 404 for a metric no pod has
    cause = ("unable to get metric tokens_per_second: unable to fetch metrics from custom metrics API: "
             "the server could not find the metric tokens_per_second for pods")
    assert events["FailedGetPodsMetric"] == cause
    assert events["FailedComputeMetricsReplicas"].endswith(f"first error is: failed to get pods metric value: {cause}")


async def test_an_object_metric_failure_names_the_metric_and_its_object(env):
    """GetObjectMetricReplicas wraps the metrics API's error with the metric and the object it describes."""
    backlog = {"type": "Object", "object": {"describedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                                            "metric": {"name": "backlog"}, "target": {"type": "Value", "value": "5"}}}
    await env.hpas.create(hpa([backlog]))
    h = await env.sync()
    events = {e["reason"]: e["message"] for e in await env.reported("FailedGetObjectMetric", "FailedComputeMetricsReplicas")}
    cause = ("unable to get metric backlog on Deployment default/web: unable to fetch metrics from custom metrics API: "
             "the server could not find the metric backlog for deployments.apps web")
    assert events["FailedGetObjectMetric"] == cause
    assert events["FailedComputeMetricsReplicas"] == \
        f"invalid metrics (1 invalid out of 1), first error is: failed to get object metric value: {cause}"
    assert cond(h, "ScalingActive") == ("False", "FailedGetObjectMetric")


async def test_an_object_metric_of_a_kind_the_server_does_not_serve_fails_in_the_clients_words(env):
    """The custom metrics client maps the described object's kind before it asks, and its REST mapper's
    error comes wrapped as the API's other failures do."""
    widget = {"type": "Object", "object": {"describedObject": {"apiVersion": "example.com/v1", "kind": "Widget",
                                                               "name": "w"},
                                           "metric": {"name": "backlog"}, "target": {"type": "Value", "value": "5"}}}
    await env.hpas.create(hpa([widget]))
    await env.sync()
    events = {e["reason"]: e["message"] for e in await env.reported("FailedGetObjectMetric")}
    assert events["FailedGetObjectMetric"] == (
        "unable to get metric backlog on Widget default/w: unable to fetch metrics from custom metrics API: "
        'unable to map kind Widget.example.com to resource: no matches for kind "Widget" in group "example.com"')


async def test_an_average_value_object_metric_is_named_as_upstream_names_it(env):
    """computeStatusForObjectMetric names a Value target "<Kind> metric <name>" but an AverageValue one
    "external metric <name>(<selector>)", in ScalingActive's message and the rescale reason."""
    d = copy.deepcopy(await env.deploys.get("web", NS))
    d["metadata"]["annotations"] = {"metrics.sim.nanokube.io/backlog": "30"}
    await env.deploys.update(d)
    target = {"type": "AverageValue", "averageValue": "5"}
    await env.hpas.create(hpa([{"type": "Object", "object": {
        "describedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "metric": {"name": "backlog"}, "target": target}}]))
    h = await env.sync()
    assert await env.replicas() == 4  # ceil(30/5) = 6, capped at max(2×2, 4)
    active = next(c for c in h["status"]["conditions"] if c["type"] == "ScalingActive")
    assert active["message"] == "the HPA was able to successfully calculate a replica count from external metric backlog(nil)"
    events = await env.reported("SuccessfulRescale")
    assert [e["message"] for e in events if e["reason"] == "SuccessfulRescale"] == [
        "New size: 4; reason: external metric backlog(nil) above target"]


async def test_a_failed_metric_keeps_its_place_in_current_metrics(env):
    """computeReplicasForMetrics leaves a failed metric's MetricStatus zero ({"type": ""}) at its index,
    so kubectl, pairing spec.metrics[i] with status.currentMetrics[i], still shows the metrics that work."""
    await env.set_metric(queue=20)
    await env.hpas.create(hpa([external(value="5", name="missing"), external(value="10")]))
    h = await env.sync()
    assert h["status"]["currentMetrics"] == [
        {"type": ""}, {"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "20"}}}]
    assert format_hpa_metrics(h) == "<unknown>/5, 20/10"


async def test_a_sync_that_changes_nothing_writes_no_status(env, tmp_path):
    """An HPA whose target is missing fails each sync the same way: its status (no currentMetrics,
    which the server answers as null) is written once, not again at every sync, as upstream's
    updateStatusIfNeeded compares before it writes."""
    from nanokube.apiserver.audit import AuditLog

    missing = hpa([external(value="5")])
    missing["spec"]["scaleTargetRef"]["name"] = "nope"
    await env.hpas.create(missing)
    env.client.rest.audit = audit = AuditLog(str(tmp_path / "audit.log"))
    try:
        for _ in range(3):
            h = await env.sync()
            await env.clock.advance(15)
    finally:
        audit.close()
        env.client.rest.audit = None
    assert cond(h, "AbleToScale") == ("False", "FailedGetScale")
    writes = [line for line in (tmp_path / "audit.log").read_text().splitlines()
              if '"horizontalpodautoscalers"' in line and '"subresource":"status"' in line]
    assert len(writes) == 1, writes


async def test_two_hpas_of_one_target_are_an_ambiguous_selector(env):
    """Found by fuzz54: two HPAs scaling the same Deployment both acted on it. Upstream's
    validateAndParseSelector (1.27+) refuses pods that more than one HPA's target selects: an
    AmbiguousSelector Warning and ScalingActive False naming both, and no rescale."""
    await env.set_metric(queue=100)
    first = hpa([external(value="5")])
    second = copy.deepcopy(first)
    second["metadata"]["name"] = "web-too"
    await env.hpas.create(first)
    await env.hpas.create(second)
    # each HPA's selector is known once it synced: the first to sync, alone so far, scales
    await env.ctrl.reconcile(await env.hpas.get("web-too", NS))
    scaled = await env.replicas()
    h = await env.sync()
    msg = "pods by selector app=web are controlled by multiple HPAs: [default/web default/web-too]"
    assert cond(h, "ScalingActive") == ("False", "AmbiguousSelector")
    assert next(c for c in h["status"]["conditions"] if c["type"] == "ScalingActive")["message"] == msg
    assert await env.replicas() == scaled
    events = await env.reported("AmbiguousSelector")
    assert msg in [e["message"] for e in events if e["reason"] == "AmbiguousSelector"]
    # the informer's delete handler forgets web-too's selector: web alone rescales again
    env.ctrl.informer_factory.start(env.ctrl.informers())
    try:
        await env.ctrl.inf.synced.wait()
        await env.hpas.delete("web-too", NS)

        async def rescaled():
            await env.sync()
            return await env.replicas() > scaled
        assert await eventually(rescaled)
    finally:
        await env.ctrl.informer_factory.stop()
