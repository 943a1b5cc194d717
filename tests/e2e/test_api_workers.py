"""`nanokube up --api-workers 2`: two API server processes on one port and one store (SQLite in
its shared mode, or etcd), driven as a user would, over connections the kernel spread over both
workers, each of them known to the test (which process holds the server side of the socket)."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.api import tls_context

from .conftest import STORE, running_cluster, wait_for

#: the outcome depends on the store: this module runs again on etcd (each worker its own etcd watch)
pytestmark = [pytest.mark.store, pytest.mark.skipif(STORE == "memory", reason="the memory store serves one process")]

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.workers.example.com"},
    "spec": {"group": "workers.example.com", "scope": "Namespaced",
             "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]


def _socket_owner(port: int, peer_port: int, pids: list[int]) -> int | None:
    """Which of `pids` holds the server side of the TCP connection from `peer_port` to `port`."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == port and int(f[2].split(":")[1], 16) == peer_port:
            inode = f[9]
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


class Conn:
    """One keep-alive HTTPS connection, and the worker serving it."""

    def __init__(self, url: str, ctx: ssl.SSLContext, pids: list[int]) -> None:
        u = urlsplit(url)
        self.http = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
        self.http.connect()
        self.worker = _socket_owner(u.port, self.http.sock.getsockname()[1], pids)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        self.http.request(method, path, body=None if body is None else json.dumps(body),
                          headers={"Content-Type": "application/json"})
        r = self.http.getresponse()
        return r.status, json.loads(r.read() or b"{}")


def _conns(c, n: int = 16) -> tuple[list[Conn], list[int]]:
    pids = [c.proc.pid, *_children(c.proc.pid)]
    ctx = tls_context(Path(c.kubeconfig), c.data_dir)
    return [Conn(c.url, ctx, pids) for _ in range(n)], pids


def _spread(c, n: int) -> tuple[list[Conn], list[int]]:
    """`n` connections that reach every worker. The kernel picks a worker by a hash of each connection's
    addresses, so now and then all of a few land on one (8 of them: 1 time in 128); open another set then."""
    def spread():
        conns, pids = _conns(c, n)
        return {x.worker for x in conns} == set(pids) and (conns, pids)
    return wait_for(spread, what="connections reaching every worker", every=0.1)


@pytest.fixture(scope="module")
def c(store_url):
    with running_cluster("api-workers", ("--api-workers", "2"), store=store_url) as cluster:
        yield cluster


def _pair(c) -> tuple[Conn, Conn]:
    """A connection to worker 0 and one to worker 1."""
    conns, pids = _conns(c)
    assert len(pids) == 2
    by_worker = {pid: [x for x in conns if x.worker == pid] for pid in pids}
    assert all(by_worker.values()), "the kernel gave every connection to one worker"
    return by_worker[pids[0]][0], by_worker[pids[1]][0]


def test_two_workers_serve_one_store_consistently(c):
    a, b = _pair(c)
    ns = "/api/v1/namespaces/default/configmaps"
    for i in range(30):  # a write through one worker is read, and updated without a precondition, through the other
        w, r = (a, b) if i % 2 else (b, a)
        code, made = w.call("POST", ns, {"metadata": {"name": f"cm{i}"}, "data": {"v": "0"}})
        assert code == 201, made
        code, got = r.call("GET", f"{ns}/cm{i}")
        assert code == 200 and got["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
        code, put = r.call("PUT", f"{ns}/cm{i}", {"metadata": {"name": f"cm{i}"}, "data": {"v": "1"}})
        assert code == 200, put
        code, listed = w.call("GET", ns)
        assert int(listed["metadata"]["resourceVersion"]) >= int(put["metadata"]["resourceVersion"])
        assert {"name": f"cm{i}", "v": "1"} in [{"name": x["metadata"]["name"], "v": x["data"].get("v")}
                                               for x in listed["items"]]  # (and kube-root-ca.crt)
    # a namespace made through one worker takes objects through the other at once
    assert a.call("POST", "/api/v1/namespaces", {"metadata": {"name": "made-on-a"}})[0] == 201
    assert b.call("POST", "/api/v1/namespaces/made-on-a/configmaps", {"metadata": {"name": "x"}})[0] == 201
    # a CRD created through one worker is served by the other (worker 0 establishes it)
    code, _ = b.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    assert code == 201
    gadgets = "/apis/workers.example.com/v1/namespaces/default/gadgets"
    gadget = {"apiVersion": "workers.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    code = wait_for(lambda: (got := a.call("POST", gadgets, gadget)[0]) != 404 and got, timeout=30,
                    what="the CRD served", every=0.2)
    assert code == 201
    code, got = b.call("GET", f"{gadgets}/g")
    assert code == 200 and got["kind"] == "Gadget"
    # both workers' writes are in the one audit log, each a whole line
    lines = (c.data_dir / "audit.log").read_bytes().splitlines()
    names = {json.loads(line).get("objectRef", {}).get("name") for line in lines}
    assert {f"cm{i}" for i in range(30)} <= names


def test_every_worker_serves_the_zpages(c):
    """/flagz shows `up`'s flags whichever worker answers; /statusz is each worker's."""
    for conn in _pair(c):
        conn.http.request("GET", "/flagz", headers={"Accept": "application/json;g=config.k8s.io;v=v1beta1;as=Flagz"})
        r = conn.http.getresponse()
        flagz = json.loads(r.read())
        assert r.status == 200 and flagz["flags"]["api-workers"] == "2", flagz
        conn.http.request("GET", "/statusz", headers={"Accept": "application/json;g=config.k8s.io;v=v1beta1;as=Statusz"})
        r = conn.http.getresponse()
        assert r.status == 200 and "/flagz" in json.loads(r.read())["paths"]


def test_every_worker_names_the_advertised_address_in_its_discovery_document(c):
    """kube-apiserver's jwks_uri is https:// its external address (the advertise address, by default
    the host's for a loopback listener) and port: every worker serves worker 0's."""
    from nanokube.apiserver.kubernetes_service import default_advertise_address

    host = default_advertise_address("127.0.0.1") or "127.0.0.1"  # (a host without a route advertises none)
    want = f"https://{host}:{urlsplit(c.url).port}/openid/v1/jwks"
    assert [conn.call("GET", "/.well-known/openid-configuration")[1].get("jwks_uri") for conn in _pair(c)] == [want] * 2


def _service(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [{"port": 80}], **spec}}


def test_each_worker_allocates_from_its_share_and_holds_the_others_values(c):
    a, b = _pair(c)  # workers 0 and 1
    svcs = "/api/v1/namespaces/default/services"
    made = [w.call("POST", svcs, _service(f"svc{i}"))[1] for i, w in enumerate((a, b, a, b))]
    for i, m in enumerate(made):
        assert int(m["spec"]["clusterIP"].rsplit(".", 1)[1]) % 2 == m["spec"]["ports"][0]["nodePort"] % 2 == i % 2
    ip, port = made[0]["spec"]["clusterIP"], made[0]["spec"]["ports"][0]["nodePort"]
    code, err = b.call("POST", svcs, _service("again", clusterIP=ip))
    assert code == 422 and "already allocated" in err["message"], err
    code, err = b.call("POST", svcs, _service("again", ports=[{"port": 80, "nodePort": port}]))
    assert code == 422 and "already allocated" in err["message"], err
    assert a.call("DELETE", f"{svcs}/svc0")[0] == 200
    code, again = b.call("POST", svcs, _service("again", clusterIP=ip, ports=[{"port": 80, "nodePort": port}]))
    assert code == 201 and again["spec"]["clusterIP"] == ip, again


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "annotations": {
    "sim.nanokube.io/log": "loading dataset",
    "sim.nanokube.io/exec.nvidia-smi": '{"stdout": "GPU 0: NVIDIA H100\\n", "exitCode": 0}'}},
    "spec": {"containers": [{"name": "main", "image": "trainer:1.0", "ports": [{"containerPort": 8000}]}]}}


def _exec_over_websocket(conn: Conn, path: str) -> bytes:
    """A v5.channel.k8s.io exec on this very connection: what the command wrote to stdout."""
    sock = conn.http.sock
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                 "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, data = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    out = b""
    while True:
        while len(data) < 2 or len(data) < 2 + (data[1] & 127 if data[1] & 127 < 126 else 2):
            data += sock.recv(4096)
        n, at = data[1] & 127, 2
        if n == 126:
            n, at = int.from_bytes(data[2:4], "big"), 4
        while len(data) < at + n:
            data += sock.recv(4096)
        opcode, payload, data = data[0] & 15, data[at:at + n], data[at + n:]
        if opcode == 8:
            return out
        if payload[:1] == b"\x01":
            out += payload[1:]
        if payload[:1] == b"\x03":  # the status: the command ended
            return out


def test_what_node_agents_serve_is_relayed_from_the_other_worker(c):
    c.kubectl("apply", "-n", "default", "-f", "-", input=json.dumps(POD))
    wait_for(lambda: c.kubectl_json("get", "pod", "trainer").get("status", {}).get("phase") == "Running",
             what="trainer running", every=0.5)
    _, b = _pair(c)
    assert b.worker != c.proc.pid
    b.http.request("GET", "/api/v1/namespaces/default/pods/trainer/log")
    r = b.http.getresponse()
    assert r.status == 200 and b"loading dataset" in r.read()
    _, b = _pair(c)
    b.http.request("GET", "/api/v1/namespaces/default/pods/trainer/proxy/")
    r = b.http.getresponse()
    assert (r.status, r.read()) == (200, b"nanokube simulated pod default/trainer port 8000\n")
    _, b = _pair(c)
    assert _exec_over_websocket(b, "/api/v1/namespaces/default/pods/trainer/exec?command=nvidia-smi&stdout=1") \
        == b"GPU 0: NVIDIA H100\n"
    for _ in range(4):  # kubectl's own connections, over SPDY or WebSockets, land on either worker
        assert c.kubectl("exec", "trainer", "--", "nvidia-smi").stdout == "GPU 0: NVIDIA H100\n"


def test_a_worker_that_ends_is_started_again(c):
    (old,) = _children(c.proc.pid)
    os.kill(old, 9)

    def both_serve():  # a new worker listens: connections reach both again
        try:
            conns, pids = _conns(c, 8)
        except OSError:  # a connection the kernel had queued for the killed worker is reset, as any client sees
            return None
        return old not in pids and len(pids) == 2 and {x.worker for x in conns} == set(pids) and (conns, pids)

    conns, pids = wait_for(both_serve, what="the worker started again", every=0.2)
    a = next(x for x in conns if x.worker == pids[0])
    b = next(x for x in conns if x.worker == pids[1])
    assert b.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "after-restart"}})[0] == 201
    assert a.call("GET", "/api/v1/namespaces/default/configmaps/after-restart")[0] == 200


@pytest.mark.parametrize("args, error", [(("--store", "memory", "--api-workers", "2"), "memory store lives in one process"),
                                         (("--api-workers", "0"), "--api-workers must be at least 1")])
def test_what_cannot_run_several_workers_is_refused(tmp_path, args, error):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", "0", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and error in r.stderr
    assert list(tmp_path.iterdir()) == [], "refused with the other flags, before the cluster's keys are made"


def _race(conns: list[Conn], path: str, bodies: list[dict]) -> list[tuple[int, dict]]:
    """Each body POSTed on its own connection, all released at one moment."""
    gate = threading.Barrier(len(bodies))

    def post(conn: Conn, body: dict) -> tuple[int, dict]:
        gate.wait()
        return conn.call("POST", path, body)

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, conns, bodies))


@pytest.mark.parametrize("field", ["clusterIP", "nodePort"])
def test_a_value_asked_for_through_both_workers_at_once_goes_to_one_service(c, field):
    """The store arbitrates (IPAddress objects, node port keys): of clients racing for one value
    through both workers exactly one gets it, the others upstream's 422; the winner's delete frees it."""
    conns, pids = _spread(c, 8)
    assert len(pids) == 2 and {x.worker for x in conns} == set(pids)
    svcs = "/api/v1/namespaces/default/services"
    for r in range(10):
        # a port of the static band, which the module's other Services' random picks do not reach
        value = f"10.96.{200 + r}.{17 + r}" if field == "clusterIP" else 30040 + r
        spec = {"clusterIP": value} if field == "clusterIP" else {"ports": [{"port": 80, "nodePort": value}]}
        results = _race(conns, svcs, [_service(f"race-{field.lower()}-{r}-{i}", **spec) for i in range(len(conns))])
        won = [body for code, body in results if code == 201]
        lost = [body["message"] for code, body in results if code != 201]
        assert len(won) == 1, results
        message = "provided IP is already allocated" if field == "clusterIP" else "provided port is already allocated"
        assert len(lost) == len(conns) - 1 and all(message in m for m in lost), lost
        name = won[0]["metadata"]["name"]
        if field == "clusterIP":
            code, ipa = conns[r % len(conns)].call("GET", f"/apis/networking.k8s.io/v1/ipaddresses/{value}")
            assert code == 200 and ipa["spec"]["parentRef"]["name"] == name, ipa
        assert conns[(r + 1) % len(conns)].call("DELETE", f"{svcs}/{name}")[0] == 200
        code, again = conns[(r + 2) % len(conns)].call("POST", svcs, _service(f"again-{field.lower()}-{r}", **spec))
        assert code == 201, again
        assert conns[r % len(conns)].call("DELETE", f"{svcs}/again-{field.lower()}-{r}")[0] == 200


def _scrape(conn: Conn, gzipped: bool = False) -> dict:
    """apiserver_request_total from a scrape through `conn`, asked for gzipped where `gzipped`."""
    conn.http.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"} if gzipped else {})
    r = conn.http.getresponse()
    raw = r.read()
    assert r.getheader("Content-Encoding") == ("gzip" if gzipped else None)
    body = (gzip.decompress(raw) if gzipped else raw).decode()
    assert r.status == 200, body
    out = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == "apiserver_request_total":
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_what_every_worker_served(c):
    """A scrape through either worker reports the whole server: requests served by both are counted;
    gzipped for a client that asks, the others' answers merged before."""
    conns, pids = _spread(c, 8)
    assert len(pids) == 2 and {x.worker for x in conns} == set(pids)
    before = _scrape(conns[0])
    assert all(conn.call("GET", "/api/v1/namespaces/default/configmaps/not-there")[0] == 404
               for conn in conns for _ in range(5))
    for conn in (next(x for x in conns if x.worker == pid) for pid in pids):
        after = _scrape(conn, gzipped=True)
        counted = [k for k in after if k[0] == "apiserver_request_total" and dict(k[1]).get("resource") == "configmaps"
                   and dict(k[1]).get("code") == "404" and dict(k[1]).get("verb") == "GET"]
        assert len(counted) == 1, counted
        assert after[counted[0]] - before.get(counted[0], 0) == 40
