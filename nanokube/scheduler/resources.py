"""Compact resource vectors built once per pod or node from their JSON, so
Filter and Score compare integers instead of parsing quantities per node."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..machinery.quantity import QuantityError, parse

CPU, MEMORY, EPHEMERAL, PODS = "cpu", "memory", "ephemeral-storage", "pods"
#: what Score assumes for a container that requests nothing (upstream's non-zero defaults)
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024


@dataclass(slots=True)
class Resources:
    """milli-CPU, bytes of memory and ephemeral storage, and integer scalar
    resources (extended resources, hugepages) by name."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral: int = 0
    scalars: dict[str, int] = field(default_factory=dict)

    def add(self, o: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * o.milli_cpu
        self.memory += sign * o.memory
        self.ephemeral += sign * o.ephemeral
        for k, v in o.scalars.items():
            self.scalars[k] = self.scalars.get(k, 0) + sign * v

    def set_max(self, o: Resources) -> None:
        self.milli_cpu = max(self.milli_cpu, o.milli_cpu)
        self.memory = max(self.memory, o.memory)
        self.ephemeral = max(self.ephemeral, o.ephemeral)
        for k, v in o.scalars.items():
            self.scalars[k] = max(self.scalars.get(k, 0), v)

    def copy(self) -> Resources:
        return Resources(self.milli_cpu, self.memory, self.ephemeral, dict(self.scalars))

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL:
            return self.ephemeral
        return self.scalars.get(name, 0)

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral or any(self.scalars.values()))


def _value(name: str, q) -> int:
    return _scaled(str(q), name == CPU)


@functools.lru_cache(maxsize=4096)
def _scaled(text: str, milli: bool) -> int:
    """A quantity in thousandths (CPU) or rounded up to an integer: the rounding is exact
    `Fraction` arithmetic, and a cluster's pods and nodes repeat a few strings ("100m", "500Mi")."""
    try:
        parsed = parse(text)
    except QuantityError:
        return 0
    return parsed.milli() if milli else parsed.ceil()


def from_list(rl: dict | None) -> Resources:
    """A Resources from a ResourceList ({"cpu": "100m", ...}); `pods` is skipped."""
    r = Resources()
    for name, q in (rl or {}).items():
        v = _value(name, q)
        if name == CPU:
            r.milli_cpu = v
        elif name == MEMORY:
            r.memory = v
        elif name == EPHEMERAL:
            r.ephemeral = v
        elif name != PODS:
            r.scalars[name] = v
    return r


def _requests(c: dict) -> dict:
    return ((c.get("resources") or {}).get("requests")) or {}


def _containers(spec: dict, of: Callable[[dict], Resources]) -> Resources:
    """Regular containers plus restartable (sidecar) init containers run together; each ordinary
    init container runs alone next to the sidecars started before it; the larger wins (upstream's
    AggregateContainerRequests and AggregateContainerLimits)."""
    total = Resources()
    for c in spec.get("containers") or []:
        total.add(of(c))
    sidecars = Resources()
    init_peak = Resources()
    for c in spec.get("initContainers") or []:
        r = of(c)
        if c.get("restartPolicy") == "Always":
            sidecars.add(r)
            init_peak.set_max(sidecars)
        else:
            r.add(sidecars)
            init_peak.set_max(r)
    total.add(sidecars)
    total.set_max(init_peak)
    return total


def _pod_level(total: Resources, spec: dict, kind: str) -> None:
    """Pod-level requests or limits (spec.resources) replace the containers' cpu and memory."""
    pod_level = ((spec.get("resources") or {}).get(kind)) or {}
    if pod_level:
        lvl = from_list(pod_level)
        if CPU in pod_level:
            total.milli_cpu = lvl.milli_cpu
        if MEMORY in pod_level:
            total.memory = lvl.memory


def pod_requests(spec: dict, nonzero: bool = False) -> Resources:
    """What a pod asks of a node, as upstream's PodRequests computes it: its containers
    (`_containers`), pod-level requests over them, then pod overhead added. With
    `nonzero`, containers that request no CPU or memory count the defaults."""
    def of(c: dict) -> Resources:
        r = from_list(_requests(c))
        if nonzero:
            reqs = _requests(c)
            if CPU not in reqs:
                r.milli_cpu = DEFAULT_MILLI_CPU
            if MEMORY not in reqs:
                r.memory = DEFAULT_MEMORY
        return r

    total = _containers(spec, of)
    _pod_level(total, spec, "requests")
    total.add(from_list(spec.get("overhead")))
    return total


def pod_limits(spec: dict) -> Resources:
    """A pod's limits, as upstream's PodLimits: its containers' (`_containers`), pod-level limits
    over them, and pod overhead added to each limit that is set (a resource without one stays
    unlimited)."""
    total = _containers(spec, lambda c: from_list(((c.get("resources") or {}).get("limits"))))
    _pod_level(total, spec, "limits")
    overhead = from_list(spec.get("overhead"))
    if total.milli_cpu:
        total.milli_cpu += overhead.milli_cpu
    if total.memory:
        total.memory += overhead.memory
    if total.ephemeral:
        total.ephemeral += overhead.ephemeral
    for k, v in overhead.scalars.items():
        if total.scalars.get(k):
            total.scalars[k] += v
    return total


def pod_requests_pair(spec: dict) -> tuple[Resources, Resources]:
    """`pod_requests(spec)` and `pod_requests(spec, nonzero=True)`; for the usual pod (containers
    only: no init containers, pod-level resources or overhead) in one pass over its containers,
    since every pod that enters the queue needs both."""
    if spec.get("initContainers") or spec.get("resources") or spec.get("overhead"):
        return pod_requests(spec), pod_requests(spec, nonzero=True)
    total, nonzero = Resources(), Resources()
    for c in spec.get("containers") or []:
        reqs = _requests(c)
        r = from_list(reqs)
        total.add(r)
        nonzero.add(r)
        # a request left out counts as zero above; the non-zero total counts the default instead
        if CPU not in reqs:
            nonzero.milli_cpu += DEFAULT_MILLI_CPU
        if MEMORY not in reqs:
            nonzero.memory += DEFAULT_MEMORY
    return total, nonzero
