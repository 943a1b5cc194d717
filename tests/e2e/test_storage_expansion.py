"""Checkpoint volumes grow and change class on one `nanokube up`, driven as an
ML-platform engineer drives them: kubectl 1.37 patches the claim and reads its
status, conditions and events (`kubectl describe`), the official Python client
reads the typed status. A Filesystem claim in use grows in the controller and
waits for its pod to be restarted (NodeResizePending), then the kubelet
finishes it; an expansion past the disk is ControllerResizeInfeasible until
the request is lowered again; a VolumeAttributesClass change is Pending until
the class exists, then applied, and the class in use outlives its deletion; a
static NFS volume mounts on a node."""

from __future__ import annotations

import json

from kubernetes import client

from tests.e2e.conftest import wait_for

CLASSES = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ckpt}
provisioner: local.csi.nanokube.io
volumeBindingMode: Immediate
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ckpt}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ckpt
  resources: {requests: {storage: 1Gi}}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: busybox
    command: [sleep, infinity]
    volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
  - name: data
    {source}
"""


def claim(c) -> dict:
    return c.kubectl_json("get", "pvc", "ckpt")


def storage_status(c) -> str:
    return (claim(c)["status"].get("allocatedResourceStatuses") or {}).get("storage", "")


def running(c, name: str) -> bool:
    return (c.kubectl_json("get", "pod", name).get("status") or {}).get("phase") == "Running"


def test_a_claim_in_use_grows_then_its_restarted_pod_finishes_it(cluster):
    c = cluster
    c.kubectl("apply", "-f", "-", input=CLASSES)
    wait_for(lambda: claim(c)["status"].get("phase") == "Bound", 30, "claim bound")
    c.kubectl("apply", "-f", "-", input=POD.format(name="trainer", source="persistentVolumeClaim: {claimName: ckpt}"))
    wait_for(lambda: running(c, "trainer"), 30, "trainer running")
    c.kubectl("patch", "pvc", "ckpt", "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    wait_for(lambda: storage_status(c) == "NodeResizePending", 30, "NodeResizePending")
    status = claim(c)["status"]
    assert status["capacity"] == {"storage": "1Gi"} and status["allocatedResources"] == {"storage": "2Gi"}
    assert {x["type"] for x in status["conditions"]} == {"Resizing", "FileSystemResizePending"}
    described = wait_for(lambda: (out := c.kubectl("describe", "pvc", "ckpt").stdout).count("FileSystemResizeRequired")
                         and "ExternalExpanding" in out and out, 30, "resize events")
    assert "waiting for an external controller to expand this PVC" in described
    assert "Require file system resize of volume on node" in described
    assert "Waiting for user to (re-)start a pod to finish file system resize of volume on node." in described
    pv = claim(c)["spec"]["volumeName"]
    assert c.kubectl_json("get", "pv", pv)["spec"]["capacity"] == {"storage": "2Gi"}
    # "(re-)start a pod": the new pod's kubelet expands the filesystem when it mounts the volume
    c.kubectl("delete", "pod", "trainer", "--wait=true")
    c.kubectl("apply", "-f", "-", input=POD.format(name="trainer", source="persistentVolumeClaim: {claimName: ckpt}"))
    wait_for(lambda: claim(c)["status"]["capacity"] == {"storage": "2Gi"}, 30, "capacity 2Gi")
    status = claim(c)["status"]
    assert "allocatedResourceStatuses" not in status and "conditions" not in status
    row = c.kubectl("get", "pvc", "ckpt", "--no-headers").stdout.split()
    assert row[:4] == ["ckpt", "Bound", pv, "2Gi"]
    events = wait_for(lambda: (out := c.kubectl("describe", "pod", "trainer").stdout).count("FileSystemResizeSuccessful")
                      and out, 30, "pod event")
    assert f'MountVolume.NodeExpandVolume succeeded for volume "{pv}"' in events

    # past the disk: infeasible, then recovered by asking for less (not below status.capacity)
    core = client.CoreV1Api(c.client())
    core.patch_namespaced_persistent_volume_claim("ckpt", "default", {"spec": {"resources": {"requests": {
        "storage": "1Ei"}}}})
    wait_for(lambda: storage_status(c) == "ControllerResizeInfeasible", 30, "ControllerResizeInfeasible")
    typed = core.read_namespaced_persistent_volume_claim("ckpt", "default")
    assert typed.status.allocated_resources == {"storage": "1Ei"}
    assert {x.type for x in typed.status.conditions} == {"Resizing", "ControllerResizeError"}
    refused = c.kubectl("patch", "pvc", "ckpt", "-p", '{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}',
                        check=False)
    assert refused.returncode == 1
    assert "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity" in refused.stderr
    c.kubectl("patch", "pvc", "ckpt", "-p", '{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}')
    wait_for(lambda: storage_status(c) == "NodeResizePending", 30, "recovered to 3Gi")
    assert claim(c)["status"]["allocatedResources"] == {"storage": "3Gi"}


def test_a_claim_changes_attributes_class_once_the_class_exists(cluster):
    c = cluster
    if c.kubectl("get", "pvc", "ckpt", check=False).returncode != 0:
        c.kubectl("apply", "-f", "-", input=CLASSES)
    wait_for(lambda: claim(c)["status"].get("phase") == "Bound", 30, "claim bound")
    c.kubectl("patch", "pvc", "ckpt", "-p", '{"spec":{"volumeAttributesClassName":"fast"}}')
    wait_for(lambda: claim(c)["status"].get("modifyVolumeStatus") == {"status": "Pending"}, 30, "Pending")
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": {"name": "fast"},
        "driverName": "local.csi.nanokube.io", "parameters": {"iops": "16000"}}))
    wait_for(lambda: claim(c)["status"].get("currentVolumeAttributesClassName") == "fast", 30, "modified")
    typed = client.CoreV1Api(c.client()).read_namespaced_persistent_volume_claim("ckpt", "default")
    assert typed.status.modify_volume_status is None and typed.status.current_volume_attributes_class_name == "fast"
    assert c.kubectl_json("get", "pv", claim(c)["spec"]["volumeName"])["spec"]["volumeAttributesClassName"] == "fast"
    # the resizer's Events, written from its recorder's queue, maybe after the status waited for
    assert wait_for(lambda: 'VAC "fast" does not exist.' in (out := c.kubectl("describe", "pvc", "ckpt").stdout) and
                    "external resizer modified volume ckpt with vac fast successfully" in out, 30, "the resizer's Events")
    # in use, the class outlives its deletion (kubernetes.io/vac-protection)
    c.kubectl("delete", "volumeattributesclass", "fast", "--wait=false")
    kept = c.kubectl_json("get", "volumeattributesclass", "fast")
    assert kept["metadata"]["deletionTimestamp"] and kept["metadata"]["finalizers"] == ["kubernetes.io/vac-protection"]


def test_a_static_nfs_volume_mounts_on_a_simulated_node(cluster):
    c = cluster
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "datasets"},
        "spec": {"capacity": {"storage": "10Ti"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "nfs": {"server": "nfs.example.com", "path": "/exports/datasets"}}}))
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "datasets"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "datasets",
                 "resources": {"requests": {"storage": "1Ti"}}}}))
    c.kubectl("apply", "-f", "-", input=POD.format(name="reader", source="persistentVolumeClaim: {claimName: datasets}"))
    wait_for(lambda: running(c, "reader"), 30, "reader running")
    assert (c.data_dir / "nfs" / "nfs.example.com" / "exports" / "datasets").is_dir()
