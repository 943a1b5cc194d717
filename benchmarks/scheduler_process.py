"""The scheduler_perf workloads with the API server and the scheduler in processes of their own
(`python -m benchmarks --scheduler NAMES --scheduler-mode process`).

Upstream's scheduler_perf runs kube-apiserver and the scheduler in one Go process that uses every
core, so what the API server does for pods that fit nowhere does not take the scheduler's CPU;
benchmarks/scheduler.py runs both and the workload's creates in one Python process on one core.
Here `nanokube up` serves the API alone: the memory store, as the in-process mode (SQLite with
`--api-workers N` > 1, which a memory store cannot serve), no audit log, no ServiceAccount nor
TaintNodesByCondition admission (scheduler_perf's server disables both too), no controllers but the ResourceClaim controller for the
DRA workloads, no node agents (`--cluster` with no nodes), no scheduler. `nanokube scheduler` runs
on its kubeconfig with scheduler_perf's client limit (5000 / 5000) and, as there, no leader
election, and this process creates the workload's nodes and pods over HTTPS, 30 in flight as
scheduler_perf's createPods op. Throughput is taken as the in-process mode takes it: from a watch
of the bound pods (this process's informer, `spec.nodeName!=`), sampled once a second, the
latency from each create's answer. Each process's CPU over the measured phase comes from /proc;
the scheduler's unschedulable attempts from its /metrics. After the phase every bound pod is
checked against its node (`scheduler.misplaced`) and, where pods fit nowhere, each is waited for
until the scheduler reported it unschedulable, and its FailedScheduling Events are counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from nanokube.client.http import HTTPClient
from nanokube.client.informer import Informer

from .api import _free_port, nanokube_server, server_pids
from .pending import Processes, scheduler_process
from .scheduler import (ATTEMPTS, NS, UNSCHEDULABLE, Progress, Workload, _BindTracker, _create_pods,
                        _sample, _setup, results)

#: scheduler_perf's createPods: test/utils CreatePod's workers
CREATE_WORKERS = 30
#: rows only this mode has, after METRICS (whose CPU-s is then the three processes' together)
PROCESS_METRICS = (
    "server CPU-s of the measured phase",
    "scheduler process CPU-s of the measured phase",
    "benchmark process CPU-s of the measured phase",
    "scheduler process CPU per measured pod (ms)",
    "stuck pods reported unschedulable",
    "FailedScheduling Events of the stuck pods",
)
HEADINGS = ("server CPU-s", "sched CPU-s", "client CPU-s", "sched ms/pod", "stuck reported", "stuck Events")
SCHEDULER_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {qps: 5000, burst: 5000}
"""
NO_NODES = "pools: [{name: none, count: 0, capacity: {cpu: '1', memory: 1Gi}}]\n"


async def _attempts(port: int) -> tuple[float, float]:
    """The count and sum (s) of the scheduler process's unschedulable attempts, from its /metrics."""
    async with aiohttp.ClientSession() as session, \
            session.get(f"https://127.0.0.1:{port}/metrics", ssl=False) as resp:
        text = await resp.text()
    values = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
              if s.name.startswith(ATTEMPTS) and all(s.labels.get(k) == v for k, v in UNSCHEDULABLE.items())}
    return values.get(ATTEMPTS + "_count", 0.0), values.get(ATTEMPTS + "_sum", 0.0)


async def _stuck(client: HTTPClient, w: Workload, timeout_s: float) -> tuple[int, int]:
    """Waits until the scheduler reported every stuck pod PodScheduled=False (LISTs of the unbound
    pods, a second apart); how many it reported, and the FailedScheduling Events naming them."""
    if w.kind != "unschedulable":
        return 0, 0
    pods, deadline = client.resource("", "v1", "pods"), time.perf_counter() + timeout_s
    while True:
        items, _ = await pods.list(NS, field_selector="spec.nodeName=")
        reported = sum(1 for p in items if p["metadata"]["name"].startswith("stuck-") and any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in (p.get("status") or {}).get("conditions") or ()))
        if reported >= w.pods or time.perf_counter() > deadline:
            break
        await asyncio.sleep(1.0)
    events, _ = await client.resource("", "v1", "events").list(NS)
    return reported, sum(1 for e in events if e.get("reason") == "FailedScheduling"
                         and e["involvedObject"]["name"].startswith("stuck-"))


async def _measure(kubeconfig: Path, w: Workload, procs: Processes, metrics_port: int, timeout_s: float,
                   progress: Progress) -> dict:
    client = HTTPClient.from_kubeconfig(str(kubeconfig), field_manager="scheduler-bench",
                                        user_agent="scheduler-bench")
    await client.start()
    tracker = _BindTracker()
    bound = Informer(client.resource("", "v1", "pods"), NS, field_selector="spec.nodeName!=")
    tracker.share(bound)
    watching = asyncio.create_task(bound.run())
    try:
        await bound.synced.wait()
        await _setup(client, w, CREATE_WORKERS)
        progress(f"{w.name}: {w.nodes} nodes ready; {w.init_pods} init pods")
        init = await _create_pods(client, w, "init", w.init_pods, tracker, CREATE_WORKERS)
        await tracker.wait_for(init, timeout_s)
        progress(f"{w.name}: {w.pods} measured pods")
        samples: list[float] = []
        sampler = asyncio.create_task(_sample(tracker, [f"pod-{i}" for i in range(w.pods)], samples))
        t0, cpu0, own0 = time.perf_counter(), procs.cpu(), time.process_time()
        names = await _create_pods(client, w, "pod", w.pods, tracker, CREATE_WORKERS)
        await tracker.wait_for(names, timeout_s)
        elapsed, cpu1, own = time.perf_counter() - t0, procs.cpu(), time.process_time() - own0
        sampler.cancel()
        stuck = await _stuck(client, w, timeout_s)
        attempts = await _attempts(metrics_port)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await client.close()
    server = procs.server_cpu(cpu1) - procs.server_cpu(cpu0)
    scheduler = cpu1[-1] - cpu0[-1]
    row = results(w, tracker, names, samples, elapsed, attempts, server + scheduler + own)
    return row | dict(zip(PROCESS_METRICS, (server, scheduler, own, scheduler / w.pods * 1000, *stuck)))


def run(workloads: list[Workload], progress: Progress = lambda _m: None, timeout_s: float = 900.0,
        api_workers: int = 1) -> dict[str, dict]:
    """Each workload on a fresh server and scheduler process; results keyed by workload name."""
    out = {}
    for w in workloads:
        with contextlib.ExitStack() as stack:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nanokube-bench-scheduler-")))
            (work / "cluster.yaml").write_text(NO_NODES)
            (work / "scheduler.yaml").write_text(SCHEDULER_CONFIG)
            extra = ("--cluster", str(work / "cluster.yaml"), "--scheduler", "none", "--audit-log-path", "",
                     "--controllers", "resourceclaim-controller" if w.kind.startswith("dra") else "",
                     "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition", "--api-workers", str(api_workers))
            server = stack.enter_context(nanokube_server(work / "nanokube", "sqlite" if api_workers > 1 else "memory",
                                                         extra))
            port = _free_port()
            pid = stack.enter_context(scheduler_process(server, work, (
                "--config", str(work / "scheduler.yaml"), "--leader-elect", "false",
                "--bind-address", "127.0.0.1", "--secure-port", str(port),
                "--authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics")))
            procs = Processes(tuple(server_pids(server.pid)), pid)
            progress(f"{w.name}: nanokube pid {server.pid} serving {server.url}, nanokube scheduler pid {pid}")
            out[w.name] = asyncio.run(_measure(server.kubeconfig, w, procs, port, timeout_s, progress))
    return out
