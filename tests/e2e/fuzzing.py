"""Schema-driven fuzzing of a running API server, shared by the bounded test
(tests/e2e/test_fuzz.py) and the long run (scripts/fuzz.py).

Hypothesis draws a request: a kind, its valid seed object (tests/e2e/fuzz_seeds.py:
built-in kinds and custom resources of installed CRDs), a mutation at a
path of the seed (a null, a value of another type, a hostile string or
number, a deep nesting, a removed or unknown field, an expensive CEL
expression where the seed has one, or a value generated from the kind's
OpenAPI v3 schema as the server serves it), and a verb (create, update,
merge/strategic/JSON patch, server-side apply) with hostile query
parameters; or, beside those, a dry-run write through /scale or a pod's or
service account's subresource, a watch with hostile options (read up to its
headers, then dropped; half of them watch-lists), a create in another body encoding (YAML, broken JSON,
protobuf, unknown media types) or a read with another Accept header. Also: huge valid label
selectors (in a list's query and in a body's selector), patches nested past any depth limit,
applies of /status, and custom resources of a CRD of odd schemas and CEL rules (fuzz_seeds.ODDITIES).
Also: strategic merge patches of odd directives ($patch, $retainKeys, $setElementOrder/,
$deleteFromPrimitiveList/ with wrong types, nulls in lists), lists continued with tampered tokens (each a
400), requests with hostile headers (impersonation, header bytes that are not UTF-8, a Content-Encoding the
body does not have), bodies of YAML alias bombs, huge numbers, strings that are not UTF-8 and protobuf
garbage, and a CertificateSigningRequest's /approval and /status.
Also: an Accept of a Table, PartialObjectMetadata(List) or a form none serves on every verb (reads, dry-run
writes and deletes, DeleteCollection, watches, /status, /scale); DeleteOptions of odd shapes (preconditions
set to "" or of the wrong type, propagationPolicy and gracePeriodSeconds out of range, another kind);
dryRun and fieldValidation values upstream refuses; a real first page's continue token read again with other
selectors, resourceVersion(Match), watch or sendInitialEvents, or at another kind's path; the seed's path with a
doubled slash, a trailing slash, dot or %2F, or a unicode, NUL or overlong name; bodies nested past any limit,
over the size limit, 100,000 keys wide, protobuf garbage or YAML alias bombs through every subresource;
bodies that repeat a key (updates, patches, applies, /scale, subresources) under each fieldValidation; a bound
pod deleted or evicted with a grace period of any size; times of year 0000 and 9999 written for real into
the date-time fields of a kind's spec and status (what its controllers then read).
`Fuzzer.check` sends it and asserts the server's contract:

- no 5xx but upstream's one 504 for a read at a resourceVersion the server has not reached
  ("Too large resource version", after the watch cache's wait), and no answer slower than `SLOW` seconds (nor the probe's, which
  runs an accepted change's expressions: an admission policy's, a CRD's rules):
  a hang or a blocked loop, generous enough for a loaded machine;
- every 4xx is a `metav1.Status` with that code;
- a refused write changes nothing (the target's stored state is as before);
- an accepted object re-validates (the stored object PUT back with dryRun=All is accepted; a custom
  resource also as a new object, which no ratcheting spares);
- what upstream answers whatever the object (`Fuzzer._oracles`): a doubled slash is a 404; a dryRun other
  than All, a list's sendInitialEvents, a delete's unmet precondition, a continue token beside a
  resourceVersion other than 0, an update whose body names no object, a Binding, Eviction or TokenRequest
  naming another object or namespace than its URL and, under Strict, a body that repeats a key are refused;
  a 2xx asked for as a Table or PartialObjectMetadata(List) is one, and PartialObjectMetadata of a list or
  PartialObjectMetadataList of one object is a 406.
"""

from __future__ import annotations

import base64
import collections
import copy
import functools
import http.client
import json
import time
from typing import Any
from urllib.parse import quote, urlencode

import yaml
from hypothesis import strategies as st

from nanokube.apiserver import protobuf

from .fuzz_seeds import CLUSTER_SCOPED, CREATE_ONLY, CSR_B64, KINDS, NAMES, PROBE, crds
from .test_hardening import Raw

NS = "fuzz"
MANAGER = "nanokube-fuzz"  # the field manager of the fuzzer's writes (from its User-Agent)
SLOW = 20.0
#: how long a connection waits for an answer (the `Raw` the fuzzer is given should wait as long): past `SLOW`,
#: so a slow answer is reported with its time
NO_ANSWER = 30.0
REF = "#/components/schemas/"

HOSTILE_STRINGS = ["", " ", "\n", "a\n", "A", "\u212a", "\x00", "\u202e", "é", "a" * 64, "a" * 254, "x" * 70_000,
                   "../..", "a/b", "-", "1abc", "a.b", "*", "null", "true", "0", "-1", "1e9999999999", "1e100000",
                   "1Ki\n", "0.0000000001", "9Ei", "2024-13-45T99:99:99Z", "${x}", "{{x}}", "'", '"', "\\", "%0A"]
HOSTILE_NUMBERS = [0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**53, 2**63 - 1, -(2**63), 1.5, -0.0, 1e308]
HOSTILE_VALUES = [None, True, False, [], {}, [None], {"a": None}, [[]], {"": ""}, [1, "a", None]]
#: label and field selectors a list may be asked with: each is read as upstream's parsers read them (a 400 for
#: what they refuse, in time linear in its length)
HOSTILE_SELECTORS = ["a" * 100_000, "a in (" + ",".join(["x"] * 20_000) + ")", "(" * 1000, "a!=b!=c", "!!!!a", "a in ()",
                     "x/y/z", "a=" + "b" * 64, "a>5", "a>x", "a<-1", ",", "a=b,", "a==b==c", "\x00", "é=é", "a," * 5000,
                     "in in (notin)", "a in (b,,c)", "a notin (", "a=(b)", "metadata.name=x", "metadata.name==x,metadata.namespace!=y",
                     "spec.nodeName=" + "x" * 100_000, "metadata.name", "metadata.name=a\\,b", "=", "metadata.name=x=y",
                     ",,,", "status.phase=Running", "metadata.name in (x)", "metadata.name=" + "\\" * 5000,
                     # valid and huge: many requirements, a long set, many negations
                     ",".join(f"k{i}=v{i}" for i in range(10_000)), "k in (" + ",".join(f"v{i}" for i in range(20_000)) + ")",
                     ",".join(f"!k{i}" for i in range(10_000)), ",".join(f"k{i} notin (a,b)" for i in range(5_000))]
#: those of them labels.Parse refuses (a key or value that is no label's, a syntax error): a label selector's 400
INVALID_LABEL_SELECTORS = frozenset(
    ["a" * 100_000, "(" * 1000, "a!=b!=c", "!!!!a", "x/y/z", "a=" + "b" * 64, "a>x", "a<-1", ",", "a=b,", "a==b==c",
     "\x00", "é=é", "a," * 5000, "a notin (", "a=(b)", "spec.nodeName=" + "x" * 100_000, "metadata.name=a\\,b", "=",
     "metadata.name=x=y", ",,,", "metadata.name=" + "\\" * 5000])
#: JSON patches whose copies double the object each time (the copy size limit must stop them)
COPY_BOMBS = [
    [{"op": "add", "path": "/metadata/annotations", "value": {}}]
    + [{"op": "copy", "from": "/metadata", "path": f"/metadata/annotations/x{i}"} for i in range(26)],
    [{"op": "copy", "from": "", "path": f"/metadata/labels/x{i}"} for i in range(26)],
]
#: a strategic merge patch of long lists with their order (dry run: 20,000 finalizers are not kept): linear time
LONG_LISTS = {"metadata": {"$setElementOrder/finalizers": [f"example.com/f{i}" for i in range(20_000)],
                           "finalizers": [f"example.com/f{i}" for i in range(20_000)],
                           "$deleteFromPrimitiveList/finalizers": [f"example.com/g{i}" for i in range(20_000)]}}


@functools.cache
def _huge_body(shape: str) -> str:
    """A body past the 3 MiB a body may be (a 413), or one of 100,000 annotations: built once a run, as each is
    drawn a few dozen times and costs a second to build."""
    if shape == "huge":
        return '{"metadata": {"annotations": {"a": "' + "x" * (3 * 1024 * 1024) + '"}}}'
    return json.dumps({"metadata": {"annotations": {f"k{i}": "v" for i in range(100_000)}}})


#: label selectors in a body (where the seed has one): many expressions of many values, many labels
HUGE_SELECTORS = [
    {"matchExpressions": [{"key": f"k{i}", "operator": "In", "values": [f"v{j}" for j in range(100)]} for i in range(100)]},
    {"matchLabels": {f"k{i}": "v" for i in range(5_000)}},
    {"matchExpressions": [{"key": "k", "operator": "Exists"}] * 10_000},
]
#: bodies nested as deep as a patch may be sent (written out: json.dumps recurses), by depth
DEEP_BODIES = {
    "json": lambda d: '[{"op": "add", "path": "/metadata/annotations", "value": ' + '{"a":' * d + "1" + "}" * d + "}]",
    "merge": lambda d: '{"metadata": {"annotations": ' + '{"a":' * d + '"x"' + "}" * d + "}}",
    "strategic": lambda d: '{"spec": ' + "[" * d + "]" * d + "}",
    "apply": lambda d: '{"metadata": {"labels": ' + '{"a":' * d + "1" + "}" * d + "}}",
}
#: a watch-list's options (the stream begins with the state, ends it with a bookmark), from several places
WATCH_LIST = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"}
#: fields that hold CEL
EXPRESSION_KEYS = frozenset({"expression", "rule", "messageExpression", "valueExpression"})
_TEN = "[1,2,3,4,5,6,7,8,9,10]"
_JOINED = "lists.range(300).map(x, 'aaaaaaaaaa').join('').split('')"
#: expressions whose cost (to compile, or to run on any object) is far over upstream's limits: each must be
#: refused or fail with the cost limit at once (they reference no variable, so they compile in every context)
HOSTILE_CEL = [
    f"{_TEN}.all(a, {_TEN}.all(b, {_TEN}.all(c, {_TEN}.all(d, {_TEN}.all(e, {_TEN}.all(f, a + b + c + d + e + f > 0))))))",
    "lists.range(1000000000).size() > 0",
    "lists.range(100000).all(x, lists.range(100000).all(y, x != y || true))",
    "cel.bind(a0, 'xxxxxxxxxxxxxxxx', " + "".join(f"cel.bind(a{i}, a{i - 1} + a{i - 1}, " for i in range(1, 25))
    + "a24.size() > 0" + ")" * 25,
    "'x'" + ".replace('', 'yyyyyyyyyy')" * 8 + ".size() > 0",
    "'%.999999999f'.format([1.0]).size() > 0",
    "strings.quote(" * 30 + "'\\\\'" + ")" * 30 + ".size() > 0",
    "(" * 1000 + "true" + ")" * 1000,
    "[" * 300 + "]" * 300 + ".size() > 0",
    "'" + "a" * 40 + "!'.matches('^(a+)+$')",
    "lists.range(1000).map(x, lists.range(1000)).flatten().all(y, lists.range(1000).all(z, y != z))",
    f"{_JOINED}.all(c, {_JOINED}.all(d, c == d))",
    "dyn({'a': 1})" + ".?a" * 30 + ".hasValue()",
    "lists.range(3000).all(i, v, lists.range(3000).all(j, w, i + j >= 0))",
    "1 + " * 3000 + "1 > 0",
]


#: kinds with a scale subresource (autoscaling/v1 Scale)
SCALED = frozenset({"deployments", "replicasets", "statefulsets", "replicationcontrollers", "widgets", "oddities",
                    "leaderworkersets"})
#: custom resources: an accepted one must also be accepted as a new object (a dry-run create), where no
#: ratcheting keeps what an update may leave unchanged
CUSTOM = frozenset({"widgets", "oddities", "leaderworkersets"})
#: bodies a write may arrive in besides plain JSON, as (content type, encoder of the object): each is decoded as
#: upstream's serializers decode it or refused with a 4xx (415 for a media type none of them reads)
ENCODINGS = [
    # (JSON is YAML's flow style: PyYAML's block style recurses past Python's limit on the deep values)
    ("application/yaml", lambda o: json.dumps(o)),
    ("application/yaml", lambda o: "---\n" + json.dumps(o) + "\n---\n" + json.dumps(o)),
    ("application/yaml", lambda o: "a: &a [*a]\n"),
    ("application/yaml", lambda o: "{x: !!binary AAEC, " + json.dumps(o)[1:] if isinstance(o, dict) else "!!binary AAEC"),
    ("application/yaml", lambda o: "- " + json.dumps(o)),
    ("application/yaml", lambda o: "\t" + json.dumps(o)),
    ("application/json", lambda o: "\ufeff" + json.dumps(o)),
    ("application/json", lambda o: json.dumps(o)[:-1]),
    ("application/json", lambda o: json.dumps(o).replace("{", '{"kind": 1, ', 1)),
    ("application/json", lambda o: json.dumps(o)[:-1] + ', "metadata": {"name": "dup"}}'),
    ("application/json", lambda o: json.dumps(o).encode() + b"\xff"),
    ("application/json", lambda o: json.dumps(o) + " trailing"),
    ("application/json", lambda o: "[" * 200 + "]" * 200),
    ("application/json", lambda o: '{"a": 1e999999}'),
    ("application/yaml", lambda o: _LAUGHS + "".join(f"{json.dumps(k)}: {json.dumps(v)}\n" for k, v in o.items())
     if isinstance(o, dict) else _LAUGHS),
    ("application/yaml", lambda o: "metadata: {name: a}\nmetadata: {name: b}\n"),
    ("application/json", lambda o: json.dumps(o)[:-1] + ', "fuzzBig": 1' + "0" * 400 + "}" if isinstance(o, dict) else "1" + "0" * 400),
    ("application/yaml", lambda o: json.dumps(o)[:-1] + ', "fuzzBig": 1' + "0" * 400 + "}" if isinstance(o, dict) else "1" + "0" * 400),
    ("application/json", lambda o: (json.dumps(o)[:-1] + ', "fuzzText": "').encode() + b'\xc0\x80\xff\\ud800"}'
     if isinstance(o, dict) else b'"\xff"'),
    ("application/yaml", lambda o: json.dumps(o).encode() + b"\n# \xff"),
    ("application/vnd.kubernetes.protobuf", lambda o: b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12" + bytes(range(255, 0, -1))),
    ("application/vnd.kubernetes.protobuf", lambda o: b"k8s\x00\x0a\x04\x0a\x02v1\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"),
    ("application/json; charset=utf-8", lambda o: json.dumps(o)),
    ("application/json;;", lambda o: json.dumps(o)),
    ("application/vnd.kubernetes.protobuf", lambda o: b"k8s\x00" + bytes(range(256))),
    ("application/vnd.kubernetes.protobuf", lambda o: b"k8s\x00\x0a\xff\xff\xff\xff\x0f"),
    ("application/vnd.kubernetes.protobuf", lambda o: json.dumps(o)),
    ("application/cbor", lambda o: b"\xd9\xd9\xf7\xa0"),
    ("text/plain", lambda o: json.dumps(o)),
    ("application/x-www-form-urlencoded", lambda o: "a=b"),
    ("", lambda o: json.dumps(o)),
    ("application/json-patch+json", lambda o: json.dumps(o)),
]
#: Accept headers of a read: an answer in the negotiated form, or a 406 Status
ACCEPTS = ["application/yaml", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf, application/json",
           "application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
           "application/json;as=Table;v=v9;g=meta.k8s.io", "application/json;as=Table",
           "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
           "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "application/json;as=Bogus;v=v1;g=meta.k8s.io",
           "application/json;stream=watch", "application/json;stream=bogus", "text/html", "*/*", "application/*", ";;", ",",
           "application/json;q=0.5, text/html", "application/json;pretty=1", "a" * 10_000, "application/json;" + "x=y;" * 2000]
#: times of the first and last years Go's time.Parse reads (Time and MicroTime forms), and around the epoch: a
#: component that reads them must not fail (a job's startTime of year 0, a cronjob's lastScheduleTime of 9999)
EDGE_TIMES = ["0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z",
              "1969-12-31T23:59:59Z", "0000-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z", "2026-12-05T00:00:00+14:00"]
#: Accept headers of any verb (dry-run writes, deletes, watches, subresources): the conversions, by the kind a 2xx
#: answer of a named object (a Status aside) or a collection's read then is, and forms no endpoint serves (a 406
#: before anything is written, as every upstream handler negotiates first)
_TABLE, _PARTIAL = "application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
CONVERTED = {_TABLE: "Table", "application/json;as=Table;v=v1beta1;g=meta.k8s.io": "Table", _PARTIAL: "PartialObjectMetadata",
             _PARTIAL + "List": "PartialObjectMetadataList"}
#: answers that are not the object written: a Status, a Scale, or the object converted for the Accept header
CONVERTED_KINDS = frozenset({"Status", "Scale", *CONVERTED.values()})
WRITE_ACCEPTS = [*CONVERTED, "application/json;as=Bogus;v=v1;g=meta.k8s.io", "text/html", "application/json;as=Table;v=v9;g=meta.k8s.io"]
#: an object's path as a client may mangle it: trailing slashes and dots, escaped slashes, names that are no
#: object's (unicode, NUL, too long); a doubled slash is added by `_other` (each a 404: no route matches it)
PATH_TAILS = ["/", "%2F", "/.", "/..", ".", "%2E%2E", "%00", "%C3%A9", "%E2%84%AA", "%FF", "a%2Fb", "/%20", "%2F%2F", "/" + "a" * 300]
#: query parameters of a watch (read up to its headers, then closed): hostile values of each option it reads
WATCH_QUERY = {
    "resourceVersion": st.sampled_from(["", "0", "1", "x", "-1", str(2**63), "999999999999"]),
    "resourceVersionMatch": st.sampled_from(["NotOlderThan", "Exact", "bogus", ""]),
    "allowWatchBookmarks": st.sampled_from(["true", "false", "x", ""]),
    "sendInitialEvents": st.sampled_from(["true", "false", "x"]),
    "labelSelector": st.sampled_from(HOSTILE_SELECTORS[:12]),
    "fieldSelector": st.sampled_from(["metadata.name=x", "metadata.namespace!=y", "a=b", "status.phase=Running", "(", ""]),
    "limit": st.sampled_from(["1", "-1", "x"]),
    "continue": st.sampled_from(["x", "%%%"]),
    "includeObject": st.sampled_from(["None", "Object", "Metadata", "bogus"]),
    "timeoutSeconds": st.sampled_from(["0", "-1", "x", "1.5", str(2**63), "3600"]),
}


#: continue tokens a client made up or changed: base64 and JSON that do not decode, fields of the wrong types,
#: a start key climbing out of the list's prefix; each is a 400 (storage.DecodeContinue's reasons)
_V1 = '"v":"meta.k8s.io/v1"'
TAMPERED_CONTINUE = [base64.urlsafe_b64encode(t.encode()).decode().rstrip("=") for t in [
    "[]", "null", '{"v":', "{" + _V1 + ',"rv":"1","start":1}', "{" + _V1 + ',"rv":1.5,"start":null}',
    "{" + _V1 + ',"rv":0,"start":"a"}', '{"v":"meta.k8s.io/v2","rv":1,"start":"a"}', '{"rv":1,"start":"a"}',
    "{" + _V1 + ',"rv":1,"start":"../kube-system/a"}', "{" + _V1 + ',"rv":true,"start":[1]}',
    "{" + _V1 + ',"rv":99999999999999999999,"start":"a"}']] + ["x", "a b", "====", "%%%"]
#: headers of a read or a dry-run write: impersonation (always of a user, as upstream answers a group or extra
#: without one with a deliberate 500), header bytes that are not UTF-8, odd encodings and preconditions
HOSTILE_HEADERS = {
    "Impersonate-User": st.sampled_from(["fuzz-nobody", "system:serviceaccount:fuzz:default", "a\xe9b", "system:anonymous",
                                         "system:serviceaccount:", "system:serviceaccount:a:b:c", "system:node:n", "x" * 5000,
                                         "system:serviceaccount:fuzz:", "system:serviceaccount::x", " ", "a\tb"]),
    "Impersonate-Group": st.sampled_from(["system:masters", "fuzz", "", "\xff"]),
    "Impersonate-Extra-scopes": st.sampled_from(["a", "", "\xe9"]),
    "Impersonate-Extra-a%2Fb": st.just("x"),
    "Impersonate-Extra-%zz": st.sampled_from(["x", ""]),
    "Impersonate-Extra-": st.just("x"),
    "Impersonate-Uid": st.sampled_from(["u", "", "\xe9", "x" * 5000]),
    "User-Agent": st.sampled_from(["a\xe9b/1", "\xff", "", "/", "x" * 5000]),
    "Audit-ID": st.sampled_from(["\xff", "", "x" * 5000]),
    "Content-Encoding": st.sampled_from(["gzip", "deflate", "br", "identity", "bogus"]),
    "If-Match": st.sampled_from(["x", "*"]),
    "Accept-Encoding": st.sampled_from(["gzip", "gzip;q=0", "bogus"]),
}
#: YAML whose aliases expand a billionfold (go-yaml refuses it as excessive aliasing)
_LAUGHS = "".join(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9 if i else ["x"] * 9) + "]\n" for i in range(9))


def _names(text: str) -> bool:
    """Does a JSON text (one that is not: as if it did) name its object, as checkName reads metadata.name?"""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return True
    md = obj.get("metadata") if isinstance(obj, dict) else None
    return not isinstance(obj, dict) or md is not None and not isinstance(md, dict) or bool((md or {}).get("name"))


def _options(text) -> Any:
    """A body (JSON text, as sent: a delete's options, a subresource's object) as its value; None for none or
    one that is not JSON."""
    try:
        return json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None


def _repeats(text: str) -> bool:
    """Does a JSON text repeat a key in one of its objects?"""
    found = []

    def pairs(kv: list) -> dict:
        if len({k for k, _ in kv}) != len(kv):
            found.append(kv)
        return dict(kv)

    try:
        json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return False
    return bool(found)


def deep(depth: int) -> Any:
    v: Any = {}
    for _ in range(depth):
        v = {"a": v}
    return v


class Schemas:
    """The OpenAPI v3 components the server serves, per group/version, fetched once: those of
    `kinds`' group/versions, or of every one the server lists (scripts/fuzz_surfaces.py)."""

    def __init__(self, raw: Raw, kinds: list | None = None):
        index = raw.request("GET", "/openapi/v3")[2]["paths"]
        self.components: dict[str, dict] = {}
        for gv in index if kinds is None else {k[0] for k in kinds}:
            doc = raw.request("GET", index[gv]["serverRelativeURL"])[2]
            self.components.update(doc.get("components", {}).get("schemas", {}))
        #: (group, version, kind) -> its schema, the first component that names it (every draw looks one up)
        self.by_kind: dict[tuple[str, str, str], dict] = {}
        for s in self.components.values():
            for gvk in s.get("x-kubernetes-group-version-kind", ()):
                self.by_kind.setdefault((gvk["group"], gvk["version"], gvk["kind"]), s)

    def kind(self, group_version: str, kind: str) -> dict:
        group = "" if group_version == "api/v1" else group_version.split("/")[1]
        version = group_version.rsplit("/", 1)[1]
        try:
            return self.by_kind[(group, version, kind)]
        except KeyError:
            raise LookupError(kind) from None

    def resolve(self, s: dict | None) -> dict:
        while s:
            if "$ref" in s:
                s = self.components[s["$ref"][len(REF):]]
            elif len(s.get("allOf") or ()) == 1:
                s = s["allOf"][0]
            else:
                break
        return s or {}

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one instance per run
    def values(self, key: str, depth: int) -> st.SearchStrategy:
        """Values a schema node admits (roughly), depth-limited; `key` is the node's JSON text."""
        s = self.resolve(json.loads(key))
        if s.get("x-kubernetes-int-or-string"):
            return st.one_of(st.integers(-5, 100), st.sampled_from(["1", "50%", "http", "x"]))
        t = s.get("type")
        if t == "string":
            return st.one_of(st.text(max_size=12), st.sampled_from(s.get("enum") or HOSTILE_STRINGS[:20]))
        if t == "integer":
            return st.one_of(st.integers(-10, 1000), st.sampled_from(HOSTILE_NUMBERS))
        if t == "number":
            return st.floats(allow_nan=False, allow_infinity=False)
        if t == "boolean":
            return st.booleans()
        if depth <= 0:
            return st.none()
        if t == "array":
            return st.lists(self.values(json.dumps(s.get("items") or {}), depth - 1), max_size=3)
        props = s.get("properties") or {}
        if props:
            names = sorted(props)
            return st.lists(st.sampled_from(names), max_size=4, unique=True).flatmap(
                lambda chosen: st.fixed_dictionaries({k: self.values(json.dumps(props[k]), depth - 1) for k in chosen}))
        ap = s.get("additionalProperties")
        if isinstance(ap, dict):
            return st.dictionaries(st.text(min_size=1, max_size=8), self.values(json.dumps(ap), depth - 1), max_size=3)
        return st.one_of(st.none(), st.text(max_size=5), st.integers())

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one instance per run
    def time_paths(self, key: str, depth: int = 4) -> tuple[tuple[str, ...], ...]:
        """The paths (objects' fields only, no lists) of a schema's date-time fields in spec and status."""
        out: list[tuple[str, ...]] = []

        def walk(s: dict, prefix: tuple[str, ...], left: int) -> None:
            for k, v in (self.resolve(s).get("properties") or {}).items():
                r = self.resolve(v)
                if r.get("format") == "date-time":
                    out.append((*prefix, k))
                elif left and r.get("properties") and (prefix or k in ("spec", "status")):
                    walk(r, (*prefix, k), left - 1)

        walk(json.loads(key), (), depth)
        return tuple(out)

    def at(self, root: dict, path: list) -> dict:
        """The schema of the value at `path` under the kind schema `root`."""
        s = root
        for seg in path:
            s = self.resolve(s)
            if isinstance(seg, int):
                s = s.get("items") or {}
            else:
                props = s.get("properties") or {}
                s = props.get(seg) or (s.get("additionalProperties") if isinstance(s.get("additionalProperties"), dict) else {})
        return s


def _paths(obj: Any, prefix: list) -> list[list]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + [k])
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + [i])
    return out


def _set(obj: Any, path: list, value: Any, remove: bool = False) -> Any:
    if not path:
        return value
    parent = obj
    for seg in path[:-1]:
        parent = parent[seg]
    if remove:
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


def _pointer(path: list) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _nested(path: list, value: Any) -> Any:
    """A merge patch that sets `value` at `path` (list indices become whole lists)."""
    for seg in reversed(path):
        value = [value] if isinstance(seg, int) else {seg: value}
    return value


def seed_object(gv: str, kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": gv.split("/", 1)[1] if gv.startswith("apis/") else "v1", "kind": kind,
            "metadata": {"name": name, "labels": {"app": "x"}}, **copy.deepcopy(spec)}


def _places(how: str, obj: Any) -> list[list]:
    """Where in a seed a mutation `how` of "cel" or "selector" goes: its CEL expressions, its label selectors."""
    if how == "cel":
        return [p for p in _paths(obj, []) if p and p[-1] in EXPRESSION_KEYS]
    return [p for p in _paths(obj, []) if p and isinstance(p[-1], str) and p[-1].endswith(("selector", "Selector"))
            and isinstance(_get(obj, p), dict)]


#: how a request's seed is mutated (a value generated from the schema three times as often as each other way),
#: and what is sent: each a family of requests a fixed run must check
MUTATIONS = ("string", "number", "value", "deep", "remove", "unknown", "schema", "schema", "schema", "cel", "selector")
VERBS = ("create", "update", "merge", "strategic", "json", "apply", "status", "delete", "list", "scale", "watch",
         "encoding", "accept", "subresource", "continue", "headers", "directive", "convert", "path", "page", "subbody",
         "repeat", "grace", "times", "named")


@st.composite
def requests(draw, fuzzer: Fuzzer):
    """One fuzzed write: (method, path, body bytes, content type, target name or None, dry run)."""
    how = draw(st.sampled_from(MUTATIONS))
    custom = [k for k in fuzzer.kinds if k[1] in CUSTOM]
    # (one draw in 8 is a custom resource's: their schemas and rules vary the most, and 3 kinds of 79 drawn alike
    # left the check that an accepted one is accepted anew to a few draws in 3,000, none in some fixed runs)
    kinds = custom if custom and draw(st.integers(0, 7)) == 0 else fuzzer.kinds
    if how == "cel":  # (a kind whose seed holds CEL: 4 of 79, which left 2 such requests in 3,000)
        kinds = [k for k in fuzzer.kinds if _places(how, k[3])] or kinds
    gv, plural, kind, seed_spec = draw(st.sampled_from(kinds))
    base = fuzzer.base(gv, plural)
    seed = seed_object(gv, kind, fuzzer.seed_name(gv, plural), seed_spec)
    obj = copy.deepcopy(seed)
    path = draw(st.sampled_from(_paths(obj, [])[1:]))
    root = fuzzer.schemas.kind(gv, kind)
    if how in ("cel", "selector"):  # (where the seed has a place for it, else a string or a value of another type)
        places = _places(how, obj)
        if places:
            path = draw(st.sampled_from(places))
        else:
            how = "string" if how == "cel" else "value"
    if how == "cel":
        value = draw(st.sampled_from(HOSTILE_CEL))
    elif how == "selector":
        value = copy.deepcopy(draw(st.sampled_from(HUGE_SELECTORS)))
    elif how == "string":
        value = draw(st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=30)))
    elif how == "number":
        value = draw(st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.integers()))
    elif how == "value":  # (a copy: a create names what it is given, and a changed list would change the next draws)
        value = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES)))
    elif how == "deep":
        value = deep(draw(st.sampled_from([30, 99, 101, 150, 1000])))
    elif how == "unknown":
        path, value = path + ["fuzzUnknown"], copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES + HOSTILE_STRINGS[:5])))
    elif how == "schema":
        value = draw(fuzzer.schemas.values(json.dumps(fuzzer.schemas.at(root, path)), 3))
    else:
        value = None
    if how == "unknown" and not isinstance(_get(obj, path[:-1]), dict):
        path = path[:-1]
    if how == "remove":
        _set(obj, path, None, remove=True)
    else:
        obj = _set(obj, path, value)
    verb = "create" if plural in CREATE_ONLY else draw(st.sampled_from(VERBS))
    fuzzer.drawing = (plural, how, verb)
    if verb == "times":  # a time of the first or last year Go reads, written for real where the seed's kind keeps one
        paths = fuzzer.schemas.time_paths(json.dumps(root))
        if paths:
            where = list(draw(st.sampled_from(paths)))
            patch = json.dumps(_nested(where, draw(st.sampled_from(EDGE_TIMES))))
            sub = "/status" if where[0] == "status" else ""
            return "PATCH", f"{base}/{seed['metadata']['name']}{sub}", {}, patch, "application/merge-patch+json", \
                seed["metadata"]["name"], None
        verb = "merge"
        fuzzer.drawing = (plural, how, verb)
    if verb in ("scale", "watch", "encoding", "accept", "subresource", "continue", "headers", "convert", "path", "page", "subbody",
                "repeat", "grace", "named"):
        return draw(_other(verb, fuzzer, gv, plural, base, seed["metadata"]["name"], obj, value))
    if verb == "list" and draw(st.booleans()):  # a label selector alone, which alone decides a 400
        return "GET", base, {"labelSelector": draw(st.sampled_from(HOSTILE_SELECTORS))}, None, None, None, None
    if verb == "list":
        query = draw(st.fixed_dictionaries({}, optional={
            "labelSelector": st.sampled_from(HOSTILE_SELECTORS), "fieldSelector": st.sampled_from(HOSTILE_SELECTORS),
            "limit": st.sampled_from(["0", "1", "-1", "x", str(2**63)]),
            "continue": st.sampled_from(["x", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MX0", "%%%"]),
            "resourceVersion": st.sampled_from(["0", "1", "x", "-1", "", str(2**63)]),
            "resourceVersionMatch": st.sampled_from(["Exact", "NotOlderThan", "bogus", ""]),
            "sendInitialEvents": st.sampled_from(["true", "false", "x", ""]),  # (a list's: forbidden, a 422)
            "allowWatchBookmarks": st.sampled_from(["true", "x"]), "timeoutSeconds": st.sampled_from(["1", "-1", "x"])}))
        return "GET", base, query, None, None, None, None
    query = {}
    if draw(st.booleans()):
        query["fieldValidation"] = draw(st.sampled_from(["Strict", "Warn", "Ignore", "bogus", "", "strict", "Strict,Warn"]))
    dry = draw(st.sampled_from([None, None, "All", "Bogus", "", "all", "All "]))  # (any but All: a 4xx, nothing written)
    if dry:
        query["dryRun"] = dry
    name = seed["metadata"]["name"]
    if verb == "create":
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) and "name" in obj["metadata"]:
            obj["metadata"]["name"] = fuzzer.fresh_name(gv, plural, draw(st.integers(0, 10**9)))
            spec = obj.get("spec")
            if plural == "customresourcedefinitions" and isinstance(spec, dict) and isinstance(spec.get("names"), dict):
                obj["spec"]["names"]["plural"] = obj["metadata"]["name"].split(".")[0]
        if plural in CREATE_ONLY and draw(st.integers(0, 3)) == 0:  # a review asked for a Table (none: a 406) or metadata
            return "POST", base, query, json.dumps(obj), "application/json", None, dry, {"Accept": draw(st.sampled_from(WRITE_ACCEPTS))}
        return "POST", base, query, json.dumps(obj), "application/json", None, dry
    if verb == "update":
        return "PUT", f"{base}/{name}", query, json.dumps(obj), "application/json", name, dry
    if verb == "status" and draw(st.booleans()):  # an apply of the status (only status is taken)
        return "PATCH", f"{base}/{name}/status", {**query, "fieldManager": "fuzz-status", "force": "true"}, json.dumps(obj), \
            "application/apply-patch+yaml", name, dry
    if verb == "status":
        return "PUT", f"{base}/{name}/status", query, json.dumps(obj), "application/json", name, dry
    if verb == "delete":
        options = draw(st.fixed_dictionaries({}, optional={
            "gracePeriodSeconds": st.sampled_from(HOSTILE_NUMBERS + HOSTILE_STRINGS[:4] + [2**64, -(2**63) - 1, "1"]),
            "propagationPolicy": st.sampled_from(["Foreground", "Background", "Orphan", "bogus", 1, "", "foreground", None]),
            "orphanDependents": st.sampled_from([True, False, "x", None]),
            "dryRun": st.sampled_from([["All"], ["Bogus"], "All", [], None, ["All", "All"], ["All", ""]]),
            # (a precondition that is set, even to "", must match: else a 409 and nothing deleted)
            "preconditions": st.sampled_from([{"uid": "x"}, {"resourceVersion": "1"}, "x", None, {"uid": ""},
                                              {"resourceVersion": ""}, {"uid": None, "resourceVersion": None},
                                              {"uid": 1}, {"resourceVersion": []}, {"uid": "x", "bogus": 1}]),
            "kind": st.sampled_from(["DeleteOptions", "Pod", ""]),
            "apiVersion": st.sampled_from(["meta.k8s.io/v1", "v1", "meta.k8s.io/v9", "apps/v1"])}))
        body = draw(st.one_of(st.just(options), st.sampled_from([v for v in HOSTILE_VALUES if v is not None])))
        if isinstance(body, dict) and body.get("dryRun") in (None, []):
            # a body's DeleteOptions are the only ones read (not the query's dryRun, as upstream's
            # DeleteResource): the delete stays a dry run, as the check assumes, or is refused
            body = {**body, "dryRun": ["All"]}
        query.setdefault("dryRun", "All")
        return "DELETE", f"{base}/{name}", query, json.dumps(body), "application/json", name, query["dryRun"]
    if verb == "apply":
        query["fieldManager"] = "fuzz"
        query["force"] = "true"
        return "PATCH", f"{base}/{name}", query, json.dumps(obj), "application/apply-patch+yaml", name, dry
    if verb == "strategic" and draw(st.integers(0, 9)) == 0:
        return "PATCH", f"{base}/{name}", {**query, "dryRun": "All"}, json.dumps(LONG_LISTS), \
            "application/strategic-merge-patch+json", name, "All"
    if verb == "json" and draw(st.integers(0, 9)) == 0:
        return "PATCH", f"{base}/{name}", query, json.dumps(draw(st.sampled_from(COPY_BOMBS))), \
            "application/json-patch+json", name, dry
    if verb in DEEP_BODIES and draw(st.integers(0, 19)) == 0:  # nested past any limit, some at it
        depth = draw(st.sampled_from([99, 100, 101, 1000, 10_001, 100_000]))
        ctype = {"json": "application/json-patch+json", "merge": "application/merge-patch+json",
                 "strategic": "application/strategic-merge-patch+json", "apply": "application/apply-patch+yaml"}[verb]
        body = DEEP_BODIES[verb](depth)
        if verb == "apply":  # (the configuration's own kind, so that only its depth is wrong)
            query.update(fieldManager="fuzz", force="true")
            body = json.dumps({"apiVersion": seed["apiVersion"], "kind": kind})[:-1] + ", " + body[1:]
        return "PATCH", f"{base}/{name}", query, body, ctype, name, dry
    if verb == "directive":  # a strategic merge patch of directives in odd shapes, where the seed has a map or list
        return "PATCH", f"{base}/{name}", query, json.dumps(draw(_directive(seed))), \
            "application/strategic-merge-patch+json", name, dry
    if verb == "json":
        op = {"op": "remove", "path": _pointer(path)} if how == "remove" else \
            {"op": draw(st.sampled_from(["add", "replace"])), "path": _pointer(path), "value": value}
        return "PATCH", f"{base}/{name}", query, json.dumps([op]), "application/json-patch+json", name, dry
    patch = _nested(path, None if how == "remove" else value)
    ctype = "application/merge-patch+json" if verb == "merge" else "application/strategic-merge-patch+json"
    return "PATCH", f"{base}/{name}", query, json.dumps(patch), ctype, name, dry


#: values a directive is given: its own words, others, and values of every other type
DIRECTIVE_VALUES = ["replace", "delete", "merge", "bogus", "", 1, None, True, [], {}, [None], ["x"], [1], [{}], [{"name": None}],
                    {"$patch": "delete"}]


@st.composite
def _directive(draw, seed: dict):
    """A strategic merge patch that puts a directive, or a list of nulls and directive maps, at a map or list of
    the seed: $patch, $retainKeys, $setElementOrder/<f> and $deleteFromPrimitiveList/<f> of any type."""
    places = [p for p in _paths(seed, []) if isinstance(_get(seed, p), (dict, list)) and not any(isinstance(x, int) for x in p)]
    path = draw(st.sampled_from(places))
    value = draw(st.sampled_from(DIRECTIVE_VALUES))
    target = _get(seed, path)
    if isinstance(target, list) or not path:
        key = path[-1] if path else "metadata"
        shape = draw(st.sampled_from([[{"$patch": value}], [None], [value], [{"$patch": "delete"}], [{"$patch": "replace"}, value]]))
        return _nested(path[:-1], {key: shape, f"$setElementOrder/{key}": value}) if draw(st.booleans()) else \
            _nested(path[:-1] if path else [], {key: shape})
    fields = sorted(target) or ["x"]
    directive = draw(st.sampled_from(["$patch", "$retainKeys", f"$setElementOrder/{draw(st.sampled_from(fields))}",
                                      f"$deleteFromPrimitiveList/{draw(st.sampled_from(fields))}", "$deleteFromPrimitiveList",
                                      "$setElementOrder"]))
    return _nested(path, {directive: value, **({} if draw(st.booleans()) else {fields[0]: value})})


@st.composite
def _other(draw, verb: str, fuzzer: Fuzzer, gv: str, plural: str, base: str, name: str, obj: Any, value: Any):
    """A request beside the plain writes: /scale, a watch, another body encoding, another Accept header, or a
    pod's or service account's subresource. Every write of them is a dry run (a scale of the seed to 2^31 would
    make its pods)."""
    dry = {"dryRun": "All"}
    owners = {"scale": SCALED, "subresource": SUBRESOURCES, "grace": ("pods",)}.get(verb)
    targets = [k for k in fuzzer.kinds if k[1] in owners] if owners is not None and plural not in owners else []
    if targets:  # (a verb of a few kinds, drawn with another: sent to one of those, with the value the mutation drew)
        gv, plural = draw(st.sampled_from(targets))[:2]
        base, name = fuzzer.base(gv, plural), fuzzer.seed_name(gv, plural)
        fuzzer.drawing = (plural, *fuzzer.drawing[1:])
    if verb == "scale" and plural in SCALED:
        replicas = draw(st.one_of(st.sampled_from(HOSTILE_NUMBERS + HOSTILE_VALUES + HOSTILE_STRINGS[:4]), st.just(value)))
        how = draw(st.sampled_from(["put", "merge", "json", "apply", "get", "metadata"]))
        scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name},
                 "spec": {"replicas": replicas}}
        if draw(st.booleans()):
            scale["metadata"]["resourceVersion"] = draw(st.sampled_from(["1", "x", ""]))
        if how == "get":
            return "GET", f"{base}/{name}/scale", {}, None, None, None, None
        if how == "metadata":  # a patch that leaves the Scale's metadata, or the Scale, no object
            ctype = draw(st.sampled_from(["application/merge-patch+json", "application/strategic-merge-patch+json",
                                          "application/json-patch+json"]))
            odd = draw(st.sampled_from(HOSTILE_VALUES + HOSTILE_STRINGS[:3]))
            body = [{"op": "replace", "path": draw(st.sampled_from(["/metadata", ""])), "value": odd}] \
                if ctype.startswith("application/json") else {"metadata": odd}
            return "PATCH", f"{base}/{name}/scale", dry, json.dumps(body), ctype, name, "All"
        if how == "put":
            return "PUT", f"{base}/{name}/scale", dry, json.dumps(scale), "application/json", name, "All"
        if how == "merge":
            return "PATCH", f"{base}/{name}/scale", dry, json.dumps({"spec": {"replicas": replicas}}), \
                "application/merge-patch+json", name, "All"
        if how == "json":
            return "PATCH", f"{base}/{name}/scale", dry, json.dumps([{"op": "replace", "path": "/spec/replicas",
                                                                    "value": replicas}]), \
                "application/json-patch+json", name, "All"
        return "PATCH", f"{base}/{name}/scale", {**dry, "fieldManager": "fuzz", "force": "true"}, json.dumps(scale), \
            "application/apply-patch+yaml", name, "All"
    if verb == "watch":
        query = draw(st.fixed_dictionaries({}, optional=WATCH_QUERY))
        if draw(st.booleans()):  # a watch-list, as client-go's reflectors ask for one
            query.update(WATCH_LIST)
        watch_list = query.get("sendInitialEvents") not in (None, "false") and query.get("resourceVersionMatch") == "NotOlderThan"
        if watch_list and len(query.get("resourceVersion", "")) > 9:  # from the future: waited for 3 s, as upstream's cacher
            query["resourceVersion"] = "1"
        path = base if draw(st.booleans()) else f"{base}/{name}"  # (?watch on one object's path: a get upstream)
        return "GET", path, {"timeoutSeconds": "1", **query, "watch": draw(st.sampled_from(["1", "true"]))}, \
            None, None, None, None
    if verb == "encoding":
        ctype, encode = draw(st.sampled_from(ENCODINGS))
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"]["name"] = fuzzer.fresh_name(gv, plural, draw(st.integers(0, 10**9)))
        body = encode(obj)
        return "POST", base, dry, body.encode() if isinstance(body, str) else body, ctype, None, "All"
    if verb == "continue":  # a tampered token: its 400, whatever the page size
        return "GET", base, {"limit": draw(st.sampled_from(["1", "2", "0"])), "continue": draw(st.sampled_from(TAMPERED_CONTINUE))}, \
            None, None, None, None
    if verb == "headers":  # a read, or a dry-run write of the seed, with hostile headers
        headers = draw(st.fixed_dictionaries({}, optional=HOSTILE_HEADERS))
        if any(h.startswith("Impersonate-") for h in headers):
            headers.setdefault("Impersonate-User", "fuzz-nobody")
        how = draw(st.sampled_from(["list", "get", "put", "patch"]))
        if how == "list":
            return "GET", base, {}, None, None, None, None, headers
        if how == "get":
            return "GET", f"{base}/{name}", {}, None, None, None, None, headers
        if how == "put":
            return "PUT", f"{base}/{name}", dry, json.dumps(obj), "application/json", name, "All", headers
        return "PATCH", f"{base}/{name}", dry, json.dumps({"metadata": {"labels": {"fuzz": "h"}}}), \
            "application/merge-patch+json", name, "All", headers
    if verb == "accept":
        accept = draw(st.sampled_from(ACCEPTS))
        path = base if draw(st.booleans()) else f"{base}/{name}"
        return "GET", path, {}, None, None, None, None, {"Accept": accept}
    item = f"{base}/{name}"
    if verb == "convert":  # an Accept of a conversion, or of none served, on any verb: a collection, an object, a subresource
        h = {"Accept": draw(st.sampled_from(WRITE_ACCEPTS))}
        how = draw(st.sampled_from(["get", "list", "watch", "create", "put", "patch", "delete", "deletecollection",
                                    "status", "scale", "subresource"]))
        if how == "subresource" and plural in SUBRESOURCES:  # (a binding's, eviction's or TokenRequest's: no Table, a 406)
            sub, ctype, body = draw(st.sampled_from(SUBRESOURCES[plural]))
            method = "PATCH" if ctype.endswith("patch+json") else "PUT" if sub in ("ephemeralcontainers", "approval", "status") else "POST"
            return method, f"{item}/{sub}", dry, json.dumps(body), ctype, name, "All", h
        labels = json.dumps({"metadata": {"labels": {"fuzz": "convert"}}})
        if how in ("get", "list"):
            return "GET", item if how == "get" else base, {} if how == "get" else {"limit": "2"}, None, None, None, None, h
        if how == "watch":
            return "GET", draw(st.sampled_from([base, item])), {"watch": "1", "timeoutSeconds": "1"}, None, None, None, None, h
        if how == "create" and isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"]["name"] = fuzzer.fresh_name(gv, plural, draw(st.integers(0, 10**9)))
            return "POST", base, dry, json.dumps(obj), "application/json", None, "All", h
        if how == "put":
            return "PUT", item, dry, json.dumps(obj), "application/json", name, "All", h
        if how == "delete":
            return "DELETE", item, dry, None, None, name, "All", h
        if how == "deletecollection":  # (the seeds' label: a dry run of as few as may be)
            return "DELETE", base, {**dry, "labelSelector": "app=x", "limit": "2"}, None, None, None, "All", h
        sub = {"status": "/status", "scale": "/scale"}.get(how, "")
        if how == "status" and draw(st.booleans()) or how == "scale" and draw(st.booleans()):
            return "GET", item + sub, {}, None, None, None, None, h
        return "PATCH", item + sub, dry, labels if how != "scale" else json.dumps({"spec": {"replicas": 1}}), \
            "application/merge-patch+json", name, "All", h
    if verb == "path":  # the seed's path mangled: a doubled slash (a 404), or a tail no object's name has
        method = draw(st.sampled_from(["GET", "DELETE", "PUT", "PATCH", "POST"]))
        if draw(st.booleans()):
            cut = draw(st.sampled_from([i for i, c in enumerate(item) if c == "/"]))
            path = item[:cut] + "/" + item[cut:]
        else:
            path = (base if draw(st.booleans()) else item) + draw(st.sampled_from(PATH_TAILS))
        body = {"PUT": json.dumps(obj), "PATCH": json.dumps({"metadata": {"labels": {"fuzz": "path"}}}),
                "POST": json.dumps(obj)}.get(method)
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        return method, path, dry, body, ctype if body else None, None, "All"
    if verb == "page":  # a real first page's continue token, then read with other options or at another kind's path
        other = fuzzer.base(*draw(st.sampled_from(fuzzer.kinds))[:2])
        query = draw(st.fixed_dictionaries({}, optional={
            "labelSelector": st.sampled_from(["app=x", "app!=x", "fuzz-none", "(", ""]),
            "fieldSelector": st.sampled_from(["metadata.name=x", "metadata.namespace!=fuzz", "x"]),
            "limit": st.sampled_from(["1", "0", "-1", "x", str(2**63)]),
            "resourceVersion": st.sampled_from(["0", "1", "", "x", str(2**62)]),
            "resourceVersionMatch": st.sampled_from(["Exact", "NotOlderThan", "bogus"]),
            "sendInitialEvents": st.sampled_from(["true", "false"]),
            "watch": st.sampled_from(["1", "false"])}))
        return "PAGE", base, query, draw(st.sampled_from([base, base, other])), None, None, None
    if verb == "subbody":  # a body nested past any limit, too large, wide or undecodable, through a subresource
        subs = [("/status", "PUT", "application/json"), ("/status", "PATCH", "application/merge-patch+json"),
                ("/status", "PATCH", "application/json-patch+json"), ("/status", "PATCH", "application/apply-patch+yaml")]
        if plural in SCALED:
            subs += [("/scale", "PUT", "application/json"), ("/scale", "PATCH", "application/merge-patch+json"),
                     ("/scale", "PATCH", "application/json-patch+json")]
        for sub, ctype, _ in SUBRESOURCES.get(plural, ()):
            method = "PATCH" if ctype.endswith("patch+json") else "PUT" if sub in ("ephemeralcontainers", "approval", "status") else "POST"
            subs.append((f"/{sub}", method, ctype))
        sub, method, ctype = draw(st.sampled_from(subs))
        query = {**dry, "fieldManager": "fuzz", "force": "true"} if ctype == "application/apply-patch+yaml" else dry
        shape = draw(st.sampled_from(["deep", "huge", "wide", "protobuf", "nul", "yaml"]))
        if shape == "deep":
            depth = draw(st.sampled_from([99, 101, 10_001, 100_000]))
            body = DEEP_BODIES["json"](depth) if ctype == "application/json-patch+json" else \
                '{"metadata": {"annotations": ' + '{"a":' * depth + '"x"' + "}" * depth + "}}"
        elif shape in ("huge", "wide"):
            body = _huge_body(shape)
        elif shape == "protobuf":
            ctype, body = "application/vnd.kubernetes.protobuf", draw(st.sampled_from(
                [b"k8s\x00" + bytes(range(256)), b"k8s\x00\x0a\xff\xff\xff\xff\x0f", b"k8s\x00", b"\x00" * 64]))
        elif shape == "nul":
            body = b'{"metadata": {"name": "\x00"}, "\x00": 1}'
        else:
            ctype, body = "application/yaml", "a: &a [*a]\n" if draw(st.booleans()) else _LAUGHS
        return method, item + sub, query, body, ctype, name, "All"
    if verb == "repeat":  # a body that repeats a key, under each fieldValidation (Strict: a 4xx, nothing written)
        q = {**dry, "fieldValidation": draw(st.sampled_from(["Strict", "Warn", "Ignore"]))}
        seed_body = {**obj, "metadata": {**obj["metadata"], "name": name}} if isinstance(obj, dict) and \
            isinstance(obj.get("metadata"), dict) else {"metadata": {"name": name}}
        twice = json.dumps(seed_body)[:-1] + ', "metadata": ' + json.dumps(seed_body["metadata"]) + "}"
        labels = '{"metadata": {"labels": {"fuzz": "a", "fuzz": "b"}}}'
        targets = [("PUT", item, twice, "application/json"), ("PATCH", item, labels, "application/merge-patch+json"),
                   ("PATCH", item, labels, "application/strategic-merge-patch+json"),
                   ("PATCH", item, json.dumps({"apiVersion": seed_body.get("apiVersion"), "kind": seed_body.get("kind")})[:-1]
                    + ', "metadata": {"labels": {"fuzz": "a", "fuzz": "b"}}}', "application/apply-patch+yaml")]
        if plural in SCALED:
            targets += [("PUT", item + "/scale", '{"metadata": {"name": "%s"}, "spec": {"replicas": 1, "replicas": 1}}' % name,
                         "application/json"),
                        ("PATCH", item + "/scale", '{"spec": {"replicas": 1, "replicas": 1}}', "application/merge-patch+json")]
        for sub, ctype, body in SUBRESOURCES.get(plural, ()):
            if ctype == "application/json":
                method = "PUT" if sub in ("approval", "status") else "POST"
                first = next(iter(body))  # (its first key again, with its value)
                targets.append((method, f"{item}/{sub}", json.dumps(body)[:-1] + f", {json.dumps(first)}: {json.dumps(body[first])}}}",
                                ctype))
        method, path, body, ctype = draw(st.sampled_from(targets))
        if ctype == "application/apply-patch+yaml":
            q.update(fieldManager="fuzz", force="true")
        return method, path, q, body, ctype, name, "All"
    named = [(p, sub, ctype, body) for p in ("pods", "serviceaccounts") if ("api/v1", p) in {k[:2] for k in fuzzer.kinds}
             for sub, ctype, body in SUBRESOURCES[p] if sub in NAMED_CREATES]
    if verb == "named" and named:  # a Binding, Eviction or TokenRequest naming another object or namespace (refused)
        owner, sub, ctype, body = draw(st.sampled_from(named))
        metadata = draw(st.sampled_from([{"name": "fuzz-other"}, {"namespace": "fuzz-other"}, {}, {"name": ""},
                                         {"name": fuzzer.seed_name("api/v1", owner), "namespace": "fuzz-other"}]))
        return "POST", f"{fuzzer.base('api/v1', owner)}/{fuzzer.seed_name('api/v1', owner)}/{sub}", dry, \
            json.dumps({**body, "metadata": metadata}), ctype, fuzzer.seed_name("api/v1", owner), "All"
    if verb == "grace" and plural == "pods":  # a pod on a node (none runs it) deleted gracefully for any period
        pod = {"metadata": {"name": fuzzer.fresh_name(gv, plural, draw(st.integers(0, 10**9)))},
               "spec": {"nodeName": "fuzz-nobody", "containers": [{"name": "c", "image": "busybox"}]}}
        grace = draw(st.one_of(st.sampled_from(HOSTILE_NUMBERS + [2**62, 10**12, 253402300800, -(2**62)]), st.integers()))
        where = draw(st.sampled_from(["delete", "eviction"]))
        return "GRACE", base, {"where": where, "grace": grace}, json.dumps(pod), "application/json", None, None
    if verb == "subresource" and plural in SUBRESOURCES:
        sub, ctype, body = draw(st.sampled_from(SUBRESOURCES[plural]))
        body = _set(copy.deepcopy(body), draw(st.sampled_from(_paths(body, [])[1:])), value)
        method = "PATCH" if ctype.endswith("patch+json") else "PUT" if sub in ("ephemeralcontainers", "approval", "status") else "POST"
        return method, f"{base}/{name}/{sub}", dry, json.dumps(body), ctype, name, "All"
    fuzzer.drawing = (plural, fuzzer.drawing[1], "get")  # (a verb with no target in this kind: a plain read)
    return "GET", f"{base}/{name}", {}, None, None, None, None


#: subresources created with a body that names its object: the URL's name and namespace it must not contradict
#: (BindingREST and EvictionREST: a name that is not the URL's, none included; TokenREST: one set to another)
NAMED_CREATES = {"binding": True, "eviction": True, "token": False}
#: subresources written with a body (dry run): (subresource, content type, a valid body to mutate)
SUBRESOURCES = {
    "pods": [
        ("eviction", "application/json", {"apiVersion": "policy/v1", "kind": "Eviction",
                                          "metadata": {"name": "fuzz-seed-pods"}, "deleteOptions": {"gracePeriodSeconds": 0}}),
        ("binding", "application/json", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "fuzz-seed-pods"},
                                         "target": {"apiVersion": "v1", "kind": "Node", "name": "fuzz-nobody"}}),
        ("ephemeralcontainers", "application/strategic-merge-patch+json", {"spec": {"ephemeralContainers": [
            {"name": "debug", "image": "busybox", "targetContainerName": "c", "stdin": True}]}}),
        ("resize", "application/strategic-merge-patch+json", {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}}),
    ],
    "certificatesigningrequests": [
        (sub, "application/json", {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                                   "metadata": {"name": "fuzz-seed-certificatesigningrequests"},
                                   "spec": {"request": CSR_B64, "signerName": "fuzz.example.com/nobody", "usages": ["digital signature"]},
                                   "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Fuzz",
                                                              "message": "m"}], "certificate": ""}})
        for sub in ("approval", "status")
    ],
    "serviceaccounts": [
        ("token", "application/json", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
            "audiences": ["fuzz"], "expirationSeconds": 3600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "fuzz-seed-pods"}}}),
    ],
}


def _get(obj: Any, path: list) -> Any:
    for seg in path:
        obj = obj[seg]
    return obj


def _ours(obj: dict) -> list:
    """The fuzzer's own managedFields entries: a write of ours changes them, a controller's does not."""
    return [e for e in (obj.get("metadata") or {}).get("managedFields") or [] if e.get("manager") in (MANAGER, "fuzz")]


def _changes(before: dict, after: dict) -> str:
    """What differs between two objects, by top-level and metadata field (for a failure's message)."""
    keys = [k for k in {**before, **after} if k != "metadata" and before.get(k) != after.get(k)]
    md_b, md_a = before.get("metadata") or {}, after.get("metadata") or {}
    keys += [f"metadata.{k}" for k in {**md_b, **md_a} if md_b.get(k) != md_a.get(k)]
    return ", ".join(f"{k}: {str(_get_path(before, k))[:120]} -> {str(_get_path(after, k))[:120]}" for k in keys)


def _get_path(obj: dict, dotted: str):
    for part in dotted.split("."):
        obj = (obj or {}).get(part) if isinstance(obj, dict) else None
    return obj


def _stable(obj: dict) -> dict:
    """What a refused write must not change (controllers may still write status, and the node lifecycle
    controller the seed Node's node.kubernetes.io/ taints: its update takes the whole atomic list from
    the fuzzer, so the fuzzer's managedFields change with it)."""
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    out = {**{k: v for k, v in obj.items() if k != "status"}, "metadata": md}
    spec = out.get("spec")
    if obj.get("kind") == "Node" and isinstance(spec, dict) and isinstance(spec.get("taints"), list):
        out["spec"] = {**spec, "taints": [t for t in spec["taints"]
                                          if not str((t or {}).get("key", "")).startswith("node.kubernetes.io/")]}
    return out


#: a write that runs what an accepted change to these kinds holds: the seed admission policies' expressions
#: (they match only this ConfigMap), the seed CRD's rules (on a custom resource of it)
_PROBE_CM = (f"/api/v1/namespaces/{NS}/configmaps",
             {"metadata": {"name": "fuzz-probe", "labels": PROBE}, "data": {"a": "b"}})
PROBES = {"validatingadmissionpolicies": _PROBE_CM, "mutatingadmissionpolicies": _PROBE_CM,
          "validatingadmissionpolicybindings": _PROBE_CM, "mutatingadmissionpolicybindings": _PROBE_CM,
          "customresourcedefinitions": (f"/apis/fuzz.example.com/v1/namespaces/{NS}/fuzzseeds",
                                        {"apiVersion": "fuzz.example.com/v1", "kind": "FuzzSeed",
                                         "metadata": {"name": "fuzz-probe"}, "spec": {"n": 1}})}


#: the checks `Fuzzer.check` makes beside send's contract, each judging only the answers it applies to
ORACLES = ("invalid label selector", "tampered continue", "refused write", "re-validates", "custom resource anew",
           "doubled slash", "dryRun not All", "repeated key under Strict", "update naming no object",
           "list's sendInitialEvents", "unmet precondition", "conversion refused", "conversion",
           "continue beside a resourceVersion", "subresource naming another object")


def _too_large_rv(code: int, got) -> bool:
    """The 504 kube-apiserver's watch cache answers a read at a resourceVersion it has not reached (its
    Timeout Status with a retry hint): an answer of the contract, not a server error."""
    return code == 504 and isinstance(got, dict) and got.get("reason") == "Timeout" \
        and "Too large resource version" in got.get("message", "")


class Fuzzer:
    def __init__(self, raw: Raw, kinds: list | None = None):
        """`kinds`: the plurals to fuzz (default all of KINDS)."""
        self.raw = raw
        self.kinds = [k for k in KINDS if kinds is None or k[1] in kinds]
        assert self.kinds, kinds
        self.codes: collections.Counter = collections.Counter()
        self.requests = 0
        self.slowest = 0.0
        self.slowest_request = ""
        #: the request before the current one: what a slow answer may be paying for (its watchers, controllers)
        self.previous = ""
        #: how often each of ORACLES judged an answer (a fixed run must judge by each of them)
        self.armed: collections.Counter = collections.Counter()
        #: the kind (plural), mutation and verb of the request `requests` drew last; how often each was checked,
        #: by ("kind" | "mutation" | "verb", its name)
        self.drawing: tuple = ()
        self.drawn: collections.Counter = collections.Counter()
        self._seeded: set[str] = set()
        code = raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})[0]
        assert code in (201, 409), code
        self._install_crds()
        self.schemas = Schemas(raw, self.kinds)

    def _install_crds(self) -> None:
        """The CRDs of the fuzzed custom resources, applied and served (their OpenAPI published) before fuzzing."""
        wanted = {k[0] for k in self.kinds}
        for crd in crds():
            spec = crd["spec"]
            gv = f"apis/{spec['group']}/{spec['versions'][0]['name']}"
            if gv not in wanted:
                continue
            code, _, got = self.raw.request(
                "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
                "?fieldManager=nanokube-fuzz-setup&force=true", json.dumps(crd), "application/apply-patch+yaml")
            assert code in (200, 201), got
            deadline = time.monotonic() + 30
            while gv not in self.raw.request("GET", "/openapi/v3")[2]["paths"]:
                assert time.monotonic() < deadline, f"{gv} is not published"
                time.sleep(0.1)

    def base(self, gv: str, plural: str) -> str:
        return f"/{gv}/{plural}" if plural in CLUSTER_SCOPED else f"/{gv}/namespaces/{NS}/{plural}"

    @staticmethod
    def _names(gv: str, plural: str) -> tuple[str, str] | None:
        return NAMES.get(f"{gv.split('/')[-2]}/{plural}") or NAMES.get(plural)

    def seed_name(self, gv: str, plural: str) -> str:
        names = self._names(gv, plural)
        return names[0] if names else f"fuzz-seed-{plural}"

    def fresh_name(self, gv: str, plural: str, n: int) -> str:
        names = self._names(gv, plural)
        return names[1].format(n=n) if names else f"fuzz-{n}"

    def send(self, method: str, path: str, body=None, ctype: str | None = "application/json", query: dict | None = None,
             headers: dict | None = None):
        url = path + ("?" + urlencode(query) if query else "")
        start = time.monotonic()
        try:
            if (query or {}).get("watch"):
                code, headers, got = self._watch(url, headers)
            else:
                code, headers, got = self.raw.request(method, url, body, ctype,
                                                      headers={"User-Agent": f"{MANAGER}/1", **(headers or {})})
        except TimeoutError:  # the server hung (its loop blocked): a failure like a slow answer, not a crash
            raise AssertionError(f"{method} {url} got no answer in {time.monotonic() - start:.0f}s "
                                 f"(the request before: {self.previous})") from None
        except (ConnectionError, http.client.HTTPException) as e:  # the connection dropped: no answer either
            raise AssertionError(f"{method} {url} got no answer: {e!r} (the request before: {self.previous})") from None
        took = time.monotonic() - start
        if code >= 400 and isinstance(got, bytes) and headers.get("Content-Type", "").startswith("application/yaml"):
            got = yaml.safe_load(got)
        if code >= 400 and isinstance(got, bytes) and headers.get("Content-Type", "").startswith("application/vnd.kubernetes.protobuf"):
            got = protobuf.decode(got)  # an error negotiated as protobuf is a protobuf Status
        self.requests += 1
        self.codes[code] += 1
        if took > self.slowest:
            self.slowest, self.slowest_request = took, f"{method} {url} ({len(body or '')} bytes)"
        previous, self.previous = self.previous, f"{method} {url} {str(body)[:200]} answered {code}"
        assert took < SLOW, f"{method} {url} took {took:.1f}s (the request before: {previous})"
        assert code < 500 or _too_large_rv(code, got), f"{method} {url} {str(body)[:300]} -> {code} {got}"
        if code >= 400:
            assert isinstance(got, dict) and got.get("kind") == "Status" and got.get("code") == code, \
                f"{method} {url} -> {code} is not a Status: {str(got)[:300]}"
        return code, got

    def _watch(self, url: str, headers: dict | None = None):
        """A watch's answer up to its headers (its error body when refused), on a connection of its own that is
        then closed: the stream is not read, so the server must notice the client going away."""
        conn = http.client.HTTPSConnection(self.raw.host, self.raw.port, context=self.raw.ctx, timeout=NO_ANSWER)
        try:
            conn.request("GET", url, headers={"User-Agent": f"{MANAGER}/1", "Accept": "application/json", **(headers or {})})
            r = conn.getresponse()
            return r.status, r.headers, json.loads(r.read()) if r.status >= 400 else b""
        finally:
            conn.close()

    def ensure_seeds(self) -> None:
        """Every kind's seed object exists with its seed content."""
        for gv, plural, kind, spec in self.kinds:
            base, name = self.base(gv, plural), self.seed_name(gv, plural)
            code, _ = self.send("GET", f"{base}/{name}")
            if code == 404:
                code, got = self.send("POST", base, seed_object(gv, kind, name, spec))
                assert code == 201, got

    def check(self, request) -> None:
        method, path, query, body, ctype, target, dry, *headers = request
        self.drawn.update(zip(("kind", "mutation", "verb"), self.drawing))
        if method == "PAGE":
            self._page(path, query, body)
            return
        if method == "GRACE":
            self._grace(path, body, query["where"], query["grace"])
            return
        base = path if target is None else path[:path.index(f"/{target}")]
        before = None
        if target is not None:
            code, got = self.send("GET", f"{base}/{target}")
            before = got if code == 200 else None
        code, got = self.send(method, path, body, ctype, query, headers[0] if headers else None)
        collection = path in {self.base(gv, plural) for gv, plural, _, _ in self.kinds}
        # (a GET of one object, ?watch or not, is a get: its label selector is not read, as upstream's
        # RequestInfo makes a named request's verb get and GetResource decodes only GetOptions)
        if method == "GET" and collection and (query or {}).get("labelSelector") in INVALID_LABEL_SELECTORS:
            self.armed["invalid label selector"] += 1
            assert code == 400, f"labelSelector {query['labelSelector'][:60]!r} on {path} answered {code}, not 400"
        if method == "GET" and (query or {}).get("continue") in TAMPERED_CONTINUE and set(query) <= {"limit", "continue"}:
            self.armed["tampered continue"] += 1
            assert code == 400, f"continue {query['continue']!r} on {path} answered {code}, not 400"
        self._oracles(method, path, query or {}, body, code, got, before, collection, headers[0] if headers else {})
        if code >= 400:
            if before is not None:
                self.armed["refused write"] += 1
                code_after, after = self.send("GET", f"{base}/{target}")
                assert code_after == 200, f"refused {method} {path} removed {target}"
                assert _stable(after) == _stable(before) or _ours(after) == _ours(before), \
                    f"refused {method} {path} changed {target}: {_changes(_stable(before), _stable(after))}"
            return
        name = (got.get("metadata") or {}).get("name") if isinstance(got, dict) else None
        if dry and name and method in ("POST", "PUT", "PATCH") and got.get("kind") not in CONVERTED_KINDS:
            self._anew(base, got)  # (what a dry run answers is what it would have stored, unless converted)
        if dry or not name or method == "GET":
            return
        probe = PROBES.get(base.rsplit("/", 1)[-1])
        if probe is not None:
            self.send("POST", probe[0], probe[1], "application/json", {"dryRun": "All"})
        url = f"{base}/{quote(name, safe='')}"  # RBAC names are any path segment (spaces, non-ASCII)
        code, stored = self.send("GET", url)
        if code == 200:  # (a delete-on-update may have removed it)
            self.armed["re-validates"] += 1
            code, again = self.send("PUT", url, stored, "application/json", {"dryRun": "All"})
            assert code in (200, 409), f"stored {name} does not re-validate: {code} {str(again)[:400]}"
            self._anew(base, stored)
        if target is None:
            self.send("DELETE", url, None, None, {"gracePeriodSeconds": "0"})
        else:
            self._reseed(base, target)

    def _anew(self, base: str, stored: dict) -> None:
        """A custom resource accepted (stored, or answered by a dry run) is accepted as a new object too, where no
        ratcheting keeps a value an update left unchanged."""
        if base.rsplit("/", 1)[-1] not in CUSTOM or not isinstance(stored.get("metadata"), dict) or \
                stored["metadata"].get("deletionTimestamp"):
            return
        self.armed["custom resource anew"] += 1
        fresh = {**stored, "metadata": {k: v for k, v in stored["metadata"].items() if k in ("labels", "annotations")}}
        fresh["metadata"]["name"] = "fuzz-again"
        code, again = self.send("POST", base, fresh, "application/json", {"dryRun": "All"})
        assert code == 201, f"{stored['metadata'].get('name')} is refused as a new object: {code} {str(again)[:400]}"

    def _oracles(self, method: str, path: str, query: dict, body, code: int, got, before: dict | None, collection: bool,
                 headers: dict) -> None:
        """What upstream answers whatever the object: a doubled slash matches no route; a dryRun other than All,
        a list's sendInitialEvents and a delete's precondition the object does not meet are refused; a 2xx
        answer asked for as a Table or PartialObjectMetadata(List) is one (a Status aside), and
        PartialObjectMetadata of a list or PartialObjectMetadataList of one object is a 406."""
        what = f"{method} {path} {str(query)[:200]} -> {code} {str(got)[:200]}"
        if "//" in path[1:].split("/proxy/")[0]:
            self.armed["doubled slash"] += 1
            assert code == 404, f"a doubled slash is routed: {what}"
        writes = method in ("POST", "PUT", "PATCH") or method == "DELETE" and not body
        if writes and "dryRun" in query and query["dryRun"] != "All":
            self.armed["dryRun not All"] += 1
            assert code >= 400, f"dryRun {query['dryRun']!r} is not refused: {what}"
        if query.get("fieldValidation") == "Strict" and isinstance(body, str) and method in ("POST", "PUT", "PATCH") and \
                _repeats(body):
            self.armed["repeated key under Strict"] += 1
            assert code >= 400, f"a repeated key is not refused under Strict: {what}"
        if method == "PUT" and isinstance(body, str) and not _names(body):
            self.armed["update naming no object"] += 1
            assert code >= 400, f"an update that names no object is not refused: {what}"
        if method == "GET" and collection and "sendInitialEvents" in query and not query.get("watch"):
            self.armed["list's sendInitialEvents"] += 1
            assert code >= 400, f"a list's sendInitialEvents is not refused: {what}"
        sub = path.rsplit("/", 1)[-1]
        named = _options(body) if method == "POST" and sub in NAMED_CREATES else None
        md = named.get("metadata") if isinstance(named, dict) else None
        if isinstance(md, dict) and (md.get("namespace") not in (None, "", NS) or md.get("name") != path.split("/")[-2] and
                                     (NAMED_CREATES[sub] or md.get("name") not in (None, ""))):
            self.armed["subresource naming another object"] += 1
            assert code >= 400, f"a {sub} naming another object is not refused: {what}"
        options = _options(body) if method == "DELETE" and before is not None else None
        pre = options.get("preconditions") if isinstance(options, dict) else None
        if isinstance(pre, dict):
            md = before.get("metadata") or {}
            if pre.get("uid") is not None and pre["uid"] != md.get("uid") or \
                    pre.get("resourceVersion") is not None and pre["resourceVersion"] != md.get("resourceVersion"):
                self.armed["unmet precondition"] += 1
                assert code >= 400, f"an unmet precondition is not refused: {what}"
        want = CONVERTED.get(headers.get("Accept", ""))
        if want is None or query.get("watch") or not isinstance(got, dict) or got.get("kind") == "Status" and code < 300:
            return
        one = not collection and path.rsplit("/", 1)[0] in {self.base(gv, plural) for gv, plural, _, _ in self.kinds}
        listed = collection and method in ("GET", "DELETE")
        if want == "PartialObjectMetadataList" and (one or collection and method == "POST") or \
                want == "PartialObjectMetadata" and listed:
            self.armed["conversion refused"] += 1
            # (a collection DELETE the resource does not serve, as namespaces', is the router's 405, before negotiation)
            assert code == 406 or code == 405 and method == "DELETE" and collection, \
                f"{want} of {'a list' if listed else 'one object'} is not a 406: {what}"
        elif code < 300 and (one or listed or collection and method == "POST"):
            self.armed["conversion"] += 1
            assert got.get("kind") == want, f"asked for {want}: {what}"

    def _grace(self, base: str, pod: str, where: str, grace) -> None:
        """A pod bound to a node deleted (or evicted) with a grace period of any size, then at once: the
        deletion's mark is a date whatever the period (send's contract: no 5xx)."""
        code, got = self.send("POST", base, pod)
        if code != 201:
            return
        name = got["metadata"]["name"]
        options = json.dumps({"gracePeriodSeconds": grace})
        if where == "eviction":
            self.send("POST", f"{base}/{name}/eviction", json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                                                                      "metadata": {"name": name},
                                                                      "deleteOptions": {"gracePeriodSeconds": grace}}))
        else:
            self.send("DELETE", f"{base}/{name}", options)
        self.send("DELETE", f"{base}/{name}", json.dumps({"gracePeriodSeconds": 0}))

    def _page(self, base: str, query: dict, other: str) -> None:
        """A first page's continue token, read again with other options or at another kind's path: a token
        with a resourceVersion other than 0 is a 400, and nothing is a 5xx (send's contract). Where `base`
        holds one object (no token), the namespace's ConfigMaps give one (the seed and kube-root-ca.crt):
        which kinds hold two objects depends on what the controllers did by then, so without it whether the
        fixed run's pages met a token at all varied from run to run."""
        token = None
        for listed in (base, f"/api/v1/namespaces/{NS}/configmaps"):
            code, first = self.send("GET", listed, None, None, {"limit": "1"})
            token = (first.get("metadata") or {}).get("continue") if code == 200 and isinstance(first, dict) else None
            if token:
                break
        if not token:
            return
        query = {**query, "continue": token}
        code, got = self.send("GET", other, None, None, query)
        if query.get("resourceVersion") not in (None, "", "0") and query.get("watch") != "1":
            self.armed["continue beside a resourceVersion"] += 1
            assert code >= 400, f"continue with resourceVersion {query['resourceVersion']!r} answered {code}: {str(got)[:200]}"

    def _reseed(self, base: str, name: str) -> None:
        """Put an accepted change's target back to its seed, so later refused writes are compared to a known state.
        A conflict (a controller's status write in between) is tried again: a ReplicaSet seed left at 2^31
        replicas made ~200,000 pods in run 1 of the fuzz helper's session until the server stalled 20 s."""
        gv, plural, kind, spec = next(k for k in KINDS if self.base(k[0], k[1]) == base)
        for _ in range(5):
            code, cur = self.send("GET", f"{base}/{name}")
            body = seed_object(gv, kind, name, spec)
            if code != 200:
                self.send("POST", base, body)
                return
            if cur["metadata"].get("deletionTimestamp"):
                return
            body["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            if cur["metadata"].get("finalizers"):  # kept: controllers add theirs
                body["metadata"]["finalizers"] = cur["metadata"]["finalizers"]
            if plural == "services":  # allocated fields may not be cleared
                body["spec"] = {**cur["spec"], **body["spec"]}
            if self.send("PUT", f"{base}/{name}", body)[0] != 409:
                return

    def histogram(self) -> str:
        return ", ".join(f"{c}: {n}" for c, n in sorted(self.codes.items()))
