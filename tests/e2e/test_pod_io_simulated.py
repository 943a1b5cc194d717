"""What a user sees of simulated pods in their first minutes, through kubectl:
lifecycle log lines, exec as a runtime answers it for an image without the
binary (or as the pod's sim.nanokube.io/exec.* annotations script it),
port-forward to a pod's ports, `kubectl top` following the usage model
(a crash-looping container counting for nothing),
an HPA on CPU utilization scaling when `nanokube metrics usage` raises the
usage, and `kubectl auth whoami`."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys

import pytest

from tests.e2e.conftest import KUBECTL, http_get, running_cluster, wait_for

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default", "annotations": {
    "sim.nanokube.io/log": "loading dataset\n@1s epoch 1 loss 0.9",
    "sim.nanokube.io/exec.nvidia-smi": '{"stdout": "GPU 0: NVIDIA H100\\n", "exitCode": 0}',
    "sim.nanokube.io/exec.check": '{"stderr": "not healthy\\n", "exitCode": 3}'}},
    "spec": {"containers": [{"name": "main", "image": "trainer:1.0", "ports": [{"containerPort": 8000}],
                             "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}}

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                       "name": "web", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}]}}}}

HPA = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
       "metadata": {"name": "web", "namespace": "default"},
       "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 4,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                    "type": "Utilization", "averageUtilization": 60}}}]}}


@pytest.fixture(scope="module")
def c(store_url):
    # the HPA counts a ready pod's CPU at once, not one metrics window (15 s) after it became ready
    env = {"NANOKUBE_HPA_SYNC_PERIOD": "1", "NANOKUBE_HPA_CPU_INITIALIZATION_PERIOD": "0"}
    with running_cluster("pod-io", env=env, store=store_url) as cluster:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(POD))
        wait_for(lambda: cluster.kubectl_json("get", "pod", "trainer")["status"].get("phase") == "Running", 60,
                 "trainer running")
        yield cluster


def test_logs_show_the_lifecycle_and_scripted_lines(c):
    lines = wait_for(lambda: (out := c.kubectl("logs", "trainer").stdout.splitlines()) and len(out) >= 4 and out,
                     30, "the scripted line")
    assert lines == ["nanokube: container main started (image docker.io/library/trainer:1.0)",
                     "nanokube: container main is ready", "loading dataset", "epoch 1 loss 0.9"]
    stamped = c.kubectl("logs", "trainer", "--timestamps", "--tail", "1").stdout
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z epoch 1 loss 0.9\n", stamped)
    assert c.kubectl("logs", "trainer", "--limit-bytes", "9").stdout == "nanokube:"
    assert c.kubectl("logs", "trainer", "--since", "1h").stdout.count("\n") == 4
    r = c.kubectl("logs", "trainer", "--previous", check=False)
    assert 'previous terminated container "main" in pod "trainer" not found' in r.stderr


def test_logs_of_a_pod_no_node_took_are_empty(c):
    """kube-apiserver's LogLocation: a pod without a host has an empty log (200, nothing) once its
    container is checked; only a node's kubelet says a container is waiting to start."""
    unplaced = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unplaced", "namespace": "default"},
                "spec": {"nodeSelector": {"no-such": "node"}, "containers": [{"name": "main", "image": "busybox"}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(unplaced))
    r = c.kubectl("logs", "unplaced", check=False)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = c.kubectl("logs", "unplaced", "-c", "nope", check=False)
    assert r.returncode == 1 and "container nope is not valid for pod unplaced" in r.stderr
    c.kubectl("delete", "pod", "unplaced", "--wait=false")


def test_exec_answers_as_a_runtime_does(c):
    assert c.kubectl("exec", "trainer", "--", "nvidia-smi").stdout == "GPU 0: NVIDIA H100\n"
    r = c.kubectl("exec", "trainer", "--", "check", check=False)
    assert r.returncode == 3 and "not healthy" in r.stderr and "command terminated with exit code 3" in r.stderr
    r = c.kubectl("exec", "trainer", "--", "no-such-binary", check=False)
    assert r.returncode == 1
    assert ('error: Internal error occurred: error executing command in container: failed to exec in container: '
            'failed to start exec') in r.stderr
    assert 'exec: "no-such-binary": executable file not found in $PATH: unknown' in r.stderr
    r = c.kubectl("exec", "trainer", "-c", "nope", "--", "ls", check=False)
    assert "container nope is not valid for pod trainer" in r.stderr


def port_forward(c, pod: str, port: int) -> tuple[subprocess.Popen, int]:
    """`kubectl port-forward` of `port` to a local port it picks, once it listens: it and that port."""
    p = subprocess.Popen([KUBECTL, "port-forward", f"pod/{pod}", f":{port}", "--address", "127.0.0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "KUBECONFIG": c.kubeconfig})
    return p, int(re.search(rf"127\.0\.0\.1:(\d+) -> {port}", p.stdout.readline()).group(1))


def forwarded_reply(local: int) -> bytes:
    """What a request sent to kubectl port-forward's `local` port gets back first: b"" where the
    connection is closed (or reset: kubectl closed it with the request unread)."""
    with socket.create_connection(("127.0.0.1", local), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        try:
            return sock.recv(100)
        except ConnectionResetError:
            return b""


def test_port_forward_reaches_any_port_a_container_may_listen_on(c):
    """Declared or not, a port of the running pod answers (what listens is not known, as for its
    httpGet hooks); a TLS client gets a plain-HTTP server's 400 and fails its handshake."""
    for port in (8000, 9000):
        p, local = port_forward(c, "trainer", port)
        try:
            assert http_get(f"http://127.0.0.1:{local}/") == f"nanokube simulated pod default/trainer port {port}\n"
            with pytest.raises(ssl.SSLError):
                with socket.create_connection(("127.0.0.1", local), timeout=10) as sock:
                    ssl.create_default_context().wrap_socket(sock, server_hostname="trainer")
        finally:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=10)


def test_port_forward_to_a_port_only_a_finished_init_container_declares_is_refused(c):
    """Nothing listens on it: the connection reaches nothing, and kubectl reports the kubelet's
    error (containerd's connection refused) and exits."""
    gated = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gated", "namespace": "default"},
             "spec": {"initContainers": [{"name": "fetch", "image": "busybox", "command": ["true"],
                                          "ports": [{"containerPort": 7000}]}],
                      "containers": [{"name": "main", "image": "trainer:1.0"}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(gated))
    wait_for(lambda: c.kubectl_json("get", "pod", "gated")["status"].get("phase") == "Running", 60, "gated running")
    p, local = port_forward(c, "gated", 7000)
    try:
        assert forwarded_reply(local) == b"", "nothing reaches the client from a closed port"
        assert p.wait(timeout=20) == 1
        err = p.stderr.read().replace('\\"', '"')  # (klog quotes the error)
        # the CRI streaming server's words: the pod named by its sandbox's ID, the uid left empty
        assert re.search(r"error forwarding port 7000 to pod ([0-9a-f]{64}), uid : failed to execute portforward in "
                         r'network namespace "[^"]+": failed to connect to localhost:7000 inside namespace "\1", IPv4: '
                         r"dial tcp4 127\.0\.0\.1:7000: connect: connection refused IPv6 dial tcp6: address localhost: "
                         r"no suitable address found", err), err
    finally:
        if p.poll() is None:
            p.kill()
        c.kubectl("delete", "pod", "gated", "--wait=false")


def test_port_forward_to_nginx_reaches_its_port_80_and_is_refused_elsewhere(c):
    """nginx's own server listens on 80 alone: forwarded there, it answers; forwarded to 8081, the
    local connection is accepted and closed, and kubectl prints the kubelet's error and exits."""
    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx-web", "namespace": "default"},
           "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(web))
    wait_for(lambda: c.kubectl_json("get", "pod", "nginx-web")["status"].get("phase") == "Running", 60, "nginx running")
    p, local = port_forward(c, "nginx-web", 80)
    try:
        assert http_get(f"http://127.0.0.1:{local}/") == "nanokube simulated pod default/nginx-web port 80\n"
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
    p, local = port_forward(c, "nginx-web", 8081)
    try:
        assert forwarded_reply(local) == b""
        assert p.wait(timeout=20) == 1
        err = p.stderr.read().replace('\\"', '"')
        assert re.search(r"error forwarding port 8081 to pod [0-9a-f]{64}, uid : .*dial tcp4 127\.0\.0\.1:8081: "
                         r"connect: connection refused", err), err
    finally:
        if p.poll() is None:
            p.kill()
        c.kubectl("delete", "pod", "nginx-web", "--wait=false")


def test_top_follows_the_usage_model(c):
    pods = c.kubectl("top", "pod", "trainer", "--no-headers").stdout.split()
    assert pods[1:] == ["1000m", "2048Mi"], "half of the requests"
    nodes = {line.split()[0]: line.split() for line in c.kubectl("top", "nodes", "--no-headers").stdout.splitlines()}
    node = c.kubectl_json("get", "pod", "trainer")["spec"]["nodeName"]
    assert nodes[node][1] == "1100m", "the pod plus the system's 100m"
    other = next(n for n in nodes if n != node)
    assert nodes[other][1] == "100m" and nodes[other][3] == "512Mi"


def test_top_leaves_out_a_crash_looping_container(c):
    """metrics-server has stats only for running containers: a pod whose only container is in
    CrashLoopBackOff has no metrics, and its node's usage does not count it."""
    node = c.kubectl_json("get", "pod", "trainer")["spec"]["nodeName"]
    other = next(n["metadata"]["name"] for n in c.kubectl_json("get", "nodes")["items"] if n["metadata"]["name"] != node)
    crasher = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": "default", "annotations": {
        "sim.nanokube.io/run-seconds": "0", "sim.nanokube.io/exit-code": "1"}},
        "spec": {"nodeName": other, "containers": [{"name": "main", "image": "trainer:1.0", "resources": {
            "requests": {"cpu": "4", "memory": "2Gi"}}}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(crasher))
    try:
        def backing_off():
            st = (c.kubectl_json("get", "pod", "crasher").get("status") or {}).get("containerStatuses") or [{}]
            waiting = (st[0].get("state") or {}).get("waiting") or {}
            return waiting.get("reason") == "CrashLoopBackOff" and st[0]["restartCount"] >= 1
        wait_for(backing_off, 60, "crasher in CrashLoopBackOff (a 10 s back-off, after its second exit)")
        r = c.kubectl("top", "pod", "crasher", check=False)
        assert r.returncode == 1
        assert 'podmetrics.metrics.k8s.io "default/crasher" not found' in r.stderr
        nodes = {line.split()[0]: line.split() for line in c.kubectl("top", "nodes", "--no-headers").stdout.splitlines()}
        assert (nodes[other][1], nodes[other][3]) == ("100m", "512Mi"), "the system's share only"
    finally:
        c.kubectl("delete", "pod", "crasher", "--wait=false")


def test_hpa_scales_when_the_simulated_usage_rises(c):
    c.kubectl("apply", "-f", "-", input=json.dumps(DEPLOY))
    c.kubectl("apply", "-f", "-", input=json.dumps(HPA))
    def utilization():
        metrics = (c.kubectl_json("get", "hpa", "web").get("status") or {}).get("currentMetrics") or [{}]
        return (metrics[0].get("resource") or {}).get("current", {}).get("averageUtilization")
    assert wait_for(utilization, 60, "the HPA reads CPU utilization") == 50, "half the request, under the target"
    assert c.kubectl_json("get", "deployment", "web")["spec"]["replicas"] == 1
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "metrics", "usage", "-l", "app=web", "--cpu", "900m",
                        "--kubeconfig", c.kubeconfig], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: c.kubectl_json("get", "deployment", "web")["spec"]["replicas"] >= 3, 60, "scaled up")
    util = c.kubectl_json("get", "hpa", "web")["status"]["currentMetrics"][0]["resource"]["current"]
    assert util["averageUtilization"] >= 60


def test_whoami(c):
    out = c.kubectl("auth", "whoami").stdout
    assert "kubernetes-super-admin" in out and "system:masters" in out
