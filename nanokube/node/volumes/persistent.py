"""persistentVolumeClaim and generic ephemeral volumes (the claim
`<pod>-<volume>` the ephemeral volume controller made): the claim must be bound; its volume's
directory (hostPath or local path) is linked at the pod's volume directory,
so the runtime binds the volume itself at each container's mount path and
what the pod writes outlives it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ...machinery.errors import APIError
from .sources import MountError

if TYPE_CHECKING:
    from .manager import VolumeManager

#: PersistentVolume sources that are a directory on this host
_HOST_DIRS = ("hostPath", "local")


async def volume_path(mgr: VolumeManager, namespace: str, claim: str, volume: str, owner: dict | None = None) -> str:
    """The host directory behind the claim, or MountError in the kubelet's words;
    with `owner`, the claim must be that pod's (a generic ephemeral volume)."""
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
    spec = pv.get("spec") or {}
    kind = next((k for k in _HOST_DIRS if spec.get(k)), None)
    if kind is None:
        raise MountError(volume, f"volume {name} has no source a node of this cluster can mount")
    path = spec[kind].get("path", "")
    if kind == "hostPath" and spec[kind].get("type") == "DirectoryOrCreate":
        os.makedirs(path, mode=0o755, exist_ok=True)
    if not os.path.isdir(path):
        raise MountError(volume, f"hostPath type check failed: {path} is not a directory")
    return path


async def persistent_volume_claim(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    if vol.get("ephemeral"):
        claim, owner = f"{pod['metadata']['name']}-{vol['name']}", pod
    else:
        claim, owner = vol["persistentVolumeClaim"].get("claimName", ""), None
    path = await volume_path(mgr, pod["metadata"]["namespace"], claim, vol["name"], owner)
    if os.path.islink(target):
        if os.readlink(target) == path:
            return
        os.unlink(target)
    elif os.path.isdir(target):
        os.rmdir(target)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.symlink(path, target)
