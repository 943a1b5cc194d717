"""GPU fragmentation as "Beware of Fragmentation" (Weng et al., USENIX ATC'23)
measures it: a node's unallocated GPU compute that a task of the target
workload could not use, weighted by how common that task is.

A task asks for `count` GPUs at `milli` thousandths each and `cpu`
millicores. If the node cannot host it at all (too few GPUs with enough
left, or too little CPU), every free share on the node is fragment;
otherwise a GPU's free share is fragment when it is smaller than what the
task needs of one GPU (a partly used GPU for a whole-GPU task). The
workload is a list of ((count, milli, cpu), popularity).
"""

from __future__ import annotations

from bisect import bisect_right

from ..cache import ShapeMemo
from ..dra.allocator import NodeMemo
from ..resources import CPU

#: a whole GPU, in thousandths
WHOLE = 1000

Workload = list[tuple[tuple[int, int, int], float]]


def task_fragment(free: list[int], count: int, milli: int, cpu: int = 0, cpu_free: float = float("inf")) -> int:
    if cpu > cpu_free:
        return sum(free)
    if milli < WHOLE:
        fits = any(f >= milli for f in free)
        return sum(f for f in free if f < milli) if fits else sum(free)
    fits = sum(1 for f in free if f >= WHOLE) >= count
    return sum(f for f in free if f < WHOLE) if fits else sum(free)


def node_fragmentation(free: list[int], workload: Workload, cpu_free: float = float("inf")) -> float:
    """Expected fragment (GPU thousandths) of a node whose GPUs have `free`
    thousandths left and `cpu_free` millicores (unknown: any task's CPU fits)."""
    return sum(p * task_fragment(free, c, m, cpu, cpu_free) for (c, m, cpu), p in workload)


class FragmentationModel:
    """`node_fragmentation` for one workload, fast: task types are grouped by
    their GPU shape, and per group the weight of the tasks whose CPU would
    not fit is a suffix sum found by bisection. Remembered per GPU state and
    CPU band (free CPU between two consecutive task CPU sizes): every CPU
    amount of a band starves the same tasks, so gives the same value, and
    nodes' free CPU is nearly always a value of its own."""

    def __init__(self, workload: Workload):
        groups: dict[tuple[int, int], list[tuple[int, float]]] = {}
        for (count, milli, cpu), p in workload:
            groups.setdefault((count, milli), []).append((cpu, p))
        self.groups = []
        for (count, milli), tasks in sorted(groups.items()):
            tasks.sort()
            cpus = [c for c, _ in tasks]
            suffix = [0.0] * (len(tasks) + 1)
            for i in range(len(tasks) - 1, -1, -1):
                suffix[i] = suffix[i + 1] + tasks[i][1]
            self.groups.append((count, milli, cpus, suffix))
        #: every task CPU size, sorted: a CPU amount's band is where it bisects this
        self.bands = sorted({cpu for (_, _, cpu), _ in workload})
        self._cache: dict[tuple, float] = {}

    #: node states remembered (many nodes share one: idle, or full)
    CACHE_SIZE = 1 << 16

    def node(self, free: list[int], cpu_free: float = float("inf")) -> float:
        key = (*free, bisect_right(self.bands, cpu_free))
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= self.CACHE_SIZE:
                self._cache.clear()
            hit = self._cache[key] = self._node(free, cpu_free)
        return hit

    def _node(self, free: list[int], cpu_free: float) -> float:
        total = sum(free)
        out = 0.0
        for count, milli, cpus, suffix in self.groups:
            starved = suffix[bisect_right(cpus, cpu_free)]  # tasks asking more CPU than is free
            out += starved * total + (suffix[0] - starved) * task_fragment(free, count, milli)
        return out


def place(free: list[int], count: int, milli: int) -> list[int] | None:
    """`free` after hosting the task on the GPUs that leave the least
    fragmentation behind (the paper's choice within a node): a share goes to
    the fullest GPU it fits on, whole GPUs to free ones; None if it cannot."""
    if milli < WHOLE:
        fits = [i for i, f in enumerate(free) if f >= milli]
        if not fits:
            return None
        i = min(fits, key=lambda j: (free[j], j))
        return free[:i] + [free[i] - milli] + free[i + 1:]
    whole = [i for i, f in enumerate(free) if f >= WHOLE]
    if len(whole) < count:
        return None
    out = list(free)
    for i in whole[:count]:
        out[i] = 0
    return out


# --- the scheduler's view: a pod's GPU demand and a node's free GPU shares -------------

GPU_DRIVERS = ("gpu.nanokube.io", "gpu.nvidia.com")
#: the CycleState key of DynamicResources' per-cycle state (devices found per node by its Filter)
DRA_CYCLE = "DynamicResources"


def pod_gpu_demand(dra, pod: dict) -> tuple[int, int]:
    """(GPUs, thousandths of each) the pod's claims ask of GPU device
    classes; (0, 0) for a pod without GPU claims. A request with a `milli`
    capacity asks a share of one GPU, any other request `count` whole GPUs."""
    from ...dra.resourceclaim import ClaimError, claim_name

    count, milli = 0, 0
    ns = pod["metadata"].get("namespace", "")
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        try:
            name, _ = claim_name(pod, pc)
        except ClaimError:
            continue
        claim = dra.claim(ns, name) if name else None
        for r in (((claim or {}).get("spec") or {}).get("devices") or {}).get("requests") or []:
            exactly = r.get("exactly") or {}
            if "gpu" not in (exactly.get("deviceClassName") or ""):
                continue
            share = ((exactly.get("capacity") or {}).get("requests") or {}).get("milli")
            if share is not None:
                from ...machinery.quantity import parse_quantity

                count, milli = max(count, 1), max(milli, int(parse_quantity(str(share))))
            else:
                count, milli = count + int(exactly.get("count") or 1), WHOLE
    return count, milli


def node_free_gpus(dra, node: dict) -> dict[tuple, int]:
    """Thousandths left on each whole GPU of `node` by device id (partitions
    are not counted), counting allocations in flight."""
    allocated = dra.allocated
    out = {}
    for _pool, devices in dra.index().for_node(node):
        for d in devices:
            driver = d.id[0]
            if driver not in GPU_DRIVERS or (d.attributes.get(f"{driver}/type") or ("", "gpu"))[1] != "gpu":
                continue
            used = allocated.consumed.get(d.id)
            if d.id in allocated.exclusive:
                out[d.id] = 0
            elif used is None:
                out[d.id] = WHOLE
            else:
                out[d.id] = max(WHOLE - int(used.get(f"{driver}/milli", WHOLE)), 0)
    return out


class _NodeGPUs:
    """One node's free GPU shares (by device, and as a list), and the raw
    score each GPU policy's pod shape (a ShapeMemo key) got last, with what
    else it read: the Placement Filter found (kept for every pod of a shape
    while the node is unchanged; compared by identity) and the node's free
    and allocatable CPU. Pods of a few dozen shapes visit every node
    between two changes of it, so nearly every score is one lookup."""

    __slots__ = ("free", "scores", "values")

    #: pod shapes kept per node
    MAX_SCORES = 256

    def __init__(self, free: dict[tuple, int]) -> None:
        self.free, self.values = free, list(free.values())
        #: shape -> (Placement, free CPU, allocatable CPU, score)
        self.scores: dict[int | None, tuple] = {}

    def keep(self, shape: int, entry: tuple) -> None:
        if len(self.scores) >= self.MAX_SCORES:
            self.scores.clear()
        self.scores[shape] = entry


class FreeGPUs:
    """`_NodeGPUs` per node (a `NodeMemo`: each kept until an allocation
    change touches one of the node's pools), all dropped when the pools
    change: a GPU policy reads every node it scores, and between two pods
    hardly any changed."""

    def __init__(self, dra) -> None:
        self.dra, self.index = dra, dra.index()
        self.memo = NodeMemo(dra.allocated)

    @staticmethod
    def of(dra) -> FreeGPUs:
        """DynamicResources' shared view, brought up to date."""
        view = dra.free_gpus
        if view is None or view.index is not dra.index() or view.memo.allocated is not dra.allocated:
            view = dra.free_gpus = FreeGPUs(dra)
        view.memo.sync()
        return view

    def node(self, node: dict, name: str) -> _NodeGPUs:
        hit = self.memo.values.get(name)
        if hit is None:
            hit = _NodeGPUs(node_free_gpus(self.dra, node))
            self.memo.keep(name, [(pool.driver, pool.name) for pool, _ in self.index.for_node(node)], hit)
        return hit


def after_placement(free: dict[tuple, int], placement) -> list[int] | None:
    """`free` once the devices the DRA allocator found for the pod on this
    node (its Filter's Placement) are taken; None without one, or where
    Filter only counted free devices (the allocator's simple shape)."""
    taken = getattr(placement, "taken", None)
    if taken is None:
        return None
    out = dict(free)
    for d, amount in taken:
        if d.id not in out:
            continue
        took = WHOLE if amount is None else int(amount.get(f"{d.id[0]}/milli", WHOLE))
        out[d.id] = max(out[d.id] - took, 0)
    return list(out.values())


def scaled(values: list[float], best_low: bool) -> list[int]:
    """0..100 by where each value lies between the worst and the best node."""
    lo, hi = min(values, default=0), max(values, default=0)
    if hi == lo:
        return [0] * len(values)
    return [int(round(100 * ((hi - v) if best_low else (v - lo)) / (hi - lo))) for v in values]


class GPUScorePlugin:
    """Shared by the GPU policies: the pod's demand once per cycle, each
    node's free GPU shares, a `score_gpu` per node (kept per node, see
    `_NodeGPUs`, where the score is a function of what the key holds); pods
    without GPU claims are not scored (every node the same) unless
    `scores_cpu_only`."""

    name = ""
    #: whether pods without GPU claims are scored too
    scores_cpu_only = False
    #: whether `score_gpu` reads the shares the Placement leaves (else it is passed None)
    reads_placement = False
    #: whether a node's score follows from the pod's shape, the Placement and the node's GPUs and CPU alone
    kept = True

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        self.args = args
        self.shapes = ShapeMemo()

    def _dra(self):
        return self.handle.shared.get("DynamicResources") if self.handle is not None else None

    def score_nodes(self, state, info, nodes) -> list[int]:
        dra = self._dra()
        demand = pod_gpu_demand(dra, info.pod) if dra is not None else (0, 0)
        if dra is None or not (demand[0] or self.scores_cpu_only):
            return [0] * len(nodes)
        found = getattr(state.get(DRA_CYCLE), "found", {})
        view = FreeGPUs.of(dra)
        score_gpu, reads_placement = self.score_gpu, self.reads_placement
        # the policy's and the pod's part of every key: ShapeMemo keys are never reused
        shape = self.shapes.key((demand, info.requests.get(CPU))) if self.kept else None
        kept_gpus, found_get = view.memo.values.get, found.get
        raw = []
        append = raw.append
        for n in nodes:
            name = n.name
            gpus = kept_gpus(name) or view.node(n.node or {}, name)
            placement = found_get(name)
            hit = gpus.scores.get(shape)
            if hit is not None and hit[0] is placement and hit[1] == n.free_cpu and hit[2] == n.alloc_cpu:
                append(hit[3])
                continue
            score = score_gpu(gpus.values, demand, n, after_placement(gpus.free, placement) if reads_placement else None)
            if shape is not None:
                gpus.keep(shape, (placement, n.free_cpu, n.alloc_cpu, score))
            append(score)
        return scaled(raw, best_low=self.best_low)


class GPUFragmentationGradient(GPUScorePlugin):
    """FGD (the paper's Algorithm 1): the node whose fragmentation, measured
    against the target workload, grows least when the pod lands on it.
    Args: `workload`: [{count, milli, cpu, weight}] (the task sizes of the trace, cpu in millicores;
    `nanokube simulate` fills it in from the trace when a configuration leaves it out)."""

    name = "GPUFragmentationGradient"
    best_low = True
    #: a CPU-only task uses CPU a GPU task may need: it too goes where fragmentation grows least
    scores_cpu_only = True
    reads_placement = True

    def __init__(self, args: dict, handle) -> None:
        super().__init__(args, handle)
        entries = args.get("workload") or [{"count": 1, "milli": WHOLE, "weight": 1}]
        total = sum(float(e.get("weight", 1)) for e in entries) or 1.0
        self.model = FragmentationModel([((int(e.get("count", 1)), int(e.get("milli", WHOLE)), int(e.get("cpu", 0))),
                                          float(e.get("weight", 1)) / total) for e in entries])

    def score_nodes(self, state, info, nodes):
        self._cpu = info.requests.get(CPU)
        return super().score_nodes(state, info, nodes)

    def score_gpu(self, free: list[int], demand: tuple[int, int], node, allocated: list[int] | None) -> float:
        """The growth of fragmentation with the devices the DRA allocator
        picked on this node (its choice of GPU, not the paper's), or with
        the paper's choice where the allocator found none."""
        after = free if not demand[0] else allocated if allocated is not None else place(free, *demand)
        if after is None:  # cannot host it as this policy would: worse than any node that can
            return float(sum(free) + WHOLE)
        cpu_free = node.allocatable.milli_cpu - node.requested.milli_cpu
        return self.model.node(after, cpu_free - self._cpu) - self.model.node(free, cpu_free)
