"""`--api-workers 2`: a LimitRange or PriorityClass written through one worker decides the very
next pod created through the other (each worker's admission keeps its listings until its own
watch cache, caught up before the request, says they changed); a token signed with the operator's
service-account key through one verifies through the other (each worker takes those flags)."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .conftest import running_cluster, wait_for
from .test_api_workers import _pair, pytestmark  # noqa: F401  (the same stores, the same skip)

PODS = "/api/v1/namespaces/default/pods"
LRS = "/api/v1/namespaces/default/limitranges"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"


ISSUER = "https://workers.example.test"


@pytest.fixture(scope="module")
def c(store_url, tmp_path_factory):
    key = tmp_path_factory.mktemp("sa") / "sa.key"
    key.write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with running_cluster("api-workers-admission", ("--api-workers", "2", "--service-account-signing-key-file",
                                                   str(key), "--service-account-key-file", str(key),
                                                   "--service-account-issuer", ISSUER),
                         store=store_url) as cluster:
        yield cluster


def _pod(conn, name: str) -> dict:
    code, got = conn.call("POST", PODS, {"metadata": {"name": name}, "spec": {"containers": [
        {"name": "main", "image": "busybox"}]}})
    assert code == 201, got
    return got["spec"]


def test_a_change_through_one_worker_admits_the_next_pod_through_the_other(c):
    a, b = _pair(c)
    assert "limits" not in _pod(b, "p0")["containers"][0].get("resources", {})
    code, lr = a.call("POST", LRS, {"metadata": {"name": "lr"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m"}}]}})
    assert code == 201, lr
    assert _pod(b, "p1")["containers"][0]["resources"]["limits"] == {"cpu": "500m"}
    lr["spec"]["limits"][0]["default"] = {"cpu": "700m"}
    assert a.call("PUT", f"{LRS}/lr", lr)[0] == 200
    assert _pod(b, "p2")["containers"][0]["resources"]["limits"] == {"cpu": "700m"}
    assert a.call("DELETE", f"{LRS}/lr")[0] == 200
    assert "limits" not in _pod(b, "p3")["containers"][0].get("resources", {})
    assert _pod(a, "p4")["priority"] == 0
    assert b.call("POST", PCS, {"metadata": {"name": "high"}, "value": 1000, "globalDefault": True})[0] == 201
    assert (_pod(a, "p5")["priority"], _pod(b, "p6")["priority"]) == (1000, 1000)
    assert b.call("DELETE", f"{PCS}/high")[0] == 200
    assert _pod(a, "p7")["priority"] == 0


def test_a_token_issued_through_one_worker_verifies_through_the_other(c):
    a, b = _pair(c)
    made = wait_for(lambda: (r := a.call("POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
                                         {"spec": {}}))[0] == 201 and r[1], 30, "a token for default/default")
    token = made["status"]["token"]
    head, body = (json.loads(base64.urlsafe_b64decode(p + "==")) for p in token.split(".")[:2])
    assert (head["alg"], body["iss"]) == ("RS256", ISSUER)
    code, review = b.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token}})
    assert code == 201 and review["status"]["authenticated"], review
    assert review["status"]["user"]["username"] == "system:serviceaccount:default:default"
