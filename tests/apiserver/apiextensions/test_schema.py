"""Custom objects against their schema: pruning, defaulting and kube-openapi's messages."""

from __future__ import annotations

from nanokube.apiserver.apiextensions import defaulting, jsonpath, validator

SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["size"], "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 8},
        "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
        "name": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        "port": {"x-kubernetes-int-or-string": True},
        "opts": {"type": "object", "default": {}, "properties": {"retries": {"type": "integer", "default": 3}}},
        "when": {"type": "string", "format": "date-time"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
        "template": {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True},
        "maybe": {"type": "string", "nullable": True},
    }}}}


def errs(obj) -> list[str]:
    return [str(e) for e in validator.validate(obj, SCHEMA)]


def test_kube_openapi_messages():
    assert errs({"spec": {}}) == ["spec.size: Required value"]
    assert errs({"spec": {"size": 9}}) == ["spec.size: Invalid value: 9: spec.size in body should be less than or equal to 8"]
    assert errs({"spec": {"size": 0}}) == ["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]
    assert errs({"spec": {"size": "x"}}) == [
        'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"']
    assert errs({"spec": {"size": 1, "mode": "slow"}}) == [
        'spec.mode: Unsupported value: "slow": supported values: "fast", "safe"']
    assert errs({"spec": {"size": 1, "name": "toolong"}}) == ["spec.name: Too long: may not be more than 5 bytes"]
    assert errs({"spec": {"size": 1, "name": "A1"}}) == [
        "spec.name: Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'"]
    assert errs({"spec": {"size": 1, "tags": ["a", "b", "c"]}}) == ["spec.tags: Too many: 3: must have at most 2 items"]
    assert errs({"spec": {"size": 1, "port": 80}}) == errs({"spec": {"size": 1, "port": "http"}}) == []
    assert errs({"spec": {"size": 1, "when": "yesterday"}}) == [
        'spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"']
    # objectmeta's validateEmbeddedResource: Required without a detail, a group/version, a mixed-case kind
    assert errs({"spec": {"size": 1, "template": {"spec": {}}}}) == [
        "spec.template.apiVersion: Required value", "spec.template.kind: Required value"]
    assert errs({"spec": {"size": 1, "template": {"apiVersion": "v1", "kind": ""}}}) == ["spec.template.kind: Required value"]
    assert errs({"spec": {"size": 1, "template": {"apiVersion": "a/b/c", "kind": "Bad_Kind"}}}) == [
        'spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
        'spec.template.kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 '
        "label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end "
        "with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
        "'[a-z]([-a-z0-9]*[a-z0-9])?')"]
    assert errs({"spec": {"size": 1, "template": {"apiVersion": "apps/v1", "kind": "StatefulSet"}}}) == []
    assert errs({"spec": {"size": 1, "maybe": None}}) == []


def test_an_embedded_resources_metadata_is_validated_as_object_meta():
    """validateEmbeddedResource: the metadata decodes as an ObjectMeta and passes ValidateObjectMeta
    with a path-segment name (the fuzzer's probe stored a label value "b c" in one)."""
    template = {"apiVersion": "v1", "kind": "Pod"}
    assert errs({"spec": {"size": 1, "template": {**template, "metadata": {"name": "A_B", "labels": {"a": "b"}}}}}) == []
    got = errs({"spec": {"size": 1, "template": {**template, "metadata": {"name": "a/b", "namespace": "X",
                                                                          "labels": {"a": "b c"}}}}})
    assert [e.split(":")[0] for e in got] == [
        "spec.template.metadata.name", "spec.template.metadata.namespace", "spec.template.metadata.labels"]
    assert errs({"spec": {"size": 1, "template": {**template, "metadata": {"labels": 5}}}}) == [
        'spec.template.metadata: Invalid value: {"labels":5}: json: cannot unmarshal number into Go struct field '
        "ObjectMeta.labels of type map[string]string"]


def test_defaults_apply_to_absent_fields_and_inside_new_defaults():
    obj = {"spec": {"size": 1}}
    defaulting.default(obj, SCHEMA)
    assert obj == {"spec": {"size": 1, "mode": "safe", "opts": {"retries": 3}}}
    obj = {"spec": {"size": 1, "mode": None}}
    defaulting.default(obj, SCHEMA)
    assert obj["spec"]["mode"] == "safe"


def test_pruning_reports_paths_and_keeps_preserved_and_embedded_fields():
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}},
           "spec": {"size": 1, "extra": 1, "tags": ["a"], "free": {"anything": 1, "known": {"a": "x", "b": 2}},
                    "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}}},
           "other": True}
    unknown = defaulting.prune(obj, SCHEMA)
    assert unknown == ["spec.extra", "spec.free.known.b", "other"]
    assert obj["spec"]["free"] == {"anything": 1, "known": {"a": "x"}}
    assert obj["metadata"] == {"name": "n", "labels": {"a": "b"}}
    assert obj["spec"]["template"]["spec"] == {"x": 1}


def test_jsonpath_for_printer_columns():
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Done", "status": "False"}]},
           "spec": {"items": [{"n": 1}, {"n": 2}], "a.b": 5}}
    assert jsonpath.find(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert jsonpath.find(obj, ".spec.items[*].n") == [1, 2]
    assert jsonpath.find(obj, ".spec.items[1].n") == [2]
    assert jsonpath.find(obj, ".spec['a.b']") == [5]
    assert jsonpath.find(obj, ".spec.missing") == []


def test_lacks_defaults_says_whether_defaulting_would_change_an_object():
    assert defaulting.lacks_defaults({"spec": {"size": 1}}, SCHEMA)
    done = defaulting.default({"spec": {"size": 1}}, SCHEMA)
    assert not defaulting.lacks_defaults(done, SCHEMA)
    assert defaulting.lacks_defaults({"spec": {"size": 1, "mode": "fast", "opts": {}}}, SCHEMA)
