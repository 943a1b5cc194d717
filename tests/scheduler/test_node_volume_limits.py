"""NodeVolumeLimits through the scheduler over the in-process API: a node's CSINode gives each CSI
driver a count of volumes; a pod whose new volumes would pass it there goes elsewhere or waits
with upstream's reason, a volume already on the node (a pod's, or one a VolumeAttachment still
holds) is counted once, and the pod is retried when a count grows or a VolumeAttachment goes,
not when a CSINode changes otherwise."""

import pytest

from tests.controllers import eventually
from tests.scheduler import node, unschedulable
from tests.scheduler.test_queueing_hints import parked, still_waiting
from tests.scheduler.test_scheduler import add_node, bound
from tests.scheduler.test_volume_binding import claim_pod

DRIVER = "ebs.csi.aws.com"


def csinode(name: str, count: int) -> dict:
    return {"metadata": {"name": name}, "spec": {"drivers": [
        {"name": DRIVER, "nodeID": f"i-{name}", "allocatable": {"count": count}}]}}


async def disk(client, name: str, source: dict | None = None) -> None:
    """A volume `pv-<name>` (of the driver, else of `source`) and its claim `name`, bound (by hand:
    no binder runs)."""
    await client.resource("", "v1", "persistentvolumes").create({"metadata": {"name": f"pv-{name}"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
        "claimRef": {"namespace": "default", "name": name},
        **(source or {"csi": {"driver": DRIVER, "volumeHandle": f"vol-{name}"}})}})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    pvc = await pvcs.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": f"pv-{name}",
        "resources": {"requests": {"storage": "1Gi"}}}})
    await pvcs.update({**pvc, "status": {"phase": "Bound"}}, subresource="status")


@pytest.fixture
async def env(stack):
    client, sched = stack
    for n in ("n1", "n2"):
        await add_node(client, node(n, labels={"kubernetes.io/hostname": n}))
        await client.resource("storage.k8s.io", "v1", "csinodes").create(csinode(n, 1))
    for name in ("c1", "c2", "c3"):
        await disk(client, name)
    await sched.start()
    return client, sched


async def test_a_pod_fits_only_where_its_volumes_stay_within_the_drivers_count(env):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("a", "c1"))
    first = await eventually(bound(pods, "a"))
    await pods.create(claim_pod("b", "c2"))
    assert await eventually(bound(pods, "b")) != first
    # c1 is on the first node already: a second pod of it adds no volume there
    await pods.create(claim_pod("a2", "c1", nodeSelector={"kubernetes.io/hostname": first}))
    assert await eventually(bound(pods, "a2")) == first
    await pods.create(claim_pod("c", "c3"))
    assert await eventually(unschedulable(pods, "c")) == \
        "0/2 nodes are available: 2 node(s) exceed max volume count. preemption: 0/2 nodes are available: " \
        "2 No preemption victims found for incoming pod."
    await parked(sched, pods, "c", {"NodeVolumeLimits"})
    csinodes = client.resource("storage.k8s.io", "v1", "csinodes")
    await csinodes.patch(first, {"spec": {"drivers": [
        {"name": DRIVER, "nodeID": f"i-{first}", "allocatable": {"count": 2}}]}}, "application/strategic-merge-patch+json")
    assert await eventually(bound(pods, "c")) == first


async def test_a_volume_attachment_holds_its_place_until_deleted(env):
    """A VolumeAttachment left on a node (its pod gone, not yet detached) counts there; a CSINode
    label changes nothing for the waiting pod; the VolumeAttachment's deletion retries it."""
    client, sched = env
    attachments = client.resource("storage.k8s.io", "v1", "volumeattachments")
    for n in ("n1", "n2"):
        await attachments.create({"metadata": {"name": f"old-{n}"}, "spec": {
            "attacher": DRIVER, "nodeName": n, "source": {"persistentVolumeName": "pv-c1" if n == "n1" else "pv-c2"}}})
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("p", "c3"))
    info = await parked(sched, pods, "p", {"NodeVolumeLimits"})
    await client.resource("storage.k8s.io", "v1", "csinodes").patch("n1", {"metadata": {"labels": {"x": "y"}}})

    async def seen():
        return (sched.informer("storage.k8s.io", "v1", "csinodes").get("n1") or {}).get(
            "metadata", {}).get("labels") == {"x": "y"}
    await eventually(seen)
    still_waiting(sched, info)
    await attachments.delete("old-n2")
    assert await eventually(bound(pods, "p")) == "n2"


async def test_a_migrated_in_tree_volume_counts_for_its_csi_driver(env):
    """An awsElasticBlockStore volume is the EBS CSI driver's, under its bare volume ID: a new one
    finds both nodes full; one naming the volume a pod already holds (`aws://<zone>/vol-c1`) adds
    nothing on that pod's node."""
    client, sched = env
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("a", "c1"))
    first = await eventually(bound(pods, "a"))
    await pods.create(claim_pod("b", "c2"))
    await eventually(bound(pods, "b"))
    await disk(client, "tree", {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-tree"}})
    await disk(client, "same", {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-c1"}})
    await pods.create(claim_pod("t", "tree"))
    assert await eventually(unschedulable(pods, "t")) == \
        "0/2 nodes are available: 2 node(s) exceed max volume count. preemption: 0/2 nodes are available: " \
        "2 No preemption victims found for incoming pod."
    await pods.create(claim_pod("s", "same"))
    assert await eventually(bound(pods, "s")) == first
