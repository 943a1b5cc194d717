"""LeaseCandidate and ComponentStatus: registration, validation, columns, lease-based health."""

from nanokube.apiserver.componentstatus import lease_health, status_object
from nanokube.clock import format_time
from nanokube.registry.base import all_resources

RES = {r.plural: r for r in all_resources()}


def candidate(**spec):
    return {"metadata": {"name": "kcm-1", "namespace": "kube-system"}, "spec": spec}


def test_lease_candidate():
    lc = RES["leasecandidates"]
    assert (lc.group, lc.versions, lc.namespaced) == ("coordination.k8s.io", ["v1beta1", "v1alpha2"], True)
    ok = candidate(leaseName="kube-scheduler", binaryVersion="1.37.0", strategy="OldestEmulationVersion")
    assert lc.validate_create(ok) == []
    assert [e.field for e in lc.validate_create(candidate(binaryVersion="1.37"))] == [
        "spec.leaseName", "spec.binaryVersion", "spec.strategy"]
    moved = candidate(leaseName="other", binaryVersion="1.37.0", strategy="OldestEmulationVersion")
    assert [e.detail for e in lc.validate_update(moved, ok)] == ["field is immutable"]


def test_component_status_is_read_only_and_printed():
    cs = RES["componentstatuses"]
    assert (cs.group, cs.namespaced, cs.verbs, cs.short_names) == ("", False, ("get", "list"), ("cs",))
    bad = status_object("scheduler", False, "", "no holder")
    assert [c.fn(bad) for c in cs.strategy.columns] == ["scheduler", "Unhealthy", "", "no holder"]
    good = status_object("etcd-0", True, '{"health":"true","reason":""}', "")
    assert [c.fn(good) for c in cs.strategy.columns][:2] == ["etcd-0", "Healthy"]


def test_lease_health():
    lease = {"spec": {"holderIdentity": "a", "renewTime": format_time(1000), "leaseDurationSeconds": 15}}
    assert lease_health(lease, "kube-scheduler", 1010) == (True, "ok", "")
    assert lease_health(lease, "kube-scheduler", 1020)[0] is False
    assert lease_health(None, "kube-scheduler", 0)[2] == "no holder renewed the kube-system/kube-scheduler lease within its duration"
