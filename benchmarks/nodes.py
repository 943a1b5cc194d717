"""Simulated node agents at scale: do thousands of them start, and stay
Ready with their heartbeats on time, on one small machine?

One event loop holds what `nanokube up` runs for nodes: an in-process API
server (sqlite store in a temporary directory, as `up` defaults to; watch
cache, GenericREST with admission; no sockets), the node lifecycle controller
(with upstream's 50 s grace, so a late heartbeat really costs a node its
Ready) and the NodeManager with its agents at upstream's kubelet defaults
(Lease renewed every 10 s, 40 s lease). The cluster is examples/clusters/
large-1000.yaml scaled to the requested size: 80% GPU nodes with 8 GPUs and 8
RDMA NICs each, 20% CPU nodes.

Every API call the agents make is counted by a thin wrapper around the
server's REST layer, and a watch on kube-node-lease records every renewTime
the server stores, so heartbeat lateness is read from API-observed
timestamps rather than from the agents' own bookkeeping.

- start-up: from NodeManager.start() until it returns, i.e. every Node is
  created with its status posted and Lease taken, and every ResourceSlice is
  published (both checked by listing them afterwards); its CPU time is the
  whole process's (API server, agents and the lifecycle controller alike),
  which a loaded machine inflates less than the wall-clock time, except
  that the longer start-up takes, the more Leases the nodes registered
  first renew meanwhile (counted apart);
- RSS per node: the process's VmRSS after start-up less before the agents
  were built, over the node count: agents, API objects, watch cache, store;
- heartbeat requests/s: Lease writes and node status writes by the agents
  during the steady-state window (which starts one renew interval after
  start-up), per second; other agent requests are shown apart;
- heartbeat lateness: for each renewTime stored in the window, its gap to
  the same Lease's previous one, less the renew interval;
- nodes Ready: Ready=True right after start-up and at the end of the window,
  as the node lifecycle controller leaves them.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

from nanokube.apiserver.admission import Admission
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.apiserver.loopback import LocalClient, connector
from nanokube.clock import Clock, parse_time
from nanokube.controllers.nodelifecycle import NodeLifecycleController, ready_status
from nanokube.node.cluster import Cluster, load_cluster
from nanokube.node.manager import NodeManager
from nanokube.registry.base import all_resources
from nanokube.store.sqlite import SQLiteStore

from .api import percentile

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "clusters" / "large-1000.yaml"
LEASE_NAMESPACE = "kube-node-lease"
#: upstream kubelet defaults (--node-status-update-frequency's lease cousin, and the lease length)
RENEW_INTERVAL = 10.0

METRICS = (
    "start-up (s)",
    "start-up rate (nodes/s)",
    "start-up CPU (s)",
    "lease renewals during start-up",
    "RSS per node (KiB)",
    "heartbeat requests/s",
    "lease renewals/s",
    "node status posts/s",
    "other agent requests/s",
    "steady-state CPU (% of a core)",
    "heartbeat lateness p50 (ms)",
    "heartbeat lateness p99 (ms)",
    "heartbeat lateness max (ms)",
    "nodes Ready after start-up (%)",
    "nodes Ready at end (%)",
)

Progress = Callable[[str], None]


def scaled_cluster(nodes: int, path: Path = EXAMPLE) -> Cluster:
    """The example cluster's pools resized in proportion to reach `nodes` in total."""
    base = load_cluster(str(path))
    total = sum(p.count for p in base.pools)
    counts = [p.count * nodes // total for p in base.pools]
    counts[0] += nodes - sum(counts)
    return Cluster([replace(p, count=c) for p, c in zip(base.pools, counts) if c])


class CountingREST:
    """The REST layer with a count of calls by (verb, resource[/subresource])."""

    def __init__(self, rest: GenericREST):
        self._rest = rest
        self.calls: Counter[tuple[str, str]] = Counter()

    def __getattr__(self, name: str):
        return getattr(self._rest, name)

    def _count(self, verb: str, res, subresource: str = "") -> None:
        self.calls[(verb, res.plural + (f"/{subresource}" if subresource else ""))] += 1

    async def get(self, res, *a, **kw):
        self._count("get", res)
        return await self._rest.get(res, *a, **kw)

    async def list(self, res, *a, **kw):
        self._count("list", res)
        return await self._rest.list(res, *a, **kw)

    async def create(self, res, *a, **kw):
        self._count("create", res, kw.get("subresource", ""))
        return await self._rest.create(res, *a, **kw)

    async def update(self, res, *a, **kw):
        self._count("update", res, kw.get("subresource", ""))
        return await self._rest.update(res, *a, **kw)

    async def patch(self, res, *a, **kw):
        self._count("patch", res, kw.get("subresource", ""))
        return await self._rest.patch(res, *a, **kw)

    async def delete(self, res, *a, **kw):
        self._count("delete", res)
        return await self._rest.delete(res, *a, **kw)


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


class LeaseWatch:
    """Every renewTime the server stored, per lease, in order."""

    def __init__(self) -> None:
        self.renewals: dict[str, list[float]] = {}

    async def follow(self, stream) -> None:
        async for _typ, obj in stream:
            renew = (obj.get("spec") or {}).get("renewTime")
            if renew:
                seen = self.renewals.setdefault(obj["metadata"]["name"], [])
                t = parse_time(renew)
                if not seen or seen[-1] != t:
                    seen.append(t)

    def lateness_ms(self, since: float, until: float, interval: float) -> list[float]:
        """For each renewal stored inside the window: how much later than `interval` after the previous one."""
        out = []
        for times in self.renewals.values():
            out += [(b - a - interval) * 1000 for a, b in pairwise(times) if since <= b <= until]
        return out


def _heartbeat_calls(calls: Counter) -> tuple[int, int, int]:
    leases = sum(n for (verb, what), n in calls.items() if what == "leases" and verb != "list")
    status = sum(n for (verb, what), n in calls.items() if what == "nodes/status")
    return leases, status, sum(calls.values()) - leases - status


async def _run(nodes: int, steady_s: float, progress: Progress, renew_interval: float,
               workdir: str) -> dict[str, float]:
    store = SQLiteStore(os.path.join(workdir, "state.db"))
    cache = WatchCache(store)
    clock = Clock()
    rest = GenericREST(store, cache, ResourceIndex(all_resources()), clock)
    rest.admission = Admission(rest)
    await store.start()
    await cache.start()
    admin = LocalClient(rest)
    for ns in ("default", "kube-system", LEASE_NAMESPACE):
        await admin.resource("", "v1", "namespaces").create({"metadata": {"name": ns}})
    lifecycle = NodeLifecycleController(admin, clock)
    await lifecycle.start()
    watch = LeaseWatch()
    follower = asyncio.create_task(
        watch.follow(await admin.resource("coordination.k8s.io", "v1", "leases").watch(LEASE_NAMESPACE)))
    counting = CountingREST(rest)
    cluster = scaled_cluster(nodes)
    gc.collect()
    rss0 = rss_kib()
    manager = NodeManager(connector(counting), cluster, clock, renew_interval=renew_interval,
                          pods_dir=os.path.join(workdir, "pods"))
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        await manager.start()
        startup, startup_cpu = time.perf_counter() - t0, time.process_time() - c0
        startup_renewals = counting.calls[("update", "leases")]
        expected_slices = sum(len(p.specs()) for a in manager.agents.values() for p in a.dra.publishers)
        items, _ = await admin.resource("", "v1", "nodes").list()
        slices, _ = await admin.resource("resource.k8s.io", "v1", "resourceslices").list()
        ready = sum(ready_status(n) == "True" for n in items)
        if len(items) != nodes or len(slices) != expected_slices:
            raise RuntimeError(f"after start-up: {len(items)}/{nodes} Nodes, {len(slices)}/{expected_slices} "
                               "ResourceSlices")
        gc.collect()
        rss1 = rss_kib()
        progress(f"{nodes} nodes: registered with {len(slices)} ResourceSlices in {startup:.1f}s, {ready} Ready; "
                 f"steady state for {steady_s:.0f}s")
        # Skip one renew interval so every agent's first renewal (staggered over it) is behind us.
        await asyncio.sleep(renew_interval)
        before = Counter(counting.calls)
        since, cpu0 = clock.now(), time.process_time()
        await asyncio.sleep(steady_s)
        until, cpu = clock.now(), time.process_time() - cpu0
        calls = counting.calls - before
        items, _ = await admin.resource("", "v1", "nodes").list()
        ready_end = sum(ready_status(n) == "True" for n in items)
    finally:
        await manager.stop()
        follower.cancel()
        await lifecycle.stop()
        await cache.stop()
        await store.close()
    late = watch.lateness_ms(since, until, renew_interval) or [0.0]
    leases, status, other = _heartbeat_calls(calls)
    window = until - since
    return dict(zip(METRICS, (
        startup,
        nodes / startup,
        startup_cpu,
        startup_renewals,
        (rss1 - rss0) / nodes,
        (leases + status) / window,
        leases / window,
        status / window,
        other / window,
        100.0 * cpu / window,
        percentile(late, 0.5),
        percentile(late, 0.99),
        max(late),
        100.0 * ready / nodes,
        100.0 * ready_end / nodes,
    )))


def run(counts: list[int], steady_s: float = 60.0, progress: Progress = lambda _m: None,
        renew_interval: float | None = None) -> dict[int, dict[str, float]]:
    """Each size in a fresh in-process API server; results keyed by node count.
    `renew_interval` defaults to the kubelet's 10 s (smoke tests shorten it)."""
    renew_interval = renew_interval or RENEW_INTERVAL
    out = {}
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="nanokube-nodes-bench-") as d:
            out[n] = asyncio.run(_run(n, steady_s, progress, renew_interval, d))
    return out


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def format_table(results: dict[int, dict[str, float]]) -> str:
    """Rows are metrics, columns cluster sizes."""
    head = ["metric", *(f"{n} nodes" for n in results)]
    rows = [head] + [[m, *(_fmt(r[m]) for r in results.values())] for m in METRICS]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)) for row in rows]
    lines.insert(1, "-+-".join("-" * wd for wd in widths))
    return "\n".join(lines)
