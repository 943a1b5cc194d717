"""Resource limits of the process runtime's containers, set as the kubelet's container manager
and runc set them and enforced by the kernel: each container's cgroup of the memory and cpu
controllers holds its limits (memory.max or memory.limit_in_bytes from limits.memory; cpu.max
or cpu.cfs_quota_us from limits.cpu, which throttles; cpu.weight or cpu.shares from
requests.cpu), below its pod's cgroup, below its QoS class's: kubepods/pod<uid> (Guaranteed),
kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid> (QOS_LEVELS). A pod's cgroup has the
sum of its containers' limits where each of them has one (ResourceConfigForPod: PodLimits), its
cpu shares their requests', its pids.max the kubelet's podPidsLimit (a pod's processes together,
a fork bomb's included, never more; none of a container's own, as the CRI passes none). The
burstable QoS cgroup's shares are its pods' cpu requests together. A container over its memory
limit is OOM-killed in its cgroup; the runtime reads the cgroup's oom_kill count (memory.events,
or memory.oom_control on v1) to report the instance as OOMKilled, as containerd does.

The controllers are those this host lets the runtime write: a cgroup2 hierarchy's where the
runtime's cgroup (cgroup.py) is offered them (each level's cgroup.subtree_control then enables
them), else each controller's own cgroup v1 hierarchy (a hybrid host's /sys/fs/cgroup/memory,
/sys/fs/cgroup/cpu and /sys/fs/cgroup/pids), below this process's cgroup there, in a
nanokube-TAG tree removed as the v2 one is (a crashed run's at the next start). A launched process joins the v1 cgroups too
(launch.py). Without a memory controller the runtime falls back to a watchdog (`over_limit`):
a container whose processes' resident memory exceeds its limit is killed (SIGKILL, OOMKilled,
exit 137) within a second; without a cpu controller cpu limits are not enforced. Each missing
controller is logged as the runtime starts, and a pids limit without a pids controller as a pod
starts.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from dataclasses import dataclass, field

from ...machinery.podresources import INTEGERS, pod_limits, pod_requests
from ..inplace import POD
from .cgroup import made, own_cgroup_dir

log = logging.getLogger(__name__)

#: the controllers whose limits the runtime sets
CONTROLLERS = ("memory", "cpu", "pids")
#: the CFS period the kubelet sets (100 ms), in microseconds
PERIOD = 100_000
#: the quota and shares floors of the kubelet's MilliCPUToQuota and MilliCPUToShares
MIN_QUOTA, MIN_SHARES, MAX_SHARES = 1000, 2, 262144


def qos_parent(pod: dict) -> str:
    """The pod's cgroup below the runtime's, as the kubelet names it by QoS class (status.qosClass,
    which the API server sets as it creates the pod)."""
    qos = (pod.get("status") or {}).get("qosClass") or "BestEffort"
    uid = pod["metadata"]["uid"]
    return f"kubepods/pod{uid}" if qos == "Guaranteed" else f"kubepods/{qos.lower()}/pod{uid}"


@dataclass(frozen=True)
class Settings:
    """What one cgroup is limited to: bytes of memory, milli-CPU of quota and processes (None:
    unlimited), milli-CPU of requests for its shares."""

    memory: int | None = None
    cpu_limit: int | None = None
    cpu_request: int = 0
    pids: int | None = None

    def files(self, version: int, controller: str) -> dict[str, str]:
        """The controller's files and values in cgroup `version` (the kubelet's conversions)."""
        shares = min(max(self.cpu_request * 1024 // 1000, MIN_SHARES), MAX_SHARES)
        quota = None if self.cpu_limit is None else max(self.cpu_limit * PERIOD // 1000, MIN_QUOTA)
        if controller == "pids":
            return {"pids.max": "max" if self.pids is None else str(self.pids)}
        if controller == "memory":
            key = "memory.max" if version == 2 else "memory.limit_in_bytes"
            return {key: str(self.memory) if self.memory is not None else "max" if version == 2 else "-1"}
        if version == 2:
            return {"cpu.weight": str(weight(shares)),
                    "cpu.max": f"{quota if quota is not None else 'max'} {PERIOD}"}
        return {"cpu.cfs_period_us": str(PERIOD), "cpu.shares": str(shares),
                "cpu.cfs_quota_us": str(quota if quota is not None else -1)}


def weight(shares: int) -> int:
    """cgroup v2's cpu.weight for v1 cpu shares, as runc and crun convert them since 2025 (the
    Kubernetes blog's "new conversion"): log-scaled so that 2, 1024 and 262144 shares are weights
    1, 100 (v2's default, as 1024 is v1's) and 10000."""
    log2 = math.log2(shares)
    return math.ceil(10 ** ((log2 * log2 + 125 * log2) / 612 - 7 / 34))


def container_settings(allocated: dict) -> Settings:
    """A container's, from the requests and limits allocated to it (inplace.desired's)."""
    limits = {k: INTEGERS.value(k, v) for k, v in (allocated.get("limits") or {}).items()}
    requests = {k: INTEGERS.value(k, v) for k, v in (allocated.get("requests") or {}).items()}
    return Settings(limits.get("memory"), limits.get("cpu"), requests.get("cpu") or 0)


def pod_settings(pod: dict, allocation: dict[str, dict], pids: int | None = None) -> Settings:
    """The pod cgroup's: its limits (PodLimits) where every container has one or the pod sets it at
    pod level, its requests' cpu for its shares, with each container's `allocation` (and the pod's
    own, at POD, where it sets pod-level resources); `pids`: the node's podPidsLimit where it sets
    one."""
    spec = dict(pod.get("spec") or {})
    if POD in allocation:  # the pod-level resources as allocated (resized in place)
        spec["resources"] = allocation[POD]
    every = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    for key in ("initContainers", "containers"):
        if spec.get(key):
            spec[key] = [{**c, "resources": allocation.get(c["name"], c.get("resources") or {})} for c in spec[key]]
    limits, pod_level = pod_limits(spec, INTEGERS), (spec.get("resources") or {}).get("limits") or {}

    def capped(name: str) -> int | None:
        limited = name in pod_level or all(name in ((allocation.get(c["name"]) or {}).get("limits") or ())
                                           for c in every)
        return limits.get(name) if limited else None
    return Settings(capped("memory"), capped("cpu"), pod_requests(spec, INTEGERS).get("cpu") or 0, pids)


#: the QoS levels' own settings: kubepods the shares of the host's CPUs (the kubelet's: its node's
#: allocatable; every node here is this host, and without them the whole tree would weigh as one
#: process against the host's), besteffort the least; burstable's follow its pods (`Limits.burstable`)
QOS_LEVELS = {"kubepods": Settings(cpu_request=(os.cpu_count() or 1) * 1000), "besteffort": Settings()}


@dataclass
class Hierarchy:
    """One cgroup hierarchy the runtime limits with: its tree's root, its version, the
    controllers it serves the runtime."""

    root: str
    version: int
    controllers: tuple[str, ...]


@dataclass
class Limits:
    """The runtime's limiting hierarchies (`create`), and the pods' cgroups in them."""

    tag: str
    hierarchies: list[Hierarchy] = field(default_factory=list)
    _pids_told: bool = False

    def create(self, v2_root: str | None) -> None:
        """Find the controllers: v2 ones offered to the runtime's cgroup `v2_root` (made by
        cgroup.py), else v1 ones under a nanokube-TAG tree of their own (a crashed run's removed)."""
        self.hierarchies = []
        found: set[str] = set()
        if v2_root is not None and (offered := v2_controllers(v2_root)):
            self.hierarchies.append(Hierarchy(v2_root, 2, offered))
            found.update(offered)
        for controller in CONTROLLERS:
            if controller in found or (base := own_cgroup_dir(controller)) is None:
                continue
            root = os.path.join(base, f"nanokube-{self.tag}")
            remove_v1(root)
            try:
                os.mkdir(root)
            except OSError as e:
                log.warning("no %s cgroup for the process runtime (%s)", controller, e)
                continue
            same = next((h for h in self.hierarchies if h.root == root), None)  # cpu,cpuacct co-mounted
            if same is not None:
                same.controllers += (controller,)
            else:
                self.hierarchies.append(Hierarchy(root, 1, (controller,)))
            found.add(controller)
        if "memory" not in found:
            log.warning("no memory cgroup controller: the process runtime kills a container over its memory "
                        "limit by a once-a-second check of its resident memory")
        if "cpu" not in found:
            log.warning("no cpu cgroup controller: the process runtime's cpu limits are not enforced")

    @property
    def memory(self) -> bool:
        """Whether the kernel enforces memory limits (else the runtime's watchdog does)."""
        return any("memory" in h.controllers for h in self.hierarchies)

    def close(self) -> None:
        for h in self.hierarchies:
            if h.version == 1:
                remove_v1(h.root)
        self.hierarchies = []

    def pod(self, parent: str, settings: Settings) -> None:
        """Make the pod's cgroups (`parent`, qos_parent's) and set its limits (a pids limit no
        controller enforces said once)."""
        if settings.pids is not None and not self._pids_told and \
                not any("pids" in h.controllers for h in self.hierarchies):
            self._pids_told = True
            log.warning("no pids cgroup controller: the process runtime's podPidsLimit %d is not enforced",
                        settings.pids)
        for h in self.hierarchies:
            path = h.root
            for name in parent.split("/"):
                if h.version == 2:
                    _write(path, "cgroup.subtree_control", " ".join(f"+{c}" for c in h.controllers))
                path = os.path.join(path, name)
                if made(path, False, f"pod {parent} runs without its {_names(h)} limits") is None:
                    break
                if name in QOS_LEVELS:
                    _apply(h, path, QOS_LEVELS[name])
            else:
                if h.version == 2:
                    _write(path, "cgroup.subtree_control", " ".join(f"+{c}" for c in h.controllers))
                _apply(h, path, settings)

    def burstable(self, cpu_request: int) -> None:
        """The burstable QoS cgroup's cpu shares: the milli-CPU its pods request together, as the
        kubelet's QoS container manager sets them as pods come and go (MilliCPUToShares; none: 2).
        Its memory is left unlimited: 1.37's MemoryQoS, on by default, writes memory.min and
        memory.high only where the node's memoryReservationPolicy and memoryThrottlingFactor ask."""
        for h in self.hierarchies:
            if "cpu" in h.controllers and os.path.isdir(path := os.path.join(h.root, "kubepods", "burstable")):
                for name, value in Settings(cpu_request=cpu_request).files(h.version, "cpu").items():
                    _write(path, name, value)

    def container(self, parent: str, name: str, settings: Settings) -> list[str]:
        """Make the container's cgroups below its pod's and set its limits; the v1 ones, which its
        processes join besides cgroup.py's."""
        joins = []
        for h in self.hierarchies:
            path = os.path.join(h.root, parent, name)
            if made(path, True, f"container {name} of {parent} runs without its {_names(h)} limits") is None:
                continue
            if h.version == 2:
                _write(path, "memory.oom.group", "1")  # the kubelet's on v2: an OOM kill takes the whole container
            else:
                joins.append(path)
            _apply(h, path, settings)
        return joins

    def resize(self, parent: str, pod: Settings, containers: dict[str, Settings]) -> None:
        """New limits for a running pod's cgroups: the pod's before its containers' and again after
        (a v1 parent's cpu quota may not be below a child's, nor a child's above it); a pod whose
        cgroup could not be made (`pod`, logged there) is left as it runs."""
        for h in self.hierarchies:
            if not os.path.isdir(os.path.join(h.root, parent)):
                continue
            first = _apply(h, os.path.join(h.root, parent), pod)
            for name, s in containers.items():
                if os.path.isdir(path := os.path.join(h.root, parent, name)):
                    _apply(h, path, s)
            if not first:
                _apply(h, os.path.join(h.root, parent), pod)

    def oom_kills(self, parent: str, name: str) -> int:
        """How many processes the kernel OOM-killed in the container's memory cgroup so far."""
        for h in self.hierarchies:
            if "memory" in h.controllers:
                events = "memory.events" if h.version == 2 else "memory.oom_control"
                try:
                    with open(os.path.join(h.root, parent, name, events)) as f:
                        return next((int(line.split()[1]) for line in f if line.startswith("oom_kill ")), 0)
                except OSError:
                    return 0
        return 0

    def remove_pod(self, parent: str) -> None:
        """Remove the pod's v1 cgroups (cgroup.py removes the v2 ones), its processes killed."""
        for h in self.hierarchies:
            if h.version == 1:
                remove_v1(os.path.join(h.root, parent))


def over_limit(settings: Settings, rss: int) -> bool:
    """The watchdog's test, without a memory controller: resident memory above the limit."""
    return settings.memory is not None and rss > settings.memory


def v2_controllers(root: str) -> tuple[str, ...]:
    """The controllers the runtime's v2 cgroup is offered, where its parent enables them (tried)."""
    parent = os.path.dirname(root)
    offered = _read(parent, "cgroup.controllers").split()
    wanted = [c for c in CONTROLLERS if c in offered]
    for c in wanted:
        if c not in _read(parent, "cgroup.subtree_control").split():
            _write(parent, "cgroup.subtree_control", f"+{c}", quiet=True)
    return tuple(c for c in wanted if c in _read(root, "cgroup.controllers").split())


def remove_v1(path: str) -> None:
    """Remove a v1 tree, deepest first, killing what is left in it (v1 has no cgroup.kill)."""
    if not os.path.isdir(path):
        return
    for parent, dirs, _ in os.walk(path, topdown=False):
        for target in [*(os.path.join(parent, d) for d in dirs), *([path] if parent == path else [])]:
            for _ in range(50):
                for pid in _read(target, "cgroup.procs").split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                try:
                    os.rmdir(target)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # killed ones on their way out
            else:
                log.warning("cgroup %s not removed", target)


def _names(h: Hierarchy) -> str:
    return " and ".join(h.controllers)


def _apply(h: Hierarchy, path: str, settings: Settings) -> bool:
    ok = True
    for controller in h.controllers:
        for name, value in settings.files(h.version, controller).items():
            ok = _write(path, name, value) and ok
    return ok


def _read(path: str, name: str) -> str:
    try:
        with open(os.path.join(path, name)) as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, name: str, value: str, quiet: bool = False) -> bool:
    try:
        with open(os.path.join(path, name), "w") as f:
            f.write(value)
        return True
    except OSError as e:
        if not quiet:
            log.warning("cgroup %s: %s not set to %s: %s", path, name, value, e)
        return False
