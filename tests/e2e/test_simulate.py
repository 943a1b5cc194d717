"""`nanokube simulate` end to end: a cluster file and a JSON Lines trace with
a gang Job that must wait for a hog to finish, a pod with a DRA GPU claim
tolerating a taint for 60 s and a DeviceTaintRule that evicts it mid-run; results.json and report.html
show the group's wait and the eviction, and the report renders in headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.sim.chromium import BROWSER, open_report

CLUSTER = """\
pools:
  - name: node
    count: 2
    capacity: {cpu: "4", memory: 16Gi}
    gpus: {count: 2, model: T4, memory: 16Gi, architecture: Turing, driverVersion: "535.1", cudaVersion: "12.2",
           computeCapability: "7.5"}
"""


def _events() -> list[dict]:
    run = lambda s: {"sim.nanokube.io/run-seconds": str(s)}  # noqa: E731
    pod = lambda name, cpu, secs, **spec: {  # noqa: E731
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "annotations": run(secs)},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}], **spec}}
    trainer = pod("trainer", "500m", 3600, resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}])
    trainer["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return [
        {"time": 0, "object": pod("hog", "3", 300)},
        {"time": 10, "object": {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "trio", "namespace": "default"},
            "spec": {"parallelism": 3, "completions": 3, "scheduling": {"schedulingPolicy": {"gang": {}}},
                     "template": {"metadata": {"annotations": run(60)}, "spec": {"restartPolicy": "Never", "containers": [
                         {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]}}}}},
        {"time": 20, "object": {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu-claim", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nanokube.io", "tolerations": [{
                    "key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 60}]}}]}}}},
        {"time": 20, "object": trainer},
        {"time": 100, "object": {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "gpu-maintenance"},
            "spec": {"deviceSelector": {"driver": "gpu.nanokube.io"},
                     "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}}},
    ]


def test_simulate_gang_wait_and_device_taint_eviction(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in _events()))
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "import sys; from nanokube.cli import main; sys.exit(main(sys.argv[1:]))",
           "simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--trace", str(tmp_path / "trace.jsonl"),
           "--until", "900", "--seed", "3", "--out", str(out), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "placements" in proc.stdout
    doc = json.loads((out / "results.json").read_text())
    [run] = doc["runs"]
    assert run["virtual_s"] == 900
    waits = run["gang_wait_s"]
    assert len(waits) == 1 and 280 <= next(iter(waits.values())) <= 320, waits  # until the hog ended at ~300 s
    evicted = {e["pod"]: e for e in run["evictions"]}
    # tolerated for 60 s from the taint's timeAdded, which is stamped in virtual time
    assert "default/trainer" in evicted and 160 <= evicted["default/trainer"]["t"] < 165, run["evictions"]
    assert evicted["default/trainer"]["reason"] == "DeletionByDeviceTaintManager"
    page = (out / "report.html").read_text()
    assert "default/trainer" in page and "DeletionByDeviceTaintManager" in page and "Chart.js v4.4.7" in page
    if BROWSER:  # scripts/test.sh installs it; without it the page's rendering is tested nowhere else
        rendered, stderr = open_report(str(out / "report.html"))
        assert rendered == {"charts": "8", "errors": ""}, rendered
        assert "Uncaught" not in stderr, stderr[-2000:]


def test_paced_run_can_be_watched_with_a_kubernetes_client(tmp_path):
    """--speed with --serve-port: the simulated cluster answers a real client over HTTPS while it runs.
    The run lasts until the test has seen what it needs and stops it with Ctrl-C: a short --until
    ended it, and removed its kubeconfig, before a client slowed by a loaded machine read it."""
    import re
    import signal
    import time

    from kubernetes import client, config

    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": i, "object": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"watched-{i}", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}}
        for i in range(3)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in pods))
    cmd = [sys.executable, "-c", "import sys; from nanokube.cli import main; sys.exit(main(sys.argv[1:]))",
           "simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--trace", str(tmp_path / "trace.jsonl"),
           "--until", "600", "--speed", "1", "--serve-port", "0", "--quiet"]  # (the last pod comes at 2)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        kubeconfig = None
        deadline = time.monotonic() + 60
        while kubeconfig is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if m := re.search(r"export KUBECONFIG=(\S+)", line):
                kubeconfig = m.group(1)
        assert kubeconfig, "no kubeconfig announced"
        api = client.CoreV1Api(config.new_client_from_config(kubeconfig))
        running = set()
        while len(running) < 3 and time.monotonic() < deadline:
            running = {p.metadata.name for p in api.list_namespaced_pod("default").items if p.status.phase == "Running"}
            time.sleep(0.3)
        assert running == {"watched-0", "watched-1", "watched-2"}
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 130 and "3/3 pods scheduled (interrupted at virtual " in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
