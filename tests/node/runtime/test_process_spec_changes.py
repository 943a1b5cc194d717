"""What changes of a running pod's spec the process runtime acts on, as the kubelet does: a resize
through pods/resize is allocated and reported (containerStatuses' allocatedResources and
resources), restarting the container a RestartContainer policy names; an ephemeral container added
through pods/ephemeralcontainers (`kubectl debug`) runs as a process of the pod once."""

from nanokube.node.streaming import log_options
from tests.controllers import eventually
from tests.node.runtime.test_process import SERVE, status_of
from tests.node.runtime.test_process import env  # noqa: F401 (the fixture)

SMP = "application/strategic-merge-patch+json"
RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}


def sleeper(name: str, **container) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "busybox:1.36", "command": SERVE, "resources": RESOURCES,
                        **container}]}}


def running_main(st: dict) -> bool:
    return st.get("phase") == "Running" and any("running" in (c.get("state") or {}) for c in st.get("containerStatuses") or ())


async def test_a_resize_is_allocated_and_reported_and_a_restart_policy_restarts_the_process(env):  # noqa: F811 (the fixture)
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(sleeper("rs", resizePolicy=[{"resourceName": "memory", "restartPolicy": "RestartContainer"}]))
    p = await eventually(status_of(pods, "rs", running_main))
    [main] = p["status"]["containerStatuses"]
    assert main["allocatedResources"] == RESOURCES["requests"] and main["resources"] == RESOURCES
    await pods.patch("rs", {"spec": {"containers": [{"name": "main", "resources": {
        "requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}}}]}}, SMP, namespace="default", subresource="resize")

    def resized(cpu, limit):
        return lambda st: any((c.get("resources") or {}).get("limits", {}).get("cpu") == limit
                              and (c.get("allocatedResources") or {}).get("cpu") == cpu
                              for c in st.get("containerStatuses") or ()) and not any(
            c["type"].startswith("PodResize") for c in st.get("conditions") or ())

    p = await eventually(status_of(pods, "rs", resized("150m", "300m")))
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    await pods.patch("rs", {"spec": {"containers": [{"name": "main", "resources": {
        "requests": {"memory": "96Mi"}, "limits": {"memory": "96Mi"}}}]}}, SMP, namespace="default",
        subresource="resize")

    def restarted(st):
        [c] = st.get("containerStatuses") or [{}]
        return c.get("restartCount") == 1 and "running" in (c.get("state") or {}) and \
            (c.get("resources") or {}).get("limits", {}).get("memory") == "96Mi"

    await eventually(status_of(pods, "rs", restarted))

    async def recorded():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        reasons = [(e["reason"], e["message"]) for e in items if e["involvedObject"].get("name") == "rs"]
        return ("Killing", "Container main resize requires restart") in reasons and \
            [r for r, _ in reasons].count("ResizeCompleted") == 2
    assert await eventually(recorded)


async def test_an_ephemeral_container_runs_once_beside_the_pods_containers(env):  # noqa: F811 (the fixture)
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(sleeper("dbg"))
    await eventually(status_of(pods, "dbg", running_main))
    await pods.patch("dbg", {"spec": {"ephemeralContainers": [{
        "name": "debugger", "image": "busybox:1.36", "targetContainerName": "main",
        "command": ["sh", "-c", "echo hello from $HOSTNAME; cat /proc/1/cmdline"]}]}}, SMP, namespace="default",
        subresource="ephemeralcontainers")

    def finished(st):
        return any((c.get("state") or {}).get("terminated", {}).get("exitCode") == 0
                   for c in st.get("ephemeralContainerStatuses") or ())

    p = await eventually(status_of(pods, "dbg", finished))
    [debugger] = p["status"]["ephemeralContainerStatuses"]
    assert debugger["name"] == "debugger" and debugger["restartCount"] == 0 and "resources" not in debugger
    assert p["status"]["phase"] == "Running" and p["status"]["containerStatuses"][0]["restartCount"] == 0
    log = await rt.pods[("default", "dbg")].logs("debugger", log_options({}, 0))
    data = log if isinstance(log, bytes) else b"".join([chunk async for chunk in log])
    # in its target's PID namespace, whose PID 1 is main's first process
    assert data == b"hello from dbg\n" + "\x00".join([*SERVE, ""]).encode()
