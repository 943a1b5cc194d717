"""Gang scheduling throughput in the shape of upstream scheduler_perf.

Same harness as benchmarks/scheduler.py (one event loop, in-process API
server on a memory store, the scheduler with its default profile, fake
nodes without node agents), three workloads:

- GangScheduling: scheduler_perf's `5000Nodes_1000Gangs_3000Pods` (3-pod
  gangs, 100m/100Mi pods), scaled to 500 nodes / 300 gangs by default.
- SingleGang1024: one 1024-pod gang; how long until every member is bound.
- WorkloadPreemption: 100 nodes filled by low-priority `disruptionMode: all`
  gangs; high-priority gangs arrive and each evicts whole groups to run.

Reported: pods/s (average of 1-s samples and end-to-end) and time to all
bound, plus our own SchedulingBasic run as the reference the gang numbers
should stay at >= 50% of (upstream sets no floor for gangs).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from nanokube.scheduler.scheduler import Scheduler

from . import scheduler as basic
from .scheduler import NS, Progress, Workload, _BindTracker, _sample, _Stack

GROUPS = ("scheduling.k8s.io", "v1beta1", "podgroups")
#: node-default.yaml shape for every workload here
NODE_SHAPE = Workload("nodes", "basic", 0, 0, 0, None)

HEADINGS = ("pods/s avg(1s)", "pods/s e2e", "all bound s", "CPU-s", "e2e vs basic")
#: CPU-s: the process's CPU time from the first measured create to the last bind (the shared
#: machine's load moves it far less than the wall-clock rates)
METRICS = ("throughput avg of 1-s samples (pods/s)", "end-to-end (pods/s)", "time to all bound (s)",
           "CPU-seconds of the measured phase")


@dataclass(frozen=True)
class GangWorkload:
    """`gangs` x `gang_size` measured pods on `nodes`; for preemption,
    `fill_gangs` low-priority `all` gangs of `gang_size` 1-CPU pods first."""

    name: str
    kind: str  # gangs | single | preemption
    nodes: int
    gangs: int
    gang_size: int
    fill_gangs: int = 0

    @property
    def pods(self) -> int:
        return self.gangs * self.gang_size


def default_workloads() -> list[GangWorkload]:
    """Sized to run in well under two minutes together on a 2-core machine."""
    return [
        GangWorkload("GangScheduling", "gangs", 500, 300, 3),
        GangWorkload("SingleGang1024", "single", 500, 1, 1024),
        GangWorkload("WorkloadPreemption", "preemption", 100, 10, 8, fill_gangs=50),
    ]


def upstream_workloads() -> list[GangWorkload]:
    """scheduler_perf's GangScheduling/5000Nodes_1000Gangs_3000Pods; the
    single gang on the same 5000 nodes; preemption stays at 100 nodes."""
    return [
        GangWorkload("GangScheduling", "gangs", 5000, 1000, 3),
        GangWorkload("SingleGang1024", "single", 5000, 1, 1024),
        GangWorkload("WorkloadPreemption", "preemption", 100, 10, 8, fill_gangs=50),
    ]


def toy_workloads() -> list[GangWorkload]:
    """For the smoke test."""
    return [
        GangWorkload("GangScheduling", "gangs", 10, 6, 3),
        GangWorkload("SingleGang1024", "single", 10, 1, 32),
        GangWorkload("WorkloadPreemption", "preemption", 4, 2, 4, fill_gangs=4),
    ]


def podgroup(name: str, size: int, priority_class: str = "", mode: str = "single") -> dict:
    spec: dict = {"schedulingPolicy": {"gang": {"minCount": size}}, "disruptionMode": {mode: {}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def member(name: str, group: str, cpu: str = "100m", priority_class: str = "") -> dict:
    """upstream's gang pod template (pause, 100m/100Mi); preemption pods ask for a whole CPU."""
    res = {"cpu": cpu, "memory": "100Mi"}
    spec: dict = {"schedulingGroup": {"podGroupName": group}, "terminationGracePeriodSeconds": 0,
                  "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                  "resources": {"requests": res, "limits": res}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


async def _create_gangs(client, prefix: str, count: int, size: int, tracker: _BindTracker, cpu: str = "100m",
                        priority_class: str = "", mode: str = "single") -> list[str]:
    groups, pods = client.resource(*GROUPS), client.resource("", "v1", "pods")
    names = []
    for g in range(count):
        group = f"{prefix}-{g}"
        await groups.create(podgroup(group, size, priority_class, mode))
        for i in range(size):
            name = f"{group}-{i}"
            await pods.create(member(name, group, cpu, priority_class))
            tracker.created[name] = time.perf_counter()  # as benchmarks/scheduler.py's _create_pods
            names.append(name)
    return names


async def _setup(client, w: GangWorkload) -> None:
    nodes = client.resource("", "v1", "nodes")
    for i in range(w.nodes):
        n = basic.node_manifest(NODE_SHAPE, i)
        created = await nodes.create(n)
        await nodes.update({**created, "status": n["status"]}, subresource="status")
    classes = client.resource("scheduling.k8s.io", "v1", "priorityclasses")
    for name, value in (("bench-low", 10), ("bench-high", 1000)):
        await classes.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": name}, "value": value})


async def _evicted_groups(client, fill: list[str], timeout_s: float) -> set[str]:
    """The low-priority groups evicted, once no group is left half-deleted:
    a preemptor may bind on room freed earlier while its own victims'
    deletions are still landing, so the check waits for them to finish."""
    pods = client.resource("", "v1", "pods")
    deadline = time.perf_counter() + timeout_s
    while True:
        items, _ = await pods.list(NS)
        left = {p["metadata"]["name"] for p in items} & set(fill)
        evicted = {n.rsplit("-", 1)[0] for n in set(fill) - left}
        partial = {n.rsplit("-", 1)[0] for n in left} & evicted
        if not partial:
            return evicted
        if time.perf_counter() > deadline:
            raise AssertionError(f"groups evicted in part: {sorted(partial)}")
        await asyncio.sleep(0.05)


async def _run(w: GangWorkload, timeout_s: float, progress: Progress) -> dict[str, float]:
    stack = _Stack()
    client = await stack.start()
    sched = Scheduler(client, seed=1)
    tracker = _BindTracker()
    tracker.share(sched.pods)
    try:
        await _setup(client, w)
        await sched.start()
        cpu, klass = ("1", "bench-high") if w.kind == "preemption" else ("100m", "")
        fill: list[str] = []
        if w.fill_gangs:
            fill = await _create_gangs(client, "low", w.fill_gangs, w.gang_size, tracker, "1", "bench-low", "all")
            await tracker.wait_for(fill, timeout_s)
        progress(f"{w.name}: {w.nodes} nodes ready; {w.pods} measured pods in {w.gangs} gang(s) of {w.gang_size}")
        samples: list[float] = []
        wanted = [f"gang-{g}-{i}" for g in range(w.gangs) for i in range(w.gang_size)]
        sampler = asyncio.create_task(_sample(tracker, wanted, samples))
        t0, cpu0 = time.perf_counter(), time.process_time()
        names = await _create_gangs(client, "gang", w.gangs, w.gang_size, tracker, cpu, klass)
        await tracker.wait_for(names, timeout_s)
        elapsed, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
        sampler.cancel()
        if w.kind == "preemption":
            evicted = await _evicted_groups(client, fill, timeout_s=10.0)
            progress(f"{w.name}: {len(evicted)} whole low-priority gang(s) evicted")
    finally:
        await sched.stop()
        await stack.close()
    samples = samples or [w.pods / elapsed]
    return dict(zip(METRICS, (sum(samples) / len(samples), w.pods / elapsed, elapsed, cpu_s)))


def run(workloads: list[GangWorkload], progress: Progress = lambda _m: None,
        timeout_s: float = 900.0) -> dict[str, dict[str, float]]:
    """Each workload in a fresh in-process API server and scheduler; results keyed by name."""
    return {w.name: asyncio.run(_run(w, timeout_s, progress)) for w in workloads}


def run_reference(progress: Progress = lambda _m: None, upstream: bool = False) -> dict[str, float]:
    """Our SchedulingBasic, the yardstick for the gang numbers: at its
    default size, or at scheduler_perf's (5000 nodes) next to full-size gangs."""
    workloads = basic.upstream_workloads() if upstream else basic.default_workloads()
    [w] = [w for w in workloads if w.name == "SchedulingBasic"]
    return basic.run([w], progress)[w.name]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def format_table(workloads: list[GangWorkload], results: dict[str, dict[str, float]],
                 reference: dict[str, float] | None = None) -> str:
    """One row per workload; `vs basic` is its end-to-end pods/s over
    SchedulingBasic's (a single gang binds all at once, so its 1-s samples
    say little)."""
    head = ["workload", "nodes", "gangs", "size", *HEADINGS]
    rows = [head]
    base = reference["end-to-end (pods/s)"] if reference else 0.0
    for w in workloads:
        r = results[w.name]
        ratio = f"{100 * r[METRICS[1]] / base:.0f}%" if base else "—"
        rows.append([w.name, str(w.nodes), str(w.gangs), str(w.gang_size), *(_fmt(r[m]) for m in METRICS), ratio])
    if reference:
        rows.append(["SchedulingBasic (reference)", "", "", "",
                     _fmt(reference["throughput avg of 1-s samples (pods/s)"]), _fmt(base), "", "", "100%"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)) for row in rows]
    lines.insert(1, "-+-".join("-" * wd for wd in widths))
    return "\n".join(lines)


def report(names: str, upstream: bool, progress: Progress = lambda _m: None) -> str:
    """`python -m benchmarks --gang [NAMES]`: the chosen workloads (comma-separated, or `all`) and the reference."""
    workloads = upstream_workloads() if upstream else default_workloads()
    if names != "all":
        wanted = set(names.split(","))
        workloads = [w for w in workloads if w.name in wanted]
        if not workloads:
            raise ValueError(f"choose from {', '.join(w.name for w in default_workloads())}")
    results = run(workloads, progress)
    return format_table(workloads, results, run_reference(progress, upstream))
