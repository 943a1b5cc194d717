import asyncio
import contextlib
import functools
from types import SimpleNamespace

import pytest

from nanokube import schema
from nanokube.apiserver.loopback import connector
from nanokube.apiserver.patch import strategic
from nanokube.clock import parse_time
from nanokube.machinery.errors import APIError
from nanokube.machinery.streaming import LogOptions
from nanokube.node import container_env
from nanokube.node.cluster import default_cluster
from nanokube.node.lifecycle import PodWorker, crash_backoff, image_id, image_ref, status_patch
from nanokube.node.manager import RESTART_PERIOD_ENV, NodeManager, options_from_env
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock


def test_image_references_are_fully_qualified():
    assert image_ref("nginx") == "docker.io/library/nginx:latest"
    assert image_ref("bitnami/redis:7") == "docker.io/bitnami/redis:7"
    assert image_ref("registry.k8s.io/pause:3.10") == "registry.k8s.io/pause:3.10"
    assert image_id("nginx:1.27").startswith("docker.io/library/nginx@sha256:")


@contextlib.asynccontextmanager
async def node_agents(clock: ManualClock, **options):
    """An API server (its stack) and the default cluster's node agents (their manager, with
    `options`), on `clock`."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    s.rest.clock = clock  # deletionTimestamps in the agents' time
    mgr = NodeManager(connector(s.rest), default_cluster(), clock, **options)
    await mgr.start()
    try:
        yield s, mgr
    finally:
        await mgr.stop()
        await s.close()


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, _):
        yield s.client.resource("", "v1", "pods"), clock


#: what each container of `pod` runs: a server in the foreground, up until it is stopped (busybox's own
#: command, `sh`, would exit at once with no stdin)
SERVER = ["httpd", "-f"]


def pod(name, node="gpu-0", annotations=None, restart="Always", grace=None, containers=("app",), finalizers=()):
    spec = {"nodeName": node, "restartPolicy": restart,
            "containers": [{"name": c, "image": "busybox:1.36", "command": list(SERVER)} for c in containers]}
    if node is None:
        del spec["nodeName"]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    md = {"name": name, "namespace": "default", "annotations": annotations or {}}
    if finalizers:
        md["finalizers"] = list(finalizers)
    return {"metadata": md, "spec": spec}


def phase_is(pods, name, phase):
    async def check():
        try:
            p = await pods.get(name, "default")
        except APIError:
            return None
        return p if (p.get("status") or {}).get("phase") == phase else None
    return check


def loop_status(pods, restarts: int, state: str):
    """A check that pod `loop`'s container has `restarts` restarts and is in `state`: its status then."""
    async def check():
        c = (await pods.get("loop", "default"))["status"]["containerStatuses"][0]
        return c if c["restartCount"] == restarts and state in c["state"] else None
    return check


def gone(pods, name):
    async def check():
        try:
            await pods.get(name, "default")
        except APIError as e:
            return e.code == 404
        return False
    return check


def conds(p):
    return {c["type"]: c["status"] for c in p["status"]["conditions"]}


def cond(p, ctype):
    return next(c for c in p["status"]["conditions"] if c["type"] == ctype)


async def test_bound_pod_runs_with_ip_conditions_and_container_status(env):
    pods, _ = env
    await pods.create(pod("web", containers=("app", "side")))
    p = await eventually(phase_is(pods, "web", "Running"))
    st = p["status"]
    assert st["podIP"].startswith("10.244.0.") and st["podIPs"] == [{"ip": st["podIP"]}]
    assert st["hostIP"] == "172.18.0.2" and st["startTime"]
    assert {"PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True"}.items() \
        <= conds(p).items()
    assert [c["name"] for c in st["containerStatuses"]] == ["app", "side"]
    c = st["containerStatuses"][0]
    assert c["ready"] and c["started"] and c["restartCount"] == 0 and "running" in c["state"]
    assert c["containerID"].startswith("containerd://") and c["imageID"].startswith("docker.io/library/busybox@sha256:")
    assert c["image"] == "docker.io/library/busybox:1.36"


async def test_a_containers_start_expands_its_command_once(env, monkeypatch):
    """The kubelet expands a container's $(VAR) references once per start, as it makes the
    container's config (ExpandContainerCommandAndArgs); the simulated start reads the expanded
    command for its start error, its program and its lifetime: one expansion serves them all."""
    pods, _ = env
    expanded = []
    real = container_env.command
    monkeypatch.setattr(container_env, "command", lambda spec, e: expanded.append(spec["name"]) or real(spec, e))
    p = pod("once")
    p["spec"]["containers"][0] |= {"command": ["sh", "-c", "echo $(WHO); sleep 300"],
                                   "env": [{"name": "WHO", "value": "me"}]}
    await pods.create(p)
    await eventually(phase_is(pods, "once", "Running"))
    assert expanded == ["app"]


async def test_pods_on_other_nodes_are_left_alone(env):
    pods, _ = env
    await pods.create(pod("elsewhere", node="not-ours"))
    await pods.create(pod("here"))
    await eventually(phase_is(pods, "here", "Running"))
    assert (await pods.get("elsewhere", "default"))["status"]["phase"] == "Pending"
    assert "podIP" not in (await pods.get("elsewhere", "default"))["status"]


async def test_run_seconds_and_exit_code_end_the_pod(env):
    pods, clock = env
    await pods.create(pod("ok", annotations={"sim.nanokube.io/run-seconds": "1"}, restart="Never"))
    await pods.create(pod("bad", annotations={"sim.nanokube.io/run-seconds": "2", "sim.nanokube.io/exit-code": "3"},
                          restart="Never"))
    await eventually(phase_is(pods, "ok", "Running"))
    await eventually(phase_is(pods, "bad", "Running"))
    await clock.advance(2)
    ok = await eventually(phase_is(pods, "ok", "Succeeded"))
    bad = await eventually(phase_is(pods, "bad", "Failed"))
    t = ok["status"]["containerStatuses"][0]["state"]["terminated"]
    assert t["exitCode"] == 0 and t["reason"] == "Completed"
    t = bad["status"]["containerStatuses"][0]["state"]["terminated"]
    assert t["exitCode"] == 3 and t["reason"] == "Error"
    assert conds(ok)["Ready"] == "False"


async def test_an_annotation_that_is_not_a_number_keeps_its_default_with_a_warning(env):
    pods, clock = env
    await pods.create(pod("odd", annotations={"sim.nanokube.io/run-seconds": "soon",
                                              "sim.nanokube.io/exit-code": "2"}, restart="Never"))
    await eventually(phase_is(pods, "odd", "Running"))

    async def warnings():
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return [(e["type"], e["message"], e["involvedObject"]["name"]) for e in items
                if e["reason"] == "InvalidSimulationAnnotation"]
    assert await eventually(warnings) == [("Warning", 'annotation sim.nanokube.io/run-seconds="soon" is not a number; '
                                                      "using the default (run until stopped)", "odd")]
    await clock.advance(3600)
    assert (await pods.get("odd", "default"))["status"]["phase"] == "Running", "it still runs until stopped"


async def test_restart_policy_always_restarts_at_once_then_with_backoff(env):
    """kuberuntime's doBackOff: the first exit has no back-off entry yet, so the container starts
    again at once; from the second the kubelet backs off 10 s, then 20 s (doubling to 5 min),
    each a CrashLoopBackOff waiting state and a BackOff Event (counted on one). While it waits,
    its restartCount is the ended instance's: one more only as it starts again (as `kubectl get
    pods` shows `CrashLoopBackOff   1 (2s ago)` after the second exit)."""
    pods, clock = env
    await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5", "sim.nanokube.io/exit-code": "1"}))
    await eventually(phase_is(pods, "loop", "Running"))

    status = functools.partial(loop_status, pods)
    await clock.advance(5)
    c = await eventually(status(1, "running"))
    assert c["lastState"]["terminated"]["exitCode"] == 1
    running_id = c["containerID"]
    await clock.advance(5)
    c = await eventually(status(1, "waiting"))
    assert c["state"]["waiting"]["reason"] == "CrashLoopBackOff" and "back-off 10s" in c["state"]["waiting"]["message"]
    assert c["containerID"] == c["lastState"]["terminated"]["containerID"] == running_id, "the instance that ended"
    await clock.advance(10)
    c = await eventually(status(2, "running"))
    assert c["containerID"] != running_id and c["lastState"]["terminated"]["containerID"] == running_id
    assert (await pods.get("loop", "default"))["status"]["phase"] == "Running"
    await clock.advance(5)  # crashes again: 20 s now, and the BackOff Event counts it
    c = await eventually(status(2, "waiting"))
    assert "back-off 20s" in c["state"]["waiting"]["message"]

    async def counted():
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return next((e for e in items if e["reason"] == "BackOff" and e["count"] == 2), None)
    e = await eventually(counted)
    uid = (await pods.get("loop", "default"))["metadata"]["uid"]
    assert (e["type"], e["message"]) == ("Warning", f"Back-off restarting failed container app in pod loop_default({uid})")
    assert e["involvedObject"]["fieldPath"] == "spec.containers{app}" and e["source"]["component"] == "kubelet"


def test_a_container_crash_looping_past_a_thousand_restarts_still_waits_the_longest_back_off():
    assert [crash_backoff(n, 1.0) for n in (1, 2, 1025, 5000)] == [1.0, 1.0, 1.0, 1.0]
    assert [crash_backoff(n) for n in (1, 2, 6, 1100)] == [10.0, 20.0, 300.0, 300.0]


async def test_a_max_container_restart_period_shortens_the_back_off_from_its_first_step():
    """crashLoopBackOff.maxContainerRestartPeriod (KEP-4603), 3 s from the environment of `nanokube
    up`: the back-off after the second exit is 3 s, not 10 s, and stays 3 s after the third; runs
    of 7 s (over twice the cap, but not 10 min) do not start it over."""
    assert options_from_env({RESTART_PERIOD_ENV: "3"}) == {"max_container_restart_period": 3.0}
    with pytest.raises(ValueError, match="between 1s and 300s"):
        options_from_env({RESTART_PERIOD_ENV: "0.5"})
    clock = ManualClock()
    async with node_agents(clock, **options_from_env({RESTART_PERIOD_ENV: "3"})) as (s, _):
        pods = s.client.resource("", "v1", "pods")
        await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "7",
                                                   "sim.nanokube.io/exit-code": "1"}))
        await eventually(phase_is(pods, "loop", "Running"))

        status = functools.partial(loop_status, pods)
        await clock.advance(7)
        await eventually(status(1, "running"))
        await clock.advance(7)
        c = await eventually(status(1, "waiting"))
        assert c["state"]["waiting"]["reason"] == "CrashLoopBackOff" and "back-off 3s" in c["state"]["waiting"]["message"]
        await clock.advance(3)
        await eventually(status(2, "running"))
        await clock.advance(7)
        c = await eventually(status(2, "waiting"))
        assert "back-off 3s" in c["state"]["waiting"]["message"], "capped, not doubled"
        await clock.advance(3)
        await eventually(status(3, "running"))


async def test_a_container_that_ran_ten_minutes_starts_its_back_off_over(env):
    """The kubelet's back-off entry for a container expires once an instance ran more than 10 min
    (HasExpiredFunc): the exit after such a run restarts at once, and the one after that backs off
    10 s again, not the 40 s its restartCount would give."""
    pods, clock = env
    await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5", "sim.nanokube.io/exit-code": "1"}))
    await eventually(phase_is(pods, "loop", "Running"))
    status = functools.partial(loop_status, pods)
    await clock.advance(5)
    await eventually(status(1, "running"))
    await clock.advance(5)
    await eventually(status(1, "waiting"))
    await clock.advance(10)
    await eventually(status(2, "running"))
    await clock.advance(5)
    c = await eventually(status(2, "waiting"))
    assert "back-off 20s" in c["state"]["waiting"]["message"]

    async def run_for(seconds: str) -> None:
        await pods.patch("loop", {"metadata": {"annotations": {"sim.nanokube.io/run-seconds": seconds}}}, namespace="default")
    await run_for("601")  # the next instance runs 10 min and a second
    await clock.advance(20)
    await eventually(status(3, "running"))
    await run_for("5")
    await clock.advance(601)
    c = await eventually(status(4, "running"))
    assert c["lastState"]["terminated"]["exitCode"] == 1, "started again at once"
    await clock.advance(5)
    c = await eventually(status(4, "waiting"))
    assert "back-off 10s" in c["state"]["waiting"]["message"]
    await clock.advance(10)
    await eventually(status(5, "running"))


async def test_a_restarted_node_agent_forgets_the_back_off_as_a_restarted_kubelet_does():
    """The kubelet keeps its crash-loop back-off in memory: restarted, it finds no entry for a
    container, so the adopted container's next exit restarts at once and the one after backs off
    10 s, whatever its restartCount (2 here: 20 s, then 40 s, without a restart)."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5",
                                                   "sim.nanokube.io/exit-code": "1"}))
        await eventually(phase_is(pods, "loop", "Running"))
        status = functools.partial(loop_status, pods)
        for seconds, restarts in ((5, 1), (15, 2)):  # at once, then after 10 s
            await clock.advance(seconds)
            await eventually(status(restarts, "running"))
        await mgr.stop()
        again = NodeManager(connector(s.rest), default_cluster(), clock)
        await again.start()
        try:
            await clock.advance(5)
            c = await eventually(status(3, "running"))
            assert c["lastState"]["terminated"]["exitCode"] == 1, "its exit after the restart: started at once"
            await clock.advance(5)
            c = await eventually(status(3, "waiting"))
            assert "back-off 10s" in c["state"]["waiting"]["message"]
        finally:
            await again.stop()


async def test_a_container_due_to_restart_as_the_other_ends_keeps_the_pod_running(env):
    """One app container's back-off runs out at the very instant the pod's other app container
    ends (a kubelet woken once for both): the first starts again and the pod runs on. Before, its
    restart was due, so it was no longer waiting, and the pod was finished as if none were left."""
    pods, clock = env
    p = pod("pair", restart="OnFailure", containers=("crashing", "worker"))
    # exits at 1 s and starts again at once, exits at 2 s and backs off 10 s: due at 12 s, as worker ends
    p["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep 1; exit 1"]
    p["spec"]["containers"][1]["command"] = ["sleep", "12"]
    await pods.create(p)
    await eventually(phase_is(pods, "pair", "Running"))
    await clock.advance(12)

    async def restarted():
        st = (await pods.get("pair", "default"))["status"]
        cs = {c["name"]: c for c in st["containerStatuses"]}
        return st if cs["crashing"]["restartCount"] == 2 and "running" in cs["crashing"]["state"] else None
    st = await eventually(restarted)
    assert st["phase"] == "Running"
    worker = next(c for c in st["containerStatuses"] if c["name"] == "worker")
    assert worker["state"]["terminated"]["exitCode"] == 0 and worker["restartCount"] == 0


async def test_a_container_in_back_off_keeps_the_id_of_the_instance_that_crashed(env):
    """convertToAPIContainerStatuses: a container waiting to restart reports the ended instance's
    containerID, which its lastState.terminated carries too; the next run has an ID of its own."""
    pods, clock = env
    await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5", "sim.nanokube.io/exit-code": "1"}))
    before = (await eventually(phase_is(pods, "loop", "Running")))["status"]["containerStatuses"][0]["containerID"]
    await clock.advance(5)  # the first exit restarts at once: a new instance, a new ID

    async def restarted():
        c = (await pods.get("loop", "default"))["status"]["containerStatuses"][0]
        return c if c["restartCount"] == 1 and "running" in c["state"] else None
    first = (await eventually(restarted))["containerID"]
    assert first != before
    await clock.advance(5)

    async def backing_off():
        c = (await pods.get("loop", "default"))["status"]["containerStatuses"][0]
        return c if "waiting" in c["state"] else None
    c = await eventually(backing_off)
    assert c["containerID"] == c["lastState"]["terminated"]["containerID"] == first
    await clock.advance(10)

    async def running_again():
        c = (await pods.get("loop", "default"))["status"]["containerStatuses"][0]
        return c if "running" in c["state"] else None
    c = await eventually(running_again)
    assert c["containerID"] != first and c["lastState"]["terminated"]["containerID"] == first


async def test_a_command_its_image_lacks_fails_to_start_then_backs_off(env):
    """runc cannot exec a container's own command its image lacks (curl in busybox): containerd never
    creates the task, so the container is Waiting (RunContainerError, then CrashLoopBackOff) with
    lastState terminated StartError, exit code 128, and a Warning Failed Event in containerd's words;
    it never runs."""
    pods, clock = env
    p = pod("loop")
    p["spec"]["containers"][0]["command"] = ["curl", "http://web"]
    await pods.create(p)
    words = ('failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create '
             'failed: unable to start container process: exec: "curl": executable file not found in $PATH: unknown')

    async def backing_off():
        c = ((await pods.get("loop", "default"))["status"].get("containerStatuses") or [{"state": {}}])[0]
        return c if (c["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff" else None
    c = await eventually(backing_off)
    term = c["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"], term["message"]) == (128, "StartError", words)
    assert term["startedAt"] == "1970-01-01T00:00:00Z" and not c["ready"] and not c["started"]
    assert "back-off 10s" in c["state"]["waiting"]["message"] and c["restartCount"] == 1

    async def reasons():
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        got = {e["reason"]: e for e in items if e["involvedObject"]["name"] == "loop"}
        return got if "Failed" in got and "BackOff" in got else None
    events = await eventually(reasons)
    assert (events["Failed"]["type"], events["Failed"]["message"]) == ("Warning", f"Error: {words}")
    assert events["Failed"]["count"] == 2 and "Started" not in events, "each start failed, none started"
    await clock.advance(10)  # started again after its back-off, and failing again: 20 s now
    c = await eventually(loop_status(pods, 2, "waiting"))
    assert "back-off 20s" in c["state"]["waiting"]["message"]
    assert c["lastState"]["terminated"]["reason"] == "StartError"


async def test_a_start_error_under_restart_policy_never_fails_the_pod(env):
    """wget is not in ubuntu: with restartPolicy Never the container ends there (StartError, 128) and
    so does the pod; a shell running a tool the image lacks starts (the shell reports it, not runc)."""
    pods, _ = env
    p = pod("once", restart="Never")
    p["spec"]["containers"][0].update(image="ubuntu:24.04", command=["/usr/bin/wget", "-qO-", "http://web"])
    await pods.create(p)
    shell = pod("shell")
    shell["spec"]["containers"][0]["command"] = ["sh", "-c", "curl http://web; sleep 3600"]
    await pods.create(shell)
    done = await eventually(phase_is(pods, "once", "Failed"))
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (128, "StartError")
    assert term["message"].endswith('exec: "/usr/bin/wget": executable file not found in $PATH: unknown')
    up = await eventually(phase_is(pods, "shell", "Running"))
    assert "running" in up["status"]["containerStatuses"][0]["state"]


async def test_an_init_container_that_cannot_start_backs_off_and_holds_the_pod(env):
    """An init container whose process its image lacks (args alone name it: busybox has no
    entrypoint) fails to start as an app container does: Init:RunContainerError, then
    Init:CrashLoopBackOff on the usual back-off, lastState StartError (128); the app container
    never starts. Under restartPolicy Never the pod fails there."""
    pods, clock = env
    p = pod("loop")
    p["spec"]["initContainers"] = [{"name": "wait", "image": "busybox:1.36", "args": ["curl", "-sf", "http://db"]}]
    await pods.create(p)
    words = 'exec: "curl": executable file not found in $PATH: unknown'

    async def init_state(reason: str):
        st = (await pods.get("loop", "default"))["status"]
        s = (st.get("initContainerStatuses") or [{"state": {}}])[0]
        return (st, s) if (s["state"].get("waiting") or {}).get("reason") == reason else None
    st, s = await eventually(lambda: init_state("CrashLoopBackOff"))
    term = s["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"], term["startedAt"]) == (128, "StartError", "1970-01-01T00:00:00Z")
    assert term["message"].endswith(words) and s["restartCount"] == 1 and "back-off 10s" in s["state"]["waiting"]["message"]
    assert st["phase"] == "Pending" and st["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    await clock.advance(10)  # tried again: it fails again, 20 s now
    await eventually(lambda: _init_restarts(pods, "loop", 2))
    items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
    mine = [e for e in items if e["involvedObject"]["name"] == "loop"]
    failed = next(e for e in mine if e["reason"] == "Failed")
    assert failed["message"].endswith(words) and failed["involvedObject"]["fieldPath"] == "spec.initContainers{wait}"
    assert not [e for e in mine if e["reason"] == "Started"], "neither it nor the app container started"

    never = pod("once", restart="Never")
    never["spec"]["initContainers"] = [{"name": "wait", "image": "ubuntu:24.04", "command": ["wget", "http://db"]}]
    await pods.create(never)
    done = (await eventually(phase_is(pods, "once", "Failed")))["status"]
    term = done["initContainerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (128, "StartError")
    assert done["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}


async def _init_restarts(pods, name: str, restarts: int) -> bool:
    s = (await pods.get(name, "default"))["status"]["initContainerStatuses"][0]
    return s["restartCount"] >= restarts and s["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff"


async def test_a_sidecar_that_cannot_start_backs_off_before_the_next_init_container(env):
    """A restartable init container whose command (through $(VAR) expansion) is a tool its image
    lacks never starts: it waits in RunContainerError, then CrashLoopBackOff, lastState StartError
    (128), and the init container after it does not start."""
    pods, clock = env
    p = pod("sidecar")
    p["spec"]["initContainers"] = [
        {"name": "proxy", "image": "alpine:3.20", "restartPolicy": "Always", "env": [{"name": "TOOL", "value": "curl"}],
         "command": ["$(TOOL)", "http://mesh"]},
        {"name": "setup", "image": "busybox:1.36", "command": ["true"]}]
    await pods.create(p)

    async def backing_off():
        st = (await pods.get("sidecar", "default"))["status"]
        s = (st.get("initContainerStatuses") or [{"state": {}}])[0]
        return (st, s) if (s["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff" else None
    st, s = await eventually(backing_off)
    term = s["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (128, "StartError")
    assert term["message"].endswith('exec: "curl": executable file not found in $PATH: unknown')
    assert not s["started"] and st["phase"] == "Pending"
    assert st["initContainerStatuses"][1]["state"] == {"waiting": {"reason": "PodInitializing"}}
    await clock.advance(10)
    await eventually(lambda: _init_restarts(pods, "sidecar", 2))
    st = (await pods.get("sidecar", "default"))["status"]
    assert st["initContainerStatuses"][1]["state"] == {"waiting": {"reason": "PodInitializing"}}


async def test_an_ephemeral_container_that_cannot_start_is_never_started_again(env):
    """`kubectl debug --image=busybox -- curl ...`: the ephemeral container fails to start (a Failed
    event in containerd's words) and, never restarted, waits in RunContainerError with lastState
    StartError (128) while the pod runs on."""
    pods, _ = env
    await pods.create(pod("web"))
    await eventually(phase_is(pods, "web", "Running"))
    await pods.patch("web", {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1.36",
                                                               "command": ["curl", "http://web"]}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="ephemeralcontainers")

    async def debugger():
        st = (await pods.get("web", "default"))["status"]
        return st if st.get("ephemeralContainerStatuses") else None
    st = await eventually(debugger)
    s = st["ephemeralContainerStatuses"][0]
    words = 'exec: "curl": executable file not found in $PATH: unknown'
    assert s["state"]["waiting"]["reason"] == "RunContainerError" and s["state"]["waiting"]["message"].endswith(words)
    assert "resources" not in s, "not running: the kubelet reports no resources"
    term = s["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"], term["startedAt"]) == (128, "StartError", "1970-01-01T00:00:00Z")
    assert st["phase"] == "Running" and "running" in st["containerStatuses"][0]["state"]

    async def failed():  # written from the recorder's queue
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return [(e["reason"], e["message"]) for e in items if e["involvedObject"].get("fieldPath") ==
                "spec.ephemeralContainers{debugger}" and e["reason"] in ("Started", "Failed")]
    got = await eventually(failed)
    assert len(got) == 1 and got[0][0] == "Failed" and got[0][1].endswith(words)


async def test_an_ephemeral_containers_command_sees_its_env():
    """`kubectl debug --custom` with an `env`: the ephemeral container's `sh -c 'echo $X'` prints
    the variable its spec sets, as any container's command (its log was an empty line)."""
    async with node_agents(ManualClock()) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        created = await pods.create(pod("web"))
        await eventually(phase_is(pods, "web", "Running"))
        debugger = {"name": "debugger", "image": "busybox:1.36", "command": ["sh", "-c", "echo X=$X"],
                    "env": [{"name": "X", "value": "from-spec"}]}
        await pods.patch("web", {"spec": {"ephemeralContainers": [debugger]}}, "application/strategic-merge-patch+json",
                         namespace="default", subresource="ephemeralcontainers")

        async def ended():
            st = (await pods.get("web", "default"))["status"].get("ephemeralContainerStatuses") or [{}]
            return st[0] if "terminated" in st[0].get("state", {}) else None
        status = await eventually(ended)
        # terminated: no `resources`, which the kubelet reports of a running container alone
        assert status["state"]["terminated"]["exitCode"] == 0 and "resources" not in status
        worker = mgr.agents["gpu-0"].workers[created["metadata"]["uid"]]
        assert worker.io.serve_log("debugger", LogOptions()) == b"X=from-spec\n"


async def test_on_failure_does_not_restart_a_successful_container(env):
    pods, clock = env
    await pods.create(pod("job", annotations={"sim.nanokube.io/run-seconds": "1"}, restart="OnFailure"))
    await eventually(phase_is(pods, "job", "Running"))
    await clock.advance(1)
    p = await eventually(phase_is(pods, "job", "Succeeded"))
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0


async def test_graceful_deletion_stops_containers_then_removes_the_pod(env):
    pods, clock = env
    await pods.create(pod("slow", annotations={"sim.nanokube.io/stop-seconds": "5"}, grace=30))
    await eventually(phase_is(pods, "slow", "Running"))
    await pods.delete("slow", "default")
    p = await pods.get("slow", "default")
    assert p["metadata"]["deletionTimestamp"] and p["metadata"]["deletionGracePeriodSeconds"] == 30
    await clock.advance(4)
    assert (await pods.get("slow", "default"))["status"]["phase"] == "Running"
    await clock.advance(1)
    assert await eventually(gone(pods, "slow"))


async def test_a_missing_config_map_or_key_in_the_environment_is_create_container_config_error(env):
    """makeEnvironmentVariables' errors: a ConfigMap (or Secret) the environment names that does not
    exist, or lacks the key, and is not optional keeps the container waiting in
    CreateContainerConfigError with a Warning Failed 'Error: ...', tried again at each sync; once
    it is there the container starts. Optional ones missing are skipped."""
    pods, clock = env
    configmaps = pods.c.resource("", "v1", "configmaps")
    p = pod("configured")
    p["spec"]["containers"][0]["env"] = [
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "mode"}}},
        {"name": "EXTRA", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}}}]
    p["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "absent-too", "optional": True}}]
    await pods.create(p)

    async def waiting(message):
        got = await pods.get("configured", "default")
        state = ((got.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}
        return got if state == {"waiting": {"reason": "CreateContainerConfigError", "message": message}} else None
    got = await eventually(lambda: waiting('configmap "app-config" not found'))
    status = got["status"]["containerStatuses"][0]  # never created: the spec's image as given, no image ID
    assert (status["image"], status["imageID"]) == ("busybox:1.36", "")
    await configmaps.create({"metadata": {"name": "app-config", "namespace": "default"}, "data": {"other": "x"}})
    await clock.advance(10)
    await eventually(lambda: waiting("couldn't find key mode in ConfigMap default/app-config"))
    await configmaps.patch("app-config", {"data": {"mode": "fast"}}, namespace="default")
    await clock.advance(10)
    await eventually(phase_is(pods, "configured", "Running"))

    async def failed():  # written from the recorder's queue
        events, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return sorted(e["message"] for e in events if e["reason"] == "Failed" and e["involvedObject"]["name"] == "configured")
    assert await becomes(failed, ["Error: configmap \"app-config\" not found",
                                  "Error: couldn't find key mode in ConfigMap default/app-config"])


async def test_a_restarting_container_makes_its_environment_again_while_the_other_runs_on():
    """The kubelet makes a container's environment at each of its starts: a ConfigMap deleted while
    the container runs keeps its restart waiting in CreateContainerConfigError (a Warning Failed
    event), tried again at each sync retry, while the pod's other container runs on and ends on its
    own meanwhile; once the ConfigMap is there again the container starts, with its new value."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods, configmaps = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "configmaps")
        await configmaps.create({"metadata": {"name": "app-config", "namespace": "default"}, "data": {"mode": "fast"}})
        p = pod("configured", restart="OnFailure", containers=("app", "side"))
        app, side = p["spec"]["containers"]
        app |= {"command": ["sh", "-c", "echo $MODE; sleep 5; exit 1"],
                "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "mode"}}}]}
        side["command"] = ["sleep", "12"]
        created = await pods.create(p)
        await eventually(phase_is(pods, "configured", "Running"))
        await configmaps.delete("app-config", "default")

        def statuses(check):
            async def read():
                got = {c["name"]: c for c in (await pods.get("configured", "default"))["status"]["containerStatuses"]}
                return got if check(got) else None
            return read
        await clock.advance(5)  # app exits 1; its first restart, at once, finds no ConfigMap
        got = await eventually(statuses(lambda c: "waiting" in c["app"]["state"]))
        assert got["app"]["state"]["waiting"] == {"reason": "CreateContainerConfigError",
                                                  "message": 'configmap "app-config" not found'}
        assert got["app"]["restartCount"] == 1 and got["app"]["lastState"]["terminated"]["exitCode"] == 1
        assert "running" in got["side"]["state"] and got["side"]["restartCount"] == 0

        async def failed():  # written from the recorder's queue
            events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
            return [e["message"] for e in events if e["reason"] == "Failed" and e["involvedObject"]["name"] == "configured"]
        assert await becomes(failed, ['Error: configmap "app-config" not found'])
        await clock.advance(7)  # side ends 12 s in, before the retry SYNC_RETRY (10 s) after app's exit
        got = await eventually(statuses(lambda c: "terminated" in c["side"]["state"]))
        assert got["side"]["state"]["terminated"]["exitCode"] == 0
        assert got["app"]["state"]["waiting"]["reason"] == "CreateContainerConfigError"
        await configmaps.create({"metadata": {"name": "app-config", "namespace": "default"}, "data": {"mode": "slow"}})
        await clock.advance(3)
        got = await eventually(statuses(lambda c: "running" in c["app"]["state"]))
        assert got["app"]["restartCount"] == 1, "the starts its missing ConfigMap failed made no container"
        worker = mgr.agents["gpu-0"].workers[created["metadata"]["uid"]]
        assert worker.io.serve_log("app", LogOptions()) == b"slow\n"
        assert worker.io.serve_log("app", LogOptions(previous=True)) == b"fast\n"


async def test_ready_conditions_name_the_unready_containers_as_the_kubelet_does(env):
    """ContainersReady and Ready, False while containers start: reason ContainersNotReady and
    GenerateContainersReadyCondition's message listing the sidecars, then the app containers, not
    ready; once all are ready, True with neither. Initialized names the init containers not done."""
    pods, clock = env
    p = pod("pair", annotations={"sim.nanokube.io/pull-seconds": "5"}, containers=("a", "b"))
    p["spec"]["initContainers"] = [{"name": "log", "image": "busybox:1.36", "command": list(SERVER),
                                    "restartPolicy": "Always"}]
    await pods.create(p)

    async def pending():
        got = await pods.get("pair", "default")
        return got if "conditions" in (got.get("status") or {}) else None
    got = await eventually(pending)
    for ctype in ("Ready", "ContainersReady"):
        c = cond(got, ctype)
        assert (c["status"], c["reason"], c["message"]) == (
            "False", "ContainersNotReady", "containers with unready status: [log a b]"), c
    c = cond(got, "Initialized")  # GeneratePodInitializedCondition's: the sidecar has not started
    assert (c["status"], c["reason"], c["message"]) == (
        "False", "ContainersNotInitialized", "containers with incomplete status: [log]"), c
    for _ in range(20):
        await clock.advance(1)
    got = await eventually(phase_is(pods, "pair", "Running"))
    got = await eventually(lambda: _ready(pods, "pair"))
    assert {k for k in cond(got, "Ready") if k in ("reason", "message")} == set()
    assert {k for k in cond(got, "Initialized") if k in ("reason", "message")} == set()


async def test_ready_waits_for_the_readiness_gates_conditions(env):
    """A pod whose containers are ready stays not Ready until every condition its readinessGates
    name is True (another writer's, a load balancer controller's say): ReadinessGatesNotReady with
    GeneratePodReadyCondition's message, following each change of that condition."""
    pods, clock = env
    gate = "example.com/lb-ready"
    p = pod("gated")
    p["spec"]["readinessGates"] = [{"conditionType": gate}]
    await pods.create(p)
    got = await eventually(phase_is(pods, "gated", "Running"))

    async def ready_says(status, message):
        got = await pods.get("gated", "default")
        c = cond(got, "Ready")
        return got if (c["status"], c.get("message")) == (status, message) else None
    got = await eventually(lambda: ready_says("False", f'corresponding condition of pod readiness gate "{gate}" '
                                                       "does not exist."))
    assert cond(got, "Ready")["reason"] == "ReadinessGatesNotReady" and cond(got, "ContainersReady")["status"] == "True"
    smp = "application/strategic-merge-patch+json"
    await pods.patch("gated", {"status": {"conditions": [{"type": gate, "status": "False"}]}}, smp,
                     namespace="default", subresource="status")
    await eventually(lambda: ready_says("False", f'the status of pod readiness gate "{gate}" is not "True", but False'))
    await pods.patch("gated", {"status": {"conditions": [{"type": gate, "status": "True"}]}}, smp,
                     namespace="default", subresource="status")
    got = await eventually(lambda: ready_says("True", None))
    assert "reason" not in cond(got, "Ready") and cond(got, gate)["status"] == "True"


async def _ready(pods, name):
    got = await pods.get(name, "default")
    return got if cond(got, "Ready")["status"] == "True" else None


async def test_a_pod_deleted_before_its_containers_ran_ends_container_status_unknown(env):
    """Deleted while an image is pulled or a volume waits for its ConfigMap, nothing received a
    SIGTERM: the pod is Failed with each container as TerminatePod leaves it (ContainerStatusUnknown,
    137), not 143 Error; with init containers not done, the app containers keep waiting and the
    first init container is the unknown one."""
    pods, clock = env
    keep = ["test.nanokube.io/keep"]
    await pods.create(pod("pulling", annotations={"sim.nanokube.io/pull-seconds": "600"}, grace=30, finalizers=keep))
    volume = pod("no-volume", grace=30, finalizers=keep)
    volume["spec"]["volumes"] = [{"name": "config", "configMap": {"name": "missing"}}]
    init = pod("init-pulling", annotations={"sim.nanokube.io/pull-seconds": "600"}, grace=30, finalizers=keep)
    init["spec"]["initContainers"] = [{"name": "setup", "image": "registry.example/setup:1"},
                                      {"name": "later", "image": "registry.example/setup:1"}]
    await pods.create(volume)
    await pods.create(init)
    await clock.advance(2)
    for name in ("pulling", "no-volume", "init-pulling"):
        assert (await pods.get(name, "default"))["status"]["phase"] == "Pending"
        await pods.delete(name, "default")
    unknown = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                              "message": "The container could not be located when the pod was terminated",
                              "startedAt": None, "finishedAt": None}}
    for name in ("pulling", "no-volume"):
        got = (await eventually(phase_is(pods, name, "Failed")))["status"]
        assert [c["state"] for c in got["containerStatuses"]] == [unknown], name
        assert "reason" not in got and cond({"status": got}, "Ready")["reason"] == "PodFailed"
    got = (await eventually(phase_is(pods, "init-pulling", "Failed")))["status"]
    assert [c["state"] for c in got["initContainerStatuses"]] == [unknown, {"waiting": {"reason": "PodInitializing"}}]
    assert [c["state"] for c in got["containerStatuses"]] == [{"waiting": {"reason": "PodInitializing"}}]
    events, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
    assert not [e for e in events if e["reason"] in ("Killing", "Started", "DeadlineExceeded")]
    for name in ("pulling", "no-volume", "init-pulling"):
        await pods.patch(name, {"metadata": {"finalizers": None}}, namespace="default")
        assert await eventually(gone(pods, name))


async def test_sigterm_ends_a_container_with_143_unless_it_says_otherwise(env):
    """A deleted (or evicted) pod's container ends by SIGTERM: exit 143, reason Error, the pod Failed
    (a Job counts it failed and replaces it; deleting a Job's pod no longer completes the Job);
    `sim.nanokube.io/stop-exit-code: "0"` is a program that handles the signal and exits cleanly."""
    pods, clock = env
    await pods.create(pod("plain", grace=30, restart="Never", finalizers=["test.nanokube.io/keep"]))
    await pods.create(pod("clean", annotations={"sim.nanokube.io/stop-exit-code": "0"}, grace=30, restart="Never",
                          finalizers=["test.nanokube.io/keep"]))
    for name in ("plain", "clean"):
        await eventually(phase_is(pods, name, "Running"))
        await pods.delete(name, "default")
    plain = await eventually(phase_is(pods, "plain", "Failed"))
    clean = await eventually(phase_is(pods, "clean", "Succeeded"))
    t = plain["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (143, "Error") and cond(plain, "Ready")["reason"] == "PodFailed"
    t = clean["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (0, "Completed") and cond(clean, "Ready")["reason"] == "PodCompleted"
    # GeneratePodInitializedCondition: a Succeeded pod's Initialized is True with reason PodCompleted
    assert (cond(clean, "Initialized")["status"], cond(clean, "Initialized")["reason"]) == ("True", "PodCompleted")
    assert "reason" not in cond(plain, "Initialized")
    for name in ("plain", "clean"):
        await pods.patch(name, {"metadata": {"finalizers": None}}, namespace="default")


async def test_an_images_stopsignal_stops_it_and_its_program_exits_as_the_real_one_does(env):
    """The runtime stops a container with its image's STOPSIGNAL (stop_signals): nginx's SIGQUIT and
    postgres's SIGINT stop them cleanly (0, Completed: the pod Succeeded); a script in an nginx image
    that traps only TERM does not handle SIGQUIT (its first process: runc's PID 1 ignores it) and is
    killed when the grace period is up (137), while in busybox's its TERM trap acts."""
    pods, clock = env
    trap = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    images = {"web": ("nginx:1.27", None), "db": ("docker.io/library/postgres:16", None),
              "web-trap": ("nginx:1.27", trap), "box-trap": ("busybox:1.36", trap)}
    for name, (image, command) in images.items():
        p = pod(name, grace=3, restart="Never", finalizers=["test.nanokube.io/keep"])
        c = p["spec"]["containers"][0]
        c["image"] = image
        if command is None:
            del c["command"]  # the image's own program
        else:
            c["command"] = command
        await pods.create(p)
        await eventually(phase_is(pods, name, "Running"))
    await clock.advance(0.5)  # (the traps set by now)
    for name in images:
        await pods.delete(name, "default")

        async def killing(name=name):
            items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
            return any(e["reason"] == "Killing" and e["involvedObject"]["name"] == name for e in items)
        await eventually(killing)
    await clock.advance(1)  # busybox's trap runs once the `sleep 1` running as SIGTERM came ends
    for name in ("web", "db", "box-trap"):
        t = (await eventually(phase_is(pods, name, "Succeeded")))["status"]["containerStatuses"][0]["state"]
        assert (t["terminated"]["exitCode"], t["terminated"]["reason"]) == (0, "Completed"), name
    assert (await pods.get("web-trap", "default"))["status"]["phase"] == "Running"
    await clock.advance(3)
    t = (await eventually(phase_is(pods, "web-trap", "Failed")))["status"]["containerStatuses"][0]["state"]
    assert (t["terminated"]["exitCode"], t["terminated"]["reason"]) == (137, "Error")
    for name in images:
        await pods.patch(name, {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_command_without_a_term_trap_ignores_sigterm_and_is_killed_after_the_grace_period(env):
    """A command the simulation runs is its container's first process, which ignores a signal it
    has no handler for (runc's PID 1, the process runtime's): with no TERM trap it runs on past
    SIGTERM, to its own end if that comes first (`finite`), else until it is killed when the grace
    period is up (137, Error); so does a script ignoring TERM (`trap ''`) whose commands are not
    simulated. One that traps TERM exits then."""
    pods, clock = env
    scripts = {"untrapped": ["sh", "-c", "sleep 600"], "finite": ["sleep", "3"],
               "ignored": ["sh", "-c", "trap '' TERM; python train.py"],
               "trapped": ["sh", "-c", "trap 'exit 143' TERM; while true; do sleep 1; done"]}
    for name, command in scripts.items():
        p = pod(name, grace=5, restart="Never", finalizers=["test.nanokube.io/keep"])
        p["spec"]["containers"][0]["command"] = command
        await pods.create(p)
        await eventually(phase_is(pods, name, "Running"))
    await clock.advance(0.5)  # (their traps set by now)
    for name in scripts:
        await pods.delete(name, "default")

        async def killing(name=name):  # SIGTERM follows: a clock advance before it would pass it by
            items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
            return any(e["reason"] == "Killing" and e["involvedObject"]["name"] == name for e in items)
        await eventually(killing)
    await clock.advance(1)  # the trap runs once the `sleep 1` running as SIGTERM came ends
    trapped = await eventually(phase_is(pods, "trapped", "Failed"))
    assert trapped["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
    for name in ("untrapped", "ignored", "finite"):
        assert (await pods.get(name, "default"))["status"]["phase"] == "Running", name
    await clock.advance(1.5)
    finite = (await eventually(phase_is(pods, "finite", "Succeeded")))["status"]["containerStatuses"][0]
    assert finite["state"]["terminated"]["exitCode"] == 0
    await clock.advance(2.5)
    for name in ("untrapped", "ignored"):
        t = (await eventually(phase_is(pods, name, "Failed")))["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (t["exitCode"], t["reason"]) == (137, "Error"), name
        assert parse_time(t["finishedAt"]) - parse_time(t["startedAt"]) >= 5, name
    for name in scripts:
        await pods.patch(name, {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_term_traps_output_as_the_running_command_ends_with_the_signal_is_in_the_log():
    """A TERM trap runs once the command running as SIGTERM comes ends: where that is the very
    instant of the signal (a loop's `sleep 1` ending on the whole second a deletion or a failed
    liveness probe's kill comes), what the trap writes is in the log (`kubectl logs`, and
    `--previous` for the instance a liveness kill restarted), as it is a moment later."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        script = ["sh", "-c", "trap 'echo bye; exit 0' TERM; echo hi; while true; do sleep 1; done"]
        deleted = pod("deleted", grace=5, restart="Never", finalizers=["test.nanokube.io/keep"])
        probed = pod("probed", grace=5)
        probed["spec"]["containers"][0]["livenessProbe"] = {"exec": {"command": ["false"]}, "initialDelaySeconds": 1,
                                                            "periodSeconds": 3, "failureThreshold": 1}
        for p in (deleted, probed):
            p["spec"]["containers"][0]["command"] = script
            await pods.create(p)
            await eventually(phase_is(pods, p["metadata"]["name"], "Running"))
        await clock.advance(2)
        await pods.delete("deleted", "default")
        await eventually(phase_is(pods, "deleted", "Succeeded"))
        assert await mgr.read_log("default", "deleted", "app", {}) == b"hi\nbye\n"
        await clock.advance(1)  # the probe fails at 3 s, as the loop's third sleep ends: killed, then restarted

        async def restarted():
            c = (await pods.get("probed", "default"))["status"]["containerStatuses"][0]
            return c["restartCount"] == 1 and "running" in c["state"]
        await eventually(restarted)
        assert await mgr.read_log("default", "probed", "app", {"previous": "true"}) == b"hi\nbye\n"
        await pods.patch("deleted", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_host_network_pod_resolves_names_through_its_copy_of_the_nodes_hosts_file():
    """A hostNetwork pod's /etc/hosts is the kubelet's copy of its node's: localhost and the node's
    own name resolve through it (busybox's ping looks them up there), as they do on the node."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        p = pod("hn", restart="Never")
        p["spec"]["hostNetwork"] = True
        p["spec"]["containers"][0]["command"] = ["sh", "-c", "ping -c 1 localhost >/dev/null && ping -c 1 gpu-0"]
        await pods.create(p)
        done = await eventually(phase_is(pods, "hn", "Succeeded"))
        log = (await mgr.read_log("default", "hn", "app", {})).decode()
        assert log.startswith(f"PING gpu-0 ({done['status']['hostIP']}): ") and "1 packets received" in log, log


async def test_a_term_trap_cuts_a_wait_for_a_background_sleep_short():
    """`trap ...; sleep infinity & wait`, the way a script lets its trap run at once: the kubelet's
    SIGTERM interrupts the wait, the trap's output is in the log (`kubectl logs`) and its `exit 0`
    ends the container (Completed), where a foreground sleep would be waited out until the kill."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        p = pod("waiting", grace=30, restart="Never", finalizers=["test.nanokube.io/keep"])
        p["spec"]["containers"][0]["command"] = ["sh", "-c", "trap 'echo bye; exit 0' TERM; echo hi; "
                                                 "sleep infinity & wait"]
        await pods.create(p)
        await eventually(phase_is(pods, "waiting", "Running"))
        await clock.advance(2.5)
        await pods.delete("waiting", "default")
        done = await eventually(phase_is(pods, "waiting", "Succeeded"))
        assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        assert await mgr.read_log("default", "waiting", "app", {}) == b"hi\nbye\n"
        await pods.patch("waiting", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_pod_past_its_active_deadline_is_stopped_and_failed(env):
    """activeDeadlineHandler: once spec.activeDeadlineSeconds have passed since the pod started (running
    or crash-looping), the kubelet records DeadlineExceeded, stops the containers and the pod is Failed
    with reason DeadlineExceeded; the pod object stays."""
    pods, clock = env
    p = pod("capped", restart="Never")
    p["spec"]["activeDeadlineSeconds"] = 3
    await pods.create(p)
    loop = pod("crashing", annotations={"sim.nanokube.io/run-seconds": "1", "sim.nanokube.io/exit-code": "1"})
    loop["spec"]["activeDeadlineSeconds"] = 3
    await pods.create(loop)
    await eventually(phase_is(pods, "capped", "Running"))
    await clock.advance(2)
    assert (await pods.get("capped", "default"))["status"]["phase"] == "Running"
    await clock.advance(1)
    for name in ("capped", "crashing"):
        got = await eventually(phase_is(pods, name, "Failed"))
        assert (got["status"]["reason"], got["status"]["message"]) == (
            "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
        assert not got["metadata"].get("deletionTimestamp")
    t = (await pods.get("capped", "default"))["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (143, "Error")

    async def exceeded():  # written from the recorder's queue
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return {(e["involvedObject"]["name"], e["type"]) for e in items if e["reason"] == "DeadlineExceeded"}
    await becomes(exceeded, {("capped", "Normal"), ("crashing", "Normal")})


async def test_grace_period_shorter_than_stop_time_kills(env):
    pods, clock = env
    await pods.create(pod("stubborn", annotations={"sim.nanokube.io/stop-seconds": "60"}, grace=2))
    await eventually(phase_is(pods, "stubborn", "Running"))
    seen: list[int] = []
    await pods.delete("stubborn", "default")
    await clock.advance(2)

    async def killed_or_gone():
        try:
            p = await pods.get("stubborn", "default")
        except APIError:
            return True
        term = (p["status"]["containerStatuses"][0]["state"]).get("terminated")
        if term:
            seen.append(term["exitCode"])
        return False
    assert await eventually(killed_or_gone)
    assert set(seen) <= {137}


async def test_a_cancelled_wait_leaves_no_task_pending():
    """A pod worker stopped mid-wait (its pod deleted) cancels the tasks the wait started, so
    none is left for the loop to report as destroyed while pending."""
    import asyncio
    from types import SimpleNamespace

    from nanokube.node.lifecycle import PodWorker

    clock = ManualClock()
    worker = PodWorker(SimpleNamespace(clock=clock), {"metadata": {"name": "p", "uid": "u"}, "spec": {}})
    before = asyncio.all_tasks()
    wait = asyncio.create_task(worker._wait(clock.monotonic() + 60))
    for _ in range(3):
        await asyncio.sleep(0)
    started = asyncio.all_tasks() - before - {wait}
    assert len(started) == 2, "the wait runs a timer and a change watcher"
    wait.cancel()
    await asyncio.gather(wait, return_exceptions=True)
    await asyncio.sleep(0)
    assert all(t.done() for t in started)


async def test_conditions_keep_their_transition_time_until_their_status_changes(env):
    """Upstream's status manager keeps a condition's lastTransitionTime while its status stays;
    the kubelet's writes do not restamp them."""
    pods, clock = env
    await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5", "sim.nanokube.io/exit-code": "1"},
                          grace=30, finalizers=["test.nanokube.io/keep"]))
    started = clock.rfc3339()
    p = await eventually(phase_is(pods, "loop", "Running"))
    assert cond(p, "Ready") == {"type": "Ready", "status": "True", "lastProbeTime": None,
                                "lastTransitionTime": started, "observedGeneration": 1}, \
        "a Ready condition that turned True keeps no reason from when it was False"
    await clock.advance(5)  # the first exit restarts at once; the second backs off

    async def restarted():
        p = await pods.get("loop", "default")
        return p["status"]["containerStatuses"][0]["restartCount"] == 1 and conds(p)["Ready"] == "True"
    await eventually(restarted)
    await clock.advance(5)
    crashed = clock.rfc3339()

    async def backing_off():
        p = await pods.get("loop", "default")
        return p if conds(p)["Ready"] == "False" else None
    p = await eventually(backing_off)
    assert cond(p, "Ready")["lastTransitionTime"] == crashed
    assert all(cond(p, t)["lastTransitionTime"] == started for t in ("Initialized", "PodScheduled"))
    await clock.advance(1)
    await pods.delete("loop", "default")  # the finalizer keeps the finished pod to read
    p = await eventually(phase_is(pods, "loop", "Failed"))  # SIGTERM ends it (143): a terminal pod that failed
    ready = cond(p, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "PodFailed"
    assert ready["lastTransitionTime"] == crashed, "Ready stayed False: its transition time stays"
    await pods.patch("loop", {"metadata": {"finalizers": None}}, namespace="default")


async def test_other_writers_conditions_stay_first(env):
    pods, _ = env
    await pods.create(pod("gated", node=None))
    gate = {"type": "example.com/Warm", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await pods.patch("gated", {"status": {"conditions": [gate]}}, namespace="default", subresource="status")
    await pods.create_subresource("gated", "binding", {"metadata": {"name": "gated"},
                                                       "target": {"kind": "Node", "name": "gpu-0"}}, "default")
    p = await eventually(phase_is(pods, "gated", "Running"))
    assert [c["type"] for c in p["status"]["conditions"]] == [
        "example.com/Warm", "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert cond(p, "example.com/Warm") == {**gate, "lastProbeTime": None}  # a zero time, served null


async def test_the_status_observes_the_generation_of_the_spec_acted_on(env):
    """PodObservedGenerationTracking (GA): status.observedGeneration and each kubelet condition's
    observedGeneration are the generation of the spec the kubelet last acted on, also for a spec
    change that needs no action (activeDeadlineSeconds)."""
    pods, _ = env
    await pods.create(pod("gen"))
    p = await eventually(phase_is(pods, "gen", "Running"))
    assert p["metadata"]["generation"] == 1 and p["status"]["observedGeneration"] == 1
    assert [c.get("observedGeneration") for c in p["status"]["conditions"]] == [1] * 5
    await pods.patch("gen", {"spec": {"activeDeadlineSeconds": 600}}, namespace="default")

    async def observed():
        p = await pods.get("gen", "default")
        return p if p["status"].get("observedGeneration") == 2 else None
    p = await eventually(observed)
    assert p["metadata"]["generation"] == 2
    assert [c.get("observedGeneration") for c in p["status"]["conditions"]] == [2] * 5


async def test_an_init_containers_run_times_stay_as_later_status_writes_come(env):
    """A completed init container's startedAt and finishedAt are when it ran, not rewritten by each
    later status write (here: the one observing a new generation)."""
    pods, clock = env
    p = pod("inits")
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    await pods.create(p)
    ran = (await eventually(phase_is(pods, "inits", "Running")))["status"]["initContainerStatuses"][0]["state"]
    await clock.advance(5)
    await pods.patch("inits", {"spec": {"activeDeadlineSeconds": 600}}, namespace="default")

    async def observed():
        p = await pods.get("inits", "default")
        return p if p["status"].get("observedGeneration") == 2 else None
    assert (await eventually(observed))["status"]["initContainerStatuses"][0]["state"] == ran


# --- the status patch ---------------------------------------------------------------------

NOW, LATER = "2027-01-15T08:00:00Z", "2027-01-15T08:00:05Z"
POD_SCHEMA = schema.kind_schema("", "v1", "Pod")


def kubelet_status(phase, ready, reason="", now=NOW, ip="10.244.0.2", extra=()):
    def c(t, ok, why=""):
        return {"type": t, "status": "True" if ok else "False", "lastProbeTime": None, "lastTransitionTime": now} | (
            {"reason": why} if why else {})
    return {"phase": phase, "hostIP": "172.18.0.2", "hostIPs": [{"ip": "172.18.0.2"}], "podIP": ip,
            "podIPs": [{"ip": ip}], "startTime": NOW,
            "conditions": [*extra, c("PodReadyToStartContainers", True), c("Initialized", True),
                           c("Ready", ready, reason), c("ContainersReady", ready, reason), c("PodScheduled", True)],
            "containerStatuses": [{"name": "app", "ready": ready, "state": {"running": {}} if ready else {
                "waiting": {"reason": "ContainerCreating"}}}]}


GATE = {"type": "example.com/Warm", "status": "True"}
SCHEDULED = {"phase": "Pending", "qosClass": "BestEffort",
             "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": None}]}
TRANSITIONS = [
    (SCHEDULED, kubelet_status("Pending", False, "ContainersNotReady")),
    ({**SCHEDULED, "conditions": [GATE, *SCHEDULED["conditions"]]},
     kubelet_status("Pending", False, "ContainersNotReady", extra=[GATE])),
    (kubelet_status("Pending", False, "ContainersNotReady"), kubelet_status("Running", True)),
    (kubelet_status("Running", True), kubelet_status("Running", False, "ContainersNotReady", now=LATER)),
    (kubelet_status("Running", True, extra=[GATE]), kubelet_status("Failed", False, "PodCompleted", extra=[GATE])),
    (kubelet_status("Running", True), kubelet_status("Running", True, ip="10.244.0.3")),
    ({"conditions": list(reversed(kubelet_status("Running", True)["conditions"]))}, kubelet_status("Running", True)),
]


@pytest.mark.parametrize("live,new", TRANSITIONS)
def test_the_status_patch_makes_the_new_status_on_the_server(live, new):
    """Merged by the server's strategic merge patch, the patch leaves exactly the new status
    (item order included), the fields the kubelet does not write untouched."""
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": live}
    got = strategic.apply(obj, {"status": status_patch(live, new)}, POD_SCHEMA)["status"]
    assert got == {**live, **new}


def test_the_status_patch_carries_only_what_changed():
    pending, running = kubelet_status("Pending", False, "ContainersNotReady"), kubelet_status("Running", True)
    patch = status_patch(pending, running)
    assert patch == {"phase": "Running",
                     "conditions": [{"type": "Ready", "status": "True", "reason": None},
                                    {"type": "ContainersReady", "status": "True", "reason": None}],
                     "containerStatuses": running["containerStatuses"]}
    assert status_patch(running, running) == {}


def test_a_write_that_changes_nothing_is_skipped():
    sent = []

    async def patch(name, body, patch_type, namespace, subresource):
        sent.append(body)
        return strategic.apply(worker.pod, body, POD_SCHEMA)

    agent = SimpleNamespace(clock=ManualClock(), host_ip="172.18.0.2", pods=SimpleNamespace(patch=patch))
    worker = PodWorker(agent, {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
                               "spec": {"containers": [{"name": "app"}]}, "status": SCHEDULED})
    worker.ip, worker.start_time = "10.244.0.2", NOW
    for _ in range(2):
        asyncio.run(worker._write("Pending", [], False, NOW, "ContainersNotReady"))
    assert len(sent) == 1 and sent[0]["metadata"] == {"uid": "u1"}, "the uid is the patch's precondition"


def test_an_older_copy_of_the_pod_does_not_replace_a_newer_one():
    worker = PodWorker(SimpleNamespace(clock=ManualClock()), {"metadata": {"name": "p", "uid": "u", "resourceVersion": "7"}})
    worker.update({"metadata": {"name": "p", "uid": "u", "resourceVersion": "6"}})
    assert worker.pod["metadata"]["resourceVersion"] == "7" and not worker.changed.is_set()
    worker.update({"metadata": {"name": "p", "uid": "u", "resourceVersion": "8"}})
    assert worker.pod["metadata"]["resourceVersion"] == "8" and worker.changed.is_set()


async def test_the_active_deadline_also_ends_a_pod_that_never_got_its_containers_started(env):
    """The kubelet checks activeDeadlineSeconds before anything else at each sync: a pod still
    pulling an image, backing off an init container's failed pull, or waiting for a volume is
    Failed with reason DeadlineExceeded once it passes; each container that never ran is
    terminated as TerminatePod leaves it (ContainerStatusUnknown, 137)."""
    pods, clock = env
    slow = pod("slow-pull", annotations={"sim.nanokube.io/pull-seconds": "60"})
    init = pod("init-pull", annotations={"sim.nanokube.io/pull-error": "unauthorized"})
    init["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    volume = pod("no-volume")
    volume["spec"]["volumes"] = [{"name": "config", "configMap": {"name": "missing"}}]
    volume["spec"]["containers"][0]["volumeMounts"] = [{"name": "config", "mountPath": "/etc/config"}]
    for p in (slow, init, volume):
        p["spec"]["activeDeadlineSeconds"] = 5
        await pods.create(p)
    await clock.advance(4)
    assert {(await pods.get(n, "default"))["status"]["phase"] for n in ("slow-pull", "init-pull", "no-volume")} == {
        "Pending"}
    await clock.advance(1)
    unknown = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                              "message": "The container could not be located when the pod was terminated",
                              "startedAt": None, "finishedAt": None}}
    for name in ("slow-pull", "init-pull", "no-volume"):
        got = (await eventually(phase_is(pods, name, "Failed")))["status"]
        assert (got["reason"], got["message"]) == ("DeadlineExceeded",
                                                   "Pod was active on the node longer than the specified deadline")
        # a pod not initialized keeps its app containers waiting (TerminatePod's hasPodInitialized)
        want = {"waiting": {"reason": "PodInitializing"}} if name == "init-pull" else unknown
        assert [c["state"] for c in got["containerStatuses"]] == [want], name
        assert "containerID" not in got["containerStatuses"][0]
        assert conds({"status": got})["Ready"] == "False"
    got = (await pods.get("init-pull", "default"))["status"]
    assert [c["state"] for c in got["initContainerStatuses"]] == [unknown]
    assert conds({"status": got})["Initialized"] == "False"

    async def exceeded():  # written from the recorder's queue
        items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return sorted(e["involvedObject"]["name"] for e in items if e["reason"] == "DeadlineExceeded")
    await becomes(exceeded, ["init-pull", "no-volume", "slow-pull"])
    await clock.advance(60)  # nothing starts later
    assert (await pods.get("slow-pull", "default"))["status"]["phase"] == "Failed"
    assert "Started" not in {e["reason"] for e in (await pods.c.resource("", "v1", "events").list(
        namespace="default"))[0]}
    await pods.delete("slow-pull", "default")
    assert await eventually(gone(pods, "slow-pull"))


class _TickingClock(ManualClock):
    """A clock that moves between two readings, as a real one does."""

    def monotonic(self) -> float:
        self._mono = getattr(self, "_mono", 0.0) + 1e-6
        return super().monotonic() + self._mono


async def test_an_init_containers_last_line_at_its_end_is_in_its_log():
    """What an init container's command writes at the instant it ends (`echo prepared` after its
    sleep) is in its log: its end was reckoned just before its output was scheduled, so on a clock
    that moves between readings the last line came a moment after the end and was dropped."""
    clock = _TickingClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        p = pod("prepared")
        p["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1.36",
                                        "command": ["sh", "-c", "echo preparing; sleep 5; echo prepared"]}]
        created = await pods.create(p)
        await clock.advance(6)
        assert await eventually(phase_is(pods, "prepared", "Running"))
        worker = mgr.agents["gpu-0"].workers[created["metadata"]["uid"]]
        assert worker.io.serve_log("init", LogOptions()) == b"preparing\nprepared\n"
