"""The kubelet's eviction manager (pkg/kubelet/eviction): node-pressure eviction. Each pass
observes the node's signals, reports the pressure conditions whose thresholds they cross, and,
while a hard one is crossed, or a soft one (a joined kubelet's evictionSoft) has been for its grace
period, fails ONE running pod to reclaim the resource (one pass per monitoring period):
the first of the pods ranked as upstream ranks them (memory: pods using more than they request
first, then by priority, then by use above requests; disk: the same by ephemeral storage; PIDs: by
priority, then process count). A critical pod is never evicted; the next one in rank goes instead.

Before the thresholds, each pass enforces the pods' local storage limits, node pressure or not
(localStorageEviction, LocalStorageCapacityIsolation being on): every running pod whose emptyDir
uses more than its sizeLimit, whose ephemeral storage exceeds the pod's ephemeral-storage limit
(its containers' summed), or one of whose containers' writable layer and logs exceed its own limit is
evicted in that pass, with upstream's message and no DisruptionTarget condition; kubelet_evictions
counts it under emptydirfs.limit, ephemeralpodfs.limit or ephemeralcontainerfs.limit.

The observations come from what the node reports in its summary (kubelet_server.py): each running
pod's containers' working sets (`MetricsProvider.usage`, the usage model or what the process
runtime measures) and its memory-backed emptyDirs' files (tmpfs pages, charged to the pod's
cgroup) plus the system's share for memory; for disk, the pods' in-memory emptyDirs
(volumes/stats.py's du count, as the summary's volume stats), their containers' writable
layers (what a simulated container wrote to its own root: `dd`, `fallocate`, `echo > /tmp/f`)
and log files (what they wrote to stdout and stderr, as CRI log files), and their etc-hosts
files, with the inodes of all these against the node's (one per 16 KiB of its ephemeral
storage); the images' filesystem is the node's, so imagefs.available and imagefs.inodesFree
observe what nodefs's do (crossed first at upstream's default 15%); for PIDs, the processes of
the running containers (one each for a simulated container; a process runtime's, its session's). volumes/stats.local_usage counts the disk for
the summary too, which serves an emptyDir's count from its last minute's measurement where this
counts it at each pass, and adds the configMap volumes the kubelet wrote on disk, which this
leaves out (measuring them is a walk of the node's disk). On the process runtime the emptyDirs of the pods with a storage limit
are walked on the node's disk at each pass; its containers' own files are not counted.
Simulated images and exited containers take no disk, so the node-level reclaim upstream tries
before a disk eviction (container and image GC) would free nothing and is not modelled.

The Evicted event of a threshold's eviction carries upstream's annotations: the containers over
their requests, their usage and the starved resource. A pressure fault (faults.py) is a leak
outside the pods: while it holds, its signal observes half its threshold available, so the
manager evicts one pod per period until it heals (its condition follows the fault, as before);
without one, a pod whose usage fills the node (`sim.nanokube.io/memory-usage`) crosses the
threshold for real, and the condition stays for the pressure transition period after the last
crossing."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

from ..client.http import EXPECTED
from ..machinery.podresources import QUANTITIES, pod_limits
from ..machinery.quantity import (BINARY_SI, DECIMAL_SI, QuantityError, format_quantity, parse,
                                  parse_quantity)
from ..metrics.provider import MetricsProvider
from ..metrics.usage import MEMORY_THRESHOLD, SYSTEM_MEMORY, Usage, with_leak
from .admission import is_critical, requests
from .lifecycle import Eviction
from .volumes.stats import (LocalUsage, disk_empty_dirs, local_usage, memory_backed, quantity_or_none,
                            tmpfs_charges)

log = logging.getLogger(__name__)

#: the kubelet's evictionMonitoringPeriod: one pass of the manager per period
MONITORING_PERIOD = 10.0
#: evictionPressureTransitionPeriod: how long a condition stays after its threshold was last crossed
PRESSURE_TRANSITION_PERIOD = 300.0
#: immediateEvictionGracePeriodSeconds: the grace a hard threshold's or a local storage limit's eviction
#: gives the pod, whatever its own (2 s for each container, killContainer's minimum). Upstream's local
#: storage evictions passed 0 before kubernetes PR 124063, which the pod workers read as no override.
IMMEDIATE_GRACE = 1
#: podCleanupTimeout: how long a pass waits for its evicted pod to stop before the next one
POD_CLEANUP_TIMEOUT = 30.0
#: a simulated node's kernel.pid_max (64-bit default with systemd)
PID_MAX = 4_194_304

REASON = "Evicted"
#: the Evicted event's annotations (OffendingContainersKey, OffendingContainersUsageKey, StarvedResourceKey)
OFFENDING_CONTAINERS, OFFENDING_CONTAINERS_USAGE = "offending_containers", "offending_containers_usage"
STARVED_RESOURCE = "starved_resource"
EPHEMERAL_STORAGE = "ephemeral-storage"
#: the kubelet_evictions signals of the local storage limits (signalEmptyDirFsLimit...)
EMPTY_DIR_LIMIT, POD_LIMIT, CONTAINER_LIMIT = "emptydirfs.limit", "ephemeralpodfs.limit", "ephemeralcontainerfs.limit"
THRESHOLD_MET = "EvictionThresholdMet"
#: the DisruptionTarget condition's reason on an evicted pod
TERMINATION_BY_KUBELET = "TerminationByKubelet"

MEMORY, NODEFS, PIDS = "memory.available", "nodefs.available", "pid.available"
NODEFS_INODES, IMAGEFS, IMAGEFS_INODES = "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree"
INODES = "inodes"
#: each signal's node condition, the resource it reclaims and the format its quantities print in
SIGNALS = {MEMORY: ("MemoryPressure", "memory", BINARY_SI),
           NODEFS: ("DiskPressure", EPHEMERAL_STORAGE, BINARY_SI),
           NODEFS_INODES: ("DiskPressure", INODES, DECIMAL_SI),
           IMAGEFS: ("DiskPressure", EPHEMERAL_STORAGE, BINARY_SI),
           IMAGEFS_INODES: ("DiskPressure", INODES, DECIMAL_SI),
           PIDS: ("PIDPressure", "pids", DECIMAL_SI)}
#: the order thresholds are reclaimed in when several are met (byEvictionPriority: memory first)
_PRIORITY = {signal: i for i, signal in enumerate(SIGNALS)}
#: the bytes of a simulated node's filesystem per inode (mke2fs's default inode_ratio): its inodes
#: are its ephemeral-storage capacity over this
BYTES_PER_INODE = 16384


def _float32(p: float) -> float:
    """A percentage as ThresholdValue holds it (a float32)."""
    return struct.unpack("f", struct.pack("f", p))[0]


@dataclass(frozen=True)
class Threshold:
    """An eviction threshold: its signal below `quantity`, or below `percentage` of the capacity; a
    soft one (evictionSoft) with the seconds it must be met before a pod is evicted for it."""

    signal: str
    quantity: int | None = None
    percentage: float | None = None
    grace_period: float | None = None

    def value(self, capacity: int) -> int:
        """GetThresholdQuantity: the quantity, or the percentage of the capacity (as float64 of the float32)."""
        return self.quantity if self.quantity is not None else int(capacity * _float32(self.percentage or 0.0))


#: the simulated kubelets' evictionHard: upstream's Linux defaults (memory.available<100Mi,
#: nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%), with
#: pid.available<10%, which upstream leaves unset, so that PIDPressure has a threshold as many
#: distributions configure one
HARD = (Threshold(MEMORY, quantity=MEMORY_THRESHOLD), Threshold(NODEFS, percentage=0.10),
        Threshold(NODEFS_INODES, percentage=0.05), Threshold(IMAGEFS, percentage=0.15),
        Threshold(IMAGEFS_INODES, percentage=0.05), Threshold(PIDS, percentage=0.10))


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


@dataclass(frozen=True)
class PodStats:
    """What the summary says of one running pod: each container's working set, its local ephemeral
    storage used (its containers' writable layers and logs, its emptyDirs on disk and its etc-hosts
    file), its processes, each emptyDir's used bytes (of either medium: sizeLimit bounds both) and
    each container's own ephemeral storage
    (rootfs: its writable layer and its logs, as containerEphemeralStorageLimitEviction adds them)."""

    memory: dict[str, int] = field(default_factory=dict)
    disk: int = 0
    processes: int = 0
    volumes: dict[str, int] = field(default_factory=dict)
    rootfs: dict[str, int] = field(default_factory=dict)
    #: the pages of its memory-backed emptyDirs that no running container mounts, which count in the
    #: pod's working set (and the node's) beside its containers' (whose own tmpfs pages `memory` holds)
    tmpfs: int = 0
    #: the inodes its local ephemeral storage holds (files, directories, log files, etc-hosts)
    inodes: int = 0

    @classmethod
    def of(cls, pod: dict, usage: dict[str, Usage], local: LocalUsage) -> PodStats:
        """A running pod's stats from its containers' usage and what it holds on the node
        (volumes/stats.local_usage), as the summary counts them both."""
        return cls({name: u.memory for name, u in usage.items()}, local.total, sum(u.processes for u in usage.values()),
                   local.empty_dirs | local.tmpfs, {name: used + local.logs[name] for name, used in local.rootfs.items()},
                   tmpfs_charges(pod, local.tmpfs, usage).get("", 0), local.inodes)


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
    return sum(s.memory.values()) + s.tmpfs


def _disk_used(s: PodStats) -> int:
    return s.disk


def _inodes_used(s: PodStats) -> int:
    return s.inodes


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


def rank_inode_pressure(pods: list[dict], stats: StatsFunc) -> list[dict]:
    """rankDiskPressureFunc for inodes: as for disk, against no request (a pod cannot request
    inodes), so every pod holding any exceeds it: by priority, then the most inodes first."""
    return _ordered(pods, _usage_cmp(stats, _inodes_used, INODES, False), _priority,
                    _usage_cmp(stats, _inodes_used, INODES, True))


#: each signal's ranking; the image filesystem is the node's (no dedicated one), so its signals
#: rank as nodefs's do, by everything a pod holds there
RANK = {MEMORY: rank_memory_pressure, NODEFS: rank_disk_pressure, NODEFS_INODES: rank_inode_pressure,
        IMAGEFS: rank_disk_pressure, IMAGEFS_INODES: rank_inode_pressure, PIDS: rank_pid_pressure}


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


def message(signal: str, pod: dict, stats: PodStats | None, observation: Observation | None,
            hard: tuple[Threshold, ...] = HARD) -> tuple[str, dict[str, str]]:
    """evictionMessage: the resource the node was low on, the threshold and what was available, and
    each container (app or init; in the summary's order) that used more of it than it requests
    (memory: its working set; ephemeral storage: its writable layer and logs); with the Evicted event's
    annotations, which name those containers, their usage and the resource (none without stats)."""
    _, resource, fmt = SIGNALS[signal]
    out = f"The node was low on resource: {resource}. "
    threshold = next(t for t in hard if t.signal == signal)
    if observation is not None:
        # (a percentage's quantity is a BinarySI one, as GetThresholdQuantity makes it)
        shown = BINARY_SI if threshold.percentage is not None else fmt
        out += (f"Threshold quantity: {_quantity(threshold.value(observation.capacity), shown)}, "
                f"available: {_quantity(observation.available, fmt)}. ")
    if stats is None:
        return out, {}
    spec = pod.get("spec") or {}
    containers = {c["name"]: c for key in ("initContainers", "containers") for c in spec.get(key) or ()}
    usage = stats.memory if resource == "memory" else stats.rootfs if resource == "ephemeral-storage" else {}
    offending, used_by = [], []
    for name, used in usage.items():
        c = containers.get(name)
        if c is None:  # an ephemeral container: it has no resources to compare
            continue
        asked = _container_request(pod, c, resource)
        if used > parse_quantity(asked):
            out += (f"Container {name} was using {_quantity(used, BINARY_SI)}, request is {asked}, "
                    f"has larger consumption of {resource}. ")
            offending.append(name)
            used_by.append(_quantity(used, BINARY_SI))
    return out, {OFFENDING_CONTAINERS: ",".join(offending), OFFENDING_CONTAINERS_USAGE: ",".join(used_by),
                 STARVED_RESOURCE: resource}


def _writes(pod: dict) -> bool:
    """Whether a pod runs a command of its own (a simulated script), which may write files or logs
    at any time and fill the node's disk or inodes; an image's own process writes none."""
    spec = pod.get("spec") or {}
    return any(c.get("command") or c.get("args") for key in ("initContainers", "containers")
               for c in spec.get(key) or ())


def storage_limited(pod: dict) -> bool:
    """Whether the pod has a local storage limit the manager enforces at each pass: an emptyDir's
    sizeLimit or a container's ephemeral-storage limit."""
    spec = pod.get("spec") or {}
    return any((v.get("emptyDir") or {}).get("sizeLimit") for v in spec.get("volumes") or ()) or any(
        EPHEMERAL_STORAGE in ((c.get("resources") or {}).get("limits") or {})
        for key in ("initContainers", "containers") for c in spec.get(key) or ())


def storage_violation(pod: dict, stats: PodStats) -> tuple[str, str] | None:
    """localStorageEviction's checks of one pod, in upstream's order: (signal, message) of the first
    limit its usage exceeds (an emptyDir's sizeLimit, the pod's ephemeral-storage limit, a
    container's), or None."""
    spec = pod.get("spec") or {}
    for v in spec.get("volumes") or ():
        if "emptyDir" not in v:
            continue
        size, used = quantity_or_none((v.get("emptyDir") or {}).get("sizeLimit")), stats.volumes.get(v.get("name", ""))
        if size is not None and size.value > 0 and used is not None and used > size.value:
            return EMPTY_DIR_LIMIT, f'Usage of EmptyDir volume "{v["name"]}" exceeds the limit "{size}". '
    total = pod_limits(spec, QUANTITIES).get(EPHEMERAL_STORAGE)
    if total is not None and stats.disk > total.value:
        return POD_LIMIT, f"Pod ephemeral local storage usage exceeds the total limit of containers {total}. "
    limits = {c["name"]: q for c in spec.get("containers") or ()
              if (q := quantity_or_none(((c.get("resources") or {}).get("limits") or {}).get(EPHEMERAL_STORAGE)))
              is not None and q.ceil() != 0}
    for name, used in stats.rootfs.items():
        if name in limits and used > limits[name].value:
            return CONTAINER_LIMIT, f'Container {name} exceeded its local ephemeral storage limit "{limits[name]}". '
    return None


def _bytes(q) -> int:
    try:
        return int(parse_quantity(str(q))) if q is not None else 0
    except QuantityError:
        return 0


class EvictionManager:
    """One node's eviction manager, on its agent's clock. It passes once per MONITORING_PERIOD while a
    signal may be crossed: a pressure fault holds, a condition is within its transition period,
    the pods' usage is measured (the process runtime), or a pod runs a script of its own, whose
    files and logs may fill the disk or its inodes at any time. Otherwise the pods' usage changes only with
    their objects (the usage model reads them), so it waits for the agent to `notify` it of a pod
    or fault change and passes then, as the kernel's memory threshold notifier wakes upstream's:
    an idle node (thousands in a simulation, a year between heartbeats) keeps no timer."""

    def __init__(self, agent):
        self.agent = agent
        self.clock = agent.clock
        #: the hard thresholds, memory's first (a joined node's: its evictionHard's signals the node observes)
        self.hard = HARD
        #: the soft thresholds (a joined node's evictionSoft), and the most grace their evictions give a
        #: pod (evictionMaxPodGracePeriod; 0: its own)
        self.soft: tuple[Threshold, ...] = ()
        self.max_pod_grace_period = 0
        #: when each threshold met was first seen met (thresholdsFirstObservedAt)
        self._first_met: dict[Threshold, float] = {}
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
        """Whether a pass is due each period: a signal may be crossed without a pod or fault change,
        or a pod's writes may take it past a local storage limit or fill the node's memory (a
        memory-backed emptyDir's files: they change on their own)."""
        return bool(self.agent.faults.pressure or self.conditions or MetricsProvider.usage_sources) or any(
            storage_limited(w.pod) or memory_backed(w.pod) or _writes(w.pod)
            for w in list(self.agent.workers.values()) if self._active(w))

    async def _run(self) -> None:
        """Passes, each after a change, or while periodic one period after the last (sooner when
        a pressure fault comes or goes); after an eviction, the pass waits for the pod to stop (at
        most POD_CLEANUP_TIMEOUT), then the rest of the period, as the stats a next decision needs
        are refreshed once a period (upstream acts only on thresholds whose stats changed since
        its last pass)."""
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
                evicted = []
            if evicted and not await self._cleaned_up(evicted):
                log.info("node %s: timed out waiting for pods %s to be cleaned up", self.agent.name,
                         ", ".join(f"{w.namespace}/{w.name}" for w in evicted))
            rest = max(began + MONITORING_PERIOD - self.clock.monotonic(), 0.0)
            if evicted:
                await self.clock.sleep(rest)
            elif self._periodic():
                await self._period_or_fault(rest)
            else:
                await self._changed.wait()

    async def _period_or_fault(self, rest: float) -> None:
        """The period's end, or a pressure fault's coming or going before it (a pod's change
        waits for the period: one eviction a period while a signal stays crossed)."""
        pressure, deadline = self.agent.faults.pressure, self.clock.monotonic() + rest
        while (left := deadline - self.clock.monotonic()) > 0 and self.agent.faults.pressure == pressure:
            self._changed.clear()
            changed, period = asyncio.ensure_future(self._changed.wait()), asyncio.ensure_future(self.clock.sleep(left))
            try:
                await asyncio.wait((changed, period), return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (changed, period):
                    task.cancel()

    async def _cleaned_up(self, evicted: list) -> bool:
        """waitForPodsCleanup: whether every evicted pod stops within POD_CLEANUP_TIMEOUT."""
        deadline = self.clock.monotonic() + POD_CLEANUP_TIMEOUT
        for w in evicted:
            if not await w.ends_within(max(deadline - self.clock.monotonic(), 0.0)):
                return False
        return True

    # --- observations --------------------------------------------------------------------

    def _usage(self, uid: str, pod: dict) -> dict:
        """The containers' usage of the pod its worker `uid` runs, as the summary reports it (one
        source: MetricsProvider.usage); the usage model's answer is kept while the pod object is the same."""
        if self._provider is None:
            self._provider = MetricsProvider(self.agent.client, self.clock)
        cached = self._usage_cache.get(uid)
        if cached is not None and cached[0] is pod and not MetricsProvider.usage_sources and not memory_backed(pod):
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
            usage = self._usage(uid, pod)
            out[uid] = PodStats.of(pod, usage, local_usage(volumes, w, pod, usage))
        for uid in [u for u in self._usage_cache if u not in self.agent.workers]:
            del self._usage_cache[uid]
        return out

    async def _measure_empty_dirs(self, stats: dict[str, PodStats]) -> dict[str, PodStats]:
        """On the process runtime, the emptyDirs of the pods with a local storage limit measured on
        the node's disk (in a thread: a walk of real directories), into their stats."""
        pods = {uid: w.pod for uid, w in list(self.agent.workers.items()) if uid in stats and storage_limited(w.pod)}
        if not pods:
            return stats
        volumes = self.agent.volumes
        measured = await asyncio.to_thread(lambda: [disk_empty_dirs(volumes, pod) for pod in pods.values()])
        out = dict(stats)
        for uid, dirs in zip(pods, measured):
            out[uid] = replace(out[uid], disk=out[uid].disk + sum(dirs.values()), volumes=dirs)
        return out

    def observe(self, stats: dict[str, PodStats]) -> dict[str, Observation]:
        """makeSignalObservations: each signal's capacity and what is available of it, as the
        node's summary reports them (node.memory, node.fs, node.runtime.imageFs, node.rlimit).
        The images' filesystem is the node's (a simulated image takes no disk): its signals
        observe the same bytes and inodes as nodefs's."""
        capacity = self.agent.spec.capacity
        out = {}
        memory = _bytes(capacity.get("memory"))
        if memory:
            used = SYSTEM_MEMORY + sum(_memory_used(s) for s in stats.values())
            out[MEMORY] = Observation(max(memory - used, 0), memory)
        disk = _bytes(capacity.get("ephemeral-storage"))
        if disk:
            out[NODEFS] = out[IMAGEFS] = Observation(max(disk - sum(s.disk for s in stats.values()), 0), disk)
            inodes = disk // BYTES_PER_INODE
            out[NODEFS_INODES] = out[IMAGEFS_INODES] = Observation(
                max(inodes - sum(s.inodes for s in stats.values()), 0), inodes)
        out[PIDS] = Observation(max(PID_MAX - sum(s.processes for s in stats.values()), 0), PID_MAX)
        return out

    def observations(self, stats: dict[str, PodStats]) -> dict[str, Observation]:
        """The signals as the node's summary reports them from its running pods' `stats`: observed,
        with any pressure fault's leak."""
        return self._faulted(self.observe(stats))

    def _faulted(self, observations: dict[str, Observation]) -> dict[str, Observation]:
        """The observations with each pressure fault's leak: half its threshold left (as the node's
        metrics show it: metrics/usage.with_leak)."""
        pressure = self.agent.faults.pressure
        out = dict(observations)
        for t in self.hard:
            o = out.get(t.signal)
            if o is not None and SIGNALS[t.signal][0] in pressure:
                used = with_leak(o.capacity - o.available, o.capacity, t.value(o.capacity))
                out[t.signal] = Observation(o.capacity - used, o.capacity)
        return out

    # --- a pass --------------------------------------------------------------------------

    async def synchronize(self) -> list:
        """One pass: observe, report the conditions, evict every pod past a local storage limit,
        and if none was, the first pod in rank for the most pressing threshold crossed (memory
        first). The evicted pods' workers."""
        if self.agent.faults.lease_stop:  # the kubelet is gone
            return []
        stats = self.pod_stats()
        if self.agent.volumes.host_paths:
            stats = await self._measure_empty_dirs(stats)
        real = self.observe(stats)
        now = self.clock.monotonic()
        thresholds = (*self.hard, *self.soft)
        for t in thresholds:  # (a soft threshold's condition does not wait for its grace period)
            o = real.get(t.signal)
            if o is not None and o.available < t.value(o.capacity):
                self._crossed_at[SIGNALS[t.signal][0]] = now
        conditions = frozenset(c for c, at in self._crossed_at.items() if now - at < PRESSURE_TRANSITION_PERIOD)
        if conditions != self.conditions:
            self.conditions = conditions
            await self.agent.eviction_conditions_changed()
        # (by the pod's UID now: a static pod's worker keeps the UID of the mirror pod it first ran,
        # which keys its stats, while its pod is the mirror pod made since)
        workers = {w.pod["metadata"]["uid"]: w for w in self.agent.workers.values() if self._active(w)}
        if evicted := await self._local_storage_eviction(workers, stats):
            return evicted
        observations = self._faulted(real)
        crossed = [t for t in thresholds if (o := observations.get(t.signal)) is not None and
                   o.available < t.value(o.capacity)]
        if not crossed:  # (the common pass: nothing to remember, nothing to rank)
            self._first_met = {}
            return []
        self._first_met = {t: self._first_met.get(t, now) for t in crossed}
        met = [t for t in crossed if t.grace_period is None or now - self._first_met[t] >= t.grace_period]
        if not met:
            return []
        threshold = min(met, key=lambda t: _PRIORITY[t.signal])  # byEvictionPriority: memory first, hard before soft
        resource = SIGNALS[threshold.signal][1]
        await self.agent.record(THRESHOLD_MET, f"Attempting to reclaim {resource}", "Warning")
        if not workers:
            log.info("node %s: eviction thresholds have been met, but no pods are active to evict", self.agent.name)
            return []
        ranked = RANK[threshold.signal]([w.pod for w in workers.values()],
                                        lambda p: stats.get(workers[p["metadata"]["uid"]].uid))
        for pod in ranked:
            if is_critical(pod):
                log.info("node %s: eviction manager: cannot evict a critical pod %s/%s", self.agent.name,
                         pod["metadata"].get("namespace"), pod["metadata"]["name"])
                continue
            w = workers[pod["metadata"]["uid"]]
            why, annotations = message(threshold.signal, pod, stats.get(w.uid), observations[threshold.signal],
                                       (threshold,))
            await self._evict(w, threshold.signal, why, annotations,
                              (("DisruptionTarget", TERMINATION_BY_KUBELET, why),),
                              IMMEDIATE_GRACE if threshold.grace_period is None else self._soft_grace(pod))
            return [w]
        log.info("node %s: eviction manager: unable to evict any pods from the node", self.agent.name)
        return []

    async def _local_storage_eviction(self, workers: dict, stats: dict[str, PodStats]) -> list:
        """localStorageEviction: every running pod past one of its local storage limits, whatever
        the node's signals (LocalStorageCapacityIsolation), without a DisruptionTarget condition."""
        evicted = []
        for w in workers.values():
            s = stats.get(w.uid)
            found = storage_violation(w.pod, s) if s is not None else None
            if found is None:
                continue
            if is_critical(w.pod):
                log.info("node %s: eviction manager: cannot evict a critical pod %s/%s", self.agent.name,
                         w.namespace, w.name)
                continue
            await self._evict(w, *found)
            evicted.append(w)
        return evicted

    def _soft_grace(self, pod: dict) -> int | None:
        """A soft threshold's eviction's grace: evictionMaxPodGracePeriod, or the pod's own where
        shorter; None (the pod's own) where that is 0, as the pod workers read a zero override. A
        negative evictionMaxPodGracePeriod is no "defer to the pod" in 1.37, whatever its flag's
        help says: the override is the negative value, which the pod workers raise to 1 s."""
        grace = min(self.max_pod_grace_period, (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        return None if grace == 0 else max(grace, IMMEDIATE_GRACE)

    async def _evict(self, w, signal: str, why: str, annotations: dict[str, str] | None = None,
                     conditions: tuple = (), grace: int | None = IMMEDIATE_GRACE) -> None:
        """evictPod: the Evicted event (with its annotations), the pod stopped with `grace` (the
        immediate one; None: its own) and Failed, and kubelet_evictions counted under `signal`."""
        pod = w.pod
        await self.agent.recorder.emit({"kind": "Pod", "apiVersion": "v1", "metadata": pod["metadata"]},
                                       "Warning", REASON, why, annotations=annotations)
        w.evict(Eviction(REASON, why, conditions, grace))
        self.evictions[signal] = self.evictions.get(signal, 0) + 1
        log.info("node %s: evicted pod %s/%s: %s", self.agent.name, w.namespace, w.name, why)

    @staticmethod
    def _active(w) -> bool:
        """The pods the kubelet counts active: not ended, not being deleted, not stopped already."""
        return (w.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and \
            not w.pod["metadata"].get("deletionTimestamp") and w.eviction is None and not w.finished
