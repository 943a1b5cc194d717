"""The built-in metrics provider: pod usage from annotations, external
metrics from the `nanokube-external-metrics` ConfigMap, garbage refused."""

import pytest

from nanokube.metrics.provider import CPU_ANNOTATION, MetricsProvider, MetricsUnavailable
from nanokube.metrics.usage import Usage
from tests.controllers import make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    yield s.client, MetricsProvider(s.client)
    await s.close()


async def running_pod(client, name, annotations, labels=None):
    pods = client.resource("", "v1", "pods")
    p = await pods.create({"metadata": {"name": name, "namespace": "default", "annotations": annotations,
                                        "labels": labels or {"app": "x"}},
                           "spec": {"containers": [{"name": "c", "image": "pause"}, {"name": "d", "image": "pause"}]}})
    await pods.update({**p, "status": {"phase": "Running"}}, subresource="status")


async def configmap(client, data):
    await client.resource("", "v1", "configmaps").create(
        {"metadata": {"name": "nanokube-external-metrics", "namespace": "default"}, "data": data})


async def test_pod_metrics_follow_the_usage_model(env):
    """Every running pod has metrics: half its requests, or its annotations' total split over its containers."""
    client, prov = env
    await running_pod(client, "a", {CPU_ANNOTATION: "250m"})
    await running_pod(client, "b", {})
    pms = {pm["metadata"]["name"]: pm for pm in await prov.pod_metrics("default", "app=x")}
    assert pms["a"]["kind"] == "PodMetrics" and pms["a"]["window"] == "15s"
    assert [c["usage"]["cpu"] for c in pms["a"]["containers"]] == ["125m", "125m"]
    assert pms["b"]["containers"][0]["usage"] == {"cpu": "1m", "memory": "4Mi"}
    assert {k: s.value for k, s in (await prov.resource_metric("default", "app=x", "cpu")).items()} == \
        {"a": 250, "b": 2}
    assert (await prov.pod_metrics("default", "", "a"))[0]["metadata"]["name"] == "a"


async def test_node_metrics_add_the_systems_share(env):
    client, prov = env
    await client.resource("", "v1", "nodes").create({"metadata": {"name": "n1", "labels": {"pool": "gpu"}}})
    pods = client.resource("", "v1", "pods")
    p = await pods.create({"metadata": {"name": "big", "namespace": "default"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"cpu": "2", "memory": "2Gi"}}}]}})
    await pods.update({**p, "status": {"phase": "Running"}}, subresource="status")
    (nm,) = await prov.node_metrics("pool=gpu")
    assert nm["kind"] == "NodeMetrics" and nm["metadata"]["labels"] == {"pool": "gpu"}
    assert nm["usage"] == {"cpu": "1100m", "memory": "1536Mi"}
    assert await prov.node_metrics("pool=cpu") == []


async def test_a_memory_pressure_fault_shows_as_the_leak_the_kubelet_evicts_for(env):
    """While the node's fault annotation holds memory-pressure, top shows all but half the kubelet's
    100Mi memory.available threshold used; a healed, later or malformed fault shows none."""
    client, prov = env
    nodes = client.resource("", "v1", "nodes")
    for name, fault in (("leaky", "memory-pressure"), ("healed", "memory-pressure;until=2000-01-01T00:00:00Z"),
                        ("garbled", "memory-pressure;until=soon"), ("disk", "disk-pressure")):
        n = await nodes.create({"metadata": {"name": name, "annotations": {"sim.nanokube.io/fault": fault}}})
        await nodes.update({**n, "status": {"capacity": {"memory": "8Gi"}}}, subresource="status")
    usage = {nm["metadata"]["name"]: nm["usage"]["memory"] for nm in await prov.node_metrics()}
    assert usage == {"leaky": "8142Mi", "healed": "512Mi", "garbled": "512Mi", "disk": "512Mi"}


async def test_measured_usage_comes_from_the_providers_own_sources_else_the_process_wide_ones(env):
    client, prov = env
    await running_pod(client, "a", {})
    measured = MetricsProvider(client, usage_sources=(lambda pod: {"c": Usage(7, 7 << 20)},))
    [pm] = await measured.pod_metrics("default")
    assert pm["containers"] == [{"name": "c", "usage": {"cpu": "7m", "memory": "7Mi"}}]
    assert MetricsProvider.usage_sources == ()  # nothing left registered by another cluster of this process
    [pm] = await prov.pod_metrics("default")
    assert [c["usage"] for c in pm["containers"]] == [{"cpu": "1m", "memory": "4Mi"}] * 2


CRASHING = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}}


async def test_only_running_containers_use_anything(env):
    """As the kubelet has stats only for running containers: a crash-looping one counts for
    nothing, a running sidecar counts, and a pod with none running has no metrics at all."""
    client, prov = env
    await client.resource("", "v1", "nodes").create({"metadata": {"name": "n1"}})
    pods = client.resource("", "v1", "pods")
    req = {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    for name, states in (("mixed", {"app": {"running": {}}, "crasher": CRASHING}),
                         ("down", {"app": CRASHING, "crasher": {"terminated": {"exitCode": 1}}})):
        p = await pods.create({"metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}}, "spec": {
            "nodeName": "n1",
            "initContainers": [{"name": "proxy", "image": "x", "restartPolicy": "Always", **req},
                               {"name": "setup", "image": "x", **req}],
            "containers": [{"name": "app", "image": "x", **req}, {"name": "crasher", "image": "x", **req}]}})
        await pods.update({**p, "status": {
            "phase": "Running",
            "initContainerStatuses": [
                {"name": "proxy", "state": {"running": {}} if name == "mixed" else CRASHING},
                {"name": "setup", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
            "containerStatuses": [{"name": c, "state": st} for c, st in states.items()]}}, subresource="status")
    (pm,) = await prov.pod_metrics("default", "app=x")
    assert pm["metadata"]["name"] == "mixed"
    assert [(c["name"], c["usage"]) for c in pm["containers"]] == [
        ("proxy", {"cpu": "500m", "memory": "512Mi"}), ("app", {"cpu": "500m", "memory": "512Mi"})]
    assert await prov.pod_metrics("default", "", "down") == []
    (nm,) = await prov.node_metrics()
    assert nm["usage"] == {"cpu": "1100m", "memory": "1536Mi"}  # mixed's two running containers and the system


async def test_initializing_and_terminating_pods_have_metrics_for_what_runs(env):
    """The kubelet reports whatever runs, whatever the pod's phase: a Pending pod's running
    init container, and a pod's containers during its graceful deletion."""
    client, prov = env
    pods = client.resource("", "v1", "pods")
    req = {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    p = await pods.create({"metadata": {"name": "starting", "namespace": "default"}, "spec": {
        "initContainers": [{"name": "fetch", "image": "x", **req}], "containers": [{"name": "app", "image": "x", **req}]}})
    await pods.update({**p, "status": {
        "phase": "Pending", "initContainerStatuses": [{"name": "fetch", "state": {"running": {}}}],
        "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}}]}}, subresource="status")
    p = await pods.create({"metadata": {"name": "leaving", "namespace": "default", "finalizers": ["test/hold"]},
                           "spec": {"containers": [{"name": "app", "image": "x", **req}]}})
    await pods.update({**p, "status": {"phase": "Running", "containerStatuses": [
        {"name": "app", "state": {"running": {}}}]}}, subresource="status")
    await pods.delete("leaving", "default")
    got = {pm["metadata"]["name"]: [c["name"] for c in pm["containers"]] for pm in await prov.pod_metrics("default")}
    assert got == {"starting": ["fetch"], "leaving": ["app"]}


async def test_external_metric_plain_and_series(env):
    client, prov = env
    await configmap(client, {"queue": "12", "lag": '[{"labels": {"topic": "a"}, "value": "3"}, {"labels": {"topic": "b"}, "value": "500m"}]'})
    lst = await prov.external_metric_list("default", "queue")
    assert lst["kind"] == "ExternalMetricValueList"
    assert [(i["metricName"], i["value"], i["metricLabels"]) for i in lst["items"]] == [("queue", "12", {})]
    assert [s.value for s in await prov.external_metric("default", "lag")] == [3000, 500]
    assert [s.value for s in await prov.external_metric("default", "lag", "topic=b")] == [500]


@pytest.mark.parametrize("data,metric", [({}, "queue"), ({"queue": "lots"}, "queue"), ({"lag": "[{"}, "lag"),
                                         ({"lag": '[{"labels": {}}]'}, "lag")])
async def test_missing_or_garbage_external_metric_is_unavailable(env, data, metric):
    client, prov = env
    await configmap(client, data)
    with pytest.raises(MetricsUnavailable):
        await prov.external_metric("default", metric)


async def test_no_configmap_is_unavailable(env):
    _, prov = env
    with pytest.raises(MetricsUnavailable):
        await prov.external_metric("default", "queue")


async def test_a_container_missing_from_a_pods_metrics_fails_the_container_metric(env):
    """getContainerMetrics: a ContainerResource metric naming a container some pod lacks is an error
    naming that pod, not that pod left out of the average."""
    client, prov = env
    await running_pod(client, "a", {})
    assert set(await prov.resource_metric("default", "app=x", "cpu", "c")) == {"a"}
    with pytest.raises(MetricsUnavailable) as e:
        await prov.resource_metric("default", "app=x", "cpu", "sidecar")
    assert str(e.value) == "failed to get container metrics: container sidecar not present in metrics for pod default/a"
