import struct

import orjson
import pytest
import yaml

from nanokube.apiserver import openapi, openapi_proto
from nanokube.apiserver.openapi_proto import MEDIA_JSON, MEDIA_PB, encode_document, negotiate
from nanokube.registry.base import Resource

RESOURCES = [
    Resource("", "configmaps", "ConfigMap", ["v1"], True),
    Resource("apps", "deployments", "Deployment", ["v1"], True, subresources=("status", "scale")),
]


def decode(buf: bytes) -> dict[int, list]:
    """Field number -> values (ints for varints, floats for fixed64, bytes for length-delimited)."""
    out: dict[int, list] = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
        elif wire == 1:
            val, i = struct.unpack("<d", buf[i:i + 8])[0], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            val, i = buf[i:i + n], i + n
            assert len(val) == n, "truncated"
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.setdefault(num, []).append(val)
    return out


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def named(wrapper: bytes, field: int = 1) -> dict[str, bytes]:
    """`Named*` entries of a map message: name -> encoded value."""
    entries = [decode(e) for e in decode(wrapper).get(field, [])]
    return {e[1][0].decode(): e.get(2, [b""])[0] for e in entries}


def vendor(msg: dict[int, list], field: int) -> dict:
    """NamedAny vendor extensions, their YAML parsed."""
    return {k: yaml.safe_load(decode(v)[2][0].decode()) for k, v in
            ((decode(e)[1][0].decode(), decode(e)[2][0]) for e in msg.get(field, []))}


def s(msg: dict[int, list], field: int) -> str:
    return msg[field][0].decode()


@pytest.fixture(scope="module")
def doc() -> dict[int, list]:
    return decode(encode_document(openapi.build_v2(RESOURCES)))


def test_document_header_and_security(doc):
    assert s(doc, 1) == "2.0"
    info = decode(doc[2][0])
    assert (s(info, 1), s(info, 2)) == ("Kubernetes", "v1.37.0")
    bearer = decode(named(doc[13][0])["BearerToken"])
    api_key = decode(bearer[2][0])  # SecurityDefinitionsItem.api_key_security
    assert (s(api_key, 1), s(api_key, 2), s(api_key, 3)) == ("apiKey", "authorization", "header")
    requirement = named(doc[12][0])
    assert list(requirement) == ["BearerToken"] and decode(requirement["BearerToken"]) == {}


def test_definition_with_group_version_kind_and_properties(doc):
    defs = named(doc[9][0])
    assert "io.k8s.api.apps.v1.Deployment" in defs and "io.k8s.api.core.v1.ConfigMap" in defs
    dep = decode(defs["io.k8s.api.apps.v1.Deployment"])
    assert [t.decode() for t in decode(dep[22][0])[1]] == ["object"]
    assert vendor(dep, 31)["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}]
    props = named(dep[25][0])
    assert s(decode(props["spec"]), 1) == "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    spec = decode(defs["io.k8s.api.apps.v1.DeploymentSpec"])
    assert {r.decode() for r in spec[19]} >= {"selector", "template"}
    replicas = decode(named(spec[25][0])["replicas"])
    assert [t.decode() for t in decode(replicas[22][0])[1]] == ["integer"]
    assert s(replicas, 2) == "int32"
    containers = decode(named(decode(defs["io.k8s.api.core.v1.PodSpec"])[25][0])["containers"])
    assert vendor(containers, 31) == {"x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map",
                                      "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}
    item = decode(decode(containers[23][0])[1][0])  # ItemsItem.schema[0]
    assert s(item, 1) == "#/definitions/io.k8s.api.core.v1.Container"


def test_config_map_data_is_a_map_of_strings(doc):
    cm = decode(named(doc[9][0])["io.k8s.api.core.v1.ConfigMap"])
    data = decode(named(cm[25][0])["data"])
    additional = decode(decode(data[21][0])[1][0])  # AdditionalPropertiesItem.schema
    assert [t.decode() for t in decode(additional[22][0])[1]] == ["string"]


def test_paths_operations_and_parameters(doc):
    paths = named(doc[8][0], field=2)
    item = decode(paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"])
    patch = decode(item[8][0])
    assert s(patch, 5) == "patchAppsV1NamespacedDeployment"
    assert vendor(patch, 13) == {"x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": {
        "group": "apps", "kind": "Deployment", "version": "v1"}}
    assert "application/apply-patch+yaml" in [c.decode() for c in patch[7]]
    params = [decode(decode(p)[1][0]) for p in patch[8]]  # ParametersItem.parameter
    body = decode(params[0][1][0])  # Parameter.body_parameter
    assert (s(body, 2), s(body, 3), body[4]) == ("body", "body", [1])
    query = {s(q, 4): q for q in (decode(decode(p[2][0])[3][0]) for p in params[1:])}
    assert set(query) == {"dryRun", "fieldManager", "fieldValidation", "force"}
    assert (s(query["force"], 2), s(query["force"], 6), query["force"][20]) == ("query", "boolean", [1])
    path_params = [decode(decode(decode(decode(p)[1][0])[2][0])[4][0]) for p in item[9][:2]]
    assert [(s(p, 4), s(p, 2), p[1]) for p in path_params] == [("name", "path", [1]), ("namespace", "path", [1])]
    responses = named(patch[9][0])
    ok = decode(decode(responses["200"])[1][0])  # ResponseValue.response
    assert s(ok, 1) == "OK"
    assert s(decode(decode(ok[2][0])[1][0]), 1) == "#/definitions/io.k8s.api.apps.v1.Deployment"


def test_scalars_bools_and_refs_follow_the_wire_format():
    schema = {"type": "object", "minimum": -1.5, "maxLength": 3, "minLength": -2, "additionalProperties": False,
              "enum": ["a", 1], "x-kubernetes-preserve-unknown-fields": True}
    json_doc = orjson.dumps({"swagger": "2.0", "definitions": {"T": schema},
                             "paths": {"x-path-note": "n"},
                             "parameters": {"p": {"in": "query", "name": "q"}},
                             "responses": {"r": {"description": "d"}}})
    out = decode(encode_document(json_doc))
    t = decode(named(out[9][0])["T"])
    assert t[9] == [-1.5] and t[11] == [3] and t[12] == [2**64 - 2]
    assert decode(t[21][0]) == {2: [0]}  # the false bool of a oneof arm is still written
    assert [yaml.safe_load(decode(e)[2][0].decode()) for e in t[20]] == ["a", 1]
    assert vendor(t, 31) == {"x-kubernetes-preserve-unknown-fields": True}
    assert vendor(decode(out[8][0]), 1) == {"x-path-note": "n"}
    param = decode(named(out[10][0])["p"])  # Parameter.non_body_parameter.query_parameter_sub_schema
    assert s(decode(decode(param[2][0])[3][0]), 4) == "q"
    assert s(decode(named(out[11][0])["r"]), 1) == "d"


def test_unknown_keys_are_refused_like_gnostic():
    with pytest.raises(ValueError, match="Schema has no field 'nullable'"):
        encode_document(orjson.dumps({"swagger": "2.0", "definitions": {"T": {"nullable": True}}}))
    with pytest.raises(ValueError, match="unknown location"):
        encode_document(orjson.dumps({"swagger": "2.0", "paths": {"/a": {"parameters": [{"in": "cookie"}]}}}))


def test_yaml_of_extensions_keeps_unicode_and_quotes():
    json_doc = orjson.dumps({"swagger": "2.0", "x-note": 'café: "x"\n'})
    assert vendor(decode(encode_document(json_doc)), 16) == {"x-note": 'café: "x"\n'}


@pytest.mark.parametrize("accept,expected", [
    ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", MEDIA_PB),
    (MEDIA_PB, MEDIA_PB),
    ("", MEDIA_JSON),
    ("*/*", MEDIA_JSON),
    ("application/json, */*", MEDIA_JSON),
    ("application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", MEDIA_PB),
    ("*/*, application/com.github.proto-openapi.spec.v2.v1.0+protobuf", MEDIA_PB),
    ("application/yaml", None),
    ("application/json;q=0", None),
])
def test_negotiate(accept, expected):
    assert negotiate(accept) == expected


def test_etag_is_the_quoted_upper_case_sha512_of_the_json():
    tag = openapi_proto.etag(b"{}")
    assert tag.startswith('"27C74670ADB75075') and tag.endswith('"') and len(tag) == 130
