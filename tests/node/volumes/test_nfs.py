"""NFS volumes on simulated nodes: a static PersistentVolume with spec.nfs and an
inline nfs volume naming the same server and path are one export, shared by
pods on different nodes and kept after them, as a real NFS server's is."""

import os

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.controllers.persistentvolume import PersistentVolumeController
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from tests.controllers import eventually, make_stack
from tests.node import ManualClock
from tests.node.test_lifecycle import gone, phase_is


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    mgr = NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=str(tmp_path / "pods"))
    binder = PersistentVolumeController(s.client)
    await mgr.start()
    await binder.start()
    yield s.client, clock, tmp_path
    await binder.stop()
    await mgr.stop()
    await s.close()


def pod(name, node, volume):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": node, "containers": [{"name": "app", "image": "busybox"}], "volumes": [volume]}}


async def test_an_nfs_export_is_shared_by_pods_on_every_node_and_outlives_them(env):
    client, clock, root = env
    await client.resource("", "v1", "persistentvolumes").create({"metadata": {"name": "datasets"}, "spec": {
        "capacity": {"storage": "10Ti"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
        "persistentVolumeReclaimPolicy": "Retain", "nfs": {"server": "10.0.0.5", "path": "/exports/datasets"}}})
    await client.resource("", "v1", "persistentvolumeclaims").create({
        "metadata": {"name": "datasets", "namespace": "default"}, "spec": {
            "accessModes": ["ReadWriteMany"], "storageClassName": "", "resources": {"requests": {"storage": "1Ti"}}}})
    pods = client.resource("", "v1", "pods")
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}
    writer = await pods.create(pod("writer", "gpu-0", claim))
    reader = await pods.create(pod("reader", "gpu-1", claim))
    inline = await pods.create(pod("inline", "gpu-1", {"name": "data", "nfs": {
        "server": "10.0.0.5", "path": "/exports/datasets/"}}))
    for _ in range(3):  # the pods re-check their volumes until the claim is bound
        await clock.advance(2)
    for p in (writer, reader, inline):
        await eventually(phase_is(pods, p["metadata"]["name"], "Running"))

    def volume(p, node):
        return root / "pods" / node / p["metadata"]["uid"] / "volumes" / "data"
    export = root / "nfs" / "10.0.0.5" / "exports" / "datasets"
    assert os.path.realpath(volume(writer, "gpu-0")) == str(export)
    (volume(writer, "gpu-0") / "shard-0.bin").write_text("tokens")
    assert (volume(reader, "gpu-1") / "shard-0.bin").read_text() == "tokens"
    assert (volume(inline, "gpu-1") / "shard-0.bin").read_text() == "tokens"
    for p in (writer, reader, inline):
        await pods.delete(p["metadata"]["name"], "default", grace_period_seconds=0)
        await eventually(gone(pods, p["metadata"]["name"]))
    assert (export / "shard-0.bin").read_text() == "tokens"


async def test_a_server_that_cannot_resolve_fails_to_mount(env):
    client, clock, root = env
    await client.resource("", "v1", "pods").create(pod("lost", "gpu-0", {"name": "data", "nfs": {
        "server": "nfs/bad", "path": "/x"}}))

    async def failed_mount():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        return [e["message"] for e in items if e["reason"] == "FailedMount"]
    message = (await eventually(failed_mount))[0]
    assert message.startswith('MountVolume.SetUp failed for volume "data" : mount failed: exit status 32\n')
    assert message.endswith("mount.nfs: Failed to resolve server nfs/bad: Name or service not known")
