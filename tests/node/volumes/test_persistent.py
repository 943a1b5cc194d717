"""persistentVolumeClaim volumes on a node: the pod waits (FailedMount, in the
kubelet's words) until its claim is bound, then its volume directory is the
bound volume's directory, which outlives the pod."""

import os

import pytest

from nanokube.apiserver.loopback import connector
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
