"""Bad input gets upstream's Status (code, reason, field path), and changes nothing."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.e2e.admin_tls import admin_context

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store

NS = "bad"


class HTTP:
    """A raw HTTPS client with the admin certificate from the kubeconfig."""

    def __init__(self, kubeconfig: str):
        self.server, self.ctx = admin_context(kubeconfig)

    def request(self, method: str, path: str, body: bytes | None = None, ctype: str = "application/json") -> tuple[int, dict]:
        req = urllib.request.Request(self.server + path, data=body, method=method, headers={"Content-Type": ctype, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module writes only in its own namespace,
    and every write it sends but the setup's is refused."""
    return session_cluster


@pytest.fixture(scope="module")
def http(cluster):
    h = HTTP(cluster.kubeconfig)
    code, _ = h.request("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": NS}}).encode())
    assert code == 201
    code, _ = h.request("POST", f"/api/v1/namespaces/{NS}/configmaps",
                        json.dumps({"metadata": {"name": "existing"}, "data": {"a": "1"}}).encode())
    assert code == 201
    return h


def pod(name: str = "p", **spec) -> dict:
    base = {"containers": [{"name": "c", "image": "busybox"}]}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": base}


PODS = f"/api/v1/namespaces/{NS}/pods"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
PGS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"

CASES = [
    # (id, method, path, body, content-type, code, reason, field)
    ("malformed-json", "POST", PODS, b'{"metadata": ', "application/json", 400, "BadRequest", None),
    ("wrong-type", "POST", PODS, json.dumps({"metadata": {"name": "x"}, "spec": {"containers": "nope"}}).encode(),
     "application/json", 400, "BadRequest", None),
    ("missing-containers", "POST", PODS, json.dumps(pod(containers=[])).encode(), "application/json", 422, "Invalid",
     "spec.containers"),
    ("bad-name", "POST", PODS, json.dumps(pod("Bad_Name")).encode(), "application/json", 422, "Invalid", "metadata.name"),
    ("bad-restart-policy", "POST", PODS, json.dumps(pod(restartPolicy="Sometimes")).encode(), "application/json", 422,
     "Invalid", "spec.restartPolicy"),
    ("already-exists", "POST", CMS, json.dumps({"metadata": {"name": "existing"}}).encode(), "application/json", 409,
     "AlreadyExists", None),
    ("not-found", "GET", f"{CMS}/missing", None, "application/json", 404, "NotFound", None),
    ("stale-update", "PUT", f"{CMS}/existing",
     json.dumps({"metadata": {"name": "existing", "resourceVersion": "1"}, "data": {"a": "2"}}).encode(),
     "application/json", 409, "Conflict", None),
    ("unsupported-patch", "PATCH", f"{CMS}/existing", b"{}", "application/xml", 415, "UnsupportedMediaType", None),
    ("too-large", "POST", CMS, json.dumps({"metadata": {"name": "big"}, "data": {"x": "y" * (4 * 1024 * 1024)}}).encode(),
     "application/json", 413, "RequestEntityTooLarge", None),
    ("podgroup-no-policy", "POST", PGS, json.dumps({"metadata": {"name": "pg"}, "spec": {"schedulingPolicy": {}}}).encode(),
     "application/json", 422, "Invalid", "spec.schedulingPolicy"),
    ("podgroup-zero-mincount", "POST", PGS,
     json.dumps({"metadata": {"name": "pg"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}).encode(),
     "application/json", 422, "Invalid", "spec.schedulingPolicy.gang.minCount"),
    ("claim-no-class", "POST", CLAIMS,
     json.dumps({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}}}).encode(),
     "application/json", 422, "Invalid", "spec.devices.requests[0].exactly.deviceClassName"),
    ("unknown-namespace", "POST", "/api/v1/namespaces/nowhere/configmaps", json.dumps({"metadata": {"name": "x"}}).encode(),
     "application/json", 404, "NotFound", None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(http, case):
    _, method, path, body, ctype, code, reason, field = case
    before = {p: http.request("GET", p)[1] for p in (PODS, CMS, PGS, CLAIMS)}
    got, status = http.request(method, path, body, ctype)
    assert got == code, status
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert status["code"] == code and status["reason"] == reason, status
    assert status["message"]
    if field:
        fields = [c.get("field") for c in status["details"]["causes"]]
        assert field in fields, status
    after = {p: http.request("GET", p)[1] for p in (PODS, CMS, PGS, CLAIMS)}
    for p in before:
        # every object as it was (a list's own resourceVersion is the store's, which heartbeats move)
        assert [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in after[p]["items"]] == \
            [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in before[p]["items"]], p


def test_invalid_message_reads_like_upstream(http):
    code, status = http.request("POST", PODS, json.dumps(pod(restartPolicy="Sometimes")).encode())
    assert code == 422
    assert status["message"].startswith('Pod "p" is invalid: spec.restartPolicy: Unsupported value: "Sometimes"')


def test_strict_field_validation(http):
    code, status = http.request("POST", CMS + "?fieldValidation=Strict",
                                json.dumps({"metadata": {"name": "strict"}, "bogus": 1}).encode())
    assert code == 400
    assert 'unknown field "bogus"' in status["message"]
