"""API server benchmarks: pod create rate, read latency, watch fan-out, memory.

Each backend gets its own `nanokube up` subprocess (and, for etcd, its own
throwaway etcd) in a temporary directory, and is driven over HTTPS with the
admin client certificate from the kubeconfig it writes. The numbers therefore
include everything a real client pays for: TLS, HTTP, admission, validation,
storage and the watch cache. The client runs in this process and shares the
machine's cores with the server, which is what a colocated controller sees;
the watch phase's watchers are read by processes of their own (`WatchReaders`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import gc
import math
import multiprocessing
import os
import random
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aiohttp
import orjson
import yaml

BACKENDS = ("sqlite", "memory", "etcd")

METRICS = (
    "pod creates (pods/s)",
    "pod create p50 (ms)",
    "pod create p99 (ms)",
    "server CPU per pod create (ms)",
    "server busy after creates (s)",
    "GET pod p50 (ms)",
    "GET pod p99 (ms)",
    "LIST all pods p50 (ms)",
    "LIST all pods p99 (ms)",
    "LIST paginated walk p50 (ms)",
    "LIST paginated walk p99 (ms)",
    "server CPU per LIST (ms)",
    "client CPU per LIST (ms)",
    "server CPU per LIST page (ms)",
    "client CPU per LIST page (ms)",
    "LWS CRD apply to Established (ms)",
    "custom object creates (objects/s)",
    "custom object create p50 (ms)",
    "custom object create p99 (ms)",
    "LIST all custom objects p50 (ms)",
    "LIST all custom objects p99 (ms)",
    "watch delivery p50 (ms)",
    "watch delivery p99 (ms)",
    "watch events delivered (events/s)",
    "watch events read before write ack (%)",
    "server CPU per watch delivery (us)",
    "client CPU per watch delivery (us)",
    "server RSS at startup (MiB)",
    "server RSS with all pods (MiB)",
    "memory per pod (KiB/pod)",
)

Progress = Callable[[str], None]
Results = dict[str, dict[str, float]]
T = TypeVar("T")

_WATCH_LABEL = "bench.nanokube.io/watch-seq"
#: LeaderWorkerSet's published CRD (1.3 MB; Apache-2.0, tests/fixtures/crds/LICENSE)
LWS_CRD = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
LWS_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"


@dataclass(frozen=True)
class BenchConfig:
    """Sizes of each phase; the defaults are the full run."""

    pods: int = 10000
    concurrency: int = 32
    gets: int = 2000
    lists: int = 20
    page_limit: int = 500
    watchers: int = 100
    #: processes the watchers are spread over (see WatchReaders)
    watch_processes: int = 4
    watch_writes: int = 200
    #: the watch phase sends one write every this many seconds (one in flight; at once when behind), see measure_watch
    watch_interval_s: float = 0.01
    #: only the creates and the watch phase (`--watch-only`)
    watch_only: bool = False
    namespace: str = "bench"
    watch_timeout_s: float = 300.0
    #: LeaderWorkerSets created and listed (at most as many as pods)
    custom_objects: int = 2000
    #: `nanokube up --api-workers`: API server processes on the one port and store
    api_workers: int = 1
    #: the server is done with what the creates set off once it used under a tenth of a core over this long (`settle`)
    settle_window_s: float = 1.0


@dataclass(frozen=True)
class Server:
    url: str
    pid: int
    kubeconfig: Path


def percentile(samples: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks, as numpy does by default."""
    s = sorted(samples)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def pod_manifest(i: int) -> dict:
    """A pod shaped like a Deployment's: labels, resources, probes; every other one has a sidecar."""
    app = f"svc-{i % 25}"
    containers = [{
        "name": "app",
        "image": f"registry.example.com/{app}:1.{i % 7}.0",
        "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}],
        "env": [{"name": "APP_NAME", "value": app}, {"name": "LOG_LEVEL", "value": "info"}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
    }]
    if i % 2:
        containers.append({
            "name": "log-shipper",
            "image": "registry.example.com/log-shipper:2.3.1",
            "args": ["--input=/var/log/app", "--output=stdout"],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        })
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"bench-{i:06d}",
            "labels": {"app": app, "tier": "backend" if i % 3 else "frontend", "pod-template-hash": f"{i % 97:08x}"},
            "annotations": {"bench.nanokube.io/index": str(i)},
        },
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 30},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Runs in the child: have Linux SIGKILL it should this benchmark die without cleaning up."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


@contextlib.contextmanager
def _running(argv: list[str], log_path: Path) -> Iterator[subprocess.Popen]:
    """Starts argv in its own session (so Ctrl-C reaches only us) and always stops it.

    Called from the main thread before any event loop or thread exists, which
    keeps preexec_fn safe.
    """
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_for(check: Callable[[], T | None], proc: subprocess.Popen, what: str, log_path: Path,
              timeout: float = 60.0) -> T:
    """Polls check() until it returns a value; fails fast when the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{_tail(log_path)}")
        value = check()
        if value is not None:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready after {timeout:.0f}s:\n{_tail(log_path)}")


def _etcd_healthy(client_url: str) -> bool | None:
    with contextlib.suppress(OSError, urllib.error.URLError), \
            urllib.request.urlopen(f"{client_url}/health", timeout=1) as r:
        return True if b'"true"' in r.read() else None
    return None


@contextlib.contextmanager
def etcd_server(data_dir: Path) -> Iterator[str]:
    """A throwaway single-member etcd on loopback; yields its HOST:PORT."""
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    if not os.path.exists(binary):
        raise RuntimeError("etcd binary not found (scripts/etcd.sh installs it)")
    data_dir.mkdir(parents=True, exist_ok=True)
    client, peer = f"http://127.0.0.1:{_free_port()}", f"http://127.0.0.1:{_free_port()}"
    log = data_dir / "etcd.log"
    argv = [binary, "--name", "bench", "--data-dir", str(data_dir / "member"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"bench={peer}", "--log-level", "error"]
    with _running(argv, log) as proc:
        _wait_for(lambda: _etcd_healthy(client), proc, "etcd", log, timeout=30)
        yield client.removeprefix("http://")


def _announced(log_path: Path) -> tuple[str, Path] | None:
    """The URL and kubeconfig `nanokube up` prints once it serves, if it has yet."""
    url = kubeconfig = None
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("nanokube API server listening on "):
            url = line.split()[5]
        elif line.startswith("export KUBECONFIG="):
            kubeconfig = Path(line.split("=", 1)[1].strip())
    return (url, kubeconfig) if url and kubeconfig else None


@contextlib.contextmanager
def nanokube_server(data_dir: Path, store: str, extra: tuple[str, ...] = ()) -> Iterator[Server]:
    """Runs `nanokube up --port 0 [extra...]` on data_dir until the block exits."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "nanokube.log"
    argv = [sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(data_dir), "--port", "0", "--store", store,
            *extra]
    with _running(argv, log) as proc:
        url, _ = _wait_for(lambda: _announced(log), proc, "nanokube up", log)
        # (the super-admin's, system:masters, exempt from API Priority and Fairness as the admin
        # kubeconfig's user was before it was kubeadm's, in kubeadm:cluster-admins)
        yield Server(url, proc.pid, data_dir / "super-admin.conf")


def tls_context(kubeconfig: Path, key_dir: Path) -> ssl.SSLContext:
    """Trusts the current context's CA and presents its client certificate, as kubectl does."""
    cfg = yaml.safe_load(kubeconfig.read_text())
    ctx_entry = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg["current-context"])
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx_entry["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx_entry["user"])
    ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    paths = []
    for field in ("client-certificate-data", "client-key-data"):
        path = key_dir / field
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(user[field]))
        paths.append(path)
    ctx.load_cert_chain(*paths)
    return ctx


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def server_pids(pid: int) -> list[int]:
    """`nanokube up`'s process and its children (the API server workers of `--api-workers`)."""
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    return [pid, *children]


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if (target := os.readlink(fd)).startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _tcp_sockets(pid: int) -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every TCP socket in `pid`'s network namespace."""
    rows = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                f = line.split()
                rows.append((int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16), f[3], f[9]))
    return rows


_ESTABLISHED, _TIME_WAIT = "01", "06"


@dataclass(frozen=True)
class Connections:
    """A census of the TCP connections to a server's port: which server process holds each, and
    which client process opened it."""

    #: server pid -> client name (or "other") -> established connections
    held: dict[int, dict[str, int]]
    #: connections to the port closed lately (TIME_WAIT on either side, ~60 s on Linux)
    closed: int

    def __str__(self) -> str:
        names = sorted({n for counts in self.held.values() for n in counts})
        per = ", ".join(f"{pid}: " + " / ".join(f"{counts.get(n, 0)} {n}" for n in names)
                        for pid, counts in self.held.items())
        return f"{per}; {self.closed} closed lately"


def connections(servers: list[int], port: int, clients: dict[str, int]) -> Connections:
    """Each server process's established connections on `port`, counted by which of the named client
    processes (name -> pid) opened them, "other" for the rest (SO_REUSEPORT: the kernel picks the
    worker of each connection)."""
    sockets = _tcp_sockets(servers[0])
    opened_by = {}
    for name, pid in clients.items():
        inodes = _socket_inodes(pid)
        opened_by |= {local: name for local, remote, state, inode in sockets if remote == port and inode in inodes}
    held = {}
    for pid in servers:
        inodes = _socket_inodes(pid)
        counts: dict[str, int] = {}
        for local, remote, state, inode in sockets:
            if local == port and state == _ESTABLISHED and inode in inodes:
                name = opened_by.get(remote, "other")
                counts[name] = counts.get(name, 0) + 1
        held[pid] = counts
    closed = sum(state == _TIME_WAIT and port in (local, remote) for local, remote, state, _ in sockets)
    return Connections(held, closed)


def server_cpu_seconds(pid: int) -> float:
    """`cpu_seconds` summed over the server's processes."""
    return sum(cpu_seconds(p) for p in server_pids(pid))


def server_rss_kib(pid: int) -> int:
    """`rss_kib` summed over the server's processes."""
    return sum(rss_kib(p) for p in server_pids(pid))


class PodsApi:
    """Just enough of the pods API of one namespace, over one aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession, url: str, namespace: str) -> None:
        self.session = session
        self.url = url
        self.namespace = namespace
        self.pods = f"{url}/api/v1/namespaces/{namespace}/pods"

    async def call(self, method: str, url: str, body: dict | None = None, params: dict | None = None,
                   content_type: str = "application/json") -> bytes:
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self.session.request(method, url, data=data, params=params, headers=headers) as resp:
            payload = await resp.read()
            if resp.status >= 300:
                raise RuntimeError(f"{method} {url} -> {resp.status}: {payload[:500]!r}")
            return payload

    async def create_namespace(self) -> None:
        await self.call("POST", f"{self.url}/api/v1/namespaces", {"metadata": {"name": self.namespace}})

    async def list_resource_version(self) -> str:
        body = orjson.loads(await self.call("GET", self.pods, params={"limit": "1"}))
        return body["metadata"]["resourceVersion"]


@contextlib.contextmanager
def _without_cycle_collector() -> Iterator[None]:
    """The read and watch phases run with this process's cycle collector off (one collection
    after): a 500-pod page decodes into some 75,000 dicts and lists, which set off young and then
    full collections of the whole client heap, two to three times the decode's own CPU (10-15 ms
    per page). That is the measuring process's collector, not the server, and what it frees here
    (decoded pages and events) reference counting frees anyway. Every byte is still read and
    decoded."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    """Has this (client) process's malloc keep what it frees for its next allocations, as a Go
    client's heap does; False where that cannot be set (not glibc). By default glibc hands a body
    over 32 MiB (a 10,000-pod LIST is 38 MB) to mmap and back to the kernel when it is freed, and
    gives back the heap top that held the body's chunks, so every full LIST faulted in ~78 MB of
    fresh pages (~20,000 faults, ~2.7 us each here): 55-75 of the 80-120 ms of client CPU a LIST
    took, more than the server spent on it. Every byte is still read into one body."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except AttributeError:
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


class CPU:
    """CPU seconds of the server process and of this (client) process over a phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.server, self.client = server_cpu_seconds(pid), time.process_time()

    def spent(self) -> tuple[float, float]:
        return server_cpu_seconds(self.pid) - self.server, time.process_time() - self.client


async def settle(pid: int, window: float = 1.0, limit: float = 180.0) -> float:
    """Waits until the server has used under a tenth of a core over `window` seconds (at most `limit`
    seconds) and returns how long that took. After the creates, `nanokube up`'s own scheduler
    and controllers are still working through the pods (the two default nodes fit about 220; the
    rest get a scheduling attempt, a status patch and an Event each): reads measured meanwhile
    wait behind that backlog on the server's event loop (a GET of 1 ms took 16), so the read and
    watch phases start once it is done."""
    start = time.monotonic()
    last = server_cpu_seconds(pid)
    while time.monotonic() - start < limit:
        await asyncio.sleep(window)
        now = server_cpu_seconds(pid)
        if now - last < 0.1 * window:
            break
        last = now
    return time.monotonic() - start


async def _timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def _bounded(count: int, concurrency: int, fn: Callable[[int], Awaitable[None]]) -> None:
    """Runs fn(0..count-1) with at most `concurrency` calls in flight."""
    indices = iter(range(count))

    async def worker() -> None:
        for i in indices:
            await fn(i)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))


def lws_manifest(i: int) -> dict:
    """A LeaderWorkerSet of four pods, leader and workers from one template."""
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"lws-{i:06d}", "labels": {"app": f"infer-{i % 25}"}},
            "spec": {"replicas": 1 + i % 3, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {
                "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "ports": [{"containerPort": 8080}],
                                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}


async def measure_custom_objects(api: PodsApi, cfg: BenchConfig, progress: Progress) -> dict[str, float]:
    """The LeaderWorkerSet CRD applied server-side until Established, then LeaderWorkerSets
    created as the pods were (at most cfg.custom_objects), then full LISTs of them."""
    count = min(cfg.custom_objects, cfg.pods)
    # (libyaml's loader where PyYAML has it: the pure-Python one spends 2 CPU-s on this 1.3 MB file)
    crd = yaml.load(LWS_CRD.read_bytes(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    crd_url = f"{api.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{LWS_NAME}"

    crds = f"{api.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    progress("  LeaderWorkerSet CRD: server-side apply until a watch sees it Established")
    params = {"watch": "true", "fieldSelector": f"metadata.name={LWS_NAME}"}
    async with api.session.get(crds, params=params, headers={"Accept": "application/json"}) as watch:
        start = time.perf_counter()
        await api.call("PATCH", crd_url, crd, {"fieldManager": "bench"}, "application/apply-patch+yaml")
        buf, done = b"", False
        while not done:  # events are ~1.9 MB lines, longer than aiohttp's readline takes
            chunk = await watch.content.read(1 << 20)
            if not chunk:
                raise RuntimeError("the CRD watch ended before Established")
            *lines, buf = (buf + chunk).split(b"\n")
            for line in lines:
                conds = (orjson.loads(line)["object"].get("status") or {}).get("conditions") or []
                done = done or any(c["type"] == "Established" and c["status"] == "True" for c in conds)
        to_established = time.perf_counter() - start
    objects = f"{api.url}/apis/leaderworkerset.x-k8s.io/v1/namespaces/{api.namespace}/leaderworkersets"
    latencies: list[float] = []
    progress(f"  creating {count} LeaderWorkerSets, {cfg.concurrency} in flight")

    async def create(i: int) -> None:
        latencies.append(await _timed(lambda: api.call("POST", objects, lws_manifest(i))))

    elapsed = await _timed(lambda: _bounded(count, cfg.concurrency, create))
    lists = []
    for _ in range(cfg.lists):
        start = time.perf_counter()
        body = await api.call("GET", objects)
        lists.append(time.perf_counter() - start)
    if len(orjson.loads(body)["items"]) != count:
        raise RuntimeError("LIST did not return every LeaderWorkerSet")
    return {"LWS CRD apply to Established (ms)": to_established * 1000,
            "custom object creates (objects/s)": count / elapsed, **_ms(latencies, "custom object create"),
            **_ms(lists, "LIST all custom objects")}


def _ms(samples: list[float], name: str) -> dict[str, float]:
    return {f"{name} p50 (ms)": percentile(samples, 0.5) * 1000, f"{name} p99 (ms)": percentile(samples, 0.99) * 1000}


async def measure_creates(api: PodsApi, cfg: BenchConfig, progress: Progress) -> dict[str, float]:
    """Creates cfg.pods pods with cfg.concurrency requests in flight."""
    latencies: list[float] = []
    step = max(1, cfg.pods // 10)

    async def create(i: int) -> None:
        latencies.append(await _timed(lambda: api.call("POST", api.pods, pod_manifest(i))))
        if len(latencies) % step == 0:
            progress(f"  created {len(latencies)}/{cfg.pods} pods")

    elapsed = await _timed(lambda: _bounded(cfg.pods, cfg.concurrency, create))
    return {"pod creates (pods/s)": cfg.pods / elapsed, **_ms(latencies, "pod create")}


async def measure_reads(api: PodsApi, cfg: BenchConfig, progress: Progress, pid: int) -> dict[str, float]:
    """Sequential GETs of random pods, full LISTs and paginated LIST walks; the server's CPU per
    LIST and per page, and this client's per page (reading and decoding it)."""
    rng = random.Random(0)
    progress(f"  {cfg.gets} GETs")
    gets = [await _timed(lambda: api.call("GET", f"{api.pods}/bench-{rng.randrange(cfg.pods):06d}"))
            for _ in range(cfg.gets)]
    progress(f"  {cfg.lists} full LISTs")
    lists = []
    with _without_cycle_collector():
        cpu = CPU(pid)
        for _ in range(cfg.lists):
            start = time.perf_counter()
            body = await api.call("GET", api.pods)
            lists.append(time.perf_counter() - start)
        list_cpu, list_client = cpu.spent()
    if len(orjson.loads(body)["items"]) != cfg.pods:
        raise RuntimeError("LIST did not return every pod")
    del body
    progress(f"  {cfg.lists} paginated LIST walks (limit={cfg.page_limit})")
    with _without_cycle_collector():
        cpu = CPU(pid)
        walks = [await _timed(lambda: _walk(api, cfg)) for _ in range(cfg.lists)]
        server, client = cpu.spent()
    pages = cfg.lists * math.ceil(cfg.pods / cfg.page_limit)
    return {**_ms(gets, "GET pod"), **_ms(lists, "LIST all pods"), **_ms(walks, "LIST paginated walk"),
            "server CPU per LIST (ms)": list_cpu * 1000 / cfg.lists, "client CPU per LIST (ms)": list_client * 1000 / cfg.lists,
            "server CPU per LIST page (ms)": server * 1000 / pages, "client CPU per LIST page (ms)": client * 1000 / pages}


async def _walk(api: PodsApi, cfg: BenchConfig) -> None:
    seen, token = 0, ""
    while True:
        params = {"limit": str(cfg.page_limit), **({"continue": token} if token else {})}
        page = orjson.loads(await api.call("GET", api.pods, params=params))
        seen += len(page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    if seen != cfg.pods:
        raise RuntimeError(f"paginated LIST saw {seen} pods, not {cfg.pods}")


class ChunkedLines:
    """One watch response's body: HTTP/1.1 chunks in, complete event lines out."""

    def __init__(self, data: bytes) -> None:
        self.buf, self.chunk, self.lines, self.size = bytearray(data), bytearray(), bytearray(), -1

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.buf
        buf += data
        while True:
            if self.size < 0:
                end = buf.find(b"\r\n")
                if end < 0:
                    break
                self.size = int(bytes(buf[:end]).split(b";")[0], 16)
                if self.size == 0:
                    raise RuntimeError("the server ended a watch")
                del buf[:end + 2]
            if len(buf) < self.size + 2:
                break
            self.lines += buf[:self.size]
            del buf[:self.size + 2]
            self.size = -1
        if b"\n" not in self.lines:
            return []
        *out, rest = bytes(self.lines).split(b"\n")
        self.lines = bytearray(rest)
        return out


def _open_watch(ctx: ssl.SSLContext, url: str, path: str) -> tuple[ssl.SSLSocket, ChunkedLines]:
    """A watch request on its own TLS connection, its response headers read (blocking)."""
    u = urllib.parse.urlsplit(url)
    sock = ctx.wrap_socket(socket.create_connection((u.hostname, u.port)), server_hostname=u.hostname)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nAccept: application/json\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = sock.recv(1 << 16)
        if not data:
            raise RuntimeError("the server closed a watch before answering")
        head += data
    head, body = head.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200") or b"transfer-encoding: chunked" not in head.lower():
        raise RuntimeError(f"watch -> {head[:500]!r}")
    sock.setblocking(False)
    return sock, ChunkedLines(body)


def _watch_process(conn, url: str, path: str, label: str, wanted: int, watchers: int, kubeconfig: Path,
                   key_dir: Path) -> None:
    """`watchers` watches read by one process (the body of a `WatchReaders` process): says "connected"
    once every watch answered, then reads each event as it arrives (decrypted, de-chunked and decoded
    as any client must), and sends back each watcher's (resourceVersion, arrival time) of the
    benchmark's updates and this process's CPU seconds since it connected."""
    try:
        key_dir.mkdir(parents=True, exist_ok=True)
        ctx = tls_context(kubeconfig, key_dir)
        gc.disable()  # as in the in-process phases: the decoded events are freed by reference counting
        watches = [_open_watch(ctx, url, path) for _ in range(watchers)]
        conn.send("connected")
        cpu = time.process_time()
        logs: list[list[tuple[str, float]]] = [[] for _ in watches]
        sel = selectors.DefaultSelector()
        for i, (sock, _) in enumerate(watches):
            sel.register(sock, selectors.EVENT_READ, i)
        left = len(watches)
        while left:
            for key, _ in sel.select(60):
                sock, lines = watches[key.data]
                log = logs[key.data]
                while len(log) < wanted:
                    try:
                        data = sock.recv(1 << 18)
                    except ssl.SSLWantReadError:
                        break
                    if not data:
                        raise RuntimeError(f"watch ended after {len(log)} of {wanted} events")
                    arrived = time.perf_counter()
                    for line in lines.feed(data):
                        obj = orjson.loads(line)["object"]
                        if label in obj["metadata"].get("labels", {}):
                            log.append((obj["metadata"]["resourceVersion"], arrived))
                if len(log) >= wanted:
                    sel.unregister(sock)
                    left -= 1
        conn.send((logs, time.process_time() - cpu))
        for sock, _ in watches:
            sock.close()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(RuntimeError(f"watch reader: {e!r}"))
    finally:
        conn.close()


class WatchReaders:
    """The watchers of the watch phase, spread over `processes` processes of their own, as real
    watchers are separate clients: one process reading 100 TLS watches spends more CPU per round
    of events (10-12 ms with aiohttp) than the server's fan-out to them takes, so events queued in
    the client's sockets and the latency measured was the client's."""

    def __init__(self, url: str, path: str, label: str, wanted: int, watchers: int, processes: int,
                 tls: tuple[Path, Path]) -> None:
        mp = multiprocessing.get_context("spawn")
        self.procs, self.conns = [], []
        processes = max(1, min(processes, watchers))
        for i in range(processes):
            n = watchers // processes + (i < watchers % processes)
            ours, theirs = mp.Pipe(duplex=False)
            p = mp.Process(target=_watch_process, daemon=True,
                           args=(theirs, url, path, label, wanted, n, tls[0], tls[1] / f"watch-{i}"))
            p.start()
            theirs.close()
            self.procs.append(p)
            self.conns.append(ours)

    async def _receive(self, conn, timeout: float):
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, timeout)
        finally:
            loop.remove_reader(conn.fileno())
        try:
            out = conn.recv()
        except EOFError:
            raise RuntimeError("a watch reader process exited") from None
        if isinstance(out, Exception):
            raise out
        return out

    async def connected(self, timeout: float = 60) -> None:
        for conn in self.conns:
            await self._receive(conn, timeout)

    async def results(self, timeout: float) -> tuple[list[list[tuple[str, float]]], float]:
        """Every watcher's log, and the CPU seconds the readers spent."""
        logs, cpu = [], 0.0
        for conn in self.conns:
            part, spent = await self._receive(conn, timeout)
            logs += part
            cpu += spent
        return logs, cpu

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join()
        for conn in self.conns:
            conn.close()


async def measure_watch(api: PodsApi, cfg: BenchConfig, progress: Progress, pid: int,
                        tls: tuple[Path, Path]) -> dict[str, float]:
    """cfg.watchers watchers on the namespace's pods (spread over cfg.watch_processes reader
    processes), then cfg.watch_writes label patches from this process, one every
    cfg.watch_interval_s (one in flight; when a write is late the next goes at once).

    Delivery latency runs from sending the write to a watcher reading its
    event (`time.perf_counter` is CLOCK_MONOTONIC, shared by the processes):
    this server fans an event out before it answers the write, so latency from
    the acknowledgement would be negative; the share of events read before the
    acknowledgement is reported alongside, and the server's and the clients' CPU
    per delivery (this process's writes and the readers' reads).

    The writes have a fixed rate because sending each as soon as the last was answered made the
    rate follow the server's speed: reading an event on 100 watchers costs the readers more CPU
    (~4.5 ms) than the server's fan-out of it (~3 ms), so on two shared cores a server answering
    in 3 ms outran the readers and their backlog grew through the phase (p99 38-158 ms), while
    rounds where the same server answered in 5-7 ms kept up (p99 10-18 ms): the row measured the
    readers' queue, and a faster server made it worse. 100 writes a second keep about half of
    two cores busy.
    """
    rv = await api.list_resource_version()
    path = f"{urllib.parse.urlsplit(api.pods).path}?watch=1&resourceVersion={rv}"
    progress(f"  {cfg.watchers} watchers in {cfg.watch_processes} processes, {cfg.watch_writes} updates"
             f" {cfg.watch_interval_s * 1000:g} ms apart")
    readers = WatchReaders(api.url, path, _WATCH_LABEL, cfg.watch_writes, cfg.watchers, cfg.watch_processes, tls)
    try:
        await readers.connected()
        sent: dict[str, tuple[float, float]] = {}
        start = time.perf_counter()
        cpu = CPU(pid)
        for k in range(cfg.watch_writes):
            await asyncio.sleep(start + k * cfg.watch_interval_s - time.perf_counter())
            patch = {"metadata": {"labels": {_WATCH_LABEL: str(k)}}}
            t0 = time.perf_counter()
            body = await api.call("PATCH", f"{api.pods}/bench-{k % cfg.pods:06d}", patch,
                                  content_type="application/merge-patch+json")
            sent[orjson.loads(body)["metadata"]["resourceVersion"]] = (t0, time.perf_counter())
        logs, readers_cpu = await readers.results(cfg.watch_timeout_s)
        server, client = cpu.spent()
    finally:
        readers.close()
    events = [(arrived, *sent[rv]) for log in logs for rv, arrived in log]
    last = max(arrived for arrived, _, _ in events)
    return {
        **_ms([arrived - t0 for arrived, t0, _ in events], "watch delivery"),
        "watch events delivered (events/s)": len(events) / (last - start),
        "watch events read before write ack (%)": 100 * sum(arrived < ack for arrived, _, ack in events) / len(events),
        "server CPU per watch delivery (us)": server * 1e6 / len(events),
        "client CPU per watch delivery (us)": (client + readers_cpu) * 1e6 / len(events),
    }


async def measure(server: Server, tls: tuple[Path, Path], cfg: BenchConfig, progress: Progress) -> dict[str, float]:
    """Every phase against one running server, in an order where each leaves the next a known state.
    `tls` is the kubeconfig and a directory for its client key files (`tls_context`)."""
    ssl_ctx = tls_context(*tls)
    keep_freed_memory()
    connector = aiohttp.TCPConnector(ssl=ssl_ctx, limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        api = PodsApi(session, server.url, cfg.namespace)
        await api.create_namespace()
        await api.list_resource_version()
        rss_start = server_rss_kib(server.pid)
        progress(f"  creating {cfg.pods} pods, {cfg.concurrency} in flight")
        cpu_start = server_cpu_seconds(server.pid)
        results = await measure_creates(api, cfg, progress)
        rss_full = server_rss_kib(server.pid)
        results |= {
            "server CPU per pod create (ms)": (server_cpu_seconds(server.pid) - cpu_start) * 1000 / cfg.pods,
            "server RSS at startup (MiB)": rss_start / 1024,
            "server RSS with all pods (MiB)": rss_full / 1024,
            "memory per pod (KiB/pod)": (rss_full - rss_start) / cfg.pods,
        }
        progress("  waiting for the server to finish what the creates set off")
        results["server busy after creates (s)"] = await settle(server.pid, cfg.settle_window_s)
        if not cfg.watch_only:
            results |= await measure_reads(api, cfg, progress, server.pid)
        with _without_cycle_collector():
            results |= await measure_watch(api, cfg, progress, server.pid, tls)
        if not cfg.watch_only:
            results |= await measure_custom_objects(api, cfg, progress)
    return {name: results[name] for name in METRICS if name in results}


def run_backend(backend: str, cfg: BenchConfig, progress: Progress) -> dict[str, float]:
    """Starts a fresh server on `backend`, measures it, and removes everything it started."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"nanokube-bench-{backend}-")))
        store = backend
        if backend == "etcd":
            store = "etcd://" + stack.enter_context(etcd_server(work / "etcd"))
        extra = ("--api-workers", str(cfg.api_workers)) if cfg.api_workers > 1 else ()
        server = stack.enter_context(nanokube_server(work / "nanokube", store, extra))
        progress(f"{backend}: nanokube pid {server.pid} serving {server.url}")
        return asyncio.run(measure(server, (server.kubeconfig, work), cfg, progress))


def run_benchmarks(backends: list[str], cfg: BenchConfig, progress: Progress) -> Results:
    return {backend: run_backend(backend, cfg, progress) for backend in backends}


def _number(v: float) -> str:
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def format_table(results: Results) -> str:
    """One row per metric measured, one column per backend."""
    backends = list(results)
    measured = [m for m in METRICS if m in results[backends[0]]]
    rows = [["metric", *backends]] + [[m, *(_number(results[b][m]) for b in backends)] for m in measured]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)
