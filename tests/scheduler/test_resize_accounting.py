"""What a pod being resized in place holds on its node, as the scheduler counts it (upstream's
PodRequests with UseStatusResources): the larger of its spec and what the node allocated while the
resize is pending or in progress, only the allocation once the node reports it Infeasible; and the
node's status write that actuates a shrink retries a pod waiting for that room."""

from tests.controllers import eventually
from tests.scheduler import node, pod
from tests.scheduler.test_queueing_hints import parked, still_waiting
from tests.scheduler.test_scheduler import add_node, bound, strip_uid


def running_status(cpu: str, conditions=()) -> dict:
    """What the node reports of the one container running with `cpu` requested and allocated."""
    return {"phase": "Running", "conditions": list(conditions),
            "containerStatuses": [{"name": "c", "image": "pause", "imageID": "", "ready": True, "restartCount": 0,
                                   "started": True, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                                   "allocatedResources": {"cpu": cpu},
                                   "resources": {"requests": {"cpu": cpu}}}]}


async def running_on(pods, name: str, cpu: str, node_name: str) -> None:
    await pods.create(strip_uid(pod(name, cpu, nodeName=node_name)))
    await write_status(pods, name, running_status(cpu))


async def write_status(pods, name: str, status: dict) -> None:
    p = await pods.get(name, "default")
    await pods.update({**p, "status": status}, subresource="status")


async def resize(pods, name: str, cpu: str) -> None:
    await pods.patch(name, {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="resize")


async def test_a_shrink_counts_the_old_size_until_the_node_actuates_it_then_retries_the_pod_waiting(stack):
    """A pod resized from 3 CPUs to 1 on a 4-CPU node still holds 3 while its node has not
    allocated the shrink: a pod asking 2 does not fit. The node's status write allocating 1 is a
    PodRequestScaledDown event of the assigned pod that NodeResourcesFit's hint retries it on."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await add_node(client, node("n", cpu="4"))
    await running_on(pods, "big", "3", "n")
    await resize(pods, "big", "1")
    assert (await pods.get("big", "default"))["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    await sched.start()
    await pods.create(strip_uid(pod("waiting", "2")))
    info = await parked(sched, pods, "waiting", {"NodeResourcesFit"})
    await write_status(pods, "big", {**running_status("3"), "conditions": [
        {"type": "PodResizeInProgress", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    still_waiting(sched, info)
    await write_status(pods, "big", running_status("1"))
    assert await eventually(bound(pods, "waiting")) == "n"


async def test_a_growth_holds_the_new_size_unless_the_node_reports_it_infeasible(stack):
    """A pod resized from 1 CPU to 3 holds 3 while the resize is pending (Deferred): a pod asking 2
    of the 4 CPUs waits. Reported Infeasible, the pod holds what it was allocated (1) and the other
    fits beside it."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await add_node(client, node("n", cpu="4"))
    await running_on(pods, "grower", "1", "n")
    await resize(pods, "grower", "3")
    pending = {"type": "PodResizePending", "status": "True", "reason": "Deferred",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await write_status(pods, "grower", running_status("1", [pending]))
    await sched.start()
    await pods.create(strip_uid(pod("other", "2")))
    await parked(sched, pods, "other", {"NodeResourcesFit"})
    await write_status(pods, "grower", running_status("1", [{**pending, "reason": "Infeasible"}]))
    assert await eventually(bound(pods, "other")) == "n"


async def test_a_resize_that_moves_cpu_between_containers_holds_the_larger_pod_total(stack):
    """A resize is allocated and actuated for the whole pod at once (kubernetes#140047): a pod whose
    container a shrinks from 2 CPUs to 1 while b grows from 1 to 2 holds 3 (spec, allocated and
    running totals are all 3), not the 4 of each container's larger size; a pod asking 1 CPU fits
    beside it on a 4-CPU node."""
    client, sched = stack
    pods = client.resource("", "v1", "pods")
    await add_node(client, node("n", cpu="4"))
    two = strip_uid(pod("two", nodeName="n"))
    two["spec"]["containers"] = [{"name": n, "image": "pause", "resources": {"requests": {"cpu": cpu}}}
                                 for n, cpu in (("a", "2"), ("b", "1"))]
    await pods.create(two)
    await pods.patch("two", {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}},
                                                     {"name": "b", "resources": {"requests": {"cpu": "2"}}}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="resize")
    statuses = [{**running_status(cpu)["containerStatuses"][0], "name": n} for n, cpu in (("a", "2"), ("b", "1"))]
    await write_status(pods, "two", {"phase": "Running", "containerStatuses": statuses, "conditions": [
        {"type": "PodResizeInProgress", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    await sched.start()
    await pods.create(strip_uid(pod("small", "1")))
    assert await eventually(bound(pods, "small")) == "n"
