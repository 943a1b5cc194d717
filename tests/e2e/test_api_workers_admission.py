"""`--api-workers 2`: a LimitRange or PriorityClass written through one worker decides the very
next pod created through the other (each worker's admission keeps its listings until its own
watch cache, caught up before the request, says they changed)."""

from __future__ import annotations

import pytest

from .conftest import running_cluster
from .test_api_workers import _pair, pytestmark  # noqa: F401  (the same stores, the same skip)

PODS = "/api/v1/namespaces/default/pods"
LRS = "/api/v1/namespaces/default/limitranges"
PCS = "/apis/scheduling.k8s.io/v1/priorityclasses"


@pytest.fixture(scope="module")
def c(store_url):
    with running_cluster("api-workers-admission", ("--api-workers", "2"), store=store_url) as cluster:
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
