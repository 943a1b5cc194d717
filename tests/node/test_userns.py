"""A pod with `hostUsers: false` on a node whose runtime handlers have no user namespaces (the Node's
runtimeHandlers say userNamespaces false): as upstream's kubelet (the userns manager refusing the sandbox's
config), its sandbox is never made: it stays Pending in ContainerCreating, each try a FailedCreatePodSandBox
event, and it is deleted as a pod that never started is. A pod with `hostUsers: true` runs."""

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from tests.controllers import eventually, make_stack
from tests.node import ManualClock
from tests.node.test_lifecycle import gone, phase_is

MESSAGE = "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    mgr = NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=str(tmp_path))
    await mgr.start()
    yield s.client, clock
    await mgr.stop()
    await s.close()


def pod(name: str, host_users: bool) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "hostUsers": host_users, "containers": [{"name": "app", "image": "busybox"}]}}


async def test_a_pod_without_host_users_never_gets_a_sandbox_where_the_runtime_has_no_user_namespaces(env):
    client, clock = env
    node = await client.resource("", "v1", "nodes").get("gpu-0")
    assert {h["features"]["userNamespaces"] for h in node["status"]["runtimeHandlers"]} == {False}
    pods, events = client.resource("", "v1", "pods"), client.resource("", "v1", "events")
    await pods.create(pod("own-users", False))
    await pods.create(pod("node-users", True))
    await eventually(phase_is(pods, "node-users", "Running"))

    async def refused():
        items, _ = await events.list(namespace="default")
        return [e for e in items if e["reason"] == "FailedCreatePodSandBox" and e["involvedObject"]["name"] == "own-users"]
    (ev,) = await eventually(refused)
    assert (ev["type"], ev["message"]) == ("Warning", MESSAGE)
    await clock.advance(2)

    async def counted():
        (ev,) = await refused()
        return ev.get("count", 1) > 1 or (ev.get("series") or {}).get("count", 0) > 1
    await eventually(counted)  # tried again, and refused again
    st = (await pods.get("own-users", "default"))["status"]
    assert st["phase"] == "Pending" and not st.get("podIP")
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    await pods.delete("own-users", "default", grace_period_seconds=0)
    await eventually(gone(pods, "own-users"))
