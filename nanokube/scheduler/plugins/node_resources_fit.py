"""NodeResourcesFit: Filter rejects nodes without room for the pod's
requests (or pod slots); Score ranks by LeastAllocated (default),
MostAllocated or RequestedToCapacityRatio over weighted resources."""

from __future__ import annotations

from ..cache import KeptColumns, NodeInfo, ShapeMemo
from ..framework import (
    ASSIGNED_POD,
    MAX_NODE_SCORE,
    NODE,
    Action,
    ClusterEvent,
    Code,
    Hint,
    PodInfo,
    UNSCHEDULED_POD,
    Registration,
    Status,
    own_update,
)
from ..resources import CPU, EPHEMERAL, MEMORY
from ...dra import extended_resources
from .dynamic_resources import DEVICE_CLASS, EXTENDED_RESOURCES

TOO_MANY_PODS = "Too many pods"
LEAST, MOST, RATIO = "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"
MAX_CUSTOM_SCORE = 10
_SCORE_KEY = "PreScoreNodeResourcesFit"


def insufficient(info, node, ignored: set[str] = frozenset(), ignored_groups: set[str] = frozenset()) -> list[str]:
    """Upstream's fitsRequest: every reason the pod does not fit `node`."""
    return _fits_request(info, node, ignored, ignored_groups)[0]


def _empty(node: dict) -> NodeInfo:
    n = NodeInfo(node["metadata"]["name"])
    n.set_node(node)
    return n


def _grew(req, old: NodeInfo, new: NodeInfo) -> bool:
    """Upstream's haveAnyRequestedResourcesIncreased: more pod slots, or more allocatable of a
    resource the pod requests."""
    if new.allowed_pods > old.allowed_pods:
        return True
    a, b = old.allocatable, new.allocatable
    return (req.milli_cpu > 0 and b.milli_cpu > a.milli_cpu or req.memory > 0 and b.memory > a.memory
            or req.ephemeral > 0 and b.ephemeral > a.ephemeral
            or any(q and b.scalars.get(k, 0) > a.scalars.get(k, 0) for k, q in req.scalars.items()))


def _shrank(req, before, after) -> bool:
    """Whether a pod now requests less of a resource `req` asks for (upstream's isSchedulableAfterPodScaleDown)."""
    return (req.milli_cpu > 0 and after.milli_cpu < before.milli_cpu or req.memory > 0 and after.memory < before.memory
            or req.ephemeral > 0 and after.ephemeral < before.ephemeral
            or any(q and after.scalars.get(k, 0) < before.scalars.get(k, 0) for k, q in req.scalars.items()))


def _fits_request(info, node, ignored, ignored_groups) -> tuple[list[str], bool]:
    """The reasons, and whether one of them is a resource the pod requests more of than the node
    has allocatable at all (upstream's InsufficientResource.Unresolvable: evicting pods cannot help)."""
    reasons = []
    if len(node.pods) + 1 > node.allowed_pods:
        reasons.append(TOO_MANY_PODS)
    req = info.requests
    if req.is_zero():
        return reasons, False
    alloc, used = node.allocatable, node.requested
    unresolvable = False
    if req.milli_cpu and req.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append(f"Insufficient {CPU}")
        unresolvable = req.milli_cpu > alloc.milli_cpu
    if req.memory and req.memory > alloc.memory - used.memory:
        reasons.append(f"Insufficient {MEMORY}")
        unresolvable = unresolvable or req.memory > alloc.memory
    if req.ephemeral and req.ephemeral > alloc.ephemeral - used.ephemeral:
        reasons.append(f"Insufficient {EPHEMERAL}")
        unresolvable = unresolvable or req.ephemeral > alloc.ephemeral
    for name, q in req.scalars.items():
        if not q or name in ignored or name.split("/")[0] in ignored_groups:
            continue
        if q > alloc.scalars.get(name, 0) - used.scalars.get(name, 0):
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or q > alloc.scalars.get(name, 0)
    return reasons, unresolvable


def _fit_status(info, node, ignored, ignored_groups) -> Status | None:
    """Unschedulable with every reason, or UnschedulableAndUnresolvable when the pod asks for more
    of a resource than the node has allocatable: then preemption skips the node, as upstream's does."""
    reasons, unresolvable = _fits_request(info, node, ignored, ignored_groups)
    if not reasons:
        return None
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE, reasons)


def least_allocated(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_allocated(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: list[tuple[int, int]]):
    """RequestedToCapacityRatio's piecewise-linear utilisation → score."""
    def f(requested: int, capacity: int) -> int:
        util = 100 if capacity == 0 or requested > capacity else requested * 100 // capacity
        for i, (u, s) in enumerate(shape):
            if util <= u:
                if i == 0:
                    return s
                pu, ps = shape[i - 1]
                return ps + (s - ps) * (util - pu) // (u - pu)
        return shape[-1][1]
    return f


class ResourceScorer:
    """Weighted mean over resources of a per-resource scorer applied to
    (node requested + pod request, allocatable); CPU and memory count the
    non-zero defaults for pods that request nothing."""

    def __init__(self, fn, resources: list[tuple[str, int]]) -> None:
        self.fn = fn
        self.resources = resources
        self.memo = ShapeMemo()
        self.kept = KeptColumns()

    def pod_vector(self, info) -> list[tuple[str, int, int]]:
        """(resource, weight, pod request) per scored resource, built once
        per cycle so scoring a node reads only the node's side."""
        return [(name, w, (info.nonzero if name in (CPU, MEMORY) else info.requests).get(name))
                for name, w in self.resources]

    def score(self, vector: list[tuple[str, int, int]], node) -> int:
        total = weights = 0
        alloc = node.allocatable
        for name, w, req in vector:
            if name == CPU:
                cap, used = alloc.milli_cpu, node.nonzero.milli_cpu
            elif name == MEMORY:
                cap, used = alloc.memory, node.nonzero.memory
            else:
                cap, used = alloc.get(name), node.requested.get(name)
            if cap == 0:
                continue
            total += self.fn(used + req, cap) * w
            weights += w
        return total // weights if weights else 0

    def score_all(self, vector: list[tuple[str, int, int]], nodes: list, snap=None) -> list[int]:
        """`score` for each node; the default LeastAllocated over CPU and
        memory, being most of every scheduling cycle, is kept per node for
        pods of the same shape until the node changes, and for a search
        window of `snap` in `kept`."""
        if self.fn is not least_allocated or [name for name, _, _ in vector] != [CPU, MEMORY]:
            return [self.score(vector, n) for n in nodes]
        (_, wc, rc), (_, wm, rm) = vector
        key = self.memo.key((wc, rc, wm, rm))
        least = self._least_allocated

        def score(n) -> int:
            if n.least_shape is key:
                return n.least_score
            s = n.least_score = least(n, wc, rc, wm, rm)
            n.least_shape = key
            return s

        out = self.kept.values(key, snap, nodes, score)
        if out is None:  # not a window of the cycle's snapshot (a workload cycle's view)
            out = []
            append = out.append
            for n in nodes:
                append(n.least_score if n.least_shape is key else score(n))
        return out

    @staticmethod
    def _least_allocated(n, wc: int, rc: int, wm: int, rm: int) -> int:
        total = weights = 0
        cc, cm = n.alloc_cpu, n.alloc_memory
        if cc:
            c = n.nonzero_cpu + rc
            total += ((cc - c) * MAX_NODE_SCORE // cc if c <= cc else 0) * wc
            weights += wc
        if cm:
            m = n.nonzero_memory + rm
            total += ((cm - m) * MAX_NODE_SCORE // cm if m <= cm else 0) * wm
            weights += wm
        return total // weights if weights else 0


def scorer_from_args(args: dict, default: str = LEAST) -> ResourceScorer:
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type") or default
    resources = [(r["name"], r.get("weight", 1)) for r in strategy.get("resources") or [{"name": CPU}, {"name": MEMORY}]]
    if kind == LEAST:
        return ResourceScorer(least_allocated, resources)
    if kind == MOST:
        return ResourceScorer(most_allocated, resources)
    if kind == RATIO:
        pts = ((strategy.get("requestedToCapacityRatio") or {}).get("shape")
               or [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}])
        shape = [(p["utilization"], p["score"] * MAX_NODE_SCORE // MAX_CUSTOM_SCORE) for p in pts]
        return ResourceScorer(broken_linear(shape), resources)
    raise ValueError(f"scoring strategy {kind} is not supported")


class NodeResourcesFit:
    name = "NodeResourcesFit"

    def __init__(self, args: dict, handle) -> None:
        self.ignored = set(args.get("ignoredResources") or [])
        self.ignored_groups = set(args.get("ignoredResourceGroups") or [])
        self.scorer = scorer_from_args(args)
        self.fits = ShapeMemo()
        self.kept = KeptColumns()

    def filter(self, state, info, node):
        req = info.requests
        # fast path for the common fit; anything else gets the full check and its reasons
        if (node.free_pods > 0 and not req.scalars and req.milli_cpu <= node.free_cpu
                and req.memory <= node.free_memory and req.ephemeral <= node.free_ephemeral):
            return None
        ignored = self.ignored
        if req.scalars and (backed := state.get(EXTENDED_RESOURCES)):
            # DRA-backed extended resources a node does not advertise are DynamicResources' to fit
            ignored = ignored | {name for name in backed if not node.allocatable.scalars.get(name)}
        return _fit_status(info, node, ignored, self.ignored_groups)

    def filter_nodes(self, state, info, nodes) -> dict:
        """`filter` over many nodes: the common fit is checked inline, and
        both verdicts are kept per node for the pod's shape, and for a search
        window of the cycle's snapshot in `kept`. Without extended
        resources a rejection's reasons follow from four comparisons, so nodes
        short of the same things share one Status: a pod that fits nowhere
        in a full cluster then costs a lookup per node, not a list of
        formatted reasons."""
        req = info.requests
        if req.scalars:
            return {i: st for i, n in enumerate(nodes) if (st := self.filter(state, info, n)) is not None}
        cpu, memory, ephemeral = req.milli_cpu, req.memory, req.ephemeral
        key = self.fits.key((cpu, memory, ephemeral))
        shared: dict[tuple, Status] = {}

        def verdict(n) -> Status | None:
            if n.fits_shape is key:
                return None
            if n.unfit_shape is key:
                return n.unfit_status
            if n.free_pods > 0 and cpu <= n.free_cpu and memory <= n.free_memory and ephemeral <= n.free_ephemeral:
                n.fits_shape = key
                return None
            alloc = n.allocatable
            short = (n.free_pods <= 0, 0 < cpu > n.free_cpu, 0 < memory > n.free_memory,
                     0 < ephemeral > n.free_ephemeral,
                     cpu > alloc.milli_cpu or memory > alloc.memory or ephemeral > alloc.ephemeral)
            st = shared.get(short)
            if st is None:
                st = _fit_status(info, n, self.ignored, self.ignored_groups)
                if st is None:
                    return None
                shared[short] = st
            n.unfit_shape, n.unfit_status = key, st
            return st

        verdicts = self.kept.values(key, getattr(state, "snapshot", None), nodes, verdict)
        if verdicts is None:  # not a window of the cycle's snapshot (a workload cycle's view)
            return {i: st for i, n in enumerate(nodes) if n.fits_shape is not key and (st := verdict(n)) is not None}
        if not any(verdicts):  # a C scan (Status is truthy; `count(None)` called Status.__eq__ per rejection)
            return {}
        return {i: st for i, st in enumerate(verdicts) if st is not None}

    def pre_score(self, state, info, nodes):
        state[_SCORE_KEY] = self.scorer.pod_vector(info)

    def score_nodes(self, state, info, nodes) -> list[int]:
        vector = state.get(_SCORE_KEY)
        if vector is None:
            vector = self.scorer.pod_vector(info)
        return self.scorer.score_all(vector, nodes, getattr(state, "snapshot", None))

    def events_to_register(self) -> list[Registration]:
        def node_hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterNodeChange: the node can hold the pod when empty, and
            it is new or has more of something the pod asks for (or more pod slots) than before."""
            if new is None:
                return Hint.SKIP
            info = PodInfo(pod, 0.0)
            n = _empty(new)
            if insufficient(info, n):
                return Hint.SKIP
            return Hint.QUEUE if old is None or _grew(info.requests, _empty(old), n) else Hint.SKIP

        def pod_hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterPodEvent for assigned pods: any deletion, or a scale
            down of something this pod asks for."""
            if new is None:
                return Hint.QUEUE
            want = PodInfo(pod, 0.0).requests
            before, after = PodInfo(old, 0.0).requests, PodInfo(new, 0.0).requests
            return Hint.QUEUE if _shrank(want, before, after) else Hint.SKIP

        def class_hint(pod: dict, old, new) -> Hint:
            """isSchedulableAfterDeviceClassEvent (DRAExtendedResource): a new class, or a class
            whose extendedResourceName changed, backs an extended resource the pod asks for."""
            name = (new.get("spec") or {}).get("extendedResourceName")
            if old is not None and (old.get("spec") or {}).get("extendedResourceName") == name:
                return Hint.SKIP
            wanted = PodInfo(pod, 0.0).requests.scalars
            backs = {extended_resources.IMPLICIT_PREFIX + new["metadata"]["name"], name}
            return Hint.QUEUE if any(wanted.get(n) for n in backs if n) else Hint.SKIP

        return [Registration(ClusterEvent(ASSIGNED_POD, Action.DELETE | Action.UPDATE_POD_SCALE_DOWN), pod_hint),
                Registration(ClusterEvent(UNSCHEDULED_POD, Action.UPDATE_POD_SCALE_DOWN), own_update),
                Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE), node_hint),
                Registration(ClusterEvent(DEVICE_CLASS, Action.ADD | Action.UPDATE), class_hint)]
