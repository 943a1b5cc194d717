"""CustomResourceDefinitions in protobuf (apiextensions.k8s.io/v1's generated.proto): bytes built by
hand from the field numbers, including JSONSchemaProps' unions (JSON, OrArray, OrBool,
OrStringArray), whose JSON forms are no objects; and a real CRD (LeaderWorkerSet's, 600 KB of
schema) created as JSON, read back in protobuf and decoded to the JSON the server serves, then
created from protobuf."""

import struct
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml

from nanokube.apiserver import protobuf
from nanokube.apiserver import protobuf_encode as pe
from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_protobuf import lfield as s, vfield as v
from tests.apiserver.test_protobuf_encode import unknown
from tests.controllers import tries

PB = "application/vnd.kubernetes.protobuf"
CRD = Path(__file__).parents[1] / "fixtures" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
SCHEMA = protobuf.APIEXTENSIONS + "JSONSchemaProps"


def d(num: int, value: float) -> bytes:
    """A double field (wire type 1)."""
    return bytes([num << 3 | 1]) + struct.pack("<d", value)


def props(**fields: bytes) -> bytes:
    """A JSONSchemaProps message as go-to-protobuf writes it: its value fields always (zero or not),
    the others where given (`f<number>`), all in field-number order."""
    values = {1: s(1), 2: s(2), 4: s(4), 5: s(5), 6: s(6), 7: s(7), 10: v(10, 0), 12: v(12, 0), 15: s(15),
              18: v(18, 0), 37: v(37, 0), 39: v(39, 0), 40: v(40, 0)}
    values.update({int(k[1:]): b for k, b in fields.items()})
    return b"".join(values[n] for n in sorted(values))


def entry(key: str, value: bytes) -> bytes:
    return s(1, key) + s(2, value)


SCHEMA_JSON = {
    "type": "object",
    "required": ["n"],
    "properties": {
        "n": {"type": "integer", "maximum": 10, "minimum": 1.5, "default": 3, "enum": [1, None],
              "x-kubernetes-validations": [{"rule": "self > 0", "optionalOldSelf": False}]},
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False},
    },
    "additionalProperties": False,
    "dependencies": {"a": ["b", "c"], "d": {"type": "object"}},
    "x-kubernetes-preserve-unknown-fields": True,
}


def schema_wire() -> bytes:
    string, integer = props(f5=s(5, "string")), props(f5=s(5, "integer"))
    n = props(f5=s(5, "integer"), f8=s(8, s(1, "3")), f9=d(9, 10), f11=d(11, 1.5), f20=s(20, s(1, "1")) + s(20),
              f44=s(44, s(1, "self > 0") + s(2) + s(3) + s(5) + v(6, 0)))
    tags = props(f5=s(5, "array"), f24=s(24, s(1, string)), f42=s(42, "set"))
    pair = props(f5=s(5, "array"), f24=s(24, s(2, string) + s(2, integer)), f33=s(33, v(1, 0)))
    return props(f5=s(5, "object"), f23=s(23, "n"),
                 f29=s(29, entry("n", n)) + s(29, entry("pair", pair)) + s(29, entry("tags", tags)),
                 f30=s(30, v(1, 0)),
                 f32=s(32, entry("a", s(2, "b") + s(2, "c"))) + s(32, entry("d", s(1, props(f5=s(5, "object"))))),
                 f38=v(38, 1))


def test_a_schema_s_unions_by_hand():
    """Each union in the member its JSON form picks, a pointer (maximum, x-kubernetes-list-type,
    optionalOldSelf: false) when set, map entries sorted by key; and back to the same JSON."""
    wire = schema_wire()
    assert pe.message(SCHEMA_JSON, SCHEMA) == wire
    assert protobuf.decode_message(wire, SCHEMA) == SCHEMA_JSON
    # the other members: a schema that allows (its bool written true), a bool true, a list's one schema
    allowed = {"type": "object", "additionalProperties": {"type": "string"}}
    assert pe.message(allowed, SCHEMA) == props(f5=s(5, "object"), f30=s(30, v(1, 1) + s(2, props(f5=s(5, "string")))))
    for value in (allowed, {"additionalProperties": True}, {"items": [{"type": "string"}]}):
        assert protobuf.decode_message(pe.message(value, SCHEMA), SCHEMA) == value


def test_a_crd_by_hand():
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "ws.example.com", "creationTimestamp": None},
           "spec": {"group": "example.com", "names": {"plural": "ws", "kind": "W"}, "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": SCHEMA_JSON},
                                  "selectableFields": [{"jsonPath": ".spec.n"}]}]},
           "status": {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]}}
    meta = s(1, "ws.example.com") + s(2) + s(3) + s(4) + s(5) + s(6) + v(7, 0) + s(8)
    names = s(1, "ws") + s(2) + s(4, "W") + s(5)
    version = (s(1, "v1") + v(2, 1) + v(3, 1) + s(4, s(1, schema_wire())) + s(5, s(1)) + v(7, 0)
               + s(9, s(1, ".spec.n")))
    spec = s(1, "example.com") + s(3, names) + s(4, "Namespaced") + s(7, version) + v(10, 0)
    status = s(2, s(1) + s(2) + s(4) + s(5)) + s(3, "v1") + v(4, 0)
    wire = unknown("apiextensions.k8s.io/v1", "CustomResourceDefinition", s(1, meta) + s(2, spec) + s(3, status))
    assert pe.encode(crd) == wire
    assert protobuf.decode(wire) == crd


@pytest.fixture
async def server():
    srv = APIServer(MemoryStore(), None, port=0)
    await srv.start()
    yield srv
    await srv.stop()


async def test_a_real_crd_round_trips_json_protobuf_json(server):
    doc = yaml.safe_load(CRD.read_text())
    url = f"http://127.0.0.1:{server.port}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    name = doc["metadata"]["name"]
    async with aiohttp.ClientSession() as c:
        async with c.post(url, json=doc, headers={"Accept": PB}) as r:
            assert (r.status, r.content_type) == (201, PB)
        for _ in tries():  # established: no more status writes between the two reads
            async with c.get(f"{url}/{name}") as r:
                served = await r.json()
            conditions = (served.get("status") or {}).get("conditions") or []
            if any(x["type"] == "Established" and x["status"] == "True" for x in conditions):
                break
        else:
            raise AssertionError(f"never established: {served.get('status')}")
        async with c.get(f"{url}/{name}", headers={"Accept": PB}) as r:
            assert (r.status, r.content_type) == (200, PB)
            wire = await r.read()
        back = protobuf.decode(wire)
        assert orjson.dumps(back, option=orjson.OPT_SORT_KEYS) == orjson.dumps(served, option=orjson.OPT_SORT_KEYS)
        assert pe.encode(back) == wire
        # and a CRD sent in protobuf is created as its JSON is
        other = {**doc, "metadata": {"name": "lws2.leaderworkerset.x-k8s.io"},
                 "spec": {**doc["spec"], "names": {**doc["spec"]["names"], "plural": "lws2", "kind": "LWS2",
                                                   "listKind": "LWS2List", "singular": "lws2", "shortNames": []}}}
        async with c.post(url, data=pe.encode(other), headers={"Content-Type": PB}) as r:
            assert r.status == 201, await r.text()
            created = await r.json()
        assert created["spec"]["versions"] == served["spec"]["versions"]


async def test_a_schema_nested_deeper_than_a_body_may_be_is_a_400(server):
    """JSONSchemaProps nests itself a level in a few bytes: a CRD whose schema nests deeper than a JSON
    body may (serializer.MAX_DEPTH) is the same 400, at any depth (it was a 500: orjson's recursion limit
    in managedFields at 300 levels, Python's in the decoder at 5,000)."""
    url = f"http://127.0.0.1:{server.port}/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All"

    def crd(depth: int) -> bytes:
        schema = props(f5=s(5, "object"))
        for _ in range(depth):
            schema = props(f5=s(5, "object"), f29=s(29, entry("a", schema)))
        names = s(1, "deeps") + s(4, "Deep")
        version = s(1, "v1") + v(2, 1) + v(3, 1) + s(4, s(1, schema))
        spec = s(1, "example.com") + s(3, names) + s(4, "Namespaced") + s(7, version)
        return unknown("apiextensions.k8s.io/v1", "CustomResourceDefinition", s(1, s(1, "deeps.example.com")) + s(2, spec))

    async with aiohttp.ClientSession() as c:
        async with c.post(url, data=crd(10), headers={"Content-Type": PB}) as r:
            assert r.status == 201, await r.text()
        for depth in (60, 300, 5_000):
            async with c.post(url, data=crd(depth), headers={"Content-Type": PB}) as r:
                got = await r.json()
            assert (r.status, got["reason"]) == (400, "BadRequest"), got
            assert "nested deeper than 100 levels" in got["message"]
