"""The node's side of in-place resize: when a resize is pending (the kubelet's canResizePod words) and
what a container's status reports of its resources (running only, as convertContainerStatusResources)."""

from types import SimpleNamespace

from nanokube.clock import Clock
from nanokube.node import inplace
from nanokube.node.lifecycle import PodWorker
from nanokube.scheduler.resources import from_list

NODE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


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
    assert (got.milli_cpu, got.memory) == (2500, 1 << 30)
    assert inplace.requests_with(pod, inplace.desired(pod)).milli_cpu == 1250


def test_a_container_reports_its_resources_while_it_runs():
    res = {"requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"}, "limits": {"memory": "128Mi",
                                                                                            "nvidia.com/gpu": "1"}}
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "1"},
           "spec": {"containers": [{"name": "app", "image": "nginx", "resources": res},
                                   {"name": "plain", "image": "nginx", "resources": {}}]}}
    w = PodWorker(SimpleNamespace(clock=Clock(), ips=None), pod)
    app, plain = pod["spec"]["containers"]
    waiting = w._status_of(app, {"waiting": {"reason": "ContainerCreating"}}, False, False)
    assert "resources" not in waiting and "allocatedResources" not in waiting
    running = w._status_of(app, {"running": {"startedAt": "2026-12-04T00:00:00Z"}}, True, True)
    assert running["allocatedResources"] == res["requests"]
    assert running["resources"] == {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    best_effort = w._status_of(plain, {"running": {"startedAt": "2026-12-04T00:00:00Z"}}, True, True)
    assert best_effort["resources"] == {} and "allocatedResources" not in best_effort
