"""`--api-workers 2` with the operator's PKI (kube-apiserver's TLS, client CA, request-header and
proxy-client flags): every worker serves the given certificate, takes the given CAs' users and
front proxies (by the given header names), and reloads the files when they change; the workers
still relay to each other (pods' logs, /metrics) with `up`'s own front-proxy identity."""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path

import pytest

from nanokube.pki.ca import KeyPair, issue, new_ca

from .conftest import running_cluster, wait_for
from .test_api_workers import POD, Conn, _children, pytestmark  # noqa: F401  (the same stores, the same skip)

REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def _write(d: Path, name: str, data: bytes) -> str:
    (d / (name + ".tmp")).write_bytes(data)
    os.replace(d / (name + ".tmp"), d / name)
    return str(d / name)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("workers-pki")
    ca, front_ca = new_ca("workers-ca"), new_ca("workers-front-proxy-ca")
    serving = issue(ca, "workers-apiserver", dns_names=("localhost",), ips=("127.0.0.1",), server=True)
    proxy = issue(front_ca, "aggregator", client=True)
    for name, kp in (("ca", ca), ("front-proxy-ca", front_ca), ("apiserver", serving), ("proxy", proxy)):
        _write(d, f"{name}.crt", kp.cert_pem)
        _write(d, f"{name}.key", kp.key_pem)
    return {"dir": d, "ca": ca, "front_ca": front_ca, "serving": serving}


@pytest.fixture(scope="module")
def c(store_url, pki):
    d = pki["dir"]
    with running_cluster("api-workers-pki", (
            "--api-workers", "2", "--client-ca-file", str(d / "ca.crt"),
            "--tls-cert-file", str(d / "apiserver.crt"), "--tls-private-key-file", str(d / "apiserver.key"),
            "--requestheader-client-ca-file", str(d / "front-proxy-ca.crt"), "--requestheader-allowed-names", "edge",
            "--requestheader-username-headers", "X-Edge-User",
            "--proxy-client-cert-file", str(d / "proxy.crt"), "--proxy-client-key-file", str(d / "proxy.key"),
            "--cluster-signing-cert-file", str(d / "ca.crt"), "--cluster-signing-key-file", str(d / "ca.key")),
            store=store_url) as cluster:
        yield cluster


def _by_worker(c, pki, cert: KeyPair) -> dict[int, Conn]:
    """A connection with `cert` (trusting the operator's CA) to each worker, by its process id."""
    pids = [c.proc.pid, *_children(c.proc.pid)]
    ctx = ssl.create_default_context(cadata=pki["ca"].cert_pem.decode())
    ctx.load_cert_chain(_write(pki["dir"], "client.crt", cert.cert_pem), _write(pki["dir"], "client.key", cert.key_pem))

    def each():
        conns = {x.worker: x for x in (Conn(c.url, ctx, pids) for _ in range(8))}
        return len(conns) == 2 and conns
    return wait_for(each, 30, "a connection to each worker", every=0.1)


def _user(conn: Conn, headers: dict | None = None) -> str | int:
    conn.http.request("POST", REVIEW, body=json.dumps({"apiVersion": "authentication.k8s.io/v1",
                                                       "kind": "SelfSubjectReview"}),
                      headers={"Content-Type": "application/json", **(headers or {})})
    r = conn.http.getresponse()
    body = json.loads(r.read())
    return body["status"]["userInfo"]["username"] if r.status == 201 else r.status


def test_every_worker_takes_the_given_cas_and_reloads_them(c, pki):
    for conn in _by_worker(c, pki, issue(pki["ca"], "alice", client=True)).values():
        assert conn.http.sock.getpeercert(True) == ssl.PEM_cert_to_DER_cert(pki["serving"].cert_pem.decode())
        assert _user(conn) == "alice"
    for conn in _by_worker(c, pki, issue(pki["front_ca"], "edge", client=True)).values():
        assert _user(conn, {"X-Edge-User": "bob", "X-Remote-User": "mallory"}) == "bob"
    ca2 = new_ca("workers-ca-2")
    _write(pki["dir"], "ca.crt", pki["ca"].cert_pem + ca2.cert_pem)  # a rotation's new CA, each worker reloading
    carol = issue(ca2, "carol", client=True)

    def both_take_carol() -> bool:
        try:
            return all(_user(x) == "carol" for x in _by_worker(c, pki, carol).values())
        except (ssl.SSLError, OSError):  # (a worker that has not reloaded refuses her after the handshake)
            return False
    wait_for(both_take_carol, 30, "the new CA's user taken by both workers")


def test_the_workers_relay_to_each_other_with_their_own_identity(c, pki):
    """The other worker relays a pod's log and /metrics to worker 0 (which scrapes it back) as the
    front proxy DIR/pki's CA made, though the operator's request-header CA trusts no such proxy."""
    c.kubectl("apply", "-n", "default", "-f", "-", input=json.dumps(POD))
    wait_for(lambda: c.kubectl_json("get", "pod", "trainer").get("status", {}).get("phase") == "Running",
             what="trainer running", every=0.5)
    other = next(conn for pid, conn in _by_worker(c, pki, issue(pki["ca"], "admin", organizations=("system:masters",),
                                                                client=True)).items() if pid != c.proc.pid)
    other.http.request("GET", "/api/v1/namespaces/default/pods/trainer/log")
    r = other.http.getresponse()
    assert r.status == 200 and b"loading dataset\n" in r.read()
    other.http.request("GET", "/metrics")
    r = other.http.getresponse()
    body = r.read().decode()
    assert r.status == 200 and 'apiserver_request_total{' in body
