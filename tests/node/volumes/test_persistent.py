"""persistentVolumeClaim volumes on a node: the pod waits (FailedMount, in the
kubelet's words) until its claim is bound, then its volume directory is the
bound volume's directory, which outlives the pod; the kubelet finishes an
expansion the resizer left to the node."""

import os

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.controllers.persistentvolume import PersistentVolumeController
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.node.storage import CSI_DRIVER, PROVISIONER, LocalPathProvisioner
from nanokube.node.storage.provisioner import csi_driver_object
from nanokube.node.volumes import VolumeManager
from nanokube.node.volumes.persistent import node_expand
from nanokube.node.volumes.sources import RESYNC
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock
from tests.node.test_lifecycle import gone, phase_is


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    mgr = NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=str(tmp_path / "pods"))
    await mgr.start()
    yield s.client, clock, tmp_path
    await mgr.stop()
    await s.close()


async def test_claim_volume_is_the_bound_volumes_directory(env):
    client, clock, root = env
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create({"metadata": {"name": "data", "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}}})
    pods = client.resource("", "v1", "pods")
    p = await pods.create({"metadata": {"name": "user", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}})

    async def failed_mount():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        return [e["message"] for e in items if e["reason"] == "FailedMount"]
    assert (await eventually(failed_mount))[0] == \
        'MountVolume.SetUp failed for volume "d" : error processing PVC default/data: PVC is not bound'
    target = root / "volumes" / "pv-data"
    await client.resource("", "v1", "persistentvolumes").create({"metadata": {"name": "pv-data"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "hostPath": {"path": str(target), "type": "DirectoryOrCreate"}}})
    claim = await pvcs.get("data", "default")
    claim = await pvcs.update({**claim, "spec": {**claim["spec"], "volumeName": "pv-data"}})
    await pvcs.update({**claim, "status": {"phase": "Bound"}}, subresource="status")
    await clock.advance(2)  # the pod re-checks its volumes
    await eventually(phase_is(pods, "user", "Running"))
    link = root / "pods" / "gpu-0" / p["metadata"]["uid"] / "volumes" / "d"
    assert os.path.realpath(link) == str(target)
    (link / "kept.txt").write_text("kept")
    await pods.delete("user", "default", grace_period_seconds=0)
    await eventually(gone(pods, "user"))
    assert (target / "kept.txt").read_text() == "kept"


async def pod_on_static_claim(client, name: str, source: dict, mode: str = "Filesystem", use: dict | None = None) -> None:
    """A PersistentVolume `pv-<name>` with `source`, its claim `name` (Bound by hand, no binder
    runs here) and a pod `name` on gpu-0 whose container uses the claim's volume `data` as `use`
    says (by default not at all)."""
    pvs, pvcs = client.resource("", "v1", "persistentvolumes"), client.resource("", "v1", "persistentvolumeclaims")
    await pvs.create({"metadata": {"name": f"pv-{name}"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "volumeMode": mode, **source}})
    claim = await pvcs.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": f"pv-{name}", "volumeMode": mode,
        "resources": {"requests": {"storage": "1Gi"}}}})
    await pvcs.update({**claim, "status": {"phase": "Bound"}}, subresource="status")
    await client.resource("", "v1", "pods").create({"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", **(use or {})}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]}})


def failed_mounts(client, pods: int):
    """A check for `eventually`: pod name -> its FailedMount message, once `pods` pods have one."""
    async def check():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        got = {e["involvedObject"]["name"]: e["message"] for e in items if e["reason"] == "FailedMount"}
        return len(got) == pods and got
    return check


async def test_a_claim_on_a_csi_driver_no_node_runs_fails_in_the_kubelets_words(env):
    """A volume of a CSI driver whose node plugin no node registered (its DaemonSet is not
    installed) fails MountDevice as the kubelet's CSI plugin says, naming the PersistentVolume;
    a bound claim's hostPath that is no directory names it too."""
    client, clock, root = env
    # the driver's CSIDriver, as its chart installs it: nothing to attach, so the kubelet goes on to staging
    await client.resource("storage.k8s.io", "v1", "csidrivers").create(
        {"metadata": {"name": "efs.csi.aws.com"}, "spec": {"attachRequired": False}})
    await pod_on_static_claim(client, "efs", {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": "fs-1"}})
    await pod_on_static_claim(client, "host", {"hostPath": {"path": str(root / "absent"), "type": "Directory"}})
    assert await eventually(failed_mounts(client, 2)) == {
        "efs": 'MountVolume.MountDevice failed for volume "pv-efs" : kubernetes.io/csi: attacher.MountDevice '
               "failed to create newCsiDriverClient: driver name efs.csi.aws.com not found in the list of "
               "registered CSI drivers",
        "host": f'MountVolume.SetUp failed for volume "pv-host" : hostPath type check failed: {root / "absent"} '
                "is not a directory"}


async def test_a_claim_is_used_only_as_its_volume_mode_says(env):
    """The kubelet refuses a Block volume in volumeMounts and a Filesystem one in volumeDevices
    (the desired state of world populator's check), before looking at the volume's source."""
    client, clock, root = env
    for name, mode, use in (("raw", "Block", {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}),
                            ("files", "Filesystem", {"volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}]})):
        await pod_on_static_claim(client, name, {"hostPath": {"path": str(root / name), "type": "DirectoryOrCreate"}},
                                  mode, use)
    assert await eventually(failed_mounts(client, 2)) == {
        "raw": 'MountVolume.SetUp failed for volume "data" : volume data has volumeMode Block, but is specified '
               "in volumeMounts",
        "files": 'MountVolume.SetUp failed for volume "data" : volume data has volumeMode Filesystem, but is '
                 "specified in volumeDevices"}
    assert not (root / "raw").exists() and not (root / "files").exists()


async def test_a_block_claim_is_its_volumes_device_file_and_a_host_path_has_none(env):
    """A Block volume of the built-in CSI driver is mapped: its device, the file `block` in the
    volume's directory, is what the pod's volume links to (the simulated runtime shows it at the
    container's devicePath) and outlives the pod; a hostPath volume has no block plugin."""
    client, clock, root = env
    await client.resource("storage.k8s.io", "v1", "csidrivers").create(csi_driver_object())
    disk = root / "volumes" / "disk"
    disk.mkdir(parents=True)
    devices = {"volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}]}
    await pod_on_static_claim(client, "raw", {"csi": {"driver": CSI_DRIVER, "volumeHandle": "disk",
                                                      "volumeAttributes": {"path": str(disk)}}}, "Block", devices)
    await pod_on_static_claim(client, "host", {"hostPath": {"path": str(root / "host"), "type": "DirectoryOrCreate"}},
                              "Block", devices)
    pods = client.resource("", "v1", "pods")
    await eventually(phase_is(pods, "raw", "Running"))
    uid = (await pods.get("raw", "default"))["metadata"]["uid"]
    link = root / "pods" / "gpu-0" / uid / "volumes" / "data"
    assert os.path.realpath(link) == str(disk / "block") and (disk / "block").is_file()
    (disk / "block").write_bytes(b"raw bytes")
    assert await eventually(failed_mounts(client, 1)) == {
        "host": 'MountVolume.SetUp failed for volume "pv-host" : failed to get Plugin from volumeSpec for volume '
                '"pv-host" err=no volume plugin matched'}
    await pods.delete("raw", "default", grace_period_seconds=0)
    await eventually(gone(pods, "raw"))
    assert (disk / "block").read_bytes() == b"raw bytes"


@pytest.mark.parametrize("driver", [PROVISIONER, CSI_DRIVER])
async def test_a_running_pod_finishes_its_claims_expansion_at_its_next_resync(env, driver):
    """The resizer grew the volume (hostPath or the built-in CSI driver's) and left its filesystem
    to the node (NodeResizePending): the kubelet of the pod using it expands it at the pod's next
    resync, then the claim's capacity is the new size and no resize status or condition is left."""
    client, clock, root = env
    provisioner = LocalPathProvisioner(client, str(root / "volumes"))
    binder = PersistentVolumeController(client)
    for c in (provisioner, binder):
        await c.start()
    try:
        await client.resource("storage.k8s.io", "v1", "storageclasses").create({
            "metadata": {"name": "elastic"}, "provisioner": driver, "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": True})
        pvcs = client.resource("", "v1", "persistentvolumeclaims")
        await pvcs.create({"metadata": {"name": "ckpt", "namespace": "default"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "elastic", "resources": {"requests": {"storage": "1Gi"}}}})
        pods = client.resource("", "v1", "pods")
        await pods.create({"metadata": {"name": "trainer", "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}],
            "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]}})
        for _ in range(3):  # the pod re-checks its volumes until the claim is bound
            await clock.advance(2)
        running = await eventually(phase_is(pods, "trainer", "Running"))
        link = root / "pods" / "gpu-0" / running["metadata"]["uid"] / "volumes" / "ckpt"
        assert os.path.realpath(link).startswith(str(root / "volumes" / "pvc-"))
        await pvcs.patch("ckpt", {"spec": {"resources": {"requests": {"storage": "3Gi"}}}}, namespace="default")

        async def claim_where(check):
            pvc = await pvcs.get("ckpt", "default")
            return check(pvc["status"]) and pvc
        pending = await eventually(lambda: claim_where(
            lambda st: (st.get("allocatedResourceStatuses") or {}).get("storage") == "NodeResizePending"))
        assert pending["status"]["capacity"] == {"storage": "1Gi"}
        await clock.advance(RESYNC)
        done = await eventually(lambda: claim_where(lambda st: st["capacity"] == {"storage": "3Gi"}))
        assert "allocatedResourceStatuses" not in done["status"] and "conditions" not in done["status"]
        assert done["status"]["allocatedResources"] == {"storage": "3Gi"}

        async def resized_events():
            items, _ = await client.resource("", "v1", "events").list(namespace="default")
            return sorted((e["involvedObject"]["kind"], e["source"]["component"], e["message"])
                          for e in items if e["reason"] == "FileSystemResizeSuccessful")
        message = f'MountVolume.NodeExpandVolume succeeded for volume "{pending["spec"]["volumeName"]}" gpu-0'
        await becomes(resized_events, [("PersistentVolumeClaim", "kubelet", message), ("Pod", "kubelet", message)])
    finally:
        for c in (binder, provisioner):
            await c.stop()


async def test_an_expansion_read_from_a_stale_claim_waits_for_the_next_resync(env):
    """A claim changed since the kubelet read it: marking NodeResizeInProgress conflicts, and the
    kubelet leaves it for its next read instead of failing the mount."""
    client, clock, root = env
    pvs, pvcs = client.resource("", "v1", "persistentvolumes"), client.resource("", "v1", "persistentvolumeclaims")
    pv = await pvs.create({"metadata": {"name": "grown"}, "spec": {
        "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "hostPath": {"path": str(root / "grown")}}})
    pvc = await pvcs.create({"metadata": {"name": "c", "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": "grown",
        "resources": {"requests": {"storage": "2Gi"}}}})
    stale = await pvcs.update({**pvc, "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
                                                  "allocatedResourceStatuses": {"storage": "NodeResizePending"}}},
                              subresource="status")
    await pvcs.patch("c", {"metadata": {"labels": {"touched": "yes"}}}, namespace="default")
    mgr = VolumeManager(client, "gpu-0", str(root / "pods" / "gpu-0"), clock)
    try:
        await node_expand(mgr, {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}, stale, pv)
    finally:
        await mgr.close()
    assert (await pvcs.get("c", "default"))["status"]["allocatedResourceStatuses"] == {"storage": "NodeResizePending"}
