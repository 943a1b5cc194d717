from nanokube.apiserver.storageversion import identity, storage_version
from nanokube.registry.base import all_resources

RES = {r.plural: r for r in all_resources()}
SV = RES["storageversions"]


def test_names():
    assert SV.strategy.name_validator("apps.deployments") == []
    assert SV.strategy.name_validator("core.pods") == []
    assert SV.strategy.name_validator("pods") == ["name must be in the form of <group>.<resource>"]
    assert identity("node-a") == identity("node-a") and identity("node-a").startswith("apiserver-")


def test_published_object_is_valid():
    obj = storage_version(RES["deployments"], "apiserver-x")
    assert obj["metadata"]["name"] == "apps.deployments"
    assert SV.validate_create(obj) == []
    bad = {"metadata": {"name": "apps.deployments"}, "status": {"storageVersions": [
        {"apiServerID": "a", "encodingVersion": "apps/v1", "decodableVersions": ["apps/v2"], "servedVersions": ["apps/v3"]}]}}
    assert [e.field for e in SV.strategy.validate(bad)] == [
        "status.storageVersions[0].decodableVersions", "status.storageVersions[0].servedVersions[0]"]


def test_columns():
    obj = storage_version(RES["deployments"], "apiserver-x")
    cells = [c.fn(obj) for c in SV.strategy.columns if c.name != "Age"]
    assert cells == ["apps.deployments", "apps/v1", "apiserver-x=apps/v1"]
    svm = {"metadata": {"name": "m"}, "spec": {"resource": {"group": "apps", "resource": "deployments"}}}
    assert [c.fn(svm) for c in RES["storageversionmigrations"].strategy.columns] == ["m", "deployments.apps"]
