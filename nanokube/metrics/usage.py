"""Resource usage as metrics-server reports it, for pods and nodes.

Simulated containers follow a usage model computed from the pod object
alone, so every process (API server, a separate controller manager) agrees:

- A running container uses `SHARE` (half) of its CPU and memory requests;
  of its limits when it requests nothing; `IDLE_CPU` and `IDLE_MEMORY` when
  it has neither.
- The pod annotations `sim.nanokube.io/cpu-usage` and
  `sim.nanokube.io/memory-usage` (quantities, e.g. `900m`, `1Gi`) set the
  pod's total instead, split over its containers in proportion to their
  requests (evenly when none request). `nanokube metrics usage` writes them
  at run time.
- Only running containers use anything, as the kubelet has stats only for
  them: one waiting (crash-looping, pulling) or terminated counts for
  nothing; a running init container or sidecar counts, and so do the
  containers of a pod being deleted until they stop; a pod with no
  container running has no metrics, as metrics-server has none. A Running
  pod that reports no container statuses at all counts its containers.
- A node uses what its running pods use plus `SYSTEM_CPU` and
  `SYSTEM_MEMORY` for the system (kubelet, runtime, OS). While a
  `memory-pressure` fault holds (node/faults.py), a leak outside the pods
  takes all but `FAULT_LEFT` (half) of the kubelet's memory.available
  threshold (`with_leak`): what `kubectl top node` shows is what the
  eviction manager observes.

Pods a registered source knows (`MetricsProvider.usage_sources`: the
process runtime measures its containers in /proc) report measured usage
instead. Usage is CPU in millicores and memory in bytes, sampled over
`WINDOW` seconds and stamped at the start of the current window, as
metrics-server stamps its scrapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..machinery.quantity import QuantityError, parse_quantity

CPU_ANNOTATION = "sim.nanokube.io/cpu-usage"
MEMORY_ANNOTATION = "sim.nanokube.io/memory-usage"
SHARE = Fraction(1, 2)
IDLE_CPU = 1  # millicores
IDLE_MEMORY = 4 * 1024 * 1024
SYSTEM_CPU = 100
SYSTEM_MEMORY = 512 * 1024 * 1024
#: metrics-server's default --metric-resolution: the window of every sample
WINDOW = 15.0
#: the kubelet's memory.available hard eviction threshold (evictionHard's Linux default, 100Mi)
MEMORY_THRESHOLD = 100 * 1024 * 1024
#: the part of its signal's threshold a pressure fault leaves available
FAULT_LEFT = Fraction(1, 2)


@dataclass(frozen=True)
class Usage:
    cpu: int  # millicores
    memory: int  # bytes
    #: the container's processes: a simulated one runs one (as its `ps` shows), a process runtime's
    #: those of its session, as its cgroup's process count (the pod's process_stats, node rlimit) has them
    processes: int = 1


def _amount(value, scale: int) -> int | None:
    if value is None:
        return None
    try:
        return math.ceil(parse_quantity(str(value)) * scale)
    except QuantityError:
        return None


def _resources(c: dict, kind: str) -> tuple[int | None, int | None]:
    r = (c.get("resources") or {}).get(kind) or {}
    return _amount(r.get("cpu"), 1000), _amount(r.get("memory"), 1)


def _running(statuses: list[dict]) -> set[str]:
    return {cs.get("name") for cs in statuses if "running" in (cs.get("state") or {})}


def running_containers(pod: dict) -> list[dict]:
    """The containers the kubelet would report stats for: every init, app
    or ephemeral container whose status says running, whatever the pod's
    phase (an initializing pod's init container, a terminating pod's
    containers during their grace period); every app container of a
    Running pod that reports no container statuses at all."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    kinds = ("initContainers", "containers", "ephemeralContainers")
    reported = [status.get(f"{k[:-1]}Statuses") or [] for k in kinds]
    if not any(reported):
        return list(spec.get("containers") or []) if status.get("phase") == "Running" else []
    running = set().union(*(_running(r) for r in reported))
    return [c for k in kinds for c in spec.get(k) or [] if c["name"] in running]


def simulated_usage(pod: dict) -> dict[str, Usage]:
    """Each running container's usage under the model above."""
    containers = running_containers(pod)
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    out: dict[str, Usage] = {}
    for c in containers:
        req_cpu, req_mem = _resources(c, "requests")
        lim_cpu, lim_mem = _resources(c, "limits")
        cpu = req_cpu if req_cpu is not None else lim_cpu
        mem = req_mem if req_mem is not None else lim_mem
        out[c["name"]] = Usage(int(cpu * SHARE) if cpu else IDLE_CPU, int(mem * SHARE) if mem else IDLE_MEMORY)
    for resource, key in (("cpu", CPU_ANNOTATION), ("memory", MEMORY_ANNOTATION)):
        total = _amount(ann.get(key), 1000 if resource == "cpu" else 1)
        if total is None or not containers:
            continue
        weights = [(_resources(c, "requests")[0 if resource == "cpu" else 1] or 0) for c in containers]
        if not any(weights):
            weights = [1] * len(containers)
        shares = _split(total, weights)
        for c, part in zip(containers, shares):
            u = out[c["name"]]
            out[c["name"]] = Usage(part, u.memory) if resource == "cpu" else Usage(u.cpu, part)
    return out


def _split(total: int, weights: list[int]) -> list[int]:
    """`total` in proportion to `weights`, the rounding remainder on the first."""
    whole = sum(weights)
    parts = [total * w // whole for w in weights]
    parts[0] += total - sum(parts)
    return parts


def with_leak(used: int, capacity: int, threshold: int) -> int:
    """What a node under a pressure fault uses: enough more than `used` (when that is less) that
    FAULT_LEFT of the signal's `threshold` is left of its `capacity`."""
    return max(used, capacity - math.floor(threshold * FAULT_LEFT))


def scraped_at(now: float) -> float:
    """When metrics-server last scraped (every WINDOW seconds): the end of the current sample's window."""
    return math.floor(now / WINDOW) * WINDOW
