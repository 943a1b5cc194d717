"""Validators of names, label keys and values remember valid values only: an invalid
one is rejected every time with a fresh list of errors; object metadata."""

from nanokube.machinery.validation import dns1123_label, dns1123_subdomain, label_value, qualified_name, validate_object_meta


def test_remembered_validators_keep_rejecting_and_hand_out_fresh_errors():
    assert qualified_name("example.com/app") == [] == qualified_name("example.com/app")
    first = qualified_name("bad/key/name")
    first.append("changed by a caller")
    assert qualified_name("bad/key/name") == first[:1]
    assert label_value("x" * 64) == ["must be no more than 63 characters"]
    assert label_value("x" * 64) == ["must be no more than 63 characters"]
    for i in range(9000):
        assert label_value(f"v{i}") == []
    assert label_value("-bad") and label_value("v1") == []


def test_remembered_dns_names_keep_rejecting():
    assert dns1123_label("app") == [] == dns1123_label("app")
    assert dns1123_label("App_1") and dns1123_label("App_1") == dns1123_label("App_1")
    assert dns1123_subdomain("a.b") == [] == dns1123_subdomain("a.b")
    assert len(dns1123_subdomain("x" * 254)) == 1 and dns1123_label("x" * 64) == ["must be no more than 63 characters"]


def test_owner_references_are_checked_only_when_present_and_then_fully():
    meta = {"name": "p", "namespace": "ns"}
    assert validate_object_meta(meta, True) == []
    assert validate_object_meta({**meta, "ownerReferences": []}, True) == []
    refs = [{"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "B", "name": "b", "controller": True}]
    errs = validate_object_meta({**meta, "ownerReferences": refs}, True)
    # ValidateOwnerReferences: a reference's errors at the list's path, the second controller named beside
    # the first, the references as []metav1.OwnerReference's JSON
    assert [str(e) for e in errs] == [
        'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty',
        'metadata.ownerReferences: Invalid value: [{"apiVersion":"v1","kind":"A","name":"a","uid":"1","controller":true},'
        '{"apiVersion":"v1","kind":"B","name":"b","uid":"","controller":true}]: Only one reference can have Controller '
        'set to true. Found "true" in references for A/a and B/b']
    refs[1]["controller"] = False
    assert [e.field for e in validate_object_meta({**meta, "ownerReferences": refs}, True)] == \
        ["metadata.ownerReferences.uid"]
    refs[1].update(apiVersion="a/b/c", kind="", uid="2")
    assert [str(e) for e in validate_object_meta({**meta, "ownerReferences": refs}, True)] == [
        'metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": kind must not be empty']
    event = {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "3"}
    assert [str(e) for e in validate_object_meta({**meta, "ownerReferences": [event]}, True)] == [
        'metadata.ownerReferences: Invalid value: {"apiVersion":"v1","kind":"Event","name":"e","uid":"3"}: '
        "/v1, Kind=Event is disallowed from being an owner"]
