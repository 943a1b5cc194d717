"""The attach/detach controller with the node agents and the built-in CSI driver's attacher, over
the in-process API on a clock the test moves: a volume of a driver whose CSIDriver asks for
attaching gets a VolumeAttachment, the attacher attaches it, the Node lists it and the pod runs;
after the pod the kubelet stops reporting it in use and it is detached. A foreign driver's attacher
(played by the test) that fails or never answers, and a ReadWriteOnce volume wanted on a second
node, are told to the pods in upstream's words."""

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.controllers.attachdetach import AttachDetachController
from nanokube.controllers.pv_protection import PVProtectionController
from nanokube.machinery.errors import APIError
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.node.storage import CSI_DRIVER, LocalPathProvisioner
from nanokube.volume.attachment import attachment_name
from tests.controllers import eventually, ticking
from tests.node import api_on_manual_clock
from tests.node.test_lifecycle import gone, phase_is

VA = ("storage.k8s.io", "v1", "volumeattachments")


@pytest.fixture
async def env(tmp_path):
    async with api_on_manual_clock() as (s, clock):
        parts = [NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=str(tmp_path / "pods")),
                 LocalPathProvisioner(s.client, str(tmp_path / "volumes"), clock),
                 AttachDetachController(s.client, clock)]
        for p in parts:
            await p.start()
        drivers = s.client.resource("storage.k8s.io", "v1", "csidrivers")
        await drivers.delete(CSI_DRIVER)  # attachRequired is immutable: an admin recreates the driver
        await drivers.create({"metadata": {"name": CSI_DRIVER}, "spec": {"attachRequired": True}})
        yield s.client, clock, tmp_path
        for p in reversed(parts):
            await p.stop()


async def claimed_pod(client, name: str, node: str, csi: dict, claim: str = "", modes=("ReadWriteOnce",)) -> None:
    """A PersistentVolume `pv-<claim>` of `csi`, its claim (bound by hand: no binder runs) unless it
    exists, and a pod `name` on `node` mounting it."""
    claim = claim or name
    pvs, pvcs = client.resource("", "v1", "persistentvolumes"), client.resource("", "v1", "persistentvolumeclaims")
    try:
        await pvs.create({"metadata": {"name": f"pv-{claim}"}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": list(modes), "storageClassName": "", "csi": csi}})
        pvc = await pvcs.create({"metadata": {"name": claim, "namespace": "default"}, "spec": {
            "accessModes": list(modes), "storageClassName": "", "volumeName": f"pv-{claim}",
            "resources": {"requests": {"storage": "1Gi"}}}})
        await pvcs.update({**pvc, "status": {"phase": "Bound"}}, subresource="status")
    except APIError as e:
        if e.code != 409:
            raise
    await client.resource("", "v1", "pods").create({"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": node, "containers": [{"name": "app", "image": "busybox",
                                          "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})


def events(client, reason: str, count: int = 1):
    async def check():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        got = sorted((e["involvedObject"]["name"], e["message"]) for e in items if e["reason"] == reason)
        return len(got) >= count and got
    return check


async def attachment(client, name: str) -> dict | None:
    try:
        return await client.resource(*VA).get(name)
    except APIError as e:
        if e.code == 404:
            return None
        raise


async def test_a_volume_is_attached_before_its_pod_mounts_it_and_detached_after_it(env):
    client, clock, root = env
    path = root / "volumes" / "disk"
    path.mkdir(parents=True)
    await claimed_pod(client, "user", "gpu-0", {"driver": CSI_DRIVER, "volumeHandle": "disk",
                                                "volumeAttributes": {"path": str(path)}})
    name = attachment_name("disk", CSI_DRIVER, "gpu-0")

    async def attached():
        va = await attachment(client, name)
        return va if (va or {}).get("status", {}).get("attached") else None
    va = await ticking(clock, attached)
    assert va["spec"] == {"attacher": CSI_DRIVER, "nodeName": "gpu-0", "source": {"persistentVolumeName": "pv-user"}}
    assert va["metadata"]["finalizers"] == ["external-attacher/local-csi-nanokube-io"]
    pods = client.resource("", "v1", "pods")
    await ticking(clock, phase_is(pods, "user", "Running"))
    node = await client.resource("", "v1", "nodes").get("gpu-0")
    unique = f"kubernetes.io/csi/{CSI_DRIVER}^disk"
    assert node["status"]["volumesAttached"] == [{"name": unique, "devicePath": ""}]
    assert node["status"]["volumesInUse"] == [unique]
    assert await ticking(clock, events(client, "SuccessfulAttachVolume")) == [
        ("user", 'AttachVolume.Attach succeeded for volume "pv-user" ')]

    await pods.delete("user", "default", grace_period_seconds=0)
    await ticking(clock, gone(pods, "user"))

    async def detached():
        n = await client.resource("", "v1", "nodes").get("gpu-0")
        return await attachment(client, name) is None and not n["status"].get("volumesAttached") and \
            not n["status"].get("volumesInUse")
    assert await ticking(clock, detached)
    assert path.is_dir()  # detaching a directory leaves it


async def test_a_foreign_attachers_failure_and_silence_are_told_to_the_pod(env):
    """efs.csi.aws.com has no CSIDriver here, so it needs attaching: the VolumeAttachment waits for
    an attacher no one runs (the test plays it): 2 minutes of silence, then its attachError, are
    FailedAttachVolume; the kubelet waits for the attachment before it tries the driver, and says
    so after its 2 minutes (and 3 s) of waiting, not at each try; the Node listing the volume attached
    wakes the waiting mount at once."""
    client, clock, root = env
    await claimed_pod(client, "efs", "gpu-0", {"driver": "efs.csi.aws.com", "volumeHandle": "fs-1"})
    name = attachment_name("fs-1", "efs.csi.aws.com", "gpu-0")
    assert await ticking(clock, lambda: attachment(client, name))
    for _ in range(100):
        await clock.advance(1)
    assert not await events(client, "FailedMount")()
    assert await ticking(clock, events(client, "FailedMount")) == [
        ("efs", "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: "
                "timed out waiting for the condition")]
    assert await ticking(clock, events(client, "FailedAttachVolume"), step=10.0) == [
        ("efs", 'AttachVolume.Attach failed for volume "pv-efs" : timed out waiting for external-attacher of '
                "efs.csi.aws.com CSI driver to attach volume fs-1")]
    await client.resource(*VA).patch(name, {"status": {"attachError": {"message": "rpc error: code = Internal"}}},
                                     subresource="status")
    assert ("efs", 'AttachVolume.Attach failed for volume "pv-efs" : rpc error: code = Internal') in \
        await ticking(clock, events(client, "FailedAttachVolume", 2))
    await client.resource(*VA).patch(name, {"status": {"attached": True, "attachError": None}}, subresource="status")

    async def mount_device_failed():
        got = await events(client, "FailedMount", 2)()
        return got and any("MountDevice" in m for _, m in got)
    # the Node listing it attached wakes the waiting mount: virtual time stands still (its back-off is long)
    assert await eventually(mount_device_failed)
    assert await events(client, "SuccessfulAttachVolume")()


async def test_a_read_write_once_volume_is_not_attached_to_a_second_node(env):
    client, clock, root = env
    path = root / "volumes" / "shared"
    path.mkdir(parents=True)
    csi = {"driver": CSI_DRIVER, "volumeHandle": "shared", "volumeAttributes": {"path": str(path)}}
    await claimed_pod(client, "first", "gpu-0", csi, claim="shared")
    pods = client.resource("", "v1", "pods")
    await ticking(clock, phase_is(pods, "first", "Running"))
    await claimed_pod(client, "second", "gpu-1", csi, claim="shared")
    assert await ticking(clock, events(client, "FailedAttachVolume")) == [
        ("second", 'Multi-Attach error for volume "pv-shared" Volume is already used by pod(s) first')]
    assert await attachment(client, attachment_name("shared", CSI_DRIVER, "gpu-1")) is None
    await pods.delete("first", "default", grace_period_seconds=0)
    await ticking(clock, phase_is(pods, "second", "Running"))
    assert await attachment(client, attachment_name("shared", CSI_DRIVER, "gpu-0")) is None


async def test_volume_attachments_another_client_made_are_left_alone_until_a_restart_takes_ours_in(env):
    """The controller detaches only what its actual state holds: a VolumeAttachment another client
    makes (another attacher's, or one under the controller's own name for a volume no pod wants) is
    neither detached nor listed on the Node, while pods' volumes come and go there. A controller
    starting later takes in the one under its name as uncertain and detaches it (no pod wants it);
    the other attacher's stays."""
    client, clock, root = env
    (root / "volumes" / "disk").mkdir(parents=True)
    (root / "volumes" / "spare").mkdir(parents=True)
    spare = {"driver": CSI_DRIVER, "volumeHandle": "spare", "volumeAttributes": {"path": str(root / "volumes" / "spare")}}
    await client.resource("", "v1", "persistentvolumes").create({"metadata": {"name": "pv-spare"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "", "csi": spare}})
    ours, theirs = attachment_name("spare", CSI_DRIVER, "gpu-0"), "dra-driver-gpu-0"
    for name, attacher in ((ours, CSI_DRIVER), (theirs, "gpu.example.com")):
        await client.resource(*VA).create({"metadata": {"name": name}, "spec": {
            "attacher": attacher, "nodeName": "gpu-0", "source": {"persistentVolumeName": "pv-spare"}}})
    await claimed_pod(client, "user", "gpu-0", {"driver": CSI_DRIVER, "volumeHandle": "disk",
                                                "volumeAttributes": {"path": str(root / "volumes" / "disk")}})
    pods, nodes = client.resource("", "v1", "pods"), client.resource("", "v1", "nodes")
    await ticking(clock, phase_is(pods, "user", "Running"))
    assert [v["name"] for v in (await nodes.get("gpu-0"))["status"]["volumesAttached"]] == [
        f"kubernetes.io/csi/{CSI_DRIVER}^disk"]
    await pods.delete("user", "default", grace_period_seconds=0)

    async def detached():
        return await attachment(client, attachment_name("disk", CSI_DRIVER, "gpu-0")) is None and \
            not (await nodes.get("gpu-0"))["status"].get("volumesAttached")
    await ticking(clock, detached)
    await clock.advance(400)  # past maxWaitForUnmount too
    for name in (ours, theirs):
        va = await attachment(client, name)
        assert va is not None and "deletionTimestamp" not in va["metadata"]
    assert (await attachment(client, ours))["status"]["attached"]  # the built-in attacher attached it

    restarted = AttachDetachController(client, clock)
    await restarted.start()
    try:
        async def ours_detached():
            return await attachment(client, ours) is None
        assert await ticking(clock, ours_detached)
        await clock.advance(400)
        assert "deletionTimestamp" not in (await attachment(client, theirs))["metadata"]
    finally:
        await restarted.stop()


async def test_a_volume_deleted_while_attached_stays_until_it_is_detached(env):
    """The attacher puts its finalizer on the PersistentVolume as it attaches it: deleted while its
    pod runs, the volume stays (Terminating; the PV protection controller let it go, no claim being
    Bound here) as long as a VolumeAttachment names it, and goes once the pod's end detached it."""
    client, clock, root = env
    protection = PVProtectionController(client, clock)
    await protection.start()
    try:
        path = root / "volumes" / "held"
        path.mkdir(parents=True)
        await claimed_pod(client, "user", "gpu-0", {"driver": CSI_DRIVER, "volumeHandle": "held",
                                                    "volumeAttributes": {"path": str(path)}})
        pods, pvs = client.resource("", "v1", "pods"), client.resource("", "v1", "persistentvolumes")
        await ticking(clock, phase_is(pods, "user", "Running"))
        ours = "external-attacher/local-csi-nanokube-io"
        assert (await pvs.get("pv-user"))["metadata"]["finalizers"] == ["kubernetes.io/pv-protection", ours]
        await pvs.delete("pv-user")
        await clock.advance(30)
        pv = await pvs.get("pv-user")
        assert pv["metadata"]["deletionTimestamp"] and pv["metadata"]["finalizers"] == [ours]
        assert (await attachment(client, attachment_name("held", CSI_DRIVER, "gpu-0")))["status"]["attached"]
        await pods.delete("user", "default", grace_period_seconds=0)

        async def volume_gone():
            try:
                await pvs.get("pv-user")
            except APIError as e:
                return e.code == 404
        assert await ticking(clock, volume_gone)
        assert await attachment(client, attachment_name("held", CSI_DRIVER, "gpu-0")) is None
    finally:
        await protection.stop()


async def test_the_attacher_refuses_a_node_its_lister_does_not_know(env):
    """ControllerPublish needs the node: the attacher reads it from its node lister, and a
    VolumeAttachment for a node there is none of gets the lister's words as its attachError."""
    client, clock, root = env
    path = root / "volumes" / "stray"
    path.mkdir(parents=True)
    await client.resource("", "v1", "persistentvolumes").create({"metadata": {"name": "pv-stray"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "csi": {"driver": CSI_DRIVER, "volumeHandle": "stray", "volumeAttributes": {"path": str(path)}}}})
    await client.resource(*VA).create({"metadata": {"name": "stray"}, "spec": {
        "attacher": CSI_DRIVER, "nodeName": "gpu-9", "source": {"persistentVolumeName": "pv-stray"}}})

    async def refused():
        va = await attachment(client, "stray")
        return ((va or {}).get("status") or {}).get("attachError")
    error = await ticking(clock, refused)
    assert error["message"] == 'node "gpu-9" not found', error
    assert not (await attachment(client, "stray"))["status"].get("attached")
