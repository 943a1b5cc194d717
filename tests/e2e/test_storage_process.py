"""A PersistentVolumeClaim in `nanokube up --runtime process`: a pod really
writes a file into its claim's directory (DIR/volumes/<pv>), is deleted, and
a new pod of the same name reads it back; a pod taking the claim read-only
cannot write it; a trainer reads an NFS export and checkpoints to a claim of
the built-in CSI driver.

Skipped (loudly) only without root, `ip` or `nft`, as the other process-runtime tests."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

CLUSTER_FILE = "examples/clusters/process-3cpu.yaml"
MOUNT = "/mnt/nanokube-e2e-claim"

pytestmark = PROCESS_RUNTIME


@pytest.fixture(scope="module")
def proc_cluster(store_url):
    with process_cluster(store_url, "pvc", ("--cluster", CLUSTER_FILE)) as c:
        yield c


def pod(script: str, read_only: bool = False) -> str:
    claim = {"claimName": "notes", **({"readOnly": True} if read_only else {})}
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                                 "volumeMounts": [{"name": "data", "mountPath": MOUNT}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": claim}]}})


def finished(c) -> str:
    got = c.kubectl_json("get", "pod", "worker")
    return (got.get("status") or {}).get("phase") in ("Succeeded", "Failed") and got["status"]["phase"]


def test_pod_writes_its_claim_and_a_new_pod_reads_it_back(proc_cluster):
    c = proc_cluster
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "notes"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    c.kubectl("apply", "-f", "-", input=pod(f"echo written-by-$(hostname) > {MOUNT}/note.txt"))
    assert wait_for(lambda: finished(c), 60, "writer finished") == "Succeeded"
    volume = c.kubectl_json("get", "pvc", "notes")["spec"]["volumeName"]
    assert (c.data_dir / "volumes" / volume / "note.txt").read_text() == "written-by-worker\n"
    c.kubectl("delete", "pod", "worker")
    c.kubectl("apply", "-f", "-", input=pod(f"cat {MOUNT}/note.txt"))
    assert wait_for(lambda: finished(c), 60, "reader finished") == "Succeeded"
    assert c.kubectl("logs", "worker").stdout == "written-by-worker\n"
    c.kubectl("delete", "pod", "worker")
    c.kubectl("apply", "-f", "-", input=pod(f"touch {MOUNT}/more 2>/dev/null && echo writable || echo read-only",
                                            read_only=True))
    assert wait_for(lambda: finished(c), 60, "read-only pod finished") == "Succeeded"
    assert c.kubectl("logs", "worker").stdout == "read-only\n"
    # the runtime removes the mount point it made once the finished pod's sandbox is torn down, which
    # may come after the phase is written
    assert wait_for(lambda: not os.path.exists(MOUNT), 30, "the mount point removed")


def test_a_trainer_checkpoints_to_a_csi_claim_and_reads_an_nfs_export(proc_cluster):
    """The built-in CSI driver's claim and a static NFS volume (the fake server's export under
    DIR/nfs) are the host directories the process writes."""
    c = proc_cluster
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "ckpt"},
         "provisioner": "local.csi.nanokube.io", "volumeBindingMode": "Immediate"},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "ckpt"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "ckpt",
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "datasets"},
         "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                  "nfs": {"server": "nfs.example.com", "path": "/exports/datasets"}}}]}))
    export = c.data_dir / "nfs" / "nfs.example.com" / "exports" / "datasets"
    export.mkdir(parents=True)
    (export / "shard-0").write_text("tokens\n")
    data = "/mnt/nanokube-e2e-datasets"
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox", "command": [
                     "sh", "-c", f"cat {data}/shard-0 > {MOUNT}/latest && echo step-100 >> {MOUNT}/latest"],
                     "volumeMounts": [{"name": "ckpt", "mountPath": MOUNT}, {"name": "data", "mountPath": data}]}],
                 "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}},
                             {"name": "data", "nfs": {"server": "nfs.example.com", "path": "/exports/datasets"}}]}}))

    def done():
        phase = (c.kubectl_json("get", "pod", "trainer").get("status") or {}).get("phase")
        return phase in ("Succeeded", "Failed") and phase
    assert wait_for(done, 60, "trainer finished") == "Succeeded"
    volume = c.kubectl_json("get", "pvc", "ckpt")["spec"]["volumeName"]
    assert (c.data_dir / "volumes" / volume / "latest").read_text() == "tokens\nstep-100\n"
