"""nfs volumes, inline in a pod or a PersistentVolume's spec.nfs. No NFS server
can be reached from a simulated node, so each node mounts a fake server's
export: the directory `<nfs root>/<server>/<path>` on this host, which every
node of the cluster shares (all of them run here). As with a real export, what
one pod writes every pod mounting the same server and path sees, on any node,
and it outlives them all; a path under the export is a directory of its own
(`server:/data/ckpt` within `server:/data`). The fake server exports every
path it is asked for; a server name that cannot be one (a `/` in it) fails to
mount as mount.nfs would fail to resolve it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .sources import MountError

if TYPE_CHECKING:
    from .manager import VolumeManager


def export_dir(mgr: VolumeManager, server: str, path: str, volume: str) -> str:
    """The directory serving `server:path`, made when first mounted."""
    if not server or "/" in server or server in (".", ".."):
        raise MountError(volume, f"mount failed: exit status 32\nMounting command: mount\nMounting arguments: "
                                 f"-t nfs {server}:{path} \nOutput: mount.nfs: Failed to resolve server {server}: "
                                 "Name or service not known")
    where = os.path.join(mgr.nfs_root, server, os.path.normpath("/" + path).lstrip("/"))
    os.makedirs(where, mode=0o777, exist_ok=True)
    return where


def link(path: str, target: str) -> None:
    """The pod's volume directory is a link to `path` (kept when it already is)."""
    if os.path.islink(target):
        if os.readlink(target) == path:
            return
        os.unlink(target)
    elif os.path.isdir(target):
        os.rmdir(target)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.symlink(path, target)


async def nfs(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol["nfs"]
    link(export_dir(mgr, src.get("server", ""), src.get("path", "/"), vol["name"]), target)
    mgr.set_read_only(pod, vol["name"], bool(src.get("readOnly")))
