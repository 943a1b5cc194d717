"""persistentVolumeClaim and generic ephemeral volumes (the claim
`<pod>-<volume>` the ephemeral volume controller made): the claim must be bound; its volume's
directory (hostPath, local path, the built-in CSI driver's, or an NFS export: nfs.py) is linked
at the pod's volume directory, so the runtime binds the volume itself at each container's mount
path and what the pod writes outlives it. With the pod's fsGroup, a volume whose plugin supports
ownership (`_supports_fs_group`) is given to the group as it is mounted for the pod, as the pod's
fsGroupChangePolicy says (ownership.py). A claim's volume whose volumeMode the pod's containers
do not use it as (a Block volume in volumeMounts, a Filesystem one in volumeDevices) is refused.
A Block volume of the built-in CSI driver or a local one is mapped: the pod's volume links to its
device, a file in the volume's directory (`map_device`), which either runtime shows at each
container's devicePath (the process runtime binds it there); a hostPath or NFS one has no block plugin.

A CSI volume whose driver needs attaching (attachRequired, or no CSIDriver) waits, reported in
the Node's status.volumesInUse, until the attach/detach controller lists it as attached.

A claim whose volume the external resizer grew (NodeResizePending) has its
filesystem expanded here, as the kubelet's NodeExpander does when it mounts
the volume or, for a running pod, at the pod's next resync (RESYNC):
NodeResizeInProgress, then status.capacity takes the volume's size and the
resize conditions go, with FileSystemResizeSuccessful on the pod and the claim.
A directory has no filesystem of its own to grow, so that step always succeeds."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from ...machinery.errors import APIError
from ...volume.attachment import attach_required, unique_name
from ...volume.resize import (NODE_RESIZE_IN_PROGRESS, NODE_RESIZE_PENDING, capacity, resize_finished, resize_status,
                              volume_capacity, with_storage_status)
from ..storage.provisioner import CSI_DRIVER, local_path
from .nfs import export_dir, link
from . import ownership
from .sources import RESYNC, MountError, fs_group
from .stats import claim_volume

if TYPE_CHECKING:
    from .manager import VolumeManager

#: PersistentVolume sources that are a directory on this host
_HOST_DIRS = ("hostPath", "local")
#: the file of a Block volume's directory that is its device (map_device)
BLOCK_DEVICE = "block"


def _volume_mode_mismatch(pod: dict, volume: str, mode: str) -> str:
    """The desired state of world populator's check: a Filesystem volume only in volumeMounts, a
    Block one only in volumeDevices, in any container of the pod ('' when it holds)."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or []),
                  *(spec.get("ephemeralContainers") or [])]
    for field, wanted in (("volumeMounts", "Filesystem"), ("volumeDevices", "Block")):
        if mode != wanted and any(m.get("name") == volume for c in containers for m in c.get(field) or []):
            return f"volume {volume} has volumeMode {mode}, but is specified in {field}"
    return ""


async def volume_path(mgr: VolumeManager, pod: dict, claim: str, volume: str, ephemeral: bool = False
                      ) -> tuple[str, dict, dict]:
    """The host directory behind the claim, with the claim and its volume, or MountError in the
    kubelet's words; an `ephemeral` volume's claim must be the pod's."""
    namespace = pod["metadata"]["namespace"]
    owner = pod if ephemeral else None
    what = f"error processing PVC {namespace}/{claim}"
    try:
        pvc = await mgr.client.resource("", "v1", "persistentvolumeclaims").get(claim, namespace)
    except APIError as e:
        if e.code != 404:
            raise
        raise MountError(volume, f"{what}: failed to fetch PVC from API server: {e.message}") from None
    if owner is not None and not any(r.get("uid") == owner["metadata"].get("uid") and r.get("controller")
                                     for r in pvc["metadata"].get("ownerReferences") or []):
        raise MountError(volume, f"{what}: PVC {namespace}/{claim} was not created for pod "
                                 f"{namespace}/{owner['metadata']['name']} (pod is not owner)")
    name = (pvc.get("spec") or {}).get("volumeName")
    if not name or (pvc.get("status") or {}).get("phase") != "Bound":
        raise MountError(volume, f"{what}: PVC is not bound")
    try:
        pv = await mgr.client.resource("", "v1", "persistentvolumes").get(name)
    except APIError as e:
        if e.code != 404:
            raise
        raise MountError(volume, f"{what}: failed to fetch PV {name} from API server: {e.message}") from None
    if why := _volume_mode_mismatch(pod, volume, (pv.get("spec") or {}).get("volumeMode") or "Filesystem"):
        raise MountError(volume, why)
    # from here on the kubelet names the volume by its PersistentVolume
    spec = pv.get("spec") or {}
    if _block(pv) and not (spec.get("csi") or spec.get("local")):  # no BlockVolumePlugin for it
        raise MountError(name, f'failed to get Plugin from volumeSpec for volume "{name}" err=no volume plugin matched')
    driver = (spec.get("csi") or {}).get("driver")
    if driver is not None:
        await _wait_for_attach(mgr, pod, volume, spec["csi"])
    if driver == CSI_DRIVER:  # the built-in driver's NodePublishVolume
        path = local_path(pv) or ""
        if not os.path.isdir(path):
            raise MountError(name, f"rpc error: code = NotFound desc = volume {name}: {path} does not exist")
        return path, pvc, pv
    if driver is not None:  # no node plugin of that name registered here
        raise MountError(name, "kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver "
                               f"name {driver} not found in the list of registered CSI drivers", "MountDevice")
    if spec.get("nfs"):
        return export_dir(mgr, spec["nfs"].get("server", ""), spec["nfs"].get("path", "/"), name), pvc, pv
    kind = next((k for k in _HOST_DIRS if spec.get(k)), None)
    if kind is None:
        raise MountError(name, f"volume {name} has no source a node of this cluster can mount")
    path = spec[kind].get("path", "")
    if kind == "hostPath" and spec[kind].get("type") == "DirectoryOrCreate":
        os.makedirs(path, mode=0o755, exist_ok=True)
    if not os.path.isdir(path):
        raise MountError(name, f"hostPath type check failed: {path} is not a directory")
    return path, pvc, pv


#: podAttachAndMountTimeout: how long WaitForAttachAndMount waits before the pod's sync fails with
#: `Unable to attach or mount volumes` (a FailedMount event), to wait as long again
ATTACH_AND_MOUNT_TIMEOUT = 123.0


def _block(pv: dict) -> bool:
    return (pv.get("spec") or {}).get("volumeMode") == "Block"


def map_device(path: str, size: int = 0) -> str:
    """MapDevice for a Block volume kept as a directory (the built-in driver's, a local one): the
    device is the file `block` in it, made at its first map (where a driver's staging would attach
    a disk), so what a pod writes to it outlives the pod. `size`: the disk's, the volume's capacity,
    for the process runtime, whose containers get the file itself: it is grown to it (sparse; also
    after the volume is expanded), never shrunk; the simulated runtime's stays as written (it reads
    a mounted file whole)."""
    device = os.path.join(path, BLOCK_DEVICE)
    with open(device, "ab") as f:
        if f.tell() < size:
            f.truncate(size)
    return device


class NotAttached(MountError):
    """The volume's driver needs it attached and the attach/detach controller has not reported it
    so; `quiet` until the pod waited ATTACH_AND_MOUNT_TIMEOUT, as the kubelet says so only then.
    The pod tries again when `wake` is set (the Node's attached or in-use volumes changed), so it
    starts moments after its volume is reported attached, else at its back-off: a safety re-check,
    as upstream's reconciler (every 100 ms) retries a failed VerifyControllerAttachedVolume only
    after the operation's exponential back-off, and would GET the Node each time."""

    def __init__(self, volume: str, quiet: bool, wake: asyncio.Event):
        Exception.__init__(self, f"Unable to attach or mount volumes: unmounted volumes=[{volume}], "
                                 f"unattached volumes=[{volume}]: timed out waiting for the condition")
        self.volume = volume
        self.quiet = quiet
        self.wake = wake


async def _wait_for_attach(mgr: VolumeManager, pod: dict, volume: str, csi: dict) -> None:
    """VerifyControllerAttachedVolume: a volume whose driver needs attaching is reported in use
    (status.volumesInUse, at the node's next status post) and mounted only once the Node lists it
    among status.volumesAttached, where the attach/detach controller puts it after the attacher
    attached it; until then NotAttached, in the words the kubelet times out with, told once per
    ATTACH_AND_MOUNT_TIMEOUT of waiting. The driver and the Node are the listers' copies: a try
    costs no request."""
    driver = csi.get("driver", "")
    if not attach_required(await mgr.csi_drivers.get(driver)):
        return
    name, uid = unique_name(driver, csi.get("volumeHandle", "")), pod["metadata"]["uid"]
    mgr.in_use.setdefault(uid, set()).add(name)
    wake = mgr.attachments_seen  # the event of the Node's copy read now: a change after it sets it
    status = mgr.node().get("status") or {}
    waiting = mgr.state.setdefault(uid, {})
    if name in (status.get("volumesInUse") or ()) and \
            any(v.get("name") == name for v in status.get("volumesAttached") or ()):
        waiting.pop(("attach", volume), None)
        return
    now = mgr.clock.now()
    since = waiting.setdefault(("attach", volume), now)
    if now - since >= ATTACH_AND_MOUNT_TIMEOUT:
        waiting[("attach", volume)] = now
    raise NotAttached(volume, now - since < ATTACH_AND_MOUNT_TIMEOUT, wake)


async def _supports_fs_group(mgr: VolumeManager, pv: dict) -> bool:
    """Whether the volume's plugin gives it to the pod's fsGroup: a local volume's does, a hostPath or
    NFS one's does not; the CSI driver's as its CSIDriver's fsGroupPolicy says (File: always;
    ReadWriteOnceWithFSType, the default: a volume with an fsType and ReadWriteOnce among its
    access modes; None: never), as csi_mounter's supportsFSGroup."""
    spec = pv.get("spec") or {}
    if "local" in spec:
        return True
    if "csi" not in spec:
        return False
    driver = await mgr.csi_drivers.get(spec["csi"].get("driver", "")) or {}
    policy = (driver.get("spec") or {}).get("fsGroupPolicy") or "ReadWriteOnceWithFSType"
    if policy == "File":
        return True
    return policy == "ReadWriteOnceWithFSType" and bool(spec["csi"].get("fsType")) \
        and "ReadWriteOnce" in (spec.get("accessModes") or ())


async def node_expand(mgr: VolumeManager, pod: dict, pvc: dict, pv: dict) -> None:
    """NodeExpander.expandOnPlugin for a volume the resizer left to the node."""
    size, have = volume_capacity(pv), capacity(pvc)
    if size is None or have is None or have >= size \
            or resize_status(pvc) not in (NODE_RESIZE_PENDING, NODE_RESIZE_IN_PROGRESS):
        return
    pvcs = mgr.client.resource("", "v1", "persistentvolumeclaims")
    try:
        pvc = await pvcs.update({**pvc, "status": with_storage_status(pvc.get("status") or {}, NODE_RESIZE_IN_PROGRESS)},
                                subresource="status")
    except APIError as e:
        if e.code != 409:
            raise
        return  # the claim changed since it was read: the next resync reads it again
    message = f'MountVolume.NodeExpandVolume succeeded for volume "{pv["metadata"]["name"]}" {mgr.node_name}'
    await mgr.event(pod, "Normal", "FileSystemResizeSuccessful", message)
    await mgr.recorder.emit({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **pvc}, "Normal",
                            "FileSystemResizeSuccessful", message)
    await pvcs.update({**pvc, "status": resize_finished(pvc["status"], pv["spec"]["capacity"]["storage"])},
                      subresource="status")


async def persistent_volume_claim(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> float:
    """Link the volume's directory (a Block volume's device: the containers get it at their
    volumeDevices' devicePath), expand it if the resizer asks; again at every pod resync."""
    ephemeral = bool(vol.get("ephemeral"))
    claim = f"{pod['metadata']['name']}-{vol['name']}" if ephemeral else vol["persistentVolumeClaim"].get("claimName", "")
    path, pvc, pv = await volume_path(mgr, pod, claim, vol["name"], ephemeral)
    link(map_device(path, int(volume_capacity(pv) or 0) if mgr.host_paths else 0) if _block(pv) else path, target)
    mgr.claims.setdefault(pod["metadata"]["uid"], {})[vol["name"]] = claim_volume(pod["metadata"]["namespace"], claim, pv)
    read_only = bool((vol.get("persistentVolumeClaim") or {}).get("readOnly")
                     or ((pv.get("spec") or {}).get("nfs") or {}).get("readOnly"))
    mgr.set_read_only(pod, vol["name"], read_only)
    mounted = mgr.state.setdefault(pod["metadata"]["uid"], {})
    if ("owned", vol["name"]) not in mounted and not read_only and not _block(pv) \
            and (group := fs_group(mgr, pod)) is not None and await _supports_fs_group(mgr, pv):  # as the volume is mounted for the pod, not at each resync
        policy = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroupChangePolicy")
        await asyncio.to_thread(ownership.set_volume_ownership, path, group, policy)
        mounted["owned", vol["name"]] = True
    await node_expand(mgr, pod, pvc, pv)
    return mgr.clock.now() + RESYNC
