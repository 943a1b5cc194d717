"""Clients that misbehave at the connection level, against `nanokube up` (sqlite, a free port, HTTPS),
while a well-behaved client (`Prober`) sends GET /readyz and a pod create every 100 ms on a kept
connection and records its worst latency in each phase; the server's RSS and open descriptors are
read from /proc before and after each. Prints a Markdown table (benchmarks/README.md, "Fuzz:
misbehaving clients").

    .venv/bin/python scripts/misbehave.py [--phases connections,bodies,...] [--watchers 200]

Phases: `connections` (idle TLS connections, TLS handshakes never finished, headers a byte a second,
bodies sent slowly, never finished, chunked never terminated: which the server closed or answered
by 40 s and by 70 s), `bodies` (over the 3 MiB limit, near an object's, JSON nested 10,000 deep),
`pipelined` (requests pipelined on one connection, read and never read), `watchers` (watches of
pods that never read while pods change, and one that reads), `list` (every pod, no limit, while
the prober writes), `unread` (LISTs of 8 MB whose answers are never read)."""

from __future__ import annotations

import argparse
import base64
import collections
import http.client
import json
import os
import select
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.conftest import start_cluster  # noqa: E402

PODS = "/api/v1/namespaces/{ns}/pods"


class Target:
    """The server a kubeconfig names: TLS sockets and kept connections with its admin certificate."""

    def __init__(self, kubeconfig: str):
        cfg = yaml.safe_load(open(kubeconfig))
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        url = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = url.hostname, url.port
        with tempfile.TemporaryDirectory(prefix="misbehave-") as d:
            for k in ("client-certificate-data", "client-key-data"):
                Path(d, k).write_bytes(base64.b64decode(user[k]))
            self.ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
            self.ctx.load_cert_chain(f"{d}/client-certificate-data", f"{d}/client-key-data")

    def tcp(self) -> socket.socket:
        return socket.create_connection((self.host, self.port), timeout=30)

    def tls(self) -> ssl.SSLSocket:
        return self.ctx.wrap_socket(self.tcp(), server_hostname=self.host)

    def conn(self, timeout: float = 120) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)


def call(conn: http.client.HTTPSConnection, method: str, path: str, body=None, headers=None) -> tuple[int, bytes]:
    h = {"Accept": "application/json", "Content-Type": "application/json", **(headers or {})}
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    conn.request(method, path, body=body, headers=h, encode_chunked=h.get("Transfer-Encoding") == "chunked")
    r = conn.getresponse()
    return r.status, r.read()


def pod(name: str, labels: dict | None = None) -> dict:
    """A pod no scheduler takes (its schedulerName is nobody's): it only changes when a client changes it."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}}


class Prober(threading.Thread):
    """GET /readyz, then a pod create and its grace-0 delete, every 100 ms; the worst latency of
    each kind by phase, and any answer that was not the expected one."""

    def __init__(self, target: Target):
        super().__init__(daemon=True)
        self.target, self.phase = target, "start"
        self.worst: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
        self.failures: collections.Counter = collections.Counter()
        self.done = threading.Event()

    def _timed(self, kind: str, conn, method: str, path: str, body=None, expect=200) -> None:
        t0 = time.monotonic()
        try:
            status, _ = call(conn, method, path, body)
        except Exception as e:  # noqa: BLE001  (counted: the prober goes on with a new connection)
            status = type(e).__name__
            conn.close()
        worst = self.worst[self.phase]
        worst[kind] = max(worst[kind], time.monotonic() - t0)
        if status != expect:
            self.failures[(self.phase, kind, status)] += 1

    def run(self) -> None:
        conn, i = self.target.conn(), 0
        while not self.done.is_set():
            t0 = time.monotonic()
            self._timed("readyz", conn, "GET", "/readyz")
            name = f"probe-{i}"
            self._timed("create", conn, "POST", PODS.format(ns="default"), pod(name), 201)
            self._timed("delete", conn, "DELETE", PODS.format(ns="default") + f"/{name}?gracePeriodSeconds=0")
            i += 1
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))


def usage(pid: int) -> tuple[float, int]:
    """The server's resident memory (MiB) and open descriptors."""
    rss = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:"))
    return rss / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def readable(sock: socket.socket) -> bool:
    poll = select.poll()  # (select.select takes no descriptor above 1023)
    poll.register(sock, select.POLLIN)
    return bool(poll.poll(0))


def state(sock: socket.socket) -> str:
    """'closed' if the server closed `sock`, with the status line of what it answered first if it
    did; else that status line, or 'open'. (A TLS socket's records read from the socket, the
    session tickets after the handshake among them, wait in its SSL object, which select cannot see.)"""
    sock.settimeout(0.05)
    data, ended = b"", False
    try:
        while readable(sock) or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            chunk = sock.recv(65536)
            if not chunk:
                ended = True
                break
            data += chunk
    except TimeoutError:
        pass
    except OSError:  # reset, or a TLS stream cut without its close_notify
        ended = True
    line = data.split(b"\r\n", 1)[0].decode(errors="replace") if data else ""
    return ", ".join(filter(None, (line, "closed" if ended else "" if line else "open")))


def phase_connections(target: Target, notes: list[str], scale: int) -> None:
    idle = [target.tls() for _ in range(scale)]
    raw = []
    for _ in range(scale // 2):
        s = target.tcp()
        s.sendall(b"\x16\x03\x01")  # a ClientHello begun, never finished
        raw.append(s)
    headers = [target.tls() for _ in range(scale // 10)]
    for s in headers:
        s.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    head = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    slow_body, unfinished, chunked = [], [], []
    for _ in range(scale // 40):
        s = target.tls()
        s.sendall((head + "Content-Length: 1048576\r\n\r\n").encode() + b'{"metadata":{"name":"slow"},"data":{"k":"')
        slow_body.append(s)
        s = target.tls()
        s.sendall((head + "Content-Length: 1000\r\n\r\n{").encode())
        unfinished.append(s)
        s = target.tls()
        s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n").encode())
        chunked.append(s)
    groups = {"idle TLS connections": idle, "TLS handshakes begun, never finished": raw,
              "headers a byte a second": headers, "body of 1 MiB a byte a second": slow_body,
              "body never finished": unfinished, "chunked body never terminated": chunked}
    notes.append(f"opened: {', '.join(f'{len(v)} {k}' for k, v in groups.items())}")
    start = time.monotonic()
    for checkpoint in (40, 70):
        while (left := start + checkpoint - time.monotonic()) > 0:
            for s in headers + slow_body:  # a byte a second to each
                if s.fileno() >= 0:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass
            time.sleep(min(1.0, left))
        notes.append(f"at {checkpoint} s: " + ", ".join(
            f"{k} {collections.Counter(state(s) for s in v).most_common()}" for k, v in groups.items()))
    for v in groups.values():
        for s in v:
            s.close()


def phase_bodies(target: Target, notes: list[str], scale: int) -> None:
    conn = target.conn()
    cms = "/api/v1/namespaces/default/configmaps"

    def timed(label: str, method: str, path: str, body, headers=None) -> None:
        nonlocal conn
        t0 = time.monotonic()
        try:
            status, data = call(conn, method, path, body, headers)
            try:
                message = json.loads(data).get("message", "")[:120]
            except ValueError:
                message = data[:120]
        except Exception as e:  # noqa: BLE001
            status, message = type(e).__name__, str(e)[:120]
            conn.close()
            conn = target.conn()
        notes.append(f"{label}: {status} {message!r} in {time.monotonic() - t0:.2f} s")

    big = json.dumps({"metadata": {"name": "over"}, "data": {"k": "x" * (4 << 20)}})
    timed("4 MiB body, Content-Length", "POST", cms, big)
    timed("4 MiB body, chunked", "POST", cms, iter([big.encode()[i:i + 65536] for i in range(0, len(big), 65536)]),
          {"Transfer-Encoding": "chunked"})
    for label, size in (("ConfigMap just under its 1 MiB limit", (1 << 20) - 1024), ("ConfigMap of 3 MiB less 4 KiB", (3 << 20) - 4096)):
        name = f"near-{size}"
        timed(label, "POST", cms, {"metadata": {"name": name}, "data": {"k": "x" * size}})
        timed("GET of it", "GET", f"{cms}/{name}", None)
    deep = '{"metadata":{"name":"deep"},"data":{"k":"v"},"x":' + "[" * 10_000 + "]" * 10_000 + "}"
    timed("JSON nested 10,000 deep", "POST", cms, deep)
    deep_obj = '{"metadata":{"name":"deep2"},"x":' + '{"a":' * 10_000 + "1" + "}" * 10_000 + "}"
    timed("JSON objects nested 10,000 deep", "POST", cms, deep_obj)


def phase_pipelined(target: Target, notes: list[str], scale: int, pid: int) -> None:
    n = scale
    one = b"GET /api/v1/namespaces/default/configmaps?limit=1 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n"
    s = target.tls()
    t0 = time.monotonic()
    s.sendall(one * n)
    s.settimeout(120)
    data, answers = b"", 0
    while answers < n:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
        answers = data.count(b"HTTP/1.1 200")
    notes.append(f"{n} GETs pipelined on one connection, read: {answers} answered 200 in {time.monotonic() - t0:.2f} s")
    s.close()
    unread = []
    for _ in range(10):
        s = target.tls()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.settimeout(5)
            s.sendall(one * n)
        except (TimeoutError, OSError):
            pass  # the server stopped reading: its answers are not read either
        unread.append(s)
    time.sleep(10)
    rss, fds = usage(pid)
    notes.append(f"10 connections each sent {n} pipelined GETs and read nothing: server RSS {rss:.0f} MiB, {fds} fds")
    for s in unread:
        s.close()


def phase_watchers(target: Target, notes: list[str], scale: int, pid: int, changes: int) -> None:
    watchers = []
    for _ in range(scale):
        s = target.tls()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /api/v1/pods?watch=1&timeoutSeconds=1800 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
        watchers.append(s)
    received = [0]

    def reader() -> None:
        conn = target.conn(timeout=300)
        conn.request("GET", "/api/v1/namespaces/churn/pods?watch=1&timeoutSeconds=1800")
        r = conn.getresponse()
        while line := r.readline():
            if line.strip():
                received[0] += 1

    threading.Thread(target=reader, daemon=True).start()
    conn = target.conn()
    call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": "churn"}})
    pods = max(1, changes // 5)
    t0 = time.monotonic()

    def writer(k: int, workers: int) -> None:
        c = target.conn()
        for i in range(k, pods, workers):
            call(c, "POST", PODS.format(ns="churn"), pod(f"p{i}", {"round": "0"}))
        for r in range(1, 5):
            for i in range(k, pods, workers):
                call(c, "PATCH", PODS.format(ns="churn") + f"/p{i}", {"metadata": {"labels": {"round": str(r)},
                     "annotations": {"filler": "x" * 2000}}}, {"Content-Type": "application/merge-patch+json"})

    threads = [threading.Thread(target=writer, args=(k, 4)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    notes.append(f"{pods * 5} pod changes (4 writers) with {scale} watchers of every pod that read nothing: "
                 f"{time.monotonic() - t0:.1f} s")
    time.sleep(3)
    rss, fds = usage(pid)
    _, metrics = call(target.conn(), "GET", "/metrics")  # (`conn` was idle past the server's idle timeout)
    lines = metrics.decode().splitlines()
    terminated = [line for line in lines if line.startswith("apiserver_terminated_watchers_total")]
    open_watches = sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("apiserver_longrunning_requests{")
                       and 'resource="pods"' in line and 'verb="WATCH"' in line)
    notes.append(f"then: server RSS {rss:.0f} MiB, {fds} fds, reading watcher got {received[0]} of {pods * 5} events, "
                 f"pod watches the server still serves: {open_watches:.0f}, terminated: {terminated}")
    for s in watchers:
        s.close()
    time.sleep(3)


def phase_list(target: Target, notes: list[str], scale: int) -> None:
    conn = target.conn()
    t0 = time.monotonic()
    status, data = call(conn, "GET", "/api/v1/pods")
    notes.append(f"LIST of every pod, no limit: {status}, {len(json.loads(data).get('items', []))} items, "
                 f"{len(data) / 1e6:.1f} MB in {time.monotonic() - t0:.2f} s")
    t0 = time.monotonic()
    status, data = call(conn, "GET", "/api/v1/pods", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    notes.append(f"the same as a Table: {status}, {len(data) / 1e6:.1f} MB in {time.monotonic() - t0:.2f} s")


def phase_unread(target: Target, notes: list[str], scale: int, pid: int) -> None:
    conn = target.conn()
    for i in range(8):
        call(conn, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"big-{i}"},
                                                                      "data": {"k": "x" * 1_000_000}})
    socks = []
    for _ in range(scale):
        s = target.tls()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
        socks.append(s)
    for wait in (10, 65):
        time.sleep(wait)
        rss, fds = usage(pid)
        notes.append(f"{scale} LISTs of 8 MB never read, {wait} s later: server RSS {rss:.0f} MiB, {fds} fds")
    for s in socks:
        s.close()
    for i in range(8):
        call(target.conn(), "DELETE", f"/api/v1/namespaces/default/configmaps/big-{i}")


PHASES = ("connections", "bodies", "pipelined", "watchers", "list", "unread")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--connections", type=int, default=2000, help="idle TLS connections (and half as many handshakes)")
    ap.add_argument("--watchers", type=int, default=200)
    ap.add_argument("--pipelined", type=int, default=2000)
    ap.add_argument("--unread", type=int, default=20, help="LISTs of 8 MB sent on connections that read nothing")
    ap.add_argument("--changes", type=int, default=10_000, help="pod changes the watchers are sent (a fifth of them creates)")
    args = ap.parse_args()
    cluster = start_cluster(Path(tempfile.mkdtemp(prefix="nanokube-misbehave-")), "sqlite")
    pid = cluster.proc.pid
    print(f"nanokube up (pid {pid}) at {cluster.url}, data and log in {cluster.data_dir}", flush=True)
    target = Target(cluster.kubeconfig)
    prober = Prober(target)
    rows = []
    try:
        prober.phase = "idle"
        prober.start()
        time.sleep(5)
        for name in args.phases.split(","):
            before = usage(pid)
            prober.phase = name
            notes: list[str] = []
            t0 = time.monotonic()
            if name == "connections":
                phase_connections(target, notes, args.connections)
            elif name == "bodies":
                phase_bodies(target, notes, 0)
            elif name == "pipelined":
                phase_pipelined(target, notes, args.pipelined, pid)
            elif name == "watchers":
                phase_watchers(target, notes, args.watchers, pid, args.changes)
            elif name == "list":
                phase_list(target, notes, 0)
            elif name == "unread":
                phase_unread(target, notes, args.unread, pid)
            after = usage(pid)
            rows.append((name, time.monotonic() - t0, before, after, dict(prober.worst[name]), notes))
            print(f"## {name}: {time.monotonic() - t0:.0f} s, RSS {before[0]:.0f} -> {after[0]:.0f} MiB, "
                  f"fds {before[1]} -> {after[1]}, prober's worst {({k: round(v, 3) for k, v in prober.worst[name].items()})}",
                  flush=True)
            for n in notes:
                print(f"   {n}", flush=True)
    finally:
        prober.done.set()
        prober.join(30)
        cluster.log_read = True
        cluster.stop()
        shutil.rmtree(cluster.data_dir, ignore_errors=True)
    print("\n| phase | s | server RSS MiB | server fds | prober's worst: readyz / create / delete (s) |")
    print("|---|---|---|---|---|")
    for name, secs, before, after, worst, _ in rows:
        print(f"| {name} | {secs:.0f} | {before[0]:.0f} -> {after[0]:.0f} | {before[1]} -> {after[1]} | "
              + " / ".join(f"{worst.get(k, 0):.3f}" for k in ("readyz", "create", "delete")) + " |")
    idle = prober.worst.get("idle", {})
    print(f"(idle, before the first phase: {' / '.join(f'{idle.get(k, 0):.3f}' for k in ('readyz', 'create', 'delete'))})")
    if prober.failures:
        print("prober's unexpected answers:", dict(prober.failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
