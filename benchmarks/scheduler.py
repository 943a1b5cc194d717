"""Scheduler throughput in the shape of upstream scheduler_perf.

One event loop holds an in-process API server (memory store, watch cache,
generic REST with admission; no sockets), the scheduler with its default
profile and, for DRA, the ResourceClaim controller. Nodes are plain Node
objects with `status.allocatable`, like scheduler_perf's fake nodes; no node
agent runs. Each workload creates its nodes, schedules its init pods, then
creates the measured pods as fast as the client can while the scheduler's
pod informer records when each one gets `spec.nodeName` (shared, as upstream's
throughput collector shares it). Throughput is sampled once a second, and
the headline number is the average of those samples, as upstream reports it.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import orjson

from nanokube import gcsettle
from nanokube.apiserver.admission import Admission
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.apiserver.loopback import LocalClient
from nanokube.client.informer import InformerFactory
from nanokube.client.ratelimit import limited
from nanokube.clock import REAL, Clock
from nanokube.controllers.resourceclaim import ResourceClaimController
from nanokube.registry.base import all_resources
from nanokube.scheduler.scheduler import Scheduler
from nanokube.store.memory import MemoryStore

from .api import _bounded, percentile

NS = "default"
ZONE = "topology.kubernetes.io/zone"
DRIVER = "bench.example.com"
DRA = "resource.k8s.io"
GANG_SIZE = 8
TAINT = {"key": "bench.example.com/maintenance", "value": "true", "effect": "NoSchedule"}

#: column headings for METRICS in the table
HEADINGS = ("pods/s avg(1s)", "pods/s p50(1s)", "pods/s e2e", "lat avg ms", "lat p50 ms", "lat p99 ms",
            "ms/unsched try", "CPU-s")

METRICS = (
    "throughput avg of 1-s samples (pods/s)",
    "throughput p50 of 1-s samples (pods/s)",
    "end-to-end (pods/s)",
    "latency avg (ms)",
    "latency p50 (ms)",
    "latency p99 (ms)",
    "scheduler time per unschedulable attempt (ms)",
    "CPU-seconds of the measured phase",
)
#: the nodeSelector of SchedulingWhileUnschedulable's pods that fit nowhere
NOWHERE = {"bench.example.com/pool": "none"}
#: upstream's Unschedulable workload: a pod-high-priority-large-cpu.yaml pod (priority 10, 9 CPU,
#: more than any node has, so every attempt runs preemption) is created every 200 ms while the
#: measured pods are created as fast as they can be
CHURN_INTERVAL_S = 0.2
HIGH_PRIORITY = "bench-high"
#: SchedulingWithNodeStatusUpdates: a node's status report (a new Ready heartbeat time) every 50 ms,
#: one node after another, while the measured pods are created: 20 a second, what 5000 kubelets
#: posting every nodeStatusReportFrequency (5 minutes) send, an unchanged status included
HEARTBEAT_INTERVAL_S = 0.05

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Workload:
    """One scheduler_perf-like test case; `kind` picks nodes and pod shapes."""

    name: str
    kind: str
    nodes: int
    init_pods: int
    pods: int
    #: upstream's CI floor for its full-size shape (pods/s); None where upstream has none
    floor: float | None
    devices_per_node: int = 0


def upstream_workloads() -> list[Workload]:
    """scheduler_perf's own sizes: SchedulingBasic/5000Nodes_10000Pods and
    SchedulingWithResourceClaimTemplate/5000pods_500nodes (upstream's gang
    cases use 3-pod gangs and have no floor; ours keep 8-pod gangs)."""
    return [
        Workload("SchedulingBasic", "basic", 5000, 1000, 10000, 680),
        Workload("SchedulingNodeAffinity", "affinity", 5000, 1000, 10000, None),
        Workload("SchedulingWhileUnschedulable", "unschedulable", 5000, 1000, 10000, None),
        Workload("SchedulingWithNodeStatusUpdates", "heartbeats", 5000, 1000, 10000, None),
        Workload("Unschedulable", "churn", 5000, 100, 10000, 590),
        Workload("GangScheduling", "gang", 5000, 0, 10000, None),
        Workload("SchedulingWithResourceClaimTemplate", "dra", 500, 2500, 2500, 40, devices_per_node=10),
        Workload("SchedulingWithResourceClaimTemplateToleration", "dra-taints", 500, 2500, 2500, 40,
                 devices_per_node=10),
        Workload("SchedulingWithResourceClaimTemplateNVIDIA", "dra-nvidia", 500, 2500, 2500, None,
                 devices_per_node=10),
        Workload("SchedulingWithResourceClaimTemplateNVIDIAMIG", "dra-nvidia-mig", 500, 2500, 2500, None,
                 devices_per_node=7),
    ]


def default_workloads(scale: float = 1.0) -> list[Workload]:
    """Sized to finish in about a minute each on a 2-core machine, times `scale`."""
    base = [
        Workload("SchedulingBasic", "basic", 500, 500, 1000, 680),
        Workload("SchedulingNodeAffinity", "affinity", 500, 500, 1000, None),
        Workload("SchedulingWhileUnschedulable", "unschedulable", 500, 500, 1000, None),
        Workload("SchedulingWithNodeStatusUpdates", "heartbeats", 500, 500, 1000, None),
        Workload("Unschedulable", "churn", 500, 10, 1000, None),
        Workload("GangScheduling", "gang", 500, 0, 1000, None),
        Workload("SchedulingWithResourceClaimTemplate", "dra", 100, 500, 500, 40, devices_per_node=10),
        Workload("SchedulingWithResourceClaimTemplateToleration", "dra-taints", 100, 500, 500, 40,
                 devices_per_node=10),
        Workload("SchedulingWithResourceClaimTemplateNVIDIA", "dra-nvidia", 100, 500, 500, None, devices_per_node=10),
        Workload("SchedulingWithResourceClaimTemplateNVIDIAMIG", "dra-nvidia-mig", 100, 500, 500, None,
                 devices_per_node=7),
    ]
    return [_scaled(w, scale) for w in base]


def _scaled(w: Workload, scale: float) -> Workload:
    """Gangs stay whole, and DRA workloads keep a device for every pod."""
    init, pods = round(w.init_pods * scale), max(1, round(w.pods * scale))
    if w.kind == "gang":
        pods = max(GANG_SIZE, pods // GANG_SIZE * GANG_SIZE)
    nodes = max(1, round(w.nodes * scale))
    if w.devices_per_node:
        nodes = max(nodes, -(-(init + pods) // w.devices_per_node))
    return replace(w, nodes=nodes, init_pods=init, pods=pods)


def node_manifest(w: Workload, i: int) -> dict:
    """node-default.yaml: 4 CPU, 32Gi, 110 pods; affinity nodes alternate between two zones."""
    alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": f"node-{i}"}
    if w.kind == "affinity":
        labels[ZONE] = f"zone{i % 2 + 1}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": labels},
            "status": {"allocatable": alloc, "capacity": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_manifest(w: Workload, name: str, index: int, nowhere: bool = False) -> dict:
    """pod-default.yaml (pause, 100m/500Mi); gang pods use 100m/100Mi like upstream's gang template;
    `nowhere`: a nodeSelector no node matches (SchedulingWhileUnschedulable's pending queue)."""
    memory = "100Mi" if w.kind == "gang" else "500Mi"
    res = {"cpu": "100m", "memory": memory}
    container = {"name": "pause", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": res, "limits": res}}
    spec: dict = {"containers": [container]}
    if nowhere:
        spec["nodeSelector"] = NOWHERE
    if w.kind == "affinity":
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone1"]}]}]}}}
    elif w.kind == "gang":
        spec["schedulingGroup"] = {"podGroupName": f"gang-{index // GANG_SIZE}"}
    elif w.kind.startswith("dra"):
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": "bench-template"}]
        container["resources"]["claims"] = [{"name": "dev"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def large_cpu_pod(name: str) -> dict:
    """pod-high-priority-large-cpu.yaml; the priority comes from a PriorityClass, as admission
    wants it (upstream's harness switches the Priority admission plugin off and sets it inline)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"priorityClassName": HIGH_PRIORITY, "containers": [{
                "name": "pause", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": "9", "memory": "500Mi"}}}]}}


async def _churn(client: LocalClient) -> None:
    """Upstream's churn op in create mode: one large-CPU pod per interval until cancelled
    (the first at once, so even a run shorter than an interval has one)."""
    pods = client.resource("", "v1", "pods")
    for i in itertools.count():
        await pods.create(large_cpu_pod(f"churn-{i}"))
        await asyncio.sleep(CHURN_INTERVAL_S)


async def _heartbeats(client: LocalClient, w: Workload) -> None:
    """Node status reports until cancelled: each a nodes/status patch of one node's Ready
    condition with a later lastHeartbeatTime (what a kubelet posts when nothing else changed)."""
    nodes = client.resource("", "v1", "nodes")
    for i in itertools.count():
        beat = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_767_225_600 + i))
        ready = {"type": "Ready", "status": "True", "lastHeartbeatTime": beat}
        await nodes.patch(f"node-{i % w.nodes}", {"status": {"conditions": [ready]}},
                          "application/strategic-merge-patch+json", subresource="status")
        await asyncio.sleep(HEARTBEAT_INTERVAL_S)


def _nvidia_slices(w: Workload, i: int) -> list[dict]:
    """What the NVIDIA personality publishes for a node: `devices_per_node`
    H100s, or for the MIG workload one MIG-capable A100-40GB (seven 1g.5gb fit)."""
    from nanokube.node.cluster import parse_cluster
    from nanokube.node.dra.nvidia import NVIDIA_DRIVER, gpu_entries

    mig = w.kind == "dra-nvidia-mig"
    gpus = "{driver: nvidia, model: A100-SXM4-40GB, count: 1, mig: true}" if mig else \
        f"{{driver: nvidia, model: H100-SXM5-80GB, count: {w.devices_per_node}}}"
    [node] = parse_cluster(f"pools: [{{name: n, count: 1, capacity: {{cpu: '4', memory: 32Gi}}, gpus: {gpus}}}]").nodes()
    devices, counters = gpu_entries(node.devices)
    bodies = ([{"sharedCounters": counters}] if counters else []) + [{"devices": devices}]
    pool = {"name": f"node-{i}", "generation": 1, "resourceSliceCount": len(bodies)}
    return [{"apiVersion": f"{DRA}/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-{i}-{NVIDIA_DRIVER}-{j}"},
             "spec": {"driver": NVIDIA_DRIVER, "nodeName": f"node-{i}", "pool": pool, **b}} for j, b in enumerate(bodies)]


def _resource_slice(w: Workload, i: int) -> dict:
    devices = [{"name": f"dev-{d}", "attributes": {"index": {"int": d}}} for d in range(w.devices_per_node)]
    if w.kind == "dra-taints":
        for d in devices:
            d["taints"] = [TAINT]
    return {"apiVersion": f"{DRA}/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-{i}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": f"node-{i}",
                     "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def _claim_template(w: Workload) -> dict:
    exactly: dict = {"deviceClassName": "bench-class"}
    if w.kind == "dra-nvidia":
        exactly = {"deviceClassName": "gpu.nvidia.com"}
    elif w.kind == "dra-nvidia-mig":
        exactly = {"deviceClassName": "mig.nvidia.com", "selectors": [
            {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]}
    if w.kind == "dra-taints":
        exactly["tolerations"] = [{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": f"{DRA}/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "bench-template", "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}}}}


class _Stack:
    """The in-process API server; `client` talks to it without sockets."""

    async def start(self) -> LocalClient:
        self.store = MemoryStore()
        self.cache = WatchCache(self.store, window=200_000)
        rest = GenericREST(self.store, self.cache, ResourceIndex(all_resources()), Clock())
        rest.admission = Admission(rest)
        # no serviceaccount nor node lifecycle controller runs here: scheduler_perf's API server
        # disables both plugins too
        rest.admission.disable("ServiceAccount", "TaintNodesByCondition")
        await self.store.start()
        await self.cache.start()
        self.client = LocalClient(rest)
        await self.client.resource("", "v1", "namespaces").create({"metadata": {"name": NS}})
        # the collector's settings `nanokube up` runs with once started (one full collection
        # over the whole heap every few thousand writes otherwise)
        gcsettle.settle()
        return self.client

    async def close(self) -> None:
        await self.cache.stop()
        await self.store.close()


class _BindTracker:
    """Records when each pod is first seen bound by the scheduler's pod informer (`share`)."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.placed: dict[str, str] = {}  # pod name -> node
        self.order: list[str] = []  # names in the order they were seen bound
        self.changed = asyncio.Event()

    def seen(self, obj: dict) -> None:
        if (obj.get("spec") or {}).get("nodeName"):
            name = obj["metadata"]["name"]
            if name not in self.bound:
                self.bound[name] = time.perf_counter()
                self.placed[name] = obj["spec"]["nodeName"]
                self.order.append(name)
                self.changed.set()

    def share(self, informer) -> None:
        """Follows the scheduler's own pod informer, as upstream's throughputCollector shares
        the scheduler's: a watch of its own would cost the process a second delivery of
        every pod event, the pods that fit nowhere included."""
        informer.add_handlers(self.seen, lambda _old, new: self.seen(new))

    async def wait_for(self, names: list[str], timeout_s: float) -> None:
        """Until every one of `names` is bound; the unbound ones are kept and
        only they are looked at on each wake (the harness runs in the same
        process as the scheduler, so checking all names per bind cost it CPU)."""
        deadline = time.perf_counter() + timeout_s
        unbound = {n for n in names if n not in self.bound}
        seen = len(self.order)
        while unbound:
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{len(unbound)} of {len(names)} pods still unbound after {timeout_s:.0f}s")
            await asyncio.wait_for(self.changed.wait(), left)
            unbound.difference_update(self.order[seen:])
            seen = len(self.order)


async def _sample(tracker: _BindTracker, names: list[str], samples: list[float]) -> None:
    """Upstream's throughputCollector: once a second, the measured pods bound since the last
    sample over the time since it. The first tick that sees one bound only starts the clock
    (sampling and creating start independently, so its interval is partial), and a tick that
    sees none new is folded into the next sample, which is then recorded once per second it
    spans."""
    wanted = set(names)
    last_t = 0.0
    n = seen = last_n = skipped = 0
    started = False
    while True:
        await asyncio.sleep(1.0)
        now = time.perf_counter()
        # only the binds since the last tick are looked at: the sampler shares the scheduler's core
        n += sum(1 for name in tracker.order[seen:] if name in wanted)
        seen = len(tracker.order)
        if n == 0:
            continue
        if not started:
            started = True
            last_t, last_n = now, n
            continue
        if n == last_n:
            skipped += 1
            continue
        samples.extend([(n - last_n) / (now - last_t)] * (skipped + 1))
        last_t, last_n, skipped = now, n, 0


async def _setup(client, w: Workload, concurrency: int = 1) -> None:
    """The workload's nodes (`concurrency` at a time) and what its pods need."""
    if w.kind == "churn":
        await client.resource("scheduling.k8s.io", "v1", "priorityclasses").create({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": HIGH_PRIORITY},
            "value": 10})
    nodes = client.resource("", "v1", "nodes")

    async def node(i: int) -> None:
        n = node_manifest(w, i)
        created = await nodes.create(n)
        await nodes.update({**created, "status": n["status"]}, subresource="status")

    await _bounded(w.nodes, concurrency, node)
    if w.kind.startswith("dra"):
        from nanokube.node.dra.nvidia import DEVICE_CLASSES

        classes = {"bench-class": f"device.driver == '{DRIVER}'", **DEVICE_CLASSES}
        for name, expression in classes.items():
            await client.resource(DRA, "v1", "deviceclasses").create({
                "apiVersion": f"{DRA}/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}})
        slices = client.resource(DRA, "v1", "resourceslices")
        for i in range(w.nodes):
            for s in _nvidia_slices(w, i) if w.kind.startswith("dra-nvidia") else [_resource_slice(w, i)]:
                await slices.create(s)
        await client.resource(DRA, "v1", "resourceclaimtemplates").create(_claim_template(w))


async def _create_pods(client, w: Workload, prefix: str, count: int, tracker: _BindTracker,
                       concurrency: int = 1) -> list[str]:
    """One after another (the in-process server), or `concurrency` at a time as scheduler_perf's
    createPods op sends them (30 workers, test/utils CreatePod) over HTTPS; each measured pod of
    SchedulingWhileUnschedulable is followed by its stuck pod."""
    pods = client.resource("", "v1", "pods")
    groups = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")

    async def one(i: int) -> None:
        if w.kind == "gang" and i % GANG_SIZE == 0:
            await groups.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                 "metadata": {"name": f"gang-{i // GANG_SIZE}", "namespace": NS},
                                 "spec": {"schedulingPolicy": {"gang": {"minCount": GANG_SIZE}}}})
        name = f"{prefix}-{i}"
        await pods.create(pod_manifest(w, name, i))
        # from the create's answer, as a request's own turn (the loopback client yields first) is no
        # part of the pod's wait; the bind needs later turns, so it is never seen before this stamp
        tracker.created[name] = time.perf_counter()
        if w.kind == "unschedulable" and prefix == "pod":
            await pods.create(pod_manifest(w, f"stuck-{i}", i, nowhere=True))

    if concurrency > 1:
        await _bounded(count, concurrency, one)
    else:
        for i in range(count):
            await one(i)
    return [f"{prefix}-{i}" for i in range(count)]


#: scheduler_perf's client QPS and burst (test/integration/scheduler_perf mustSetupCluster)
SCHEDULER_PERF_QPS = 5000


async def _run(w: Workload, timeout_s: float, progress: Progress) -> dict:
    stack = _Stack()
    client = await stack.start()
    # one informer factory for the scheduler and the ResourceClaim controller, as scheduler_perf's
    # mustSetupCluster hands the scheduler's to the controllers it runs (a second pod and claim
    # watch would cost every pod three more event deliveries and every claim three)
    informers = InformerFactory()
    # scheduler_perf's mustSetupCluster gives the scheduler's client QPS 5000 / burst 5000, not the
    # component's clientConnection default (50 / 100): the rows measure the scheduler, not that limit
    sched = Scheduler(limited(client, SCHEDULER_PERF_QPS, SCHEDULER_PERF_QPS, REAL), seed=1, informers=informers)
    ctrl = ResourceClaimController(client, informers=informers) if w.kind.startswith("dra") else None
    tracker = _BindTracker()
    tracker.share(sched.pods)
    try:
        await _setup(client, w)
        await sched.start()
        if ctrl:
            await ctrl.start()
        progress(f"{w.name}: {w.nodes} nodes ready; {w.init_pods} init pods")
        init = await _create_pods(client, w, "init", w.init_pods, tracker)
        await tracker.wait_for(init, timeout_s)
        progress(f"{w.name}: {w.pods} measured pods")
        samples: list[float] = []
        sampler = asyncio.create_task(_sample(tracker, [f"pod-{i}" for i in range(w.pods)], samples))
        t0, cpu0 = time.perf_counter(), time.process_time()
        background = asyncio.create_task(_churn(client)) if w.kind == "churn" else \
            asyncio.create_task(_heartbeats(client, w)) if w.kind == "heartbeats" else None
        names = await _create_pods(client, w, "pod", w.pods, tracker)
        await tracker.wait_for(names, timeout_s)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        sampler.cancel()
        if background:
            background.cancel()
    finally:
        if ctrl:
            await ctrl.stop()
        await sched.stop()
        await informers.stop()
        await stack.close()
    registry, labels = sched.metrics.registry, UNSCHEDULABLE
    tries = registry.get_sample_value(ATTEMPTS + "_count", labels) or 0
    spent = registry.get_sample_value(ATTEMPTS + "_sum", labels) or 0.0
    return results(w, tracker, names, samples, elapsed, (tries, spent), cpu)


#: the scheduler's attempt histogram, and the labels of its unschedulable attempts
ATTEMPTS = "scheduler_scheduling_attempt_duration_seconds"
UNSCHEDULABLE = {"result": "unschedulable", "profile": "default-scheduler"}


def results(w: Workload, tracker: _BindTracker, names: list[str], samples: list[float], elapsed: float,
            unschedulable: tuple[float, float], cpu: float) -> dict:
    """METRICS and the placement hash from a measured phase; `unschedulable`: the count and the sum
    (s) of the scheduler's unschedulable attempts."""
    tries, spent = unschedulable
    if wrong := misplaced(w, tracker.placed):
        raise RuntimeError(f"{w.name}: {len(wrong)} pods placed where they cannot be: {', '.join(wrong[:5])}")
    # The last partial second has no full sample; a run shorter than a second is one sample over its length.
    samples = samples or [w.pods / elapsed]
    latency = [(tracker.bound[n] - tracker.created[n]) * 1000 for n in names]
    return dict(zip(METRICS, (
        sum(samples) / len(samples),
        percentile(samples, 0.5),
        w.pods / elapsed,
        sum(latency) / len(latency),
        percentile(latency, 0.5),
        percentile(latency, 0.99),
        spent / tries * 1000 if tries else float("nan"),
        cpu,
    ))) | {"placement hash": _placement_hash(tracker.placed)}


def misplaced(w: Workload, placed: dict[str, str]) -> list[str]:
    """What no correct placement has: a pod that fits nowhere (a stuck or churn pod) bound, a node
    with more pods than its 4 CPU hold (every shape asks 100m) or, for DRA, than it has devices,
    an affinity pod outside zone1 (the even nodes)."""
    wrong = [f"{pod} on {node}" for pod, node in placed.items() if not pod.startswith(("init-", "pod-"))
             or (w.kind == "affinity" and int(node.removeprefix("node-")) % 2)]
    most = min(40, w.devices_per_node or 40)
    return wrong + [f"{node} holds {n} pods" for node, n in Counter(placed.values()).items() if n > most]


def _placement_hash(placed: dict[str, str]) -> str:
    """Which node each pod got, as one short digest: a change must leave it as it was
    (the scheduler's ties are broken by its seeded random source; run with PYTHONHASHSEED=0)."""
    return hashlib.sha256(orjson.dumps(sorted(placed.items()))).hexdigest()[:16]


def run(workloads: list[Workload], progress: Progress = lambda _m: None,
        timeout_s: float = 900.0) -> dict[str, dict]:
    """Runs each workload in a fresh in-process API server and scheduler; results keyed by workload name."""
    return {w.name: asyncio.run(_run(w, timeout_s, progress)) for w in workloads}


def _fmt(v: float) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    if v != v:  # NaN: the workload has no such measure
        return "—"
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}" if v < 1 else f"{v:.1f}"


def format_table(workloads: list[Workload], results: dict[str, dict], extra: dict[str, str] | None = None) -> str:
    """One row per workload: its size, our numbers, and upstream's CI floor for its full-size shape;
    `extra`: more columns, heading -> metric."""
    extra = extra or {}
    head = ["workload", "nodes", "init", "pods", *HEADINGS, *extra, "upstream floor", "placements"]
    rows = [head]
    for w in workloads:
        r = results[w.name]
        rows.append([w.name, str(w.nodes), str(w.init_pods), str(w.pods),
                     *(_fmt(r[m]) for m in (*METRICS, *extra.values())),
                     "—" if w.floor is None else _fmt(w.floor), r["placement hash"]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)) for row in rows]
    lines.insert(1, "-+-".join("-" * wd for wd in widths))
    return "\n".join(lines)
