"""The plain volume sources: configMap, secret and emptyDir, and the
helpers a projected volume shares with them."""

from __future__ import annotations

import base64
import os
import stat
from typing import TYPE_CHECKING

from .atomic_writer import item, write_atomic

if TYPE_CHECKING:
    from .manager import VolumeManager

DEFAULT_MODE = 0o644
#: how often ConfigMap, Secret and trust bundle contents are projected again (the kubelet's pod
#: resync, which remounts them): an edit reaches the files within this long
RESYNC = 60.0


def fs_group(mgr: VolumeManager, pod: dict) -> int | None:
    """The pod's fsGroup, the group the kubelet gives the volumes that support ownership, where
    the containers are processes that the files' owners bear on (the process runtime, as root);
    a simulated node's files stay its user's, who may not give them another group."""
    if not mgr.host_paths:
        return None
    return ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")


class MountError(Exception):
    """A volume that cannot be mounted yet, in the kubelet's words: the failed `operation`
    (SetUp, or MountDevice for a CSI volume's staging) and the volume's spec name (the pod's
    volume, or for a claim the PersistentVolume's)."""

    def __init__(self, volume: str, message: str, operation: str = "SetUp"):
        super().__init__(f'MountVolume.{operation} failed for volume "{volume}" : {message}')
        self.volume = volume


def _select(data: dict[str, bytes], items: list[dict] | None, kind: str, volume: str) -> dict[str, bytes]:
    """All keys, or only `items` (key -> path), as the kubelet projects them."""
    if not items:
        return dict(data)
    out = {}
    for it in items:
        if it["key"] not in data:
            raise MountError(volume, f'configmap references non-existent config key: {it["key"]}'
                             if kind == "configmap" else f'references non-existent secret key: {it["key"]}')
        out[it["path"]] = item(data[it["key"]], it)
    return out


async def config_map_files(mgr: VolumeManager, namespace: str, src: dict, volume: str) -> dict[str, bytes]:
    """The files a configMap source (volume or projection) yields, read from the node's watch of
    it; none for a missing optional one."""
    cm = await mgr.watched["configmaps"].get(namespace, src["name"])
    if cm is None:
        if src.get("optional"):
            return {}
        raise MountError(volume, f'configmap "{src["name"]}" not found')
    data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    data |= {k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()}
    return _select(data, src.get("items"), "configmap", volume)


async def secret_files(mgr: VolumeManager, namespace: str, src: dict, volume: str, name_key: str = "secretName"
                       ) -> dict[str, bytes]:
    """The files a secret source yields (`secretName` in a volume, `name` in a projection), read
    from the node's watch of it."""
    sec = await mgr.watched["secrets"].get(namespace, src[name_key])
    if sec is None:
        if src.get("optional"):
            return {}
        raise MountError(volume, f'secret "{src[name_key]}" not found')
    data = {k: base64.b64decode(v) for k, v in (sec.get("data") or {}).items()}
    return _select(data, src.get("items"), "secret", volume)


async def config_map(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> float:
    """The ConfigMap's keys as files, projected again every RESYNC (files rewritten only when changed)."""
    src = vol["configMap"]
    wrapped_dir(mgr, pod, vol, target, memory=False)
    write_atomic(target, await config_map_files(mgr, pod["metadata"]["namespace"], src, vol["name"]),
                 src.get("defaultMode", DEFAULT_MODE), fs_group(mgr, pod), mgr.clock)
    return mgr.clock.now() + RESYNC


async def secret(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> float:
    src = vol["secret"]
    wrapped_dir(mgr, pod, vol, target, memory=True)
    write_atomic(target, await secret_files(mgr, pod["metadata"]["namespace"], src, vol["name"]),
                 src.get("defaultMode", DEFAULT_MODE), fs_group(mgr, pod), mgr.clock)
    return mgr.clock.now() + RESYNC


async def empty_dir(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    """An emptyDir's directory (a kind a simulated node cannot provide gets one too); on the
    process runtime one of medium Memory is a tmpfs of its size (VolumeManager.mount_tmpfs).
    Anyone may write there (the kubelet's 0777, so a runAsUser container can); a Memory one is
    sticky too (1777: the kubelet mounts its tmpfs with no mode, and the kernel makes a tmpfs's root
    so, as /tmp), its files each writer's own to remove; with the pod's fsGroup (`fs_group`) it is
    that group's and setgid, so what is made inside is the group's too (SetVolumeOwnership, which
    keeps the sticky bit)."""
    wrapped_dir(mgr, pod, vol, target, (vol.get("emptyDir") or {}).get("medium") == "Memory")


def wrapped_dir(mgr: VolumeManager, pod: dict, vol: dict, target: str, memory: bool) -> None:
    """The volume's directory as the emptyDir a kubelet volume plugin wraps leaves it (an
    emptyDir's own, and the ConfigMap's on disk; the Memory one of a Secret, projected or
    downwardAPI volume): 0777, 1777 for a memory one (its tmpfs root), setgid and the fsGroup's
    with one (SetVolumeOwnership's walk, which keeps the sticky bit). On the process runtime a
    memory one is a tmpfs (VolumeManager.mount_tmpfs, of calculateEmptyDirMemorySize's size: the
    wrapping emptyDir of a Secret, projected or downwardAPI volume has no sizeLimit), so a Secret's
    files never touch the node's disk and `df`/`mount` in the container show a tmpfs."""
    os.makedirs(target, exist_ok=True)
    if memory and mgr.host_paths:
        mgr.mount_tmpfs(pod, vol, target)
    mode = 0o777 | (stat.S_ISVTX if memory else 0)
    if (group := fs_group(mgr, pod)) is not None:
        os.chown(target, -1, group)
        mode |= stat.S_ISGID
    os.chmod(target, mode)
