"""VolumeAttributesClass protection over the in-process API: a new class carries
kubernetes.io/vac-protection (StorageObjectInUseProtection), a deleting class
stays while a claim or a volume names it and goes once none does; the
controller puts the finalizer back on a live class that lost it."""

import pytest

from nanokube.controllers.vac_protection import VACProtectionController
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = VACProtectionController(s.client)
    await ctrl.start()
    yield s.client
    await ctrl.stop()
    await s.close()


async def exists(rc, name, ns=None):
    try:
        return await rc.get(name, ns)
    except APIError as e:
        if e.code == 404:
            return None
        raise


async def test_a_class_in_use_outlives_its_deletion_until_no_claim_or_volume_names_it(env):
    client = env
    vacs = client.resource("storage.k8s.io", "v1", "volumeattributesclasses")
    pvcs, pvs = client.resource("", "v1", "persistentvolumeclaims"), client.resource("", "v1", "persistentvolumes")
    gold = await vacs.create({"metadata": {"name": "gold"}, "driverName": "disk.example.com", "parameters": {"iops": "3000"}})
    assert gold["metadata"]["finalizers"] == ["kubernetes.io/vac-protection"]
    await pvcs.create({"metadata": {"name": "ckpt", "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeAttributesClassName": "gold",
        "resources": {"requests": {"storage": "1Gi"}}}})
    await pvs.create({"metadata": {"name": "disk"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "volumeAttributesClassName": "gold",
        "csi": {"driver": "disk.example.com", "volumeHandle": "d-1"}}})
    await vacs.delete("gold")
    deleting = await vacs.get("gold")
    assert deleting["metadata"]["deletionTimestamp"]
    await pvcs.delete("ckpt", "default")  # pvc-protection's finalizer, which no controller here removes
    await pvcs.patch("ckpt", {"metadata": {"finalizers": None}}, namespace="default")
    await eventually(lambda: _gone(pvcs, "ckpt", "default"))
    assert (await vacs.get("gold"))["metadata"]["deletionTimestamp"]  # the volume still names it
    await pvs.delete("disk")  # likewise pv-protection's
    await pvs.patch("disk", {"metadata": {"finalizers": None}})
    await eventually(lambda: _gone(vacs, "gold"))


async def test_a_live_class_gets_the_finalizer_back(env):
    client = env
    vacs = client.resource("storage.k8s.io", "v1", "volumeattributesclasses")
    await vacs.create({"metadata": {"name": "silver"}, "driverName": "disk.example.com", "parameters": {"iops": "3000"}})
    await vacs.patch("silver", {"metadata": {"finalizers": None}})

    async def protected():
        return (await vacs.get("silver"))["metadata"].get("finalizers") == ["kubernetes.io/vac-protection"]
    assert await eventually(protected)


async def _gone(rc, name, ns=None):
    return await exists(rc, name, ns) is None
