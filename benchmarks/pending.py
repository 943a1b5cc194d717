"""A full cluster with a queue, over HTTPS (issue 19): do pending pods throttle other clients?

Two fresh `nanokube up` servers (SQLite), one with the in-process scheduler and one
started with `--scheduler none`, get the same load from a client in this process:
N fake nodes (plain Node objects with 4 CPU / 32Gi / 110 pods and a Ready condition,
like scheduler_perf's and kwok's; no node agent), M pods already bound to them
(created with `spec.nodeName`, so neither server's scheduler does anything for them),
then P pods whose `nodeSelector` no node carries, created with 32 requests in flight.
The measured row is that last phase: with a scheduler every such pod costs a
scheduling attempt over every node, a `PodScheduled=False` status write and a
FailedScheduling Event, all in the server process that also answers the creates.

The node lifecycle controller is left out of both servers (`--controllers
*,-node-lifecycle-controller`): fake nodes renew no Lease, and marking 5000 of them
unreachable mid-run would measure that controller instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from .api import PodsApi, Progress, Server, _bounded, nanokube_server, percentile, pod_manifest, tls_context

MODES = ("no scheduler", "scheduler")
METRICS = (
    "pending pod creates (pods/s)",
    "pending pod create p50 (ms)",
    "pending pod create p99 (ms)",
    "server CPU per pending create (ms)",
    "scheduler caught up after last create (s)",
    "setup: node creates (nodes/s)",
    "setup: bound pod creates (pods/s)",
)


@dataclass(frozen=True)
class PendingConfig:
    nodes: int = 5000
    bound_pods: int = 11000
    pending_pods: int = 8000
    concurrency: int = 32
    namespace: str = "queue"


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


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


async def _rate(count: int, concurrency: int, make) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def one(i: int) -> None:
        start = time.perf_counter()
        await make(i)
        latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await _bounded(count, concurrency, one)
    return count / (time.perf_counter() - start), latencies


async def _count_rejections(api: PodsApi, rv: str, wanted: int, seen: set[str]) -> None:
    """Follows a watch on the pending pods from `rv` until the scheduler has reported on `wanted` of
    them (PodScheduled=False); a watch, so waiting costs the server one watcher, not repeated LISTs."""
    params = {"watch": "1", "resourceVersion": rv, "labelSelector": "bench.nanokube.io/pending=true",
              "allowWatchBookmarks": "false"}
    async with api.session.get(api.pods, params=params) as resp:
        async for line in resp.content:
            event = orjson.loads(line)
            if event["type"] == "ERROR":  # e.g. 410: the watch cache's window no longer reaches back to rv
                raise RuntimeError(f"watch of the pending pods failed: {event['object'].get('message')}")
            pod = event["object"]
            if any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in pod.get("status", {}).get("conditions", [])):
                seen.add(pod["metadata"]["name"])
                if len(seen) >= wanted:
                    return


async def _measure(server: Server, ssl_ctx, cfg: PendingConfig, with_scheduler: bool,
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
        bound_rate, _ = await _rate(cfg.bound_pods, cfg.concurrency, lambda i: api.call("POST", api.pods, bound(i)))
        await asyncio.sleep(2.0)  # let the informers and the watch cache settle before measuring
        progress(f"  {cfg.pending_pods} pending pods, {cfg.concurrency} in flight")
        rv = await api.list_resource_version()
        cpu0 = _cpu_seconds(server.pid)
        rate, latencies = await _rate(cfg.pending_pods, cfg.concurrency,
                                      lambda i: api.call("POST", api.pods, pending(i)))
        last_create = time.perf_counter()
        caught_up = 0.0
        if with_scheduler:
            # watched only now, from before the first create: a watch open during the creates would
            # load the server with the harness's own observation (a TLS write per pod event, twice
            # as many with the scheduler's status writes), not with anything the scheduler does
            await _count_rejections(api, rv, cfg.pending_pods, set())
            caught_up = time.perf_counter() - last_create
        cpu = _cpu_seconds(server.pid) - cpu0
    return {
        "pending pod creates (pods/s)": rate,
        "pending pod create p50 (ms)": percentile(latencies, 0.5) * 1000,
        "pending pod create p99 (ms)": percentile(latencies, 0.99) * 1000,
        "server CPU per pending create (ms)": cpu / cfg.pending_pods * 1000,
        "scheduler caught up after last create (s)": caught_up,
        "setup: node creates (nodes/s)": node_rate,
        "setup: bound pod creates (pods/s)": bound_rate,
    }


def run(cfg: PendingConfig, progress: Progress) -> dict[str, dict[str, float]]:
    """Both modes, each on a fresh server in its own temporary directory."""
    results = {}
    for mode in MODES:
        with_scheduler = mode == "scheduler"
        extra = ("--controllers", "*,-node-lifecycle-controller", "--scheduler",
                 "in-process" if with_scheduler else "none")
        with contextlib.ExitStack() as stack:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nanokube-bench-pending-")))
            server = stack.enter_context(nanokube_server(work / "nanokube", "sqlite", extra))
            progress(f"{mode}: nanokube pid {server.pid} serving {server.url}")
            results[mode] = asyncio.run(_measure(server, tls_context(server.kubeconfig, work), cfg,
                                                 with_scheduler, progress))
    return results


def format_table(cfg: PendingConfig, results: dict[str, dict[str, float]]) -> str:
    from .api import _number

    rows = [["metric", *MODES]] + [[m, *(_number(results[mode][m]) for mode in MODES)] for m in METRICS]
    ratio = results["scheduler"][METRICS[0]] / results["no scheduler"][METRICS[0]] * 100
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    head = (f"pending pods over HTTPS: {cfg.nodes} fake nodes, {cfg.bound_pods} bound pods, "
            f"{cfg.pending_pods} pods that fit nowhere, {cfg.concurrency} creates in flight")
    return "\n".join([head, *lines, f"creates with the scheduler: {ratio:.0f}% of the rate without it"])
