"""A checkpoint written to a claim outlives its pod on the default simulated runtime: the
claim's volume is the node's directory for it (the local-path provisioner's), read and written
there, so the replacement pod reads what the first wrote, and the bytes are on disk; an emptyDir
still dies with its pod, and a volume the pod takes read-only refuses writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for

STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "trainer", "namespace": "default"},
       "spec": {"serviceName": "trainer", "replicas": 1, "selector": {"matchLabels": {"app": "trainer"}},
                "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": {
                    # `sleep` as PID 1 ignores SIGTERM: the replacement came after the default 30 s grace
                    "terminationGracePeriodSeconds": 1,
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                    "containers": [{"name": "train", "image": "busybox", "command": ["sleep", "infinity"],
                                    "volumeMounts": [{"name": "ckpt", "mountPath": "/data"},
                                                     {"name": "scratch", "mountPath": "/scratch"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "ckpt"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}


def _running(c, name: str, not_uid: str = "") -> dict:
    def ready():
        out = c.kubectl("get", "pod", name, "--ignore-not-found", "-o", "json", check=False).stdout
        p = json.loads(out) if out.strip() else {"metadata": {}}
        ok = (p.get("status") or {}).get("phase") == "Running" and p["metadata"].get("uid") != not_uid \
            and not p["metadata"].get("deletionTimestamp")
        return p if ok else None
    return wait_for(ready, 90, f"{name} Running")


@pytest.fixture(scope="module")
def trainer(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(STS))
    return cluster, _running(cluster, "trainer-0")


def test_a_checkpoint_on_a_claim_is_read_back_by_the_replacement_pod(trainer):
    c, first = trainer
    r = c.kubectl("exec", "trainer-0", "--", "sh", "-c",
                  "mkdir -p /data/ckpt && echo step-100 > /data/latest && echo w > /data/ckpt/weights "
                  "&& echo tmp > /scratch/tmp", check=False)
    assert r.returncode == 0, r.stderr
    claim = c.kubectl_json("get", "pvc", "ckpt-trainer-0")
    pv = c.kubectl_json("get", "pv", claim["spec"]["volumeName"])
    on_disk = Path(pv["spec"]["hostPath"]["path"])
    assert (on_disk / "latest").read_bytes() == b"step-100\n"
    assert (on_disk / "ckpt" / "weights").read_bytes() == b"w\n"
    c.kubectl("delete", "pod", "trainer-0", "--wait=false")
    _running(c, "trainer-0", not_uid=first["metadata"]["uid"])
    r = c.kubectl("exec", "trainer-0", "--", "cat", "/data/latest", check=False)
    assert (r.returncode, r.stdout) == (0, "step-100\n"), r.stderr
    r = c.kubectl("exec", "trainer-0", "--", "ls", "/data/ckpt", "/scratch", check=False)
    assert r.stdout == "/data/ckpt:\nweights\n\n/scratch:\n", r.stdout + r.stderr  # emptyDir died with the pod
    r = c.kubectl("exec", "trainer-0", "--", "rm", "-r", "/data/ckpt", check=False)
    assert r.returncode == 0 and not (on_disk / "ckpt").exists(), r.stderr


def test_a_claim_or_nfs_volume_taken_read_only_refuses_writes(trainer):
    c, _ = trainer
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader", "namespace": "default"}, "spec": {
        "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-trainer-0", "readOnly": True}},
                    {"name": "sets", "nfs": {"server": "nfs.example.com", "path": "/sets", "readOnly": True}}],
        "containers": [{"name": "eval", "image": "busybox", "command": ["sleep", "infinity"], "volumeMounts": [
            {"name": "ckpt", "mountPath": "/ckpt"}, {"name": "sets", "mountPath": "/sets"}]}]}}
    export = c.data_dir / "nfs" / "nfs.example.com" / "sets"
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    _running(c, "reader")
    (export / "train.csv").write_text("a,b\n")
    r = c.kubectl("exec", "reader", "--", "cat", "/ckpt/latest", "/sets/train.csv", check=False)
    assert (r.returncode, r.stdout) == (0, "step-100\na,b\n"), r.stderr
    for path in ("/ckpt/latest", "/sets/new"):
        r = c.kubectl("exec", "reader", "--", "sh", "-c", f"echo x > {path}", check=False)
        assert r.returncode != 0 and "Read-only file system" in r.stderr, (path, r.stderr)
    assert sorted(p.name for p in export.iterdir()) == ["train.csv"]
