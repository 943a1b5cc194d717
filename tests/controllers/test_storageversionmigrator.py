"""The storage version migrator: a migration is recorded, run and finished through the status
subresource, and one whose resource discovery does not know is retried, never given a condition
before its resourceVersion (which the status validation would refuse)."""

import pytest

from nanokube.client.metrics import REQUESTS
from nanokube.controllers.manager import MAPPER_RESET_PERIOD
from nanokube.controllers.storageversionmigrator import NotInDiscovery, StorageVersionMigrator
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack
from tests.controllers.test_garbagecollector import establish_things, over_http  # noqa: F401 (the fixture)


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


async def test_over_http_a_crd_installed_later_is_found_once_the_discovery_read_is_stale(over_http):  # noqa: F811 (the fixture)
    """Over HTTP the migrator's client reads discovery at start: a migration of a custom resource
    whose CRD comes later misses, and each retry while that read is fresh reads nothing more; once it
    is stale (the controller manager's 30 s RESTMapper reset) the next retry reads discovery again,
    as the resource-version controller's mapper does, and the migration runs, with no other
    component reading discovery for it."""
    server, client, clock = over_http
    ctrl = StorageVersionMigrator(client, clock=clock)
    svms = client.resource("storagemigration.k8s.io", "v1", "storageversionmigrations")
    try:
        await svms.create(svm("things", "gc.example.com", "things"))
        await establish_things(server)
        ctrl.informer_factory.start(ctrl.informers())
        await ctrl.inf.synced.wait()
        await eventually(lambda: _has(ctrl, "things"), timeout=10)
        gets = REQUESTS.labels("200", "GET", client.host).value
        with pytest.raises(NotInDiscovery):
            await ctrl.sync("things")
        assert REQUESTS.labels("200", "GET", client.host).value == gets, "a fresh read is not read again"

        await ctrl.start()
        await clock.advance(MAPPER_RESET_PERIOD)

        async def finished():
            await clock.advance(1)  # the retries' backoff
            got = await svms.get("things")
            return any(c["type"] == "Succeeded" for c in got["status"].get("conditions") or [])
        assert await eventually(finished, timeout=10)
    finally:
        await ctrl.stop()
