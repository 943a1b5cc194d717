"""Container lifecycle hooks on the process runtime: postStart and preStop run for real in the
container's context (exec) or against the pod (httpGet), or sleep; the kubelet's events, states
and grace-period accounting follow from them."""

import asyncio
import os
import time

from types import SimpleNamespace

import pytest
from multidict import CIMultiDict

from nanokube.node.kubelet_server import KubeletServer
from nanokube.node.streaming import log_options
from nanokube.pki.ca import issue, new_ca
from tests.controllers import eventually
from tests.node.runtime.test_process import SERVE, host_pid, kubelet_events, log_of, phase, pod, process_agents, status_of
from tests.node.test_lifecycle import gone


@pytest.fixture
async def env(tmp_path):
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        yield client, rt


def shared(p, *containers):
    """Pod `p` with an emptyDir `shared` at /shared in each of its containers (and `containers` added)."""
    p["spec"]["containers"] += list(containers)
    p["spec"]["volumes"] = [{"name": "shared", "emptyDir": {}}]
    for c in p["spec"]["containers"]:
        c["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
    return p


def host_pid_namespace(p):
    """Pod `p` in the host's PID namespace: its bare `sleep` is no PID 1 there, so the SIGTERM a
    failed postStart brings ends it at once (143), not by SIGKILL at the grace period's end."""
    p["spec"]["hostPID"] = True
    return p


def container_state(pods, name, check):
    return status_of(pods, name, lambda st: any(check(cs) for cs in st.get("containerStatuses") or ()))


async def waiting_in(pods, created, reason):
    """The first copy of pod `created` (watched from its creation) whose container waits in `reason`,
    and that container's status."""
    stream = await pods.watch("default", resource_version=created["metadata"]["resourceVersion"],
                              field_selector=f"metadata.name={created['metadata']['name']}")

    async def first():
        async for _, obj in stream:
            for cs in (obj.get("status") or {}).get("containerStatuses") or ():
                if (cs["state"].get("waiting") or {}).get("reason") == reason:
                    return obj, cs
    try:
        return await asyncio.wait_for(first(), 30)
    finally:
        await stream.aclose()


async def test_post_start_runs_in_the_container_before_it_is_reported_running(env):
    """The hook's file is there when the status first says Running (startContainer runs the hook
    before the sync that reports it), and the main command, waiting for it, reads it."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    main = "trap 'exit 143' TERM; until [ -e /shared/greeting ]; do sleep 0.05; done; cat /shared/greeting; sleep 300 & wait"
    p = shared(pod("greeter", ["sh", "-c", main], grace=2, lifecycle={"postStart": {"exec": {"command": [
        "sh", "-c", "sleep 0.5; echo hello from postStart > /shared/greeting.tmp; mv /shared/greeting.tmp "
                    "/shared/greeting; cp /shared/greeting /shared/seen-by-hook"]}}}))
    await pods.create(p)
    await eventually(container_state(pods, "greeter", lambda cs: "running" in cs["state"]))
    w = rt.pods[("default", "greeter")]
    volume = w.agent.volumes.volume_dir(w.uid, "shared")
    assert os.path.exists(os.path.join(volume, "seen-by-hook"))  # the hook was done before Running

    async def read():
        return await log_of(rt, "greeter") == b"hello from postStart\n"
    await eventually(read)
    reasons = [r for _, r, _, _, _ in await kubelet_events(client, "greeter")]
    assert "FailedPostStartHook" not in reasons and reasons.count("Started") == 1
    await pods.delete("greeter", "default")
    await eventually(gone(pods, "greeter"))


async def test_a_failed_post_start_kills_the_container_and_it_restarts(env):
    """A postStart exec that exits 3: FailedPostStartHook (no output in the event), Killing with the
    kill's reason, the container stopped by SIGTERM (143), waiting in PostStartHookError with the
    handler's message (its output there) and restarted per restartPolicy; one with restartPolicy
    Never stays terminated and fails the pod."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    hook = {"postStart": {"exec": {"command": ["sh", "-c", "echo secret-output; exit 3"]}}}
    created = await pods.create(host_pid_namespace(pod("hooked", ["sleep", "300"], restart="Always", grace=2,
                                                       lifecycle=hook)))
    await pods.create(host_pid_namespace(pod("once", ["sleep", "300"], restart="Never", grace=2, lifecycle=hook)))
    _, cs = await waiting_in(pods, created, "PostStartHookError")
    uid = created["metadata"]["uid"]
    assert cs["state"]["waiting"]["message"] == (
        f'Exec lifecycle hook ([sh -c echo secret-output; exit 3]) for Container "main" in Pod '
        f'"hooked_default({uid})" failed - error: command \'sh -c echo secret-output; exit 3\' exited with 3: , '
        'message: "secret-output\\n"')
    p = await eventually(container_state(pods, "hooked", lambda cs: cs["restartCount"] >= 1))
    last = p["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (143, "Error")
    failed = await eventually(status_of(pods, "once", phase("Failed")))
    cs = failed["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["exitCode"] == 143 and cs["restartCount"] == 0
    events = await kubelet_events(client, "once")
    path = "spec.containers{main}"
    hooked = [e[:4] for e in events if e[1] in ("Started", "FailedPostStartHook", "Killing")]
    assert hooked == [("Normal", "Started", path, "Container started"),
                      ("Warning", "FailedPostStartHook", path, "PostStartHook failed"),
                      ("Normal", "Killing", path, "FailedPostStartHook")]
    assert not any("secret-output" in e[3] for e in events)
    for name in ("hooked", "once"):
        await pods.delete(name, "default")
        await eventually(gone(pods, name))


async def test_a_post_start_http_get_that_cannot_connect_fails_with_the_dial_error(env):
    """An httpGet hook to a port nobody listens on fails as the request does (PostStartHookError's
    message names it: HTTP lifecycle hook (path) ... connection refused): the container, killed,
    waits in PostStartHookError with that message before its back-off."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    hook = {"postStart": {"httpGet": {"path": "/warm", "port": "web"}}}
    created = await pods.create(host_pid_namespace(pod("web", ["sleep", "300"], restart="Always", grace=2, lifecycle=hook,
                                                       ports=[{"name": "web", "containerPort": 8080}])))
    p, cs = await waiting_in(pods, created, "PostStartHookError")
    uid, ip = p["metadata"]["uid"], p["status"]["podIP"]
    assert cs["state"]["waiting"]["message"] == (
        f'HTTP lifecycle hook (/warm) for Container "main" in Pod "web_default({uid})" failed - error: '
        f'Get "http://{ip}:8080/warm": dial tcp {ip}:8080: connect: connection refused')
    assert cs["lastState"]["terminated"]["exitCode"] == 143 and cs["restartCount"] >= 1
    await pods.delete("web", "default")
    await eventually(gone(pods, "web"))


async def test_pre_stop_runs_before_sigterm_and_its_write_is_seen_by_the_other_container(env):
    """Deletion runs main's preStop (an exec writing the shared emptyDir) before SIGTERM; the other
    container, which ignores SIGTERM, sees the file and exits 0 within the grace period; main's
    trap finds the file there when SIGTERM comes, and the hook's `sleep 3` delays the pod's removal."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    main = "trap '[ -e /shared/drain ] && exit 0; exit 9' TERM; touch /shared/main; sleep 300 & wait"
    watch = "trap '' TERM; touch /shared/watcher; until [ -e /shared/drain ]; do sleep 0.05; done; " \
            "[ \"$(cat /shared/drain)\" = draining ]"
    p = shared(pod("drainer", ["sh", "-c", main], grace=30, lifecycle={"preStop": {"exec": {"command": [
        "sh", "-c", "echo draining > /shared/drain; sleep 3"]}}}),
        {"name": "watcher", "image": "busybox:1.36", "command": ["sh", "-c", watch]})
    await pods.create(p)

    async def trapping():  # both shells set their traps
        w = rt.pods.get(("default", "drainer"))
        volume = w and w.agent.volumes.volume_dir(w.uid, "shared")
        return volume and all(os.path.exists(os.path.join(volume, name)) for name in ("main", "watcher"))
    await eventually(trapping)
    w = rt.pods[("default", "drainer")]
    asked = time.time()
    await pods.delete("drainer", "default")
    await eventually(gone(pods, "drainer"))
    watcher, drained = w.containers["watcher"], w.containers["main"]
    assert watcher.state["terminated"]["exitCode"] == 0  # it saw what main's preStop wrote
    assert drained.state["terminated"]["exitCode"] == 0  # SIGTERM came after the hook's write
    assert time.time() - asked >= 3


async def test_a_pre_stop_sleep_delays_deletion_and_one_past_the_grace_period_is_cut_off(env):
    """preStop sleep 3 (KEP-3960): the pod is removed no sooner than 3 s after the delete, its
    container then stopped by SIGTERM (143). A preStop exec longer than the grace period is cut off
    at its end (its command killed), SIGTERM following with the 2 s floor."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("napper", SERVE, grace=30, lifecycle={"preStop": {"sleep": {"seconds": 3}}}))
    p = shared(pod("stuck", SERVE, grace=2, lifecycle={"preStop": {"exec": {"command": [
        "sh", "-c", "echo $$ > /shared/hook.pid; exec sleep 300"]}}}))
    await pods.create(p)
    for name in ("napper", "stuck"):
        await eventually(container_state(pods, name, lambda cs: "running" in cs["state"]))
    workers = {name: rt.pods[("default", name)] for name in ("napper", "stuck")}
    volume = workers["stuck"].agent.volumes.volume_dir(workers["stuck"].uid, "shared")
    asked = time.time()
    await pods.delete("napper", "default")
    await pods.delete("stuck", "default")

    async def hook_pid():
        try:
            return int(open(os.path.join(volume, "hook.pid")).read())
        except (OSError, ValueError):
            return None
    pid = host_pid(workers["stuck"].containers["main"].pid, await eventually(hook_pid))
    await eventually(gone(pods, "napper"))
    assert time.time() - asked >= 3
    await eventually(gone(pods, "stuck"))
    assert workers["napper"].containers["main"].state["terminated"]["exitCode"] == 143
    assert workers["stuck"].containers["main"].state["terminated"]["exitCode"] == 143
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive  # the hook cut off went with it
    killing = [e for e in await kubelet_events(client, "stuck") if e[1] == "Killing"]
    assert [e[3] for e in killing] == ["Stopping container main"]


async def test_sigterm_goes_to_the_first_process_and_what_it_left_goes_with_it(env):
    """StopContainer signals the container's first process: the shell's foreground `sleep 1` is
    not signalled (no "Terminated" from the shell), ends, and the trap runs; a command a container
    left in the background is killed as the container's first process exits (hostPID: there is no
    PID namespace of its own for the kernel to end with it)."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    keep = {"finalizers": ["test.nanokube.io/keep"]}
    trap = pod("trapper", ["sh", "-c", "trap 'echo bye; exit 0' TERM; echo up; while true; do sleep 1; done"], grace=30)
    trap["metadata"] |= keep
    left = pod("leaver", ["sh", "-c", "sleep 300 & echo $!"])
    left["metadata"] |= keep
    left["spec"]["hostPID"] = True
    await pods.create(trap)
    await pods.create(left)

    async def up():
        return await log_of(rt, "trapper") == b"up\n"
    await eventually(container_state(pods, "trapper", lambda cs: "running" in cs["state"]))
    await eventually(up)
    await pods.delete("trapper", "default")
    done = await eventually(status_of(pods, "trapper", phase("Succeeded")))
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert await log_of(rt, "trapper") == b"up\nbye\n"

    await eventually(status_of(pods, "leaver", phase("Succeeded")))
    pid = int(await log_of(rt, "leaver"))

    async def killed():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    await eventually(killed)
    await pods.delete("leaver", "default")
    for name in ("trapper", "leaver"):
        await pods.patch(name, {"metadata": {"finalizers": None}}, namespace="default")
        await eventually(gone(pods, name))


TLS_SERVER = """
import http.server, os, signal, ssl, sys, tempfile
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
with tempfile.TemporaryDirectory() as d:
    for part in ("crt", "key"):
        with open(os.path.join(d, part), "w") as f:
            f.write(os.environ["TLS_" + part.upper()])
    ctx.load_cert_chain(os.path.join(d, "crt"), os.path.join(d, "key"))
seen = []
class Drain(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        seen.append((self.path, self.headers["User-Agent"], self.headers["X-Drain"]))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0 if seen == [("/drain", "kube-lifecycle/1.37", "now")] else 7))
server = http.server.HTTPServer(("0.0.0.0", 8443), Drain)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


async def test_an_https_pre_stop_reaches_a_server_whose_certificate_nothing_trusts(env):
    """An httpGet hook with scheme HTTPS speaks TLS without verifying the server (the kubelet's
    lifecycle client skips verification): the server, with a certificate of a throwaway CA for
    `localhost` only, gets GET /drain with the hook's header and User-Agent before SIGTERM, on
    which it exits 0 (7 had it seen no request or another one), and no FailedPreStopHook is told."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    ca = new_ca("throwaway-ca")
    pair = issue(ca, "localhost", dns_names=("localhost",), server=True)
    hook = {"preStop": {"httpGet": {"path": "/drain", "port": "https", "scheme": "HTTPS",
                                    "httpHeaders": [{"name": "X-Drain", "value": "now"}]}}}
    await pods.create(pod("tls", ["python3", "-c", TLS_SERVER], grace=30, lifecycle=hook,
                          ports=[{"name": "https", "containerPort": 8443}],
                          env=[{"name": "TLS_CRT", "value": pair.cert_pem.decode()},
                               {"name": "TLS_KEY", "value": pair.key_pem.decode()}],
                          readinessProbe={"tcpSocket": {"port": 8443}, "periodSeconds": 1}))
    await eventually(container_state(pods, "tls", lambda cs: cs["ready"]))
    w = rt.pods[("default", "tls")]
    await pods.delete("tls", "default")
    await eventually(gone(pods, "tls"))
    assert w.containers["main"].state["terminated"]["exitCode"] == 0
    reasons = [e[1] for e in await kubelet_events(client, "tls")]
    assert "Killing" in reasons and "FailedPreStopHook" not in reasons


PLAIN_SERVER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8443))
s.listen()
while True:
    conn, _ = s.accept()
    data = conn.recv(65536)
    if data[:1] == b"\x16":  # a TLS client hello: the 400 a plain HTTP server answers it with
        print("tls hello", flush=True)
        conn.sendall(b"<!DOCTYPE HTML>\n<title>Error response</title>\n" if sys.argv[1] == "html" else
                     b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     b"Connection: close\r\n\r\n400 Bad Request")
        conn.close()
        continue
    while data and b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    if data:  # (not the startup probe's bare connection)
        print(" | ".join(data.split(b"\r\n\r\n")[0].decode().split("\r\n")), flush=True)
        if sys.argv[1] == "answers":
            conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    conn.close()
"""


def behind_plain_server(name, mode):
    """Pod `name` whose sidecar `server` (Started once it listens) is a plain HTTP server on 8443
    that answers a TLS hello with a 400 (`mode` html: with a bare HTML page, as Python's http.server
    answers what it takes for HTTP/0.9) and a request (answers) with a 204, or (mute, html) with
    nothing; its app container's postStart is an HTTPS httpGet to it, with an Authorization header
    and another."""
    hook = {"postStart": {"httpGet": {"path": "/warm", "port": 8443, "scheme": "HTTPS", "httpHeaders": [
        {"name": "Authorization", "value": "Bearer secret"}, {"name": "X-Warm", "value": "yes"}]}}}
    p = host_pid_namespace(pod(name, ["sleep", "300"], restart="Always", grace=2, lifecycle=hook))
    p["spec"]["initContainers"] = [{"name": "server", "image": "python:3", "restartPolicy": "Always",
                                    "command": ["python3", "-c", PLAIN_SERVER, mode],
                                    "startupProbe": {"tcpSocket": {"port": 8443}, "periodSeconds": 1}}]
    return p


async def server_log(rt, name):
    w = rt.pods[("default", name)]
    data = await w.logs("server", log_options({}, time.time()))
    return data if isinstance(data, bytes) else b"".join([chunk async for chunk in data])


async def test_an_https_hook_whose_server_answers_in_plain_http_falls_back_to_http(env):
    """runHTTPHandler: the HTTPS request's server answers the TLS hello in plain HTTP ("server gave
    HTTP response to HTTPS client"), so the hook is made again over HTTP without its Authorization
    header; that one's answer passes the hook, told by a LifecycleHTTPFallback Warning on the pod
    and kubelet_lifecycle_handler_http_fallbacks_total. Where the retry gets no answer, or the
    answer to the hello is not HTTP (no retry then), the hook fails with the HTTPS request's error
    (PostStartHookError), and nothing is told or counted."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    await pods.create(behind_plain_server("fallback", "answers"))
    for name, mode, error in (("unanswered", "mute", "http: server gave HTTP response to HTTPS client"),
                              ("html", "html", "tls: first record does not look like a TLS handshake")):
        created = await pods.create(behind_plain_server(name, mode))
        p, cs = await waiting_in(pods, created, "PostStartHookError")
        uid, ip = p["metadata"]["uid"], p["status"]["podIP"]
        assert cs["state"]["waiting"]["message"] == (
            f'HTTP lifecycle hook (/warm) for Container "main" in Pod "{name}_default({uid})" failed - error: '
            f'Get "https://{ip}:8443/warm": {error}')
        assert "LifecycleHTTPFallback" not in [e[1] for e in await kubelet_events(client, name)]
        retry = f"GET /warm HTTP/1.1 | Host: {ip}:8443 | User-Agent: kube-lifecycle/1.37 | Accept: */* | " \
                "Connection: close | X-Warm: yes"
        lines = {"tls hello", retry} if mode == "mute" else {"tls hello"}  # the HTML answer is not retried

        async def logged():
            return set((await server_log(rt, name)).decode().splitlines()) == lines
        await eventually(logged)

    p = await eventually(container_state(pods, "fallback", lambda cs: cs["name"] == "main" and "running" in cs["state"]))
    ip = p["status"]["podIP"]
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    told = ("Warning", "LifecycleHTTPFallback", "",
            f"request to HTTPS lifecycle hook {ip}:8443 got HTTP response, retry with HTTP succeeded", 1)

    async def events():  # the recorder writes from its own task, maybe after the container's status
        ev = await kubelet_events(client, "fallback")
        return ev if told in ev else None
    assert "FailedPostStartHook" not in [e[1] for e in await eventually(events)]

    async def served():  # (the log is read from the server's stdout as it comes)
        return (await server_log(rt, "fallback")).decode().splitlines() == [
            "tls hello", f"GET /warm HTTP/1.1 | Host: {ip}:8443 | User-Agent: kube-lifecycle/1.37 | Accept: */* | "
                         "Connection: close | X-Warm: yes"]
    await eventually(served)
    agent = rt.pods[("default", "fallback")].agent
    text = (await KubeletServer(agent, time.time()).serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                          "/metrics")).text
    assert "\nkubelet_lifecycle_handler_http_fallbacks_total 1\n" in text
    for name in ("fallback", "unanswered", "html"):
        await pods.delete(name, "default")
        await eventually(gone(pods, name))


async def test_a_first_process_that_ignores_sigterm_is_killed_when_the_grace_period_is_up(env):
    """killContainer: the preStop hook (sleep 1) takes part of the 2 s grace period, then SIGTERM,
    which the container's first process ignores (`trap '' TERM`), so what is left of the grace
    period, at least 2 s, passes and SIGKILL ends it: the status says terminated, 137, Error, no
    sooner than 3 s after the deletion, and nothing but the Killing is told."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    p = pod("deaf", ["sh", "-c", "trap '' TERM; echo trapped; sleep 300"], grace=2,
            lifecycle={"preStop": {"sleep": {"seconds": 1}}})
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    await pods.create(p)

    async def trapped():
        return await log_of(rt, "deaf") == b"trapped\n"
    await eventually(container_state(pods, "deaf", lambda cs: "running" in cs["state"]))
    await eventually(trapped)
    asked = time.time()
    await pods.delete("deaf", "default")
    done = await eventually(status_of(pods, "deaf", phase("Failed")))
    assert time.time() - asked >= 3
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "Error")
    events = [e[1:4] for e in await kubelet_events(client, "deaf") if e[1] not in ("Pulling", "Pulled", "Created", "Started")]
    assert events == [("Killing", "spec.containers{main}", "Stopping container main")]
    await pods.patch("deaf", {"metadata": {"finalizers": None}}, namespace="default")
    await eventually(gone(pods, "deaf"))


async def test_a_deletion_with_grace_0_a_finalizer_holds_still_runs_the_pre_stop_hook(env):
    """The process runtime settles its kill's grace as the simulated one does (PodWorker._kill_grace,
    calculateEffectiveGracePeriod): a deletion with gracePeriodSeconds 0 that a finalizer keeps gets
    1 s, not a deadline already past, so main's preStop exec runs and writes its file before
    SIGTERM, which main's trap answers with 0 (9 had the hook been skipped)."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    main = "trap '[ -e /shared/drain ] && exit 0; exit 9' TERM; touch /shared/main; sleep 300 & wait"
    p = shared(pod("held", ["sh", "-c", main], grace=30, lifecycle={"preStop": {"exec": {"command": [
        "sh", "-c", "echo draining > /shared/drain"]}}}))
    p["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    await pods.create(p)

    async def trapping():
        w = rt.pods.get(("default", "held"))
        volume = w and w.agent.volumes.volume_dir(w.uid, "shared")
        return volume and os.path.exists(os.path.join(volume, "main"))
    await eventually(trapping)
    await pods.delete("held", "default", grace_period_seconds=0)
    done = await eventually(status_of(pods, "held", phase("Succeeded")))
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    await pods.patch("held", {"metadata": {"finalizers": None}}, namespace="default")
    await eventually(gone(pods, "held"))
