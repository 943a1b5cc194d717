"""exec, attach, cp, port-forward and logs against `nanokube up --runtime
process`, driven by kubectl (the 1.37 binary over WebSockets, the 1.32 one on
PATH over SPDY) and by the Python client's `stream` and `portforward`.

Skipped (loudly) only without root, `ip` or `nft`, like test_networking."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.stream import portforward, stream

from nanokube.node.runtime.netns import PREFIX, cluster_tag, list_netns
from tests.e2e.conftest import KUBECTL, http_get, start_cluster, wait_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
    reason="SKIPPED LOUDLY: the process runtime needs root, ip and nft (run scripts/nftables.sh)")

CLUSTER_FILE = "examples/clusters/process-3cpu.yaml"
KUBECTL_132 = shutil.which("kubectl")

SERVER = """
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8080), H).serve_forever()
"""

PODS = [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
         "name": "web", "image": "python:3.11", "command": ["python3", "-c", SERVER], "workingDir": "/tmp",
         "env": [{"name": "GREETING", "value": "hi"}]}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "repl", "namespace": "default"},
     "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
         "name": "main", "image": "busybox", "stdin": True,
         "command": ["sh", "-c", "while read line; do echo got: $line; done"]}]}},
]
TICKER = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ticker", "namespace": "default"},
          "spec": {"terminationGracePeriodSeconds": 1, "restartPolicy": "Never", "containers": [{
              "name": "main", "image": "busybox",
              "command": ["sh", "-c", "sleep 1; for i in 1 2 3 4; do echo tick $i; sleep 1; done"]}]}}


@pytest.fixture(scope="module")
def c(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-stream-"))
    cluster = start_cluster(d, store_url, ("--cluster", CLUSTER_FILE, "--runtime", "process",
                                           "--proxy-mode", "nftables"))
    prefix = f"{PREFIX}{cluster_tag(str(d))}-"
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": PODS}))
        for name in ("web", "repl"):
            wait_for(lambda name=name: cluster.kubectl_json("get", "pod", name)["status"].get("phase") == "Running",
                     90, f"{name} running")
        yield cluster
    finally:
        cluster.stop()
        leftovers = [n for n in list_netns() if n.startswith(prefix)]
        shutil.rmtree(d, ignore_errors=True)
        assert leftovers == [], f"namespaces left after shutdown: {leftovers}"


def kubectl_132(c, *args, env=None, input=None):
    return subprocess.run([KUBECTL_132, *args], capture_output=True, text=True, input=input, timeout=60,
                          env={**os.environ, "KUBECONFIG": c.kubeconfig, **(env or {})})


def test_exec_reports_the_exit_code_with_the_containers_env(c):
    r = c.kubectl("exec", "web", "--", "sh", "-c", "echo $HOSTNAME $GREETING; pwd; exit 3", check=False)
    assert r.returncode == 3, r.stderr
    assert r.stdout == "web hi\n/tmp\n"
    assert "command terminated with exit code 3" in r.stderr


@pytest.mark.skipif(KUBECTL_132 is None or KUBECTL_132 == KUBECTL, reason="no second kubectl on PATH")
def test_exec_over_spdy_and_websockets_with_an_older_kubectl(c):
    for env in ({"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "true"}):
        r = kubectl_132(c, "exec", "web", "--", "sh", "-c", "echo $HOSTNAME; exit 3", env=env)
        assert (r.returncode, r.stdout) == (3, "web\n"), (env, r.stderr)


def test_exec_of_a_missing_binary_fails_as_containerd_reports_it(c):
    r = c.kubectl("exec", "web", "--", "no-such-binary", check=False)
    assert r.returncode == 1
    assert 'exec: "no-such-binary": executable file not found in $PATH: unknown' in r.stderr


def test_interactive_exec_with_stdin(c):
    r = c.kubectl("exec", "-i", "web", "--", "sh", "-c", "tr a-z A-Z; echo done", input="hello\nworld\n")
    assert r.stdout == "HELLO\nWORLD\ndone\n"
    if KUBECTL_132:
        r = kubectl_132(c, "exec", "-i", "web", "--", "cat", input="over spdy\n",
                        env={"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"})
        assert r.stdout == "over spdy\n", r.stderr


def test_cp_into_a_pod_and_back(c, tmp_path):
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(200_000))
    c.kubectl("cp", str(src), "web:/tmp/copied.bin")
    assert c.kubectl("exec", "web", "--", "sh", "-c", "wc -c < /tmp/copied.bin").stdout.strip() == "200000"
    back = tmp_path / "back.bin"
    c.kubectl("cp", "web:/tmp/copied.bin", str(back))
    assert back.read_bytes() == src.read_bytes()
    if KUBECTL_132:  # over SPDY
        spdy = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
        assert kubectl_132(c, "cp", str(src), "web:/tmp/spdy.bin", env=spdy).returncode == 0
        again = tmp_path / "again.bin"
        assert kubectl_132(c, "cp", "web:/tmp/spdy.bin", str(again), env=spdy).returncode == 0
        assert again.read_bytes() == src.read_bytes()


def _port_forward(c, kubectl: str, env: dict):
    p = subprocess.Popen([kubectl, "port-forward", "pod/web", ":8080", "--address", "127.0.0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "KUBECONFIG": c.kubeconfig, **env})
    line = p.stdout.readline()
    m = re.search(r"127\.0\.0\.1:(\d+) -> 8080", line)
    assert m, (line, p.stderr.read() if p.poll() is not None else "")
    return p, int(m.group(1))


@pytest.mark.parametrize("kubectl,env", [
    (KUBECTL, {}),  # WebSocket tunnel (SPDY inside)
    (KUBECTL, {"KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}),  # SPDY upgrade
    (KUBECTL_132, {}),
])
def test_port_forward_answers_curl_on_localhost(c, kubectl, env):
    if kubectl is None:
        pytest.skip("no second kubectl on PATH")
    p, port = _port_forward(c, kubectl, env)
    try:
        for path in ("/a", "/b"):
            assert http_get(f"http://127.0.0.1:{port}{path}") == f"hello from {path}"
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)


@pytest.mark.parametrize("kubectl,env,word", [
    (KUBECTL, {}, "ping"),  # WebSockets
    (KUBECTL_132, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}, "spdy"),
])
def test_attach_joins_the_containers_stdio(c, kubectl, env, word):
    if kubectl is None:
        pytest.skip("no second kubectl on PATH")
    p = subprocess.Popen([kubectl, "attach", "-i", "repl"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "KUBECONFIG": c.kubeconfig, **env})
    try:
        p.stdin.write(f"{word}\n")
        p.stdin.flush()
        assert p.stdout.readline() == f"got: {word}\n"
        p.stdin.write("pong\n")
        p.stdin.flush()
        assert p.stdout.readline() == "got: pong\n"
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
    assert f"got: {word}\ngot: pong\n" in c.kubectl("logs", "repl").stdout


def test_logs_follow_streams_lines_as_printed(c):
    c.kubectl("apply", "-f", "-", input=json.dumps(TICKER))
    wait_for(lambda: c.kubectl_json("get", "pod", "ticker")["status"].get("phase") in ("Running", "Succeeded"),
             60, "ticker started")
    p = subprocess.Popen([KUBECTL, "logs", "-f", "--timestamps", "ticker"], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "KUBECONFIG": c.kubeconfig})
    arrived = []
    for line in p.stdout:
        arrived.append((time.monotonic(), line))
    assert p.wait(timeout=30) == 0
    texts = [line.split(" ", 1)[1] for _, line in arrived]
    assert texts == ["tick 1\n", "tick 2\n", "tick 3\n", "tick 4\n"]
    assert arrived[-1][0] - arrived[0][0] > 1.5, "the lines came as printed, not all at the end"
    assert c.kubectl("logs", "ticker", "--tail", "1").stdout == "tick 4\n"
    assert c.kubectl("logs", "ticker", "--limit-bytes", "8").stdout == "tick 1\nt"


def test_a_container_backing_off_is_warned_and_its_logs_are_its_last_run(c):
    """What `kubectl describe`/`events` and `kubectl logs` show of a crash-looping container: the
    kubelet's Warning BackOff Event, and (its validateContainerLogStatus) while it waits out its
    back-off (state waiting, lastState terminated), both `kubectl logs` and `kubectl logs
    --previous` read the run that just ended, the one lastState names."""
    crasher = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": "default"},
               "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                   "name": "main", "image": "busybox", "command": ["sh", "-c", "echo about to fail; exit 2"]}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(crasher))

    def backing_off():
        [cs] = c.kubectl_json("get", "pod", "crasher")["status"].get("containerStatuses") or [{}]
        return (cs.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
    wait_for(backing_off, 60, "crasher in CrashLoopBackOff (a 10 s back-off)")
    assert c.kubectl("logs", "crasher", "--previous").stdout == "about to fail\n"
    assert c.kubectl("logs", "crasher").stdout == "about to fail\n"
    warnings = c.kubectl("events", "--for", "pod/crasher", "--types", "Warning").stdout
    assert re.search(r"Warning\s+BackOff\s+Pod/crasher\s+Back-off restarting failed container main in pod "
                     r"crasher_default\([0-9a-f-]{36}\)", warnings), warnings
    assert "spec.containers{main}: Back-off restarting failed container main" in c.kubectl("describe", "pod",
                                                                                          "crasher").stdout
    c.kubectl("delete", "pod", "crasher", "--wait=false")


def test_python_client_stream_and_portforward(c):
    api = client.CoreV1Api(c.client())
    out = stream(api.connect_get_namespaced_pod_exec, "web", "default", command=["sh", "-c", "echo $HOSTNAME"],
                 stderr=True, stdin=False, stdout=True, tty=False)
    assert out == "web\n"
    ws = stream(api.connect_get_namespaced_pod_exec, "web", "default", command=["sh", "-c", "cat; exit 7"],
                stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
    ws.write_stdin("via stdin\n")
    ws.close_channel(0)
    ws.run_forever(timeout=10)
    assert ws.read_stdout() == "via stdin\n" and ws.returncode == 7
    pf = portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="8080")
    sock = pf.socket(8080)
    sock.sendall(b"GET /py HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    assert data.startswith(b"HTTP/1.0 200") and data.endswith(b"hello from /py")
    assert pf.error(8080) is None


def test_a_shared_process_namespace_lets_containers_see_and_signal_each_other(c):
    """shareProcessNamespace ("Share Process Namespace between Containers in a Pod"): `kubectl
    exec` into either container sees the pod's processes, PID 1 the sandbox's pause; `kill` from
    one ends the other's first process (no PID 1 there: SIGTERM kills it, 143), which restarts.
    Without it, a container's first process is its own namespace's PID 1."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "shared", "namespace": "default"},
           "spec": {"shareProcessNamespace": True, "terminationGracePeriodSeconds": 1, "containers": [
               {"name": "app", "image": "nginx", "command": ["sleep", "601"]},
               {"name": "shell", "image": "busybox", "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 602 & wait"]}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    c.kubectl("wait", "--for=condition=Ready", "pod/shared", "--timeout=60s")
    ps = c.kubectl("exec", "shared", "-c", "shell", "--", "ps", "-e", "-o", "pid=,args=").stdout
    seen = {int(pid): args for pid, args in (line.split(None, 1) for line in ps.splitlines())}
    assert "sleep 602" in seen.values() and "ps -e -o pid=,args=" in seen.values()
    assert c.kubectl("exec", "shared", "-c", "app", "--", "cat", "/proc/1/comm").stdout == "pause\n"
    app = next(pid for pid, args in seen.items() if args == "sleep 601")
    c.kubectl("exec", "shared", "-c", "shell", "--", "kill", str(app))

    def restarted():
        st = next(s for s in c.kubectl_json("get", "pod", "shared")["status"]["containerStatuses"] if s["name"] == "app")
        return st["restartCount"] == 1 and "running" in st["state"] and st
    st = wait_for(restarted, 30, "app restarted")
    assert st["lastState"]["terminated"]["exitCode"] == 143
    assert c.kubectl("exec", "web", "--", "cat", "/proc/1/cmdline").stdout.startswith("python3\x00-c\x00")
    c.kubectl("delete", "pod", "shared", "--wait=false")


def test_exec_with_a_terminal_and_resize(c):
    api = client.CoreV1Api(c.client())
    ws = stream(api.connect_get_namespaced_pod_exec, "web", "default", command=["sh"], stderr=True, stdin=True,
                stdout=True, tty=True, _preload_content=False)
    ws.write_channel(4, '{"Width": 100, "Height": 40}')
    ws.write_stdin("stty size; tty; exit 5\n")
    ws.run_forever(timeout=10)
    out = ws.read_stdout()
    assert "40 100\r\n/dev/pts/" in out and "job control" not in out
    assert ws.returncode == 5


def test_a_terminal_sets_term_as_containerd_does(c):
    """containerd sets TERM=xterm for a process given a terminal: an exec with a tty, and a container
    whose spec asks for one (before its own env, which may set it otherwise); none without."""
    api = client.CoreV1Api(c.client())
    ws = stream(api.connect_get_namespaced_pod_exec, "web", "default", command=["sh", "-c", "echo TERM=$TERM"],
                stderr=True, stdin=False, stdout=True, tty=True, _preload_content=False)
    ws.run_forever(timeout=10)
    assert ws.read_stdout() == "TERM=xterm\r\n"
    assert c.kubectl("exec", "web", "--", "sh", "-c", "echo TERM=$TERM").stdout == "TERM=\n"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "terminal", "namespace": "default"},
           "spec": {"terminationGracePeriodSeconds": 0, "containers": [
               {"name": "tty", "image": "busybox", "tty": True, "stdin": True,
                "command": ["sh", "-c", "echo TERM=$TERM; sleep 600"]},
               {"name": "own", "image": "busybox", "tty": True, "env": [{"name": "TERM", "value": "vt100"}],
                "command": ["sh", "-c", "echo TERM=$TERM; sleep 600"]}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: c.kubectl("logs", "terminal", "-c", "own", check=False).stdout, 60, "the containers ran")
    assert c.kubectl("logs", "terminal", "-c", "tty").stdout.rstrip("\r\n") == "TERM=xterm"
    assert c.kubectl("logs", "terminal", "-c", "own").stdout.rstrip("\r\n") == "TERM=vt100"
    c.kubectl("delete", "pod", "terminal", "--wait=false")


def test_containers_get_the_kubelets_service_variables(c):
    """The kubelet's service links: every container gets the default namespace's `kubernetes`
    Service variables (what in-cluster clients read), and, unless enableServiceLinks is false, those
    of each Service with a cluster IP in its namespace; its own env wins."""
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-svc", "namespace": "default"},
           "spec": {"selector": {"app": "none"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                                                            {"name": "dns", "port": 53, "protocol": "UDP"}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(svc))
    ip = c.kubectl_json("get", "service", "echo-svc")["spec"]["clusterIP"]
    printer = ["sh", "-c", "env | grep -E '^(KUBERNETES|ECHO_SVC)_' | sort"]
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
             "spec": {"restartPolicy": "Never", "enableServiceLinks": links, "containers": [
                 {"name": "main", "image": "busybox", "command": printer,
                  "env": [{"name": "ECHO_SVC_SERVICE_HOST", "value": "mine"}]}]}}
            for name, links in (("linked", True), ("unlinked", False))]
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    for name in ("linked", "unlinked"):
        status = _finished(c, name, 90)
        assert status.get("phase") == "Succeeded", status
    kubernetes = ["KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443",
                  "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1", "KUBERNETES_PORT_443_TCP_PORT=443",
                  "KUBERNETES_PORT_443_TCP_PROTO=tcp", "KUBERNETES_SERVICE_HOST=10.96.0.1",
                  "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443"]
    echo = [f"ECHO_SVC_PORT=tcp://{ip}:80", f"ECHO_SVC_PORT_53_UDP=udp://{ip}:53", f"ECHO_SVC_PORT_53_UDP_ADDR={ip}",
            "ECHO_SVC_PORT_53_UDP_PORT=53", "ECHO_SVC_PORT_53_UDP_PROTO=udp", f"ECHO_SVC_PORT_80_TCP=tcp://{ip}:80",
            f"ECHO_SVC_PORT_80_TCP_ADDR={ip}", "ECHO_SVC_PORT_80_TCP_PORT=80", "ECHO_SVC_PORT_80_TCP_PROTO=tcp",
            "ECHO_SVC_SERVICE_HOST=mine", "ECHO_SVC_SERVICE_PORT=80", "ECHO_SVC_SERVICE_PORT_DNS=53",
            "ECHO_SVC_SERVICE_PORT_HTTP=80"]
    assert c.kubectl("logs", "linked").stdout.splitlines() == sorted(echo) + kubernetes
    assert c.kubectl("logs", "unlinked").stdout.splitlines() == ["ECHO_SVC_SERVICE_HOST=mine"] + kubernetes
    c.kubectl("delete", "pod", "linked", "unlinked", "--wait=false")
    c.kubectl("delete", "service", "echo-svc")


def _finished(c, name: str, timeout: float) -> dict:
    """The status of pod `name` once it has ended; on a timeout the failure shows its last status,
    its events and what the cluster logged about it, so a pod that never ends says why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = c.kubectl_json("get", "pod", name)["status"]
        if status.get("phase") in ("Succeeded", "Failed"):
            return status
        time.sleep(0.25)
    events = c.kubectl("events", "--for", f"pod/{name}", check=False).stdout
    logged = [line for line in c.log_path.read_text(errors="replace").splitlines() if name in line]
    raise AssertionError(f"pod {name} never ended: {json.dumps(status)}\n{events}\n" + "\n".join(logged[-40:]))


def test_port_forward_to_a_closed_port_reports_the_error(c):
    api = client.CoreV1Api(c.client())
    pf = portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="9999")
    sock = pf.socket(9999)
    assert sock.recv(10) == b""
    assert "connection refused" in pf.error(9999)


def test_top_pod_reports_measured_usage(c):
    burner = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "burner", "namespace": "default"},
              "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                  "name": "main", "image": "python:3.11",
                  "command": ["python3", "-c", "b = bytearray(64 << 20)\nwhile True: pass"]}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(burner))
    wait_for(lambda: c.kubectl_json("get", "pod", "burner")["status"].get("phase") == "Running", 60, "burner runs")

    def busy():
        r = c.kubectl("top", "pod", "burner", "--no-headers", check=False)
        if r.returncode != 0:  # no usage measured for it yet: its PodMetrics are not found
            assert 'podmetrics.metrics.k8s.io "default/burner" not found' in r.stderr, r.stderr
            return None
        row = r.stdout.split()
        return row if int(row[1].rstrip("m")) >= 100 else None
    row = wait_for(busy, 30, "measured CPU")
    assert int(row[2].rstrip("Mi")) >= 64, "resident memory includes the 64 MiB buffer"
    c.kubectl("delete", "pod", "burner", "--wait=false")


def test_an_exec_binds_a_mount_target_removed_on_the_host_meanwhile(c):
    """Containers see the host's file system with their volumes bound over it: a mount target
    some other process removed while the pod runs (a temp-file cleaner, another cluster on the
    host) is made again for the next exec, not its "bind ... No such file or directory"."""
    top = Path(tempfile.gettempdir()) / f"nanokube-e2e-mount-{os.getpid()}"
    target = top / "scratch"
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mounts", "namespace": "default"},
        "spec": {"terminationGracePeriodSeconds": 1, "automountServiceAccountToken": False,
                 "volumes": [{"name": "scratch", "emptyDir": {}}],
                 "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                                 "volumeMounts": [{"name": "scratch", "mountPath": str(target)}]}]}}))
    wait_for(lambda: c.kubectl_json("get", "pod", "mounts")["status"].get("phase") == "Running", 90, "mounts running")
    shutil.rmtree(top)
    r = c.kubectl("exec", "mounts", "--", "sh", "-c", f"echo kept > {target}/f; cat {target}/f", check=False)
    assert (r.returncode, r.stdout) == (0, "kept\n"), r.stderr
    c.kubectl("delete", "pod", "mounts", "--wait=true", "--timeout=60s")
    assert not top.exists(), "what was made again goes with the pod"
