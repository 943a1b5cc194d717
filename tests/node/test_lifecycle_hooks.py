"""Container lifecycle hooks on the simulated runtime, on the node's virtual clock: postStart and
preStop exec (the simulated shell on the container's files), httpGet and sleep, with the kubelet's
events, states and grace-period accounting."""

from types import SimpleNamespace

import pytest
from multidict import CIMultiDict

from nanokube.clock import Clock, parse_time
from nanokube.node.lifecycle import STOP_EXIT_CODE, STOP_SECONDS
from nanokube.machinery.streaming import LogOptions
from tests.controllers import eventually
from tests.node import ManualClock
from tests.node.test_container_events import pod_events
from tests.node.test_lifecycle import gone, node_agents, phase_is, pod


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        yield s.client.resource("", "v1", "pods"), clock, mgr


#: a pod whose containers end at once on SIGTERM, exiting 143 (a server's handler that exits), where an
#: interpreted command with no TERM trap, its container's first process, would run on past it
ENDS_ON_SIGTERM = {STOP_EXIT_CODE: "143"}


def hooked(name, command, restart="Never", grace=None, annotations=None, **lifecycle):
    p = pod(name, restart=restart, grace=grace, annotations=annotations)
    p["spec"]["containers"][0] |= {"command": command, "lifecycle": lifecycle}
    return p


def app_status(p):
    return p["status"]["containerStatuses"][0]


def worker(mgr, p):
    return mgr.agents[p["spec"]["nodeName"]].workers[p["metadata"]["uid"]]


async def delete_killed(pods, name):
    """Delete pod `name` and wait for the kubelet's Killing Event, after which its preStop hook runs
    on the node's clock: an advance made before the kubelet has begun the hook would pass it by."""
    await pods.delete(name, "default")
    await killed(pods, name)


async def killed(pods, name):
    """Wait for pod `name`'s Killing Event (a delete, a liveness kill, a restart for a new image)."""
    async def killing():
        return "Killing" in [e[1] for e in await pod_events(pods, name)]
    await eventually(killing)


async def test_post_start_writes_a_file_the_main_command_waits_for_before_running_is_reported(env):
    pods, clock, mgr = env
    main = ["sh", "-c", "until [ -f /tmp/ready ]; do sleep 1; done; cat /tmp/ready"]
    await pods.create(hooked("warm", main, postStart={"exec": {"command": [
        "sh", "-c", "sleep 2; echo warmed up > /tmp/ready"]}}))
    created = await eventually(lambda: _started(pods, "warm"))
    await clock.advance(1.5)  # the hook still runs: the status has not said Running
    p = await pods.get("warm", "default")
    assert p["status"]["phase"] == "Pending" and "waiting" in app_status(p)["state"]
    await clock.advance(0.5)
    running = await eventually(phase_is(pods, "warm", "Running"))
    assert app_status(running)["state"]["running"]["startedAt"] == created  # started before its hook ran
    await clock.advance(1)
    done = await eventually(phase_is(pods, "warm", "Succeeded"))
    assert app_status(done)["state"]["terminated"]["exitCode"] == 0
    log = worker(mgr, done).io.serve_log("app", LogOptions())
    assert log == b"warmed up\n"


async def _started(pods, name):
    """When the container started, from its Started event's time (None before it)."""
    for _, reason, _, _, _ in await pod_events(pods, name):
        if reason == "Started":
            items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
            return next(e["firstTimestamp"] for e in items
                        if e["involvedObject"]["name"] == name and e["reason"] == "Started")
    return None


async def test_a_failed_post_start_kills_the_container_which_restarts_with_back_off(env):
    pods, clock, _ = env
    await pods.create(hooked("broken", ["sleep", "infinity"], restart="Always", annotations=ENDS_ON_SIGTERM,
                             postStart={"exec": {"command": ["sh", "-c", "echo no config >&2; exit 2"]}}))

    async def crash_looping():
        p = await pods.get("broken", "default")
        st = (p.get("status") or {}).get("containerStatuses") or [{}]
        return p if (st[0].get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff" else None
    p = await eventually(crash_looping)
    s = app_status(p)
    assert s["restartCount"] == 1 and s["lastState"]["terminated"]["exitCode"] == 143
    path = "spec.containers{app}"
    events = [e for e in await pod_events(pods, "broken") if e[1] in ("Started", "FailedPostStartHook", "Killing")]
    assert events == [("Normal", "Started", path, "Container started", 2),
                      ("Warning", "FailedPostStartHook", path, "PostStartHook failed", 2),
                      ("Normal", "Killing", path, "FailedPostStartHook", 2)]
    assert p["status"]["phase"] == "Running" and not s["ready"]


async def test_a_failed_post_start_under_restart_policy_never_fails_the_pod_with_its_message_logged(env):
    """killContainer (FailedPostStartHook) stops the container with the pod's grace period: its
    `sleep infinity`, PID 1 with no TERM handler, runs on past SIGTERM and is killed (137) when
    the 2 s are up; the pod is then Failed."""
    pods, clock, mgr = env
    await pods.create(hooked("once", ["sleep", "infinity"], grace=2, postStart={"exec": {"command": ["false"]}}))
    await killed(pods, "once")
    await clock.advance(1.9)
    assert (await pods.get("once", "default"))["status"]["phase"] == "Running"  # it outlived the SIGTERM
    await clock.advance(0.1)
    p = await eventually(phase_is(pods, "once", "Failed"))
    t = app_status(p)["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (137, "Error")
    assert parse_time(t["finishedAt"]) - parse_time(t["startedAt"]) >= 2
    reasons = [e[1] for e in await pod_events(pods, "once")]
    assert reasons.index("FailedPostStartHook") > reasons.index("Started")


async def test_an_http_get_hook_reaches_any_port_of_the_pod_not_left_to_a_stopped_container(env):
    """A real hook reaches whatever listens at the pod's IP, declared or not: the simulated pod's
    servers answer on its own declared port, and on an undeclared one its image's own server listens
    on (nginx's 80, as a real nginx container does). What it can know is closed is: a port no
    process listens on (`sleep infinity` declaring none: refused, the pod fails), a port only a
    container not running declares (a sidecar's postStart to the app's port, before the app
    starts: refused, the sidecar killed, the app never started), and localhost, which from the
    kubelet is the node's own (refused: the pod fails)."""
    pods, clock, _ = env
    ok = hooked("served", ["sleep", "infinity"], postStart={"httpGet": {"path": "/warm", "port": "http"}})
    ok["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    await pods.create(ok)
    undeclared = hooked("undeclared", [], postStart={"httpGet": {"path": "/warm", "port": 80}})
    del undeclared["spec"]["containers"][0]["command"]
    undeclared["spec"]["containers"][0]["image"] = "nginx:1.27"
    await pods.create(undeclared)
    await pods.create(hooked("closed", ["sleep", "infinity"], annotations=ENDS_ON_SIGTERM,
                             postStart={"httpGet": {"path": "/warm", "port": 9}}))
    await pods.create(hooked("loopback", ["sleep", "infinity"], annotations=ENDS_ON_SIGTERM, postStart={"httpGet": {
        "path": "/warm", "port": 9, "host": "localhost"}}))
    early = with_sidecar("early", {"httpGet": {"path": "/warm", "port": 8080}}, "true")
    early["metadata"]["annotations"] = ENDS_ON_SIGTERM  # (ended at once, not after the grace)
    early["spec"]["containers"][0] |= {"command": ["sleep", "infinity"], "ports": [{"containerPort": 8080}]}
    await pods.create(early)
    for name in ("served", "undeclared"):
        await eventually(phase_is(pods, name, "Running"))
        assert "FailedPostStartHook" not in [e[1] for e in await pod_events(pods, name)]
    await eventually(phase_is(pods, "loopback", "Failed"))
    await eventually(phase_is(pods, "closed", "Failed"))

    def hook_failed(name, path):
        async def told():
            return ("Warning", "FailedPostStartHook", path, "PostStartHook failed") in \
                [e[:4] for e in await pod_events(pods, name)]
        return told
    await eventually(hook_failed("loopback", "spec.containers{app}"))
    await eventually(hook_failed("closed", "spec.containers{app}"))
    await eventually(hook_failed("early", "spec.initContainers{side}"))
    p = await pods.get("early", "default")
    assert p["status"]["phase"] == "Pending"
    assert not any(e[2] == "spec.containers{app}" for e in await pod_events(pods, "early"))


async def test_an_https_http_get_hook_falls_back_to_the_simulated_servers_plain_http(env):
    """The simulated pod's servers speak plain HTTP (as its port-forward's does): an HTTPS httpGet
    hook's request gets an HTTP answer to its TLS hello, so the kubelet makes it again over HTTP,
    which passes the hook, and tells so (a LifecycleHTTPFallback Warning on the pod, its address
    in the message) and counts it on the node's kubelet_lifecycle_handler_http_fallbacks_total."""
    pods, clock, mgr = env
    p = hooked("tls", ["sleep", "infinity"], postStart={"httpGet": {"path": "/warm", "port": 8443, "scheme": "HTTPS"}})
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 8443}]
    await pods.create(p)
    p = await eventually(phase_is(pods, "tls", "Running"))
    ip = p["status"]["podIP"]
    told = ("Warning", "LifecycleHTTPFallback", "",
            f"request to HTTPS lifecycle hook {ip}:8443 got HTTP response, retry with HTTP succeeded", 1)

    async def events():  # the recorder writes from its own task, maybe after the Running status
        ev = await pod_events(pods, "tls")
        return ev if told in ev else None
    assert "FailedPostStartHook" not in [e[1] for e in await eventually(events)]
    server = mgr.kubelet_for(p["spec"]["nodeName"])
    text = (await server.serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/metrics")).text
    assert "\nkubelet_lifecycle_handler_http_fallbacks_total 1\n" in text


async def test_a_pre_stop_sleep_delays_sigterm_and_the_pods_removal(env):
    pods, clock, _ = env
    await pods.create(hooked("drain", ["sleep", "infinity"], grace=30, annotations=ENDS_ON_SIGTERM,
                             preStop={"sleep": {"seconds": 3}}))
    await eventually(phase_is(pods, "drain", "Running"))
    await delete_killed(pods, "drain")
    await clock.advance(2.9)
    p = await pods.get("drain", "default")
    assert p["status"]["phase"] == "Running"
    assert [e[1] for e in await pod_events(pods, "drain")][-1] == "Killing"  # the hook runs after Killing
    await clock.advance(0.1)
    assert await eventually(gone(pods, "drain"))


async def test_a_pre_stop_exec_writes_before_sigterm_and_a_failed_one_is_told(env):
    """The preStop exec runs on the container's files before SIGTERM (the command's trap reads
    what it wrote and exits with it); a failing preStop is a FailedPreStopHook Warning, and SIGTERM follows."""
    pods, clock, mgr = env
    main = ["sh", "-c", "trap 'cat /tmp/drained; exit 0' TERM; while true; do sleep 1; done"]
    keep = ["test.nanokube.io/keep"]
    p = hooked("graceful", main, grace=30, preStop={"exec": {"command": ["sh", "-c", "sleep 1.5; echo drained > /tmp/drained"]}})
    p["metadata"]["finalizers"] = keep
    await pods.create(p)
    bad = hooked("bad", ["sleep", "infinity"], grace=30, annotations=ENDS_ON_SIGTERM,
                 preStop={"exec": {"command": ["sh", "-c", "exit 7"]}})
    await pods.create(bad)
    for name in ("graceful", "bad"):
        await eventually(phase_is(pods, name, "Running"))
        await delete_killed(pods, name)
    await clock.advance(2)  # the hook (1.5 s), SIGTERM, then the trap once the loop's `sleep 1` ends
    done = await eventually(phase_is(pods, "graceful", "Succeeded"))
    assert app_status(done)["state"]["terminated"]["exitCode"] == 0
    assert worker(mgr, done).io.serve_log("app", LogOptions()) == b"drained\n"
    await eventually(gone(pods, "bad"))
    assert ("Warning", "FailedPreStopHook", "spec.containers{app}", "PreStopHook failed", 1) in \
        await pod_events(pods, "bad")
    await pods.patch("graceful", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_pre_stop_past_the_grace_period_is_cut_off_and_sigterm_gets_two_seconds(env):
    pods, clock, _ = env
    stubborn = ["sh", "-c", "trap 'sleep 5; exit 0' TERM; while true; do sleep 1; done"]
    await pods.create(hooked("slow", stubborn, grace=5, preStop={"exec": {"command": ["sleep", "60"]}}))
    await eventually(phase_is(pods, "slow", "Running"))
    await delete_killed(pods, "slow")
    await clock.advance(6.9)  # the hook cut off at 5 s, SIGTERM then, the 2 s floor not up
    assert (await pods.get("slow", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    assert await eventually(gone(pods, "slow"))
    assert "FailedPreStopHook" not in [e[1] for e in await pod_events(pods, "slow")]


async def test_a_pre_stop_sleep_the_grace_period_cuts_off_is_counted_on_the_kubelets_metrics(env):
    """kubelet_sleep_action_terminated_early_total counts sleep hooks ended before their time (here
    by the grace period a delete shortens to 3 s); one that ran its course is not counted."""
    pods, clock, mgr = env

    async def cut() -> float:
        text = (await mgr.kubelet_for("gpu-0").serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                     "/metrics")).text
        assert "# TYPE kubelet_sleep_action_terminated_early_total counter\n" in text
        return float(text.split("\nkubelet_sleep_action_terminated_early_total ", 1)[1].split("\n", 1)[0])

    async def counted() -> bool:
        return await cut() == 1
    await pods.create(hooked("done", ["sleep", "infinity"], grace=2, preStop={"sleep": {"seconds": 1}}))
    await pods.create(hooked("cut", ["sleep", "infinity"], grace=30, preStop={"sleep": {"seconds": 20}}))
    for name in ("done", "cut"):
        await eventually(phase_is(pods, name, "Running"))
    await delete_killed(pods, "done")
    await clock.advance(3)  # the hook's 1 s, then its `sleep`, ignoring SIGTERM, killed 2 s after (the floor)
    await eventually(gone(pods, "done"))
    assert await cut() == 0
    await pods.delete("cut", "default", grace_period_seconds=3)
    await killed(pods, "cut")
    await clock.advance(3)  # the hook cut off at 3 s, SIGTERM then
    await eventually(counted)
    await clock.advance(2)
    await eventually(gone(pods, "cut"))
    assert await cut() == 1


@pytest.mark.parametrize("after", [0, 0.5, 1, 1.5, 2, 5])
async def test_a_container_waiting_for_what_a_pre_stop_hook_writes_ends_on_its_own(env, after):
    """While main's preStop hook runs, the other container (no hook: its SIGTERM comes at once, and
    it ignores it) finds the file the hook wrote in their emptyDir and exits 0 by itself: it ends
    so, not as main does (its `sleep`, ignoring the SIGTERM after the hook, killed when the grace
    period is up: 137). Whenever the signal lands in its loop (deleted `after` seconds in: before
    its first pass, as a pass begins, in a pass's `sleep`, passes later)."""
    pods, clock, _ = env
    p = hooked("pair", ["sleep", "infinity"], grace=5, preStop={"exec": {"command": [
        "sh", "-c", "echo draining > /shared/drain; sleep 3"]}})
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    p["spec"]["containers"].append({"name": "watcher", "image": "busybox:1.36", "command": [
        "sh", "-c", "trap '' TERM; until [ -f /shared/drain ]; do sleep 1; done; "
                    '[ "$(cat /shared/drain)" = draining ]']})
    p["spec"]["volumes"] = [{"name": "shared", "emptyDir": {}}]
    for c in p["spec"]["containers"]:
        c["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
    await pods.create(p)
    await eventually(phase_is(pods, "pair", "Running"))
    await clock.advance(after)
    await delete_killed(pods, "pair")
    await clock.advance(3)
    assert (await pods.get("pair", "default"))["status"]["phase"] == "Running"  # main's grace is not up
    await clock.advance(2)
    done = await eventually(phase_is(pods, "pair", "Failed"))
    codes = {s["name"]: s["state"]["terminated"]["exitCode"] for s in done["status"]["containerStatuses"]}
    assert codes == {"app": 137, "watcher": 0}
    await pods.patch("pair", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_waiting_container_deleted_passes_into_its_loop_runs_its_term_trap(env):
    """A command trapping TERM and waiting for a file that never comes, deleted 5.5 s in (its wait
    gone on at several passes), runs its trap once the `sleep 1` then running ends: exit 0 half a
    second later, not 143 at once as if the signal could not be worked out."""
    pods, clock, mgr = env
    command = ["sh", "-c", "trap 'echo stopping; exit 0' TERM; until [ -f /tmp/never ]; do sleep 1; done"]
    p = hooked("waiter", command, grace=30)
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    await pods.create(p)
    await eventually(phase_is(pods, "waiter", "Running"))
    await clock.advance(5.5)
    await delete_killed(pods, "waiter")
    await clock.advance(0.4)
    assert (await pods.get("waiter", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    done = await eventually(phase_is(pods, "waiter", "Succeeded"))
    assert app_status(done)["state"]["terminated"]["exitCode"] == 0
    assert worker(mgr, done).io.serve_log("app", LogOptions()) == b"stopping\n"
    await pods.patch("waiter", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_hook_command_the_simulation_does_not_run_passes_as_probes_do(env):
    """A postStart of the image's own script (not interpreted, no exec annotation) passes, as the
    simulated runtime's exec probes do, where a command it runs is held to its exit code."""
    pods, clock, _ = env
    await pods.create(hooked("scripted", ["sleep", "infinity"], restart="Always",
                             postStart={"exec": {"command": ["/opt/bin/warm-cache.sh", "--models"]}}))
    p = await eventually(phase_is(pods, "scripted", "Running"))
    assert "running" in app_status(p)["state"] and app_status(p)["restartCount"] == 0
    assert "FailedPostStartHook" not in [e[1] for e in await pod_events(pods, "scripted")]


async def test_a_container_restarted_for_a_new_image_runs_its_pre_stop_then_waits_out_its_sigterm(env):
    """killContainer before the new image's start: the preStop sleep (2 s), then SIGTERM with the
    rest of the pod's 5 s grace, which `sleep` (PID 1, no TERM handler) outlives: SIGKILL at 5 s
    (lastState 137), the new instance started only then."""
    pods, clock, _ = env
    p = hooked("swap", ["sleep", "infinity"], restart="Always", grace=5, preStop={"sleep": {"seconds": 2}})
    await pods.create(p)
    await eventually(phase_is(pods, "swap", "Running"))
    p["spec"]["containers"][0]["image"] = "busybox:1.37"
    await pods.patch("swap", {"spec": {"containers": p["spec"]["containers"]}}, namespace="default")
    await killed(pods, "swap")
    await clock.advance(1.9)
    assert app_status(await pods.get("swap", "default"))["restartCount"] == 0  # the hook still runs
    await clock.advance(3.0)
    assert app_status(await pods.get("swap", "default"))["restartCount"] == 0  # SIGTERM ignored, grace not up
    await clock.advance(0.1)

    async def restarted():
        s = app_status(await pods.get("swap", "default"))
        return s["restartCount"] == 1 and s["image"].endswith("busybox:1.37") and s
    s = await eventually(restarted)
    assert (s["lastState"]["terminated"]["exitCode"], s["lastState"]["terminated"]["reason"]) == (137, "Error")
    assert "running" in s["state"]


async def test_a_container_restarted_for_a_new_image_ends_by_its_term_trap(env):
    """A restart's SIGTERM reaches the container's TERM trap as a deletion's does: it exits 3 once
    its loop's `sleep 1` ends, and the new instance starts then, not at the 30 s grace's end."""
    pods, clock, _ = env
    p = hooked("trapper", ["sh", "-c", "trap 'exit 3' TERM; while true; do sleep 1; done"], restart="Always", grace=30)
    await pods.create(p)
    await eventually(phase_is(pods, "trapper", "Running"))
    await clock.advance(0.5)
    p["spec"]["containers"][0]["image"] = "busybox:1.37"
    await pods.patch("trapper", {"spec": {"containers": p["spec"]["containers"]}}, namespace="default")
    await killed(pods, "trapper")
    await clock.advance(0.5)

    async def restarted():
        s = app_status(await pods.get("trapper", "default"))
        return s["restartCount"] == 1 and s
    s = await eventually(restarted)
    assert s["lastState"]["terminated"]["exitCode"] == 3


async def test_a_container_its_liveness_probe_kills_runs_its_pre_stop_first(env):
    """The docs' liveness example (`cat /tmp/healthy` fails from 30 s: killed at the 40 s tick)
    with a 5 s preStop sleep and grace 10: Killing at 40 s, the hook until 45 s, then SIGTERM with
    the 5 s left, which its `sh` (no TERM trap) ignores: its end (137) and restart at 50 s."""
    pods, clock, _ = env
    p = hooked("liveness", ["/bin/sh", "-c", "touch /tmp/healthy; sleep 30; rm -f /tmp/healthy; sleep 600"],
               restart="Always", grace=10, preStop={"sleep": {"seconds": 5}})
    p["spec"]["containers"][0]["livenessProbe"] = {"exec": {"command": ["cat", "/tmp/healthy"]},
                                                   "initialDelaySeconds": 5, "periodSeconds": 5}
    await pods.create(p)
    await eventually(phase_is(pods, "liveness", "Running"))
    await clock.advance(40)
    await killed(pods, "liveness")
    await clock.advance(4.9)
    assert app_status(await pods.get("liveness", "default"))["restartCount"] == 0  # its hook still runs
    await clock.advance(5)
    assert app_status(await pods.get("liveness", "default"))["restartCount"] == 0  # it outlived SIGTERM
    await clock.advance(0.1)

    async def restarted():
        s = app_status(await pods.get("liveness", "default"))
        return s if s["restartCount"] == 1 else None
    s = await eventually(restarted)
    assert s["lastState"]["terminated"]["exitCode"] == 137


def with_sidecar(name, post_start, check):
    """Pod `name` (restartPolicy Never) whose sidecar `side` has postStart `post_start`, then init
    container `check` running `check`, sharing an emptyDir at /shared; its app container exits 0."""
    p = pod(name, restart="Never")
    p["spec"]["containers"][0]["command"] = ["true"]
    p["spec"]["initContainers"] = [
        {"name": "side", "image": "busybox:1.36", "restartPolicy": "Always", "command": ["sleep", "infinity"],
         "lifecycle": {"postStart": post_start}},
        {"name": "check", "image": "busybox:1.36", "command": ["sh", "-c", check]}]
    p["spec"]["volumes"] = [{"name": "shared", "emptyDir": {}}]
    for c in p["spec"]["containers"] + p["spec"]["initContainers"]:
        c["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
    return p


def init_status(p, name):
    return next(s for s in p["status"]["initContainerStatuses"] if s["name"] == name)


async def test_a_sidecars_post_start_runs_before_the_next_init_container_starts(env):
    """startContainer runs postStart for a sidecar too, and the next init container starts only once
    it is done: `check` finds the file the sidecar's 3 s hook wrote and exits 0 (without the hook,
    or starting before its end, it exits 1 and fails the Never pod). The app done, the sidecar's
    `sleep` ignores its SIGTERM and is killed when the pod's 2 s grace period is up."""
    pods, clock, _ = env
    p = with_sidecar("side", {"exec": {"command": ["sh", "-c", "sleep 3; echo up > /shared/ready"]}},
                     '[ "$(cat /shared/ready)" = up ]')
    p["spec"]["terminationGracePeriodSeconds"] = 2
    await pods.create(p)
    started = parse_time(await eventually(lambda: _started(pods, "side")))  # the sidecar's
    await clock.advance(2.9)
    p = await pods.get("side", "default")
    assert init_status(p, "check")["state"] == {"waiting": {"reason": "PodInitializing"}}
    await clock.advance(0.1)
    await killed(pods, "side")  # the app ran `true`: the sidecar is stopped
    await clock.advance(2)
    done = await eventually(phase_is(pods, "side", "Succeeded"))
    assert init_status(done, "side")["state"]["terminated"]["exitCode"] == 137
    check = init_status(done, "check")
    assert check["state"]["terminated"]["exitCode"] == 0 and check["restartCount"] == 0
    assert parse_time(check["state"]["terminated"]["startedAt"]) >= started + 3
    assert init_status(done, "side")["restartCount"] == 0
    reasons = [e[1] for e in await pod_events(pods, "side")]
    assert "FailedPostStartHook" not in reasons


async def test_a_sidecar_whose_post_start_fails_restarts_and_holds_back_the_next_init_container(env):
    """A sidecar's failing postStart: FailedPostStartHook and Killing on spec.initContainers{side},
    it ends (143: the stop annotation, for a `sleep infinity` that would otherwise run out the
    grace period, 137) and starts again at once, then after its back-off (CrashLoopBackOff);
    `check` never starts while no start of the sidecar got through its hook."""
    pods, clock, _ = env
    p = with_sidecar("flaky", {"exec": {"command": ["sh", "-c", "exit 4"]}}, "true")
    p["metadata"]["annotations"] = ENDS_ON_SIGTERM
    await pods.create(p)

    async def backing_off():
        p = await pods.get("flaky", "default")
        st = [s for s in (p.get("status") or {}).get("initContainerStatuses") or () if s["name"] == "side"]
        return p if st and (st[0]["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff" else None
    p = await eventually(backing_off)
    side = init_status(p, "side")
    assert side["restartCount"] == 1 and side["lastState"]["terminated"]["exitCode"] == 143
    assert init_status(p, "check")["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert p["status"]["phase"] == "Pending"
    path = "spec.initContainers{side}"
    events = [e[:4] for e in await pod_events(pods, "flaky") if e[1] in ("FailedPostStartHook", "Killing")]
    assert events[:2] == [("Warning", "FailedPostStartHook", path, "PostStartHook failed"),
                          ("Normal", "Killing", path, "FailedPostStartHook")]
    assert not any(e[2] == "spec.initContainers{check}" for e in await pod_events(pods, "flaky"))


async def test_each_container_gets_its_sigterm_right_after_its_own_pre_stop(env):
    """killContainersWithSyncResult stops the containers side by side: `plain` (no hook) ends at
    once, `quick` (preStop sleep 2) 2 s later, `slow` (sleep 6) 6 s later, each finishedAt its own,
    not all at the slowest hook's end (their programs end at once on SIGTERM)."""
    pods, clock, _ = env
    p = hooked("staggered", ["sleep", "infinity"], grace=30, annotations=ENDS_ON_SIGTERM,
               preStop={"sleep": {"seconds": 2}})
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    p["spec"]["containers"][0]["name"] = "quick"
    p["spec"]["containers"] += [
        {"name": "slow", "image": "busybox:1.36", "command": ["sleep", "infinity"],
         "lifecycle": {"preStop": {"sleep": {"seconds": 6}}}},
        {"name": "plain", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]
    await pods.create(p)
    await eventually(phase_is(pods, "staggered", "Running"))
    await pods.delete("staggered", "default")
    await clock.advance(2)
    await clock.advance(4)
    done = await eventually(phase_is(pods, "staggered", "Failed"))
    ended = {s["name"]: (s["state"]["terminated"]["exitCode"], parse_time(s["state"]["terminated"]["finishedAt"]))
             for s in done["status"]["containerStatuses"]}
    at = ended["plain"][1]  # (the node's clock: the deletion's time is the server's)
    assert {name: (code, t - at) for name, (code, t) in ended.items()} == {
        "quick": (143, 2), "slow": (143, 6), "plain": (143, 0)}
    await pods.patch("staggered", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_finished_pods_sidecars_are_stopped_and_show_how_they_ended(env):
    """Once the app container exited for good (restartPolicy Never) the kubelet kills the pod: its
    sidecars stop as on deletion, Killing in reverse order, `proxy` (the later one) after its 2 s
    preStop sleep (SIGTERM ends it: 143), then `logger`, whose TERM trap exits 0 at its loop's next turn.
    Meanwhile the pod is Running with the app terminated and the sidecars running; then Succeeded
    (a sidecar's exit code does not count), each sidecar terminated with its own code, not waiting
    PodInitializing."""
    pods, clock, _ = env
    p = pod("done", restart="Never", grace=30, annotations=ENDS_ON_SIGTERM)
    p["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep 5"]
    p["spec"]["initContainers"] = [
        {"name": "logger", "image": "busybox:1.36", "restartPolicy": "Always",
         "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]},
        {"name": "proxy", "image": "busybox:1.36", "restartPolicy": "Always", "command": ["sleep", "infinity"],
         "lifecycle": {"preStop": {"sleep": {"seconds": 2}}}}]
    await pods.create(p)
    await eventually(phase_is(pods, "done", "Running"))
    await clock.advance(5)

    async def stopping():
        kills = [e[2:4] for e in await pod_events(pods, "done") if e[1] == "Killing"]
        return kills if len(kills) == 2 else None
    assert await eventually(stopping) == [("spec.initContainers{proxy}", "Stopping container proxy"),
                                          ("spec.initContainers{logger}", "Stopping container logger")]
    p = await pods.get("done", "default")
    assert p["status"]["phase"] == "Running"
    assert app_status(p)["state"]["terminated"]["exitCode"] == 0
    assert [list(s["state"]) for s in p["status"]["initContainerStatuses"]] == [["running"], ["running"]]
    ended = parse_time(app_status(p)["state"]["terminated"]["finishedAt"])
    await clock.advance(2)  # proxy's hook is done: its SIGTERM, then logger's turn
    await clock.advance(1)  # logger's `sleep 1` ends: its trap runs
    done = await eventually(phase_is(pods, "done", "Succeeded"))
    proxy, logger = (init_status(done, n)["state"]["terminated"] for n in ("proxy", "logger"))
    assert (proxy["exitCode"], proxy["reason"], parse_time(proxy["finishedAt"]) - ended) == (143, "Error", 2)
    assert (logger["exitCode"], logger["reason"]) == (0, "Completed")
    assert parse_time(logger["finishedAt"]) >= parse_time(proxy["finishedAt"])
    assert all(s.get("containerID") for s in done["status"]["initContainerStatuses"])


async def test_a_sidecar_waiting_out_its_back_off_as_the_pod_ends_keeps_that_state(env):
    """A sidecar that exited (1 s, code 1; again at once, then backing off 10 s) when the app
    container ends (3 s) is not running to be stopped: the Succeeded pod shows it waiting in
    CrashLoopBackOff with how it last ended (convertToAPIContainerStatuses: a restartable init
    container would be restarted), not PodInitializing as if it had never run."""
    pods, clock, _ = env
    p = pod("flaky-side", restart="Never")
    p["spec"]["containers"][0]["command"] = ["sleep", "3"]
    p["spec"]["initContainers"] = [{"name": "side", "image": "busybox:1.36", "restartPolicy": "Always",
                                    "command": ["sh", "-c", "sleep 1; exit 1"]}]
    await pods.create(p)
    await eventually(phase_is(pods, "flaky-side", "Running"))
    await clock.advance(3)
    done = await eventually(phase_is(pods, "flaky-side", "Succeeded"))
    side = init_status(done, "side")
    assert side["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert side["lastState"]["terminated"]["exitCode"] == 1 and side["restartCount"] == 1
    assert "Stopping container side" not in [e[3] for e in await pod_events(pods, "flaky-side")]


async def test_a_deletion_with_grace_0_a_finalizer_holds_gives_the_hook_1_s_and_sigterm_2_s(env):
    """A deletion with gracePeriodSeconds 0 that a finalizer keeps: the pod workers floor the grace
    period at 1 s (calculateEffectiveGracePeriod), so the preStop sleep runs for 1 s, and SIGTERM
    gets killContainer's minimal 2 s, which `sleep` (PID 1, no TERM handler) outlives: 137 at 3 s."""
    pods, clock, _ = env
    p = hooked("held", ["sleep", "infinity"], grace=30, preStop={"sleep": {"seconds": 5}})
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    await pods.create(p)
    await eventually(phase_is(pods, "held", "Running"))
    await pods.delete("held", "default", grace_period_seconds=0)
    await killed(pods, "held")
    await clock.advance(2.9)
    assert (await pods.get("held", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    done = await eventually(phase_is(pods, "held", "Failed"))
    t = app_status(done)["state"]["terminated"]
    assert (t["exitCode"], t["reason"]) == (137, "Error")
    assert parse_time(t["finishedAt"]) - parse_time(done["metadata"]["deletionTimestamp"]) >= 3
    await pods.patch("held", {"metadata": {"finalizers": None}}, namespace="default")
    assert await eventually(gone(pods, "held"))


class Lagging(Clock):
    """`clock`, its wall clock read `lag` seconds behind: an API server on it stamps a deletion as
    if the node, on `clock`, saw it `lag` seconds late (a busy node's informer)."""

    def __init__(self, clock: ManualClock, lag: float):
        self.clock, self.lag = clock, lag

    def now(self) -> float:
        return self.clock.now() - self.lag

    def monotonic(self) -> float:
        return self.clock.monotonic()

    async def sleep(self, seconds: float) -> None:
        await self.clock.sleep(seconds)

    def call_later(self, seconds, callback):
        return self.clock.call_later(seconds, callback)


async def test_a_deletion_the_node_sees_late_still_gets_its_whole_grace_period():
    """A deletion (grace 10 s) the node sees 8 s after it was asked for: killContainer counts the
    grace from the kill's start, not from the deletionTimestamp, so the preStop hook runs to its end
    (4 s, then failing: FailedPreStopHook, which one cut off never tells) and SIGTERM gets the 6 s
    left, which `sleep` (PID 1, no TERM handler) outlives: 137 at 10 s."""
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        pods = s.client.resource("", "v1", "pods")
        p = hooked("late", ["sleep", "infinity"], grace=10, preStop={"exec": {"command": ["sh", "-c", "sleep 4; exit 1"]}})
        p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
        await pods.create(p)
        await eventually(phase_is(pods, "late", "Running"))
        s.rest.clock = Lagging(clock, 8)
        await delete_killed(pods, "late")
        await clock.advance(9.9)
        assert (await pods.get("late", "default"))["status"]["phase"] == "Running"
        assert "FailedPreStopHook" in [e[1] for e in await pod_events(pods, "late")]
        await clock.advance(0.1)
        done = await eventually(phase_is(pods, "late", "Failed"))
        assert app_status(done)["state"]["terminated"]["exitCode"] == 137
        await pods.patch("late", {"metadata": {"finalizers": None}}, namespace="default")


async def test_sigterm_gets_at_least_2_s_without_a_hook_too(env):
    """`kubectl delete --grace-period=1` of a container with no preStop hook: killContainer still
    gives SIGTERM its minimal 2 s before SIGKILL."""
    pods, clock, _ = env
    await pods.create(hooked("quick", ["sleep", "infinity"], grace=30))
    await eventually(phase_is(pods, "quick", "Running"))
    await pods.delete("quick", "default", grace_period_seconds=1)
    await killed(pods, "quick")
    await clock.advance(1.9)
    assert (await pods.get("quick", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    assert await eventually(gone(pods, "quick"))


async def test_a_deletion_after_the_node_shutdown_asked_for_a_shorter_grace_keeps_the_shorter(env):
    """Node shutdown asks (gracePeriodOverride 20 s, the pod's own 60 s being longer) while the
    container's postStart hook runs; a deletion a second later asks for 60 s. The pod workers keep
    the first request's grace and let a later one only shorten it: SIGKILL 20 s after the shutdown."""
    pods, clock, mgr = env
    await pods.create(hooked("late", ["sleep", "infinity"], grace=60, postStart={"sleep": {"seconds": 10}}))
    await eventually(lambda: _started(pods, "late"))
    await mgr.agents["gpu-0"].apply_faults("shutdown")
    await clock.advance(1)
    await pods.delete("late", "default")
    await killed(pods, "late")
    await clock.advance(18.9)
    assert (await pods.get("late", "default"))["metadata"]["deletionTimestamp"]  # still there
    await clock.advance(0.1)
    assert await eventually(gone(pods, "late"))


async def test_a_container_its_failed_post_start_kills_runs_its_pre_stop_first(env):
    """killContainer runs the preStop hook for a FailedPostStartHook kill as for any other: the hook
    (1.5 s) writes what the command's TERM trap then prints, and SIGTERM follows it."""
    pods, clock, mgr = env
    main = ["sh", "-c", "trap 'cat /tmp/drained; exit 0' TERM; while true; do sleep 1; done"]
    await pods.create(hooked("unstarted", main, grace=30, postStart={"exec": {"command": ["false"]}},
                             preStop={"exec": {"command": ["sh", "-c", "sleep 1.5; echo drained > /tmp/drained"]}}))
    await killed(pods, "unstarted")
    await clock.advance(1.4)
    assert (await pods.get("unstarted", "default"))["status"]["phase"] == "Pending"  # the hook runs
    await clock.advance(1.6)  # the hook's end, SIGTERM, the trap once the loop's `sleep 1` ends
    done = await eventually(phase_is(pods, "unstarted", "Succeeded"))
    assert app_status(done)["state"]["terminated"]["exitCode"] == 0
    assert worker(mgr, done).io.serve_log("app", LogOptions()) == b"drained\n"


async def test_a_force_deleted_pods_containers_are_still_stopped_gracefully_on_the_node(env):
    """`kubectl delete --force --grace-period=0`: the pod is gone from the API at once, but the
    kubelet still kills what runs of it from the last copy it knew (HandlePodRemoves), with its own
    grace period: Killing, then its whole preStop hook (3 s, then failing: FailedPreStopHook)."""
    pods, clock, _ = env
    await pods.create(hooked("forced", ["sleep", "infinity"], grace=30,
                             preStop={"exec": {"command": ["sh", "-c", "sleep 3; exit 1"]}}))
    await eventually(phase_is(pods, "forced", "Running"))
    await pods.delete("forced", "default", grace_period_seconds=0)
    assert await gone(pods, "forced")()
    await killed(pods, "forced")
    await clock.advance(2.9)
    assert "FailedPreStopHook" not in [e[1] for e in await pod_events(pods, "forced")]  # the hook runs
    await clock.advance(0.1)

    async def hook_failed():
        return "FailedPreStopHook" in [e[1] for e in await pod_events(pods, "forced")]
    await eventually(hook_failed)


async def test_a_node_shutdown_leaves_a_deletions_kill_under_way_as_it_is(env):
    """A pod whose deletion's kill (grace 60 s) is under way when the node shuts down keeps it:
    upstream's SyncTerminatingPod runs on with the grace and status it began with, so no SIGKILL
    at the shutdown's 20 s, and the pod ends as a deleted one, not Terminated with DisruptionTarget."""
    pods, clock, mgr = env
    p = hooked("leaving", ["sleep", "infinity"], grace=60)
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    await pods.create(p)
    await eventually(phase_is(pods, "leaving", "Running"))
    await delete_killed(pods, "leaving")
    await mgr.agents["gpu-0"].apply_faults("shutdown")
    await clock.advance(59.9)
    assert (await pods.get("leaving", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    done = await eventually(phase_is(pods, "leaving", "Failed"))
    assert app_status(done)["state"]["terminated"]["exitCode"] == 137
    assert "reason" not in done["status"]
    assert "DisruptionTarget" not in [c["type"] for c in done["status"]["conditions"]]
    await pods.patch("leaving", {"metadata": {"finalizers": None}}, namespace="default")


async def test_a_pre_stop_hook_takes_its_whole_seconds_off_the_grace_period(env):
    """executePreStopHook gives back the seconds the hook ran as Go's int64 of them: a 1.5 s hook
    takes 1 s off grace 4, so SIGTERM (which `sleep`, PID 1, outlives) gets 3 s: SIGKILL at 4.5 s."""
    pods, clock, _ = env
    await pods.create(hooked("whole", ["sleep", "infinity"], grace=4, preStop={"exec": {"command": ["sleep", "1.5"]}}))
    await eventually(phase_is(pods, "whole", "Running"))
    await delete_killed(pods, "whole")
    await clock.advance(4.4)
    assert (await pods.get("whole", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    assert await eventually(gone(pods, "whole"))


async def test_a_sidecars_wait_for_its_turn_takes_only_whole_seconds_off_its_grace(env):
    """KEP-753's termination ordering: the sidecar's SIGTERM waits until the app container stopped,
    and killContainer takes the seconds it waited off its grace truncated (int64 of waitForTurn's).
    The app stops 1.5 s after its SIGTERM (the stop annotations), so the sidecar, whose TERM trap
    ignores the signal, gets 5 - 1 = 4 s: killed (137) 5.5 s after the deletion, not at 5 s."""
    pods, clock, _ = env
    p = hooked("ordered", ["sleep", "infinity"], grace=5, annotations={STOP_SECONDS: "1.5", STOP_EXIT_CODE: "0"})
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    p["spec"]["initContainers"] = [{"name": "side", "image": "busybox:1.36", "restartPolicy": "Always",
                                    "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]}]
    await pods.create(p)
    await eventually(phase_is(pods, "ordered", "Running"))
    await delete_killed(pods, "ordered")
    await clock.advance(5.4)
    assert (await pods.get("ordered", "default"))["status"]["phase"] == "Running"
    await clock.advance(0.1)
    done = await eventually(phase_is(pods, "ordered", "Succeeded"))  # (the sidecar's code does not count)
    app, side = app_status(done)["state"]["terminated"], done["status"]["initContainerStatuses"][0]["state"]["terminated"]
    assert (app["exitCode"], side["exitCode"], side["reason"]) == (0, 137, "Error")
    await pods.patch("ordered", {"metadata": {"finalizers": None}}, namespace="default")
    assert await eventually(gone(pods, "ordered"))
