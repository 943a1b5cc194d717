"""A running pod's volume stats, as the kubelet's volume stat calculator gathers them for
/stats/summary (`volume` of each pod) and the kubelet_volume_stats_* metrics
(pkg/kubelet/server/stats/volume_stat_calculator.go), each volume measured as its plugin's
MetricsProvider measures it, from the node's real directory for the volume:

- configMap, secret, downwardAPI and projected (MetricsDu): bytes and inodes used from a walk
  of the directory, capacity, available and the inode totals from statfs of its filesystem;
- a claim on the built-in CSI driver, as its NodeGetVolumeStats answers: the volume's capacity
  (its PersistentVolume's, as the directory has no filesystem of its own), used from a walk,
  available what the capacity leaves (no more than the filesystem has free), inodes from statfs;
- a claim on a local or NFS volume (MetricsStatFS): statfs alone;
- hostPath, a claim's too (MetricsNil): nothing;
- a Block claim (MetricsBlock): its device's size as capacity, the rest 0 (standard tools tell no
  more of a device): the process runtime's device file has the disk's size; the simulated
  runtime's is an empty stand-in (map_device), so there the disk is its PersistentVolume's capacity.

An emptyDir on disk is measured as the kubelet-written ones: where the process runtime runs the
pod, from its directory (its files are there); on the simulated runtime, where its files live in
the pod's memory (simulated_fs), from that tree (`tree_usage`, as du would count it on the node's
filesystem), with statfs of its directory on the node for the totals. One with medium Memory is
a tmpfs upstream, measured by du as well: on the simulated runtime its tree's count, its capacity
the tmpfs's size (`tmpfs_size`), its directories taking no pages; on the process runtime, which
mounts it (tmpfs.py), as a disk emptyDir is measured (du, and statfs of the tmpfs). Volumes
without a claim come first, then the claims with
their `pvcRef` (upstream walks a map, so its order is not fixed).

Each volume's measurement stands for the kubelet's volumeStatsAggPeriod (1 minute) on the node's
clock (`StatCache`), as its volume stat calculator serves the latest one it made (du and statfs
run once a period, not at each scrape): its `time` says when it was made.

A simulated pod's ephemeral storage (calcEphemeralStorage) adds what it holds on the node's disk
outside these (`local_usage`: its containers' writable layers and log files, its etc-hosts file)
to its local ephemeral volumes' (`ephemeral_volumes`). A memory-backed emptyDir's pages are
charged to memory instead (`LocalUsage.tmpfs`; shmem counts in a cgroup's working set): to the
running container that mounts it (`tmpfs_charges`), so to its pod's too."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...machinery.podresources import QUANTITIES, pod_limits
from ...machinery.quantity import Quantity, QuantityError, parse
from ...volume.resize import volume_capacity
from ..simulated_fs import Dir
from ..storage.provisioner import CSI_DRIVER

if TYPE_CHECKING:
    from .manager import VolumeManager

#: volumes the kubelet writes and measures by walking them (MetricsDu)
_DU_KINDS = frozenset({"configMap", "secret", "downwardAPI", "projected"})
#: how a claim's volume is measured: by the CSI driver, by statfs, as a device, or not at all (None)
CSI, STATFS, BLOCK = "csi", "statfs", "block"
#: the kubelet's volumeStatsAggPeriod (KubeletConfiguration, default 1m): how long a measurement stands
AGG_PERIOD = 60.0
#: the node filesystem's block: what du counts a directory, and a file's data rounded up to
_BLOCK = 4096
#: the files a container's root holds that the kubelet and runtime mount there, not its own writes
_MOUNTED_FILES = frozenset({"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"})


class StatCache:
    """Each volume's last measurement by (pod uid, volume name), standing `period` seconds on the
    node's monotonic clock. Read and kept from the measuring thread too: single dict operations."""

    def __init__(self, period: float = AGG_PERIOD):
        self.period = period
        self._latest: dict[tuple[str, str], tuple[float, dict]] = {}

    def fresh(self, key: tuple[str, str], now: float) -> dict | None:
        hit = self._latest.get(key)
        return hit[1] if hit is not None and now - hit[0] < self.period else None

    def keep(self, key: tuple[str, str], now: float, entry: dict) -> None:
        self._latest[key] = (now, entry)

    def prune(self, now: float) -> None:
        """Forget what no longer stands (a gone pod's volumes among it)."""
        for key, (at, _) in list(self._latest.items()):
            if now - at >= self.period:
                self._latest.pop(key, None)


def tree_usage(tree: Dir | None, tmpfs: bool = False) -> tuple[int, int]:
    """(bytes, inodes) du counts of an in-memory volume (simulated_fs): each directory one block
    (none on a `tmpfs`, whose directories take no pages), each file its data in whole blocks; none
    yet (no container looked) is an empty directory."""
    directory = 0 if tmpfs else _BLOCK
    if tree is None:
        return directory, 1
    used = inodes = 0
    stack: list = [tree]
    while stack:
        node = stack.pop()
        inodes += 1
        if isinstance(node, Dir):
            used += directory
            stack.extend(node.entries.values())
        else:
            used += _blocks(len(node.data))
    return used, inodes


def writable_layer(root: Dir | None) -> tuple[int, int]:
    """(bytes, inodes) a simulated container wrote to its own root (its writable layer, the rootfs a
    container's ephemeral storage counts): its files' data in whole blocks, less the files the
    kubelet and the runtime mount in its /etc, an inode each; directories count nothing, as an
    overlay's upper directory holds only those a write copied up."""
    if root is None:
        return 0, 0
    used = inodes = 0
    stack: list = [(root, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Dir):
            stack.extend((child, f"{path}/{name}") for name, child in node.entries.items())
        elif path not in _MOUNTED_FILES:
            used += _blocks(len(node.data))
            inodes += 1
    return used, inodes


def disk_empty_dirs(mgr: VolumeManager, pod: dict) -> dict[str, int]:
    """Each of the pod's emptyDirs on disk measured where the process runtime runs it (its real
    directory, as MetricsDu walks it); blocking: run it in a thread."""
    uid = pod["metadata"]["uid"]
    return {v["name"]: _disk_usage(mgr.volume_dir(uid, v["name"]))[0] for v in (pod.get("spec") or {}).get("volumes")
            or () if "emptyDir" in v and (v.get("emptyDir") or {}).get("medium") != "Memory"
            and os.path.isdir(mgr.volume_dir(uid, v["name"]))}


@dataclass(frozen=True)
class LocalUsage:
    """What a simulated pod holds on the node's disk outside its claims and the volumes the kubelet
    writes there, as du counts it: each in-memory emptyDir (`tree_usage`), each running
    container's writable layer and its log files (the kubelet's CRI log files of its instances
    kept: the current one and the last that ended), and the pod's etc-hosts file, with the inodes
    of all these; and apart, in memory, not on disk, each memory-backed emptyDir (`tmpfs`)."""

    empty_dirs: dict[str, int] = field(default_factory=dict)
    rootfs: dict[str, int] = field(default_factory=dict)
    logs: dict[str, int] = field(default_factory=dict)
    etc_hosts: int = 0
    tmpfs: dict[str, int] = field(default_factory=dict)
    inodes: int = 0

    @property
    def total(self) -> int:
        """calcEphemeralStorage's sum of these (the volumes on disk are the summary's to add)."""
        return sum(self.empty_dirs.values()) + sum(self.rootfs.values()) + sum(self.logs.values()) + self.etc_hosts


def local_usage(mgr: VolumeManager, worker, pod: dict, containers) -> LocalUsage:
    """What a simulated pod and its running `containers` hold on the node's disk now (LocalUsage),
    as the summary and the eviction manager count its ephemeral storage; nothing on the process
    runtime, whose files are real (its emptyDirs are measured with the volume stats)."""
    if mgr.host_paths:
        return LocalUsage()
    hosts = worker.etc_hosts()
    tmpfs = tmpfs_usage(mgr, worker, pod)
    # (one loop each, no intermediate dicts: the eviction manager runs this for every pod at each pass)
    empty_dirs, rootfs, logs, inodes = {}, {}, {}, int(hosts is not None)
    for name in in_memory_volumes(mgr, pod):
        if name not in tmpfs:
            empty_dirs[name], files = tree_usage(worker.empty_dir(name))
            inodes += files
    for name in containers:
        rootfs[name], files = writable_layer(worker.container_root(name))
        sizes = worker.log_sizes(name)
        logs[name] = sum(map(_blocks, sizes))
        inodes += files + len(sizes)
    return LocalUsage(empty_dirs, rootfs, logs, 0 if hosts is None else _blocks(len(hosts)), tmpfs, inodes)


def tmpfs_usage(mgr: VolumeManager, worker, pod: dict) -> dict[str, int]:
    """The pages each of a pod's memory-backed emptyDirs holds, by volume: a simulated pod's trees
    counted, a process runtime pod's tmpfs measured as du measures it (blocking, but a tmpfs is
    small and in memory)."""
    if not mgr.host_paths:
        return {name: tree_usage(worker.empty_dir(name), True)[0] for name in memory_backed(pod)}
    uid = pod["metadata"]["uid"]
    return {name: _disk_usage(path)[0] for name in memory_backed(pod) if os.path.isdir(path := mgr.volume_dir(uid, name))}


def tmpfs_charges(pod: dict, tmpfs: dict[str, int], running) -> dict[str, int]:
    """Each memory-backed emptyDir's pages (`tmpfs`, by volume) by the container whose memory they
    count in: the first of the `running` ones (init, app, then ephemeral containers) that mounts
    it, as a tmpfs page counts in the cgroup of the process that wrote it and the one mounting it
    is where its writes come from; "" for the pages no running container mounts, which the pod's
    cgroup keeps."""
    spec, running = pod.get("spec") or {}, set(running)
    mounting = [(c["name"], {m.get("name") for m in c.get("volumeMounts") or ()})
                for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or ()
                if c.get("name") in running]
    out: dict[str, int] = {}
    for volume, used in tmpfs.items():
        who = next((name for name, mounts in mounting if volume in mounts), "")
        out[who] = out.get(who, 0) + used
    return out


def _blocks(size: int) -> int:
    """A file of `size` bytes as du counts it: whole blocks."""
    return -(-size // _BLOCK) * _BLOCK


def ephemeral_volumes(pod: dict) -> set[str]:
    """IsLocalEphemeralVolume: the pod's volumes on the node's own disk that live as long as it does
    (an emptyDir of the default medium, a configMap, a gitRepo), which its ephemeral storage counts;
    not a secret's, downwardAPI's or projected volume's, nor a memory-backed emptyDir (tmpfs)."""
    return {v.get("name", "") for v in (pod.get("spec") or {}).get("volumes") or ()
            if "configMap" in v or "gitRepo" in v or "emptyDir" in v and not (v.get("emptyDir") or {}).get("medium")}


@dataclass(frozen=True)
class ClaimVolume:
    """What the kubelet knows of a pod's claim once mounted: the claim, how its volume is
    measured, and the volume's capacity in bytes (its PersistentVolume's)."""
    namespace: str
    name: str
    meter: str | None
    capacity: int


def claim_volume(namespace: str, claim: str, pv: dict) -> ClaimVolume:
    spec = pv.get("spec") or {}
    meter = BLOCK if spec.get("volumeMode") == "Block" else CSI if (spec.get("csi") or {}).get("driver") == CSI_DRIVER \
        else STATFS if spec.get("local") or spec.get("nfs") else None
    return ClaimVolume(namespace, claim, meter, int(volume_capacity(pv) or 0))


def in_memory_volumes(mgr: VolumeManager, pod: dict) -> list[str]:
    """The pod's emptyDirs whose files live in its worker's memory (the simulated runtime's), of
    either medium."""
    names = [vol.get("name", "") for vol in (pod.get("spec") or {}).get("volumes") or ()
             if next((k for k in vol if k != "name"), "emptyDir") == "emptyDir"]
    return [] if not names or mgr.host_paths else names


def memory_backed(pod: dict) -> set[str]:
    """The pod's emptyDirs of medium Memory: a tmpfs each, charged to the pod's memory."""
    return {vol.get("name", "") for vol in (pod.get("spec") or {}).get("volumes") or ()
            if (vol.get("emptyDir") or {}).get("medium") == "Memory"}


def tmpfs_size(pod: dict, vol: dict, allocatable: int) -> int:
    """calculateEmptyDirMemorySize (SizeMemoryBackedVolumes): the node's allocatable memory, the
    pod's memory limit where its cgroup has one (every container limited) and it is smaller, the
    volume's sizeLimit where it is positive and smaller still; 0 where none of them is known."""
    spec = pod.get("spec") or {}
    size = allocatable
    limited = ((spec.get("resources") or {}).get("limits") or {}).get("memory") or all(
        ((c.get("resources") or {}).get("limits") or {}).get("memory") for c in spec.get("containers") or ())
    limit = pod_limits(spec, QUANTITIES).get("memory") if limited else None
    for candidate in (limit, quantity_or_none((vol.get("emptyDir") or {}).get("sizeLimit"))):
        value = int(candidate.value) if candidate is not None else 0
        if value > 0 and (not size or value <= size):
            size = value
    return size


def quantity_or_none(q) -> Quantity | None:
    """A spec's quantity parsed; None where it is unset or garbage."""
    try:
        return parse(str(q)) if q is not None else None
    except QuantityError:
        return None


def pod_volume_stats(mgr: VolumeManager, pod: dict, stamp: str, claims_only: bool = False,
                     cache: StatCache | None = None, now: float = 0.0,
                     in_memory: dict[str, tuple[int, int]] | None = None, allocatable: int = 0) -> list[dict]:
    """statsapi.VolumeStats of each of the pod's volumes that its plugin measures (`claims_only`:
    of its claims alone, all the metrics collector reports): from `cache` where a measurement
    stands at `now`, else measured (`stamp` its time) and kept there. `in_memory`: the du
    counts of the pod's in-memory emptyDirs (`in_memory_volumes`) by name, for those to measure;
    `allocatable` the node's allocatable memory, a memory-backed one's size without a smaller limit."""
    uid = pod["metadata"]["uid"]
    claims = mgr.claims.get(uid, {})
    own, persistent = [], []
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        name = vol.get("name", "")
        claim = claims.get(name)
        if claims_only and claim is None:
            continue
        entry = cache.fresh((uid, name), now) if cache is not None else None
        if entry is None:
            entry = _volume(mgr, pod, vol, claim, stamp, in_memory or {}, allocatable)
            if entry is None:
                continue
            if cache is not None:
                cache.keep((uid, name), now, entry)
        (persistent if "pvcRef" in entry else own).append(entry)
    return own + persistent


def _volume(mgr: VolumeManager, pod: dict, vol: dict, claim: ClaimVolume | None, stamp: str,
            in_memory: dict[str, tuple[int, int]], allocatable: int) -> dict | None:
    """One volume's VolumeStats as its plugin's MetricsProvider measures it; None if it measures none."""
    name = vol.get("name", "")
    kind = next((k for k in vol if k != "name"), "emptyDir")
    path = mgr.volume_dir(pod["metadata"]["uid"], name)
    tmpfs = kind == "emptyDir" and (vol.get("emptyDir") or {}).get("medium") == "Memory"
    if kind in _DU_KINDS or kind == "emptyDir":
        if not mgr.host_paths and kind == "emptyDir":
            if name not in in_memory or (fs := _measure(path, walk=False)) is None:
                return None
            fs["usedBytes"], fs["inodesUsed"] = in_memory[name]
            if tmpfs and (size := tmpfs_size(pod, vol, allocatable)):  # statfs of the tmpfs: its size
                fs["capacityBytes"], fs["availableBytes"] = size, max(size - fs["usedBytes"], 0)
        elif (fs := _measure(path, walk=True)) is None:
            return None
        return {"time": stamp, **fs, "name": name}
    if claim is None or claim.meter is None:
        return None
    ref = {"name": claim.name, "namespace": claim.namespace}
    if claim.meter == BLOCK:
        if (size := _device_size(path)) is None:
            return None
        return {"time": stamp, "availableBytes": 0, "capacityBytes": size or claim.capacity, "usedBytes": 0,
                "inodesFree": 0, "inodes": 0, "inodesUsed": 0, "name": name, "pvcRef": ref}
    fs = _measure(path, walk=claim.meter == CSI)
    if fs is None:
        return None
    if claim.meter == CSI:
        fs["capacityBytes"] = claim.capacity
        fs["availableBytes"] = max(min(claim.capacity - fs["usedBytes"], fs["availableBytes"]), 0)
    return {"time": stamp, **fs, "name": name, "pvcRef": ref}


def _device_size(path: str) -> int | None:
    """The size of the device the pod's volume links to, as seeking to its end tells (a device
    file's stat says 0); None if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def _measure(path: str, walk: bool) -> dict | None:
    """FsStats of the directory: statfs of its filesystem, and with `walk` the bytes (allocated
    blocks, each inode once) and inodes under it, as the kubelet's du does; None if it is gone."""
    try:
        fs = os.statvfs(path)
    except OSError:
        return None
    out = {"availableBytes": fs.f_bavail * fs.f_frsize, "capacityBytes": fs.f_blocks * fs.f_frsize,
           "usedBytes": (fs.f_blocks - fs.f_bfree) * fs.f_frsize,
           "inodesFree": fs.f_ffree, "inodes": fs.f_files, "inodesUsed": fs.f_files - fs.f_ffree}
    if walk:
        out["usedBytes"], out["inodesUsed"] = _disk_usage(path)
    return out


def _disk_usage(path: str) -> tuple[int, int]:
    seen: set[tuple[int, int]] = set()
    used = 0
    stack = [path]
    while stack:
        top = stack.pop()
        try:
            info = os.stat(top) if top == path else os.lstat(top)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        used += info.st_blocks * 512
        if stat.S_ISDIR(info.st_mode):  # lstat's: a link inside is counted, not followed
            try:
                stack.extend(e.path for e in os.scandir(top))
            except OSError:
                continue
    return used, len(seen)
