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
    ok = candidate(leaseName="kube-scheduler", binaryVersion="1.37.0", emulationVersion="1.37.0",
                   strategy="OldestEmulationVersion")
    assert lc.validate_create(ok) == []
    assert [e.field for e in lc.validate_create(candidate(binaryVersion="1.37"))] == [
        "spec.leaseName", "spec.binaryVersion", "spec.strategy"]
    moved = candidate(leaseName="other", binaryVersion="1.37.0", emulationVersion="1.37.0", strategy="OldestEmulationVersion")
    assert [e.detail for e in lc.validate_update(moved, ok)] == ["field is immutable"]


def test_lease_candidate_versions_and_strategy():
    """ValidateLeaseCandidateSpec: blang/semver versions, the binary version not older than the emulated
    one (a prerelease before its release), OldestEmulationVersion needs an emulation version, and a
    strategy with '/' is a qualified name, reported (as upstream does) at spec.strategy.strategy."""
    lc = RES["leasecandidates"]

    def errs(**spec):
        return [str(e) for e in lc.validate_create(candidate(leaseName="l", **spec))]

    assert errs(binaryVersion="1.37.0-rc.1+b", emulationVersion="1.36.0", strategy="x.example.com/s") == []
    assert errs(binaryVersion="1.37.0", emulationVersion="1.38.0", strategy="OldestEmulationVersion") == [
        'spec.binaryVersion: Invalid value: "1.37.0": must be greater than or equal to `emulationVersion`']
    assert errs(binaryVersion="1.37.0-rc.1", emulationVersion="1.37.0", strategy="x.example.com/s") == [
        'spec.binaryVersion: Invalid value: "1.37.0-rc.1": must be greater than or equal to `emulationVersion`']
    assert errs(binaryVersion="01.37.0", emulationVersion="1.37.0-01", strategy="OldestEmulationVersion") == [
        'spec.emulationVersion: Invalid value: "1.37.0-01": must be a valid semantic version',
        'spec.binaryVersion: Invalid value: "01.37.0": must be a valid semantic version',
        "spec.emulationVersion: Required value: must be specified when `strategy` is 'OldestEmulationVersion'"]
    assert errs(binaryVersion="bogus", emulationVersion="1.40.0", strategy="Bogus") == [
        'spec.binaryVersion: Invalid value: "bogus": must be a valid semantic version',
        'spec.binaryVersion: Invalid value: "bogus": must be greater than or equal to `emulationVersion`',
        'spec.strategy.strategy: Unsupported value: "Bogus": supported values: "OldestEmulationVersion"']
    assert errs(binaryVersion="1.37.0", strategy="a/b/c") == [
        'spec.strategy.strategy: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
        "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional "
        "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]


def test_lease_strategy_and_preferred_holder():
    """ValidateLeaseSpec: a strategy as ValidateCoordinatedLeaseStrategy checks it (at spec.strategy.strategy),
    a preferredHolder only with a strategy (both were stored as given); a LeaseCandidate is named as a
    ConfigMap key (ValidLeaseCandidateName), capitals and underscores too."""
    lease = RES["leases"]

    def errs(**spec):
        return [str(e) for e in lease.validate_create({"metadata": {"name": "l", "namespace": "d"}, "spec": spec})]

    assert errs(strategy="OldestEmulationVersion", preferredHolder="a") == []
    assert errs(strategy="Bogus", preferredHolder="a") == [
        'spec.strategy.strategy: Unsupported value: "Bogus": supported values: "OldestEmulationVersion"']
    assert errs(preferredHolder="a") == ["spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"]
    lc = RES["leasecandidates"]
    spec = {"leaseName": "l", "binaryVersion": "1.37.0", "emulationVersion": "1.37.0", "strategy": "OldestEmulationVersion"}
    assert lc.validate_create({"metadata": {"name": "KCM_1", "namespace": "d"}, "spec": spec}) == []
    assert [e.field for e in lc.validate_create({"metadata": {"name": "a/b", "namespace": "d"}, "spec": spec})] == [
        "metadata.name"]


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
