"""Custom objects against their schema: pruning, defaulting and kube-openapi's messages."""

from __future__ import annotations

import pytest

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


OBJ = {"metadata": {"annotations": {"kubernetes.io/name": "web"}},
       "spec": {"items": [{"n": 1, "name": "a"}, {"n": 2.5, "name": "b"}, {"name": "c"}], "a.b": 5, "a": {"b": 6},
                "m": {"z": {"name": "zz"}, "y": {"name": "yy"}}, "null": None},
       "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Done", "status": "False"}]}}


@pytest.mark.parametrize("path, want", [
    ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
    (".status.conditions[?(@.type!='Ready')].status", ["False"]),
    ('.status.conditions[?(@.type < "Q")].type', ["Done"]),
    (".spec.items[?(@.n)].name", ["a", "b"]),                 # existence
    (".spec.items[?(@.n==1)].name", []),                      # b's 2.5 against the int 1: an error, the path fails
    (".spec.items[?(@.n>=2.5)].name", []),                    # and a's 1 against 2.5 the same
    (".spec.items[?(@.n>'0')].name", []),                     # unlike kinds: an error
    (".status.conditions[?(@.type>=true)].type", []),
    (".spec.m[?(@.name)].name", []),                          # a map cannot be filtered
    (".metadata.annotations.kubernetes\\.io/name", ["web"]),  # an escaped dot
    (".metadata.annotations['kubernetes.io/name']", []),      # ['a.b'] is re-read as .a.b
    (".spec['a.b']", [6]),
    (".spec['a\\.b']", [5]),
    ("..name", ["a", "b", "c", "yy", "zz"]),                  # maps in key order
    (".spec.items[0,2].name", ["a", "c"]),
    (".spec.items['x',0].name", ["a"]),
    (".spec.items[-1].name", ["c"]),
    (".spec.items[-2:].name", ["b", "c"]),
    (".spec.items[::2].name", ["a", "c"]),
    (".spec.items[*].name", ["a", "b", "c"]),
    (".spec.m.*.name", ["yy", "zz"]),
    (".spec.m[*]", []),                                       # [*] is [:], which fails on a map
    (".spec.items[3]", []),                                   # out of bounds: an error, an empty cell
    (".spec.items[-4]", []),
    (".spec.items[::0]", []),
    (".spec.items[2:1]", []),
    (".spec.items[1:1]", []),
    (".spec.null[0]", []),
    ("$.spec.a.b", [6]),
    (".spec.missing", []),
])
def test_jsonpath_is_client_gos(path, want):
    assert jsonpath.find(OBJ, path) == want


@pytest.mark.parametrize("path, why", [
    (".a[", "unterminated array"), (".a[x]", "invalid array index x"), (".a[?(@.b", "unterminated filter"),
    (".a[?(@.b)", "unclosed array expect ]"), (".a..b....c", "invalid multiple recursive descent"),
    (".a[-]", "array index - is not a number"), (".a 'b", "unterminated quoted string"), (".a#", None),
    ('.a[?(@.b=="\\U00110000")]', 'unquote string "\\U00110000" error invalid syntax'),  # past Unicode
    ('.a[?(@.b=="\\ud800")]', 'unquote string "\\ud800" error invalid syntax'),  # a surrogate
])
def test_jsonpath_parse_errors(path, why):
    if why is None:  # anything but a terminator belongs to a field name
        assert jsonpath.field_path(path) == ["a#"]
        return
    with pytest.raises(jsonpath.JSONPathError) as e:
        jsonpath.compile_path(path)
    assert str(e.value) == why


def test_lacks_defaults_says_whether_defaulting_would_change_an_object():
    assert defaulting.lacks_defaults({"spec": {"size": 1}}, SCHEMA)
    done = defaulting.default({"spec": {"size": 1}}, SCHEMA)
    assert not defaulting.lacks_defaults(done, SCHEMA)
    assert defaulting.lacks_defaults({"spec": {"size": 1, "mode": "fast", "opts": {}}}, SCHEMA)
