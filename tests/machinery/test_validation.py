"""Validators of names, label keys and values remember valid values only: an invalid
one is rejected every time with a fresh list of errors; object metadata."""

import asyncio
import json
import tracemalloc

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.machinery.validation import (dns1123_label, dns1123_subdomain, field_manager_errors, label_value, qualified_name,
                                          validate_annotations, validate_object_meta)
from tests.served import served

NAME_EMPTY = "name part must be non-empty"
NAME_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
PREFIX_REGEX = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def test_remembered_validators_keep_rejecting_and_hand_out_fresh_errors():
    assert qualified_name("example.com/app") == [] == qualified_name("example.com/app")
    first = qualified_name("bad/key/name")
    first.append("changed by a caller")
    assert qualified_name("bad/key/name") == first[:1]
    assert label_value("x" * 64) == ["must be no more than 63 bytes"]
    assert label_value("x" * 64) == ["must be no more than 63 bytes"]
    for i in range(9000):
        assert label_value(f"v{i}") == []
    assert label_value("-bad") and label_value("v1") == []


def test_qualified_name_judges_both_parts_and_an_empty_name_fails_the_regex_too():
    """IsLabelKey: a bad or empty prefix does not stop the name part being checked; an empty name part
    is both non-empty and regex errors; more than one '/' is the single whole-key message."""
    assert qualified_name("") == [NAME_EMPTY, NAME_REGEX]
    assert qualified_name("example.com/") == [NAME_EMPTY, NAME_REGEX]
    assert qualified_name("/n") == ["prefix part must be non-empty"]
    assert qualified_name("/") == ["prefix part must be non-empty", NAME_EMPTY, NAME_REGEX]
    assert qualified_name("Bad_Prefix/-x") == [PREFIX_REGEX, NAME_REGEX]
    assert qualified_name("example.com/" + "n" * 64) == ["name part must be no more than 63 bytes"]
    assert qualified_name("-" + "n" * 63) == ["name part must be no more than 63 bytes", NAME_REGEX]
    [whole] = qualified_name("a/b/c")
    assert whole.startswith("a valid label key must consist of alphanumeric characters") and whole.endswith(
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")


async def test_label_keys_and_finalizers_carry_every_qualified_name_error_over_http(tmp_path):
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        body = {"metadata": {"name": "q", "labels": {"Bad_Prefix/-x": "v"}, "finalizers": ["example.com/"]}}
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.create_namespaced_config_map, "default", body)
    assert e.value.status == 422
    causes = json.loads(e.value.body)["details"]["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [
        ("metadata.labels", f'Invalid value: "Bad_Prefix/-x": {PREFIX_REGEX}'),
        ("metadata.labels", f'Invalid value: "Bad_Prefix/-x": {NAME_REGEX}'),
        ("metadata.finalizers[0]", f'Invalid value: "example.com/": {NAME_EMPTY}'),
        ("metadata.finalizers[0]", f'Invalid value: "example.com/": {NAME_REGEX}'),
    ]


async def test_a_built_in_kinds_unqualified_finalizer_must_be_a_standard_one_over_http(tmp_path):
    """Core validation's finalizer rule, after apimachinery's ObjectMeta errors, on create and update;
    admission configuration (apimachinery's generic ObjectMeta rules only) takes any qualified name."""
    kube = 'name is neither a standard finalizer name nor is it fully qualified'
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        standard = ["orphan", "foregroundDeletion", "kubernetes", "example.com/x"]
        body = {"metadata": {"name": "f", "finalizers": ["foo", *standard, "Bad_"]}}
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.create_namespaced_config_map, "default", body)
        assert e.value.status == 422
        causes = json.loads(e.value.body)["details"]["causes"]
        assert [(c["field"], c["message"]) for c in causes] == [
            ("metadata.finalizers[5]", f'Invalid value: "Bad_": {NAME_REGEX}'),
            ("metadata.finalizers[0]", f'Invalid value: "foo": {kube}'),
            ("metadata.finalizers[5]", f'Invalid value: "Bad_": {kube}'),
        ]
        made = await asyncio.to_thread(core.create_namespaced_config_map, "default",
                                       {"metadata": {"name": "f", "finalizers": standard}})
        assert made.metadata.finalizers == standard
        made.metadata.finalizers = [*standard, "bar"]
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.replace_namespaced_config_map, "f", "default", made)
        assert e.value.status == 422
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("metadata.finalizers[4]", f'Invalid value: "bar": {kube}')]
        admission = client.AdmissionregistrationV1Api(api_client)
        hooks = await asyncio.to_thread(admission.create_validating_webhook_configuration,
                                        {"metadata": {"name": "w", "finalizers": ["foo"]}})
        assert hooks.metadata.finalizers == ["foo"]


async def test_a_namespaces_spec_finalizers_are_qualified_or_standard_over_http(tmp_path):
    """ValidateNamespace: every message at spec.finalizers (no index), orphan and foregroundDeletion
    are standard too; the finalize subresource names the item."""
    kube = 'name is neither a standard finalizer name nor is it fully qualified'
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.create_namespace, {"metadata": {"name": "a"},
                                                            "spec": {"finalizers": ["orphan", "foo", "Bad_"]}})
        assert e.value.status == 422
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.finalizers", f'Invalid value: "foo": {kube}'),
            ("spec.finalizers", f'Invalid value: "Bad_": {NAME_REGEX}'),
            ("spec.finalizers", f'Invalid value: "Bad_": {kube}'),
        ]
        made = await asyncio.to_thread(core.create_namespace, {"metadata": {"name": "a"}, "spec": {
            "finalizers": ["kubernetes", "orphan", "foregroundDeletion"]}})
        assert made.spec.finalizers == ["kubernetes", "orphan", "foregroundDeletion"]
        made.spec.finalizers = ["kubernetes", "bar"]
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.replace_namespace_finalize, "a", made)
        assert e.value.status == 422
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.finalizers[1]", f'Invalid value: "bar": {kube}')]


def test_label_keys_and_values_count_bytes_where_names_count_characters():
    """apimachinery 1.37's content package (IsLabelKey, IsLabelValue, and a key's DNS prefix) words
    the limit in bytes, util/validation's DNS names in characters; both measure Go's len, the
    UTF-8 bytes, so 32 two-byte letters are past 63."""
    wide = "\u00e9" * 32
    assert label_value(wide)[0] == "must be no more than 63 bytes" and len(label_value(wide)) == 2
    assert qualified_name(wide)[0] == "name part must be no more than 63 bytes"
    assert qualified_name("p" * 254 + "/k") == ["prefix part must be no more than 253 bytes"]
    assert dns1123_subdomain("x" * 254) == ["must be no more than 253 characters"]
    assert dns1123_label("\u00e9" * 40)[0] == "must be no more than 63 characters"


def test_a_dns_label_failing_only_for_its_dots_is_told_so():
    """IsDNS1123Label: a valid subdomain that is not a label gets "must not contain dots" in place of
    the pattern (after the length, if that fails too); anything else still gets the pattern."""
    assert dns1123_label("my.team") == ["must not contain dots"]
    assert dns1123_label("a" * 40 + "." + "b" * 40) == ["must be no more than 63 characters", "must not contain dots"]
    assert dns1123_label("My.team")[0].startswith("a lowercase RFC 1123 label must consist of")
    assert dns1123_label("team.") == dns1123_label("-team")


def test_remembered_dns_names_keep_rejecting():
    assert dns1123_label("app") == [] == dns1123_label("app")
    assert dns1123_label("App_1") and dns1123_label("App_1") == dns1123_label("App_1")
    assert dns1123_subdomain("a.b") == [] == dns1123_subdomain("a.b")
    assert len(dns1123_subdomain("x" * 254)) == 1 and dns1123_label("x" * 64) == ["must be no more than 63 characters"]


def test_remembered_maps_pin_a_bounded_amount_of_memory():
    """A client writing many distinct large annotation maps (15 MB of them here) leaves at most a
    few MiB remembered."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1000):
            assert validate_annotations({"example.com/note": f"{i:08d}" + "x" * 15_000}, "metadata.annotations") == []
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 6 << 20, held


def test_remembered_label_and_annotation_maps_are_known_by_their_items_not_their_identity():
    """A map found valid is remembered by what it holds: the same dict changed in place, or one
    holding the same keys with another value, is checked again."""
    labels = {"app": "web", "example.com/tier": "front"}
    annotations = {"example.com/note": "x"}
    meta = {"name": "p", "namespace": "ns", "labels": labels, "annotations": annotations}
    assert validate_object_meta(meta, True) == [] == validate_object_meta(meta, True)
    labels["app"] = "-web"
    annotations["bad key"] = "y"
    assert [e.field for e in validate_object_meta(meta, True)] == ["metadata.labels", "metadata.annotations"]
    meta = {"name": "p", "namespace": "ns", "labels": {"app": "web"}}
    assert validate_object_meta(meta, True) == []
    assert [e.field for e in validate_object_meta({**meta, "labels": {"app": 1}}, True)] == ["metadata.labels.app"]
    assert [e.field for e in validate_object_meta({**meta, "labels": {"app": ["web"]}}, True)] == ["metadata.labels.app"]


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


@pytest.mark.parametrize("manager, messages", [
    ("default-scheduler", []),
    ("kubectl-client-side-apply ~!@#", []),
    ("gestionnaire-é", []),  # not ASCII: each character's category, printable
    ("a\x7fb", ["invalid character U+007F (at position 1)"]),  # ASCII DEL: not Go's IsPrint
    ("a\tb", ["invalid character U+0009 (at position 1)"]),
    ("m" * 129, ["may not be more than 128 bytes"]),
    ("é" * 65, ["may not be more than 128 bytes"]),  # 130 bytes in 65 characters
])
def test_a_field_managers_name_is_at_most_128_bytes_of_printable_characters(manager, messages):
    assert [e.detail for e in field_manager_errors(manager, "m")] == messages


_ENTRY = {"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}


@pytest.mark.parametrize("change, errors", [
    ({}, []),
    ({"fieldsType": None, "subresource": "", "manager": None}, []),
    ({"manager": "m" * 128, "subresource": "s" * 256}, []),
    ({"manager": "gestionnaire-é", "subresource": "\U0001f600" * 64}, []),  # 256 bytes in 64 characters
    ({"subresource": "\U0001f600" * 65}, ["metadata.managedFields[1].subresource: Too long: may not be more than 256 bytes"]),
    ({"manager": "m" * 129}, ["metadata.managedFields[1].manager: Too long: may not be more than 128 bytes"]),
    ({"manager": "a\nb"}, ["metadata.managedFields[1].manager: Invalid value: \"a\\nb\": invalid character U+000A (at position 1)"]),
    ({"operation": "Bogus", "fieldsType": "FieldsV2"},
     ['metadata.managedFields[1].operation: Invalid value: "Bogus": must be `Apply` or `Update`',
      'metadata.managedFields[1].fieldsType: Invalid value: "FieldsV2": must be `FieldsV1`']),
    ({"operation": None}, ['metadata.managedFields[1].operation: Invalid value: "": must be `Apply` or `Update`']),
])
def test_each_managed_fields_entry_is_validated_at_its_index(change, errors):
    """ValidateManagedFields, the entries a write ends with: the second entry's errors at [1], the first's none."""
    meta = {"name": "a", "namespace": "default", "managedFields": [_ENTRY, {**_ENTRY, **change}]}
    assert [str(e) for e in validate_object_meta(meta, True)] == errors
