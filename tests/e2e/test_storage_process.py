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


def test_a_block_claim_is_a_device_of_the_volumes_size_and_measured_as_one(proc_cluster):
    """A Block claim of the built-in CSI driver: its device (a file standing in for the disk, of
    the volume's size) is at the container's devicePath, where the process sees the disk's size and
    writes raw bytes that land in the volume; the kubelet measures it as upstream's MetricsBlock
    does, capacity alone, in /stats/summary and the kubelet_volume_stats_* gauges."""
    c = proc_cluster
    device = "/dev/nanokube-e2e-disk"
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "raw"},
         "provisioner": "local.csi.nanokube.io", "volumeBindingMode": "Immediate"},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "disk"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "raw", "volumeMode": "Block",
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "raw", "namespace": "default"},
         "spec": {"terminationGracePeriodSeconds": 1,
                  "containers": [{"name": "main", "image": "busybox", "command": [
                      "sh", "-c", f"stat -c %s {device} && printf header | dd of={device} conv=notrunc "
                                  "2>/dev/null && echo written && sleep 3600"],
                      "volumeDevices": [{"name": "data", "devicePath": device}]}],
                  "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "disk"}}]}}]}))
    try:
        assert wait_for(lambda: "written" in c.kubectl("logs", "raw", check=False).stdout, 60, "the disk written") and \
            c.kubectl("logs", "raw").stdout == f"{1 << 30}\nwritten\n"
        volume = c.kubectl_json("get", "pvc", "disk")["spec"]["volumeName"]
        disk = c.data_dir / "volumes" / volume / "block"
        assert disk.stat().st_size == 1 << 30 and disk.open("rb").read(6) == b"header"
        node = c.kubectl_json("get", "pod", "raw")["spec"]["nodeName"]
        summary = json.loads(c.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary").stdout)
        stats = [v for p in summary["pods"] if p["podRef"]["name"] == "raw" for v in p.get("volume") or ()
                 if v["name"] == "data"]
        assert [{k: v for k, v in s.items() if k != "time"} for s in stats] == [{
            "availableBytes": 0, "capacityBytes": 1 << 30, "usedBytes": 0, "inodesFree": 0, "inodes": 0,
            "inodesUsed": 0, "name": "data", "pvcRef": {"name": "disk", "namespace": "default"}}], stats
        gauges = {line.split("{")[0]: float(line.rsplit(" ", 1)[1])
                  for line in c.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics").stdout.splitlines()
                  if line.startswith("kubelet_volume_stats_") and 'persistentvolumeclaim="disk"' in line}
        assert gauges == {"kubelet_volume_stats_available_bytes": 0, "kubelet_volume_stats_capacity_bytes": 1 << 30,
                          "kubelet_volume_stats_inodes": 0, "kubelet_volume_stats_inodes_free": 0,
                          "kubelet_volume_stats_inodes_used": 0, "kubelet_volume_stats_used_bytes": 0}, gauges
    finally:
        c.kubectl("delete", "pod", "raw", "--ignore-not-found")
        c.kubectl("delete", "pvc", "disk", "--ignore-not-found")
    assert wait_for(lambda: not os.path.exists(device), 30, "the device's mount point removed")
