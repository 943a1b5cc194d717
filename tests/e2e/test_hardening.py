"""Hostile input through HTTP (issue 18): bounded cost, a Status for every
refusal, nothing stored that upstream refuses, and the server keeps serving."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

import pytest

from tests.e2e.admin_tls import admin_context

NS = "harden"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module writes in a namespace of its
    own, and cluster-wide only a PriorityClass of its own name."""
    return session_cluster


class Raw:
    """One keep-alive HTTPS connection with the admin certificate; answers are
    (status, headers, parsed JSON body or raw bytes); `timeout`: the most seconds
    the socket waits for the server."""

    def __init__(self, kubeconfig: str, timeout: float = 10):
        server, self.ctx = admin_context(kubeconfig)
        url = urllib.parse.urlsplit(server)
        self.host, self.port = url.hostname, url.port
        self.conn, self.timeout = None, timeout

    def connect(self) -> http.client.HTTPSConnection:
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
        return self.conn

    def request(self, method: str, path: str, body=None, ctype: str | None = "application/json",
                headers: dict | None = None):
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        h = {"Accept": "application/json"}
        if ctype is not None:
            h["Content-Type"] = ctype
        h.update(headers or {})
        conn = self.connect()
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
        except Exception:
            conn.close()
            self.conn = None
            raise
        if r.getheader("Connection", "").lower() == "close":
            conn.close()
            self.conn = None
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = data
        return r.status, r.headers, parsed


@pytest.fixture(scope="module")
def raw(cluster):
    r = Raw(cluster.kubeconfig)
    assert r.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})[0] == 201
    return r


PODS = f"/api/v1/namespaces/{NS}/pods"


def pod(name: str = "p", **container) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox", **container}]}}


def assert_status(code: int, body, expected: int, reason: str | None = None) -> dict:
    assert code == expected, body
    assert isinstance(body, dict) and body.get("kind") == "Status" and body["code"] == expected, body
    if reason:
        assert body["reason"] == reason, body
    return body


@pytest.mark.parametrize("cpu", ["1e9999999999", "1e2147483648", "1e-2147483648"])
def test_quantity_exponent_beyond_int32_is_refused_as_a_bad_suffix(raw, cpu):
    """Refused by its suffix, not computed (10^9999999999 froze the server past the client's 10 s timeout)."""
    code, _, body = raw.request("POST", PODS + "?dryRun=All", pod(resources={"requests": {"cpu": cpu}}))
    assert code in (400, 422), body
    assert "unable to parse quantity's suffix" in body["message"], body
    assert raw.request("GET", "/readyz", ctype=None)[0] == 200


@pytest.mark.parametrize("cpu,canon", [("1e100000", "10e99999"), ("1e2147483647", "10e2147483646"),
                                       ("1e-2147483647", "1e-9")])
def test_huge_but_valid_exponent_is_kept_in_its_canonical_form(raw, cpu, canon):
    """What the parse costs is bounded in tests/registry/test_quantity.py (its peak memory, same values)."""
    code, _, body = raw.request("POST", PODS + "?dryRun=All", pod(resources={"requests": {"cpu": cpu}}))
    assert code == 201, body
    assert body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == canon, body


CMS = f"/api/v1/namespaces/{NS}/configmaps"
DEPLOYS = f"/apis/apps/v1/namespaces/{NS}/deployments"
DEEP_JSON = '{"metadata":{"annotations":' + '{"a":' * 1000 + "{}" + "}" * 1000 + "}}"
DEEP_YAML = "metadata:\n" + "".join("  " * (i + 1) + "a:\n" for i in range(1000))


def objects(raw) -> dict:
    """name -> resourceVersion of what the test namespace holds."""
    out = {}
    for path in (PODS, CMS, DEPLOYS):
        code, _, body = raw.request("GET", path)
        assert code == 200, body
        out.update({(path, i["metadata"]["name"]): i["metadata"]["resourceVersion"] for i in body["items"]})
    return out


@pytest.fixture(scope="module")
def existing(raw):
    """A ConfigMap and a Pod the refused requests below must leave as they are."""
    assert raw.request("POST", CMS, {"metadata": {"name": "keep"}, "data": {"a": "1"}})[0] == 201
    unscheduled = pod("keep")
    unscheduled["spec"]["schedulerName"] = "nobody"  # no scheduler or node writes it while the tests compare
    assert raw.request("POST", PODS, unscheduled)[0] == 201
    return raw


NULL_CASES = [
    # (id, path, body, expected code, text in the message)
    ("configmap-data-null", CMS, {"metadata": {"name": "nulls"}, "data": {"a": None}}, 201, None),
    ("volumes-null", PODS, {**pod("v"), "spec": {**pod()["spec"], "volumes": [None]}}, 422, "spec.volumes[0].name: Required value"),
    ("ports-null", PODS, pod("pt", ports=[None]), 422, "spec.containers[0].ports[0].containerPort: Required value"),
    ("template-spec-null", DEPLOYS, {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": None}}},
     422, "spec.template.spec.containers: Required value"),
    ("hpa-spec-null", f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers", {"metadata": {"name": "h"}, "spec": None},
     422, None),
    ("podgroup-spec-null", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups", {"metadata": {"name": "g"}, "spec": None},
     422, None),
    ("priorityclass-value-null", "/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "pc-null"}, "value": None},
     201, None),
    ("managedfields-manager-null", CMS, {"metadata": {"name": "mf", "managedFields": [{"manager": None, "operation": "Update"}]}},
     201, None),
    ("binarydata-not-ascii", CMS, {"metadata": {"name": "bin"}, "binaryData": {"a": "é"}}, 400, "illegal base64 data at input byte 0"),
]


@pytest.mark.parametrize("case", NULL_CASES, ids=[c[0] for c in NULL_CASES])
def test_nulls_and_odd_values_decode_as_go_does(existing, case):
    _, path, body, expected, text = case
    code, _, got = existing.request("POST", path + "?dryRun=All", body)
    assert code == expected, got
    if code >= 400:
        assert_status(code, got, expected)
    if text:
        assert text in got["message"], got


def test_null_map_value_is_an_empty_string(existing):
    code, _, got = existing.request("POST", CMS + "?dryRun=All", {"metadata": {"name": "n"}, "data": {"a": None, "b": "x"}})
    assert code == 201 and got["data"] == {"a": "", "b": "x"}, got


BODY_CASES = [
    # (id, method, path suffix, body, content type, code, text)
    ("merge-patch-deep", "PATCH", CMS + "/keep", DEEP_JSON, "application/merge-patch+json", 400, "exceeded max depth"),
    ("strategic-patch-deep", "PATCH", CMS + "/keep", DEEP_JSON, "application/strategic-merge-patch+json", 400, "exceeded max depth"),
    ("json-patch-deep", "PATCH", CMS + "/keep", "[" * 1000 + "]" * 1000, "application/json-patch+json", 400, "exceeded max depth"),
    ("yaml-deep", "POST", CMS, DEEP_YAML, "application/yaml", 400, None),
    ("json-deep", "POST", CMS, DEEP_JSON, "application/json", 400, "exceeded max depth"),
    ("yaml-recursive-alias", "POST", CMS, "metadata: {name: y}\nx: &a {b: *a}\n", "application/yaml", 400, "exceeded max depth"),
    ("yaml-alias-bomb", "POST", CMS, "metadata: {name: y}\na: &a [1,2,3,4,5,6,7,8,9]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
     "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
     "f: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n", "application/yaml", 400, "excessive aliasing"),
    ("apply-metadata-string", "PATCH", CMS + "/keep?fieldManager=m", json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}),
     "application/apply-patch+yaml", 400, "failed to create typed patch object (/; /v1, Kind=ConfigMap): .metadata: expected map, got &{x}"),
    ("binding-target-string", "POST", PODS + "/keep/binding", json.dumps({"metadata": {"name": "keep"}, "target": "x"}),
     "application/json", 400, "Go struct field Binding.target of type v1.ObjectReference"),
    ("eviction-options-string", "POST", PODS + "/keep/eviction", json.dumps({"metadata": {"name": "keep"}, "deleteOptions": "x"}),
     "application/json", 400, "Go struct field Eviction.deleteOptions of type v1.DeleteOptions"),
    ("eviction-array", "POST", PODS + "/keep/eviction", "[]", "application/json", 400, "cannot unmarshal array"),
    ("delete-grace-abc", "DELETE", CMS + "/keep?gracePeriodSeconds=abc", None, None, 400, 'parsing "abc": invalid syntax'),
    ("delete-dryrun-bogus", "DELETE", CMS + "/keep", json.dumps({"dryRun": ["Bogus"]}), "application/json", 422,
     'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All"'),
    ("delete-dryrun-query-bogus", "DELETE", CMS + "/keep?dryRun=Bogus", None, None, 422, 'dryRun: Unsupported value: ["Bogus"]'),
    ("delete-orphan-and-policy", "DELETE", CMS + "/keep", json.dumps({"orphanDependents": True, "propagationPolicy": "Background"}),
     "application/json", 422, "orphanDependents and deletionPropagation cannot be both set"),
    ("delete-options-types", "DELETE", CMS + "/keep", json.dumps({"gracePeriodSeconds": "x"}), "application/json", 400,
     "DeleteOptions.gracePeriodSeconds of type int64"),
    ("watch-timeout-abc", "GET", CMS + "?watch=true&timeoutSeconds=abc", None, None, 400, 'parsing "abc": invalid syntax'),
    ("duplicate-keys-strict", "POST", CMS + "?fieldValidation=Strict", '{"metadata":{"name":"dup","name":"dup2"}}',
     "application/json", 400, 'strict decoding error: duplicate field "metadata.name"'),
    ("content-type-text", "POST", CMS, json.dumps({"metadata": {"name": "txt"}}), "text/plain", 415, "unknown format"),
    ("field-manager-too-long", "POST", CMS + "?fieldManager=" + "m" * 129, json.dumps({"metadata": {"name": "fm"}}),
     "application/json", 422, 'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes'),
    ("field-manager-newline", "POST", CMS + "?fieldManager=a%0Ab", json.dumps({"metadata": {"name": "fm"}}),
     "application/json", 422, "fieldManager: Invalid value: \"a\\nb\": invalid character U+000A (at position 1)"),
    ("apply-without-kind", "PATCH", CMS + "/keep?fieldManager=m", json.dumps({"apiVersion": "v1", "metadata": {"name": "keep"}}),
     "application/apply-patch+yaml", 400, "invalid object type: /v1, Kind="),
]


@pytest.mark.parametrize("case", BODY_CASES, ids=[c[0] for c in BODY_CASES])
def test_hostile_requests_get_a_status_and_change_nothing(existing, case):
    _, method, path, body, ctype, expected, text = case
    before = objects(existing)
    code, _, got = existing.request(method, path, body, ctype)
    assert_status(code, got, expected)
    if text:
        assert text in got["message"], got
    assert objects(existing) == before


def test_duplicate_keys_warn_by_default(existing):
    code, headers, got = existing.request("POST", CMS + "?dryRun=All", '{"metadata":{"name":"dupw"},"data":{"a":"1","a":"2"}}')
    assert code == 201 and got["data"] == {"a": "2"}, got
    assert '299 - "duplicate field \\"data.a\\""' in headers.get_all("Warning"), headers.get_all("Warning")


def test_yaml_keys_become_strings_and_timestamps_stay_strings(existing):
    code, _, got = existing.request("POST", CMS + "?dryRun=All", "metadata: {name: y}\ndata: {1: a, d: 2024-01-01}\n",
                                    "application/yaml")
    assert code == 201 and got["data"] == {"1": "a", "d": "2024-01-01"}, got


def test_future_resource_version_is_a_504_after_three_seconds(existing, cluster):
    patient = Raw(cluster.kubeconfig, timeout=60)  # a loaded machine may add seconds to the answer
    start = time.monotonic()
    code, _, got = patient.request("GET", CMS + "?resourceVersion=99999999")
    took = time.monotonic() - start
    patient.conn.close()
    assert_status(code, got, 504, "Timeout")
    assert 2.5 < took < 30, took  # upstream waits 3 s, not until the request's 60 s timeout
    assert got["message"].startswith("Timeout: Too large resource version: 99999999, current: ")
    assert got["details"]["causes"] == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
    assert got["details"]["retryAfterSeconds"] == 1


SVCS = f"/api/v1/namespaces/{NS}/services"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"


def svc(name: str = "s", **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


def with_volume(volume: dict, **container) -> dict:
    p = pod("vol", **container)
    p["spec"]["volumes"] = [volume]
    return p


INVALID_CASES = [
    # (id, path, body, field, message fragment)
    ("namespace-trailing-newline", "/api/v1/namespaces", {"metadata": {"name": "nl\n"}}, "metadata.name", "RFC 1123 label"),
    ("label-key-newline", CMS, {"metadata": {"name": "a", "labels": {"k\n": "v"}}}, "metadata.labels", "name part"),
    ("label-value-newline", CMS, {"metadata": {"name": "a", "labels": {"k": "v\n"}}}, "metadata.labels", "a valid label"),
    ("annotation-key-newline", CMS, {"metadata": {"name": "a", "annotations": {"k\n": "v"}}}, "metadata.annotations", "name part"),
    ("data-key-newline", CMS, {"metadata": {"name": "a"}, "data": {"k\n": "v"}}, "data[k\n]", "config key"),
    ("container-name-newline", PODS, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c\n", "image": "i"}]}},
     "spec.containers[0].name", "RFC 1123 label"),
    ("service-name-digit-first", SVCS, svc("1abc"), "metadata.name", "DNS-1035 label"),
    ("service-name-dotted", SVCS, svc("a.b"), "metadata.name", "DNS-1035 label"),
    ("service-selector-key", SVCS, svc(selector={"bad key!": "v"}), "spec.selector", "name part"),
    ("service-selector-value", SVCS, svc(selector={"k": "bad value!"}), "spec.selector", "a valid label"),
    ("service-duplicate-nodeport", SVCS, {"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [
        {"name": "a", "port": 80, "nodePort": 30080}, {"name": "b", "port": 81, "nodePort": 30080}]}},
     "spec.ports[1].nodePort", "Duplicate value: 30080"),
    ("volume-mount-without-volume", PODS, pod("p", volumeMounts=[{"name": "nov", "mountPath": "/x"}]),
     "spec.containers[0].volumeMounts[0].name", 'Not found: "nov"'),
    ("negative-size-limit", PODS, with_volume({"name": "v", "emptyDir": {"sizeLimit": "-1"}}),
     "spec.volumes[0].emptyDir.sizeLimit", "SizeLimit field must be a valid resource quantity"),
    ("deviceclass-cel-syntax", CLASSES, {"metadata": {"name": "dc"}, "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}},
     "spec.selectors[0].cel.expression", "compilation failed: ERROR: <input>:1:17: Syntax error"),
    ("deviceclass-cel-not-bool", CLASSES, {"metadata": {"name": "dc"}, "spec": {"selectors": [{"cel": {"expression": "1 + 1"}}]}},
     "spec.selectors[0].cel.expression", "must evaluate to bool"),
    ("deviceclass-cel-nested", CLASSES, {"metadata": {"name": "dc"}, "spec": {"selectors": [
        {"cel": {"expression": "(" * 3000 + "true" + ")" * 3000}}]}},
     "spec.selectors[0].cel.expression", "expression recursion limit exceeded: 250"),
    ("claim-cel-syntax", CLAIMS, {"metadata": {"name": "rc"}, "spec": {"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "x", "selectors": [{"cel": {"expression": "device.driver =="}}]}}]}}},
     "spec.devices.requests[0].exactly.selectors[0].cel.expression", "compilation failed"),
    ("generate-name-too-long", CMS, {"metadata": {"name": "g", "generateName": "x" * 300}}, "metadata.generateName",
     "must be no more than 253 characters"),
]


@pytest.mark.parametrize("case", INVALID_CASES, ids=[c[0] for c in INVALID_CASES])
def test_invalid_input_is_refused_with_upstreams_field(existing, case):
    _, path, body, field, text = case
    code, _, got = existing.request("POST", path, body)
    assert_status(code, got, 422, "Invalid")
    assert field in [c.get("field") for c in got["details"]["causes"]], got
    assert text in got["message"], got


DECODE_CASES = [
    ("apiversion-false", {"apiVersion": False, "kind": "ConfigMap", "metadata": {"name": "a"}}, "unmarshal bool"),
    ("apiversion-zero", {"apiVersion": 0, "kind": "ConfigMap", "metadata": {"name": "a"}}, "unmarshal number"),
    ("apiversion-list", {"apiVersion": [], "kind": "ConfigMap", "metadata": {"name": "a"}}, "unmarshal array"),
]


@pytest.mark.parametrize("case", DECODE_CASES, ids=[c[0] for c in DECODE_CASES])
def test_wrongly_typed_type_meta_is_a_decode_error(existing, case):
    _, body, text = case
    code, _, got = existing.request("POST", CMS, body)
    assert_status(code, got, 400, "BadRequest")
    assert text in got["message"] and "ConfigMap.apiVersion of type string" in got["message"], got


def test_lease_times_are_parsed_as_go_does(existing):
    code, _, got = existing.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
                                    {"metadata": {"name": "l"}, "spec": {"renewTime": "2024-13-45T99:99:99.000000Z"}})
    assert_status(code, got, 400, "BadRequest")
    assert 'parsing time "2024-13-45T99:99:99.000000Z": month out of range' in got["message"]


def test_quantities_are_stored_in_canonical_form(existing):
    code, _, got = existing.request("POST", PODS + "?dryRun=All", with_volume({"name": "v", "emptyDir": {"sizeLimit": "1\n"}}))
    assert code == 201 and got["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "1", got


def test_uid_is_a_precondition_on_put_and_immutable_on_patch(existing):
    code, _, cm = existing.request("GET", CMS + "/keep")
    before = cm["metadata"]["resourceVersion"]
    cm["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    code, _, got = existing.request("PUT", CMS + "/keep", cm)
    assert_status(code, got, 409, "Conflict")
    assert "Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: " in got["message"]
    code, _, got = existing.request("PATCH", CMS + "/keep", json.dumps({"metadata": {"uid": "other"}}), "application/merge-patch+json")
    assert_status(code, got, 422, "Invalid")
    assert 'metadata.uid: Invalid value: "other": field is immutable' in got["message"], got
    assert existing.request("GET", CMS + "/keep")[2]["metadata"]["resourceVersion"] == before


def test_scale_replicas_beyond_int32_are_refused(existing):
    assert existing.request("POST", DEPLOYS, {"metadata": {"name": "scaled"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                                                               "spec": {"containers": [{"name": "c", "image": "i"}]}}}})[0] == 201
    # a patch's result that does not decode is the patchers' 422 (patch: Invalid value), a body the decoder's 400
    for method, body, ctype, code_reason in (
            ("PATCH", json.dumps({"spec": {"replicas": 2147483648}}), "application/merge-patch+json", (422, "Invalid")),
            ("PUT", {"metadata": {"name": "scaled"}, "spec": {"replicas": 2147483648}}, "application/json",
             (400, "BadRequest"))):
        code, _, got = existing.request(method, DEPLOYS + "/scaled/scale", body, ctype)
        assert_status(code, got, *code_reason)
        assert "cannot unmarshal number 2147483648 into Go struct field ScaleSpec.spec.replicas of type int32" in got["message"]
    assert existing.request("GET", DEPLOYS + "/scaled")[2]["spec"]["replicas"] == 1


def test_server_side_apply_on_scale(existing):
    scale = json.dumps({"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {"replicas": 3}})
    # the creator owns the defaulted replicas: an apply through /scale conflicts with it unless forced
    code, _, got = existing.request("PATCH", DEPLOYS + "/scaled/scale?fieldManager=hpa", scale,
                                    "application/apply-patch+yaml")
    assert_status(code, got, 409, "Conflict")
    assert got["message"].startswith("Apply failed with 1 conflict: conflict with ") and \
        got["message"].endswith(" using apps/v1: .spec.replicas"), got
    code, _, got = existing.request("PATCH", DEPLOYS + "/scaled/scale?fieldManager=hpa&force=true", scale,
                                    "application/apply-patch+yaml")
    assert code == 200 and got["spec"]["replicas"] == 3, got
    assert existing.request("GET", DEPLOYS + "/scaled")[2]["spec"]["replicas"] == 3


def test_pod_status_ips_must_be_ips(existing):
    code, _, p = existing.request("GET", PODS + "/keep")
    p["status"]["podIP"] = "not-an-ip"
    p["metadata"].pop("resourceVersion")
    code, _, got = existing.request("PUT", PODS + "/keep/status", p)
    assert_status(code, got, 422, "Invalid")
    # v1's podIP, unlike podIPs[0], replaces podIPs in the internal status upstream validates
    assert 'status.podIPs[0]: Invalid value: "not-an-ip": must be a valid IP address' in got["message"], got


def raw_exchange(raw: Raw, data: bytes) -> tuple[int, dict, bytes]:
    """Send bytes as they are on a fresh TLS connection; (status, headers, body) of the answer."""
    import socket

    with socket.create_connection((raw.host, raw.port), timeout=10) as sock:
        with raw.ctx.wrap_socket(sock, server_hostname="localhost") as s:
            s.sendall(data)
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


HTTP_LAYER_CASES = [
    # (id, request bytes, status)
    ("long-request-line", b"GET " + PODS.encode() + b"/" + b"a" * 9000 + b" HTTP/1.1\r\n", 404),
    ("newline-in-name", b"GET " + CMS.encode() + b"/a%0Ab HTTP/1.1\r\n", 404),
    ("nul-in-content-type", b"POST " + CMS.encode() + b" HTTP/1.1\r\nContent-Type: application/json\x00x\r\nContent-Length: 2\r\n", 400),
    ("unknown-method", b"FROB " + CMS.encode() + b" HTTP/1.1\r\n", 405),  # a token: routed, no route takes it
    ("bad-method", b"FR@B " + CMS.encode() + b" HTTP/1.1\r\n", 400),  # no token: the parser's
    ("huge-header", b"GET " + CMS.encode() + b"/missing HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n", 404),
    ("header-over-a-mebibyte", b"GET " + CMS.encode() + b" HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n", 400),
    ("bad-gzip-body", b"POST " + CMS.encode() + b" HTTP/1.1\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
     b"Content-Length: 5\r\n", 400),
]


@pytest.mark.parametrize("case", HTTP_LAYER_CASES, ids=[c[0] for c in HTTP_LAYER_CASES])
def test_every_http_error_is_a_status(existing, case):
    _, request, expected = case
    body = b"{}" if b"Content-Length: 2" in request else b"xxxxx" if b"Content-Length: 5" in request else b""
    code, headers, payload = raw_exchange(existing, request + b"Host: localhost\r\nConnection: close\r\n\r\n" + body)
    assert code == expected, payload[:300]
    assert headers["content-type"].startswith("application/json"), headers
    status = json.loads(payload)
    assert status["kind"] == "Status" and status["code"] == expected and status["status"] == "Failure", status


def test_requests_the_parser_refuses_log_no_error(cluster, existing):
    """A malformed request is the client's doing: answered with a Status (400; 405 for a method no route
    takes) and, as Go's net/http does, not logged; aiohttp logged an ERROR with a traceback for each (a
    later request of a kept-alive connection with an unknown method, too many headers, a NUL in a
    header), so any client could fill the log."""
    from .logscan import read_from, records

    start = cluster.log_path.stat().st_size
    head = b"Host: localhost\r\nConnection: close\r\n\r\n"
    for request in [b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\nFROB " + CMS.encode() + b" HTTP/1.1\r\n" + head,
                    b"GET " + CMS.encode() + b" HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(200)) + head,
                    b"GET " + CMS.encode() + b" HTTP/1.1\r\nX-A: a\x00b\r\n" + head]:
        code, headers, payload = raw_exchange(existing, request)
        assert code in (200, 400, 405) and headers["content-type"].startswith("application/json"), payload[:200]
    assert existing.request("GET", "/readyz", ctype=None)[0] == 200  # (the server has logged what it would)
    logged = [(level, logger) for level, logger, _ in records(read_from(cluster.log_path, start)) if level == "ERROR"]
    assert logged == []


def test_a_body_that_does_not_decompress_is_a_400_and_the_connection_goes_on(cluster, existing):
    """A gzip body that does not decode is a 400, read or not: one the handler never read (its request refused
    first, as an impersonated user's) was drained after the answer by aiohttp's decompression, which failed,
    logged a traceback and dropped the kept-alive connection, so the next request on it got no answer."""
    from .logscan import read_from, records

    start = cluster.log_path.stat().st_size
    code, _, got = existing.request("PUT", CMS + "/keep?dryRun=All", b"{}", headers={"Content-Encoding": "gzip"})
    assert code == 400 and got["message"].startswith("the request body could not be read: ") and \
        got["message"].endswith("Can not decode content-encoding: gzip"), got
    conn = existing.conn
    code, _, got = existing.request("PUT", CMS + "/keep?dryRun=All", b"{}",
                                    headers={"Content-Encoding": "gzip", "Impersonate-User": "fuzz-nobody"})
    assert code == 403, got
    assert existing.request("GET", CMS + "/keep")[0] == 200
    assert existing.conn is conn  # (the same kept-alive connection answered all three)
    assert [r for r in records(read_from(cluster.log_path, start)) if r[0] == "ERROR"] == []


def test_header_bytes_that_are_not_utf8_are_replacement_characters(existing):
    """Go keeps a header's bytes and its encoders write each byte that is not UTF-8 as U+FFFD: a field
    manager from the User-Agent, an impersonated user, an audit ID. Each was a 500 (a lone surrogate
    that no encoder writes)."""
    head = b"Host: localhost\r\nContent-Type: application/json\r\nConnection: close\r\n"
    body = b'{"metadata": {"name": "agent"}, "data": {"a": "b"}}'
    code, _, payload = raw_exchange(existing, b"POST " + CMS.encode() + b" HTTP/1.1\r\nUser-Agent: a\xe9b/1\r\n"
                                    b"Audit-ID: \xff\r\n" + head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert code == 201, payload
    assert [e["manager"] for e in json.loads(payload)["metadata"]["managedFields"]] == ["a\ufffdb"]
    code, _, payload = raw_exchange(existing, b"GET " + CMS.encode() + b" HTTP/1.1\r\nImpersonate-User: a\xe9b\r\n"
                                    b"Impersonate-Extra-x: \xe9\r\n" + head + b"\r\n")
    assert (code, json.loads(payload)["message"]) == (403, f'configmaps is forbidden: User "a\ufffdb" cannot list resource '
                                                       f'"configmaps" in API group "" in the namespace "{NS}"')


def test_gzip_bodies_are_read_and_the_connection_stays_open(existing):
    import gzip

    body = gzip.compress(json.dumps({"metadata": {"name": "zipped"}}).encode())
    code, _, got = existing.request("POST", CMS + "?dryRun=All", body, headers={"Content-Encoding": "gzip"})
    assert code == 201, got
    conn = existing.conn
    assert conn is not None
    assert existing.request("GET", CMS + "/keep")[0] == 200
    assert existing.conn is conn  # the same kept-alive connection


def test_head_and_version(existing):
    code, _, got = existing.request("GET", "/version/")
    assert code == 200 and got["major"] == "1", got
    code, headers, _ = raw_exchange(existing, b"HEAD " + CMS.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert headers["content-type"].startswith("application/json")


def test_apply_that_drops_a_managers_only_label_removes_it(existing):
    apply = "application/apply-patch+yaml"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "labels": {"a": "b"}}, "data": {"x": "1"}}
    assert existing.request("PATCH", CMS + "/applied?fieldManager=me", json.dumps(cm), apply)[0] == 201
    del cm["metadata"]["labels"]
    code, _, got = existing.request("PATCH", CMS + "/applied?fieldManager=me", json.dumps(cm), apply)
    assert code == 200, got
    assert "labels" not in got["metadata"] and got["metadata"]["name"] == "applied" and got["data"] == {"x": "1"}


def test_core_events_are_served_by_events_k8s_io_with_a_null_event_time(existing):
    assert existing.request("POST", f"/api/v1/namespaces/{NS}/events", {
        "metadata": {"name": "legacy"}, "involvedObject": {"kind": "Pod", "name": "keep", "namespace": NS},
        "reason": "Tested", "message": "m", "type": "Normal"})[0] == 201
    code, _, got = existing.request("GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events/legacy")
    assert code == 200 and "eventTime" in got and got["eventTime"] is None, got


def test_writes_by_the_servers_own_components_are_audited(existing, cluster):
    """A Deployment's pods are created by the controller manager and bound by the scheduler, both in-process:
    their writes are in the audit log with their users, as kube-apiserver audits its clients."""
    assert existing.request("POST", DEPLOYS, {"metadata": {"name": "audited"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "audited"}},
        "template": {"metadata": {"labels": {"app": "audited"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})[0] == 201
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        events = cluster.audit_events()
        ours = [e for e in events if e.get("objectRef", {}).get("namespace") == NS
                and e["objectRef"].get("resource") == "pods"]
        creates = [e for e in ours if e["verb"] == "create" and not e["objectRef"].get("subresource")
                   and e["user"]["username"] == "system:kube-controller-manager"]
        bindings = [e for e in ours if e["objectRef"].get("subresource") == "binding"
                    and e["objectRef"]["name"].startswith("audited-")]
        if creates and bindings:
            break
        time.sleep(0.2)
    assert creates and bindings, ours
    # a generateName create: upstream's objectRef names no object the request did not (kubernetes#100466)
    assert all(e["responseStatus"]["code"] == 201 and "name" not in e["objectRef"] for e in creates), creates
    assert bindings[0]["user"]["username"] == "system:kube-scheduler"
    assert bindings[0]["objectRef"]["uid"], "the Binding sent names its pod's uid, which the objectRef takes"
    assert bindings[0]["requestURI"].endswith("/binding")


def test_duplicate_keys_in_a_patch(existing):
    patch = '{"data":{"a":"1","a":"2"}}'
    code, _, got = existing.request("PATCH", CMS + "/keep?fieldValidation=Strict", patch, "application/merge-patch+json")
    assert_status(code, got, 422, "Invalid")  # a strict error of the patch's result (patch: Invalid value)
    assert got["message"].startswith(' "" is invalid: patch: Invalid value: ') and \
        got["message"].endswith('": strict decoding error: duplicate field "data.a"')
    code, headers, got = existing.request("PATCH", CMS + "/keep?dryRun=All", patch, "application/strategic-merge-patch+json")
    assert code == 200 and got["data"]["a"] == "2"
    assert '299 - "duplicate field \\"data.a\\""' in headers.get_all("Warning")


def test_duplicate_keys_in_yaml_bodies(existing):
    body = "metadata:\n  name: dupy\ndata:\n  a: '1'\n  a: '2'\n"
    code, _, got = existing.request("POST", CMS + "?fieldValidation=Strict", body, "application/yaml")
    assert_status(code, got, 400, "BadRequest")
    assert got["message"].endswith('strict decoding error: yaml: unmarshal errors:\n  line 5: key "a" already set in map'), got
    code, headers, got = existing.request("PATCH", CMS + "/dupy?fieldManager=m&dryRun=All",
                                          "apiVersion: v1\nkind: ConfigMap\n" + body, "application/apply-patch+yaml")
    assert code == 201 and got["data"] == {"a": "2"}, got
    assert '299 - "line 7: key \\"a\\" already set in map"' in headers.get_all("Warning")
