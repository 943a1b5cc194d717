"""Fuzz the API server's patch, apply, subresource and query paths for as long as asked (fuzz58).

scripts/fuzz.py draws hostile object bodies; this one draws what is done to an object already stored, for every
kind discovery lists (the seeded ones of tests/e2e/fuzz_seeds.py: built-in kinds and custom resources, the
LeaderWorkerSet CRD of ../shared/data/crds among them; the rest are read, listed and patched where nothing is):

- strategic merge patches at a random place of the stored object: `$patch` (delete, replace, merge, nonsense),
  `$retainKeys`, `$setElementOrder/f` and `$deleteFromPrimitiveList/f` of the right and wrong types, lists keyed
  by their schema's merge key with duplicate items, items without the key and delete directives among them;
- JSON patches: pointers with `~0`/`~1`, `-`, indexes out of range or not canonical, `test`/`move`/`copy` of a
  large value, thousands of operations, a failing `test` after valid changes (nothing of it may be kept);
- server-side apply with odd managedFields in the body, odd fieldManagers and force values, and a forced
  conflict: a field applied by one manager and then another (a 409 naming the field, then taken with force);
  apply bodies in YAML and CBOR;
- subresources (status, scale, ephemeralcontainers, resize, binding, eviction, approval, token) under each verb;
- fieldValidation Strict/Warn/Ignore with unknown and duplicate fields; dryRun;
- lists, gets and watches with out-of-range limit, forged continue tokens, resourceVersion and
  resourceVersionMatch combinations, timeoutSeconds, sendInitialEvents, allowWatchBookmarks; answers asked in
  YAML, protobuf and CBOR; numbers past int64 and float64, NaN-like quantities, unicode names and labels.

Oracle (each broken request is printed and written to --failures, one JSON line): no 5xx (upstream's 504 for a
resourceVersion not reached aside), every answer within --slow seconds (5), /readyz answers after each
request that broke one, every 4xx is a Status of upstream's shape (kind, apiVersion, status Failure, the
reason upstream gives that code, a 422's details naming the object and its causes' fields), the stored object
is unchanged after a 4xx (read before and after), an accepted object is accepted again as stored (GET, then a
dry-run PUT of it), and what upstream answers whatever the object: Strict refuses an unknown field of a built-in
kind, Warn answers one with a warning, a conflicting apply is a 409 whose causes name the field.

    .venv/bin/python scripts/fuzz_patch.py --up --minutes 10 --seed 1
"""

from __future__ import annotations

import argparse
import base64
import collections
import copy
import http.client
import json
import random
import re
import struct
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanokube.apiserver import protobuf_encode  # noqa: E402
from tests.e2e.conftest import start_cluster  # noqa: E402
from tests.e2e.fuzz_seeds import CREATE_ONLY, KINDS  # noqa: E402
from tests.e2e.fuzzing import (  # noqa: E402
    CUSTOM, NO_ANSWER, NS, SCALED, SUBRESOURCES, Fuzzer, _changes, _get, _ours, _paths, _pointer, _stable, seed_object,
)
from tests.e2e.logscan import component_failures, read_from  # noqa: E402
from tests.e2e.test_hardening import Raw  # noqa: E402

#: the reason upstream's errors give each code (k8s.io/apimachinery/pkg/api/errors)
REASONS = {400: {"BadRequest"}, 401: {"Unauthorized"}, 403: {"Forbidden"}, 404: {"NotFound"}, 405: {"MethodNotAllowed"},
           406: {"NotAcceptable"}, 409: {"Conflict", "AlreadyExists"}, 410: {"Expired", "Gone"},
           413: {"RequestEntityTooLarge"}, 415: {"UnsupportedMediaType"}, 422: {"Invalid"}, 429: {"TooManyRequests"}}
#: a field error's text as upstream's field.ErrorList writes it: where it is, the causes must name the fields
FIELD_ERROR = re.compile(r": (Invalid value|Required value|Unsupported value|Duplicate value|Forbidden|Too many|Too long|"
                         r"Not found)")
#: values a patch puts where a value goes: huge and odd numbers (written as JSON text, see Num), NaN-like
#: quantities, unicode
class Num(str):
    """A number written into the body as this text (json.dumps cannot write 1e400 or 2^70 as JSON numbers)."""


VALUES = [None, True, "", "x", "é", "\u212a", "\u202e", "🙂" * 70, "a" * 64, "a/b", "~0~1", "\x00", 0, -1, 1.5, [], {}, [None],
          Num("1e400"), Num("-1e400"), Num("1" + "0" * 30), Num("-9223372036854775809"), Num("9223372036854775808"),
          Num("18446744073709551616"), Num("1e-400"), Num("-0"), Num("1.0e+3"), Num("4.9e-324"), Num("2147483648"),
          "NaN", "Inf", "-Inf", "+Inf", "nan", "1e400", "0x10", "1E", "1Ei", "8Ei", "9Ei", ".5", "5.", "+1Mi", "1.5.5",
          "1e-400", "100000000000000000000000000000Ki", "-0", "1m", "0.0000000001", "1e3", "1 Gi", "１"]
#: label keys and values, names: unicode, limits, escapes
LABEL_KEYS = ["é", "a" * 63, "a" * 64, "example.com/" + "a" * 63, "x/y/z", "-a", "a_b.c-d", "ＡＢ", "a\u200bb", "~0/~1", "", "kubernetes.io/x"]
NAMES = ["é", "a" * 253, "a" * 254, "ＡＢ", "a.b", "-a", "a-", "..", "a%2Fb", "a b", "\u212a", "xn--e1a", "a" * 63 + "." + "b" * 63]
#: what a `$patch`, `$retainKeys`, `$setElementOrder` or `$deleteFromPrimitiveList` directive is given
DIRECTIVES = ["delete", "replace", "merge", "bogus", "", None, 1, True, [], {}, [None], ["x"], [1], [{}], {"a": 1}, "Delete"]
#: list and watch options of out-of-range or odd values
QUERY = {
    "limit": ["-1", "0", "1", "2", "abc", "1e3", "9223372036854775807", "9223372036854775808", "99999999999999999999", " 1",
              "1.5", ""],
    "resourceVersion": ["", "0", "1", "2", "abc", "-1", "99999999999", "18446744073709551616", "0x1", " 1", "1.0"],
    "resourceVersionMatch": ["", "Exact", "NotOlderThan", "bogus", "exact"],
    "timeoutSeconds": ["-1", "0", "1", "abc", "99999999999", "1.5", "9223372036854775808"],
    "sendInitialEvents": ["true", "false", "x", ""],
    "allowWatchBookmarks": ["true", "false", "x", "1"],
    "watch": ["1", "true", "false", "0", "x"],
    "labelSelector": ["é=é", "a in (é)", "a" * 64 + "=b", "app=x", "!app", "app in ()"],
    "fieldSelector": ["metadata.name=é", "metadata.name=" + "a" * 300, "metadata.namespace!=x", "spec.x=y"],
}
ACCEPTS = ["application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor", "application/json;stream=watch",
           "application/vnd.kubernetes.protobuf;stream=watch", "application/json, */*", "text/plain", "application/*"]
#: managedFields a body may carry (an apply's and an update's body)
MANAGED = [[], [{}], None, "x", [None], [{"manager": "x", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:bogus": {}}}],
           [{"manager": "x", "operation": "Bogus", "fieldsType": "FieldsV2", "fieldsV1": {}}],
           [{"manager": "x", "operation": "Update", "apiVersion": "v9", "time": "not a time", "fieldsType": "FieldsV1",
             "fieldsV1": "f:x"}],
           [{"manager": "a" * 300, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}],
           [{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"k:{bad json": {}}}],
           [{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"v:1": {}, "i:x": {}}}],
           [{"manager": "x", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}] * 3]
MANAGERS = ["", "a" * 128, "a" * 129, "é", "kubectl", "fuzz-a", "before-first-apply", "\x7f", "a b", "ÿ" * 100]
#: the merge keys of lists whose schema gives none (the fuzzer reads x-kubernetes-patch-merge-key where it is)
STATUS_KINDS = {"pods", "services", "nodes", "namespaces", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs",
                "cronjobs", "persistentvolumeclaims", "persistentvolumes", "replicationcontrollers", "resourcequotas",
                "horizontalpodautoscalers", "poddisruptionbudgets", "ingresses", "certificatesigningrequests", "resourceclaims",
                "customresourcedefinitions", "apiservices", "flowschemas", "prioritylevelconfigurations", "volumeattachments",
                "servicecidrs", "leaderworkersets", "widgets", "storageversionmigrations", "podcertificaterequests",
                "validatingadmissionpolicies", "networkpolicies", "storageversions", "podgroups", "workloads",
                "resourcepoolstatusrequests", "compositepodgroups"}
FAMILIES = ("strategic", "strategic", "strategic", "json", "json", "apply", "conflict", "merge", "subresource", "validation",
            "query", "query", "stream", "accept", "create", "update", "cbor", "missing", "stale")
PROTOBUF = "application/vnd.kubernetes.protobuf"
#: the annotation of the bookmark that ends a watch-list's initial events
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def dumps(value) -> str:
    """JSON text with each Num written as its own text."""
    marks: list[str] = []

    def mark(v):
        if isinstance(v, Num):
            marks.append(str(v))
            return f"\x01{len(marks) - 1}\x01"
        if isinstance(v, dict):
            return {k: mark(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mark(x) for x in v]
        return v

    text = json.dumps(mark(value), ensure_ascii=False)
    return re.sub(r'"\\u0001(\d+)\\u0001"', lambda m: marks[int(m.group(1))], text)


def cbor(value) -> bytes:
    """`value` in CBOR (RFC 8949) with the self-describing tag that upstream's CBOR serializer reads."""
    def head(major: int, n: int) -> bytes:
        if n < 24:
            return bytes([major << 5 | n])
        for size, fmt, extra in ((0xFF, ">B", 24), (0xFFFF, ">H", 25), (0xFFFFFFFF, ">I", 26)):
            if n <= size:
                return bytes([major << 5 | extra]) + struct.pack(fmt, n)
        return bytes([major << 5 | 27]) + struct.pack(">Q", n)

    def enc(v) -> bytes:
        if v is None:
            return b"\xf6"
        if v is True or v is False:
            return b"\xf5" if v else b"\xf4"
        if isinstance(v, int) and -(2**64) <= v < 2**64:
            return head(0, v) if v >= 0 else head(1, -1 - v)
        if isinstance(v, float):
            return b"\xfb" + struct.pack(">d", v)
        if isinstance(v, str):
            b = v.encode()
            return head(3, len(b)) + b
        if isinstance(v, list):
            return head(4, len(v)) + b"".join(enc(x) for x in v)
        if isinstance(v, dict):
            return head(5, len(v)) + b"".join(enc(k) + enc(x) for k, x in v.items())
        return enc(str(v))

    return b"\xd9\xd9\xf7" + enc(value)


class Watched(Raw):
    """Raw that keeps the last answer's headers (a Warn's warning is read from them)."""

    last_headers: dict = {}

    def request(self, method, path, body=None, ctype="application/json", headers=None):
        code, h, got = super().request(method, path, body, ctype, headers)
        self.last_headers = h
        return code, h, got


class PatchFuzzer(Fuzzer):
    """The seeds and plumbing of tests/e2e/fuzzing.py's Fuzzer, with this campaign's answers judged."""

    def __init__(self, raw: Raw, slow: float, kinds: list | None = None):
        super().__init__(raw, kinds)
        self.slow = slow
        self.judged: collections.Counter = collections.Counter()
        self.families: collections.Counter = collections.Counter()

    def send(self, method, path, body=None, ctype="application/json", query=None, headers=None):
        start = time.monotonic()
        if isinstance(body, str):
            body = body.encode()  # (http.client sends a str as Latin-1)
        code, got = super().send(method, path, body, ctype, query, headers)
        took = time.monotonic() - start
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
        what = f"{method} {path} {str(query or '')[:160]} {text[:300]}"
        assert took <= self.slow, f"{what} took {took:.1f}s"
        if code >= 400:
            self.status_shape(code, got, what)
        return code, got

    def status_shape(self, code: int, got: dict, what: str) -> None:
        """A 4xx Status as upstream writes one: its reason that of the code, a 422's details and causes."""
        self.judged["status shape"] += 1
        assert got.get("apiVersion") == "v1" and got.get("status") == "Failure", f"{what} -> {code} {str(got)[:300]}"
        if code in REASONS:
            assert got.get("reason") in REASONS[code], f"{what} -> {code} of reason {got.get('reason')!r}: {str(got)[:300]}"
        details = got.get("details")
        causes = (details or {}).get("causes") if isinstance(details, dict) else None
        if causes is not None:
            assert isinstance(causes, list) and all(isinstance(c, dict) and c.get("message") for c in causes), \
                f"{what} -> {code} causes of odd shape: {str(got)[:400]}"
        if code == 422 and FIELD_ERROR.search(got.get("message", "")) and "ListOptions" not in got.get("message", ""):
            self.judged["422 causes"] += 1
            assert causes and any(c.get("field") for c in causes), f"{what} -> 422 names no field: {str(got)[:400]}"

    def readyz(self) -> None:
        code, _, got = self.raw.request("GET", "/readyz")
        assert code == 200, f"/readyz answered {code} {str(got)[:200]}"


class Draw:
    """Requests drawn from a seeded random.Random against the stored object of a kind."""

    def __init__(self, fz: PatchFuzzer, rng: random.Random, unseeded: list[tuple[str, tuple]], families=FAMILIES):
        self.fz, self.r, self.families = fz, rng, families
        self.kinds = [k for k in fz.kinds if k[1] not in CREATE_ONLY]
        self.unseeded = unseeded

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def value(self):
        return copy.deepcopy(self.pick(VALUES))

    # -- the places of an object --------------------------------------------------------------------------------
    def places(self, obj: dict, want=(dict, list)) -> list[list]:
        return [p for p in _paths(obj, []) if isinstance(_get(obj, p), want) and "managedFields" not in p[:2]]

    def schema_at(self, gv: str, kind: str, path: list) -> dict:
        try:
            root = self.fz.schemas.kind(gv, kind)
        except LookupError:
            return {}
        return self.fz.schemas.resolve(self.fz.schemas.at(root, path))

    def merge_key(self, gv: str, kind: str, path: list, items: list) -> str | None:
        s = self.schema_at(gv, kind, path)
        key = s.get("x-kubernetes-patch-merge-key") or (s.get("x-kubernetes-list-map-keys") or [None])[0]
        if key is None and items and isinstance(items[0], dict) and "name" in items[0]:
            key = "name"
        return key

    # -- strategic merge patches ---------------------------------------------------------------------------------
    def strategic(self, gv: str, kind: str, obj: dict):
        """A strategic merge patch of directives at one place of `obj`, built from the path down."""
        path = self.pick(self.places(obj) or [[]])
        target = _get(obj, path)
        if isinstance(target, list):
            frag = self.list_items(gv, kind, path, target)
            return self.wrap(obj, path, frag, gv, kind)
        fields = sorted(target) or ["x"]
        lists = [f for f in fields if isinstance(target.get(f), list)] or fields
        f = self.pick(lists)
        how = self.r.randrange(6)
        if how == 0:
            frag = {"$patch": self.pick(DIRECTIVES)}
        elif how == 1:
            keep = self.r.sample(fields, self.r.randrange(len(fields) + 1)) + (["bogus"] if self.r.random() < .3 else [])
            frag = {"$retainKeys": self.pick([keep, keep, "x", [None], [1], {}, None, keep * 2])}
        elif how == 2:
            frag = {f"$setElementOrder/{f}": self.order(gv, kind, path + [f], target.get(f))}
        elif how == 3:
            cur = target.get(f) if isinstance(target.get(f), list) else []
            frag = {f"$deleteFromPrimitiveList/{f}": self.pick([cur, cur[:1] + ["x"], "x", {"a": 1}, [{"a": 1}], [None], [1, "x"],
                                                                 None, [[]]])}
        elif how == 4:
            frag = {self.pick(["$patch", "$retainKeys", "$setElementOrder", "$deleteFromPrimitiveList", "$bogus",
                               f"$setElementOrder/{f}/x", f"$deleteFromPrimitiveList/{'a' * 300}"]): self.pick(DIRECTIVES)}
        else:
            frag = {}
        if self.r.random() < .6 and isinstance(target.get(f), list):
            frag[f] = self.list_items(gv, kind, path + [f], target[f])
        elif self.r.random() < .5:
            frag[f] = self.value()
        return self.wrap(obj, path, frag, gv, kind)

    def order(self, gv, kind, path, cur):
        cur = cur if isinstance(cur, list) else []
        key = self.merge_key(gv, kind, path, cur)
        keyed = [{key: i.get(key)} for i in cur if isinstance(i, dict)] if key else list(cur)
        return self.pick([keyed, keyed * 2, keyed[::-1], keyed + [{key or "name": "absent"}], [{}], [{"other": 1}], [None],
                          "x", 1, {"a": 1}, [[]], keyed[:1]])

    def list_items(self, gv, kind, path, cur: list):
        """Items of a list: copies of the current ones, duplicated, without their merge key, with a delete
        directive, or of the wrong type."""
        key = self.merge_key(gv, kind, path, cur)
        items = copy.deepcopy(cur)
        how = self.r.randrange(7)
        if how == 0 and items:
            items = items + copy.deepcopy(items)
        elif how == 1 and items and isinstance(items[0], dict) and key:
            items[0].pop(key, None)
        elif how == 2 and items and isinstance(items[0], dict) and key:
            items = [{key: items[0].get(key), "$patch": self.pick(DIRECTIVES)}]
        elif how == 3:
            items = items + [self.value(), {"$patch": "replace"}]
        elif how == 4 and items and isinstance(items[0], dict):
            items = [{**items[0], key or "name": self.value()}]
        elif how == 5:
            items = [{"$patch": self.pick(["replace", "delete", "merge"])}] + items
        else:
            items = [self.value()] + items[1:]
        return items

    def wrap(self, obj, path, frag, gv, kind):
        """The patch that puts `frag` at `path`: maps as maps, a list index as a one-item list that keeps the
        item's merge key (so it merges into that item)."""
        for i in range(len(path) - 1, -1, -1):
            seg = path[i]
            if isinstance(seg, int):
                item = _get(obj, path[:i + 1])
                key = self.merge_key(gv, kind, path[:i], _get(obj, path[:i]))
                if isinstance(item, dict) and key and isinstance(frag, dict):
                    frag = {key: item.get(key), **frag}
                frag = [frag]
            else:
                frag = {seg: frag}
        return frag

    # -- JSON patches ------------------------------------------------------------------------------------------
    def pointer(self, obj) -> str:
        p = self.pick(_paths(obj, []))
        how = self.r.randrange(8)
        base = _pointer(p)
        target = _get(obj, p)
        if how == 0 and isinstance(target, list):
            return base + self.pick(["/-", f"/{len(target)}", f"/{len(target) + 1}", "/999999999999", "/-1", "/01", "/ 1", "/1e3"])
        if how == 1:
            return base + "/" + self.pick(["a~1b", "a~0b", "~", "~2", "~01", "é", "", "-", "a/b"])
        if how == 2:
            return self.pick(["", "/", "metadata", "//", "/metadata//name", "/metadata/annotations/a~1b~0c", "/~1", "/-"])
        return base

    def json_patch(self, obj: dict):
        ops = []
        for _ in range(self.r.randrange(1, 5)):
            op = self.pick(["add", "remove", "replace", "test", "move", "copy", "bogus", "ADD", "", None])
            item = {"op": op, "path": self.pointer(obj)}
            if op in ("add", "replace", "test", "bogus") or self.r.random() < .2:
                item["value"] = self.value()
            if op in ("move", "copy") or self.r.random() < .1:
                item["from"] = self.pointer(obj)
            if self.r.random() < .1:
                item.pop("path")
            ops.append(item)
        how = self.r.randrange(6)
        name = obj["metadata"]["name"]
        if how == 0:  # thousands of operations
            n = self.pick([1000, 5000, 20000])
            ops = [{"op": "add", "path": "/metadata/annotations", "value": {}}] + [
                {"op": "add", "path": f"/metadata/annotations/k{i % 50}", "value": "v"} for i in range(n)] + \
                [{"op": "test", "path": "/metadata/name", "value": name}] * 100
        elif how == 1:  # a large value tested, moved and copied
            big = "x" * self.pick([100_000, 1_000_000, 2_500_000])
            ops = [{"op": "add", "path": "/metadata/annotations", "value": {"big": big}},
                   {"op": "test", "path": "/metadata/annotations/big", "value": big},
                   {"op": self.pick(["copy", "move"]), "from": "/metadata/annotations/big", "path": "/metadata/annotations/b2"},
                   {"op": "copy", "from": "/metadata/annotations", "path": "/metadata/labels"}]
        elif how == 2:  # valid changes, then a test that fails: nothing may be kept
            ops = [{"op": "add", "path": "/metadata/labels", "value": {"fuzz": "changed"}},
                   {"op": "test", "path": "/metadata/name", "value": name + "-not"}]
        elif how == 3:  # escapes of a key holding ~ and /
            ops = [{"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1", "a~b": "2"}},
                   {"op": self.pick(["remove", "test", "replace", "move"]), "path": self.pick(["/metadata/annotations/a~1b",
                    "/metadata/annotations/a~0b", "/metadata/annotations/a/b", "/metadata/annotations/a~b"]),
                    "value": "1", "from": "/metadata/annotations/a~0b"}]
        return ops

    # -- server-side apply ------------------------------------------------------------------------------------
    def applied(self, gv, kind, obj: dict) -> dict:
        """`obj` as an apply configuration: the server's fields dropped, odd managedFields or a value put in."""
        body = copy.deepcopy(obj)
        md = body["metadata"]
        for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            md.pop(k, None)
        body.pop("status", None)
        if self.r.random() < .4:
            md["managedFields"] = copy.deepcopy(self.pick(MANAGED))
        if self.r.random() < .5:
            places = [p for p in _paths(body, []) if p and "metadata" != p[0]]
            if places:
                p = self.pick(places)
                parent = _get(body, p[:-1])
                parent[p[-1]] = self.value()
        if self.r.random() < .2:
            md["labels"] = {self.pick(LABEL_KEYS): self.pick(["", "é", "a" * 63, "a" * 64, "x"])}
        return body

    def draw(self):
        """One request: (family, a callable that sends it and judges its answers)."""
        family = self.pick(self.families)
        if family == "missing" and self.unseeded:
            return family, self.missing()
        if family == "missing":
            family = "strategic"
        gv, plural, kind, spec = self.pick(self.kinds)
        base = self.fz.base(gv, plural)
        name = self.fz.seed_name(gv, plural)
        return family, Case(self, family, gv, plural, kind, spec, base, name)

    def missing(self):
        """A kind discovery lists without a seed: its collection read (or watched) with odd options, an object that is
        not there patched. A watch of a resource that lists but does not watch is refused (upstream's ListResource:
        405 once the options are judged, or their 400 or 422), never answered."""
        path, verbs = self.pick(self.unseeded)

        def run(fz: PatchFuzzer):
            fz.families["missing"] += 1
            q = {k: self.pick(v) for k, v in QUERY.items() if self.r.random() < .3 and k != "watch"}
            if self.r.random() < .3:
                q.update(watch="1", timeoutSeconds="1")
            code, got = fz.send("GET", path, None, None, q)
            if "watch" in q and "list" in verbs and "watch" not in verbs:
                fz.judged["watch of a list-only resource"] += 1
                assert code in (400, 405, 422), f"watch of {path} (verbs {verbs}) answered {code}: {str(got)[:300]}"
                assert code != 405 or got["message"].startswith("watch is not supported on resources of kind"), got
            body = self.pick([{"metadata": {"labels": {"a": "b"}}}, [{"op": "add", "path": "/metadata/labels", "value": {}}]])
            ctype = "application/json-patch+json" if isinstance(body, list) else self.pick(
                ["application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"])
            fz.send("PATCH", f"{path}/fuzz-missing", dumps(body), ctype,
                    {"fieldManager": "fuzz"} if ctype.startswith("application/apply") else None)
        return run


class Case:
    """A drawn request of one family against one kind's seed, sent and judged by `__call__`."""

    def __init__(self, d: Draw, family, gv, plural, kind, spec, base, name):
        self.d, self.family, self.gv, self.plural, self.kind, self.spec, self.base, self.name = \
            d, family, gv, plural, kind, spec, base, name
        self.url = f"{base}/{quote(name, safe='')}"

    def __repr__(self) -> str:
        return f"{self.family} {self.url}"

    def __call__(self, fz: PatchFuzzer) -> None:
        fz.families[self.family] += 1
        code, stored = fz.send("GET", self.url)
        if code != 200:
            fz.send("POST", self.base, seed_object(self.gv, self.kind, self.name, self.spec))
            return
        getattr(self, self.family)(fz, stored)

    # each family ---------------------------------------------------------------------------------------------
    def query_for_write(self) -> dict:
        r = self.d.r
        q = {}
        if r.random() < .4:
            q["dryRun"] = self.d.pick(["All", "All", "all", "", "None"])
        if r.random() < .3:
            q["fieldValidation"] = self.d.pick(["Strict", "Warn", "Ignore", "strict", "", "bogus"])
        return q

    def write(self, fz, method, path, body, ctype, query, stored) -> tuple[int, object]:
        """Send a write of the seed and judge it: a refused one changed nothing, an accepted one re-validates."""
        text = body if isinstance(body, (str, bytes)) else dumps(body)
        code, got = fz.send(method, path, text, ctype, query)
        if query.get("dryRun") not in (None, "All") and code < 400:
            raise AssertionError(f"dryRun={query['dryRun']!r} accepted: {method} {path} -> {code}")
        if code >= 400:
            if self.plural in CUSTOM:  # (a custom resource is decoded into no Go struct, whatever the verb)
                fz.judged["custom resource has no Go struct"] += 1
                assert "into Go struct field struct." not in got.get("message", ""), f"{method} {path} -> {code} {got}"
            self.unchanged(fz, stored, f"{method} {path} {query} {text[:200]!r} -> {code}")
        else:
            if isinstance(got, dict) and got.get("kind") == self.kind:
                self.in_range(fz, got, f"{method} {path} {text[:200]!r} -> {code}")
            if query.get("dryRun") != "All":
                self.revalidate(fz)
        return code, got

    def in_range(self, fz, obj: dict, what: str) -> None:
        """An accepted object holds no integer past its schema format's range (int32, int64): a built-in kind's
        Go decoder refuses one, a custom resource's validation too."""
        fz.judged["accepted integers in their format's range"] += 1
        try:
            root = fz.schemas.kind(self.gv, self.kind)
        except LookupError:
            return
        for path, value, fmt in integers(fz.schemas, root, obj, []):
            lo, hi = INT_RANGES.get(fmt, INT_RANGES["int64"])
            assert lo <= value <= hi, f"{what}: {'.'.join(map(str, path))} = {value} is past {fmt or 'int64'}"

    def unchanged(self, fz, before: dict, what: str) -> None:
        fz.judged["refused write changes nothing"] += 1
        code, after = fz.send("GET", self.url)
        assert code == 200, f"{what}: {self.url} is gone"
        assert _stable(after) == _stable(before) or _ours(after) == _ours(before), \
            f"{what} changed {self.url}: {_changes(_stable(before), _stable(after))}"

    def revalidate(self, fz) -> None:
        code, stored = fz.send("GET", self.url)
        if code == 200 and not stored["metadata"].get("deletionTimestamp"):
            fz.judged["accepted re-validates"] += 1
            code, again = fz.send("PUT", self.url, dumps(stored), "application/json", {"dryRun": "All"})
            assert code in (200, 409), f"stored {self.url} does not re-validate: {code} {str(again)[:400]}"
        fz._reseed(self.base, self.name)

    def strategic(self, fz, stored):
        patch = self.d.strategic(self.gv, self.kind, stored)  # (a custom resource refuses one: a 415)
        self.write(fz, "PATCH", self.url, patch, "application/strategic-merge-patch+json", self.query_for_write(), stored)

    def json(self, fz, stored):
        self.write(fz, "PATCH", self.url, self.d.json_patch(stored), "application/json-patch+json", self.query_for_write(), stored)

    def merge(self, fz, stored):
        d = self.d
        p = d.pick(d.places(stored, (dict,)) or [[]])
        patch = {"metadata": {"labels": {d.pick(LABEL_KEYS): d.pick(["é", "", "a" * 64, "x"])}}} if d.r.random() < .3 else {}
        frag = {d.pick(sorted(_get(stored, p)) or ["x"]): d.value()}
        for seg in reversed(p):
            frag = {seg: frag} if isinstance(seg, str) else [frag]
        if isinstance(frag, dict):
            patch = {**frag, **patch}
        self.write(fz, "PATCH", self.url, patch, "application/merge-patch+json", self.query_for_write(), stored)

    def apply(self, fz, stored, ctype="application/apply-patch+yaml"):
        d = self.d
        q = {**self.query_for_write(), "fieldManager": d.pick(MANAGERS)}
        if d.r.random() < .5:
            q["force"] = d.pick(["true", "false", "x", ""])
        if d.r.random() < .1:
            q.pop("fieldManager")
        body = d.applied(self.gv, self.kind, stored)
        text = cbor(json.loads(dumps(body))) if ctype.endswith("cbor") else dumps(body)
        code, got = self.write(fz, "PATCH", self.url, text, ctype, q, stored)
        if ctype.endswith("cbor"):
            fz.judged["apply-patch+cbor refused"] += 1
            assert code == 415, f"apply-patch+cbor answered {code} (upstream serves no CBOR by default: a 415)"
        if "fieldManager" not in q or len(q.get("fieldManager", "")) > 128:
            fz.judged["apply needs a fieldManager"] += 1
            assert code >= 400, f"an apply with fieldManager {q.get('fieldManager')!r} was accepted"

    def cbor(self, fz, stored):
        self.apply(fz, stored, "application/apply-patch+cbor")

    def conflict(self, fz, stored):
        """A label applied by one manager, then another value of it by another: a 409 that names the field, then
        taken with force=true."""
        key = "fuzz58-" + self.d.pick(["a", "é", "b.c/d"]).replace("é", "e")
        head = {"apiVersion": stored["apiVersion"], "kind": stored["kind"], "metadata": {"name": self.name}}
        first = {**head, "metadata": {**head["metadata"], "labels": {key: "one"}}}
        code, got = fz.send("PATCH", self.url, dumps(first), "application/apply-patch+yaml", {"fieldManager": "fuzz58-a"})
        if code >= 400:
            return
        second = {**head, "metadata": {**head["metadata"], "labels": {key: "two"}}}
        code, got = fz.send("PATCH", self.url, dumps(second), "application/apply-patch+yaml", {"fieldManager": "fuzz58-b"})
        fz.judged["conflicting apply"] += 1
        assert code == 409, f"a conflicting apply answered {code}: {str(got)[:300]}"
        causes = (got.get("details") or {}).get("causes") or []
        assert got.get("reason") == "Conflict" and any(c.get("field") == f".metadata.labels.{key}" and
                                                       c.get("reason") == "FieldManagerConflict" for c in causes), \
            f"a conflicting apply's Status names not the field: {str(got)[:500]}"
        code, got = fz.send("PATCH", self.url, dumps(second), "application/apply-patch+yaml",
                            {"fieldManager": "fuzz58-b", "force": "true"})
        assert code == 200 and got["metadata"]["labels"].get(key) == "two", f"a forced apply answered {code}: {str(got)[:300]}"
        fz._reseed(self.base, self.name)

    def validation(self, fz, stored):
        """A write of an unknown and a repeated field under a fieldValidation."""
        d = self.d
        fv = d.pick(["Strict", "Warn", "Ignore"])
        unknown = d.r.random() < .7
        how = d.pick(["update", "merge", "strategic", "json"])
        body = copy.deepcopy(stored)
        place = d.pick([p for p in d.places(body, (dict,)) if ("metadata" not in p[:1] or p == ["metadata"]) and
                        self.structured(p)] or [[]])
        field = "fuzz58Unknown"
        if unknown:
            _get(body, place)[field] = 1
        text = dumps(body if how == "update" else {} if how == "merge" else {})
        if how == "merge" or how == "strategic":
            patch: object = {field: 1} if unknown else {}
            for seg in reversed(place):
                patch = {seg: patch} if isinstance(seg, str) else [patch]
            text = dumps(patch if isinstance(patch, dict) else {})
            unknown = unknown and isinstance(patch, dict)
        elif how == "json":
            text = dumps([{"op": "add", "path": _pointer(place + [field]), "value": 1}] if unknown else [])
        if d.r.random() < .4 and text.startswith("{") and how != "json":
            text = text[:-1] + (', ' if len(text) > 2 else '') + f'"kind": "{self.kind}"}}'
        ctype = {"update": "application/json", "merge": "application/merge-patch+json",
                 "strategic": "application/strategic-merge-patch+json", "json": "application/json-patch+json"}[how]
        code, got = self.write(fz, "PUT" if how == "update" else "PATCH", self.url, text, ctype,
                               {"fieldValidation": fv, "dryRun": "All"}, stored)
        custom = self.plural in CUSTOM or self.plural == "customresourcedefinitions"
        under_list = any(isinstance(s, int) for s in place)
        if not unknown or custom or under_list or code in (409, 415):
            return
        pointer = ".".join(str(s) for s in place + [field])
        if fv == "Strict":
            fz.judged["Strict unknown field"] += 1
            # (an update's body is refused as it is decoded, a 400; a patch's as the patched object is: upstream's
            # 422 of the field "patch")
            assert code == (400 if how == "update" else 422) and f'unknown field "{pointer}"' in got.get("message", ""), \
                f"Strict {how} of unknown {pointer} answered {code}: {str(got)[:300]}"
        elif fv == "Warn" and code < 300:
            fz.judged["Warn unknown field"] += 1
            warning = " ".join(fz.raw.last_headers.get_all("Warning") or [])
            assert field in warning, f"Warn {how} of unknown {pointer} warned {warning!r}"

    def structured(self, path: list) -> bool:
        """Whether the value at `path` is an object of declared fields (not a map, nor one that keeps unknown fields)."""
        s = self.d.schema_at(self.gv, self.kind, path)
        return bool(s.get("properties")) and not s.get("additionalProperties") and \
            not s.get("x-kubernetes-preserve-unknown-fields")

    def subresource(self, fz, stored):
        d = self.d
        subs = []
        if self.plural in STATUS_KINDS:
            subs.append(("status", None))
        if self.plural in SCALED:
            subs.append(("scale", None))
        subs += [(s, (ctype, body)) for s, ctype, body in SUBRESOURCES.get(self.plural, [])]
        if not subs:
            return self.strategic(fz, stored)
        sub, given = d.pick(subs)
        url = f"{self.url}/{sub}"
        q = self.query_for_write()
        if sub in ("eviction", "binding", "token"):
            q["dryRun"] = "All"
            body = copy.deepcopy(given[1])
            if d.r.random() < .7:
                p = d.pick(_paths(body, [])[1:])
                _get(body, p[:-1])[p[-1]] = d.value()
            return self.write(fz, "POST", url, body, d.pick([given[0], "application/yaml", "application/json"]), q, stored)
        code, cur = fz.send("GET", url) if sub in ("status", "scale") else (200, stored)
        if code != 200:
            return
        verb = d.pick(["PUT", "strategic", "merge", "json", "apply"])
        if verb == "PUT":
            body = copy.deepcopy(cur)
            p = d.pick(_paths(body, [])[1:])
            _get(body, p[:-1])[p[-1]] = d.value()
            return self.write(fz, "PUT", url, body, "application/json", q, stored)
        if verb == "json":
            return self.write(fz, "PATCH", url, d.json_patch(cur), "application/json-patch+json", q, stored)
        if verb == "apply":
            q["fieldManager"] = "fuzz58"
            return self.write(fz, "PATCH", url, d.applied(self.gv, self.kind, cur), "application/apply-patch+yaml", q, stored)
        patch = d.strategic(self.gv, self.kind, cur) if verb == "strategic" else \
            {"status": {d.pick(sorted(cur.get("status") or {"x": 1})): d.value()}}
        if sub == "scale":
            patch = {"spec": {"replicas": d.pick([Num("1e400"), -1, Num("2147483648"), "1", 1.5, None, 2])}}
        ctype = "application/strategic-merge-patch+json" if verb == "strategic" else "application/merge-patch+json"
        return self.write(fz, "PATCH", url, patch, ctype, q, stored)

    def query(self, fz, stored):
        """A list, get or watch of odd options (each read ends within --slow: a watch's timeoutSeconds is 1)."""
        d = self.d
        q = {k: d.pick(v) for k, v in QUERY.items() if d.r.random() < .35}
        if d.r.random() < .3:
            q["continue"] = self.forged_continue(fz)
        path = self.base if d.r.random() < .8 else self.url
        if q.get("watch") in ("1", "true") or d.r.random() < .2:
            q["watch"] = "1"
            q["timeoutSeconds"] = "1"
        accept = {"Accept": d.pick(ACCEPTS)} if d.r.random() < .3 and "watch" not in q else None
        code, got = fz.send("GET", path, None, None, q, accept)
        if path == self.base and not accept and "watch" not in q and q.get("resourceVersionMatch") and "resourceVersion" not in q \
                and "continue" not in q:
            fz.judged["resourceVersionMatch without resourceVersion"] += 1
            assert code in (400, 422), f"resourceVersionMatch alone answered {code}: {str(got)[:300]}"

    def stream(self, fz, stored):
        """A watch read to its end (timeoutSeconds=1; a watch-list's 2, time for its initial events on a loaded
        machine, within --slow): every line an event of upstream's types, an ERROR's object a
        Status, and a watch-list (sendInitialEvents with bookmarks) ends its initial events with the bookmark that
        says so, after an ADDED event of the seed."""
        d = self.d
        q = {"watch": "1", "timeoutSeconds": "1"}
        if d.r.random() < .5:
            q.update(timeoutSeconds="2", sendInitialEvents="true", resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true")
        for k in ("resourceVersion", "resourceVersionMatch", "allowWatchBookmarks", "sendInitialEvents", "labelSelector",
                  "fieldSelector"):
            if d.r.random() < .2:
                q[k] = d.pick(QUERY[k])
        if d.r.random() < .2:
            q["fieldSelector"] = f"metadata.name={self.name}"
        url = self.base + "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in q.items())
        conn = http.client.HTTPSConnection(fz.raw.host, fz.raw.port, context=fz.raw.ctx, timeout=NO_ANSWER)
        start = time.monotonic()
        try:
            conn.request("GET", url, headers={"Accept": "application/json", "User-Agent": "fuzz58/1"})
            r = conn.getresponse()
            body = r.read()
        finally:
            conn.close()
        took = time.monotonic() - start
        fz.requests += 1
        fz.codes[r.status] += 1
        what = f"watch {url} -> {r.status}"
        assert took <= fz.slow, f"{what} took {took:.1f}s"
        assert r.status < 500 or b"Too large resource version" in body, f"{what} {body[:300]!r}"
        if r.status >= 400:
            return fz.status_shape(r.status, json.loads(body), what)
        fz.judged["watch stream"] += 1
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
        for e in events:
            assert e.get("type") in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"), f"{what}: event {str(e)[:300]}"
            if e["type"] == "ERROR":
                assert (e.get("object") or {}).get("kind") == "Status", f"{what}: ERROR event {str(e)[:300]}"
        plain = set(q) == {"watch", "timeoutSeconds", "sendInitialEvents", "resourceVersionMatch", "allowWatchBookmarks"} \
            and q["sendInitialEvents"] == "true" and q["allowWatchBookmarks"] == "true" and q["resourceVersionMatch"] == "NotOlderThan"
        if plain and not any(e["type"] == "ERROR" for e in events):
            fz.judged["watch-list ends its initial events"] += 1
            ends = [i for i, e in enumerate(events) if e["type"] == "BOOKMARK" and
                    ((e["object"].get("metadata") or {}).get("annotations") or {}).get(INITIAL_EVENTS_END) == "true"]
            assert ends, f"{what}: no bookmark ends the initial events: {[e['type'] for e in events]}"
            names = {(e["object"].get("metadata") or {}).get("name") for e in events[:ends[0]] if e["type"] == "ADDED"}
            assert self.name in names, f"{what}: the initial events lack the seed {self.name}"

    def forged_continue(self, fz) -> str:
        """A continue token: a real first page's, one changed, or one made up."""
        code, first = fz.send("GET", self.base, None, None, {"limit": "1"})
        token = (first.get("metadata") or {}).get("continue") if code == 200 and isinstance(first, dict) else None
        made = {"v": "meta.k8s.io/v1", "rv": self.d.pick([1, 0, -1, 2**63, "1", None]),
                "start": self.d.pick(["a", "", "\x00", "../" * 5, "é" * 100, 1])}
        forged = base64.urlsafe_b64encode(json.dumps(made).encode()).decode().rstrip("=")  # (tokens are unpadded)
        if token and self.d.r.random() < .5:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            return self.d.pick([token, token[:-2], token + "x", base64.urlsafe_b64encode(raw[:-1]).decode().rstrip("="), forged])
        return forged

    def accept(self, fz, stored):
        accept = self.d.pick(ACCEPTS)
        path = self.d.pick([self.url, self.base, self.url + "/status"])
        fz.send("GET", path, None, None, None, {"Accept": accept})
        self.write(fz, "PATCH", self.url, {"metadata": {"labels": {"fuzz58": "accept"}}}, "application/merge-patch+json",
                   {"dryRun": "All"}, stored)

    def create(self, fz, stored):
        """A new object of an odd name, unicode labels or a value changed (dry run, or created and deleted)."""
        d = self.d
        body = copy.deepcopy(stored)
        md = body["metadata"]
        for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "deletionTimestamp",
                  "finalizers", "ownerReferences"):
            md.pop(k, None)
        md["name"] = d.pick(NAMES) if d.r.random() < .5 else self.d.fz.fresh_name(self.gv, self.plural, d.r.randrange(100))
        if d.r.random() < .5:
            md["labels"] = {d.pick(LABEL_KEYS): d.pick(["é", "", "a" * 63, "a" * 64, "x", "-x"])}
        if d.r.random() < .5:
            places = [p for p in _paths(body, []) if len(p) > 1 and p[0] not in ("metadata", "status")]
            if places:
                p = d.pick(places)
                _get(body, p[:-1])[p[-1]] = d.value()
        q = {"dryRun": "All"} if d.r.random() < .5 else {}
        code, got = fz.send("POST", self.base, dumps(body), "application/json", q)
        if code < 300 and isinstance(got, dict) and got.get("kind") == self.kind:
            self.in_range(fz, got, f"POST {self.base} {q}")
        if code < 300 and not q and isinstance(got, dict):
            url = f"{self.base}/{quote(got['metadata']['name'], safe='')}"
            c2, cur = fz.send("GET", url)
            if c2 == 200:
                fz.judged["accepted re-validates"] += 1
                c3, again = fz.send("PUT", url, dumps(cur), "application/json", {"dryRun": "All"})
                assert c3 in (200, 409), f"created {url} does not re-validate: {c3} {str(again)[:400]}"
            fz.send("DELETE", url, None, None, {"gracePeriodSeconds": "0"})

    def stale(self, fz, stored):
        """The seed updated at a resourceVersion long gone and created again: upstream's Conflict and AlreadyExists,
        whose details name the object and its resource (group and plural), and whose message says which."""
        group = self.gv.split("/")[1] if self.gv.startswith("apis/") else ""
        resource = f"{self.plural}.{group}" if group else self.plural
        body = copy.deepcopy(stored)
        body["metadata"]["resourceVersion"] = "1"
        code, got = self.write(fz, "PUT", self.url, body, "application/json", {"dryRun": "All"}, stored)
        if code == 409:
            fz.judged["stale update's Conflict"] += 1
            self.names(got, "Conflict", group, f'Operation cannot be fulfilled on {resource} "{self.name}": ')
        for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "deletionTimestamp"):
            body["metadata"].pop(k, None)
        code, got = fz.send("POST", self.base, dumps(body), "application/json", {"dryRun": "All"})
        if code == 409:
            fz.judged["create's AlreadyExists"] += 1
            self.names(got, "AlreadyExists", group, f'{resource} "{self.name}" already exists')
        code, got = fz.send("GET", f"{self.base}/fuzz58-none")
        if code == 404:
            fz.judged["NotFound"] += 1
            self.names(got, "NotFound", group, f'{resource} "fuzz58-none" not found', "fuzz58-none")

    def names(self, got: dict, reason: str, group: str, message: str, name: str | None = None) -> None:
        details = got.get("details") or {}
        want = {"name": name or self.name, "kind": self.plural, **({"group": group} if group else {})}
        assert got.get("reason") == reason and {k: details.get(k) for k in want} == want and \
            got.get("message", "").startswith(message), f"{reason} of {self.url} is not upstream's: {str(got)[:400]}"

    def update(self, fz, stored):
        """A PUT of the stored object with a value changed and odd managedFields."""
        d = self.d
        body = copy.deepcopy(stored)
        if d.r.random() < .5:
            body["metadata"]["managedFields"] = copy.deepcopy(d.pick(MANAGED))
        places = [p for p in _paths(body, []) if len(p) > 1 and p[0] != "status" and "managedFields" not in p]
        if places and d.r.random() < .7:
            p = d.pick(places)
            _get(body, p[:-1])[p[-1]] = d.value()
        text: object = body
        ctype = "application/json"
        if d.r.random() < .3 and self.plural not in CUSTOM:  # as a typed client sends it
            try:
                text, ctype = protobuf_encode.encode(json.loads(dumps(body))), PROTOBUF
            except (protobuf_encode.ProtobufError, ValueError, TypeError, OverflowError):
                pass
        self.write(fz, "PUT", self.url, text, ctype, self.query_for_write(), stored)


#: the integers an integer format holds (kube-openapi's IsValueValidAgainstRange; any other format is int64's)
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1),
              "uint64": (0, 2**64 - 1)}


def integers(schemas, node: dict, value, path: list):
    """(path, value, format) of each integer of `value` that its schema `node` types as an integer."""
    node = schemas.resolve(node)
    if isinstance(value, dict):
        props, extra = node.get("properties") or {}, node.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from integers(schemas, sub, v, path + [k])
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, v in enumerate(value):
            yield from integers(schemas, node["items"], v, path + [i])
    elif node.get("type") == "integer" and isinstance(value, int) and not isinstance(value, bool):
        yield path, value, node.get("format") or ""


def discovered(raw: Raw) -> list[tuple[str, tuple[str, ...]]]:
    """(collection path, verbs) of every resource discovery lists (subresources aside)."""
    out = []
    groups = [("api/v1", raw.request("GET", "/api/v1")[2])]
    for g in raw.request("GET", "/apis")[2]["groups"]:
        for v in g["versions"]:
            gv = f"apis/{v['groupVersion']}"
            groups.append((gv, raw.request("GET", "/" + gv)[2]))
    for gv, doc in groups:
        for r in doc.get("resources", []):
            if "/" in r["name"]:
                continue
            path = f"/{gv}/{r['name']}" if not r.get("namespaced") else f"/{gv}/namespaces/{NS}/{r['name']}"
            out.append((path, tuple(r.get("verbs") or ())))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument("--kubeconfig", help="the server to fuzz")
    target.add_argument("--up", action="store_true", help="start `nanokube up` (sqlite, a free port) and fuzz it")
    ap.add_argument("--store", default="sqlite", choices=("sqlite", "memory", "etcd"),
                    help="--up's store (etcd: a server of its own, in the temporary directory)")
    ap.add_argument("--minutes", type=float, default=5.0, help="how long to fuzz")
    ap.add_argument("--cases", type=int, default=0, help="stop after this many cases (0: only --minutes bounds the run)")
    ap.add_argument("--seed", type=int, default=0, help="the random seed: the same seed draws the same requests")
    ap.add_argument("--slow", type=float, default=5.0, help="the most seconds an answer may take")
    ap.add_argument("--kinds", default=None, help="comma-separated plurals to fuzz (default: every seeded kind)")
    ap.add_argument("--families", default=None, help=f"comma-separated families to draw (default all: {', '.join(sorted(set(FAMILIES)))})")
    ap.add_argument("--failures", default="fuzz-patch-failures.jsonl", help="where broken requests are recorded")
    ap.add_argument("--stop", action="store_true", help="stop at the first broken request")
    args = ap.parse_args()
    server = etcd = None
    if args.up:
        data_dir = Path(tempfile.mkdtemp(prefix="nanokube-fuzz-patch-"))
        store = args.store
        if store == "etcd":
            from tests.conftest import EtcdServer, etcd_binary

            (data_dir / "etcd").mkdir()
            etcd = EtcdServer(etcd_binary(), data_dir / "etcd")
            etcd.start()
            store = f"etcd://{etcd.endpoint}"
        server = start_cluster(data_dir, store)
        print(f"nanokube up (pid {server.proc.pid}) at {server.url}, data and log in {server.data_dir}", flush=True)
        args.kubeconfig = server.kubeconfig
    try:
        broken, _ = fuzz(args)
    finally:
        if server is not None:
            time.sleep(2)  # (what the last requests set going is logged)
            server.log_read = True
            server.stop()
        if etcd is not None:
            etcd.stop()
    # a failure no answer shows: a traceback or ERROR line in the server's log (a component's, a handler's)
    logged = component_failures(read_from(server.log_path, server.log_start)) if server is not None else []
    for f in logged:
        print(f"{f.count:6d}  logged: {f.signature}\n{f.example[:2000]}")
    return 1 if broken or logged else 0


def fuzz(args) -> tuple[collections.Counter, PatchFuzzer]:
    """Run cases until --minutes pass (or --cases are run): the broken ones' signatures counted, and the fuzzer."""
    raw = Watched(args.kubeconfig, timeout=NO_ANSWER)
    fz = PatchFuzzer(raw, args.slow, args.kinds.split(",") if args.kinds else None)
    fz.ensure_seeds()
    seeded = {fz.base(gv, plural) for gv, plural, _, _ in KINDS}
    unseeded = [(p, k) for p, k in discovered(raw) if p not in seeded]
    print(f"{len(fz.kinds)} seeded kinds; discovery lists {len(unseeded)} more: "
          f"{', '.join(sorted({p.rsplit('/', 1)[-1] for p, _ in unseeded}))}", flush=True)
    rng = random.Random(args.seed)
    families = tuple(f for f in FAMILIES if not args.families or f in args.families.split(","))
    d = Draw(fz, rng, unseeded, families)
    broken: collections.Counter = collections.Counter()
    start = time.monotonic()
    deadline = start + args.minutes * 60
    n = 0
    while time.monotonic() < deadline and n < (args.cases or float("inf")):
        family, case = d.draw()
        n += 1
        try:
            case(fz)
        # (a dropped or cut connection, a stream that is not JSON: as broken as a wrong answer)
        except (AssertionError, ValueError, OSError, http.client.HTTPException) as e:
            sig = re.sub(r"fuzz-[0-9]+|[0-9]+", "N", f"{family} {case!r}: {str(e)[:140]}")
            broken[sig] += 1
            with open(args.failures, "a") as f:
                f.write(json.dumps({"seed": args.seed, "n": n, "family": family, "case": repr(case), "error": str(e)[:3000]},
                                   ensure_ascii=False) + "\n")
            fz.readyz()
            if args.stop:
                break
    took = time.monotonic() - start
    print(f"{n} cases, {fz.requests} requests in {took:.0f} s; status histogram: {fz.histogram()}; "
          f"slowest answer {fz.slowest:.2f} s: {fz.slowest_request[:200]}")
    print("families: " + ", ".join(f"{k} {v}" for k, v in sorted(fz.families.items())))
    print("judged: " + ", ".join(f"{k} {v}" for k, v in sorted(fz.judged.items())))
    for sig, count in broken.most_common():
        print(f"{count:6d}  {sig}")
    return broken, fz


if __name__ == "__main__":
    sys.exit(main())
