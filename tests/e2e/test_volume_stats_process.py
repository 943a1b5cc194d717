"""Scratch space a real training process fills shows in the kubelet's volume stats: on
`nanokube up --runtime process` an emptyDir is the pod's directory on the node, measured as
upstream's MetricsDu measures it, as its checkpoint claim is; a memory-backed one is a tmpfs the
size of the node's allocatable memory (no limit here), measured as that tmpfs. Skipped (loudly)
only without root, `ip` or `nft`, as the other process-runtime tests."""

from __future__ import annotations

import json

from nanokube.machinery.quantity import parse_quantity
from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

pytestmark = PROCESS_RUNTIME

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default"},
       "spec": {"terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": "busybox", "command": [
                    "sh", "-c", "head -c 2097152 /dev/zero > /scratch/shard && sleep 3600"],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                                     {"name": "ram", "mountPath": "/ram"}]}],
                "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "ram", "emptyDir": {"medium": "Memory"}}]}}


def test_an_emptydir_a_process_fills_is_measured(store_url, monkeypatch):
    monkeypatch.setenv("NANOKUBE_VOLUME_STATS_AGG_PERIOD", "1")  # a measurement stands 1 s, not 1 minute
    with process_cluster(store_url, "volstats") as c:
        c.kubectl("apply", "-f", "-", input=json.dumps(POD))
        pod = wait_for(lambda: (p := c.kubectl_json("get", "pod", "trainer"))["status"].get("phase") == "Running"
                       and p, 60, "trainer running")
        raw = f"/api/v1/nodes/{pod['spec']['nodeName']}/proxy/stats/summary"

        def scratch():
            pods = json.loads(c.kubectl("get", "--raw", raw).stdout)["pods"]
            volumes = {v["name"]: v for p in pods if p["podRef"]["name"] == "trainer" for v in p.get("volume") or ()}
            v = volumes.get("scratch")
            return (v, volumes["ram"]) if v and v["usedBytes"] >= 2 << 20 else None

        v, ram = wait_for(scratch, 30, "the emptyDir's 2 MiB in its volume stats")
        allocatable = c.kubectl_json("get", "node", pod["spec"]["nodeName"])["status"]["allocatable"]["memory"]
        assert (ram["capacityBytes"], ram["usedBytes"]) == (parse_quantity(allocatable), 0), ram
        assert "pvcRef" not in v and v["inodesUsed"] == 2, v  # the directory and the file
        assert v["capacityBytes"] >= v["availableBytes"] > 0
