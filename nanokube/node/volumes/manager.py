"""Materialises a pod's volumes under `<root>/<pod uid>/volumes/<name>`
before its containers start, and removes them when the pod is gone.

A source that cannot be set up yet (a ConfigMap that does not exist) raises
`MountError`; the pod stays in ContainerCreating and the lifecycle reports
a `FailedMount` event with the kubelet's wording, then retries.

A source whose content expires (tokens, certificates, trust bundles) or is
projected again (ConfigMaps and Secrets, read from the node's watches of them)
returns when it next wants to run; the manager then keeps one refresher task per
(pod, volume) that sets the volume up again at that time, in place, so the
pod keeps running while its files change. Unmounting stops the refreshers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Awaitable, Callable

from ...client.record import CoreEventRecorder
from ...machinery.errors import APIError
from ...clock import REAL, Clock
from .csi_drivers import CSIDriverLister
from .host_path import host_path
from .nfs import nfs
from .persistent import persistent_volume_claim
from .projected import downward_api, projected
from .sources import MountError, config_map, empty_dir, secret
from . import tmpfs
from .stats import ClaimVolume, tmpfs_size
from .watch_based_manager import WatchBasedManager

log = logging.getLogger(__name__)
#: a refresh that failed is tried again after this many seconds
REFRESH_RETRY = 10.0


#: a volume source's setup: (manager, pod, volume, target dir) -> when to set it up again (epoch s) or None
Source = Callable[["VolumeManager", dict, dict, str], Awaitable[float | None]]

SOURCES: dict[str, Source] = {"configMap": config_map, "secret": secret, "emptyDir": empty_dir, "projected": projected,
                            "downwardAPI": downward_api, "persistentVolumeClaim": persistent_volume_claim,
                            "ephemeral": persistent_volume_claim, "hostPath": host_path, "nfs": nfs}


class VolumeManager:
    """One node's pod volume directories."""

    def __init__(self, client, node_name: str, root: str, clock: Clock = REAL,
                 recorder: CoreEventRecorder | None = None, watched: dict[str, WatchBasedManager] | None = None,
                 node: Callable[[], dict] = dict):
        """`watched`: the ConfigMap and Secret managers ("configmaps", "secrets") the pods' volumes
        read through, shared by the node agents of a process; this node's own when None. `node`: the
        Node as the agent's informer last saw it (the kubelet's node lister), whose
        status.volumesAttached a volume that needs attaching waits for (none without an agent)."""
        self.client = client
        #: whether hostPath volumes are this host's paths (the process runtime's containers run on it),
        #: else paths in the simulated node's own root (simulated_host.py)
        self.host_paths = False
        self._own_watched = watched is None
        self.watched = watched or {p: WatchBasedManager(client, p, clock) for p in ("configmaps", "secrets")}
        self.node_name = node_name
        self.node = node
        #: the CSIDriver objects, watched from the first CSI volume on (csi_drivers.py)
        self.csi_drivers = CSIDriverLister(client, clock)
        #: the kubelet's recorder (its own when none is given): repeats are counted, spam filtered
        self.recorder = recorder or CoreEventRecorder(client, "kubelet", clock, host=node_name)
        self.root = root
        #: the fake NFS server's exports (nfs.py): beside the nodes' pod directories, shared by all nodes
        self.nfs_root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(root))), "nfs")
        self.clock = clock
        #: per-source state that outlives one setup (pod certificates), keyed by pod uid first
        self.state: dict[str, dict] = {}
        self._refreshers: dict[str, dict[str, asyncio.Task]] = {}
        #: pod uid -> its volumes mounted read-only at every mount: a claim the pod takes with
        #: `readOnly`, an NFS volume marked so inline or on its PersistentVolume (`read_only`)
        self._read_only: dict[str, set[str]] = {}
        #: pod uid -> volume name -> the claim behind it as last mounted (stats.py measures it)
        self.claims: dict[str, dict[str, ClaimVolume]] = {}
        #: the node's allocatable memory in bytes: a memory-backed emptyDir's size where no limit is smaller
        self.allocatable_memory = 0
        #: pod uid -> the unique names of its volumes that the attach/detach controller attaches
        #: (the node reports them in status.volumesInUse while the pod may mount them)
        self.in_use: dict[str, set[str]] = {}
        #: set (and replaced by a fresh one) when the Node's volumesAttached or volumesInUse changed:
        #: the mounts waiting for an attachment try again then (persistent.NotAttached)
        self.attachments_seen = asyncio.Event()
        #: pod uid -> the tmpfs mounts of its memory-backed emptyDirs (the process runtime's)
        self._tmpfs: dict[str, list[str]] = {}
        #: pod uid -> the targets whose tmpfs mount failed (a runtime not root): left directories,
        #: not tried again (nor warned of) at each resync of their Secret or projected volume
        self._tmpfs_failed: dict[str, set[str]] = {}

    def pod_dir(self, uid: str) -> str:
        return os.path.join(self.root, uid)

    def volume_dir(self, uid: str, volume: str) -> str:
        return os.path.join(self.pod_dir(uid), "volumes", volume)

    def read_only(self, uid: str, volume: str) -> bool:
        """Whether the kubelet mounts the pod's volume read-only in every container."""
        return volume in self._read_only.get(uid, ())

    def volumes_in_use(self) -> list[str]:
        return sorted(set().union(*self.in_use.values())) if self.in_use else []

    def node_seen(self, old: dict, new: dict) -> None:
        """The agent's informer saw this Node change: wake the mounts waiting for an attachment
        when the volumes it lists attached or in use did."""
        before, after = old.get("status") or {}, new.get("status") or {}
        if any(before.get(f) != after.get(f) for f in ("volumesAttached", "volumesInUse")):
            self.attachments_seen.set()
            self.attachments_seen = asyncio.Event()

    def set_read_only(self, pod: dict, volume: str, read_only: bool) -> None:
        names = self._read_only.setdefault(pod["metadata"]["uid"], set())
        (names.add if read_only else names.discard)(volume)

    async def mount(self, pod: dict) -> dict[str, str]:
        """Set up every volume of a known kind; returns volume name -> directory.
        Kinds a simulated node cannot provide (cloud disks) get an empty
        directory, as an image is recorded rather than pulled."""
        uid = pod["metadata"]["uid"]
        for manager in self.watched.values():
            manager.register(pod)
        out = {}
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            target = self.volume_dir(uid, vol["name"])
            kind = next((k for k in vol if k != "name"), "emptyDir")
            again = await SOURCES.get(kind, empty_dir)(self, pod, vol, target)
            tasks = self._refreshers.setdefault(uid, {})
            if again is not None and vol["name"] not in tasks:
                tasks[vol["name"]] = asyncio.create_task(self._refresh(pod, vol, kind, target, again))
            out[vol["name"]] = target
        return out

    def mount_tmpfs(self, pod: dict, vol: dict, target: str) -> None:
        """Mount memory-backed emptyDir `vol`'s tmpfs at `target` (once), of the size the kubelet
        gives it (stats.tmpfs_size); where that fails the directory stays (tmpfs.py), and the
        failure, warned once, is not tried again while the pod lives."""
        uid = pod["metadata"]["uid"]
        mounted, failed = self._tmpfs.setdefault(uid, []), self._tmpfs_failed.setdefault(uid, set())
        if target in mounted or target in failed:
            return
        if tmpfs.mount(target, tmpfs_size(pod, vol, self.allocatable_memory)):
            mounted.append(target)
        else:
            failed.add(target)

    async def _refresh(self, pod: dict, vol: dict, kind: str, target: str, when: float) -> None:
        """Set the volume up again whenever its source asks to; a failure keeps
        the last good files and is reported at each try (the recorder counts repeats)."""
        while True:
            await self.clock.sleep(max(when - self.clock.now(), 0.0))
            try:
                again = await SOURCES[kind](self, pod, vol, target)
            except (MountError, APIError) as e:
                again = self.clock.now() + REFRESH_RETRY
                await self.event(pod, "Warning", "FailedMount", str(e))
            if again is None:
                return
            when = again

    def unmount(self, uid: str) -> None:
        for task in self._refreshers.pop(uid, {}).values():
            task.cancel()
        for manager in self.watched.values():
            manager.unregister(uid)
        self.state.pop(uid, None)
        self._read_only.pop(uid, None)
        self.claims.pop(uid, None)
        self.in_use.pop(uid, None)
        self._tmpfs_failed.pop(uid, None)
        for target in self._tmpfs.pop(uid, ()):
            tmpfs.unmount(target)
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)

    async def close(self) -> None:
        """Unmount the tmpfs mounts left (pods still running as the node stops) and stop the
        watches of its own (the CSIDrivers', and the ConfigMaps' and Secrets' unless shared)."""
        for uid in list(self._tmpfs):
            for target in self._tmpfs.pop(uid):
                tmpfs.unmount(target)
        await self.csi_drivers.close()
        if self._own_watched:
            for manager in self.watched.values():
                await manager.close()

    async def event(self, pod: dict, type_: str, reason: str, message: str) -> None:
        """A core/v1 Event about the pod from this node's kubelet (best effort)."""
        await self.recorder.emit({**pod, "kind": "Pod", "apiVersion": "v1"}, type_, reason, message)
