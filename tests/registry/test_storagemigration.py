import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.controllers.storageversionmigrator import with_condition
from nanokube.machinery.validation import dns1035_label
from nanokube.registry.base import all_resources
from tests.served import served

RES = next(r for r in all_resources() if r.plural == "storageversionmigrations")


def svm(**resource):
    return {"metadata": {"name": "m"}, "spec": {"resource": resource}}


def test_registration_and_validation():
    assert (RES.group, RES.versions, RES.namespaced, RES.subresources) == (
        "storagemigration.k8s.io", ["v1", "v1beta1"], False, ("status",))
    assert RES.validate_create(svm(group="apps", resource="deployments")) == []
    assert [(e.field, e.detail) for e in RES.validate_create(svm(group="apps"))] == [
        ("spec.resource.resource", "resource is required to be set")]
    changed = svm(group="apps", resource="replicasets")
    assert [e.detail for e in RES.strategy.validate_update(changed, svm(group="apps", resource="deployments"))] == [
        "field is immutable"]


def test_status_rules():
    old = {**svm(resource="configmaps"), "status": {"resourceVersion": "5"}}
    running = with_condition(old, "Running", "StorageVersionMigrationInProgress", "", "2026-01-01T00:00:00Z")
    assert RES.strategy.validate_status_update(running, old) == []
    done = with_condition(running, "Succeeded", "StorageVersionMigrationSucceeded", "", "2026-01-01T00:00:01Z")
    assert [(c["type"], c["status"]) for c in done["status"]["conditions"]] == [("Running", "False"), ("Succeeded", "True")]
    moved = {**done, "status": {**done["status"], "resourceVersion": "9"}}
    assert [e.field for e in RES.strategy.validate_status_update(moved, done)] == ["status.resourceVersion"]
    both = with_condition(done, "Failed", "StorageVersionMigrationFailed", "x", "2026-01-01T00:00:02Z")
    assert [e.detail for e in RES.strategy.validate_status_update(both, done)] == [
        "Both success and failed conditions cannot be true at the same time"]


@pytest.fixture
async def svms(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield client.StoragemigrationV1Api(api_client)


async def _refused(call, *args) -> str:
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(call, *args)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


def _cond(kind: str, status: str, at: str) -> dict:
    return {"type": kind, "status": status, "reason": f"Is{kind}", "message": "", "lastTransitionTime": at}


async def test_spec_rules_through_the_api(svms):
    """ValidateStorageVersionMigration(Update): the resource a DNS-1035 label, the group a DNS
    subdomain, each error's messages joined by commas; the spec immutable, printed as Go's %#v."""
    bad = {"metadata": {"name": "m"}, "spec": {"resource": {"group": "Apps_", "resource": "Deployments"}}}
    assert await _refused(svms.create_storage_version_migration, bad) == (
        'StorageVersionMigration.storagemigration.k8s.io "m" is invalid: [spec.resource.resource: Invalid value: '
        f'"Deployments": {",".join(dns1035_label("Deployments"))}, spec.resource.group: Invalid value: "Apps_": '
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]")
    await asyncio.to_thread(svms.create_storage_version_migration, svm(group="apps", resource="deployments"))
    moved = {"spec": {"resource": {"group": "apps", "resource": "replicasets"}}}
    assert await _refused(svms.patch_storage_version_migration, "m", moved) == (
        'StorageVersionMigration.storagemigration.k8s.io "m" is invalid: spec: Invalid value: '
        '{"Resource":{"group":"apps","resource":"replicasets"}}: field is immutable')


async def test_status_rules_through_the_api(svms):
    """ValidateStorageVersionMigrationStatusUpdate: a well-formed resourceVersion; Running is not
    True beside Succeeded; Succeeded once True stays True; the conditions printed as json.Marshal
    writes []metav1.Condition (times in UTC)."""
    await asyncio.to_thread(svms.create_storage_version_migration, svm(group="", resource="configmaps"))

    async def write_status(**status):
        obj = (await asyncio.to_thread(svms.read_storage_version_migration, "m")).to_dict()
        body = {"metadata": {"name": "m", "resourceVersion": obj["metadata"]["resource_version"]}, "spec": svm(
            group="", resource="configmaps")["spec"], "status": status}
        return await asyncio.to_thread(svms.replace_storage_version_migration_status, "m", body)

    prefix = 'StorageVersionMigration.storagemigration.k8s.io "m" is invalid: '
    running = _cond("Running", "True", "2026-01-02T03:04:05Z")
    for status in ({"conditions": [running]}, {"resourceVersion": ""}, {}):  # an empty one is not well formed either
        with pytest.raises(ApiException) as e:
            await write_status(**status)
        assert json.loads(e.value.body)["message"] == (
            prefix + 'status.resourceVersion: Invalid value: "": resource version is not well formed: '), status
    with pytest.raises(ApiException) as e:
        await write_status(resourceVersion="012")
    assert json.loads(e.value.body)["message"] == (
        prefix + 'status.resourceVersion: Invalid value: "012": resource version is not well formed: 012')
    await write_status(resourceVersion="5", conditions=[running])
    succeeded = _cond("Succeeded", "True", "2026-01-02T03:04:06+01:00")
    with pytest.raises(ApiException) as e:
        await write_status(resourceVersion="5", conditions=[running, succeeded])
    assert json.loads(e.value.body)["message"] == prefix + (
        'status.conditions: Invalid value: [{"type":"Running","status":"True","lastTransitionTime":'
        '"2026-01-02T03:04:05Z","reason":"IsRunning","message":""},{"type":"Succeeded","status":"True",'
        '"lastTransitionTime":"2026-01-02T02:04:06Z","reason":"IsSucceeded","message":""}]: '
        'Running condition cannot be true when success condition is true')
    done = await write_status(resourceVersion="5", conditions=[{**running, "status": "False"}, succeeded])
    assert [(c.type, c.status) for c in done.status.conditions] == [("Running", "False"), ("Succeeded", "True")]
    with pytest.raises(ApiException) as e:
        await write_status(resourceVersion="5", conditions=[{**succeeded, "status": "False"}])
    assert json.loads(e.value.body)["message"].endswith(": Success condition cannot be set to false once it is true")
