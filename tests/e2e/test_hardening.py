"""Hostile input through HTTP (issue 18): bounded cost, a Status for every
refusal, nothing stored that upstream refuses, and the server keeps serving."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import tempfile
import time
import urllib.parse

import pytest
import yaml

NS = "harden"


class Raw:
    """One keep-alive HTTPS connection with the admin certificate; answers are
    (status, headers, parsed JSON body or raw bytes)."""

    def __init__(self, kubeconfig: str):
        cfg = yaml.safe_load(open(kubeconfig))
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        url = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = url.hostname, url.port
        d = tempfile.mkdtemp()
        for k in ("client-certificate-data", "client-key-data"):
            open(f"{d}/{k}", "wb").write(base64.b64decode(user[k]))
        self.ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.ctx.load_cert_chain(f"{d}/client-certificate-data", f"{d}/client-key-data")
        self.conn = None

    def connect(self) -> http.client.HTTPSConnection:
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=10)
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
def test_quantity_exponent_beyond_int32_is_refused_at_once(raw, cpu):
    start = time.monotonic()
    code, _, body = raw.request("POST", PODS + "?dryRun=All", pod(resources={"requests": {"cpu": cpu}}))
    assert time.monotonic() - start < 1.0
    assert code in (400, 422), body
    assert "unable to parse quantity's suffix" in body["message"], body
    assert raw.request("GET", "/readyz", ctype=None)[0] == 200


@pytest.mark.parametrize("cpu", ["1e100000", "1e2147483647", "1e-2147483647"])
def test_huge_but_valid_exponent_costs_nothing(raw, cpu):
    start = time.monotonic()
    code, _, body = raw.request("POST", PODS + "?dryRun=All", pod(resources={"requests": {"cpu": cpu}}))
    assert time.monotonic() - start < 1.0
    assert code < 500, body
