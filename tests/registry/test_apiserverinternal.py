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
        "status.storageVersions[0].decodableVersions", "status.storageVersions[0].servedVersions[0]",
        "status.commonEncodingVersion"]


def _status_errors(status: dict) -> list[str]:
    return [str(e) for e in SV.strategy.validate_status_update({"metadata": {"name": "x.y"}, "status": status}, {})]


def test_status_is_validated_as_upstreams_validate_storage_version_status():
    """Found probing the fuzzer's StorageVersion seed: IDs and versions were not checked (`a b` was stored), nor
    commonEncodingVersion; condition statuses other than True/False/Unknown, which upstream allows, were refused."""
    ok = {"apiServerID": "apiserver-a", "encodingVersion": "apps/v1", "decodableVersions": ["apps/v1", "v1"],
          "servedVersions": ["v1"]}
    assert _status_errors({"storageVersions": [ok], "commonEncodingVersion": "apps/v1", "conditions": [
        {"type": "example.com/Synced", "status": "Maybe", "reason": "r", "message": "m"}]}) == []
    assert _status_errors({"storageVersions": [
        {"apiServerID": "a b", "encodingVersion": "a/b/c", "decodableVersions": ["/v1", "apps/"], "servedVersions": ["v2"]},
        {**ok, "apiServerID": "a b"}], "commonEncodingVersion": "apps/v1"}) == [
        'status.storageVersions[0].apiServerID: Invalid value: "a b": a lowercase RFC 1123 subdomain must consist of '
        "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        'status.storageVersions[0].encodingVersion: Invalid value: "a/b/c": an apiVersion is a DNS-1035 label, which '
        "must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an "
        "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?') "
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyVersion')",
        'status.storageVersions[0].decodableVersions[0]: Invalid value: "/v1": group part: must be non-empty',
        'status.storageVersions[0].decodableVersions[1]: Invalid value: "apps/": version part: must be non-empty',
        'status.storageVersions[0].decodableVersions: Invalid value: ["/v1","apps/"]: decodableVersions must include '
        "encodingVersion a/b/c",
        'status.storageVersions[0].servedVersions[0]: Invalid value: "v2": individual served version : v2 must be '
        "included in decodableVersions : [/v1 apps/]",
        'status.storageVersions[1].apiServerID: Duplicate value: "a b"',
        'status.storageVersions[1].apiServerID: Invalid value: "a b": a lowercase RFC 1123 subdomain must consist of '
        "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        'status.commonEncodingVersion: Invalid value: "apps/v1": should be nil if servers do not agree on the same '
        "encoding version, or if there is no server reporting the supported versions yet"]
    assert _status_errors({"storageVersions": [ok]}) == [
        'status.commonEncodingVersion: Invalid value: null: the common encoding version is apps/v1']
    assert _status_errors({"storageVersions": [ok], "commonEncodingVersion": "v1"}) == [
        'status.commonEncodingVersion: Invalid value: "v1": the actual common encoding version is apps/v1']
    assert _status_errors({"conditions": [{"type": "A", "status": "True", "reason": "r", "message": "m"},
                                          {"type": "A", "status": "a b"}]}) == [
        'status[1].type: Invalid value: "A": the type of the condition is not unique, it also appears in conditions[0]',
        'status[1].status: Invalid value: "a b": name part must consist of alphanumeric characters, \'-\', \'_\' or '
        "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
        "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        "status[1].reason: Required value: reason cannot be empty",
        "status[1].message: Required value: message cannot be empty"]


def test_columns():
    obj = storage_version(RES["deployments"], "apiserver-x")
    cells = [c.fn(obj) for c in SV.strategy.columns if c.name != "Age"]
    assert cells == ["apps.deployments", "apps/v1", "apiserver-x=apps/v1"]
    svm = {"metadata": {"name": "m"}, "spec": {"resource": {"group": "apps", "resource": "deployments"}}}
    assert [c.fn(svm) for c in RES["storageversionmigrations"].strategy.columns] == ["m", "deployments.apps"]
