"""A pod with `hostUsers: false` on a node whose runtime handlers have no user namespaces (the Node's
runtimeHandlers say userNamespaces false): as upstream's kubelet (the userns manager refusing the sandbox's
config), its sandbox is never made: it stays Pending in ContainerCreating, each try a FailedCreatePodSandBox
event, and it is deleted as a pod that never started is. A pod with `hostUsers: true` runs."""

from tests.controllers import eventually
from tests.node.test_lifecycle import gone, phase_is
from tests.node.volumes.test_manager import env  # noqa: F401 (the fixture)

MESSAGE = "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"


def pod(name: str, host_users: bool) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "hostUsers": host_users, "containers": [{"name": "app", "image": "busybox"}]}}


async def test_a_pod_without_host_users_gets_no_sandbox(env):  # noqa: F811 (the fixture)
    client, clock, _ = env
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
