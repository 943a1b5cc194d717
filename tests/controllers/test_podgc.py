"""The pod garbage collector: orphans of a deleted node after the quarantine, unscheduled
terminating pods, and terminated pods beyond the threshold (oldest, evicted first)."""

import pytest

from nanokube.controllers.podgc import PodGCController, options_from_env
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack
from tests.node import ManualClock


@pytest.fixture
async def env():
    s = await make_stack()
    clock = ManualClock()
    ctl = PodGCController(s.client, clock, terminated_threshold=2)
    await ctl.start()
    yield s.client, clock
    await ctl.stop()
    await s.close()


def _pod(name: str, node: str = "", **meta) -> dict:
    spec = {"containers": [{"name": "c", "image": "busybox"}], **({"nodeName": node} if node else {})}
    return {"metadata": {"name": name, "namespace": "default", **meta}, "spec": spec}


async def _gone(pods, name: str) -> bool:
    try:
        await pods.get(name, "default")
    except APIError as e:
        return e.code == 404
    return False


async def _passes(clock: ManualClock, seconds: int) -> None:
    for _ in range(seconds // 20):
        await clock.advance(20)


async def test_pods_of_a_deleted_node_fail_with_a_disruption_target_and_go_after_the_quarantine(env):
    client, clock = env
    nodes, pods = client.resource("", "v1", "nodes"), client.resource("", "v1", "pods")
    await nodes.create({"metadata": {"name": "n1"}})
    await pods.create(_pod("held", "n1", finalizers=["example.com/hold"]))
    await pods.create(_pod("plain", "n1"))
    await pods.patch("held", {"status": {"phase": "Running"}}, namespace="default", subresource="status")
    await nodes.delete("n1")
    await _passes(clock, 20)
    assert (await pods.get("plain", "default"))["metadata"].get("deletionTimestamp") is None  # quarantined
    await _passes(clock, 40)
    assert await eventually(lambda: _gone(pods, "plain"))

    async def failed():
        pod = await pods.get("held", "default")
        return pod if pod["metadata"].get("deletionTimestamp") else None

    pod = await eventually(failed)
    assert pod["status"]["phase"] == "Failed"
    target = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == (
        "True", "DeletionByPodGC", "PodGC: node no longer exists")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 0
    assert any(m["manager"] == "PodGC" and m["operation"] == "Apply" and m.get("subresource") == "status"
               for m in pod["metadata"]["managedFields"])


async def test_a_node_back_before_the_quarantine_ends_keeps_its_pods(env):
    client, clock = env
    nodes, pods = client.resource("", "v1", "nodes"), client.resource("", "v1", "pods")
    await nodes.create({"metadata": {"name": "n2"}})
    await pods.create(_pod("stays", "n2"))
    await nodes.delete("n2")
    await _passes(clock, 20)
    await nodes.create({"metadata": {"name": "n2"}})
    await _passes(clock, 80)
    assert (await pods.get("stays", "default"))["metadata"].get("deletionTimestamp") is None


async def test_terminated_pods_beyond_the_threshold_go_evicted_first_then_oldest(env):
    """Created within one second, the pods' ages tie: their names order them."""
    client, clock = env
    pods = client.resource("", "v1", "pods")
    for name, reason in (("a", ""), ("z-evicted", "Evicted"), ("b", ""), ("c", "")):
        await pods.create(_pod(name, "n3"))
        status = {"phase": "Failed", **({"reason": reason} if reason else {})}
        await pods.patch(name, {"status": status}, namespace="default", subresource="status")
    await client.resource("", "v1", "nodes").create({"metadata": {"name": "n3"}})
    await _passes(clock, 20)
    assert await eventually(lambda: _gone(pods, "z-evicted"))
    assert await eventually(lambda: _gone(pods, "a"))
    for name in ("b", "c"):
        await pods.get(name, "default")


def test_a_shortened_quarantine_comes_from_the_environment_with_the_period_at_half():
    assert options_from_env({}) == {}
    assert options_from_env({"NANOKUBE_POD_GC_QUARANTINE": "2"}) == {"quarantine": 2.0, "period": 1.0}
    assert options_from_env({"NANOKUBE_POD_GC_QUARANTINE": "600"}) == {"quarantine": 600.0, "period": 20.0}
