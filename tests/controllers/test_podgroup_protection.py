"""PodGroup protection: admission adds the finalizer, the controller
restores it when missing and removes it from a deleting group only once
its member pods are terminal or gone."""

import pytest

from nanokube.apiserver.admission import PODGROUP_PROTECTION
from nanokube.machinery.errors import APIError
from nanokube.controllers.podgroup_protection import PodGroupProtectionController
from tests.controllers import eventually, make_stack


def podgroup(name):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}


def member(name, group):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulingGroup": {"podGroupName": group}, "containers": [{"name": "c", "image": "pause"}]}}


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = PodGroupProtectionController(s.client)
    yield s.client, ctrl
    await ctrl.stop()
    await s.close()


def gone(rc, name):
    async def check():
        try:
            await rc.get(name, "default")
        except APIError as e:
            return e.code == 404
        return False
    return check


async def test_admission_adds_the_finalizer(env):
    client, _ = env
    pgs = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
    created = await pgs.create(podgroup("g"))
    assert created["metadata"]["finalizers"] == [PODGROUP_PROTECTION]


async def test_controller_restores_a_removed_finalizer(env):
    client, ctrl = env
    pgs = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
    await pgs.create(podgroup("g"))
    await pgs.patch("g", {"metadata": {"finalizers": None}}, namespace="default")
    assert not (await pgs.get("g", "default"))["metadata"].get("finalizers")
    await ctrl.start()

    async def protected():
        return (await pgs.get("g", "default"))["metadata"].get("finalizers") == [PODGROUP_PROTECTION]
    assert await eventually(protected)


async def test_deleting_group_waits_for_its_pods_to_end(env):
    client, ctrl = env
    pgs = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
    pods = client.resource("", "v1", "pods")
    await pgs.create(podgroup("g"))
    await pods.create(member("running", "g"))
    await pods.create(member("done", "g"))
    done = await pods.get("done", "default")
    await pods.update({**done, "status": {"phase": "Succeeded"}}, subresource="status")
    await ctrl.start()
    await pgs.delete("g", "default")
    await eventually(lambda: _true(ctrl.pg_inf.get("default/g") is not None
                                   and ctrl.pg_inf.get("default/g")["metadata"].get("deletionTimestamp")))
    assert ctrl.blocking_pods("default/g") == ["default/running"]
    assert (await pgs.get("g", "default"))["metadata"]["finalizers"] == [PODGROUP_PROTECTION]
    running = await pods.get("running", "default")
    await pods.update({**running, "status": {"phase": "Failed"}}, subresource="status")
    assert await eventually(gone(pgs, "g"))


async def test_deleting_group_without_pods_goes_at_once(env):
    client, ctrl = env
    pgs = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
    await pgs.create(podgroup("g"))
    await ctrl.start()
    await pgs.delete("g", "default")
    assert await eventually(gone(pgs, "g"))


async def _true(v):
    return v
