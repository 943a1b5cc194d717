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
- hostPath, a claim's too (MetricsNil): nothing, as upstream reports none for them.

An emptyDir on disk is measured as the kubelet-written ones where the process runtime runs the
pod (its files are in the directory), and left out on the simulated runtime (they live in the
pod's memory) and with medium Memory (a tmpfs upstream, none here). Volumes without a claim
come first, then the claims with their `pvcRef` (upstream walks a map, so its order is not
fixed)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...volume.resize import volume_capacity
from ..storage.provisioner import CSI_DRIVER

if TYPE_CHECKING:
    from .manager import VolumeManager

#: volumes the kubelet writes and measures by walking them (MetricsDu)
_DU_KINDS = frozenset({"configMap", "secret", "downwardAPI", "projected"})
#: how a claim's volume is measured: by the CSI driver, by statfs, or not at all (None)
CSI, STATFS = "csi", "statfs"


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
    meter = CSI if (spec.get("csi") or {}).get("driver") == CSI_DRIVER else \
        STATFS if spec.get("local") or spec.get("nfs") else None
    return ClaimVolume(namespace, claim, meter, int(volume_capacity(pv) or 0))


def pod_volume_stats(mgr: VolumeManager, pod: dict, stamp: str, claims_only: bool = False) -> list[dict]:
    """statsapi.VolumeStats of each of the pod's volumes that its plugin measures (`claims_only`:
    of its claims alone, all the metrics collector reports)."""
    uid = pod["metadata"]["uid"]
    claims = mgr.claims.get(uid, {})
    own, persistent = [], []
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        name = vol.get("name", "")
        kind = next((k for k in vol if k != "name"), "emptyDir")
        path = mgr.volume_dir(uid, name)
        if not claims_only and (kind in _DU_KINDS or kind == "emptyDir" and mgr.host_paths
                                and (vol.get("emptyDir") or {}).get("medium") != "Memory"):
            if (fs := _measure(path, walk=True)) is not None:
                own.append({"time": stamp, **fs, "name": name})
        elif (claim := claims.get(name)) is not None and claim.meter is not None:
            fs = _measure(path, walk=claim.meter == CSI)
            if fs is None:
                continue
            if claim.meter == CSI:
                fs["capacityBytes"] = claim.capacity
                fs["availableBytes"] = max(min(claim.capacity - fs["usedBytes"], fs["availableBytes"]), 0)
            persistent.append({"time": stamp, **fs, "name": name,
                               "pvcRef": {"name": claim.name, "namespace": claim.namespace}})
    return own + persistent


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
