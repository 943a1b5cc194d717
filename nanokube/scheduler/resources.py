"""Compact resource vectors built once per pod or node from their JSON, so
Filter and Score compare integers instead of parsing quantities per node."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..machinery import podresources
from ..machinery.podresources import INTEGERS

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


#: NonMissingContainerRequests: what Score counts for a container that names no CPU or memory
NON_ZERO = {CPU: DEFAULT_MILLI_CPU, MEMORY: DEFAULT_MEMORY}


def _vector(amounts: dict[str, int]) -> Resources:
    """A Resources of `amounts`, which it takes over (its scalars are what is left)."""
    return Resources(amounts.pop(CPU, 0), amounts.pop(MEMORY, 0), amounts.pop(EPHEMERAL, 0), amounts)


def from_list(rl: dict | None) -> Resources:
    """A Resources from a ResourceList ({"cpu": "100m", ...}); `pods` is skipped."""
    return _vector(podresources.amounts(rl, INTEGERS))


def pod_requests(spec: dict, nonzero: bool = False) -> Resources:
    """What a pod asks of a node (upstream's PodRequests, `podresources.pod_requests`). With
    `nonzero`, containers that request no CPU or memory count the defaults."""
    return _vector(podresources.pod_requests(spec, INTEGERS, NON_ZERO if nonzero else None))


def pod_limits(spec: dict) -> Resources:
    """A pod's limits (upstream's PodLimits, `podresources.pod_limits`)."""
    return _vector(podresources.pod_limits(spec, INTEGERS))


def pod_requests_pair(spec: dict) -> tuple[Resources, Resources]:
    """`pod_requests(spec)` and `pod_requests(spec, nonzero=True)`: every pod that enters the
    queue needs both. Without init containers or pod-level requests the containers' requests are
    a plain sum, so the second is the first with the defaults of each container that names no
    CPU or memory added (one pass over the requests instead of two)."""
    requests = pod_requests(spec)
    if spec.get("initContainers") or spec.get("resources"):
        return requests, pod_requests(spec, nonzero=True)
    nonzero = requests.copy()
    for c in spec.get("containers") or ():
        named = (c.get("resources") or {}).get("requests") or ()
        if CPU not in named:
            nonzero.milli_cpu += DEFAULT_MILLI_CPU
        if MEMORY not in named:
            nonzero.memory += DEFAULT_MEMORY
    return requests, nonzero
