"""A StatefulSet in `nanokube up --runtime process`: each of web-0..2 really
appends to its own claim (www-web-<n>); after web-1 is deleted and recreated
under the same name it finds its earlier line in the same volume.

Skipped (loudly) only without root, `ip` or `nft`, as the other process-runtime tests."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

CLUSTER_FILE = "examples/clusters/process-3cpu.yaml"
MOUNT = "/mnt/nanokube-e2e-sts"

pytestmark = PROCESS_RUNTIME


@pytest.fixture(scope="module")
def proc_cluster(store_url):
    with process_cluster(store_url, "sts", ("--cluster", CLUSTER_FILE)) as c:
        yield c


STATEFULSET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"serviceName": "web", "replicas": 3, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                 "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox", "command": [
                     "sh", "-c", f"echo $(hostname) >> {MOUNT}/starts; exec sleep 3600"],
                     "volumeMounts": [{"name": "www", "mountPath": MOUNT}]}]}},
             "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
                 "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}


def _starts(c, ordinal: int) -> str:
    volume = c.kubectl_json("get", "pvc", f"www-web-{ordinal}")["spec"].get("volumeName")
    path = c.data_dir / "volumes" / str(volume) / "starts"
    return path.read_text() if volume and path.exists() else ""


def test_each_pod_keeps_its_own_volume_across_a_restart(proc_cluster):
    c = proc_cluster
    c.kubectl("apply", "-f", "-", input=json.dumps(STATEFULSET))
    c.kubectl("rollout", "status", "statefulset/web", "--timeout=120s", timeout=130)
    for i in range(3):
        assert wait_for(lambda i=i: _starts(c, i), 30, f"web-{i} wrote its claim") == f"web-{i}\n"
    old = c.kubectl_json("get", "pod", "web-1")["metadata"]["uid"]
    c.kubectl("delete", "pod", "web-1")
    wait_for(lambda: c.kubectl_json("get", "pod", "web-1")["metadata"]["uid"] != old, 60, "web-1 recreated")
    c.kubectl("rollout", "status", "statefulset/web", "--timeout=120s", timeout=130)
    assert wait_for(lambda: _starts(c, 1) == "web-1\nweb-1\n", 30, "web-1 appended again")
    assert _starts(c, 0) == "web-0\n" and _starts(c, 2) == "web-2\n"
    assert not os.path.exists(MOUNT) or os.listdir(MOUNT) == [], "the claim is mounted in the pods, not the host"
