"""`nanokube simulate --speed X --serve-port PORT`: a served watch without timeoutSeconds lasts as
long in real time as one against `nanokube up` (--min-request-timeout's 30 to 60 min draw), not
1/X of it, though the server's clock runs X times faster; so does a request's deadline
(--request-timeout's 60 s)."""

from __future__ import annotations

import http.client
import json
import re
import select
import subprocess
import sys
import time

from .conftest import KUBECTL
from .test_bad_input import HTTP

CLUSTER = """\
pools:
  - name: node
    count: 1
    capacity: {cpu: "4", memory: 16Gi}
"""

SPEED = 1000  # 1800 to 3600 virtual seconds would be 1.8 to 3.6 real ones
OPEN_FOR = 4.5  # real seconds the watch must outlast once its first event came: more than 3.6


def test_a_served_watch_lasts_in_real_time_at_a_high_speed(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    (tmp_path / "trace.jsonl").write_text(json.dumps({"time": 0, "object": pod}) + "\n")
    cmd = [sys.executable, "-c", "import sys; from nanokube.cli import main; sys.exit(main(sys.argv[1:]))",
           "simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--trace", str(tmp_path / "trace.jsonl"),
           "--until", str(3600 * 24 * 30), "--speed", str(SPEED), "--serve-port", "0", "--quiet"]
    log = tmp_path / "stderr"
    with open(log, "w") as err:  # a file, not a pipe nobody drains after the first line
        sim = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    watch = None
    try:
        kubeconfig = None
        deadline = time.monotonic() + 60
        while kubeconfig is None and time.monotonic() < deadline and sim.poll() is None:
            if m := re.search(r"export KUBECONFIG=(\S+)", log.read_text()):
                kubeconfig = m.group(1)
            time.sleep(0.1)
        assert kubeconfig, f"no kubeconfig announced: {log.read_text()[-2000:]}"
        whoami = subprocess.run([KUBECTL, "--kubeconfig", kubeconfig, "auth", "whoami", "-o", "json"],
                                capture_output=True, text=True, timeout=60)
        assert json.loads(whoami.stdout)["status"]["userInfo"] == {  # (kubeadm's super-admin.conf's user)
            "username": "kubernetes-super-admin", "groups": ["system:masters", "system:authenticated"]}, whoami.stderr
        watch = subprocess.Popen([KUBECTL, "--kubeconfig", kubeconfig, "get", "--raw",
                                  "/api/v1/namespaces/default/pods?watch=1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # (the pod's ADDED: the server has the watch, so its timeout, were it virtual, would be at most 3.6 s off)
        assert select.select([watch.stdout], [], [], 60)[0], "the watch sent no event"
        first = watch.stdout.readline()
        assert '"name":"p"' in first, first[-2000:]
        try:
            watch.wait(timeout=OPEN_FOR)
        except subprocess.TimeoutExpired:
            pass
        assert watch.returncode is None, f"the watch ended after < {OPEN_FOR} s: rc {watch.returncode}"
        watch.kill()
        watch.communicate(timeout=10)
        # a create whose body comes 0.5 s after its headers: past 60 virtual seconds, well within 60 real ones
        h = HTTP(kubeconfig)
        conn = http.client.HTTPSConnection(h.server.removeprefix("https://"), context=h.ctx, timeout=30)
        body = json.dumps({"metadata": {"name": "slow"}}).encode()
        conn.putrequest("POST", "/api/v1/namespaces/default/configmaps")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        time.sleep(0.5)
        conn.send(body)
        answer = conn.getresponse()
        assert answer.status == 201, (answer.status, answer.read()[-2000:])
        conn.close()
    finally:
        # a SIGTERM, not a kill: simulate stops and removes its directory (kubeconfig, PKI) from /tmp
        for p in (watch, sim):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
