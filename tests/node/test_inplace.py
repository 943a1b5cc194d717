"""The node's side of in-place resize: when a resize is pending (the kubelet's canResizePod words),
what a container's status reports of its resources (running only, as convertContainerStatusResources),
and, through the API, the resize's events, its conditions' generation and a restart it needs."""

from types import SimpleNamespace

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.clock import Clock
from nanokube.machinery.podresources import QUANTITIES, amounts
from nanokube.node import inplace
from nanokube.node.cluster import default_cluster
from nanokube.node.lifecycle import STOP_EXIT_CODE, PodWorker, SimulatedRuntime
from nanokube.node.manager import NodeManager
from tests.controllers import eventually, make_stack
from tests.node import ManualClock

NODE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def from_list(rl: dict) -> dict:
    return amounts(rl, QUANTITIES)


def test_a_resize_beyond_the_node_is_infeasible_and_beyond_its_room_deferred():
    assert inplace.refusal(from_list({"cpu": "5", "memory": "1Gi"}), NODE, []) == (
        "Infeasible", "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000")
    assert inplace.refusal(from_list({"cpu": "5", "memory": "9Gi"}), NODE, []) == (
        "Infeasible", "Node didn't have enough capacity: memory, requested: 9663676416, capacity: 8589934592")
    others = [from_list({"cpu": "1500m"}), from_list({"cpu": "1", "memory": "1Gi"})]
    assert inplace.refusal(from_list({"cpu": "2"}), NODE, others) == (
        "Deferred", "Node didn't have enough resource: cpu, requested: 2000, used: 2500, capacity: 4000")
    assert inplace.refusal(from_list({"cpu": "1500m", "memory": "7680Mi"}), NODE, others) == (
        "Deferred", "Node didn't have enough resource: memory, requested: 8053063680, used: 1073741824, "
                    "capacity: 8589934592")
    assert inplace.refusal(from_list({"cpu": "1500m"}), NODE, others) is None


def test_the_pods_requests_take_each_containers_allocation():
    pod = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}],
                    "initContainers": [{"name": "side", "restartPolicy": "Always",
                                        "resources": {"requests": {"cpu": "250m"}}}]}}
    allocation = {"a": {"requests": {"cpu": "2", "memory": "1Gi"}}, "side": {"requests": {"cpu": "500m"}}}
    got = inplace.requests_with(pod, allocation)
    assert (got["cpu"].milli(), got["memory"].ceil()) == (2500, 1 << 30)
    assert inplace.requests_with(pod, inplace.desired(pod))["cpu"].milli() == 1250


def test_a_container_reports_its_resources_while_it_runs():
    res = {"requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"}, "limits": {"memory": "128Mi",
                                                                                            "nvidia.com/gpu": "1"}}
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "1"},
           "spec": {"containers": [{"name": "app", "image": "nginx", "resources": res},
                                   {"name": "plain", "image": "nginx", "resources": {}}]}}
    w = PodWorker(SimpleNamespace(clock=Clock(), ips=None, runtime=SimulatedRuntime()), pod)
    app, plain = pod["spec"]["containers"]
    waiting = w._status_of(app, {"waiting": {"reason": "ContainerCreating"}}, False, False)
    assert "resources" not in waiting and "allocatedResources" not in waiting
    running = w._status_of(app, {"running": {"startedAt": "2026-12-04T00:00:00Z"}}, True, True)
    assert running["allocatedResources"] == res["requests"]
    assert running["resources"] == {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    best_effort = w._status_of(plain, {"running": {"startedAt": "2026-12-04T00:00:00Z"}}, True, True)
    assert best_effort["resources"] == {} and "allocatedResources" not in best_effort


@pytest.fixture
async def env():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    yield s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
    await mgr.stop()
    await s.close()


SMP = "application/strategic-merge-patch+json"
APP = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


async def _running(pods, containers: list[dict], annotations: dict | None = None) -> dict:
    await pods.create({"metadata": {"name": "web", "namespace": "default", "annotations": annotations or {}},
                       "spec": {"nodeName": "gpu-0", "containers": containers}})

    async def running():
        p = await pods.get("web", "default")
        return p if (p.get("status") or {}).get("phase") == "Running" else None
    return await eventually(running)


async def _resize(pods, resources: dict, name: str = "app") -> None:
    await pods.patch("web", {"spec": {"containers": [{"name": name, "resources": resources}]}}, SMP,
                     namespace="default", subresource="resize")


def _events(events, reasons):
    """The pod's events of these reasons, once there are as many as reasons, in reason order."""
    async def found():
        items, _ = await events.list(namespace="default", field_selector="involvedObject.name=web")
        got = {e["reason"]: e for e in items if e["reason"] in reasons}
        return [got[r] for r in reasons] if len(got) == len(reasons) else None
    return found


async def test_a_resize_is_recorded_started_and_completed_with_the_spec_and_its_generation(env):
    pods, events = env
    await _running(pods, [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"], "resources": APP}])
    await _resize(pods, {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}})
    started, completed = await eventually(_events(events, ["ResizeStarted", "ResizeCompleted"]))
    spec = '{"containers":[{"name":"app","resources":{"limits":{"cpu":"1500m","memory":"1Gi"},' \
           '"requests":{"cpu":"1500m","memory":"1Gi"}}}],"generation":2}'
    assert started["message"] == f"Pod resize started: {spec}"
    assert completed["message"] == f"Pod resize completed: {spec}"
    assert (started["type"], started["source"], started["involvedObject"]["kind"]) == (
        "Normal", {"component": "kubelet", "host": "gpu-0"}, "Pod")
    p = await pods.get("web", "default")
    assert p["metadata"]["generation"] == 2 and p["status"]["observedGeneration"] == 2
    assert {c["type"]: c.get("observedGeneration") for c in p["status"]["conditions"]} == {
        t: 2 for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")}


async def test_an_infeasible_resize_is_a_warning_and_its_pending_condition_observes_the_generation(env):
    pods, events = env
    await _running(pods, [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"], "resources": APP}])
    await _resize(pods, {"requests": {"cpu": "100"}, "limits": {"cpu": "100"}})
    [pending] = await eventually(_events(events, ["ResizeInfeasible"]))
    assert pending["type"] == "Warning"
    assert pending["message"] == (
        'Pod resize Infeasible: {"containers":[{"name":"app","resources":{"limits":{"cpu":"100","memory":"1Gi"},'
        '"requests":{"cpu":"100","memory":"1Gi"}}}],"generation":2,'
        '"error":"Node didn\'t have enough capacity: cpu, requested: 100000, capacity: 64000"}')
    p = await pods.get("web", "default")
    cond = next(c for c in p["status"]["conditions"] if c["type"] == "PodResizePending")
    assert (cond["reason"], cond["observedGeneration"]) == ("Infeasible", 2)


async def test_a_resize_under_a_restart_container_policy_restarts_that_container_alone(env):
    """computeContainerResizeActions: a memory limit change under memory's RestartContainer policy
    kills and starts the container (Killing 'Container app resize requires restart'); the other
    container's cpu change under the default policy does not restart it."""
    pods, events = env
    before = await _running(pods, [
        {"name": "app", "image": "busybox", "command": ["httpd", "-f"], "resources": APP,
         "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]},
        {"name": "side", "image": "busybox", "command": ["sleep", "infinity"], "resources": APP}])
    await pods.patch("web", {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}}},
        {"name": "side", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]}}, SMP,
        namespace="default", subresource="resize")
    [killing, _] = await eventually(_events(events, ["Killing", "ResizeCompleted"]))
    assert killing["message"] == "Container app resize requires restart"
    assert killing["involvedObject"]["fieldPath"] == "spec.containers{app}"
    items, _ = await events.list(namespace="default", field_selector="involvedObject.name=web")
    started = {(e["involvedObject"].get("fieldPath"), e["reason"]): e["count"] for e in items}
    assert started[("spec.containers{app}", "Started")] == 2 and started[("spec.containers{side}", "Started")] == 1
    assert started[("spec.containers{app}", "Pulling")] == 2  # busybox, :latest: pulled again (Always)
    p = await pods.get("web", "default")
    app, side = p["status"]["containerStatuses"]
    assert (app["restartCount"], side["restartCount"]) == (1, 0)
    assert app["lastState"]["terminated"]["exitCode"] == 143 and side["lastState"] == {}  # ended by SIGTERM
    assert app["containerID"] != before["status"]["containerStatuses"][0]["containerID"]
    assert side["containerID"] == before["status"]["containerStatuses"][1]["containerID"]
    assert app["resources"]["limits"]["memory"] == "2Gi" and side["resources"]["limits"]["cpu"] == "2"


def test_only_a_changed_resource_under_a_restart_policy_restarts():
    pod = {"spec": {"containers": [
        {"name": "a", "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]},
        {"name": "b", "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}]}}
    was = {"a": {"requests": {"cpu": "1", "memory": "1Gi"}}, "b": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    assert inplace.restarts(pod, was, {"a": {"requests": {"cpu": "1000m", "memory": "2Gi"}},
                                       "b": {"requests": {"cpu": "1", "memory": "2Gi"}}}) == []
    assert inplace.restarts(pod, was, {"a": {"requests": {"cpu": "2", "memory": "1Gi"}},
                                       "b": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}
                            ) == ["a", "b"]


async def test_a_container_waiting_to_restart_is_not_restarted_again_for_a_resize():
    """Only a running container is killed for a resize under RestartContainer: one waiting out its
    crash-loop back-off (its pod's other container running on) starts with the new allocation when
    its back-off ends, its restartCount counting that one restart."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
    try:
        await _running(pods, [
            {"name": "app", "image": "busybox", "resources": APP, "command": ["sh", "-c", "sleep 5; exit 1"],
             "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]},
            {"name": "side", "image": "busybox", "command": ["sleep", "infinity"], "resources": APP}])
        await clock.advance(5)

        async def app(state, restarts=None):
            p = await pods.get("web", "default")
            c = p["status"]["containerStatuses"][0]
            return c if state in c["state"] and restarts in (None, c["restartCount"]) else None
        await eventually(lambda: app("running", 1))  # the first exit restarts at once
        await clock.advance(5)
        assert (await eventually(lambda: app("waiting")))["restartCount"] == 1  # one more as it starts again
        await _resize(pods, {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}})
        await eventually(_events(events, ["ResizeCompleted"]))
        items, _ = await events.list(namespace="default", field_selector="involvedObject.name=web")
        assert not [e for e in items if e["reason"] == "Killing"]
        assert (await app("waiting"))["restartCount"] == 1
        await clock.advance(10)
        c = await eventually(lambda: app("running"))
        assert c["restartCount"] == 2 and c["resources"]["limits"]["memory"] == "2Gi"
    finally:
        await mgr.stop()
        await s.close()


async def test_a_container_restarted_for_a_resize_runs_its_command_from_the_start():
    """The instance a resize starts runs its (interpreted) command anew: `sleep 10; exit 3`
    restarted 5 s in exits 10 s after that restart, not after the first start."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
    try:
        await _running(pods, [{"name": "app", "image": "busybox", "resources": APP,
                               "command": ["sh", "-c", "sleep 10; exit 3"],
                               "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}],
                       {STOP_EXIT_CODE: "143"})  # (its shell, PID 1, would outlive the restart's SIGTERM)
        await clock.advance(5)
        await _resize(pods, {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}})
        await eventually(_events(events, ["Killing", "ResizeCompleted"]))
        await clock.advance(5)  # 10 s after the first start, 5 s after the second

        async def app(state):
            c = (await pods.get("web", "default"))["status"]["containerStatuses"][0]
            return c if state in c["state"] else None
        assert (await app("running"))["restartCount"] == 1
        await clock.advance(5)
        c = await eventually(lambda: app("waiting"))
        assert c["restartCount"] == 1 and c["lastState"]["terminated"]["exitCode"] == 3  # (the ended instance's)
    finally:
        await mgr.stop()
        await s.close()


async def test_a_pod_level_resize_is_allocated_actuated_and_reported_at_pod_level(env):
    """InPlacePodLevelResourcesVerticalScaling (beta since 1.36): a resize of spec.resources goes
    through the allocation as a container's does (ResizeStarted, ResizeCompleted) and the pod's
    status reports it: status.allocatedResources and status.resources."""
    pods, events = env
    await pods.create({"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "resources": APP,
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}]}})

    async def running():
        p = await pods.get("web", "default")
        return p if (p.get("status") or {}).get("phase") == "Running" else None
    p = await eventually(running)
    assert p["status"]["allocatedResources"] == APP["requests"] and p["status"]["resources"] == APP
    await pods.patch("web", {"spec": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}}, SMP,
                     namespace="default", subresource="resize")
    await eventually(_events(events, ["ResizeStarted", "ResizeCompleted"]))
    want = {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}

    async def reported():
        st = (await pods.get("web", "default"))["status"]
        return st if st.get("resources") == want else None
    st = await eventually(reported)
    assert st["allocatedResources"] == want["requests"] and st["observedGeneration"] == 2
    assert not [c for c in st["conditions"] if c["type"] in (inplace.PENDING, inplace.IN_PROGRESS)]
    await pods.patch("web", {"spec": {"resources": {"requests": {"cpu": "100"}, "limits": {"cpu": "100"}}}}, SMP,
                     namespace="default", subresource="resize")
    [infeasible] = await eventually(_events(events, ["ResizeInfeasible"]))
    assert infeasible["message"].endswith('"error":"Node didn\'t have enough capacity: cpu, requested: 100000, '
                                          'capacity: 64000"}')
