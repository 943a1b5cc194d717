"""Probes in the simulated runtime: with no process to probe, every probe passes, on the
kubelet prober's schedule on the injected clock (nanokube/node/prober.py): a container is
Started once its startupProbe passed and Ready once its readinessProbe did, not at once."""

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.clock import parse_time
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.node.prober import first_pass
from tests.controllers import eventually, make_stack
from tests.node import ManualClock


@pytest.fixture
async def env():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    yield s.client.resource("", "v1", "pods"), clock
    await mgr.stop()
    await s.close()


def probed_pod(name: str, **probes) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "gpu-0", "containers": [{"name": "app", "image": "nginx:1.27", **probes}]}}


def status(pods, name, want):
    async def check():
        p = await pods.get(name, "default")
        [c] = (p.get("status") or {}).get("containerStatuses") or [{}]
        return p if "running" in (c.get("state") or {}) and want(c) else None
    return check


def killing(pods, name):
    """The kubelet's Killing event for pod `name` was recorded."""
    async def check():
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return any(e["reason"] == "Killing" and e["involvedObject"]["name"] == name for e in items)
    return check


def ready_since(p: dict) -> float:
    """Seconds from the container's start to the pod's Ready transition."""
    [c] = p["status"]["containerStatuses"]
    ready = next(x for x in p["status"]["conditions"] if x["type"] == "Ready")
    assert ready["status"] == "True"
    return parse_time(ready["lastTransitionTime"]) - parse_time(c["state"]["running"]["startedAt"])


def test_a_probe_passes_at_the_first_period_tick_past_its_delay():
    assert first_pass(None) == 0 and first_pass(None, 6) == 6
    assert first_pass({"initialDelaySeconds": 15, "periodSeconds": 10}) == 20
    assert first_pass({"initialDelaySeconds": 10, "periodSeconds": 10}) == 10
    assert first_pass({}) == 0  # no delay: the prober's first, triggered, probe
    assert first_pass({"periodSeconds": 4, "successThreshold": 3}, 6) == 16


async def test_readiness_waits_for_the_probe_delay_on_the_clock(env):
    pods, clock = env
    http = {"httpGet": {"path": "/healthz", "port": 80}}
    await pods.create(probed_pod("web", readinessProbe={**http, "initialDelaySeconds": 15, "periodSeconds": 10},
                                 livenessProbe={**http, "periodSeconds": 5}))
    p = await eventually(status(pods, "web", lambda c: c["started"] and not c["ready"]))
    ready = next(x for x in p["status"]["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")
    assert ready["message"] == "containers with unready status: [app]"
    await clock.advance(19)
    assert not (await pods.get("web", "default"))["status"]["containerStatuses"][0]["ready"]
    await clock.advance(11)
    p = await eventually(status(pods, "web", lambda c: c["ready"]))
    assert ready_since(p) == 20


async def test_started_waits_for_the_startup_probe_and_readiness_for_started(env):
    pods, clock = env
    await pods.create(probed_pod(
        "slow", startupProbe={"exec": {"command": ["true"]}, "initialDelaySeconds": 5, "periodSeconds": 3,
                              "failureThreshold": 30},
        readinessProbe={"tcpSocket": {"port": 80}, "periodSeconds": 4}))
    await eventually(status(pods, "slow", lambda c: not c["started"] and not c["ready"]))
    await clock.advance(7)
    await eventually(status(pods, "slow", lambda c: c["started"] and not c["ready"]))
    await clock.advance(3)
    p = await eventually(status(pods, "slow", lambda c: c["ready"]))
    assert ready_since(p) == 8  # started at 6, then the readiness tick at 8


async def test_a_sidecars_startup_probe_holds_the_app_containers_and_its_readiness_the_pods(env):
    """A restartable init container's probes run too: the app container starts only once the
    sidecar is Started (past its startupProbe), and the pod is Ready only once the sidecar is too
    (GenerateContainersReadyCondition counts sidecars)."""
    pods, clock = env
    sidecar = {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "restartPolicy": "Always",
               "startupProbe": {"tcpSocket": {"port": 9901}, "initialDelaySeconds": 5, "periodSeconds": 5},
               "readinessProbe": {"httpGet": {"path": "/ready", "port": 9901}, "periodSeconds": 4}}
    spec = probed_pod("meshed")
    spec["spec"]["initContainers"] = [sidecar]
    await pods.create(spec)

    def sidecar_is(want):
        async def check():
            p = await pods.get("meshed", "default")
            [s] = (p.get("status") or {}).get("initContainerStatuses") or [{}]
            return p if "running" in (s.get("state") or {}) and want(s) else None
        return check
    p = await eventually(sidecar_is(lambda s: not s["started"] and not s["ready"]))
    assert p["status"]["phase"] == "Pending"
    assert p["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    initialized = next(x for x in p["status"]["conditions"] if x["type"] == "Initialized")
    assert (initialized["status"], initialized["message"]) == ("False", "containers with incomplete status: [proxy]")
    await clock.advance(5)
    p = await eventually(sidecar_is(lambda s: s["started"] and not s["ready"]))
    await eventually(status(pods, "meshed", lambda c: c["ready"]))
    ready = next(x for x in (await pods.get("meshed", "default"))["status"]["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["message"]) == ("False", "containers with unready status: [proxy]")
    await clock.advance(3)
    p = await eventually(sidecar_is(lambda s: s["ready"]))
    ready = next(x for x in p["status"]["conditions"] if x["type"] == "Ready")
    assert ready["status"] == "True"


async def test_the_docs_liveness_command_example_kills_and_restarts_the_container(env):
    """"Define a liveness command": the container removes /tmp/healthy after 30 s; `cat
    /tmp/healthy` then fails at the ticks of 30, 35 and 40 s, and the kubelet kills it to restart
    it, with Unhealthy (x3) and Killing events: SIGTERM at 40 s, which its `sh` (PID 1, no TERM
    trap) ignores, then SIGKILL when the pod's grace period (30 s) is up: 137 at 70 s."""
    pods, clock = env
    await pods.create(probed_pod(
        "liveness-exec", args=["/bin/sh", "-c", "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 600"],
        livenessProbe={"exec": {"command": ["cat", "/tmp/healthy"]}, "initialDelaySeconds": 5, "periodSeconds": 5}))
    await eventually(status(pods, "liveness-exec", lambda c: c["ready"]))
    await clock.advance(39)
    [c] = (await pods.get("liveness-exec", "default"))["status"]["containerStatuses"]
    assert c["restartCount"] == 0 and "running" in c["state"]
    await clock.advance(1)
    await eventually(killing(pods, "liveness-exec"))
    await clock.advance(29.5)
    [c] = (await pods.get("liveness-exec", "default"))["status"]["containerStatuses"]
    assert c["restartCount"] == 0 and "running" in c["state"]  # it outlived the SIGTERM
    await clock.advance(0.5)

    async def killed():
        [c] = (await pods.get("liveness-exec", "default"))["status"]["containerStatuses"]
        return c if c["restartCount"] == 1 else None
    c = await eventually(killed)
    t = c["lastState"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (137, "Error")
    assert parse_time(t["finishedAt"]) - parse_time(t["startedAt"]) == 70

    async def reported():  # the recorder writes them from its queue, maybe after the restart's status
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        seen = {e["reason"]: e for e in items if e["involvedObject"]["name"] == "liveness-exec"}
        return seen if "Killing" in seen and seen.get("Unhealthy", {}).get("count") == 3 else None
    seen = await eventually(reported)
    assert seen["Unhealthy"]["message"] == \
        "Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory\n"
    assert seen["Unhealthy"]["count"] == 3 and seen["Unhealthy"]["type"] == "Warning"
    assert seen["Killing"]["message"] == "Container app failed liveness probe, will be restarted"


async def test_a_liveness_kill_gives_the_probes_grace_period_and_a_term_trap_its_say(env):
    """killContainer after a failed liveness probe sends SIGTERM with the probe's own
    terminationGracePeriodSeconds where set (KEP-2238), else the pod's: a first process with no
    TERM trap runs on until then (137); one that traps TERM ends as its trap does, at once."""
    pods, clock = env
    loop = "touch /tmp/healthy; sleep 12; rm -f /tmp/healthy; while true; do sleep 1; done"
    probe = {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 5, "failureThreshold": 1}
    scripts = {"probe-grace": (loop, {**probe, "terminationGracePeriodSeconds": 3}),
               "pod-grace": (loop, probe), "trapped": ("trap 'exit 0' TERM; " + loop, probe)}
    for name, (script, liveness) in scripts.items():
        p = probed_pod(name, command=["sh", "-c", script], livenessProbe=liveness)
        p["spec"]["containers"][0]["image"] = "busybox:1.36"  # (stopped by SIGTERM: nginx's image says SIGQUIT)
        p["spec"]["terminationGracePeriodSeconds"] = 8
        await pods.create(p)
        await eventually(status(pods, name, lambda c: True))
    await clock.advance(15)  # the probe fails at the 15 s tick
    for name in scripts:
        await eventually(killing(pods, name))
    await clock.advance(1)  # the trap runs once the `sleep 1` running as SIGTERM came ends

    def last(name):
        async def check():
            [c] = (await pods.get(name, "default"))["status"]["containerStatuses"]
            return c["lastState"].get("terminated") if c["restartCount"] == 1 else None
        return check
    t = await eventually(last("trapped"))
    assert (t["exitCode"], t["reason"]) == (0, "Completed")
    await clock.advance(1.5)
    for name in ("probe-grace", "pod-grace"):  # both outlived the SIGTERM
        [c] = (await pods.get(name, "default"))["status"]["containerStatuses"]
        assert c["restartCount"] == 0 and "running" in c["state"], name
    await clock.advance(0.5)
    t = await eventually(last("probe-grace"))
    assert t["exitCode"] == 137 and parse_time(t["finishedAt"]) - parse_time(t["startedAt"]) == 18
    await clock.advance(5)
    t = await eventually(last("pod-grace"))
    assert t["exitCode"] == 137 and parse_time(t["finishedAt"]) - parse_time(t["startedAt"]) == 23


async def test_an_exec_liveness_probe_past_its_timeout_fails(env):
    """Found by fuzz54: an exec liveness probe the runtime works out (`sleep 100000`) passed however
    long it ran. Upstream's exec probes time out (ExecProbeTimeout, GA): the run past timeoutSeconds
    is a failure in the runtime's words, and failureThreshold of them a kill to restart."""
    pods, clock = env
    await pods.create(probed_pod("slow-probe", args=["sleep", "600"], livenessProbe={
        "exec": {"command": ["sleep", "100000"]}, "timeoutSeconds": 2, "periodSeconds": 5, "failureThreshold": 2}))
    await eventually(status(pods, "slow-probe", lambda c: c["ready"]))
    await clock.advance(5)
    await eventually(killing(pods, "slow-probe"))

    async def reported():
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return [e for e in items if e["reason"] == "Unhealthy" and e["involvedObject"]["name"] == "slow-probe"]
    (unhealthy,) = await eventually(reported)
    assert unhealthy["message"] == 'Liveness probe failed: command "sleep 100000" timed out'
    assert unhealthy["count"] == 2


async def test_a_probe_of_a_port_no_process_listens_on_is_refused(env):
    """What a simulated container listens on comes from its program: `python3 -m http.server 8000`
    on 8000; `sleep infinity` on nothing but its declared containerPort (kept open, as a
    long-running image's). An httpGet or tcpSocket probe of another port fails each period as the
    kubelet reports a refused connection (Unhealthy): readiness never comes, liveness restarts
    the container; a probe of a port it listens on passes."""
    from tests.node.test_container_events import pod_events
    pods, clock = env
    idle = probed_pod("idle", readinessProbe={"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
                      livenessProbe={"tcpSocket": {"port": "web"}, "periodSeconds": 5})
    idle["spec"]["containers"][0] |= {"image": "busybox:1.36", "command": ["sleep", "infinity"],
                                      "ports": [{"name": "web", "containerPort": 80}]}
    server = probed_pod("server", readinessProbe={"httpGet": {"path": "/", "port": 8000}, "periodSeconds": 5},
                        livenessProbe={"tcpSocket": {"port": 9000}, "periodSeconds": 5, "failureThreshold": 2})
    server["spec"]["containers"][0] |= {"image": "python:3.12", "command": ["python3", "-m", "http.server", "8000"]}
    await pods.create(idle)
    await pods.create(server)
    await eventually(status(pods, "idle", lambda c: c["started"]))
    await eventually(status(pods, "server", lambda c: c["ready"]))

    async def restarted():
        await clock.advance(5)
        p = await pods.get("server", "default")
        return p if p["status"]["containerStatuses"][0]["restartCount"] >= 1 else None
    ip = (await eventually(restarted))["status"]["podIP"]
    assert ("Warning", "Unhealthy", "spec.containers{app}",
            f"Liveness probe failed: dial tcp {ip}:9000: connect: connection refused") in \
        [e[:4] for e in await pod_events(pods, "server")]
    p = await pods.get("idle", "default")
    assert not p["status"]["containerStatuses"][0]["ready"] and p["status"]["containerStatuses"][0]["restartCount"] == 0
    ip = p["status"]["podIP"]
    events = [e[:4] for e in await pod_events(pods, "idle")]
    assert ("Warning", "Unhealthy", "spec.containers{app}", f'Readiness probe failed: Get "http://{ip}:8080/healthz": '
            f"dial tcp {ip}:8080: connect: connection refused") in events
    assert not any(e[3].startswith("Liveness") for e in events)
