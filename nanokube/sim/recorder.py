"""What a run measured, from the API's point of view: every pod's arrival,
binding, node, start (first seen Running) and end (and whether it was evicted), GPU allocation and
fragmentation over time and over arrived workload, the pending queue,
scheduling delay and gang wait."""

from __future__ import annotations

from ..machinery.quantity import parse_quantity
from ..node.cluster import Cluster
from ..scheduler.plugins.gpu_fragmentation import WHOLE, FragmentationModel
from .trace import Trace

#: the GPU driver whose devices count as GPUs
GPU_DRIVERS = ("gpu.nanokube.io", "gpu.nvidia.com")
EVICTION_REASONS = ("DeletionByDeviceTaintManager", "DeletionByTaintManager", "PreemptionByScheduler",
                    "EvictionByEvictionAPI", "TerminationByKubelet")


class Recorder:
    def __init__(self, clock, trace: Trace, cluster: Cluster):
        self.clock = clock
        self.trace = trace
        self.t0 = clock.now()
        self.gpus = {n.name: [d.name for d in n.devices if d.kind == "gpu"] for n in cluster.nodes()}
        self.total_gpu = sum(len(v) for v in self.gpus.values()) * WHOLE
        self.model = FragmentationModel(trace.task_sizes or [((1, WHOLE, 0), 1.0)])
        #: per node: millicores allocatable, and requested by the pods bound there
        self.cpu = {n.name: int(parse_quantity(n.allocatable.get("cpu", "0")) * 1000) for n in cluster.nodes()}
        self.cpu_used: dict[str, int] = {}
        self._pod_cpu: dict[str, int] = {}
        #: per node: device -> thousandths allocated
        self.used: dict[str, dict[str, int]] = {}
        self.frag: dict[str, float] = {}
        self.frag_total = 0.0
        self._claim_results: dict[str, list[tuple[str, str, int]]] = {}
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.placements: dict[str, str] = {}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.evicted: dict[str, str] = {}
        #: the scheduler's last word on a pod before any node took it (its PodScheduled condition's message)
        self.why: dict[str, str] = {}
        self.groups: dict[str, list[str]] = {}
        #: GPU thousandths the claims' allocations hold
        self.allocated = 0
        self.arrived = 0
        self.pending: set[str] = set()
        #: when a pod last changed (arrived, was bound, started or ended), in seconds from the start
        self.changed = 0.0
        self._running = 0
        self.series: list[tuple] = []  # (t, gpu alloc ratio, frag ratio, pending)
        self.by_arrival: list[tuple] = []  # (arrived ratio, gpu alloc ratio, frag ratio, frag rate)
        self._next_pct = 0.0

    def _t(self) -> float:
        return self.clock.now() - self.t0

    def _sample(self) -> None:
        t = self._t()
        point = (round(t, 3), self.allocated / self.total_gpu if self.total_gpu else 0.0,
                 self.frag_total / self.total_gpu if self.total_gpu else 0.0, len(self.pending))
        if self.series and self.series[-1][0] == point[0]:
            self.series[-1] = point
        else:
            self.series.append(point)

    # --- pods ---------------------------------------------------------------------------

    def watch_pods(self, informer) -> None:
        informer.add_handlers(on_add=self._pod, on_update=lambda _o, n: self._pod(n), on_delete=self._pod_gone)

    def _key(self, pod: dict) -> str:
        md = pod["metadata"]
        return f"{md['namespace']}/{md['name']}"

    def running(self) -> int:
        """Pods bound and not ended."""
        return self._running

    def drained(self) -> bool:
        """Every pod that arrived has ended."""
        return len(self.ended) == len(self.created)

    def _pod(self, pod: dict) -> None:
        self.changed = self._t()
        k = self._key(pod)
        if k not in self.created:
            self.created[k] = self._t()
            self.pending.add(k)
            group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
            if group:
                self.groups.setdefault(f"{pod['metadata']['namespace']}/{group}", []).append(k)
            self.arrived += self.trace.gpu_milli.get(k, 0)
            self._sample()
            self._arrival()
        node = (pod.get("spec") or {}).get("nodeName")
        status = pod.get("status") or {}
        if not node and k not in self.bound:
            for c in status.get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                    self.why[k] = c["message"]
        if node and k not in self.bound:
            self.bound[k] = self._t()
            self.placements[k] = node
            self._running += 1
            self.pending.discard(k)
            self._pod_cpu[k] = _cpu_request(pod)
            self.cpu_used[node] = self.cpu_used.get(node, 0) + self._pod_cpu[k]
            self._refrag(node)
            self._sample()
        if k not in self.started and status.get("phase") == "Running":
            self.started[k] = self._t()
        if k not in self.evicted:
            for c in status.get("conditions") or []:
                if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
                    self.evicted[k] = c.get("reason") or "DisruptionTarget"
            if status.get("reason") == "Evicted" or status.get("reason") in EVICTION_REASONS:
                self.evicted.setdefault(k, status["reason"])
        if status.get("phase") in ("Succeeded", "Failed") and k not in self.ended:
            self._end(k)

    def _end(self, k: str) -> None:
        self.ended[k] = self._t()
        self.pending.discard(k)
        if k in self.bound:
            self._running -= 1
            node = self.placements[k]
            self.cpu_used[node] -= self._pod_cpu.get(k, 0)
            self._refrag(node)
        self._sample()

    def _pod_gone(self, pod: dict) -> None:
        self.changed = self._t()
        k = self._key(pod)
        if k not in self.ended:
            self._end(k)

    def _arrival(self) -> None:
        """GPU allocation and fragmentation at every 1% of arrived GPU workload (the paper's x axis):
        fragmentation both of all GPU capacity and of the unallocated ("frag rate", the paper's
        other curve: how much of what is free the trace's tasks cannot use)."""
        if not self.total_gpu:
            return
        arrived = self.arrived / self.total_gpu
        free = self.total_gpu - self.allocated
        while arrived >= self._next_pct - 1e-9:
            self.by_arrival.append((round(self._next_pct, 4), self.allocated / self.total_gpu,
                                    self.frag_total / self.total_gpu, self.frag_total / free if free > 0 else 0.0))
            self._next_pct += 0.01

    # --- claims: which GPU shares are taken, for allocation and fragmentation ------------

    def watch_claims(self, informer) -> None:
        informer.add_handlers(on_add=self._claim, on_update=lambda _o, n: self._claim(n),
                              on_delete=lambda c: self._claim(c, gone=True))

    def _claim(self, claim: dict, gone: bool = False) -> None:
        k = self._key(claim)
        results = [] if gone else [
            (r.get("pool", ""), r.get("device", ""), _milli(r))
            for r in ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
            if r.get("driver") in GPU_DRIVERS]
        old = self._claim_results.get(k, [])
        if results == old:
            return
        # what the GPUs hold, however the pod asked (a Job's template, a claim of its own, an extended
        # resource): a trace's own count knows only the pods it creates, so a Job's GPUs read 0%
        self.allocated += sum(r[2] for r in results) - sum(r[2] for r in old)
        touched = set()
        for node, dev, m in old:
            self.used.setdefault(node, {})[dev] = self.used.get(node, {}).get(dev, 0) - m
            touched.add(node)
        for node, dev, m in results:
            self.used.setdefault(node, {})[dev] = self.used.get(node, {}).get(dev, 0) + m
            touched.add(node)
        if results:
            self._claim_results[k] = results
        else:
            self._claim_results.pop(k, None)
        for node in touched:
            self._refrag(node)
        self._sample()

    def _refrag(self, node: str) -> None:
        used = self.used.get(node, {})
        free = [WHOLE - used.get(d, 0) for d in self.gpus.get(node, [])]
        f = self.model.node(free, self.cpu.get(node, 0) - self.cpu_used.get(node, 0))
        self.frag_total += f - self.frag.get(node, 0.0)
        self.frag[node] = f

    def start(self) -> None:
        for node in self.gpus:
            self._refrag(node)
        self._sample()

    # --- the run's numbers ---------------------------------------------------------------

    def summary(self) -> dict:
        delays = sorted(self.bound[k] - self.created[k] for k in self.bound)
        gang = {g: max(self.bound[m] for m in ms) - min(self.created[m] for m in ms)
                for g, ms in self.groups.items() if all(m in self.bound for m in ms)}
        return {
            "pods": len(self.created), "scheduled": len(self.bound), "unscheduled": len(self.created) - len(self.bound),
            "total_gpu_milli": self.total_gpu,
            "series": {"t": [p[0] for p in self.series], "gpu_alloc_ratio": [p[1] for p in self.series],
                       "fragmentation_ratio": [p[2] for p in self.series], "pending": [p[3] for p in self.series]},
            "by_arrival": {"arrived_ratio": [p[0] for p in self.by_arrival],
                           "gpu_alloc_ratio": [p[1] for p in self.by_arrival],
                           "fragmentation_ratio": [p[2] for p in self.by_arrival],
                           "fragmentation_rate": [p[3] for p in self.by_arrival]},
            "scheduling_delay_s": delays,
            "timeline": {k: [self.created[k], self.bound.get(k), self.started.get(k), self.ended.get(k)]
                         for k in sorted(self.created)},
            "gang_wait_s": gang,
            "unschedulable": dict(sorted(self.why.items())),
            "unscheduled_groups": sorted(g for g, ms in self.groups.items() if not all(m in self.bound for m in ms)),
            "evictions": [{"pod": k, "reason": r, "t": self.ended.get(k)} for k, r in sorted(self.evicted.items())],
        }


def _cpu_request(pod: dict) -> int:
    """Millicores the pod's containers request."""
    return sum(int(parse_quantity(str(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))) * 1000)
               for c in (pod.get("spec") or {}).get("containers") or [])


def _milli(result: dict) -> int:
    consumed = (result.get("consumedCapacity") or {}).get("milli")
    return int(parse_quantity(str(consumed))) if consumed is not None else WHOLE
