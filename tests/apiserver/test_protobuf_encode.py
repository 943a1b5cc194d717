"""Kubernetes protobuf responses (application/vnd.kubernetes.protobuf): the encoder against bytes Go
wrote (kubectl's recorded request bodies) and bytes built by hand from the field numbers, every kind
the fuzzer seeds round-tripped through the API server, kubectl (a Go client) reading what the server
encodes, and lists, watches and errors read with a wire parser of the test's own."""

import asyncio
import os
import re
import struct
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from nanokube.apiserver import protobuf
from nanokube.apiserver import protobuf_encode as pe
from nanokube.apiserver.app import APIServer
from nanokube.machinery import gotime
from nanokube.store.memory import MemoryStore
from tests.e2e.fuzz_seeds import CREATE_ONLY, CSR_B64, KINDS, NAMES, WIDGETS
from tests.e2e.fuzzing import EDGE_TIMES, NS
from tests.apiserver.test_protobuf import lfield as s, vfield as v

FIXTURES = Path(__file__).parent / "fixtures" / "protobuf"
PB = "application/vnd.kubernetes.protobuf"
KUBECTLS = [k for k in (Path(__file__).parents[2] / ".venv" / "bin" / "kubectl", Path("/usr/bin/kubectl")) if k.exists()]


# --- a wire reader of the test's own (the writer is test_protobuf's) ------------------


def unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + s(1, s(1, api_version) + s(2, kind)) + s(2, raw) + s(3) + s(4)


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(number, value) of each field: an int for a varint, the bytes of a length-delimited one."""
    out, i = [], 0

    def read() -> int:
        nonlocal i
        n = shift = 0
        while True:
            b = buf[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return n

    while i < len(buf):
        key = read()
        if key & 7 == 0:
            out.append((key >> 3, read()))
        else:
            assert key & 7 == 2, key
            n = read()
            out.append((key >> 3, buf[i:i + n]))
            i += n
    return out


def unwrap(data: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw message) of a `k8s\\x00`-prefixed runtime.Unknown."""
    assert data[:4] == b"k8s\x00"
    f = fields(data[4:])
    assert [n for n, _ in f] == [1, 2, 3, 4] and f[2][1] == f[3][1] == b""  # no contentEncoding, contentType
    tm = dict(fields(f[0][1]))
    return tm[1].decode(), tm[2].decode(), f[1][1]


# --- the encoder against Go's own bytes --------------------------------------------


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.pb")))
def test_kubectl_recorded_bodies_reencode_byte_for_byte(name):
    """kubectl's typed clients wrote these with go-to-protobuf's marshallers: every value field,
    empty or zero, is on the wire, pointers only when set; the encoder writes the same bytes."""
    recorded = (FIXTURES / f"{name}.pb").read_bytes()
    assert pe.encode(protobuf.decode(recorded)) == recorded


def test_configmap_by_hand():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"b": "2", "a": "1"}},
          "data": {"k": "v"}, "binaryData": {"bin": "AAEC"}, "immutable": False}
    meta = (s(1, "x") + s(2) + s(3) + s(4) + s(5) + s(6) + v(7, 0) + s(8)
            + s(11, s(1, "a") + s(2, "1")) + s(11, s(1, "b") + s(2, "2")))  # labels sorted by key
    raw = s(1, meta) + s(2, s(1, "k") + s(2, "v")) + s(3, s(1, "bin") + s(2, b"\x00\x01\x02")) + v(4, 0)
    assert pe.encode(cm) == unknown("v1", "ConfigMap", raw)
    del cm["immutable"]  # a *bool: on the wire only when set
    assert pe.encode(cm) == unknown("v1", "ConfigMap", raw[:-2])


def test_lengths_and_numbers_at_the_varint_byte_boundaries():
    """The encoder's table of small varints against the test's own varints, either side of each byte boundary."""
    for n in (0, 1, 127, 128, 129, 255, 256, 300, 16383, 16384, 16385, 1 << 21):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "generation": n}, "data": {"k": "v" * n}}
        meta = s(1, "x") + s(2) + s(3) + s(4) + s(5) + s(6) + v(7, n) + s(8)
        assert pe.encode(cm) == unknown("v1", "ConfigMap", s(1, meta) + s(2, s(1, "k") + s(2, "v" * n))), n


def test_pod_with_a_quantity_and_a_time_by_hand():
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2023-11-14T22:13:20Z"},
           "spec": {"containers": [{"name": "c", "image": "img", "resources": {"limits": {"cpu": "250m"}}}],
                    "terminationGracePeriodSeconds": 0}}
    meta = s(1, "p") + s(2) + s(3, "default") + s(4) + s(5) + s(6) + v(7, 0) + s(8, v(1, 1_700_000_000) + v(2, 0))
    container = (s(1, "c") + s(2, "img") + s(5) + s(8, s(1, s(1, "cpu") + s(2, s(1, "250m"))))
                 + s(13) + s(14) + v(16, 0) + v(17, 0) + v(18, 0) + s(20))
    spec = (s(2, container) + s(3) + v(4, 0) + s(6) + s(8) + s(9) + s(10) + v(11, 0) + v(12, 0) + v(13, 0)
            + s(16) + s(17) + s(19) + s(24))
    status = s(1) + s(3) + s(4) + s(5) + s(6) + s(9) + s(11) + s(14) + v(17, 0)
    assert pe.encode(pod) == unknown("v1", "Pod", s(1, meta) + s(2, spec) + s(3, status))


def test_special_messages():
    micro = pe.message("2024-01-02T03:04:05.678901Z", protobuf.META + "MicroTime")
    assert micro == v(1, 1_704_164_645) + v(2, 678_901_000)
    assert pe.message("2024-01-02T03:04:05Z", protobuf.META + "Time") == v(1, 1_704_164_645) + v(2, 0)
    assert pe.message(None, protobuf.META + "Time") == b"" == pe.message("0001-01-01T00:00:00Z", protobuf.META + "Time")
    assert pe.message("1969-12-31T23:59:59Z", protobuf.META + "Time") == v(1, -1) + v(2, 0)  # ten bytes
    assert pe.message("1h30m", protobuf.META + "Duration") == v(1, 5_400_000_000_000)
    intstr = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
    assert pe.message("25%", intstr) == v(1, 1) + v(2, 0) + s(3, "25%")
    assert pe.message(-3, intstr) == v(1, 0) + v(2, -3) + s(3)
    assert pe.message({"a": [1]}, "k8s.io.apimachinery.pkg.runtime.RawExtension") == s(1, b'{"a":[1]}')
    verbs = pe.message(["get", None], protobuf.META + "Verbs")  # a named slice: a message of its items
    assert verbs == s(1, "get") + s(1, "")  # a null item is the zero encoding/json makes of it


@pytest.mark.parametrize("kind", ["Time", "MicroTime"])
def test_times_go_reads_round_trip(kind):
    """The first and last years Go's RFC 3339 parser reads (year 0 too, which datetime cannot
    hold), offsets, and around the epoch: the same instant comes back, in UTC."""
    name = protobuf.META + kind
    for text in EDGE_TIMES:
        back = protobuf.decode_message(pe.message(text, name), name)
        want = gotime.parse_rfc3339(text if kind == "MicroTime" else re.sub(r"\.[0-9]+", "", text))  # Time: whole seconds
        if back is None:  # Go's zero time is no timestamp
            assert want == -62135596800, text
            continue
        assert abs(gotime.parse_rfc3339(back) - want) < 1e-5, (text, back)


def test_status_and_unknown_kinds():
    status = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": "m",
              "reason": "NotFound", "details": {"name": "x", "kind": "pods"}, "code": 404}
    assert protobuf.decode(pe.encode(status)) == status
    with pytest.raises(pe.NotMarshalable):
        pe.encode({"apiVersion": "example.com/v1", "kind": "Widget"})
    with pytest.raises(pe.NotMarshalable):  # cells are interface{}: go-to-protobuf generates no Table
        pe.encode({"apiVersion": "meta.k8s.io/v1", "kind": "Table"})


def test_watch_event_frame():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    frame = pe.watch_event("ADDED", cm)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    event = fields(frame[4:])  # meta.v1.WatchEvent itself, not wrapped (the raw stream serializer)
    assert [n for n, _ in event] == [1, 2] and event[0][1] == b"ADDED"
    assert fields(event[1][1]) == [(1, pe.encode(cm))]  # RawExtension{raw}: the wrapped object


#: a non-zero value of each scalar and hand-marshalled message
SAMPLES = {"string": "s", "bool": True, "int32": -7, "int64": 1 << 40, "uint32": 7, "uint64": 1 << 40, "float": 0.5,
           "double": 0.25, "bytes": "AAEC", protobuf.META + "Time": "2024-01-02T03:04:05Z",
           protobuf.META + "MicroTime": "2024-01-02T03:04:05.123456Z", protobuf.META + "Duration": "1h2m3s",
           protobuf.META + "FieldsV1": {"f:a": {}}, "k8s.io.apimachinery.pkg.runtime.RawExtension": {"kind": "X", "a": [1, "b"]},
           "k8s.io.apimachinery.pkg.api.resource.Quantity": "250m", "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "25%",
           protobuf.APIEXTENSIONS + "JSON": {"a": [1, "b", None]},
           protobuf.APIEXTENSIONS + "JSONSchemaPropsOrArray": [{"type": "string"}, {"type": "integer"}],
           protobuf.APIEXTENSIONS + "JSONSchemaPropsOrBool": {"type": "string"},
           protobuf.APIEXTENSIONS + "JSONSchemaPropsOrStringArray": ["a", "b"]}


def _sample(name: str, path: tuple = ()):
    """Message `name` with every field set (two items of a repeated field, two keys of a map), six
    levels deep; a deeper value struct is left out (so its zero is written)."""
    if name in SAMPLES:
        return SAMPLES[name]
    if len(path) > 6 or name in path:
        return None
    out = {}
    for jname, ftype, flags in protobuf.TABLE[name].values():
        value = _sample(ftype, (*path, name))
        if value is not None and flags == "i":
            out.update(value)
        elif value is not None:
            out[jname] = [value, value] if flags == "r" else {"k2": value, "k1": value} if flags == "m" else value
    return out.get("items") if name in protobuf.ARRAY_WRAPPERS else out or None


def test_every_message_with_every_field_set_round_trips():
    checked = 0
    for name in protobuf.TABLE:
        obj = None if name in SAMPLES else _sample(name)
        if obj is None:
            continue
        raw = pe.message(obj, name)
        back = protobuf.decode_message(raw, name)
        assert _agrees(back, obj) == [], name
        assert pe.message(back, name) == raw, name
        checked += 1
    assert checked > 1200


# --- every seeded kind through the API server --------------------------------------


def _agrees(pb, js, path="") -> list[str]:
    """Where the protobuf form differs from the JSON form beyond Go's zero values (the fields json's
    omitempty leaves out, and those without it the JSON form lacks)."""
    if isinstance(js, dict) and isinstance(pb, dict):
        out = []
        for k in js.keys() | pb.keys():
            if k not in pb:
                if not _zero(js[k]):
                    out.append(f"{path}.{k}: missing")
            elif k not in js:
                if not _zero(pb[k]):
                    out.append(f"{path}.{k}: extra {pb[k]!r}")
            else:
                out += _agrees(pb[k], js[k], f"{path}.{k}")
        return out
    if isinstance(js, list) and isinstance(pb, list) and len(js) == len(pb):
        return [d for i, (a, b) in enumerate(zip(pb, js)) for d in _agrees(a, b, f"{path}[{i}]")]
    return [] if pb == js else [f"{path}: {pb!r} != {js!r}"]


def _zero(x) -> bool:
    return x in (None, 0, "", False, [], {}) or isinstance(x, dict) and all(map(_zero, x.values()))


@pytest.fixture
async def server():
    srv = APIServer(MemoryStore(), None, port=0)
    await srv.start()
    yield srv
    await srv.stop()


def _path(gv: str, plural: str, namespaced: bool) -> str:
    return f"/{gv}/namespaces/{NS}/{plural}" if namespaced else f"/{gv}/{plural}"


async def test_every_seeded_kind_round_trips(server):
    """Each kind the fuzzer seeds, created as JSON and read back in protobuf: what protobuf carries
    decodes to the JSON the server serves (Go's zero values aside), and encodes again to the same bytes."""
    base = f"http://127.0.0.1:{server.port}"
    compared, unmarshalable = [], []
    async with aiohttp.ClientSession() as c:
        async with c.post(f"{base}/api/v1/namespaces", json={"metadata": {"name": NS}}) as r:
            assert r.status == 201
        for gv, plural, kind, spec in KINDS:
            res = server.index.get(*(["", "v1"] if gv == "api/v1" else gv.split("/")[1:]), plural)
            if plural in CREATE_ONLY or res is None or not res.strategy.strategic_merge:
                continue
            name = NAMES.get(f"{res.group}/{plural}", NAMES.get(plural, ("seed",)))[0]
            obj = {"apiVersion": gv.removeprefix("apis/").removeprefix("api/"), "kind": kind, "metadata": {"name": name}, **spec}
            url = base + _path(gv, plural, res.namespaced)
            async with c.post(url, json=obj, headers={"Accept": PB}) as r:
                created = await r.read()
                if r.status == 406:  # a kind outside k8s.io/api (kubectl's scheme): no message to write
                    unmarshalable.append(kind)
                    continue
                assert r.status == 201, (kind, created[:300])
            for _ in range(50):  # the same version twice (a CRD's status is written as it is established)
                async with c.get(f"{url}/{name}") as r:
                    js = await r.json()
                async with c.get(f"{url}/{name}", headers={"Accept": PB}) as r:
                    body = await r.read()
                got = protobuf.decode(body)
                if got["metadata"]["resourceVersion"] == js["metadata"]["resourceVersion"]:
                    break
            assert created[:4] == body[:4] == b"k8s\x00", kind
            assert _agrees(got, js) == [], kind
            assert pe.encode(got) == body, kind
            compared.append(kind)
    assert len(compared) >= 60 and "CustomResourceDefinition" in compared, compared
    assert unmarshalable == [], unmarshalable


APISERVICE = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.example.com"},
              "spec": {"service": {"namespace": "ns", "name": "svc", "port": 8443}, "group": "example.com",
                       "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15}}


def test_apiservice_by_hand():
    """kube-aggregator's APIService, whose types kubectl does not carry: the numbers of its struct tags
    (APIServiceSpec's 6 is retired), a value scalar always written, a pointer (the port) when set."""
    meta = s(1, "v1.example.com") + s(2) + s(3) + s(4) + s(5) + s(6) + v(7, 0) + s(8)
    spec = s(1, s(1, "ns") + s(2, "svc") + v(3, 8443)) + s(2, "example.com") + s(3, "v1") + v(4, 0) + v(7, 1000) + v(8, 15)
    status = s(1, s(1, "Available") + s(2, "True") + s(3, v(1, 1_700_000_000) + v(2, 0)) + s(4, "Passed") + s(5))
    obj = {**APISERVICE, "status": {"conditions": [{"type": "Available", "status": "True",
                                                    "lastTransitionTime": "2023-11-14T22:13:20Z", "reason": "Passed"}]}}
    wire = unknown("apiregistration.k8s.io/v1", "APIService", s(1, meta) + s(2, spec) + s(3, status))
    assert pe.encode(obj) == wire
    assert protobuf.decode(wire) == {**obj, "metadata": {"name": "v1.example.com", "creationTimestamp": None}}


async def test_apiservices_and_crds_are_protobuf(server):
    """The aggregator's APIService and apiextensions' CustomResourceDefinition, whose types kubectl's
    scheme (the generated table) lacks, are served in protobuf as kube-apiserver serves them: created,
    read, their status and their lists, what protobuf carries decoding to the JSON served."""
    base = f"http://127.0.0.1:{server.port}"
    async with aiohttp.ClientSession() as c:
        for url, name, body in ((f"{base}/apis/apiregistration.k8s.io/v1/apiservices", "v1.example.com", APISERVICE),
                                (f"{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                 WIDGETS["metadata"]["name"], WIDGETS)):
            async with c.post(url, json=body, headers={"Accept": PB}) as r:
                assert (r.status, r.content_type) == (201, PB)
                created = protobuf.decode(await r.read())
            async with c.get(f"{url}/{name}") as r:
                js = await r.json()
            assert created["metadata"]["uid"] == js["metadata"]["uid"]
            assert _agrees(created["spec"], js["spec"]) == []
            for path in (f"{url}/{name}", f"{url}/{name}/status"):
                async with c.get(path, headers={"Accept": PB}) as r:
                    assert (r.status, r.content_type) == (200, PB)
                    assert protobuf.decode(await r.read())["metadata"]["name"] == name
            async with c.get(url, headers={"Accept": PB}) as r:
                listed = protobuf.decode(await r.read())
            assert listed["kind"] == body["kind"] + "List" and name in [i["metadata"]["name"] for i in listed["items"]]


# --- lists, watches and errors on the wire -------------------------------------------


async def _frames(r: aiohttp.ClientResponse, done) -> list[dict]:
    """The watch events of `r` (each frame's fields), read as they arrive until `done(events)` holds
    or the stream ends: a watch's timeoutSeconds is then only a ceiling, not a wait the events race."""
    events: list[dict] = []
    try:
        while not done(events):
            (n,) = struct.unpack(">I", await r.content.readexactly(4))
            events.append(dict(fields(await r.content.readexactly(n))))
    except asyncio.IncompleteReadError:  # the stream ended
        pass
    return events


async def test_list_watch_and_errors_on_the_wire(server):
    base = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as c:
        for n in ("a", "b"):
            async with c.post(base, json={"metadata": {"name": n}, "data": {"k": n}}) as r:
                assert r.status == 201
        async with c.get(base, headers={"Accept": f"{PB}, application/json"}) as r:
            assert (r.status, r.headers["Content-Type"]) == (200, PB)
            av, kind, raw = unwrap(await r.read())
        assert (av, kind) == ("v1", "ConfigMapList")
        listed = fields(raw)
        assert [n for n, _ in listed] == [1, 2, 2]  # ListMeta, then each item
        names = [dict(fields(dict(fields(item))[1]))[1] for _, item in listed[1:]]
        assert names == [b"a", b"b"]
        rv = dict(fields(listed[0][1]))[2].decode()

        watch = f"{base}?watch=1&resourceVersion={rv}&timeoutSeconds=30&allowWatchBookmarks=true"
        async with c.get(watch, headers={"Accept": f"{PB};stream=watch"}) as r:
            assert r.headers["Content-Type"] == f"{PB};stream=watch"
            await c.put(f"{base}/a", json={"metadata": {"name": "a"}, "data": {"k": "changed"}})
            frames = await _frames(r, lambda events: any(e[1] == b"MODIFIED" for e in events))
        modified = [f for f in frames if f[1] == b"MODIFIED"]
        assert len(modified) == 1 and {f[1] for f in frames} <= {b"MODIFIED", b"BOOKMARK"}, frames
        obj = protobuf.decode(dict(fields(modified[0][2]))[1])
        assert (obj["kind"], obj["metadata"]["name"], obj["data"]) == ("ConfigMap", "a", {"k": "changed"})

        async with c.get(f"{base}/nope", headers={"Accept": PB}) as r:
            assert (r.status, r.content_type) == (404, PB)
            status = protobuf.decode(await r.read())
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)

        partial = f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        async with c.get(base, headers={"Accept": partial}) as r:
            got = protobuf.decode(await r.read())
        assert got["kind"] == "PartialObjectMetadataList" and [i["metadata"]["name"] for i in got["items"]] == ["a", "b"]

        # client-go 1.37's informers stream their list (WatchListClient): the objects, then a bookmark
        # that marks the initial events' end
        watchlist = f"{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=30"
        async with c.get(watchlist, headers={"Accept": f"{PB}, application/json"}) as r:
            frames = await _frames(r, lambda events: any(e[1] == b"BOOKMARK" for e in events))
        events = [(f[1].decode(), protobuf.decode(dict(fields(f[2]))[1])) for f in frames]
        assert [(t, o["metadata"].get("name")) for t, o in events] == [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None)]
        assert events[-1][1]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}

        # a metadata informer's watch (the garbage collector's, the namespace controller's)
        async with c.get(f"{base}?watch=1&resourceVersion=0&timeoutSeconds=30", headers={"Accept": partial}) as r:
            assert r.headers["Content-Type"] == f"{PB};stream=watch"
            frames = await _frames(r, len)
        added = protobuf.decode(dict(fields(frames[0][2]))[1])
        assert (added["apiVersion"], added["kind"]) == ("meta.k8s.io/v1", "PartialObjectMetadata") and "data" not in added

        table = f"{PB};as=Table;g=meta.k8s.io;v=v1"  # a Table is JSON or YAML only
        async with c.get(base, headers={"Accept": table}) as r:
            assert (r.status, r.content_type) == (406, "application/json")
        async with c.get(base, headers={"Accept": f"{table}, application/json;as=Table;g=meta.k8s.io;v=v1"}) as r:
            assert (r.status, (await r.json())["kind"]) == (200, "Table")


async def test_a_long_list_is_the_served_json_in_protobuf(server):
    """A list of more than a hundred items is encoded off the loop: the same list as the JSON one."""
    base = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as c:
        for i in range(150):
            async with c.post(base, json={"metadata": {"name": f"c{i:03}", "labels": {"n": str(i)}}, "data": {"i": str(i)}}) as r:
                assert r.status == 201
        async with c.get(base) as r:
            js = await r.json()
        async with c.get(base, headers={"Accept": PB}) as r:
            body = await r.read()
    got = protobuf.decode(body)
    assert len(got["items"]) == 150 and got["metadata"]["resourceVersion"] == js["metadata"]["resourceVersion"]
    items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in js["items"]]
    assert _agrees(got["items"], items) == []  # (a protobuf item has no TypeMeta)
    assert pe.encode(got) == body


async def test_custom_resources_are_not_protobuf(server):
    """Unstructured objects have no protobuf encoding: a protobuf clause is passed over for the next
    (JSON), and is errNotMarshalable's 406 (a protobuf Status) where none follows, before anything is
    written; PartialObjectMetadata of them is protobuf."""
    base = f"http://127.0.0.1:{server.port}"
    async with aiohttp.ClientSession() as c:
        async with c.post(f"{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=WIDGETS) as r:
            assert r.status == 201, await r.text()
        group, version = WIDGETS["spec"]["group"], WIDGETS["spec"]["versions"][0]["name"]
        plural, kind = WIDGETS["spec"]["names"]["plural"], WIDGETS["spec"]["names"]["kind"]
        scoped = "/namespaces/default" if WIDGETS["spec"]["scope"] == "Namespaced" else ""
        url = f"{base}/apis/{group}/{version}{scoped}/{plural}"
        for _ in range(100):
            async with c.get(url) as r:
                if r.status == 200:
                    break
            await asyncio.sleep(0.05)
        widget = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "w"}, "spec": {"size": "m", "replicas": 2}}
        async with c.post(url, json=widget, headers={"Accept": PB}) as r:
            assert (r.status, r.content_type) == (406, PB)
            status = protobuf.decode(await r.read())
        assert status["message"] == ("object *unstructured.Unstructured does not implement the protobuf marshalling "
                                     "interface and cannot be encoded to a protobuf message")
        async with c.get(f"{url}/w") as r:
            assert r.status == 404  # refused before the write
        async with c.post(url, json=widget, headers={"Accept": f"{PB}, application/json"}) as r:
            assert (r.status, r.content_type) == (201, "application/json")
        async with c.get(url, headers={"Accept": PB}) as r:
            assert r.status == 406
            assert "*unstructured.UnstructuredList" in protobuf.decode(await r.read())["message"]
        async with c.get(f"{url}/w", headers={"Accept": f"{PB};as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}) as r:
            assert r.content_type == PB
            assert protobuf.decode(await r.read())["metadata"]["name"] == "w"
        partial_list = f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"  # the garbage collector's list
        async with c.get(url, headers={"Accept": partial_list}) as r:
            assert [i["metadata"]["name"] for i in protobuf.decode(await r.read())["items"]] == ["w"]
        async with c.get(f"{url}/w/scale", headers={"Accept": PB}) as r:  # an autoscaling/v1 Scale: typed
            assert (r.status, r.content_type) == (200, PB)
            scale = protobuf.decode(await r.read())
        assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 2)
        async with c.get(f"{url}/w/status", headers={"Accept": PB}) as r:
            assert r.status == 406


# --- a Go client: kubectl's typed create reads the server's protobuf -----------------


@pytest.mark.parametrize("kubectl", KUBECTLS, ids=lambda k: str(k))
async def test_kubectl_reads_protobuf_answers(server, kubectl, tmp_path):
    """`kubectl create <generator> -o json` posts with a typed client (Accept: protobuf, then JSON),
    so what it prints is the server's protobuf answer as Go decoded it; it is the object the server
    serves as JSON."""
    cfg = tmp_path / "kubeconfig"
    cfg.write_text("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                   f"clusters: [{{name: t, cluster: {{server: 'http://127.0.0.1:{server.port}'}}}}]\n"
                   "contexts: [{name: t, context: {cluster: t, user: u, namespace: default}}]\nusers: [{name: u, user: {}}]\n")
    env = dict(os.environ, KUBECONFIG=str(cfg), HOME=str(tmp_path))
    core, ns = "/api/v1/namespaces/default", "namespaces/default"
    creates = [(f"{core}/configmaps/cm", ["configmap", "cm", "--from-literal=a=b"]),
               (f"/apis/apps/v1/{ns}/deployments/d", ["deployment", "d", "--image=nginx", "--replicas=2", "--port=80"]),
               (f"{core}/services/s", ["service", "clusterip", "s", "--tcp=80:8080"]),
               (f"/apis/batch/v1/{ns}/cronjobs/cj", ["cronjob", "cj", "--image=busybox", "--schedule=*/5 * * * *"]),
               (f"/apis/policy/v1/{ns}/poddisruptionbudgets/pdb", ["pdb", "pdb", "--selector=a=b", "--min-available=50%"]),
               ("/apis/scheduling.k8s.io/v1/priorityclasses/pc", ["priorityclass", "pc", "--value=7"]),
               (f"{core}/resourcequotas/q", ["quota", "q", "--hard=cpu=1500m,pods=3"]),
               (f"{core}/secrets/sec", ["secret", "generic", "sec", "--from-literal=k=v"])]
    async with aiohttp.ClientSession() as c:
        for path, args in creates:
            proc = await asyncio.create_subprocess_exec(
                str(kubectl), "--cache-dir", str(tmp_path / "cache"), "create", *args, "-o", "json", "-v=8", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            # the request's and the answer's headers, as -v=8 logs them
            assert err.decode().count(f"Content-Type: {PB}") == 2, err.decode()
            printed = orjson.loads(out)
            async with c.get(f"http://127.0.0.1:{server.port}{path}") as r:
                served = await r.json()
            served["metadata"].pop("managedFields")  # kubectl does not print them
            assert printed["metadata"]["uid"] == served["metadata"]["uid"]
            assert _agrees(printed, served) == [], path


@pytest.mark.parametrize("kubectl", KUBECTLS, ids=lambda k: str(k))
async def test_kubectl_lists_and_reads_in_protobuf(server, kubectl, tmp_path):
    """kubectl's typed reads ask for protobuf first: `describe` (a Deployment, its ReplicaSets and
    Events), `events`, `drain` (every pod, then evictions) and `auth can-i` (a review's answer)
    print what they decoded from the server's protobuf."""
    cfg = tmp_path / "kubeconfig"
    cfg.write_text("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                   f"clusters: [{{name: t, cluster: {{server: 'http://127.0.0.1:{server.port}'}}}}]\n"
                   "contexts: [{name: t, context: {cluster: t, user: u, namespace: default}}]\nusers: [{name: u, user: {}}]\n")
    env = dict(os.environ, KUBECONFIG=str(cfg), HOME=str(tmp_path))
    base = f"http://127.0.0.1:{server.port}"
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
    async with aiohttp.ClientSession() as c:
        deployment = {"metadata": {"name": "d"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}}, "template": template}}
        async with c.post(f"{base}/apis/apps/v1/namespaces/default/deployments", json=deployment) as r:
            uid = (await r.json())["metadata"]["uid"]
        for path, obj in [
                ("/api/v1/namespaces/default/events",
                 {"metadata": {"name": "d.1"}, "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "d", "uid": uid},
                  "reason": "ScalingReplicaSet", "message": "Scaled up replica set d-1 to 3", "type": "Normal",
                  "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:05Z", "count": 1}),
                ("/api/v1/nodes", {"metadata": {"name": "n1"}}),
                ("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", **template["spec"]}})]:
            async with c.post(base + path, json=obj) as r:
                assert r.status == 201, await r.text()

    async def kubectl_(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            str(kubectl), "--cache-dir", str(tmp_path / "cache"), *args, "-v=8", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert f"Content-Type: {PB}" in err.decode()  # an answer's header: these GETs send no body
        return out.decode()

    described = await kubectl_("describe", "deployment", "d")
    assert "3 desired" in described and "nginx:1.27" in described
    assert "25% max unavailable, 25% max surge" in described  # IntOrString strings, defaulted by the server
    assert "Scaled up replica set d-1 to 3" in described
    assert "Scaled up replica set d-1 to 3" in await kubectl_("events")
    assert "evicting pod default/p (server dry run)" in await kubectl_("drain", "n1", "--force", "--dry-run=server")
    assert (await kubectl_("auth", "can-i", "get", "pods")).strip() == "yes"


@pytest.mark.parametrize("kubectl", KUBECTLS, ids=lambda k: str(k))
async def test_kubectl_certificate_approve_body_reencodes_byte_for_byte(server, kubectl, tmp_path):
    """`kubectl certificate approve` reads the CSR in protobuf and PUTs it back with Go's encoder
    and an Approved condition stamped now: a whole served object (metadata, []byte request,
    managedFields) and a set Time, as Go writes them. The encoder writes the same bytes."""
    bodies: list[bytes] = []

    async def forward(request: web.Request) -> web.Response:
        data = await request.read()
        if request.content_type == PB:
            bodies.append(data)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        async with aiohttp.ClientSession(auto_decompress=False) as c, c.request(
                request.method, f"http://127.0.0.1:{server.port}{request.path_qs}", data=data, headers=headers) as r:
            return web.Response(body=await r.read(), status=r.status, headers={"Content-Type": r.headers["Content-Type"]})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        csr = {"metadata": {"name": "csr"}, "spec": {"request": CSR_B64, "signerName": "example.com/x", "usages": ["client auth"]}}
        async with aiohttp.ClientSession() as c, c.post(
                f"http://127.0.0.1:{server.port}/apis/certificates.k8s.io/v1/certificatesigningrequests", json=csr) as r:
            assert r.status == 201
        cfg = tmp_path / "kubeconfig"
        cfg.write_text("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                       f"clusters: [{{name: t, cluster: {{server: 'http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}'}}}}]\n"
                       "contexts: [{name: t, context: {cluster: t, user: u}}]\nusers: [{name: u, user: {}}]\n")
        proc = await asyncio.create_subprocess_exec(
            str(kubectl), "--cache-dir", str(tmp_path / "cache"), "certificate", "approve", "csr",
            env=dict(os.environ, KUBECONFIG=str(cfg), HOME=str(tmp_path)), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        assert proc.returncode == 0, out.decode()
    finally:
        await runner.cleanup()
    [body] = bodies
    approved = protobuf.decode(body)
    [condition] = approved["status"]["conditions"]
    assert condition["type"] == "Approved" and condition["lastUpdateTime"].endswith("Z")
    assert approved["metadata"]["managedFields"] and approved["spec"]["request"] == CSR_B64
    assert pe.encode(approved) == body
