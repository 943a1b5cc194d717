"""The kubelet's eviction manager (pkg/kubelet/eviction): node-pressure eviction. Each pass
observes the node's signals, reports the pressure conditions whose hard thresholds they cross, and,
while one is crossed, fails ONE running pod to reclaim the resource (one pass per monitoring period):
the first of the pods ranked as upstream ranks them (memory: pods using more than they request
first, then by priority, then by use above requests; disk: the same by ephemeral storage; PIDs: by
priority, then process count). A critical pod is never evicted; the next one in rank goes instead.

The observations come from what the node reports in its summary (kubelet_server.py): each running
pod's containers' working sets (`MetricsProvider.usage`, the usage model or what the process
runtime measures) plus the system's share for memory; the pods' in-memory emptyDirs for disk; one
process per running container for PIDs. A pressure fault (faults.py) is a leak outside the pods:
while it holds, its signal observes half its threshold available, so the manager evicts one pod
per period until it heals (its condition follows the fault, as before); without one, a pod whose
usage fills the node (`sim.nanokube.io/memory-usage`) crosses the threshold for real, and the
condition stays for the pressure transition period after the last crossing."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from ..client.http import EXPECTED
from ..machinery.quantity import BINARY_SI, DECIMAL_SI, QuantityError, format_quantity, parse, parse_quantity
from ..metrics.provider import MetricsProvider
from ..metrics.usage import SYSTEM_MEMORY
from .admission import is_critical, requests
from .lifecycle import Eviction
from .volumes.stats import in_memory_volumes, tree_usage

log = logging.getLogger(__name__)

#: the kubelet's evictionMonitoringPeriod: one pass of the manager per period
MONITORING_PERIOD = 10.0
#: evictionPressureTransitionPeriod: how long a condition stays after its threshold was last crossed
PRESSURE_TRANSITION_PERIOD = 300.0
#: immediateEvictionGracePeriodSeconds: the grace a hard threshold's eviction gives the pod
IMMEDIATE_GRACE = 1
#: podCleanupTimeout: how long a pass waits for its evicted pod to stop before the next one
POD_CLEANUP_TIMEOUT = 30.0
#: a simulated node's kernel.pid_max (64-bit default with systemd)
PID_MAX = 4_194_304
#: the part of its threshold a pressure fault leaves available
FAULT_LEFT = Fraction(1, 2)

REASON = "Evicted"
THRESHOLD_MET = "EvictionThresholdMet"
#: the DisruptionTarget condition's reason on an evicted pod
TERMINATION_BY_KUBELET = "TerminationByKubelet"

MEMORY, NODEFS, PIDS = "memory.available", "nodefs.available", "pid.available"
#: each signal's node condition, the resource it reclaims and the format its quantities print in
SIGNALS = {MEMORY: ("MemoryPressure", "memory", BINARY_SI),
           NODEFS: ("DiskPressure", "ephemeral-storage", BINARY_SI),
           PIDS: ("PIDPressure", "pids", DECIMAL_SI)}


def _float32(p: float) -> float:
    """A percentage as ThresholdValue holds it (a float32)."""
    return struct.unpack("f", struct.pack("f", p))[0]


@dataclass(frozen=True)
class Threshold:
    """A hard eviction threshold: its signal below `quantity`, or below `percentage` of the capacity."""

    signal: str
    quantity: int | None = None
    percentage: float | None = None

    def value(self, capacity: int) -> int:
        """GetThresholdQuantity: the quantity, or the percentage of the capacity (as float64 of the float32)."""
        return self.quantity if self.quantity is not None else int(capacity * _float32(self.percentage or 0.0))


#: the simulated kubelets' evictionHard: upstream's Linux defaults for the signals the nodes observe
#: (memory.available<100Mi, nodefs.available<10%), with pid.available<10%, which upstream leaves
#: unset, so that PIDPressure has a threshold as many distributions configure one
HARD = (Threshold(MEMORY, quantity=100 * 1024 * 1024), Threshold(NODEFS, percentage=0.10),
        Threshold(PIDS, percentage=0.10))


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


@dataclass(frozen=True)
class PodStats:
    """What the summary says of one running pod: each container's working set, its local storage
    used and its processes."""

    memory: dict[str, int] = field(default_factory=dict)
    disk: int = 0
    processes: int = 0


#: the pod's stats, or None where the summary has none (no container running)
StatsFunc = Callable[[dict], PodStats | None]


def _cmp_bool(a: bool, b: bool) -> int:
    """cmpBool: true before false."""
    return 0 if a == b else -1 if a else 1


def _priority(p1: dict, p2: dict) -> int:
    """Lower priority first."""
    a, b = ((p.get("spec") or {}).get("priority") or 0 for p in (p1, p2))
    return 0 if a == b else -1 if a < b else 1


def _request(pod: dict, resource: str) -> int:
    return requests(pod).get(resource, 0)


def _usage_cmp(stats: StatsFunc, use: Callable[[PodStats], int], resource: str, above: bool) -> Callable:
    """A comparison on each pod's use of `resource` against its request: whether it exceeds it
    (those first), or (`above`) by how much it does (the most first); a pod without stats goes first."""
    def cmp(p1: dict, p2: dict) -> int:
        s1, s2 = stats(p1), stats(p2)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)
        d1, d2 = use(s1) - _request(p1, resource), use(s2) - _request(p2, resource)
        return (d2 > d1) - (d2 < d1) if above else _cmp_bool(d1 > 0, d2 > 0)
    return cmp


def _processes(stats: StatsFunc) -> Callable:
    def cmp(p1: dict, p2: dict) -> int:
        s1, s2 = stats(p1), stats(p2)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)
        return s2.processes - s1.processes
    return cmp


def _ordered(pods: list[dict], *cmps: Callable) -> list[dict]:
    """orderedBy(...).Sort: by the first comparison that tells the pods apart (stable among equals)."""
    def cmp(p1: dict, p2: dict) -> int:
        return next((r for c in cmps if (r := c(p1, p2))), 0)
    return sorted(pods, key=functools.cmp_to_key(cmp))


def _memory_used(s: PodStats) -> int:
    return sum(s.memory.values())


def _disk_used(s: PodStats) -> int:
    return s.disk


def rank_memory_pressure(pods: list[dict], stats: StatsFunc) -> list[dict]:
    """rankMemoryPressure: pods using more memory than they request first, then by priority, then by use above requests."""
    return _ordered(pods, _usage_cmp(stats, _memory_used, "memory", False), _priority,
                    _usage_cmp(stats, _memory_used, "memory", True))


def rank_disk_pressure(pods: list[dict], stats: StatsFunc) -> list[dict]:
    """rankDiskPressureFunc: the same by local ephemeral storage against ephemeral-storage requests."""
    return _ordered(pods, _usage_cmp(stats, _disk_used, "ephemeral-storage", False), _priority,
                    _usage_cmp(stats, _disk_used, "ephemeral-storage", True))


def rank_pid_pressure(pods: list[dict], stats: StatsFunc) -> list[dict]:
    """rankPIDPressure: by priority, then the most processes first."""
    return _ordered(pods, _priority, _processes(stats))


RANK = {MEMORY: rank_memory_pressure, NODEFS: rank_disk_pressure, PIDS: rank_pid_pressure}


def _quantity(value: int, fmt: str) -> str:
    return format_quantity(Fraction(value), fmt)


def _container_request(pod: dict, container: dict, resource: str) -> str:
    """The container's request as a Quantity prints it: what the node allocated it for memory
    (a resize in place), else its spec's; "0" for none."""
    asked = ((container.get("resources") or {}).get("requests") or {}).get(resource)
    if resource == "memory":
        for cs in (pod.get("status") or {}).get("containerStatuses") or ():
            if cs.get("name") == container["name"] and "memory" in (cs.get("allocatedResources") or {}):
                asked = cs["allocatedResources"]["memory"]
    try:
        return str(parse(str(asked))) if asked is not None else "0"
    except QuantityError:
        return "0"


def message(signal: str, pod: dict, stats: PodStats | None, observation: Observation | None) -> str:
    """evictionMessage: the resource the node was low on, the threshold and what was available, and
    each container that used more of it than it requests (memory alone: the simulated containers
    report no writable layer or log usage for ephemeral storage)."""
    _, resource, fmt = SIGNALS[signal]
    out = f"The node was low on resource: {resource}. "
    threshold = next(t for t in HARD if t.signal == signal)
    if observation is not None:
        out += (f"Threshold quantity: {_quantity(threshold.value(observation.capacity), fmt)}, "
                f"available: {_quantity(observation.available, fmt)}. ")
    if stats is None or resource != "memory":
        return out
    for c in (pod.get("spec") or {}).get("containers") or ():
        used = stats.memory.get(c["name"])
        if used is None:
            continue
        asked = _container_request(pod, c, resource)
        if used > parse_quantity(asked):
            out += (f"Container {c['name']} was using {_quantity(used, BINARY_SI)}, request is {asked}, "
                    f"has larger consumption of {resource}. ")
    return out


def _bytes(q) -> int:
    try:
        return int(parse_quantity(str(q))) if q is not None else 0
    except QuantityError:
        return 0


class EvictionManager:
    """One node's eviction manager, on its agent's clock. It passes once per MONITORING_PERIOD while a
    signal may be crossed: a pressure fault holds, a condition is within its transition period, or
    the pods' usage is measured (the process runtime). Otherwise the pods' usage changes only with
    their objects (the usage model reads them), so it waits for the agent to `notify` it of a pod
    or fault change and passes then, as the kernel's memory threshold notifier wakes upstream's:
    an idle node (thousands in a simulation, a year between heartbeats) keeps no timer."""

    def __init__(self, agent):
        self.agent = agent
        self.clock = agent.clock
        #: kubelet_evictions: pods evicted, by eviction signal
        self.evictions: dict[str, int] = {}
        #: the pressure conditions the signals' own observations report (within the transition period)
        self.conditions: frozenset[str] = frozenset()
        self._crossed_at: dict[str, float] = {}
        self._changed = asyncio.Event()
        self._provider: MetricsProvider | None = None
        self._usage_cache: dict[str, tuple[dict, dict]] = {}
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def notify(self) -> None:
        """A pod or fault of the node changed: what the signals observe may have."""
        self._changed.set()

    def _periodic(self) -> bool:
        return bool(self.agent.faults.pressure or self.conditions or MetricsProvider.usage_sources)

    async def _run(self) -> None:
        """Passes, each after a change or one period after the last while periodic; after an
        eviction, the pass waits for the pod to stop (at most POD_CLEANUP_TIMEOUT), then the rest of
        the period, as the stats a next decision needs are refreshed once a period (upstream acts
        only on thresholds whose stats changed since its last pass)."""
        while True:
            began = self.clock.monotonic()
            self._changed.clear()
            try:
                evicted = await self.synchronize()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                (log.warning if isinstance(e, EXPECTED) else log.exception)("node %s: eviction pass failed: %s",
                                                                             self.agent.name, e)
                evicted = None
            if evicted is not None and not await evicted.ends_within(POD_CLEANUP_TIMEOUT):
                log.info("node %s: timed out waiting for pod %s/%s to be cleaned up", self.agent.name,
                         evicted.namespace, evicted.name)
            if evicted is not None or self._periodic():
                await self.clock.sleep(max(began + MONITORING_PERIOD - self.clock.monotonic(), 0.0))
            else:
                await self._changed.wait()

    # --- observations --------------------------------------------------------------------

    def _usage(self, pod: dict) -> dict:
        """The pod's containers' usage as the summary reports it (one source: MetricsProvider.usage);
        the usage model's answer is kept while the pod object is the same."""
        if self._provider is None:
            self._provider = MetricsProvider(self.agent.client, self.clock)
        uid = pod["metadata"]["uid"]
        cached = self._usage_cache.get(uid)
        if cached is not None and cached[0] is pod and not MetricsProvider.usage_sources:
            return cached[1]
        got = self._provider.usage(pod)
        self._usage_cache[uid] = (pod, got)
        return got

    def pod_stats(self) -> dict[str, PodStats]:
        """Each running pod's stats by UID, as the summary lists them (Running, not being deleted)."""
        out: dict[str, PodStats] = {}
        volumes = self.agent.volumes
        for uid, w in list(self.agent.workers.items()):
            pod = w.pod
            if (pod.get("status") or {}).get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
                continue
            usage = self._usage(pod)
            disk = sum(tree_usage(w.empty_dir(name))[0] for name in in_memory_volumes(volumes, pod))
            out[uid] = PodStats({name: u.memory for name, u in usage.items()}, disk, len(usage))
        for uid in [u for u in self._usage_cache if u not in self.agent.workers]:
            del self._usage_cache[uid]
        return out

    def observe(self, stats: dict[str, PodStats]) -> dict[str, Observation]:
        """makeSignalObservations: each signal's capacity and what is available of it."""
        capacity = self.agent.spec.capacity
        out = {}
        memory = _bytes(capacity.get("memory"))
        if memory:
            used = SYSTEM_MEMORY + sum(_memory_used(s) for s in stats.values())
            out[MEMORY] = Observation(max(memory - used, 0), memory)
        disk = _bytes(capacity.get("ephemeral-storage"))
        if disk:
            out[NODEFS] = Observation(max(disk - sum(s.disk for s in stats.values()), 0), disk)
        out[PIDS] = Observation(max(PID_MAX - sum(s.processes for s in stats.values()), 0), PID_MAX)
        return out

    def _faulted(self, observations: dict[str, Observation]) -> dict[str, Observation]:
        """The observations with each pressure fault's leak: half its threshold left."""
        pressure = self.agent.faults.pressure
        out = dict(observations)
        for t in HARD:
            o = out.get(t.signal)
            if o is not None and SIGNALS[t.signal][0] in pressure:
                out[t.signal] = Observation(min(o.available, math.floor(t.value(o.capacity) * FAULT_LEFT)), o.capacity)
        return out

    # --- a pass --------------------------------------------------------------------------

    async def synchronize(self):
        """One pass: observe, report the conditions, and evict the first pod in rank for the most
        pressing threshold crossed (memory first). The evicted pod's worker, or None."""
        if self.agent.faults.lease_stop:  # the kubelet is gone
            return None
        stats = self.pod_stats()
        real = self.observe(stats)
        now = self.clock.monotonic()
        for t in HARD:
            o = real.get(t.signal)
            if o is not None and o.available < t.value(o.capacity):
                self._crossed_at[SIGNALS[t.signal][0]] = now
        conditions = frozenset(c for c, at in self._crossed_at.items() if now - at < PRESSURE_TRANSITION_PERIOD)
        if conditions != self.conditions:
            self.conditions = conditions
            await self.agent.eviction_conditions_changed()
        observations = self._faulted(real)
        met = [t for t in HARD if (o := observations.get(t.signal)) is not None and o.available < t.value(o.capacity)]
        if not met:
            return None
        threshold = met[0]  # byEvictionPriority: memory first
        resource = SIGNALS[threshold.signal][1]
        await self.agent.record(THRESHOLD_MET, f"Attempting to reclaim {resource}", "Warning")
        workers = {w.uid: w for w in self.agent.workers.values() if self._active(w)}
        if not workers:
            log.info("node %s: eviction thresholds have been met, but no pods are active to evict", self.agent.name)
            return None
        ranked = RANK[threshold.signal]([w.pod for w in workers.values()],
                                        lambda p: stats.get(p["metadata"]["uid"]))
        for pod in ranked:
            if is_critical(pod):
                log.info("node %s: eviction manager: cannot evict a critical pod %s/%s", self.agent.name,
                         pod["metadata"].get("namespace"), pod["metadata"]["name"])
                continue
            w = workers[pod["metadata"]["uid"]]
            why = message(threshold.signal, pod, stats.get(w.uid), observations[threshold.signal])
            await self.agent.recorder.emit({"kind": "Pod", "apiVersion": "v1", "metadata": pod["metadata"]},
                                           "Warning", REASON, why)
            w.evict(Eviction(REASON, why, (("DisruptionTarget", TERMINATION_BY_KUBELET, why),), IMMEDIATE_GRACE))
            self.evictions[threshold.signal] = self.evictions.get(threshold.signal, 0) + 1
            log.info("node %s: evicted pod %s/%s: %s", self.agent.name, w.namespace, w.name, why)
            return w
        log.info("node %s: eviction manager: unable to evict any pods from the node", self.agent.name)
        return None

    @staticmethod
    def _active(w) -> bool:
        """The pods the kubelet counts active: not ended, not being deleted, not stopped already."""
        return (w.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and \
            not w.pod["metadata"].get("deletionTimestamp") and w.eviction is None and not w.finished
