"""Container lifecycle hooks through `nanokube up` and kubectl, on each runtime: a postStart exec
whose file the main command waits for, a failing postStart's FailedPostStartHook and restart, and
an inference server's preStop that drains (writes what its sidecar waits for on their emptyDir)
before SIGTERM, and an HTTPS httpGet postStart that falls back to a plain HTTP server (its event
and the kubelet's counter through nodes/proxy). The process runtime's case is skipped (loudly) only
without root, `ip` or `nft`."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, running_cluster, wait_for


@pytest.fixture(scope="module", params=["simulated", pytest.param("process", marks=PROCESS_RUNTIME)])
def cluster(request, store_url):
    with (running_cluster("hooks") if request.param == "simulated" else process_cluster(store_url, "hooks")) as c:
        yield c


def _pod(name: str, containers: list[dict], restart: str = "Never", grace: int = 30) -> str:
    mount = [{"name": "work", "mountPath": "/work"}]
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "restartPolicy": restart, "terminationGracePeriodSeconds": grace, "volumes": [{"name": "work", "emptyDir": {}}],
        "containers": [{"image": "busybox", "volumeMounts": mount, **c} for c in containers]}})


def _status(cluster, name: str) -> dict:
    return cluster.kubectl_json("get", "pod", name).get("status") or {}


def test_post_start_writes_what_the_main_command_waits_for(cluster):
    cluster.kubectl("apply", "-f", "-", input=_pod("warm", [{
        "name": "main", "command": ["sh", "-c", "until [ -f /work/ready ]; do sleep 1; done; cat /work/ready"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "echo warmed up > /work/ready"]}}}}]))
    wait_for(lambda: _status(cluster, "warm").get("phase") in ("Succeeded", "Failed"), 60, "warm finished")
    assert _status(cluster, "warm")["phase"] == "Succeeded"
    assert cluster.kubectl("logs", "warm").stdout == "warmed up\n"
    cluster.kubectl("delete", "pod", "warm", "--wait=false")


def test_a_failing_post_start_is_a_warning_event_and_the_container_restarts(cluster):
    cluster.kubectl("apply", "-f", "-", input=_pod("broken", [{
        "name": "main", "command": ["sleep", "3600"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}}}}], restart="Always", grace=1))
    statuses = wait_for(lambda: [s for s in _status(cluster, "broken").get("containerStatuses") or ()
                                 if s.get("restartCount", 0) >= 1], 60, "broken restarted")
    assert statuses[0]["lastState"]["terminated"]["reason"] == "Error"
    events = cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=broken")["items"]
    failed = [e for e in events if e["reason"] == "FailedPostStartHook"]
    assert failed and failed[0]["type"] == "Warning" and failed[0]["message"] == "PostStartHook failed"
    assert failed[0]["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert any(e["reason"] == "Killing" and e["message"] == "FailedPostStartHook" for e in events)
    cluster.kubectl("delete", "pod", "broken", "--wait=false")


def test_pre_stop_drains_before_sigterm_and_its_sidecar_sees_it(cluster):
    """Deleting the pod runs the server's preStop (it writes `drain` on the shared emptyDir, then
    takes 1 s and writes `hooked`): the other container, which ignores SIGTERM, finds the file and
    exits 0 by itself; the server, signalled after the hook, exits 143 from its TERM trap, and 99
    had the hook not ended by then (as its container's PID 1 a shell without a handler would
    ignore SIGTERM and be killed after the grace period)."""
    name = "server"
    cluster.kubectl("apply", "-f", "-", input=_pod(name, [
        {"name": "main", "command": ["sh", "-c", "trap '[ -f /work/hooked ] && exit 143; exit 99' TERM; "
                                                 "while true; do sleep 1; done"],
         "lifecycle": {"preStop": {"exec": {"command": [
             "sh", "-c", "echo draining > /work/drain; sleep 1; touch /work/hooked"]}}}},
        {"name": "watcher", "command": ["sh", "-c", "trap '' TERM; touch /work/watching; "
                                                    "until [ -f /work/drain ]; do sleep 1; done; "
                                                    '[ "$(cat /work/drain)" = draining ]']}]))
    cluster.kubectl("patch", "pod", name, "--type=merge", "-p", '{"metadata":{"finalizers":["test.nanokube.io/keep"]}}')
    try:
        wait_for(lambda: cluster.kubectl("exec", name, "-c", "main", "--", "ls", "/work", check=False).stdout
                 == "watching\n", 60, "watcher up")
        cluster.kubectl("delete", "pod", name, "--wait=false")
        ended = wait_for(lambda: _status(cluster, name).get("phase") in ("Succeeded", "Failed") and
                         {s["name"]: s["state"]["terminated"]["exitCode"]
                          for s in _status(cluster, name)["containerStatuses"]}, 60, "server stopped")
        assert ended == {"main": 143, "watcher": 0}
        events = cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=server")["items"]
        assert not [e for e in events if e["reason"] == "FailedPreStopHook"]
    finally:
        cluster.kubectl("patch", "pod", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')


PLAIN_SERVER = r"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8443))
s.listen()
while True:
    conn, _ = s.accept()
    if conn.recv(65536)[:1] == b"\x16":  # a TLS hello: a plain HTTP server's 400
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n400 Bad Request")
    else:
        conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    conn.close()
"""


def test_an_https_post_start_to_a_plain_http_server_falls_back_and_is_counted(cluster):
    """An HTTPS httpGet postStart whose server (a sidecar, Started once it listens; the simulated
    pod's servers are plain HTTP too) answers the TLS hello in plain HTTP passes over HTTP: the
    container runs, `kubectl get events` shows the LifecycleHTTPFallback Warning, and the node's
    kubelet /metrics (nodes/proxy) counts it."""
    name = "fallback"
    manifest = json.loads(_pod(name, [{"name": "main", "command": ["sleep", "3600"], "lifecycle": {"postStart": {
        "httpGet": {"path": "/warm", "port": 8443, "scheme": "HTTPS"}}}}], restart="Always", grace=1))
    manifest["spec"]["initContainers"] = [{
        "name": "server", "image": "python:3", "restartPolicy": "Always", "command": ["python3", "-c", PLAIN_SERVER],
        "ports": [{"containerPort": 8443}], "startupProbe": {"tcpSocket": {"port": 8443}, "periodSeconds": 1}}]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    try:
        wait_for(lambda: any("running" in s["state"] for s in _status(cluster, name).get("containerStatuses") or ()),
                 60, "main running")
        status = _status(cluster, name)
        assert status["containerStatuses"][0]["restartCount"] == 0
        events = wait_for(lambda: cluster.kubectl_json("get", "events", "--field-selector",
                                                       f"involvedObject.name={name},reason=LifecycleHTTPFallback")["items"],
                          30, "LifecycleHTTPFallback")
        assert [(e["type"], e["message"]) for e in events] == [
            ("Warning", f"request to HTTPS lifecycle hook {status['podIP']}:8443 got HTTP response, retry with HTTP "
                        "succeeded")]
        node = cluster.kubectl_json("get", "pod", name)["spec"]["nodeName"]
        metrics = cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics").stdout
        assert "\nkubelet_lifecycle_handler_http_fallbacks_total 1\n" in metrics
    finally:
        cluster.kubectl("delete", "pod", name, "--wait=false")
