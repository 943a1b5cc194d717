"""VolumeBinding over the in-process API server, with the PV controller and
the local-path provisioner: a WaitForFirstConsumer claim is provisioned on
the node the pod lands on; a static local volume pins its pod to its node;
missing and unbound Immediate claims keep the pod pending with upstream's
reasons; two pods never take one volume."""

import pytest

from nanokube.controllers.persistentvolume import PersistentVolumeController
from nanokube.node.storage import LocalPathProvisioner
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node, pod, unschedulable
from tests.scheduler.test_scheduler import add_node, bound


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    for n in ("n1", "n2", "n3"):
        await add_node(s.client, node(n, labels={"kubernetes.io/hostname": n}))
    parts = [PersistentVolumeController(s.client), LocalPathProvisioner(s.client, str(tmp_path)),
             Scheduler(s.client, seed=1)]
    for p in parts:
        await p.start()
    yield s.client
    for p in reversed(parts):
        await p.stop()
    await s.close()


def claim_pod(name, *claims, **spec):
    p = pod(name, **spec)
    del p["metadata"]["uid"]
    p["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return p


def claim(name, **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec}}


async def create_rwop_claim(client, name: str) -> None:
    """A ReadWriteOncePod claim of the Immediate local-path StorageClass `now`, made with it."""
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "now"}, "provisioner": "nanokube.io/local-path", "volumeBindingMode": "Immediate"})
    await client.resource("", "v1", "persistentvolumeclaims").create(
        claim(name, storageClassName="now", accessModes=["ReadWriteOncePod"]))


def pinned(name, node_name):
    return {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
        "local": {"path": f"/tmp/{name}"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]}}}}


async def test_wait_for_first_consumer_claim_is_provisioned_on_the_pods_node(env):
    client = env
    await client.resource("", "v1", "persistentvolumeclaims").create(claim("data"))
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("p", "data"))
    node_name = await eventually(bound(pods, "p"))
    pvc = await client.resource("", "v1", "persistentvolumeclaims").get("data", "default")
    assert pvc["status"]["phase"] == "Bound"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_name


async def test_static_local_volumes_pin_pods_and_are_never_shared(env):
    client = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"})
    await client.resource("", "v1", "persistentvolumes").create(pinned("on-n2", "n2"))
    claims = client.resource("", "v1", "persistentvolumeclaims")
    await claims.create(claim("a", storageClassName="local"))
    await claims.create(claim("b", storageClassName="local"))
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("pa", "a"))
    assert await eventually(bound(pods, "pa")) == "n2"
    assert (await claims.get("a", "default"))["spec"]["volumeName"] == "on-n2"
    await pods.create(claim_pod("pb", "b"))
    # UnschedulableAndUnresolvable, as every VolumeBinding Filter reason: preemption cannot help
    assert await eventually(unschedulable(pods, "pb")) == (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


async def test_missing_and_unbound_immediate_claims_keep_the_pod_pending(env):
    client = env
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("lost", "nowhere"))
    assert await eventually(unschedulable(pods, "lost")) == (
        '0/3 nodes are available: persistentvolumeclaim "nowhere" not found. preemption: 0/3 nodes are available: '
        "3 Preemption is not helpful for scheduling.")
    await client.resource("", "v1", "persistentvolumeclaims").create(claim("manual", storageClassName=""))
    await pods.create(claim_pod("waiting", "manual"))
    assert "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims." in \
        await eventually(unschedulable(pods, "waiting"))
    await client.resource("", "v1", "persistentvolumes").create({"metadata": {"name": "fits"}, "spec": {
        "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "hostPath": {"path": "/tmp/fits"}}})
    assert await eventually(bound(pods, "waiting"))  # after the pod's backoff



async def test_generic_ephemeral_volume_gets_its_own_claim(env):
    from nanokube.controllers.ephemeral_volume import EphemeralVolumeController

    client = env
    ctrl = EphemeralVolumeController(client)
    await ctrl.start()
    try:
        pods = client.resource("", "v1", "pods")
        p = pod("scratch")
        del p["metadata"]["uid"]
        p["spec"]["volumes"] = [{"name": "work", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"tier": "scratch"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]
        created = await pods.create(p)
        assert await eventually(bound(pods, "scratch"))  # the claim appears after a first try
        pvc = await client.resource("", "v1", "persistentvolumeclaims").get("scratch-work", "default")
        assert pvc["metadata"]["labels"] == {"tier": "scratch"} and pvc["status"]["phase"] == "Bound"
        assert pvc["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    finally:
        await ctrl.stop()


async def test_read_write_once_pod_claim_serves_one_pod(env):
    client = env
    await create_rwop_claim(client, "solo")
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("first", "solo"))
    await eventually(bound(pods, "first"))
    await pods.create(claim_pod("second", "solo"))
    assert "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode" in \
        await eventually(unschedulable(pods, "second"))
    await pods.delete("first", "default", grace_period_seconds=0)
    assert await eventually(bound(pods, "second"))


async def test_read_write_once_pod_claim_is_freed_by_preemption(env):
    """Upstream's VolumeRestrictions rejects every node in Filter while the claim's holder runs,
    so a pod of higher priority evicts the holder and gets the claim; each node counts the
    conflict in the FailedScheduling message."""
    client = env
    await create_rwop_claim(client, "ckpt")
    await client.resource("scheduling.k8s.io", "v1", "priorityclasses").create(
        {"metadata": {"name": "high"}, "value": 1000})
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("holder", "ckpt", terminationGracePeriodSeconds=0))
    await eventually(bound(pods, "holder"))
    await pods.create(claim_pod("peer", "ckpt"))
    assert await eventually(unschedulable(pods, "peer")) == (
        "0/3 nodes are available: 3 node has pod using PersistentVolumeClaim with the same name and "
        "ReadWriteOncePod access mode. preemption: 0/3 nodes are available: 3 No preemption victims found "
        "for incoming pod.")
    await pods.create(claim_pod("urgent", "ckpt", priorityClassName="high"))

    async def holder_gone():
        return "holder" not in {p["metadata"]["name"] for p in (await pods.list("default"))[0]}
    assert await eventually(holder_gone)
    assert await eventually(bound(pods, "urgent"))
    assert (await pods.get("peer", "default"))["spec"].get("nodeName") is None


async def test_an_immediate_volume_is_made_where_its_class_allows(env):
    """An Immediate class's allowedTopologies pin the volume provisioned before any pod (as a
    topology-aware driver's accessible topology does), so the claim's pods go there."""
    client = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "n3-only"}, "provisioner": "nanokube.io/local-path", "volumeBindingMode": "Immediate",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "kubernetes.io/hostname", "values": ["n3"]}]}]})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("pinned", storageClassName="n3-only"))

    async def volume_name():
        return (await pvcs.get("pinned", "default"))["spec"].get("volumeName")
    pv = await client.resource("", "v1", "persistentvolumes").get(await eventually(volume_name))
    assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n3"]}]}]}}
    pods = client.resource("", "v1", "pods")
    for i in range(3):
        await pods.create(claim_pod(f"reader-{i}", "pinned"))
    assert [await eventually(bound(pods, f"reader-{i}")) for i in range(3)] == ["n3"] * 3


async def test_zonal_volume_keeps_its_pod_in_the_zone(env):
    client = env
    nodes = client.resource("", "v1", "nodes")
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "b")):
        await nodes.patch(name, {"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}})
    await client.resource("", "v1", "persistentvolumes").create({
        "metadata": {"name": "zonal", "labels": {"topology.kubernetes.io/zone": "a"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "hostPath": {"path": "/tmp/zonal"}}})
    await client.resource("", "v1", "persistentvolumeclaims").create(claim("z", storageClassName="", volumeName="zonal"))
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("zoned", "z"))
    assert await eventually(bound(pods, "zoned")) == "n1"


def nominated_by_scheduler(p: dict) -> bool:
    """Whether kube-scheduler's managedFields entry of the pod's status holds nominatedNodeName
    (the binding, which clears the field, leaves the entry as it was)."""
    return any(m["manager"] == "kube-scheduler" and "f:nominatedNodeName" in (m.get("fieldsV1") or {}).get("f:status", {})
               for m in p["metadata"].get("managedFields") or [])


async def test_only_a_pod_with_a_claim_to_bind_is_nominated_before_prebind(env):
    """VolumeBinding's PreBindPreFlight: PreBind has work while a claim is unbound (the
    WaitForFirstConsumer claim is provisioned on the chosen node), so the pod is nominated there
    first; a pod whose claims are all bound is not (upstream's allBound)."""
    client = env
    await client.resource("", "v1", "persistentvolumeclaims").create(claim("data"))
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("first", "data"))
    node_name = await eventually(bound(pods, "first"))
    p = await pods.get("first", "default")
    assert nominated_by_scheduler(p) and "nominatedNodeName" not in p["status"]

    async def claim_bound():
        return (await client.resource("", "v1", "persistentvolumeclaims").get("data", "default"))["status"].get(
            "phase") == "Bound"
    await eventually(claim_bound)
    await pods.create(claim_pod("second", "data"))
    assert await eventually(bound(pods, "second")) == node_name
    assert not nominated_by_scheduler(await pods.get("second", "default"))


async def test_pods_sharing_a_claim_to_provision_go_where_the_first_selected(env):
    """Training ranks that share one WaitForFirstConsumer claim (a checkpoint directory), created
    at once: the first pod's Reserve selects its node for the claim (upstream's assume cache holds
    the annotated claim), so the others, scheduled while it binds, go to that node too instead of
    selecting another node for the claim the provisioner already made a volume for there."""
    client = env
    await client.resource("", "v1", "persistentvolumeclaims").create(claim("ckpt"))
    pods = client.resource("", "v1", "pods")
    for i in range(3):
        await pods.create(claim_pod(f"rank-{i}", "ckpt", cpu="1"))
    nodes = {await eventually(bound(pods, f"rank-{i}")) for i in range(3)}
    pvc = await client.resource("", "v1", "persistentvolumeclaims").get("ckpt", "default")
    pv = await client.resource("", "v1", "persistentvolumes").get(pvc["spec"]["volumeName"])
    [term] = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert nodes == {pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]} == set(
        term["matchExpressions"][0]["values"])
