"""CRD validation: names, versions, structural schemas, printer columns, selectable
fields and scale paths, in upstream's words."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver.apiextensions import crd_validation, structural_schema
from tests.served import send, served

SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "color": {"type": "string"}}},
    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}


def crd(**spec) -> dict:
    base = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}}]},
        "status": {"storedVersions": ["v1"]},
    }
    base["spec"].update(spec)
    return base


def msgs(obj) -> list[str]:
    return [str(e) for e in crd_validation.validate(obj)]


def test_a_valid_crd_has_no_errors():
    assert msgs(crd()) == []


def test_name_must_be_plural_dot_group():
    c = crd()
    c["metadata"]["name"] = "gadgets.example.com"
    assert msgs(c) == ['metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group']


def test_exactly_one_storage_version():
    c = crd()
    c["spec"]["versions"].append({**copy.deepcopy(c["spec"]["versions"][0]), "name": "v2"})
    assert any(m.startswith("spec.versions: Invalid value: ") and m.endswith("must have exactly one version marked as storage version")
               for m in msgs(c))


def test_group_scope_and_kinds():
    c = crd(group="example", scope="Global")
    c["metadata"]["name"] = "widgets.example"
    c["spec"]["names"]["listKind"] = "Widget"
    got = msgs(c)
    assert 'spec.group: Invalid value: "example": should be a domain with at least one dot' in got
    assert 'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"' in got
    assert 'spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same' in got


def test_non_structural_schemas_are_refused_with_upstreams_messages():
    p = "spec.validation.openAPIV3Schema"
    bad = {"type": "object", "properties": {
        "spec": {"properties": {"list": {"type": "array"}, "both": {"type": "object", "properties": {"a": {"type": "string"}},
                                                                   "additionalProperties": {"type": "string"}}}},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "choice": {"type": "string", "anyOf": [{"type": "string", "default": "x"}]}}}
    assert [str(e) for e in structural_schema.validate(bad, p)] == [
        # ValidateStructural's, sorted as it sorts them
        f"{p}.properties[choice].anyOf[0].default: Forbidden: must be undefined to be structural",
        f"{p}.properties[choice].anyOf[0].type: Forbidden: must be empty to be structural",
        f"{p}.properties[spec].properties[list].items: Required value: must be specified",
        f"{p}.properties[spec].type: Required value: must not be empty for specified object fields",
        # then ValidateCustomResourceDefinitionOpenAPISchema's, in its walk
        f"{p}.properties[spec].properties[both].additionalProperties: Forbidden: additionalProperties and "
        "properties are mutual exclusive",
        f"{p}.properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
        "complexity becomes quadratic"]
    assert [str(e) for e in structural_schema.validate({"type": "string"}, p)] == [
        f'{p}.type: Invalid value: "string": must be object at the root']


def test_int_or_string_and_preserve_unknown_fields_need_no_type():
    ok = {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True},
                                            "free": {"x-kubernetes-preserve-unknown-fields": True}}}
    assert structural_schema.validate(ok, "s") == []


def test_int_or_string_excludes_preserve_unknown_fields_and_embedded_resources():
    """validateExtensions reports them as Invalid values, as upstream's messages read."""
    s = {"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": True,
                                                "x-kubernetes-preserve-unknown-fields": True}}}
    assert [str(e) for e in structural_schema.validate(s, "s")] == [
        "s.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if "
        "x-kubernetes-int-or-string is true"]


def test_metadata_may_only_restrict_name():
    s = {"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}
    assert [str(e) for e in structural_schema.validate(s, "s")] == [
        "s.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
        "but metadata is implicitly specified"]


def test_defaults_must_be_pruned_and_valid():
    s = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "n": {"type": "integer", "default": "three"},
        "o": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"b": 1}}}}}}
    got = [str(e) for e in structural_schema.validate(s, "s")]
    assert 's.properties[spec].properties[o].default: Invalid value: {"b":1}: must not have unknown fields' in got
    assert any(m.startswith("s.properties[spec].properties[n].default: Invalid value: \"string\"") for m in got)


def test_printer_columns_selectable_fields_and_scale_paths():
    c = crd()
    v = c["spec"]["versions"][0]
    v["additionalPrinterColumns"] = [{"name": "N", "type": "float", "jsonPath": ".spec.replicas"}]
    v["selectableFields"] = [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}, {"jsonPath": ".metadata.name"},
                             {"jsonPath": ".spec"}]
    v["subresources"] = {"scale": {"specReplicasPath": ".status.replicas", "statusReplicasPath": ".spec.replicas"}}
    got = msgs(c)
    p = "spec"  # a single version's columns, fields and subresources are the spec's once converted
    assert f'{p}.additionalPrinterColumns[0].type: Invalid value: "float": must be one of boolean,date,integer,number,string' in got
    assert f'{p}.selectableFields[1].jsonPath: Duplicate value: ".spec.color"' in got
    # (the schema declares no metadata: the path names no field of it)
    assert (f'{p}.selectableFields[2].jsonPath: Invalid value: ".metadata.name": is an invalid path: does not refer '
            'to a valid field') in got
    assert any(m.startswith(f'{p}.selectableFields[3].jsonPath: Invalid value: ".spec": must point to a field of type')
               for m in got)
    assert f'{p}.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec' in got
    assert f'{p}.subresources.scale.statusReplicasPath: Invalid value: ".spec.replicas": should be a json path under .status' in got


def test_selectable_fields_are_judged_by_valid_field_path():
    """ValidateCustomResourceSelectableFields reads each path with cel.ValidFieldPath, no array notation: a
    path that does not start with '.' (braces, '$'), any '[', a step past a scalar and a trailing '.' are its
    errors; metadata is refused only where the schema declares it, and duplicates are the field paths named
    (a map's keys through additionalProperties). `{.spec.color}` and `$.spec.color` were accepted (their
    field selectors matched nothing), and '[...]' was 'must be a simple json path' (found by fuzz64)."""
    c = crd()
    v = c["spec"]["versions"][0]
    schema = v["schema"]["openAPIV3Schema"]
    schema["properties"]["metadata"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    schema["properties"]["spec"]["properties"]["labels"] = {"type": "object", "additionalProperties": {"type": "string"}}
    paths = ["{.spec.color}", "$.spec.color", ".spec['color']", ".spec.color.x", ".spec.", "spec.color",
             ".metadata.name", ".spec.labels.a", ".spec.labels.a", ".spec.color"]
    v["selectableFields"] = [{"jsonPath": jp} for jp in paths]
    got = [m for m in msgs(c) if m.startswith("spec.selectableFields")]
    assert got == [f'spec.selectableFields[{i}].jsonPath: Invalid value: "{paths[i]}": {why}' for i, why in [
        (0, "is an invalid path: expected [ or . but got: {"), (1, "is an invalid path: expected [ or . but got: $"),
        (2, "is an invalid path: array notation is not allowed"), (3, "is an invalid path: does not refer to a valid field"),
        (4, "is an invalid path: unexpected end of JSON path"), (5, "is an invalid path: expected [ or . but got: spec"),
        (6, "must not point to fields in metadata")]] + [
        'spec.selectableFields[8].jsonPath: Duplicate value: ".spec.labels.a"']


def test_stored_versions():
    c = crd()
    c["status"]["storedVersions"] = ["v1beta1", "v1"]
    assert msgs(c) == [
        'status.storedVersions[0]: Invalid value: "v1beta1": missing from spec.versions; v1beta1 was previously a '
        "storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted "
        "in v1beta1 and removes v1beta1 from status.storedVersions"]
    c["status"]["storedVersions"] = ["v0"]
    assert msgs(c)[0] == 'status.storedVersions: Invalid value: ["v0"]: must have the storage version v1'


def test_only_what_versions_share_is_validated_at_the_spec():
    """v1 -> internal conversion moves a schema, subresources, columns and selectable fields every
    version shares to the spec (spec.validation...); differing ones stay per version. The first
    version's name is also spec.version."""
    c = crd()
    bad = copy.deepcopy(SCHEMA)
    bad["properties"]["spec"]["uniqueItems"] = True
    first = c["spec"]["versions"][0]
    first.update(name="V1", schema={"openAPIV3Schema": bad}, subresources={"status": {}})
    second = {**copy.deepcopy(first), "name": "v2", "storage": False, "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}}
    c["spec"]["versions"].append(second)
    c["status"]["storedVersions"] = ["V1"]
    unique = "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
    dns = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
    assert msgs(c) == [f'spec.versions[0].name: Invalid value: "V1": {dns}',
                       f"spec.versions[0].schema.openAPIV3Schema.properties[spec].uniqueItems: {unique}",
                       f'spec.version: Invalid value: "V1": {dns}']
    second["schema"] = copy.deepcopy(first["schema"])
    assert msgs(c)[1:] == [f'spec.version: Invalid value: "V1": {dns}',
                           f"spec.validation.openAPIV3Schema.properties[spec].uniqueItems: {unique}"]


def test_update_keeps_group_and_plural():
    old = crd()
    new = crd(group="other.com")
    new["metadata"]["name"] = "widgets.other.com"
    assert 'spec.group: Invalid value: "other.com": field is immutable' in [str(e) for e in crd_validation.validate_update(new, old)]


def test_protected_groups_need_the_api_approval_annotation():
    c = crd(group="widgets.k8s.io")
    c["metadata"]["name"] = "widgets.widgets.k8s.io"
    assert msgs(c) == ['metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have '
                       'approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111']
    c["metadata"]["annotations"] = {"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"}
    assert msgs(c) == []
    c["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, experimental"}
    assert msgs(c) == []
    c["metadata"]["annotations"] = {"api-approved.kubernetes.io": "yes"}
    assert len(msgs(c)) == 1 and 'with either a URL or a reason starting with "unapproved"' in msgs(c)[0]
    c["metadata"]["annotations"] = {"api-approved.kubernetes.io": ""}  # empty is missing (GetAPIApprovalState)
    assert len(msgs(c)) == 1 and "Required value" in msgs(c)[0]
    c["metadata"]["annotations"] = {"api-approved.kubernetes.io": "git://example.com/kep"}  # any scheme with a host
    assert msgs(c) == []


def _go_schema(**fields) -> str:
    """json.Marshal of an internal apiextensions.JSONSchemaProps: every field by its Go name."""
    zero = {"ID": '""', "Schema": '""', "Ref": "null", "Description": '""', "Type": '""', "Nullable": "false",
            "Format": '""', "Title": '""', "Default": "null", "Maximum": "null", "ExclusiveMaximum": "false",
            "Minimum": "null", "ExclusiveMinimum": "false", "MaxLength": "null", "MinLength": "null", "Pattern": '""',
            "MaxItems": "null", "MinItems": "null", "UniqueItems": "false", "MultipleOf": "null", "Enum": "null",
            "MaxProperties": "null", "MinProperties": "null", "Required": "null", "Items": "null", "AllOf": "null",
            "OneOf": "null", "AnyOf": "null", "Not": "null", "Properties": "null", "AdditionalProperties": "null",
            "PatternProperties": "null", "Dependencies": "null", "AdditionalItems": "null", "Definitions": "null",
            "ExternalDocs": "null", "Example": "null", "XPreserveUnknownFields": "null", "XEmbeddedResource": "false",
            "XIntOrString": "false", "XListMapKeys": "null", "XListType": "null", "XMapType": "null",
            "XValidations": "null"}
    return "{" + ",".join(f'"{k}":{fields.get(k, v)}' for k, v in zero.items()) + "}"


async def test_over_http_versions_print_as_the_internal_go_structs(tmp_path):
    """ValidateCustomResourceDefinitionSpec's spec.versions value is []apiextensions.CustomResourceDefinitionVersion:
    json.Marshal of internal types without JSON tags (Go field names, unset pointers and slices null); the
    unique-names error is reported once, after the versions."""
    body = crd()
    body["spec"]["versions"] = [
        {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"n": {"type": "integer", "maximum": 5, "default": 1}}}},
         "subresources": {"status": {}}, "additionalPrinterColumns": [{"name": "N", "type": "integer", "jsonPath": ".n"}]},
        {"name": "v1", "served": False, "storage": True, "deprecated": True, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v1", "served": False, "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}}]
    body["status"] = {}
    n = _go_schema(Type='"integer"', Default="1", Maximum="5")
    first = ('{"Name":"v1","Served":true,"Storage":true,"Deprecated":false,"DeprecationWarning":null,"Schema":'
             '{"OpenAPIV3Schema":' + _go_schema(Type='"object"', Properties='{"n":' + n + "}") + '},"Subresources":'
             '{"Status":{},"Scale":null},"AdditionalPrinterColumns":[{"Name":"N","Type":"integer","Format":"",'
             '"Description":"","Priority":0,"JSONPath":".n"}],"SelectableFields":null}')
    plain = _go_schema(Type='"object"')
    second = ('{"Name":"v1","Served":false,"Storage":true,"Deprecated":true,"DeprecationWarning":null,"Schema":'
              '{"OpenAPIV3Schema":' + plain + '},"Subresources":null,"AdditionalPrinterColumns":null,"SelectableFields":null}')
    third = second.replace('"Storage":true,"Deprecated":true', '"Storage":false,"Deprecated":false')
    versions = f"[{first},{second},{third}]"
    async with served(tmp_path) as (_, api_client):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(client.ApiextensionsV1Api(api_client).create_custom_resource_definition, body)
    assert e.value.status == 422
    causes = [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]
    assert [c for c in causes if c[0] == "spec.versions"] == [
        ("spec.versions", f"Invalid value: {versions}: must contain unique version names"),
        ("spec.versions", f"Invalid value: {versions}: must have exactly one version marked as storage version")]


def test_a_default_is_checked_even_with_unknown_fields_and_its_embedded_resources_first():
    """validateStructuralDefaults: the unknown-fields error does not stop the checks that follow;
    objectmeta's errors, when there are any, stand alone (the schema's come only once they pass)."""
    unknown_and_wrong = {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": 1, "b": 1}}
    embedded = {"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"n": {"type": "integer"}}, "default": {"n": "x"}}
    s = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"u": unknown_and_wrong, "e": embedded}}}}
    p = "s.properties[spec].properties"
    assert sorted(str(e) for e in structural_schema.validate(s, "s")) == sorted([
        f'{p}[u].default: Invalid value: {{"a":1,"b":1}}: must not have unknown fields',
        f'{p}[u].default.a: Invalid value: "integer": {p}[u].default.a in body must be of type string: "integer"',
        f"{p}[e].default.apiVersion: Required value", f"{p}[e].default.kind: Required value"])


async def test_over_http_a_defaults_checks_all_run(tmp_path):
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["color"] = {
        "type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": 1, "b": 1}}
    async with served(tmp_path) as (_, api_client):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(client.ApiextensionsV1Api(api_client).create_custom_resource_definition, body)
    assert e.value.status == 422
    p = "spec.validation.openAPIV3Schema.properties[spec].properties[color].default"
    causes = {(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]}
    assert causes == {(p, 'Invalid value: {"a":1,"b":1}: must not have unknown fields'),
                      (f"{p}.a", f'Invalid value: "integer": {p}.a in body must be of type string: "integer"')}


async def _create_refused(tmp_path, body) -> list[tuple[str, str]]:
    async with served(tmp_path) as (_, api_client):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(client.ApiextensionsV1Api(api_client).create_custom_resource_definition, body)
    assert e.value.status == 422
    return [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]


async def test_over_http_structural_errors_come_sorted_first_and_hide_defaults_and_cel(tmp_path):
    """validateCustomResourceDefinitionValidation: ValidateStructural's errors (sorted), and only when
    there are none the defaults'; the OpenAPI schema checks follow in their walk; a CEL rule is
    compiled only for a structural schema with valid defaults (its static checks always run)."""
    body = crd()
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"].update({
        "a": {"type": "string", "x-kubernetes-list-type": "set"},   # OpenAPI check, sorts first by path
        "b": {"properties": {"c": {"type": "string"}}},            # structural: no type
        "d": {"type": "integer", "default": "three",               # a default that fails
              "x-kubernetes-validations": [{"rule": "self >"}, {"rule": " "}]}})  # no compile; static check
    p = "spec.validation.openAPIV3Schema.properties[spec].properties"
    assert await _create_refused(tmp_path, body) == [
        (f"{p}[b].type", "Required value: must not be empty for specified object fields"),
        (f"{p}[a].type", 'Invalid value: "string": must be array if x-kubernetes-list-type is specified'),
        (f"{p}[d].x-kubernetes-validations[1].rule", "Required value: rule is not specified")]
    del spec["properties"]["a"], spec["properties"]["b"]
    assert await _create_refused(tmp_path / "2", body) == [
        (f"{p}[d].default", 'Invalid value: "string": '
                            f'{p}[d].default in body must be of type integer: "string"'),
        (f"{p}[d].x-kubernetes-validations[1].rule", "Required value: rule is not specified")]


def test_list_and_map_extensions_in_upstreams_words():
    s = {"type": "object", "properties": {
        "keys": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                 "x-kubernetes-list-map-keys": ["k"]},
        "m": {"x-kubernetes-map-type": "loose", "x-kubernetes-preserve-unknown-fields": True},
        "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"},
                                                                             "o": {"type": "object"}}},
              "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "o", "z"]},
        "f": {"type": "string", "x-kubernetes-preserve-unknown-fields": False}}}
    assert [str(e) for e in structural_schema.validate(s, "s")] == [
        "s.properties[keys].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty",
        "s.properties[m].type: Required value: must be object if x-kubernetes-map-type is specified",
        's.properties[m].x-kubernetes-map-type: Unsupported value: "loose": supported values: "atomic", "granular"',
        's.properties[l].items.properties[o].type: Invalid value: "object": must be a scalar type if parent array\'s '
        "x-kubernetes-list-type is map",
        's.properties[l].x-kubernetes-list-map-keys: Invalid value: ["k","o","z"]: entries must all be names of item '
        "properties",
        "s.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, "
        "so it must have a default or be a required property",
        "s.properties[l].items.properties[o].default: Required value: this property is in x-kubernetes-list-map-keys, "
        "so it must have a default or be a required property",
        "s.properties[f].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"]


async def test_over_http_openapi_fields_crd_schemas_do_not_support(tmp_path):
    """specStandardValidatorV3 forbids what OpenAPI allows and CRDs do not (id, $ref, definitions,
    patternProperties, dependencies, additionalItems, a list of items, type null), at every node
    (junctors and definitions too), and defaults in the top-level metadata; NewStructural then fails,
    so no structural check runs."""
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object", "id": "x",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}},
            "spec": {"type": "object", "properties": {
                "a": {"type": "string", "$ref": "#/a"},
                "l": {"type": "array", "items": [{"type": "string"}], "additionalItems": False},
                "o": {"type": "object", "dependencies": {"x": ["y"]}, "patternProperties": {"^x": {"type": "string"}}},
                "p": {"type": "null"}}}},
        "definitions": {"d": {"type": "string", "uniqueItems": True}},
        "allOf": [{"uniqueItems": True}]}
    p = "spec.validation.openAPIV3Schema"
    assert await _create_refused(tmp_path, body) == [
        (f"{p}.id", "Forbidden: id is not supported"),
        (f"{p}.definitions", "Forbidden: definitions is not supported"),
        (f"{p}.properties[metadata].properties[name].default", "Forbidden: must not be set in top-level metadata"),
        (f"{p}.properties[spec].properties[a].$ref", "Forbidden: $ref is not supported"),
        (f"{p}.properties[spec].properties[l].additionalItems", "Forbidden: additionalItems is not supported"),
        (f"{p}.properties[spec].properties[l].items", "Forbidden: items must be a schema object and not an array"),
        (f"{p}.properties[spec].properties[o].patternProperties", "Forbidden: patternProperties is not supported"),
        (f"{p}.properties[spec].properties[o].dependencies", "Forbidden: dependencies is not supported"),
        (f"{p}.properties[spec].properties[p].type", 'Unsupported value: "null": supported values: "array", '
                                                     '"boolean", "integer", "number", "object", "string"'),
        (f"{p}.properties[spec].properties[p].type", "Forbidden: type cannot be set to null, use nullable as an alternative"),
        (f"{p}.allOf[0].uniqueItems", "Forbidden: uniqueItems cannot be set to true since the runtime complexity "
                                      "becomes quadratic"),
        (f"{p}.definitions[d].uniqueItems", "Forbidden: uniqueItems cannot be set to true since the runtime "
                                            "complexity becomes quadratic")]
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {"type": "object", "$schema": "http://x"}
    assert await _create_refused(tmp_path / "2", body) == [
        (p, "Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported")]


async def test_over_http_embedded_resources_and_resource_meta(tmp_path):
    """Inside an embedded resource's metadata, additionalProperties' defaults and another embedded
    resource are forbidden; an embedded resource takes no additionalProperties."""
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["e"] = {
        "type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"metadata": {"type": "object", "x-kubernetes-embedded-resource": True,
                                    "x-kubernetes-preserve-unknown-fields": True,
                                    "additionalProperties": {"type": "string", "default": "x"}}}}
    p = "spec.validation.openAPIV3Schema.properties[e].properties[metadata]"
    assert await _create_refused(tmp_path, body) == [
        (f"{p}.additionalProperties", "Forbidden: must not be used if x-kubernetes-embedded-resource is set"),
        (f"{p}.x-kubernetes-embedded-resource", "Forbidden: must not be used inside of resource meta"),
        (f"{p}.additionalProperties.default", "Forbidden: must not be set inside additionalProperties applying to "
                                              "object metadata")]


async def test_over_http_structural_invariants_and_completeness(tmp_path):
    """ValidateStructural's kind/apiVersion/metadata rules (a description is more than name and
    generateName), a field a root junctor names must be specified, no metadata in a junctor; with
    the status subresource the root may use only allowedFieldsAtRootSchema; a deprecation warning
    may not be empty."""
    body = crd()
    version = body["spec"]["versions"][0]
    version.update(subresources={"status": {}}, deprecated=True, deprecationWarning="")
    version["schema"]["openAPIV3Schema"] = {
        "type": "object", "maxProperties": 5,
        "properties": {"kind": {"type": "integer"}, "metadata": {"type": "object", "description": "d"},
                       "e": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "x-kubernetes-preserve-unknown-fields": True, "additionalProperties": {"type": "string"}},
                       "a": {"type": "object", "properties": {"b": {"type": "string"}}}},
        "anyOf": [{"properties": {"a": {"properties": {"c": {"maxLength": 1}}}}}],
        "not": {"properties": {"metadata": {}}}}
    p = "spec.validation.openAPIV3Schema"
    causes = await _create_refused(tmp_path, body)
    assert causes[0] == ("spec.versions[0].deprecationWarning", 'Invalid value: "": must not be an empty string')
    assert causes[1][0] == p and causes[1][1].startswith('Invalid value: {"ID":"","Schema":"","Ref":null,')
    assert causes[1][1].endswith(
        ': only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength '
        'Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example '
        'XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status '
        'subresource is enabled')
    assert causes[2:] == [
        (f"{p}.not.properties[metadata]", "Forbidden: must not be specified in a nested context"),
        (f"{p}.properties[a].properties[c]",
         f"Required value: because it is defined in {p}.anyOf[0].properties[a].properties[c]"),
        (f"{p}.properties[e].additionalProperties", "Forbidden: must not be used if x-kubernetes-embedded-resource is set"),
        (f"{p}.properties[kind].type", 'Invalid value: "integer": must be string'),
        (f"{p}.properties[metadata]", "Forbidden: must not specify anything other than name and generateName, but "
                                      "metadata is implicitly specified")]


async def test_over_http_unrecognized_formats_are_warned_about(tmp_path):
    """WarningsOnCreate/Update: a format the field's type does not know (string formats compared
    without dashes), once on create and on an update only if new."""
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].update({
        "s": {"type": "string", "format": "bogus"}, "i": {"type": "integer", "format": "int32"},
        "u": {"type": "integer", "format": "date"}, "t": {"type": "string", "format": "date-time"},
        "k": {"type": "string", "format": "k8s-short-name"}})
    async with served(tmp_path) as (_, api_client):
        api = client.ApiextensionsV1Api(api_client)
        created, status, headers = await asyncio.to_thread(api.create_custom_resource_definition_with_http_info, body)
        assert status == 201
        assert headers.getlist("Warning") == ['299 - "unrecognized format \\"bogus\\""',
                                              '299 - "unrecognized format \\"date\\""']
        patch = [{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/n",
                  "value": {"type": "number", "format": "decimal"}}]
        _, status, headers = await asyncio.to_thread(
            api.patch_custom_resource_definition_with_http_info, created.metadata.name, patch)
        assert status == 200
        assert headers.getlist("Warning") == ['299 - "unrecognized format \\"decimal\\""']


async def test_over_http_a_conversion_webhooks_client_config_and_review_versions_are_validated(tmp_path):
    """validateCustomResourceConversion checks the client config as an admission webhook's (ValidateWebhookURL,
    ValidateWebhookService) and the review versions one by one, at the internal type's paths; a url with
    user information, a query and a fragment was accepted (found by fuzzing conversion webhook configs)."""
    p = "spec.conversion"

    def conversion(strategy: str, **webhook) -> dict:
        return crd(conversion={"strategy": strategy, "webhook": webhook})
    cases = [
        (conversion("Webhook", clientConfig={"url": "https://user:pw@127.0.0.1:1/x?q=1#f"}, conversionReviewVersions=["v1"]),
         [(f"{p}.webhookClientConfig.url", 'Invalid value: "user:pw": user information is not permitted in the URL'),
          (f"{p}.webhookClientConfig.url", 'Invalid value: "f": fragments are not permitted in the URL'),
          (f"{p}.webhookClientConfig.url", 'Invalid value: "q=1": query parameters are not permitted in the URL')]),
        (conversion("Webhook", clientConfig={"service": {"name": "s", "namespace": "default", "path": "x", "port": 0}},
                    conversionReviewVersions=["v1", "v1", "V2"]),
         [(f"{p}.webhookClientConfig.service.port", "Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"),
          (f"{p}.webhookClientConfig.service.path", "Invalid value: \"x\": must start with a '/'"),
          (f"{p}.webhookClientConfig.service.path", 'Invalid value: "x": segment[0] may not be empty'),
          (f"{p}.conversionReviewVersions[1]", 'Invalid value: "v1": duplicate version'),
          (f"{p}.conversionReviewVersions[2]", 'Invalid value: "V2": a DNS-1035 label must consist of lower case '
           "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character "
           "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")]),
        (conversion("None", clientConfig={"url": "https://h/x"}, conversionReviewVersions=["v1"]),
         [(f"{p}.webhookClientConfig", "Forbidden: should not be set when strategy is not set to Webhook"),
          (f"{p}.conversionReviewVersions", "Forbidden: should not be set when strategy is not set to Webhook")]),
    ]
    async with served(tmp_path) as (_, api_client):
        for body, want in cases:
            code, got = await send(api_client, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
            assert code == 422, got
            assert [(c["field"], c["message"]) for c in got["details"]["causes"]] == want


def test_preserve_unknown_fields_is_never_turned_on_in_v1():
    c = crd(preserveUnknownFields=True)
    why = ("spec.preserveUnknownFields: Invalid value: true: cannot set to true, set "
           "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead")
    assert msgs(c) == [why]
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = {
        "size": {"type": "integer", "default": 1}}
    assert msgs(c) == ["spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in "
                       "the schema", why]
    kept = crd(preserveUnknownFields=True)  # a CRD that has it (written as v1beta1) may keep it
    assert crd_validation.validate_update(kept, copy.deepcopy(kept)) == []
    assert msgs(crd(preserveUnknownFields=False)) == []


async def test_over_http_schema_or_bool_array_and_string_array_decode_as_upstreams(tmp_path):
    """marshal.go's UnmarshalJSON of JSONSchemaPropsOrBool refuses what is neither a bool nor an object,
    OrArray and OrStringArray decode anything but an object or a list as empty (null); a schema inside
    is decoded by a json.Unmarshal of its own, so its type errors name JSONSchemaProps' field from there.
    additionalProperties: 5 with two versions of one name was a 500 (the versions printed in the error)."""
    def body(schema: dict, versions: int = 1) -> dict:
        b = crd()
        b["spec"]["versions"] = [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {"s": schema}}}}] * versions
        return b

    handled = 'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: '
    refused = [({"type": "object", "additionalProperties": 5}, "boolean or JSON schema expected"),
               ({"type": "array", "items": [{"type": "x"}], "additionalItems": "x"}, "boolean or JSON schema expected"),
               ({"type": "object", "additionalProperties": {"type": 5}},
                "json: cannot unmarshal number into Go struct field JSONSchemaProps.type of type string"),
               ({"type": "array", "items": {"type": "string", "maxLength": "x"}},
                "json: cannot unmarshal string into Go struct field JSONSchemaProps.maxLength of type int64"),
               ({"type": "array", "items": [5]}, "json: cannot unmarshal number into Go value of type v1.JSONSchemaProps"),
               ({"type": "object", "dependencies": {"a": [5]}}, "json: cannot unmarshal number into Go value of type string")]
    url = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All"
    async with served(tmp_path) as (_, api_client):
        for schema, why in refused:
            for versions in (1, 2):
                code, got = await send(api_client, "POST", url, body(schema, versions))
                assert (code, got["message"]) == (400, handled + why), schema
        code, got = await send(api_client, "POST", url, body({"type": "array", "items": 5}))
        assert code == 422, got
        assert [(c["field"], c["message"]) for c in got["details"]["causes"]] == [
            ("spec.validation.openAPIV3Schema.properties[s].items", "Required value: must be specified")]
        code, got = await send(api_client, "POST", url, body({"type": "object", "dependencies": {"a": 5}}, 2))
        assert code == 422, got
