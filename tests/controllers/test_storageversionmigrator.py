"""The storage version migrator: a migration is recorded, run and finished through the status
subresource, and one whose resource discovery does not know is retried, never given a condition
before its resourceVersion (which the status validation would refuse)."""

import pytest

from nanokube.controllers.storageversionmigrator import NotInDiscovery, StorageVersionMigrator
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = StorageVersionMigrator(s.client)
    yield s.client, ctrl
    await ctrl.stop()
    await s.close()


def svm(name, group, resource):
    return {"metadata": {"name": name}, "spec": {"resource": {"group": group, "resource": resource}}}


async def test_migration_of_a_served_resource_succeeds(env):
    client, ctrl = env
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "c", "namespace": "default"}})
    svms = client.resource("storagemigration.k8s.io", "v1", "storageversionmigrations")
    await svms.create(svm("cms", "", "configmaps"))
    await ctrl.start()

    async def finished():
        got = await svms.get("cms")
        return got if any(c["type"] == "Succeeded" for c in got["status"].get("conditions") or []) else None
    done = await eventually(finished)
    assert done["status"]["resourceVersion"].isdigit()
    assert [(c["type"], c["status"]) for c in done["status"]["conditions"]] == [("Running", "False"), ("Succeeded", "True")]


async def test_an_unknown_resource_is_retried_without_a_condition(env):
    client, ctrl = env
    svms = client.resource("storagemigration.k8s.io", "v1", "storageversionmigrations")
    created = await svms.create(svm("nothing", "example.com", "nothings"))
    ctrl.informer_factory.start(ctrl.informers())
    await ctrl.inf.synced.wait()
    await eventually(lambda: _has(ctrl, "nothing"))
    with pytest.raises(NotInDiscovery):
        await ctrl.sync("nothing")
    got = await svms.get("nothing")
    assert got["status"] == {} and got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # the write upstream's controller would make here is what the status validation refuses
    with pytest.raises(APIError) as e:
        await svms.update({**got, "status": {"conditions": [{
            "type": "Failed", "status": "True", "reason": "StorageVersionMigrationFailed", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, subresource="status")
    assert e.value.code == 422
    assert 'status.resourceVersion: Invalid value: "": resource version is not well formed: ' in e.value.message


async def _has(ctrl, name):
    return ctrl.inf.get(name) is not None
