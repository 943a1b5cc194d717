"""A full cluster with a queue, over HTTPS (issue 19): do pending pods throttle other clients?

Fresh `nanokube up` servers (SQLite), one per mode, get the same load from a client in this
process. The modes (`--pending-modes`; the first two by default): `none`, started with
`--scheduler none`; `in-process`, `up`'s own scheduler in the server's process; `own-process`,
`--scheduler none` beside a `nanokube scheduler` process on the server's kubeconfig, as
kube-scheduler runs beside kube-apiserver (leader election on, as its default; measured once it
leads with its informers synced, stopped with SIGTERM at the end and required to exit cleanly).
The load:
N fake nodes (plain Node objects with 4 CPU / 32Gi / 110 pods and a Ready condition,
like scheduler_perf's and kwok's; no node agent), M pods already bound to them
(created with `spec.nodeName`, so neither server's scheduler does anything for them),
then P pods whose `nodeSelector` no node carries, created with 32 requests in flight.
The measured row is that last phase: with a scheduler every such pod costs a
scheduling attempt over every node, a `PodScheduled=False` status write and a
FailedScheduling Event, all in the server process that also answers the creates (in-process),
or only the two writes and their watch events there, the attempt in the scheduler's process.

The node lifecycle and TTL controllers are left out of every server (`--controllers
*,-node-lifecycle-controller,-ttl-controller`): fake nodes renew no Lease, and marking 5000 of them
unreachable mid-run would measure that controller instead; the TTL controller annotates every
node anew each time the cluster grows past one of its size thresholds (~4,000 node patches at
5,000 nodes), which under kube-controller-manager's client limit (20/s) lasts minutes at a
few percent of a core, below what `_idle` counts as busy, and so would go on inside the measured
spans (in the scheduler modes with the scheduler's cache, snapshot and node watch following each).
Without that controller nothing takes TaintNodesByCondition's not-ready taint off a new node, so
that admission plugin is off too (`--disable-admission-plugins`), as in scheduler_perf's server.

The server's CPU (from /proc) is read over two spans: the creates alone (what the creates/s row
competes with), and from the first create until the server has gone idle with every pending pod
reported on (the scheduler's whole work on them). The first span's ratio between the two servers is
the create rate's ratio with the machine's load taken out: one server process runs on one core's
worth of one event loop, so its creates/s is the CPU it gets divided by the CPU a create costs there.
`--api-workers N` runs every mode's server as `nanokube up --api-workers N` (API server processes
on one port and one SQLite database, the kernel spreading connections over them by SO_REUSEPORT):
the server's CPU is then that of `up` and its workers together, with the busiest one's share of it
and a census of which process holds which client's connections (a progress line); the rate can
then grow with the cores the server gets, which the CPU ratio does not show, up to what this
process (the client, one core at most) can send: its CPU per create is a row too.
The scheduler process's CPU is read over the same two spans; "until idle" waits for both. The
server's CPU per bound pod create, read over the creates alone (what lags past the last one is left
out), is what a create costs with no scheduler write after it: against `none`'s, what handing the
pod to the scheduler adds (its watch event, over HTTPS to its own process).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from .api import (PodsApi, Progress, Server, _bounded, _number, _running, _tail, _wait_for, connections,
                  cpu_seconds, nanokube_server, percentile, pod_manifest, server_pids, tls_context)

#: `--pending-modes` names and their columns' headings
MODES = {"none": "no scheduler", "in-process": "scheduler", "own-process": "scheduler (own process)"}
DEFAULT_MODES = ("none", "in-process")
#: the row of `_idle`'s checks
CHECKS = "harness checks of the pending pods until idle (/metrics reads, a LIST once they add up; CPU left out)"
#: rows only the own-process mode has
PROCESS_METRICS = (
    "scheduler process CPU per pending create, during the creates (ms)",
    "scheduler process CPU per pending pod, until idle (ms)",
    "scheduler process connections at the last create",
)
METRICS = (
    "pending pod creates (pods/s)",
    "pending pod create p50 (ms)",
    "pending pod create p99 (ms)",
    "server CPU per pending create, during the creates (ms)",
    "server CPU per pending pod, until idle (ms)",
    "benchmark client CPU per pending create (ms)",
    "server idle after last create (s)",
    CHECKS,
    "setup: node creates (nodes/s)",
    "setup: bound pod creates (pods/s)",
    "setup: server CPU per bound pod create (ms)",
    "setup: server busy after the bound pods (s)",
    "pending pods reported PodScheduled=False",
    "server processes",
    "busiest server process's share of the server CPU during the creates (%)",
    *PROCESS_METRICS,
)


@dataclass(frozen=True)
class PendingConfig:
    nodes: int = 5000
    bound_pods: int = 11000
    pending_pods: int = 8000
    concurrency: int = 32
    namespace: str = "queue"
    #: seconds the informers and the watch cache get to settle after the bound pods, before the
    #: measured creates wait for the server to go idle as well
    settle_s: float = 2.0
    #: which of MODES to run, in this order
    modes: tuple[str, ...] = DEFAULT_MODES
    #: `nanokube up --api-workers`, the same in every mode
    api_workers: int = 1


def node_manifest(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"fake-{i:05d}", "labels": {"kubernetes.io/hostname": f"fake-{i:05d}",
                                                          "bench.nanokube.io/fake": "true"}},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node", "lastHeartbeatTime": None, "lastTransitionTime": None}],
        },
    }


async def _rate(count: int, concurrency: int, make) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def one(i: int) -> None:
        start = time.perf_counter()
        await make(i)
        latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await _bounded(count, concurrency, one)
    return count / (time.perf_counter() - start), latencies


async def _reported(api: PodsApi) -> int:
    """How many pending pods carry PodScheduled=False: one LIST, read after the measured spans."""
    body = orjson.loads(await api.call("GET", api.pods, params={"labelSelector": "bench.nanokube.io/pending=true"}))
    return sum(any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in (pod.get("status") or {}).get("conditions") or ()) for pod in body["items"])


#: the server's storage writes of a scheduler's report on a pending pod: its FailedScheduling Event's
#: create and its PodScheduled=False status update, as (operation, resource) of etcd_requests_total
REPORT_WRITES = (("create", "events"), ("update", "pods"))
#: seconds between two checks of an unfinished report (`_idle`)
CHECK_EVERY = 5.0


async def _stored(api: PodsApi) -> dict[tuple[str, str], float]:
    """The server's etcd_requests_total of REPORT_WRITES, from one /metrics read."""
    out = dict.fromkeys(REPORT_WRITES, 0.0)
    for line in (await api.call("GET", f"{api.url}/metrics")).decode().splitlines():
        if line.startswith("etcd_requests_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            key = (labels.get("operation"), labels.get("resource"))
            if key in out:
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


@dataclass(frozen=True)
class Processes:
    """The processes whose CPU is read: the server's (`up` and the API workers it started, found
    from /proc once they listen) and the scheduler's, when it runs in a process of its own."""

    server: tuple[int, ...]
    scheduler: int | None = None

    @property
    def pids(self) -> tuple[int, ...]:
        return self.server if self.scheduler is None else (*self.server, self.scheduler)

    def cpu(self) -> tuple[float, ...]:
        """Each process's CPU seconds, in `pids`' order."""
        return tuple(cpu_seconds(pid) for pid in self.pids)

    def server_cpu(self, cpu: tuple[float, ...]) -> float:
        return sum(cpu[:len(self.server)])


async def _idle(api: PodsApi, procs: Processes, wanted: int, stored: dict | None = None
                ) -> tuple[float, tuple[float, ...], int]:
    """Waits until the server and the scheduler process have used under a tenth of a core
    together over half a second with `wanted` pending pods reported on, and returns when that idle
    spell began, each process's CPU seconds then and how many checks it took. Idleness is read from
    /proc rather than from a watch of the pods: handing one HTTPS watch every pod event (ADDED,
    then the scheduler's MODIFIED, a loop turn apart so one TLS record and `send` each) was a third
    of the server's CPU after the creates, the harness measuring itself. A rate-limited scheduler
    trickles its writes under that tenth for minutes, so most spells are idle ones: an idle spell
    is checked at most every CHECK_EVERY seconds, by the server's count of the report writes since
    `stored` (a /metrics read), and once they add up by a LIST of the pending pods' reports; if some
    are missing, the next idle spell is waited for. The CPU read around each check that failed
    (inside the span; the last one comes after it) is taken out of what is returned, so "until idle"
    counts the scheduler's work, not the harness's. (A LIST at every idle spell took out with its
    own CPU whatever the scheduler did meanwhile: the more spells, the less the span seemed to cost.)"""
    checks, spent, looked = 0, (0.0,) * len(procs.pids), -math.inf
    while True:
        began, cpu = time.perf_counter(), procs.cpu()
        while True:
            await asyncio.sleep(0.5)
            now, used = time.perf_counter(), procs.cpu()
            if sum(used) - sum(cpu) < 0.05:
                break
            began, cpu = now, used
        if not wanted:
            return began, _minus(cpu, spent), checks
        if now - looked < CHECK_EVERY:
            continue
        before, checks, looked = procs.cpu(), checks + 1, now
        written = await _stored(api)
        if all(written[k] - stored[k] >= wanted for k in REPORT_WRITES) and await _reported(api) >= wanted:
            return began, _minus(cpu, spent), checks
        spent = tuple(s + a - b for s, a, b in zip(spent, procs.cpu(), before))


def _minus(cpu: tuple[float, ...], spent: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(c - s for c, s in zip(cpu, spent))


async def _measure(server: Server, ssl_ctx, cfg: PendingConfig, with_scheduler: bool, procs: Processes,
                   progress: Progress) -> dict[str, float]:
    connector = aiohttp.TCPConnector(ssl=ssl_ctx, limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        api = PodsApi(session, server.url, cfg.namespace)
        await api.create_namespace()
        nodes_url = f"{server.url}/api/v1/nodes"
        progress(f"  {cfg.nodes} fake nodes")
        node_rate, _ = await _rate(cfg.nodes, cfg.concurrency,
                                   lambda i: api.call("POST", nodes_url, node_manifest(i)))

        def bound(i: int) -> dict:
            pod = pod_manifest(i)
            pod["metadata"]["name"] = f"bound-{i:06d}"
            pod["spec"]["nodeName"] = f"fake-{i % cfg.nodes:05d}"
            return pod

        def pending(i: int) -> dict:
            pod = pod_manifest(i)
            pod["metadata"]["name"] = f"pending-{i:06d}"
            pod["metadata"]["labels"]["bench.nanokube.io/pending"] = "true"
            pod["spec"]["nodeSelector"] = {"bench.nanokube.io/pool": "does-not-exist"}
            return pod

        progress(f"  {cfg.bound_pods} bound pods")
        bound_cpu = procs.server_cpu(procs.cpu())
        bound_rate, _ = await _rate(cfg.bound_pods, cfg.concurrency, lambda i: api.call("POST", api.pods, bound(i)))
        bound_done, bound_cpu = time.perf_counter(), procs.server_cpu(procs.cpu()) - bound_cpu
        await asyncio.sleep(cfg.settle_s)
        # What the nodes and bound pods set off must be over before the measured span, else a slower
        # machine measures it inside the span and the ratio moves with its speed.
        settled, _, _ = await _idle(api, procs, 0)
        progress(f"  {cfg.pending_pods} pending pods, {cfg.concurrency} in flight")
        stored = await _stored(api)
        cpu0, client0 = procs.cpu(), time.process_time()
        rate, latencies = await _rate(cfg.pending_pods, cfg.concurrency,
                                      lambda i: api.call("POST", api.pods, pending(i)))
        last_create, cpu1, client = time.perf_counter(), procs.cpu(), time.process_time() - client0
        clients = {"benchmark": os.getpid()} | ({"scheduler": procs.scheduler} if procs.scheduler else {})
        census = connections(list(procs.server), urllib.parse.urlsplit(server.url).port, clients)
        progress(f"  connections at the last create, per server process: {census}")
        idle, cpu2, checks = await _idle(api, procs, cfg.pending_pods if with_scheduler else 0, stored)
        reported = await _reported(api)

    def per_pod(cpu: tuple[float, ...], i: int | None = None) -> float:
        spent = procs.server_cpu(cpu) - procs.server_cpu(cpu0) if i is None else cpu[i] - cpu0[i]
        return spent / cfg.pending_pods * 1000

    during = [cpu1[i] - cpu0[i] for i in range(len(procs.server))]
    results = {
        "pending pod creates (pods/s)": rate,
        "pending pod create p50 (ms)": percentile(latencies, 0.5) * 1000,
        "pending pod create p99 (ms)": percentile(latencies, 0.99) * 1000,
        "server CPU per pending create, during the creates (ms)": per_pod(cpu1),
        "server CPU per pending pod, until idle (ms)": per_pod(cpu2),
        "benchmark client CPU per pending create (ms)": client / cfg.pending_pods * 1000,
        "server idle after last create (s)": max(idle - last_create, 0.0),
        CHECKS: checks,
        "setup: node creates (nodes/s)": node_rate,
        "setup: bound pod creates (pods/s)": bound_rate,
        "setup: server CPU per bound pod create (ms)": bound_cpu / cfg.bound_pods * 1000,
        "setup: server busy after the bound pods (s)": max(settled - bound_done, 0.0),
        "pending pods reported PodScheduled=False": reported,
        "server processes": len(procs.server),
        "busiest server process's share of the server CPU during the creates (%)":
            max(during) / sum(during) * 100 if sum(during) else math.nan,
    }
    if procs.scheduler is not None:
        scheduler = len(procs.server)
        results.update(zip(PROCESS_METRICS, (per_pod(cpu1, scheduler), per_pod(cpu2, scheduler),
                                             sum(counts.get("scheduler", 0) for counts in census.held.values()))))
    return results


@contextlib.contextmanager
def scheduler_process(server: Server, work: Path, extra: tuple[str, ...] = ("--secure-port", "0")) -> Iterator[int]:
    """`nanokube scheduler --kubeconfig` on `server` with `extra` flags, else its defaults (leader
    election on), until the block exits; yields its pid once it schedules: it syncs its informers
    before it campaigns, and logs its profiles once it leads. SIGTERM stops it, as a supervisor
    would, and anything but a clean exit then fails the run. By default no secure port: nothing
    here reads its metrics (`scheduler_process.py` does)."""
    log = work / "scheduler.log"
    argv = [sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", str(server.kubeconfig), *extra]
    with _running(argv, log) as proc:
        _wait_for(lambda: "scheduling pods for profiles:" in log.read_text(errors="replace") or None,
                  proc, "nanokube scheduler", log, timeout=120)
        yield proc.pid
        proc.terminate()
        if proc.wait(timeout=30) != 0:
            raise RuntimeError(f"nanokube scheduler exited with {proc.returncode}:\n{_tail(log)}")


def run(cfg: PendingConfig, progress: Progress) -> dict[str, dict[str, float]]:
    """Each of cfg.modes on a fresh server in its own temporary directory, keyed by MODES' heading."""
    results = {}
    for mode in cfg.modes:
        extra = ("--controllers", "*,-node-lifecycle-controller,-ttl-controller",
                 "--disable-admission-plugins", "TaintNodesByCondition", "--scheduler",
                 "in-process" if mode == "in-process" else "none", "--api-workers", str(cfg.api_workers))
        with contextlib.ExitStack() as stack:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nanokube-bench-pending-")))
            server = stack.enter_context(nanokube_server(work / "nanokube", "sqlite", extra))
            scheduler_pid = stack.enter_context(scheduler_process(server, work)) if mode == "own-process" else None
            procs = Processes(tuple(server_pids(server.pid)), scheduler_pid)
            if len(procs.server) != cfg.api_workers:
                raise RuntimeError(f"nanokube up --api-workers {cfg.api_workers} runs {len(procs.server)} processes")
            progress(f"{MODES[mode]}: nanokube pid {server.pid} serving {server.url}"
                     + (f", API workers {', '.join(map(str, procs.server[1:]))}" if procs.server[1:] else "")
                     + (f", nanokube scheduler pid {scheduler_pid}" if scheduler_pid else ""))
            results[MODES[mode]] = asyncio.run(_measure(server, tls_context(server.kubeconfig, work), cfg,
                                                        mode != "none", procs, progress))
    return results


#: the benchmark client's CPU per create in a scheduler mode against `none`'s, outside which the
#: machine's load is taken to have moved between the columns (pend57: -12% to +25% in ten pairs of columns)
CLIENT_AGREES = (0.8, 1.25)


def format_table(cfg: PendingConfig, results: dict[str, dict[str, float]]) -> str:
    """One column per mode run ('-' for a row a mode has not); with `none` among them, each
    scheduler mode's create rate and server CPU per create against it, and a warning where the
    client's CPU per create disagrees with `none`'s: the client sends the same creates in every
    mode, so its CPU moving means the machine's load did, and CPU seconds per create inflate with
    contention (pend57: a run with the client at +68% had the server's at +22% for no more work)."""
    modes = list(results)

    def cell(mode: str, metric: str) -> str:
        v = results[mode].get(metric)
        return "-" if v is None else f"{v:,}" if isinstance(v, int) else _number(v)

    rows = [["metric", *modes]] + [[m, *(cell(mode, m) for mode in modes)] for m in METRICS]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    head = (f"pending pods over HTTPS: {cfg.nodes} fake nodes, {cfg.bound_pods} bound pods, "
            f"{cfg.pending_pods} pods that fit nowhere, {cfg.concurrency} creates in flight"
            + (f", {cfg.api_workers} API server workers" if cfg.api_workers > 1 else ""))
    base = results.get(MODES["none"])
    rate, cpu, client = METRICS[0], METRICS[3], METRICS[5]
    for mode in modes:
        if base is None or mode == MODES["none"]:
            continue
        ratio = results[mode][rate] / base[rate] * 100
        cpu_ratio = base[cpu] / results[mode][cpu] * 100 if results[mode][cpu] else math.nan
        lines += [f"creates with the {mode}: {ratio:.0f}% of the rate without it",
                  f"server CPU per create during the creates, without / with the {mode}: {cpu_ratio:.0f}%"]
        moved = results[mode][client] / base[client] if base[client] else math.nan
        if not CLIENT_AGREES[0] <= moved <= CLIENT_AGREES[1]:
            lines.append(f"  the benchmark client's CPU per create with the {mode} is {moved:.0%} of its own without "
                         "it (the same creates): the load moved between the columns, so these ratios did too")
    return "\n".join([head, *lines])
