"""Systematic sweeps of a running API server, beside scripts/fuzz.py's random property: every path of
every fuzzed kind gets a set of values, in turn, so that nothing is left to chance. They found what the
random fuzzer had not (see `git log --grep=sweep`):

- `types`: each path of each seed object (tests/e2e/fuzz_seeds.py), read at every served version of its
  kind (the non-preferred ones are converted: autoscaling/v1, resource.k8s.io/v1beta1, ...), set to
  values of every JSON type, sent as a dry-run update, create, merge/strategic/JSON patch or apply;
- `schema`: each path of the kind's OpenAPI schema (7 deep, fields the seed lacks included) set to
  values of its own type that validation must judge (empty, huge, signed, odd strings), sent as a
  dry-run create or update; an accepted one must be accepted again as the server answered it (the
  round trip; a Job re-created with its generated selector is refused as upstream does);
- `protobuf`: each seed sent as a typed client sends it (protobuf), cut short, with a byte changed and
  with an overlong length put in, at --paths random places (20);
- `subresources`: each subresource of each seeded kind (scale, status, ephemeralcontainers, resize, binding,
  eviction, token, approval, log, exec, attach, portforward, proxy) with each method, bodies of every shape
  (empty, null, arrays, another kind, the seed naming another object, cut short, protobuf, YAML aliases)
  under each content type, and the streaming ones with odd query parameters, all dry runs;
- `crds`: CRDs of odd schemas (extension combinations, int-or-string list-map keys, preserve-unknown-fields
  list items, formats, CEL rules near and past their cost, defaults that break their schema, odd scale
  paths), custom resources of odd values written to each through every verb and /status and /scale, and
  CRDs whose conversion webhook cannot be called, read at the version it converts to;
- `patches`: each path of each seed under strategic merge patch directives ($patch, $retainKeys,
  $setElementOrder, $deleteFromPrimitiveList), json patch operations with odd pointers (~1, ~0, "-",
  huge indexes), a field selector on it, and writes, deletes and applies with odd fieldManager,
  fieldValidation, force and dryRun values; names, labels and annotations at and past their limits;
- `options`: each kind's collection listed, watched and deleted (deletecollection, matching nothing) and
  its seed deleted (as a dry run, or with a uid precondition that fails) with odd options: limit, continue,
  timeout (a Go duration, read by the request deadline),
  resourceVersion and resourceVersionMatch, sendInitialEvents, allowWatchBookmarks, timeoutSeconds,
  label and field selectors of edge syntax (`in ()`, `!`, unicode, long), and DeleteOptions bodies
  (preconditions, propagationPolicy, gracePeriodSeconds, dryRun, orphanDependents, another kind);
- `webhooks`: a mutating and a validating webhook (this script serves them) answering a ConfigMap's
  create, update, patch and delete (dry runs) in odd ways, under each failurePolicy: values of the wrong
  type in the AdmissionReview (allowed, uid, status, patch, patchType, warnings, auditAnnotations), the
  wrong uid or apiVersion, a patch that is not base64 or not a JSON patch, patches touching the kind,
  resourceVersion, uid, managedFields, name or namespace, a huge answer, and one slower than its timeout;
  a 5xx is judged by its text (upstream's webhook failures are 500s);
- `upstream`: built-in kinds AI clusters use most (Job, CronJob, StatefulSet, DaemonSet, PVC,
  ResourceQuota, LimitRange, PodDisruptionBudget, HPA, NetworkPolicy, Ingress, IngressClass, Lease, CSR,
  ClusterTrustBundle, DeviceClass CEL selectors), each field set to invalid and boundary values whose
  answer upstream 1.37's validation fixes (UPSTREAM_CASES, read against pkg/apis/*/validation), sent as
  dry-run creates, and status writes (UPSTREAM_STATUS: a Job's index lists, a PVC's resize status) as
  dry-run updates: a code other than upstream's is reported as a slip; and bodies of odd encodings
  (YAML documents, aliases and tags, gzip and deflate, JSON nested or wide, CBOR) and answers in YAML,
  protobuf and CBOR of a list holding a large object;
- `auth`: Authorization headers of every malformed shape without a client certificate (a bearer token
  nobody issued is a 401, any other header anonymous), impersonation headers (ServiceAccount-shaped names
  that are not one, empty and odd groups, extras and uids, judged by the SelfSubjectReview's groups), access
  reviews of odd shape (selectors' raw form and requirements, subjects, extras), RBAC writes as a user who
  may only create RBAC objects (escalation prevention's 403s, `bind` by holding the role) and watch-lists of
  odd options, each judged by upstream's code (AUTH_HEADERS, IMPERSONATIONS, ACCESS_REVIEWS, ESCALATIONS,
  WATCH_LISTS);
- `lists`: each list of the kind's schema filled with N items (the seed's first, made unique), one
  dry-run create each: an answer slower than --slow seconds is reported (quadratic validation held
  the loop for minutes: warnings, field errors, policy variables).

Each request's answer must be no 5xx (nor dropped) and come within --slow seconds, and /readyz must
answer after a broken one. Broken requests are printed and written, one JSON line each, to --out.

    .venv/bin/python scripts/fuzz_sweep.py --kubeconfig .nanokube/kubeconfig types schema lists
"""

from __future__ import annotations

import argparse
import copy
import gzip
import http.client
import json
import random
import ssl
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanokube.apiserver import protobuf_encode  # noqa: E402
from tests.e2e.fuzz_seeds import CREATE_ONLY  # noqa: E402
from tests.e2e.fuzzing import NS, Fuzzer, Schemas, _get, _nested, _paths, _pointer, _set, seed_object  # noqa: E402
from tests.e2e.test_hardening import Raw  # noqa: E402

PROTOBUF = "application/vnd.kubernetes.protobuf"
#: values of every JSON type, for the `types` sweep
ANY = [None, "x", "", 1, -1, 0, 1.5, True, [], {}, [None], {"a": None}, 2**63, -(2**63) - 1, 2**64, 1e300, "1e999",
       "\x00", "ééé", [1], [{}], {"": 1}, {"\b": 1}, "-1", "1Gi", "0.5", "9" * 30]
#: values of a schema's type, for the `schema` sweep
OF_TYPE = {
    "string": ["", " ", "-1", "1e999", "x" * 300, "é", "\x00", "0", "a/b", "::", "999.999.999.999", "10.0.0.0/33", "*",
               "..", "1Gi", "-1Gi", "NaN", "0.0.0.0", "::1/129", "a" * 64, "A", "1.5", "2026-13-45T99:99:99Z", "-",
               "x:y:z", "[", "100%", "-5%", "http://[::1", "/", "a=b", "!", " a", "9" * 40, "0x10", "1e-999"],
    "integer": [-1, 0, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**53 + 1, 1],
    "number": [-1.5, 1e308, 0.0, 5e-324],
    "boolean": [True, False],
    "intstr": ["", "-1", "x", "101%", -1, 2**31, "1.5%"],
    "array": [[], [None], ["", ""]],
    "map": [{}, {"": ""}, {"a" * 300: "x"}, {"k": ""}],
    "object": [{}, None],
}
#: content types of the `subresources` sweep's bodies
SUB_CTYPES = ["application/json", "application/yaml", PROTOBUF, "application/merge-patch+json",
              "application/strategic-merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml",
              "application/apply-patch+cbor", "application/cbor", "text/plain", "multipart/form-data; boundary=x",
              "application/json; charset=latin1", "application/json;as=Table;v=v1;g=meta.k8s.io", "*/*", ""]
#: bodies of the `subresources` sweep (the seed, and the seed naming another object, are added)
SUB_BODIES = [b"", "{}", "[]", "null", '"x"', "1", "true", '{"kind": "Scale"}', '{"apiVersion": "v1"}',
              '{"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {"replicas": -1}}',
              '{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": ""}}',
              '{"apiVersion": "v1", "kind": "Binding", "target": {}}', '{"metadata": null, "spec": null, "status": null}',
              '{"metadata": [], "spec": [], "status": []}', '{"status": {"conditions": [{}]}}', '[{"op": "x"}]',
              '[{"op": "remove", "path": "/"}]', '[{"op": "add", "path": "/metadata/x", "value": 1}]', b"\xff\xfe", "{\"a\": ",
              "k8s\x00\x0a\x02v1", "a: &a [*a]\n", '{"spec": {"replicas": 1e999}}']
#: query parameters of the streaming subresources
SUB_QUERIES = {
    "exec": [{}, {"command": "ls", "stdout": "true"}, {"command": "", "stdin": "x", "tty": "maybe"}, {"container": "nope", "command": "x"},
             {"command": "ls", "stdout": "true", "stderr": "true", "tty": "true"}],
    "attach": [{}, {"stdin": "true", "tty": "true", "stderr": "true"}, {"container": "%00", "stdout": "1"}],
    "portforward": [{}, {"ports": "abc"}, {"ports": "0"}, {"ports": "-1"}, {"ports": "65536"}, {"ports": "80,81," * 500}],
    "log": [{}, {"tailLines": "-1"}, {"limitBytes": "0"}, {"sinceSeconds": "-5"}, {"sinceTime": "x"}, {"sinceSeconds": "1",
            "sinceTime": "2020-01-01T00:00:00Z"}, {"container": "nope"}, {"previous": "maybe"}, {"follow": "true", "timestamps": "x"},
            {"tailLines": str(2**63)}, {"stream": "Bogus"}, {"stream": "Stderr", "tailLines": "1"}, {"insecureSkipTLSVerifyBackend": "x"}],
    "proxy": [{}, {"path": "/x"}],
}
#: strategic merge patch directives the `patches` sweep puts at each path (`F`: the path's field name)
SMP_DIRECTIVES = [{"$patch": "delete"}, {"$patch": "replace"}, {"$patch": "merge"}, {"$patch": "bogus"}, {"$patch": None},
                  {"$patch": 1}, {"$retainKeys": ["x", None]}, {"$retainKeys": "x"}, {"$retainKeys": []},
                  {"$setElementOrder/F": [{"name": "x"}, 1]}, {"$setElementOrder/F": "x"}, {"$setElementOrder/F": []},
                  {"$deleteFromPrimitiveList/F": ["x", {}]}, {"$deleteFromPrimitiveList/F": "x"}, {"$setElementOrder/": []},
                  {"$deleteFromPrimitiveList/": [1]}, {"F": [{"$patch": "delete"}]}, {"F": [{"$patch": "replace"}, {}]},
                  {"F": [{"$patch": "delete", "name": None}]}, {"F": {"$patch": "delete"}}, {"F": [{"$retainKeys": ["a"]}]}]
#: json patch pointers the `patches` sweep appends to each path: escapes, the end marker, odd and huge indexes
JSON_POINTER_TAILS = ["/~1", "/~0", "/~2", "/~", "/-", "/-/x", "/99999999999999999999", "/-1", "/01", "/0x1", "/ 1", "",
                      "/", "//", "/%00", "/\u0000", "/" + "a" * 300, "/0/0/0/0/0/0"]
#: json patch operations of the `patches` sweep, each at the path with a tail (`P`) and from the seed's path
JSON_OPS = [{"op": "add", "path": "P", "value": 1}, {"op": "remove", "path": "P"}, {"op": "replace", "path": "P", "value": None},
            {"op": "move", "from": "P", "path": "/metadata/labels/x"}, {"op": "copy", "from": "P", "path": "P"},
            {"op": "test", "path": "P", "value": {}}, {"op": "move", "from": "/metadata", "path": "/metadata/x"},
            {"op": "copy", "from": "/spec", "path": "/spec/x/y"}, {"op": "add", "path": "P"}, {"op": "ADD", "path": "P", "value": 1},
            {"op": "add", "path": 1, "value": 1}, {"op": "remove", "path": "P", "from": 5}]
#: odd query parameters of the `patches` sweep's writes (each with dryRun=All)
WRITE_QUERIES = [{"fieldManager": ""}, {"fieldManager": "x" * 300}, {"fieldManager": "%00"}, {"fieldManager": "%C3%A9"},
                 {"fieldValidation": "strict"}, {"fieldValidation": "Bogus"}, {"fieldValidation": ""},
                 {"fieldValidation": "Strict", "fieldManager": "a%0Ab"}, {"force": "maybe"}, {"force": "true"},
                 {"dryRun": "Bogus"}, {"dryRun": "All&dryRun=All"}, {"pretty": "x"}]
#: field selectors of the `patches` sweep's lists (`F`: each path of the seed, dotted)
FIELD_SELECTORS = ["F=x", "F!=x", "F==x", "F", "F=", "=x", "F=x,F!=y", "F in (x)", "F=x=y", "F=%00", "F=" + "x" * 300,
                   "metadata.name=\\,", "metadata.name=a\\", "metadata.namespace!=", ",", "!", "metadata.name=é"]
#: list options of the `options` sweep (each also sent as a watch, with timeoutSeconds=1 unless it names one)
LIST_OPTIONS = [{"limit": v} for v in ("-1", "0", "x", "1.5", "99999999999999999999", "1%00", "")] + [
    {"continue": v} for v in ("x", "%00", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTF9", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIuLi8ifQ",
                              "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTg0NDY3NDQwNzM3MDk1NTE2MTUsInN0YXJ0IjoiYSJ9", "=" * 3, "a" * 5000)] + [
    {"limit": "1", "continue": "x", "resourceVersion": "1"}, {"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MX0", "labelSelector": "a=b"},
    {"resourceVersion": "0", "resourceVersionMatch": "Exact"}, {"resourceVersion": "1", "resourceVersionMatch": "Exact"},
    {"resourceVersion": "", "resourceVersionMatch": "NotOlderThan"}, {"resourceVersionMatch": "Bogus", "resourceVersion": "1"},
    {"resourceVersion": "18446744073709551615"}, {"resourceVersion": "18446744073709551616"}, {"resourceVersion": "-1"},
    {"resourceVersion": "1", "resourceVersionMatch": "Exact", "limit": "1"}, {"resourceVersion": "x", "limit": "1"},
    {"sendInitialEvents": "true"}, {"sendInitialEvents": "false", "resourceVersionMatch": "NotOlderThan"},
    {"sendInitialEvents": "maybe"}, {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "resourceVersion": ""},
    {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "resourceVersion": "0", "allowWatchBookmarks": "true"},
    {"sendInitialEvents": "true", "resourceVersionMatch": "Exact", "allowWatchBookmarks": "true"},
    {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "false"},
    {"sendInitialEvents": "false", "resourceVersionMatch": "NotOlderThan", "resourceVersion": "1", "allowWatchBookmarks": "true"},
    {"allowWatchBookmarks": "maybe"}, {"allowWatchBookmarks": "1"}, {"timeoutSeconds": "-1"}, {"timeoutSeconds": "0"},
    {"timeoutSeconds": "x"}, {"timeoutSeconds": "1.5"}, {"timeoutSeconds": "99999999999999999999"}, {"timeoutSeconds": "1e3"},
    {"watch": "maybe", "timeoutSeconds": "1"}, {"watch": "0"}, {"pretty": "maybe"}, {"includeUninitialized": "true"}, {"resourceVersionMatch": "NotOlderThan"}] + [
    {"timeout": v} for v in ("foo", "10", "-1s", "0s", "1ns", "1e3s", "99999999999h", "1h1h", ".s", "1µs", "%00")]
#: label selectors of the `options` sweep: edge syntax, unicode, long
LABEL_SELECTORS = ["a in ()", "a notin ()", "!", "!a", "!a,!b", "a", "a,", ",a", "a,,b", "a in (b,", "a in (b))", "a in b",
                   "a==b==c", "a!=", "a=b,a=c", "é=x", "a=é", "a in (é)", "a." * 200 + "b=c", "a=" + "b" * 64, "x" * 10000,
                   "a in (" + ",".join(f"v{i}" for i in range(2000)) + ")", ",".join(f"k{i}=v" for i in range(2000)),
                   "a>1", "a<1", "a gt 1", "a exists", "\x00", "a=\x00", "a in (b c)", "(a)", "a = b", " a ", "a\tin\t(b)",
                   "example.com/a=b", "/a=b", "a/=b", "-a=b", "a=-b-", "A=B"]
#: field selectors of the `options` sweep beside the `patches` sweep's, on any kind
ANY_FIELD_SELECTORS = ["metadata.name in (a)", "metadata.name notin (a)", "!metadata.name", "metadata.name",
                       "metadata.name=" + "a" * 10000, ",".join(f"metadata.name!=a{i}" for i in range(2000)),
                       "metadata.namespace=é", "spec.nope=x", "status.phase=Running", "metadata.name=a,metadata.name=b",
                       "metadata.uid=x", "metadata.resourceVersion=1", "metadata.name\\=a=b", "metadata.name=a\\,b"]
#: DeleteOptions bodies of the `options` sweep's deletes
DELETE_BODIES = [{}, None, [], "x", 1, {"kind": "DeleteOptions", "apiVersion": "v2"}, {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"},
                 {"kind": "DeleteOptions", "apiVersion": "policy/v1"}, {"kind": "Pod", "apiVersion": "v1"}, {"kind": 1},
                 {"gracePeriodSeconds": -1}, {"gracePeriodSeconds": -(2**63)}, {"gracePeriodSeconds": 2**63}, {"gracePeriodSeconds": 2**63 - 1},
                 {"gracePeriodSeconds": "x"}, {"gracePeriodSeconds": 1.5}, {"gracePeriodSeconds": None}, {"gracePeriodSeconds": 0},
                 {"propagationPolicy": "Bogus"}, {"propagationPolicy": ""}, {"propagationPolicy": None}, {"propagationPolicy": 1},
                 {"propagationPolicy": "orphan"}, {"orphanDependents": True, "propagationPolicy": "Foreground"},
                 {"orphanDependents": "yes"}, {"orphanDependents": None}, {"preconditions": {}}, {"preconditions": None},
                 {"preconditions": {"uid": ""}}, {"preconditions": {"resourceVersion": "x"}}, {"preconditions": {"resourceVersion": "-1"}},
                 {"preconditions": {"uid": 1}}, {"preconditions": []}, {"preconditions": {"uid": "x" * 10000}},
                 {"dryRun": ["All", "All"]}, {"dryRun": ["x"]}, {"dryRun": "All"}, {"dryRun": []}, {"dryRun": [None]},
                 {"ignoreStoreReadErrorWithClusterBreakingPotential": True}, {"ignoreStoreReadErrorWithClusterBreakingPotential": "x"},
                 {"unknown": 1}, {"metadata": {"name": "x"}}, {"gracePeriodSeconds": 1, "preconditions": {"uid": "nope"}}]
#: query parameters of the `options` sweep's deletes (each with dryRun=All, but those naming dryRun)
DELETE_QUERIES = [{}, {"gracePeriodSeconds": "-1"}, {"gracePeriodSeconds": "x"}, {"gracePeriodSeconds": "99999999999999999999"},
                  {"propagationPolicy": "Bogus"}, {"propagationPolicy": ""}, {"orphanDependents": "maybe"},
                  {"orphanDependents": "true", "propagationPolicy": "Background"}, {"dryRun": "x"}, {"dryRun": ""},
                  {"dryRun": "All&dryRun=x"}, {"ignoreStoreReadErrorWithClusterBreakingPotential": "true"},
                  {"ignoreStoreReadErrorWithClusterBreakingPotential": "maybe"}, {"preconditions": "x"}]
#: the group of the `crds` sweep's CRDs
SWEEP_GROUP = "sweep.fuzz.example.com"
_O = {"type": "object"}
_LIST_MAP = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]}
#: (openAPIV3Schema, subresources) of the `crds` sweep: extension combinations, formats, bounds, CEL rules
#: (a cost past the budget is the CRD's 422), defaults that break their own schema (a 422 too)
CRD_SCHEMAS = [(dict(_O, properties={"spec": dict(_O, properties=props), "status": dict(_O, **{
                    "x-kubernetes-preserve-unknown-fields": True})}), sub) for props, sub in [
    ({"l": dict(_LIST_MAP, items=dict(_O, properties={"k": {"x-kubernetes-int-or-string": True}}, required=["k"]))}, {}),
    ({"l": dict(_LIST_MAP, items=dict(_O, required=["k"], properties={"k": {"type": "string"}},
                                      **{"x-kubernetes-preserve-unknown-fields": True}))}, {"status": {}}),
    ({"l": {"type": "array", "x-kubernetes-list-type": "set", "items": {"x-kubernetes-int-or-string": True}},
      "n": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "number"}}}, {}),
    ({"m": dict(_O, additionalProperties={"type": "string"}, **{"x-kubernetes-map-type": "atomic"}),
      "e": dict(_O, **{"x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True})}, {}),
    ({"replicas": {"type": "integer", "format": "int32"}, "a": dict(_O, properties={"b": dict(_O, properties={
        "c": {"type": "integer"}})})}, {"status": {}, "scale": {"specReplicasPath": ".spec.a.b.c",
                                                                "statusReplicasPath": ".status.r", "labelSelectorPath": ".status.s"}}),
    ({"replicas": {"type": "integer"}}, {"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}),
    ({"t": {"type": "string", "format": "date-time"}, "d": {"type": "string", "format": "duration"},
      "b": {"type": "string", "format": "byte"}, "p": {"type": "string", "pattern": "^(a+)+$", "maxLength": 64},
      "f": {"type": "number", "multipleOf": 0.1, "maximum": 1e308, "exclusiveMaximum": True}}, {}),
    ({"l": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 64},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.exists(y, x + y == y + x))", "messageExpression": "string(self)"},
                                         {"rule": "self.size() == 0 || self[0].matches('^(a+)+$')"}]}}, {}),
    ({"l": {"type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, self.all(z, x == y)))"}]}}, {}),
    ({"a": {"type": "string", "maxLength": 8, "x-kubernetes-validations": [
        {"rule": "!oldSelf.hasValue() || self == oldSelf.value()", "optionalOldSelf": True}]},
      "o": dict(_O, properties={"x": {"type": "string"}}, **{"x-kubernetes-validations": [{"rule": "has(self.x)", "reason": "FieldValueForbidden"}]})}, {}),
    ({"a": {"type": "integer", "default": "x"}, "b": {"type": "integer", "default": 5, "maximum": 3}}, {}),
    ({"a": {"type": "string", "enum": ["x", 1, None]}, "o": dict(_O, enum=[{"a": 1}]), "n": {"type": "object", "nullable": True,
      "x-kubernetes-preserve-unknown-fields": True}}, {}),
]]
#: spec (and status) values of the `crds` sweep's custom resources
CRD_VALUES = [{}, {"l": [{"k": 1}, {"k": "1"}, {"k": 1.5}]}, {"l": [{"k": None}, {"k": True}]}, {"l": [1, 1]}, {"l": [None]},
              {"l": ["a" * 64] * 100}, {"n": [1, 1.0]}, {"m": {"a": 1}}, {"e": {"apiVersion": "v1", "kind": "X", "metadata": {
                  "name": "Bad_", "labels": {"-": "x"}}}}, {"e": {"x": 1}}, {"replicas": 2**40}, {"replicas": "x"},
              {"a": {"b": {"c": -1}}}, {"a": {"b": 5}}, {"t": "2026-13-45T99:99:99Z", "d": "x", "b": "!!", "p": "a" * 40 + "!",
                                                       "f": 1e308}, {"a": "x" * 9}, {"o": {}}, {"n": None}, {"a": 2**64},
              {"x": {"y": {"z": [[[[{}]]]]}}}, {"l": "x", "m": [], "o": 5}, {"l": [{"k": "a", "x": {"d": 1e300}}, {"k": "a"}]}]
#: conversion webhooks of the `crds` sweep that cannot be called: refused, unknown service, unresolvable host
CONVERSION_WEBHOOKS = [{"conversionReviewVersions": ["v1"], "clientConfig": cc} for cc in [
    {"url": "https://127.0.0.1:1/convert"}, {"service": {"name": "fuzz-nobody", "namespace": "fuzz", "path": "/convert"}},
    {"url": "https://" + "a" * 64 + ".example/convert"}, {"url": "https://a..example/convert"},
    {"url": "https://127.0.0.1:1/convert", "caBundle": "Zm9v"}]]
_JP = "JSONPatch"
#: answers of the `webhooks` sweep's webhooks: each response merged into an allowing AdmissionReview
#: ("UID" is the request's uid; a "patch" list is sent base64-encoded), or "review" replacing it whole
WEBHOOK_ANSWERS = [{"response": r} for r in [
    {"allowed": "yes"}, {"allowed": None}, {"allowed": False}, {"allowed": 1}, {"uid": 1}, {"uid": "other"}, {"uid": None},
    {"auditAnnotations": ["k"]}, {"auditAnnotations": "k"}, {"auditAnnotations": {"k": 1}}, {"auditAnnotations": {"": "v", "a b": "\x00"}},
    {"warnings": "careful"}, {"warnings": [1, None]}, {"warnings": {"a": 1}}, {"warnings": ["a\nb", "x" * 5000, ""]},
    {"allowed": False, "status": "no"}, {"allowed": False, "status": [1]}, {"allowed": False, "status": {"code": 2**40}},
    {"allowed": False, "status": {"code": "403"}}, {"allowed": False, "status": {"code": 403.5}}, {"allowed": False, "status": {"code": 99}},
    {"allowed": False, "status": {"code": 999, "message": "m"}}, {"allowed": False, "status": {"code": 500, "reason": "x"}},
    {"allowed": False, "status": {"code": 1000}}, {"allowed": False, "status": {"code": 2**31 - 1}},
    {"allowed": False, "status": {"reason": 5, "message": 7}}, {"allowed": False, "status": {"details": "x"}},
    {"allowed": False, "status": {"details": {"causes": "x"}}}, {"allowed": False, "status": {"details": {"causes": [{"field": 1}]}}},
    {"allowed": False, "status": {"message": "a\x00b\r\nc", "metadata": {"remainingItemCount": "x"}}},
    {"patchType": _JP, "patch": [1]}, {"patchType": _JP, "patch": 5}, {"patchType": _JP, "patch": "!!!!"},
    {"patchType": _JP, "patch": "W10"}, {"patchType": _JP, "patch": "bm9wZQ=="}, {"patchType": _JP, "patch": {"op": "add"}},
    {"patchType": _JP, "patch": [1, "x"]}, {"patchType": _JP, "patch": [{"path": "/data/x", "value": "1"}]},
    {"patchType": 1, "patch": [{"op": "add", "path": "/data/x", "value": "1"}]}, {"patchType": "MergePatch", "patch": [{"op": "add"}]},
    {"patch": []}, {"patchType": _JP}, {"patchType": ""}, {"patchType": _JP, "patch": None},
    *({"patchType": _JP, "patch": [{"op": "replace", "path": p, "value": v}]} for p, v in [
        ("/metadata/resourceVersion", "12345"), ("/metadata/resourceVersion", "x"), ("/metadata/resourceVersion", 5),
        ("/metadata/resourceVersion", ""), ("/metadata/uid", "other"), ("/metadata/uid", 5), ("/metadata/uid", ""),
        ("/metadata/managedFields", [{"manager": "x", "operation": "Bogus"}]), ("/metadata/managedFields", "x"),
        ("/metadata/managedFields", [1, None]), ("/metadata/creationTimestamp", "garbage"), ("/metadata/generation", -5),
        ("/metadata/deletionTimestamp", "2020-01-01T00:00:00Z"), ("/metadata/name", "other"), ("/metadata/namespace", "other"),
        ("/metadata/namespace", None), ("/metadata", None), ("", 5), ("", {}), ("/kind", "Secret"), ("/kind", "Foo"), ("/kind", 5),
        ("/apiVersion", "apps/v1"), ("/apiVersion", "a/b/c"), ("/apiVersion", ""), ("/data", {"k": 5}), ("/data/big", "x" * 2**21),
        ("/metadata/finalizers", ["bad finalizer!"]), ("/metadata/labels", {"-bad": "x"}), ("/data/k", 1e300)]),
    {"patchType": _JP, "patch": [{"op": "test", "path": "/data/k", "value": "nope"}]},
    {"patchType": _JP, "patch": [{"op": "add", "path": f"/data/k{i}", "value": "v"} for i in range(10001)]},
]] + [{"review": r} for r in [
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, {"apiVersion": 5, "kind": "AdmissionReview"},
    {"apiVersion": "a/b/c", "kind": None}, {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                                           "response": {"allowed": True}},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": []}, [], "x",
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "UID", "allowed": True,
                                                                                  "warnings": ["w" * 1024] * 10000}},
]] + [{"sleep": 3}]
#: the 5xx answers upstream gives a webhook that failed or was refused (its own Status code included):
#: any other is reported
WEBHOOK_5XX = ("Internal error occurred: failed calling webhook", 'admission webhook "sweep.fuzz.example.com" denied',
               "Internal error occurred: json: cannot unmarshal", "Internal error occurred: admission webhook",
               "Internal error occurred: testing value", "Internal error occurred: replace operation",
               "Internal error occurred: parsing time", "Internal error occurred: Unexpected kind",
               "Internal error occurred: The allowed maximum operations", "converting (", "Internal error occurred: no kind",
               "Internal error occurred: couldn't get version/kind", "Internal error occurred: unexpected GroupVersion",
               "This request caused apiserver to panic")  # (a denial's code past 999: Go's WriteHeader panics)
#: metadata fields the `schema` sweep leaves to the server
SERVER_SET = {"managedFields", "resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "selfLink",
              "generation", "ownerReferences", "finalizers"}

_POD = {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}
_ALWAYS = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
_SEL = {"matchLabels": {"a": "b"}}
_CLAIM = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def _rule(**kw) -> list:
    return [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}, **kw}]


def _cel(expression: str) -> list:
    return [{"cel": {"expression": expression}}]


#: the `upstream` sweep: (collection under /apis or /api, kind, apiVersion, the valid spec (or top-level
#: fields, under "."), [(dotted path in it, value, upstream 1.37's code)]); the base is sent too (201)
UPSTREAM_CASES = [
    ("batch/v1", "jobs", "Job", {"spec": {"template": _POD}}, [
        ("spec.podFailurePolicy.rules", _rule(), 201), ("spec.podFailurePolicy.rules", _rule(action="FailIndex"), 422),
        ("spec.podFailurePolicy.rules", _rule(onExitCodes={"operator": "In", "values": [0]}), 422),
        ("spec.podFailurePolicy.rules", _rule(onExitCodes={"operator": "In", "values": [2, 1]}), 422),
        ("spec.podFailurePolicy.rules", _rule(onExitCodes={"operator": "In", "values": list(range(1, 257))}), 422),
        ("spec.podFailurePolicy.rules", _rule(onExitCodes={"operator": "In", "values": [1], "containerName": "x"}), 422),
        ("spec.podFailurePolicy.rules", [{"action": "Ignore", "onPodConditions": [{"type": "a b", "status": "True"}]}], 422),
        ("spec.podFailurePolicy.rules", _rule() * 21, 422), ("spec.podReplacementPolicy", "", 422),
        ("spec.backoffLimitPerIndex", 1, 422), ("spec.maxFailedIndexes", 1, 422), ("spec.managedBy", "x", 422),
        ("spec.managedBy", "example.com/" + "x" * 60, 422), ("spec.activeDeadlineSeconds", -1, 422),
        ("spec.template.spec.restartPolicy", "Always", 422)]),
    ("batch/v1", "jobs", "Job", {"spec": {"completionMode": "Indexed", "completions": 5, "parallelism": 5, "template": _POD}}, [
        ("spec.parallelism", 10**5 + 1, 422), ("spec.backoffLimitPerIndex", 1, 201), ("spec.completions", None, 422),
        ("spec.successPolicy", {"rules": [{"succeededCount": 6}]}, 422), ("spec.successPolicy", {"rules": [{}]}, 422),
        ("spec.successPolicy", {"rules": [{"succeededIndexes": "0-2", "succeededCount": 4}]}, 422),
        ("spec.successPolicy", {"rules": [{"succeededIndexes": "3,1"}]}, 422), ("spec.successPolicy", {"rules": [{"succeededIndexes": "5"}]}, 422),
        ("spec.successPolicy", {"rules": [{"succeededIndexes": "0-1,1-2"}]}, 422), ("spec.successPolicy", {"rules": [{"succeededIndexes": ""}]}, 201),
        ("spec.successPolicy", {"rules": [{"succeededIndexes": "0" + ",1" * 40000}]}, 422),
        ("spec.successPolicy", {"rules": [{"succeededIndexes": "99999999999999999999"}]}, 422)]),
    ("batch/v1", "cronjobs", "CronJob", {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": _POD}}}}, [
        *(("spec.schedule", v, c) for v, c in [
            ("@every 0s", 201), ("@every x", 422), ("@reboot", 422), ("0 0 * * 7", 422), ("*/0 * * * *", 422), ("5-1 * * * *", 422),
            ("*/99999999999999999999 * * * *", 422), ("TZ=UTC * * * * *", 422), ("1,,2 * * * *", 422), ("0 0 31 2 *", 201)]),
        *(("spec.timeZone", v, c) for v, c in [
            ("America", 422), ("Etc", 422), ("Local", 422), ("", 422), ("../etc/passwd", 422), ("America/New_York ", 422),
            ("Etc/GMT+5", 201), ("x" * 300, 422)]),
        ("spec.concurrencyPolicy", "", 201), ("spec.startingDeadlineSeconds", -1, 422)]),
    ("apps/v1", "statefulsets", "StatefulSet", {"spec": {"selector": _SEL, "serviceName": "x", "template": _ALWAYS,
                                                         "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": _CLAIM}]}}, [
        ("spec.updateStrategy", {"type": "OnDelete", "rollingUpdate": {"partition": 1}}, 422),
        ("spec.updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "0%"}}, 422),
        ("spec.persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Bogus"}, 422), ("spec.ordinals", {"start": -1}, 422),
        ("spec.template.spec.activeDeadlineSeconds", 5, 422), ("spec.podManagementPolicy", "Bogus", 422)]),
    ("apps/v1", "daemonsets", "DaemonSet", {"spec": {"selector": _SEL, "template": _ALWAYS}}, [
        ("spec.updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}, 422),
        ("spec.updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}, 201),
        ("spec.updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1.5%"}}, 422),
        ("spec.updateStrategy", {"type": "Bogus"}, 422), ("spec.template.spec.restartPolicy", "OnFailure", 422)]),
    ("v1", "persistentvolumeclaims", "PersistentVolumeClaim", {"spec": _CLAIM}, [
        ("spec.selector", {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, 422),
        ("spec.selector", {"matchLabels": {"a": "b c"}}, 422), ("spec.dataSource", {"kind": "Foo", "name": "x"}, 201),
        ("spec.dataSourceRef", {"kind": "Foo", "apiGroup": "x.io", "name": "x", "namespace": "Bad_NS"}, 201),
        ("spec.dataSourceRef", {"kind": "Foo", "name": "x"}, 422), ("spec.resources.requests.storage", "0", 422),
        ("spec.accessModes", ["ReadWriteOncePod", "ReadWriteOnce"], 422)]),
    ("v1", "resourcequotas", "ResourceQuota", {"spec": {"hard": {"pods": "10"}}}, [
        *(("spec.scopeSelector", {"matchExpressions": [{"scopeName": n, "operator": "In", "values": ["a"]}]}, 422)
          for n in ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")),
        ("spec.scopeSelector", {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}, 422),
        ("spec.scopeSelector", {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["a"]}]}, 201),
        ("spec.scopes", ["Terminating", "NotTerminating"], 422), ("spec.hard", {"pods": "1.5"}, 422),
        ("spec.hard", {"requests.nvidia.com/gpu": "1.5"}, 201), ("spec.hard", {"x.deviceclass.resource.k8s.io/devices": "1.5"}, 422)]),
    ("v1", "limitranges", "LimitRange", {"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}}, [
        ("spec.limits", [{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2"}}], 422),
        ("spec.limits", [{"type": "Container", "maxLimitRequestRatio": {"cpu": "0.5"}}], 422),
        ("spec.limits", [{"type": "Pod", "default": {"cpu": "1"}}], 422), ("spec.limits", [{"type": "", "max": {"cpu": "1"}}], 422),
        ("spec.limits", [{"type": "PersistentVolumeClaim", "default": {"storage": "1Gi"}}], 422)]),
    ("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", {"spec": {"minAvailable": 1, "selector": _SEL}}, [
        ("spec.minAvailable", "101%", 422), ("spec.minAvailable", "1.5%", 422), ("spec.minAvailable", "1", 422),
        ("spec.maxUnavailable", 1, 422), ("spec.unhealthyPodEvictionPolicy", "Bogus", 422),
        ("spec.selector", {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, 422)]),
    ("autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", {"spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 3}}, [
        ("spec.minReplicas", 0, 422), ("spec.minReplicas", 4, 422), ("spec.scaleTargetRef.name", "a/b", 422),
        ("spec.behavior", {"scaleUp": {"policies": []}}, 422), ("spec.behavior", {"scaleDown": {"tolerance": "-1"}}, 422),
        ("spec.behavior", {"scaleUp": {"stabilizationWindowSeconds": 3601}}, 422),
        ("spec.behavior", {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}}, 422),
        ("spec.metrics", [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}], 422),
        ("spec.metrics", [{"type": "External", "external": {"metric": {"name": "m"}, "target": {"type": "Value", "value": "0"}}}], 422),
        ("spec.metrics", [{"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "",
                                                                              "target": {"type": "Utilization", "averageUtilization": 5}}}], 422)]),
    ("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", {"spec": {"podSelector": {}}}, [
        ("spec.policyTypes", ["Ingress", "Egress", "Ingress"], 422), ("spec.ingress", [{"ports": [{"port": 80, "endPort": 79}]}], 422),
        ("spec.ingress", [{"ports": [{"port": "http", "endPort": 90}]}], 422), ("spec.ingress", [{"from": [{}]}], 422),
        ("spec.ingress", [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]}], 422),
        ("spec.ingress", [{"from": [{"ipBlock": {"cidr": "010.0.0.0/8"}}]}], 422)]),
    ("networking.k8s.io/v1", "ingresses", "Ingress", {"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}, [
        ("spec.defaultBackend", {"service": {"name": "s", "port": {"number": 80, "name": "http"}}}, 422),
        ("spec.rules", [{"host": "*"}], 422), ("spec.rules", [{"host": "1.2.3.4"}], 422), ("spec.rules", [{"host": "*.a.com"}], 201),
        ("spec.rules", [{"http": {"paths": [{"path": "/a//b", "pathType": "Prefix", "backend": {"service": {
            "name": "s", "port": {"number": 80}}}}]}}], 422), ("spec.tls", [{"hosts": ["*"]}], 422)]),
    ("networking.k8s.io/v1", "ingressclasses", "IngressClass", {"spec": {"controller": "example.com/c"}}, [
        ("spec.controller", "c", 422), ("spec.parameters", {"kind": "K", "name": "n", "scope": "Namespace"}, 422),
        ("spec.parameters", {"kind": "K", "name": "n", "scope": "Cluster", "namespace": "ns"}, 422)]),
    ("coordination.k8s.io/v1", "leases", "Lease", {"spec": {"holderIdentity": "x", "leaseDurationSeconds": 10}}, [
        ("spec.leaseDurationSeconds", 0, 422), ("spec.preferredHolder", "x", 422), ("spec.strategy", "Bogus", 422),
        ("spec.acquireTime", "2020-01-01T00:00:00Z", 400)]),
    ("resource.k8s.io/v1", "deviceclasses", "DeviceClass", {"spec": {"selectors": _cel("true")}}, [
        *(("spec.selectors", _cel(e), c) for e, c in [
            ("", 422), ("device.driver", 422), ("device.nope == 1", 422), ("'a'.matches('(')", 422),
            ("string(device.capacity) == ''", 422), ("string([1]) == ''", 422), ("semver('1.0.0') < semver('2.0.0')", 422),
            ("device.attributes.all(d, device.attributes[d].all(a, device.attributes[d].all(b, device.attributes[d].all(c, true))))", 422),
            ("device.attributes.all(d, device.attributes[d].all(a, device.attributes[d].all(b, true)))", 201),
            ("(" * 500 + "true" + ")" * 500, 422), ("device.attributes['x'].y" + " && true" * 3000, 422)]),
        ("spec.selectors", _cel("true") * 33, 422), ("spec.extendedResourceName", "cpu", 422)]),
]

_INDEXED = {"spec": {"completionMode": "Indexed", "completions": 5, "parallelism": 5, "backoffLimitPerIndex": 1, "template": _POD}}
#: the `upstream` sweep's status writes: (group-version, plural, kind, the object created, [(status, upstream's code)]),
#: each a dry-run PUT of /status on it
UPSTREAM_STATUS = [
    ("batch/v1", "jobs", "Job", _INDEXED, [
        *(({f: v}, c) for f in ("completedIndexes", "failedIndexes") for v, c in [
            ("5-1", 422), ("0-4", 200), ("1,0", 422), ("0-99999999999999999999", 422), ("-1", 422), ("", 200), (",", 422),
            ("0-", 422), ("4,5", 422), ("0-2,1-3", 422), (" 1", 422), ("0-0", 422), ("0" + ",1" * 50000, 422)]),
        ({"completedIndexes": "0,x,3", "failedIndexes": "1-2,y,3"}, 422), ({"completedIndexes": "0-1", "failedIndexes": "2-4"}, 200),
        ({"succeeded": -1}, 422), ({"ready": -1}, 422), ({"uncountedTerminatedPods": {"succeeded": ["", "a", "a"]}}, 422),
        ({"active": 2**31}, 400)]),
    ("batch/v1", "jobs", "Job", {"spec": {"completionMode": "Indexed", "completions": 3_000_000, "parallelism": 1, "template": _POD}}, [
        ({"completedIndexes": "0-2999999", "failedIndexes": "0-2999999"}, 422), ({"completedIndexes": "0-2999999"}, 200)]),
    ("v1", "persistentvolumeclaims", "PersistentVolumeClaim", {"spec": _CLAIM}, [
        ({"phase": "Bogus"}, 422), ({"allocatedResources": {"storage": "-1"}}, 422), ({"allocatedResources": {"cpu": "1"}}, 422),
        ({"allocatedResourceStatuses": {"storage": "Bogus"}}, 422), ({"capacity": {"storage": "x"}}, 400),
        ({"allocatedResources": {"example.com/foo": "1"}}, 200)]),
]

#: Authorization headers of the `auth` sweep, sent without a client certificate: a non-empty bearer token nobody
#: issued fails the chain (401); any other header authenticates nobody (system:anonymous)
AUTH_HEADERS = ["", " ", "Bearer", "Bearer ", "Bearer  x", "bearer x", "BEARER x y", "Bearer x\ty", "Bearer " + "a" * 20000,
                "Bearer a.b.c", "Bearer ..", "Bearer a.b.c.d", "Basic Zm9vOmJhcg==", "Basic !!", "Negotiate x", "Bearer %00",
                "Bearer eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0.", "Bearer eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ4In0." + "A" * 86,
                "Bearer W10.W10." + "A" * 86, "Bearer " + "a." * 5000, " Bearer x ", "Bearerx"]
#: (path, method, anonymous's code) the `auth` sweep's headers are sent to
AUTH_PATHS = [("/version", "GET", 200), ("/api/v1/namespaces", "GET", 403),
              ("/apis/authentication.k8s.io/v1/selfsubjectreviews", "POST", 403)]
_SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"]
#: impersonation headers of the `auth` sweep (the admin asks): (headers, upstream's code, the user's groups if 201)
IMPERSONATIONS = [
    ({"Impersonate-User": "system:serviceaccount:a:b"}, 201, _SA_GROUPS),
    *(({"Impersonate-User": u}, 201, ["system:authenticated"]) for u in (
        "system:serviceaccount:a:b:c", "system:serviceaccount:A_B:x", "system:serviceaccount::b", "system:serviceaccount:a:",
        "system:serviceaccount:a:B", "system:serviceaccount:" + "a" * 64 + ":b", "é", "x" * 10000, "a,b", "system:node:")),
    ({"Impersonate-User": "system:anonymous"}, 403, None),  # (system:unauthenticated may not create a review)
    ({"Impersonate-User": "u", "Impersonate-Group": ""}, 201, ["", "system:authenticated"]),
    ({"Impersonate-User": "system:serviceaccount:a:b", "Impersonate-Group": "g"}, 201, ["g", "system:authenticated"]),
    ({"Impersonate-User": "system:anonymous", "Impersonate-Group": "system:authenticated"}, 201,
     ["system:authenticated", "system:unauthenticated"]),
    ({"Impersonate-Group": "g"}, 400, None), ({"Impersonate-Uid": "u"}, 400, None), ({"Impersonate-Extra-x": "y"}, 400, None),
    ({"Impersonate-User": "u", "Impersonate-Extra-": "v"}, 201, ["system:authenticated"]),
    ({"Impersonate-User": "u", "Impersonate-Extra-%zz": "v", "Impersonate-Extra-A%2fB": "w"}, 201, ["system:authenticated"]),
    ({"Impersonate-User": "u", "Impersonate-Uid": "", "Impersonate-Extra-" + "k" * 5000: "v"}, 201, ["system:authenticated"]),
]
_SEL = {"verb": "list", "resource": "pods"}
#: access reviews of the `auth` sweep: (plural, spec, upstream's code); a SubjectAccessReview's names user u
ACCESS_REVIEWS = [
    *(("subjectaccessreviews", {"user": "u", "resourceAttributes": {**_SEL, k: v}}, c) for k, v, c in [
        ("fieldSelector", {"rawSelector": "a=b", "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}, 422),
        ("fieldSelector", {}, 422), ("labelSelector", {}, 422), ("fieldSelector", {"rawSelector": "!!!"}, 201),
        ("fieldSelector", {"requirements": [{"key": "", "operator": "Exists"}]}, 422),
        ("fieldSelector", {"requirements": [{"key": "a", "operator": "In"}]}, 422),
        ("fieldSelector", {"requirements": [{"key": "a", "operator": "Bogus"}]}, 201),
        ("labelSelector", {"requirements": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, 422),
        ("labelSelector", {"requirements": [{"key": "()a", "operator": "Exists"}]}, 422),
        ("labelSelector", {"requirements": [{"key": "a", "operator": "In", "values": ["b c"]}]}, 422),
        ("labelSelector", {"requirements": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, 201),
        ("labelSelector", {"rawSelector": "a in ("}, 201), ("namespace", 5, 400), ("name", "é" * 1000, 201)]),
    ("subjectaccessreviews", {"resourceAttributes": _SEL}, 422), ("subjectaccessreviews", {"user": "u"}, 422),
    ("subjectaccessreviews", {"user": "u", "resourceAttributes": _SEL, "nonResourceAttributes": {"path": "/x"}}, 422),
    ("subjectaccessreviews", {"groups": ["g"], "nonResourceAttributes": {"path": "/x", "verb": "get"}}, 201),
    ("subjectaccessreviews", {"user": "u", "extra": {"": [None]}, "resourceAttributes": _SEL}, 201),
    ("subjectaccessreviews", {"user": "u", "extra": {"k": "v"}, "resourceAttributes": _SEL}, 400),
    ("selfsubjectaccessreviews", {"resourceAttributes": {**_SEL, "labelSelector": {}}}, 422),
    ("selfsubjectaccessreviews", {"nonResourceAttributes": {"path": "x" * 100000, "verb": "get"}}, 201),
    ("selfsubjectrulesreviews", {"namespace": "é"}, 201), ("selfsubjectrulesreviews", {}, 400),
    ("selfsubjectrulesreviews", {"namespace": 1}, 400), ("selfsubjectreviews", {}, 201),
]
_RBAC = "rbac.authorization.k8s.io"
#: RBAC writes of the `auth` sweep by a user who may only create RBAC objects, read pods and /healthz (dry runs):
#: (plural, object, upstream's code): what it does not hold is escalation's 403 (none is also invalid: upstream
#: judges escalation before validation, this server after)
ESCALATIONS = [
    ("roles", {"rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}, 403),
    ("roles", {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}, 201),
    ("roles", {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}]}, 201),
    ("roles", {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}]}, 403),
    ("roles", {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "secrets"]}]}, 403),
    ("roles", {"rules": [{"verbs": ["get", "list"], "apiGroups": ["", "apps"], "resources": ["pods"]}]}, 403),
    ("roles", {"rules": [{"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]}]}, 403),
    ("clusterroles", {"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}, 201),
    ("clusterroles", {"rules": [{"verbs": ["get"], "nonResourceURLs": ["/*"]}]}, 403),
    ("clusterroles", {"rules": [], "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}, 403),
    ("clusterroles", {"rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}]}, 403),
    ("rolebindings", {"roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": "cluster-admin"}}, 403),
    ("rolebindings", {"roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": "fuzz-rbac-writer"}}, 201),
    ("rolebindings", {"roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": "fuzz-none"}}, 404),
    ("rolebindings", {"roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": "fuzz-pods-reader"}}, 201),
    ("clusterrolebindings", {"roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": "edit"}}, 403),
    ("clusterrolebindings", {"roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": "system:public-info-viewer"}}, 201),
]
#: watch-lists of odd options (of ConfigMaps, with watch=1&timeoutSeconds=1): (query, upstream's code)
_WL = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
WATCH_LISTS = [
    (f"{_WL}&resourceVersion=x", 400), (f"{_WL}&resourceVersion=-1", 400), (f"{_WL}&resourceVersion=18446744073709551616", 400),
    ("sendInitialEvents=true&resourceVersionMatch=notolderthan", 422), (f"{_WL}&limit=1&continue=x", 422),
    (f"{_WL}&resourceVersion=0&resourceVersion=1", 200), (f"{_WL}&resourceVersionMatch=Exact", 200),
    (f"{_WL}&fieldSelector=metadata.name%3Dx&labelSelector=a", 200), ("sendInitialEvents=1&resourceVersionMatch=NotOlderThan"
                                                                     "&allowWatchBookmarks=1", 200),
    ("sendInitialEvents=&resourceVersionMatch=NotOlderThan", 200), ("sendInitialEvents=true", 422),
    ("resourceVersionMatch=NotOlderThan", 422)]


class Sweep:
    def __init__(self, kubeconfig: str, slow: float, out: str, kinds: list[str] | None = None,
                 paths: int | None = None) -> None:
        """`paths`: the most paths of each kind a sweep tries, drawn at random (default all)."""
        self.raw = Raw(kubeconfig, timeout=120)
        self.kubeconfig = kubeconfig
        self.fuzzer = Fuzzer(self.raw, kinds)
        self.fuzzer.ensure_seeds()
        self.slow, self.out, self.paths = slow, out, paths
        self.requests = self.broken = 0

    def send(self, method: str, path: str, body, query: dict, ctype: str | None = "application/json", round_trip: bool = False,
             converts: bool = False, upstream_5xx: tuple[str, ...] = (), expect: int | None = None, headers: dict | None = None,
             via: Raw | None = None):
        """`converts`: the request reads or writes through a conversion webhook that cannot be called, whose
        500 ("conversion webhook for ... failed") is upstream's answer; `upstream_5xx`: the beginnings of
        the other 5xx messages upstream gives it; `expect`: upstream's code, any other is a slip; `via`: the
        connection it goes over (the admin's by default)."""
        self.requests += 1
        raw = via or self.raw
        url = path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        start = time.monotonic()
        try:
            code, _, got = self._watch(url) if "watch=1" in url else raw.request(method, url, body, ctype, headers)
        except Exception as e:  # a dropped connection or no answer in time
            code, got = -1, repr(e)
            raw.conn = None
        took = time.monotonic() - start
        unreachable = code == 503 and "/proxy" in path  # (a proxied backend that cannot be dialled: upstream's 503)
        unreachable |= converts and code == 500 and "conversion webhook for" in str(got)
        said = str(got.get("message", "")) if isinstance(got, dict) else got.decode(errors="replace") if isinstance(got, bytes) else ""
        unreachable |= code >= 500 and said.startswith(upstream_5xx or ("\0",))
        # (a custom resource without its spec replicas field has no Scale: ScaleREST.Get's InternalError)
        unreachable |= code == 500 and path.endswith("/scale") and "the spec replicas field" in str(got)
        # (a list from a resourceVersion the server has not reached: the cacher's 504 after its 3 s wait)
        unreachable |= code == 504 and "Too large resource version" in str(got)
        if (code >= 500 and not unreachable) or code < 0 or took > self.slow:
            self.report("broken", method, url, body, code, got, took)
        elif expect is not None and code != expect:
            self.report(f"slip: upstream answers {expect}", method, url, body, code, got, took)
        elif round_trip and code in (200, 201) and method in ("POST", "PUT") and isinstance(got, dict) \
                and isinstance(got.get("metadata"), dict) and not path.endswith("/status"):
            again = copy.deepcopy(got)
            if method == "POST":
                for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
                    again["metadata"].pop(k, None)
            code2, _, got2 = self.raw.request(method, url, json.dumps(again), ctype)
            if code2 not in (200, 201, 409) and not path.endswith("/jobs"):
                self.report("not accepted again", method, url, json.dumps(again), code2, got2, 0)
        return code

    def _watch(self, url: str):
        """A watch's answer up to its headers (its Status when refused), on a connection of its own then closed:
        its code is what `send` judges, and read to the end a stream lasts its whole timeoutSeconds."""
        conn = http.client.HTTPSConnection(self.raw.host, self.raw.port, context=self.raw.ctx, timeout=self.raw.timeout)
        try:
            conn.request("GET", url, headers={"Accept": "application/json"})
            r = conn.getresponse()
            return r.status, r.headers, json.loads(r.read()) if r.status >= 400 else b""
        finally:
            conn.close()

    def report(self, what: str, method: str, url: str, body, code: int, got, took: float) -> None:
        self.broken += 1
        message = got.get("message") if isinstance(got, dict) else str(got)
        record = {"what": what, "method": method, "url": url, "code": code, "seconds": round(took, 2),
                  "message": str(message)[:500], "body": body if isinstance(body, str) else None}
        print(json.dumps(record)[:1500], flush=True)
        with open(self.out, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.raw.request("GET", "/readyz", ctype=None)[0] != 200:
            print("the server is not ready", flush=True)

    def targets(self) -> list[tuple[str, str, str, str, bool]]:
        """(served group/version, plural, kind, the seed's group/version, namespaced) for every served
        version of a kind the fuzzer seeds."""
        out = []
        versions = [("api/" + v) for v in self.raw.request("GET", "/api")[2]["versions"]]
        versions += ["apis/" + v["groupVersion"] for g in self.raw.request("GET", "/apis")[2]["groups"] for v in g["versions"]]
        for gv in versions:
            # (a group-version of a CRD deleted a moment ago may still be listed, its own document gone)
            for r in (self.raw.request("GET", "/" + gv)[2] or {}).get("resources", ()):
                seeds = [k for k in self.fuzzer.kinds if k[1] == r["name"] and r["name"] not in CREATE_ONLY]
                if seeds and "create" in r.get("verbs", ()):
                    out.append((gv, r["name"], r["kind"], seeds[0][0], r["namespaced"]))
        return out

    def base(self, gv: str, plural: str, namespaced: bool) -> str:
        return f"/{gv}" + (f"/namespaces/{NS}" if namespaced else "") + f"/{plural}"

    def seed(self, gv: str, plural: str, seed_gv: str, namespaced: bool) -> tuple[str, dict] | None:
        """The seed's name and the seed as `gv` serves it, without what the server set."""
        name = self.fuzzer.seed_name(seed_gv, plural)
        code, _, obj = self.raw.request("GET", f"{self.base(gv, plural, namespaced)}/{name}")
        if code != 200:
            return None
        for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            obj["metadata"].pop(k, None)
        obj.pop("status", None)
        return name, obj

    def protobuf(self, cuts: int = 20) -> None:
        """Each seed as a typed client sends it (protobuf), cut short, with a byte changed and with a
        length of 2^32 put in, at `cuts` places each, as a dry-run create: a 4xx (a body that does not
        decode, or an object judged), never a 5xx (a kind protobuf does not serve, a custom resource's,
        is sent no body)."""
        for gv, plural, _, seed_gv, namespaced in self.targets():
            seeded = self.seed(gv, plural, seed_gv, namespaced)
            if seeded is None:
                continue
            obj = seeded[1]
            obj["metadata"]["name"] = self.fuzzer.fresh_name(seed_gv, plural, 45)
            try:
                wire = protobuf_encode.encode(obj)
            except protobuf_encode.NotMarshalable:
                continue
            print(f"protobuf: {gv} {plural}", flush=True)
            base = self.base(gv, plural, namespaced)
            self.send("POST", base, wire, {"dryRun": "All"}, PROTOBUF)
            for _ in range(cuts):
                i = random.randrange(len(protobuf_encode.MAGIC), len(wire))
                for body in (wire[:i], wire[:i] + bytes([random.randrange(256)]) + wire[i + 1:],
                             wire[:i] + b"\x80\x80\x80\x80\x10" + wire[i:]):
                    self.send("POST", base, body, {"dryRun": "All"}, PROTOBUF)

    def _seeds(self, family: str):
        """Each target kind whose seed exists: (name, seed object, collection path, the seed's path),
        announced as `family` sweeps it."""
        for gv, plural, _, seed_gv, namespaced in self.targets():
            seeded = self.seed(gv, plural, seed_gv, namespaced)
            if seeded is None:
                continue
            name, obj = seeded
            base = self.base(gv, plural, namespaced)
            print(f"{family}: {gv} {plural}", flush=True)
            yield name, obj, base, f"{base}/{name}"

    def types(self) -> None:
        for name, obj, base, item in self._seeds("types"):
            for path in self._some(_paths(obj, [])[1:]):
                for value in ANY:
                    changed, dry = _set(copy.deepcopy(obj), path, value), {"dryRun": "All"}
                    verb = random.choice(["put", "post", "merge", "strategic", "json", "apply"])
                    if verb == "put":
                        self.send("PUT", item, json.dumps(changed), dry)
                    elif verb == "post":
                        if isinstance(changed.get("metadata"), dict):
                            changed["metadata"]["name"] = name + "-new"
                        self.send("POST", base, json.dumps(changed), dry)
                    elif verb in ("merge", "strategic"):
                        self.send("PATCH", item, json.dumps(_nested(path, value)), dry, f"application/{verb}-merge-patch+json"
                                  if verb == "strategic" else "application/merge-patch+json")
                    elif verb == "json":
                        self.send("PATCH", item, json.dumps([{"op": "replace", "path": _pointer(path), "value": value}]), dry,
                                  "application/json-patch+json")
                    else:
                        self.send("PATCH", item, json.dumps(changed), {**dry, "fieldManager": "sweep", "force": "true"},
                                  "application/apply-patch+yaml")

    def patches(self) -> None:
        """Each path of each seed (dry runs): strategic merge patch directives at it ($patch, $retainKeys,
        $setElementOrder, $deleteFromPrimitiveList, odd and misplaced), json patch operations at it with odd
        pointer tails (escapes, "-", huge indexes), lists with a field selector on it, and writes, deletes and
        applies with odd fieldManager, fieldValidation, force and dryRun values; names, labels and annotations
        at and past their limits (253, 63, 256 KiB)."""
        for name, obj, base, item in self._seeds("patches"):
            dry = {"dryRun": "All"}
            for path in self._some(_paths(obj, [])[1:]):
                field = str(path[-1])
                for directive in random.sample(SMP_DIRECTIVES, 6):
                    d = json.loads(json.dumps(directive).replace('/F"', f'/{field}"').replace('"F"', json.dumps(field)))
                    self.send("PATCH", item, json.dumps(_nested(path[:-1], d) if path[:-1] else d), dry,
                              "application/strategic-merge-patch+json")
                pointer = _pointer(path)
                for op in random.sample(JSON_OPS, 4):
                    tail = random.choice(JSON_POINTER_TAILS)
                    body = json.dumps([op]).replace('"P"', json.dumps(pointer + tail))
                    self.send("PATCH", item, body, dry, "application/json-patch+json")
                dotted = ".".join(str(p) for p in path)
                selector = random.choice(FIELD_SELECTORS).replace("F", dotted)
                self.send("GET", base, None, {"fieldSelector": urllib.parse.quote(selector, safe="")}, None)
            for query in WRITE_QUERIES:
                q = {**dry, **query}
                self.send("PUT", item, json.dumps(obj), q)
                self.send("PATCH", item, json.dumps({"metadata": {"labels": {"a": "b"}}}), q, "application/merge-patch+json")
                self.send("PATCH", item, json.dumps(obj), {**q, "fieldManager": q.get("fieldManager") or "sweep"},
                          "application/apply-patch+yaml")
                self.send("DELETE", item, None, q, None)
                self.send("DELETE", base, None, {**q, "labelSelector": "nothing=here"}, None)
            long_meta = [{"name": "a" * 253}, {"name": "a" * 254}, {"generateName": "a" * 300},
                         {"labels": {"a" * 63: "b" * 63}}, {"labels": {"a" * 64: "b"}}, {"labels": {"a": "b" * 64}},
                         {"labels": {"p" * 253 + "/" + "a" * 63: "b"}}, {"annotations": {"a": "x" * (256 * 1024)}},
                         {"annotations": {"a": "x" * (256 * 1024 - 1)}}, {"annotations": {"a" * 317: "x"}}]
            for meta in long_meta:
                changed = copy.deepcopy(obj)
                changed["metadata"] = {**changed["metadata"], **meta}
                if "name" not in meta:
                    changed["metadata"]["name"] = name + "-long"
                self.send("POST", base, json.dumps(changed), dry)

    def options(self) -> None:
        """Each kind's collection listed and watched with odd list options (LIST_OPTIONS) and selectors
        (LABEL_SELECTORS, ANY_FIELD_SELECTORS), and deleted with odd DeleteOptions bodies and query
        parameters: the collection by a label selector nothing matches, the seed as a dry run or under a
        uid precondition that fails, so that nothing is deleted."""
        q = urllib.parse.quote
        for name, _, base, item in self._seeds("options"):
            for opts in LIST_OPTIONS:
                self.send("GET", base, None, {k: q(v, safe="%") for k, v in opts.items()}, None)
                watch = {"timeoutSeconds": "1", **opts, "watch": "1"} if "watch" not in opts else opts
                self.send("GET", base, None, {k: q(v, safe="%") for k, v in watch.items()}, None)
            for sel in LABEL_SELECTORS:
                self.send("GET", base, None, {"labelSelector": q(sel, safe="")}, None)
                self.send("GET", base, None, {"labelSelector": q(sel, safe=""), "watch": "1", "timeoutSeconds": "1"}, None)
                self.send("DELETE", base, None, {"labelSelector": q(sel, safe=""), "dryRun": "All"}, None)
            for sel in ANY_FIELD_SELECTORS:
                self.send("GET", base, None, {"fieldSelector": q(sel, safe="")}, None)
                self.send("GET", base, None, {"fieldSelector": q(sel, safe=""), "watch": "1", "timeoutSeconds": "1"}, None)
            nothing = {"labelSelector": "fuzz-sweep-nothing%3Dhere"}
            for body in DELETE_BODIES:
                # a body's options are the delete's: the query's are not read (as upstream's DeleteResource)
                guarded = body
                if isinstance(body, dict):
                    guarded = {**body, "dryRun": ["All"]} if "dryRun" not in body else \
                        {**body, "preconditions": {"uid": "fuzz-sweep-nope"}}
                if body is not None:  # (a null body decodes as no options: a delete that is no dry run)
                    self.send("DELETE", item, json.dumps(guarded), {"dryRun": "All"})
                self.send("DELETE", base, json.dumps(body), {**nothing, "dryRun": "All"})
            for query in DELETE_QUERIES:
                guard = {} if "dryRun" in query else {"dryRun": "All"}
                self.send("DELETE", item, json.dumps({"preconditions": {"uid": "fuzz-sweep-nope"}}) if not guard else None,
                          {**query, **guard}, "application/json" if not guard else None)
                self.send("DELETE", base, None, {**nothing, **query, **guard}, None)
            for opts in LIST_OPTIONS[:20]:  # (deletecollection takes list options too)
                self.send("DELETE", base, None, {**nothing, "dryRun": "All", **{k: q(v, safe="%") for k, v in opts.items()}}, None)
            if self.raw.request("GET", item)[0] != 200:
                self.report("seed deleted", "GET", item, None, 404, "the seed is gone after the options sweep", 0)

    def _some(self, paths: list) -> list:
        """`paths`, or `self.paths` of them drawn at random, in their order."""
        if self.paths is None or len(paths) <= self.paths:
            return paths
        return [paths[i] for i in sorted(random.sample(range(len(paths)), self.paths))]

    def _schema_paths(self, schemas: Schemas, s: dict, prefix: list, depth: int, out: list) -> None:
        s = schemas.resolve(s)
        t = s.get("type")
        if s.get("x-kubernetes-int-or-string"):
            out.append((prefix, "intstr"))
        elif t in ("string", "integer", "number", "boolean"):
            out.append((prefix, t))
        elif depth > 0 and t == "array":
            out.append((prefix, "array"))
            self._schema_paths(schemas, s.get("items") or {}, prefix + [0], depth - 1, out)
        elif depth > 0 and s.get("properties"):
            out.append((prefix, "object"))
            for k, v in s["properties"].items():
                if (not prefix and k in ("apiVersion", "kind", "metadata")) or (prefix == ["metadata"] and k in SERVER_SET):
                    continue
                self._schema_paths(schemas, v, prefix + [k], depth - 1, out)
        elif depth > 0 and isinstance(s.get("additionalProperties"), dict):
            out.append((prefix, "map"))
            self._schema_paths(schemas, s["additionalProperties"], prefix + ["k"], depth - 1, out)

    def schema(self) -> None:
        targets = self.targets()
        schemas = Schemas(self.raw, [(t[0],) for t in targets])
        for gv, plural, kind, seed_gv, namespaced in targets:
            seeded = self.seed(gv, plural, seed_gv, namespaced)
            if seeded is None:
                continue
            name, obj = seeded
            base = self.base(gv, plural, namespaced)
            paths: list = []
            self._schema_paths(schemas, schemas.kind(gv, kind), [], 7, paths)
            print(f"schema: {gv} {plural}: {len(paths)} paths", flush=True)
            for path, t in self._some(paths[1:]):  # (not the object itself)
                for value in random.sample(OF_TYPE[t], min(6, len(OF_TYPE[t]))):
                    changed = _put(copy.deepcopy(obj), path, value)
                    if path[0] == "status":
                        self.send("PUT", f"{base}/{name}/status", json.dumps(changed), {"dryRun": "All"})
                    elif random.random() < 0.5:
                        changed["metadata"]["name"] = name + "-new"
                        self.send("POST", base, json.dumps(changed), {"dryRun": "All"}, round_trip=True)
                    else:
                        self.send("PUT", f"{base}/{name}", json.dumps(changed), {"dryRun": "All"}, round_trip=True)

    def upstream(self, wide: int = 5000) -> None:
        """UPSTREAM_CASES as dry-run creates, judged by upstream's code; then the `encodings` (`wide`: the keys
        of the large ConfigMap read back)."""
        for gv, plural, kind, base, cases in UPSTREAM_CASES:
            namespaced = plural not in ("ingressclasses", "deviceclasses")
            url = f"/{'api' if gv == 'v1' else 'apis'}/{gv}" + (f"/namespaces/{NS}" if namespaced else "") + f"/{plural}"
            print(f"upstream: {gv} {plural}: {len(cases)} cases", flush=True)
            for i, (path, value, code) in enumerate([(None, None, 201)] + cases):
                obj = {"apiVersion": gv, "kind": kind, "metadata": {"name": f"fuzz-upstream-{i}"}, **copy.deepcopy(base)}
                if path is not None:
                    keys, parent = path.split("."), obj
                    for k in keys[:-1]:
                        parent = parent.setdefault(k, {})
                    if value is None:
                        parent.pop(keys[-1], None)
                    else:
                        parent[keys[-1]] = value
                self.send("POST", url, json.dumps(obj), {"dryRun": "All"}, expect=code)
        for i, (gv, plural, kind, base, cases) in enumerate(UPSTREAM_STATUS):
            url = f"/{'api' if gv == 'v1' else 'apis'}/{gv}/namespaces/{NS}/{plural}"
            name = f"fuzz-upstream-status-{i}"
            self.raw.request("DELETE", f"{url}/{name}", ctype=None)
            code, _, live = self.raw.request("POST", url, json.dumps({"apiVersion": gv, "kind": kind, "metadata": {"name": name},
                                                                     **copy.deepcopy(base)}))
            if code != 201:
                self.report("status object not created", "POST", url, None, code, live, 0)
                continue
            print(f"upstream: {gv} {plural}/status: {len(cases)} cases", flush=True)
            for status, code in cases:
                self.send("PUT", f"{url}/{name}/status", json.dumps({**live, "status": status}), {"dryRun": "All"}, expect=code)
            self.raw.request("DELETE", f"{url}/{name}", ctype=None)
        self.encodings(wide)

    def auth(self) -> None:
        """AUTH_HEADERS without a client certificate on AUTH_PATHS; IMPERSONATIONS asked by the admin, judged by
        the SelfSubjectReview's code and groups; ACCESS_REVIEWS; ESCALATIONS as a user who may only write RBAC
        objects and read pods; WATCH_LISTS: each with upstream's code."""
        anonymous = Raw(self.kubeconfig, timeout=self.raw.timeout)  # the cluster's CA, and no client certificate
        anonymous.ctx = ssl.create_default_context(cadata=ssl.DER_cert_to_PEM_cert(self.raw.ctx.get_ca_certs(binary_form=True)[0]))
        review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        print(f"auth: {len(AUTH_HEADERS)} headers, {len(IMPERSONATIONS)} impersonations, {len(ACCESS_REVIEWS)} reviews, "
              f"{len(ESCALATIONS)} RBAC writes, {len(WATCH_LISTS)} watch-lists", flush=True)
        for header in AUTH_HEADERS:
            parts = header.strip().split(" ", 2)
            token = len(parts) > 1 and parts[0].lower() == "bearer" and parts[1]
            for path, method, anonymous_code in AUTH_PATHS:
                self.send(method, path, review if method == "POST" else None, {}, headers={"Authorization": header},
                          via=anonymous, expect=401 if token else anonymous_code)
        ssr = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
        for headers, code, groups in IMPERSONATIONS:
            if self.send("POST", ssr, review, {}, headers=headers, expect=code) == 201 and groups is not None:
                got = self.raw.request("POST", ssr, review, headers=headers)[2]
                if (got.get("status") or {}).get("userInfo", {}).get("groups") != groups:
                    self.report(f"slip: upstream's groups {groups}", "POST", ssr, json.dumps(headers)[:500], 201, got, 0)
        for plural, spec, code in ACCESS_REVIEWS:
            group = "authentication.k8s.io" if plural == "selfsubjectreviews" else "authorization.k8s.io"
            self.send("POST", f"/apis/{group}/v1/{plural}", json.dumps({"spec": spec}), {}, expect=code)
        rbac = f"/apis/{_RBAC}/v1"
        writer = [{"verbs": ["create"], "apiGroups": [_RBAC], "resources": ["roles", "clusterroles", "rolebindings", "clusterrolebindings"]},
                  {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
        for plural, obj in (("clusterroles", {"rules": writer}), ("clusterrolebindings", {
                "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": "fuzz-rbac-writer"},
                "subjects": [{"kind": "User", "name": "fuzz-rbac-writer"}]})):
            code, _, got = self.raw.request("POST", f"{rbac}/{plural}", {"metadata": {"name": "fuzz-rbac-writer"}, **obj})
            if code not in (201, 409):
                self.report("RBAC writer not created", "POST", f"{rbac}/{plural}", None, code, got, 0)
        self.raw.request("POST", f"{rbac}/namespaces/{NS}/roles", {"metadata": {"name": "fuzz-pods-reader"}, "rules": writer[1:2]})
        for i, (plural, obj, code) in enumerate(ESCALATIONS):
            url = f"{rbac}/namespaces/{NS}/{plural}" if plural in ("roles", "rolebindings") else f"{rbac}/{plural}"
            body = {"apiVersion": f"{_RBAC}/v1", "metadata": {"name": f"fuzz-escalation-{i}"}, **obj}
            if plural.endswith("bindings"):
                body["subjects"] = [{"kind": "User", "name": "fuzz-rbac-writer"}]
            self.send("POST", url, json.dumps(body), {"dryRun": "All"}, headers={"Impersonate-User": "fuzz-rbac-writer"}, expect=code)
        for query, code in WATCH_LISTS:
            self.send("GET", f"/api/v1/namespaces/{NS}/configmaps?watch=1&timeoutSeconds=1&{query}", None, {}, expect=code)

    def encodings(self, wide: int) -> None:
        """Bodies of odd encodings on a ConfigMap's create (each a dry run), then a list holding a ConfigMap of
        `wide` keys (none: not sent) read back in YAML, protobuf, CBOR, as a Table and pretty (converted off
        the event loop)."""
        base = f"/api/v1/namespaces/{NS}/configmaps"
        cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzz-encoding"}}).encode()
        names = "abcdefgh"  # (a billion laughs: each alias nine of the one before)
        aliases = "a: &a [" + ", ".join(["x"] * 9) + "]\n" + "".join(
            f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]\n" for p, c in zip(names, names[1:]))
        bodies = [
            (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: ConfigMap\n", "application/yaml", None, 400),
            (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: !!binary eTQ=}\n", "application/yaml", None, 422),
            (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, generation: .nan}\n", "application/yaml", None, 400),
            (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: &a {a: 1}\ndata: {<<: *a}\n", "application/yaml", None, 400),
            (aliases.encode() + b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "application/yaml", None, 400),
            (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: " + b"[" * 100000 + b"]" * 100000, "application/yaml", None, 400),
            (cm[:-1] + b',"x":' + b"[" * 100000 + b"]" * 100000 + b"}", "application/json", None, 400),
            (cm[:-1] + b',"x":' + b'{"a":' * 20000 + b"1" + b"}" * 20000 + b"}", "application/json", None, 400),
            (gzip.compress(cm), "application/json", {"Content-Encoding": "gzip"}, 201),
            (b"\x1f\x8bxxxx", "application/json", {"Content-Encoding": "gzip"}, 400),
            (cm, "application/json", {"Content-Encoding": "deflate"}, 400),
            (gzip.compress(b" " * 4_000_000), "application/json", {"Content-Encoding": "gzip"}, 413),
            (b"\xa1\x61\x61\x01", "application/cbor", None, 415),
        ]
        print(f"upstream: encodings: {len(bodies)} bodies", flush=True)
        for body, ctype, headers, code in bodies:
            self.send("POST", base, body, {"dryRun": "All"}, ctype, headers=headers, expect=code)
        big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzz-encoding-wide"},
                "data": {f"k{i}": "v" * 10 for i in range(wide)}}
        self.raw.request("DELETE", f"{base}/fuzz-encoding-wide", ctype=None)
        if wide and self.send("POST", base, json.dumps(big), {}) == 201:
            for accept, code in (("application/yaml", 200), (PROTOBUF, 200), ("application/cbor", 406),
                                 ("application/json;as=Table;v=v1;g=meta.k8s.io", 200)):
                self.send("GET", base, None, {}, None, headers={"Accept": accept}, expect=code)
            self.send("GET", base, None, {"pretty": "true"}, None, expect=200)
            self.raw.request("DELETE", f"{base}/fuzz-encoding-wide", ctype=None)

    def lists(self, n: int) -> None:
        schemas = self.fuzzer.schemas
        for gv, plural, kind, spec in self.fuzzer.kinds:
            if plural in CREATE_ONLY:
                continue
            name = self.fuzzer.seed_name(gv, plural)
            seed = seed_object(gv, kind, name + "-big", spec)
            paths: list = []
            self._schema_paths(schemas, schemas.kind(gv, kind), [], 6, paths)
            print(f"lists: {gv} {plural}", flush=True)
            for path, t in self._some([(p, t) for p, t in paths if t == "array" and p[:1] != ["status"]]):
                try:
                    first = (_get(seed, path) or [None])[0]
                except (KeyError, IndexError, TypeError):
                    first = None
                item = first if first is not None else _sample(schemas, schemas.at(schemas.kind(gv, kind), path + [0]))
                body = json.dumps(_put(copy.deepcopy(seed), path, [_unique(copy.deepcopy(item), i) for i in range(n)]))
                if len(body) <= 3 * 1024 * 1024:
                    self.send("POST", self.fuzzer.base(gv, plural), body, {"dryRun": "All"})

    def subresources(self) -> None:
        """Every subresource of every seeded kind, with every method and odd bodies under each content type
        (dry-run writes; the streaming ones also with odd query parameters)."""
        for gv, plural, _, seed_gv, namespaced in self.targets():
            name = self.fuzzer.seed_name(seed_gv, plural)
            subs = [r["name"].split("/", 1)[1] for r in self.raw.request("GET", "/" + gv)[2]["resources"]
                    if r["name"].startswith(plural + "/")]
            if not subs:
                continue
            print(f"subresources: {gv} {plural}: {', '.join(subs)}", flush=True)
            item = f"{self.base(gv, plural, namespaced)}/{name}"
            seed = self.seed(gv, plural, seed_gv, namespaced)
            seed = seed[1] if seed else {"metadata": {}}
            seeds = [json.dumps(seed), json.dumps({**seed, "metadata": {**seed["metadata"], "name": "other"}})]
            for sub in subs:
                url = f"{item}/{sub}"
                for query in SUB_QUERIES.get(sub, [{}]):
                    for method in ("GET", "POST", "PUT", "DELETE", "OPTIONS"):
                        self.send(method, url, None, {**query, "dryRun": "All"} if method != "GET" else query, ctype=None)
                for ctype in SUB_CTYPES:
                    for body in SUB_BODIES + seeds:
                        method = "PATCH" if "patch" in ctype else random.choice(["POST", "PUT"])
                        query = {"dryRun": "All", **({"fieldManager": "sweep", "force": "true"} if "apply" in ctype else {})}
                        self.send(method, url, body, query, ctype)

    def crds(self) -> None:
        """CRDs of odd schemas (CRD_SCHEMAS), created (a 422 is an answer too), then custom resources of
        odd values (CRD_VALUES) sent to each served one by create, update, merge patch and apply, through
        its /status and /scale; and CRDs with a misconfigured conversion webhook, read at the version it
        would convert to (its 500 is upstream's: a conversion that failed)."""
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        for i, (schema, subresources) in enumerate(CRD_SCHEMAS):
            plural, kind = f"sweeps{i}", f"Sweep{i}"
            served = self._crd(plural, kind, [{"name": "v1", "served": True, "storage": True, "subresources": subresources,
                                               "schema": {"openAPIV3Schema": schema}}])
            print(f"crds: {plural}: {'served' if served else 'refused'}", flush=True)
            if served:
                base, item = f"/apis/{SWEEP_GROUP}/v1/namespaces/{NS}/{plural}", f"/apis/{SWEEP_GROUP}/v1/namespaces/{NS}/{plural}/o"
                for spec in CRD_VALUES:
                    obj = {"apiVersion": f"{SWEEP_GROUP}/v1", "kind": kind, "metadata": {"name": "o"}, "spec": spec,
                           "status": spec}
                    self.send("POST", base, json.dumps(obj), {})
                    self.send("PATCH", item, json.dumps(obj), {"fieldManager": "sweep", "force": "true"},
                              "application/apply-patch+yaml")
                    self.send("PUT", item, json.dumps(obj), {})
                    self.send("PATCH", item, json.dumps({"spec": spec}), {}, "application/merge-patch+json")
                    self.send("PUT", item + "/status", json.dumps(obj), {})
                    self.send("GET", item + "/scale", None, {}, None)
                    self.send("PATCH", item + "/scale", json.dumps({"spec": {"replicas": 2}}), {}, "application/merge-patch+json")
                    self.send("DELETE", item, None, {}, None)
            self.raw.request("DELETE", f"{crds}/{plural}.{SWEEP_GROUP}", ctype=None)
        for i, webhook in enumerate(CONVERSION_WEBHOOKS):
            plural, kind = f"sweepconversions{i}", f"SweepConversion{i}"
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            versions = [{"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": schema}}
                        for v in ("v1", "v2")]
            if self._crd(plural, kind, versions, {"strategy": "Webhook", "webhook": webhook}):
                print(f"crds: {plural}: conversion {webhook['clientConfig']}", flush=True)
                for v in ("v1", "v2"):
                    obj = {"apiVersion": f"{SWEEP_GROUP}/{v}", "kind": kind, "metadata": {"name": f"o{v}"}}
                    self.send("POST", f"/apis/{SWEEP_GROUP}/{v}/namespaces/{NS}/{plural}", json.dumps(obj), {}, converts=True)
                    for read in ("", "/ov1", "?watch=1&timeoutSeconds=1"):
                        self.send("GET", f"/apis/{SWEEP_GROUP}/{v}/namespaces/{NS}/{plural}{read}", None, {}, None, converts=True)
            self.raw.request("DELETE", f"{crds}/{plural}.{SWEEP_GROUP}", ctype=None)

    def webhooks(self, answers: list[dict] | None = None, policies: tuple[str, ...] = ("Fail", "Ignore")) -> None:
        """A ConfigMap's create, update, merge patch and delete (dry runs) through a mutating and then a
        validating webhook answering each of `answers` (default WEBHOOK_ANSWERS), under each failurePolicy
        of `policies`. The webhooks, served here on 127.0.0.1, match only configmaps of the namespace NS
        labelled fuzz-sweep-webhook, so the cluster's other writes never reach them."""
        answers = WEBHOOK_ANSWERS if answers is None else answers
        import base64
        import threading

        from tests.apiserver.admission.server import WebhookServer

        server = WebhookServer().start()
        answer: dict = {}

        def handle(review: dict):
            if "sleep" in answer:
                threading.Event().wait(answer["sleep"])
            if "review" in answer:
                return json.loads(json.dumps(answer["review"]).replace('"UID"', json.dumps(review["request"]["uid"])))
            resp = {"uid": review["request"]["uid"], "allowed": True, **answer.get("response", {})}
            if isinstance(resp.get("patch"), (list, dict)):
                resp["patch"] = base64.b64encode(json.dumps(resp["patch"]).encode()).decode()
            return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}

        server.handlers["/w"] = handle
        admission = "/apis/admissionregistration.k8s.io/v1"
        label = "fuzz-sweep-webhook"
        base = f"/api/v1/namespaces/{NS}/configmaps"
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": label, "labels": {label: "1"}}, "data": {"k": "v"}}
        self.raw.request("POST", base, json.dumps(cm))
        try:
            for kind in ("mutating", "validating"):
                plural = f"{kind}webhookconfigurations"
                for policy in policies:
                    hook = {"name": "sweep.fuzz.example.com", "clientConfig": {"url": server.url("/w"), "caBundle": server.ca.bundle},
                            "rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                            "objectSelector": {"matchLabels": {label: "1"}}, "failurePolicy": policy, "timeoutSeconds": 1,
                            "sideEffects": "None", "admissionReviewVersions": ["v1"]}
                    self.raw.request("DELETE", f"{admission}/{plural}/{label}", ctype=None)
                    code, _, got = self.raw.request("POST", f"{admission}/{plural}", json.dumps(
                        {"metadata": {"name": label}, "webhooks": [hook]}))
                    if code != 201:
                        self.report("webhook not configured", "POST", plural, None, code, got, 0)
                        continue
                    print(f"webhooks: {kind}, failurePolicy {policy}: {len(answers)} answers", flush=True)
                    answer.clear()  # (the configuration reaches admission through its informer: until a denial comes)
                    answer["response"] = {"allowed": False}
                    deadline = time.monotonic() + 10
                    other = json.dumps({**cm, "metadata": {**cm["metadata"], "name": label + "-new"}})
                    while self.raw.request("POST", base + "?dryRun=All", other)[0] != 400 and time.monotonic() < deadline:
                        time.sleep(0.1)
                    for a in answers:
                        answer.clear()
                        answer.update(a)
                        live = self.raw.request("GET", f"{base}/{label}")[2]
                        other = {**cm, "metadata": {**cm["metadata"], "name": label + "-new"}}
                        for method, url, body, ctype in [
                                ("POST", base, other, "application/json"), ("PUT", f"{base}/{label}", live, "application/json"),
                                ("PATCH", f"{base}/{label}", {"data": {"p": "q"}}, "application/merge-patch+json"),
                                ("DELETE", f"{base}/{label}", None, None)]:
                            self.send(method, url, json.dumps(body) if body is not None else None, {"dryRun": "All"}, ctype,
                                      upstream_5xx=WEBHOOK_5XX)
                    self.raw.request("DELETE", f"{admission}/{plural}/{label}", ctype=None)
        finally:
            for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
                self.raw.request("DELETE", f"{admission}/{plural}/{label}", ctype=None)
            self.raw.request("DELETE", f"{base}/{label}", ctype=None)
            server.stop()

    def _crd(self, plural: str, kind: str, versions: list, conversion: dict | None = None) -> bool:
        """Whether the CRD was created and its first version came to be served (within 10 s)."""
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.{SWEEP_GROUP}"},
               "spec": {"group": SWEEP_GROUP, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                        "versions": versions, **({"conversion": conversion} if conversion else {})}}
        if self.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json.dumps(crd), {}) != 201:
            return False
        deadline = time.monotonic() + 10
        while self.raw.request("GET", f"/apis/{SWEEP_GROUP}/{versions[0]['name']}/namespaces/{NS}/{plural}")[0] != 200:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True


def _put(obj: dict, path: list, value) -> dict:
    """`obj` with `value` at `path`, the objects and lists on the way made where missing or of another type."""
    cur = obj
    for seg, nxt in zip(path, path[1:]):
        want = list if isinstance(nxt, int) else dict
        if isinstance(cur, list):
            cur.extend({} for _ in range(seg + 1 - len(cur)))
            if not isinstance(cur[seg], want):
                cur[seg] = want()
        elif not isinstance(cur.get(seg), want):
            cur[seg] = want()
        cur = cur[seg]
    if isinstance(cur, list):
        cur.extend({} for _ in range(path[-1] + 1 - len(cur)))
    cur[path[-1]] = value
    return obj


def _sample(schemas: Schemas, s: dict):
    """An item of a schema: its required fields, each a plain value of its type."""
    s = schemas.resolve(s)
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string") or t in ("integer", "number"):
        return 1
    if t in ("string", "boolean"):
        return "x" if t == "string" else True
    props = s.get("properties") or {}
    return {k: _sample(schemas, props[k]) for k in s.get("required") or () if k in props}


def _unique(v, i: int):
    """The i-th copy of an item: its names, keys, values and ports made its own."""
    if isinstance(v, str):
        return f"{v}{i}" if v else f"x{i}"
    if isinstance(v, dict):
        return {k: _unique(x, i) if k in ("name", "key", "value", "ip", "path", "mountPath", "containerPort", "port") else x
                for k, x in v.items()}
    if isinstance(v, int) and not isinstance(v, bool):
        return (v + i) % 65535 + 1
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+",
                    choices=["types", "schema", "lists", "protobuf", "subresources", "crds", "patches", "options", "webhooks",
                             "upstream", "auth"])
    ap.add_argument("--kubeconfig", required=True, help="the server to sweep (admin; it writes in the namespace fuzz)")
    ap.add_argument("--seed", type=int, default=1, help="the random choices' seed (verbs, values drawn)")
    ap.add_argument("--items", type=int, default=3000, help="the `lists` sweep's items per list")
    ap.add_argument("--slow", type=float, default=5.0, help="seconds past which an answer is reported")
    ap.add_argument("--out", default="fuzz-sweep.jsonl", help="where broken requests are written")
    ap.add_argument("--kinds", default=None, help="comma-separated plurals to sweep (default: all the fuzzer seeds)")
    ap.add_argument("--paths", type=int, default=None,
                    help="the most paths of each kind a sweep tries (default all; `protobuf`: its places, default 20)")
    args = ap.parse_args()
    random.seed(args.seed)
    sweep = Sweep(args.kubeconfig, args.slow, args.out, args.kinds.split(",") if args.kinds else None, args.paths)
    start = time.monotonic()
    for name in args.sweeps:
        if name == "protobuf":
            sweep.protobuf(args.paths or 20)
        else:
            sweep.lists(args.items) if name == "lists" else getattr(sweep, name)()
    print(f"{sweep.requests} requests in {time.monotonic() - start:.0f} s, {sweep.broken} broken")
    return 1 if sweep.broken else 0


if __name__ == "__main__":
    sys.exit(main())
