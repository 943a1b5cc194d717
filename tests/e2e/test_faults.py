"""Faults driven by `nanokube fault` (a separate process, over HTTPS) against
`nanokube up`, observed through kubectl."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import fresh_store, start_cluster


@pytest.fixture(scope="module")
def cluster():
    """A cluster whose nodes renew their leases every 0.5s and whose node
    lifecycle controller waits 3s, not 50s, for a heartbeat."""
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-faults-"))
    mp = pytest.MonkeyPatch()
    mp.setenv("NANOKUBE_NODE_MONITOR_GRACE", "3")
    mp.setenv("NANOKUBE_NODE_RENEW_INTERVAL", "0.5")
    with fresh_store() as url:
        c = start_cluster(d, url)
        mp.undo()
        try:
            yield c
        finally:
            c.stop()
            shutil.rmtree(d, ignore_errors=True)


def fault(c, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", *args, "--kubeconfig", c.kubeconfig],
                       check=False, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def _node(c, name: str) -> tuple[str, set]:
    n = c.kubectl_json("get", "node", name)
    ready = next(x["status"] for x in n["status"]["conditions"] if x["type"] == "Ready")
    return ready, {(t["key"], t["effect"]) for t in n["spec"].get("taints") or []}


def test_a_node_that_loses_its_lease_goes_unknown_and_unreachable(cluster):
    assert "lease-stop" in fault(cluster, "node", "gpu-0", "--lease-stop")
    got = wait_for(lambda: (s := _node(cluster, "gpu-0"))[0] == "Unknown" and s)
    assert got, _node(cluster, "gpu-0")
    assert ("node.kubernetes.io/unreachable", "NoExecute") in got[1]
    assert _node(cluster, "gpu-1")[0] == "True"
    fault(cluster, "node", "gpu-0", "--clear")
    assert wait_for(lambda: _node(cluster, "gpu-0") == ("True", set())), _node(cluster, "gpu-0")


def _device_taints(c, node: str, device: str) -> list[dict] | None:
    for s in c.kubectl_json("get", "resourceslices")["items"]:
        if s["spec"].get("nodeName") == node:
            for d in s["spec"].get("devices") or []:
                if d["name"] == device:
                    return d.get("taints") or []
    return None


def test_a_gpu_fault_taints_the_device_in_its_resourceslice_until_cleared(cluster):
    slices = cluster.kubectl_json("get", "resourceslices")["items"]
    device = next(d["name"] for s in slices if s["spec"]["driver"] == "gpu.nanokube.io" and s["spec"].get("nodeName") == "gpu-1"
                  for d in s["spec"].get("devices") or [])
    fault(cluster, "gpu", "gpu-1", device, "--kind", "xid")
    taints = wait_for(lambda: _device_taints(cluster, "gpu-1", device), timeout=5)
    assert [(t["key"], t["effect"]) for t in taints] == [("gpu.nanokube.io/xid", "NoExecute")]
    assert taints[0]["timeAdded"]
    fault(cluster, "gpu", "gpu-1", device, "--clear")
    assert wait_for(lambda: _device_taints(cluster, "gpu-1", device) == [], timeout=5)
