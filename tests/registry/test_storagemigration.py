from nanokube.controllers.storageversionmigrator import with_condition
from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.plural == "storageversionmigrations")


def svm(**resource):
    return {"metadata": {"name": "m"}, "spec": {"resource": resource}}


def test_registration_and_validation():
    assert (RES.group, RES.versions, RES.namespaced, RES.subresources) == (
        "storagemigration.k8s.io", ["v1", "v1beta1"], False, ("status",))
    assert RES.validate_create(svm(group="apps", resource="deployments")) == []
    assert [(e.field, e.detail) for e in RES.validate_create(svm(group="apps"))] == [
        ("spec.resource.resource", "resource is required")]
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
