"""hostPath volumes. On a node whose containers run on this host (the process runtime), the
volume is the host path itself, linked at the pod's volume directory once its type checks as
the kubelet's checkTypeInternal checks it (making a DirectoryOrCreate directory or a
FileOrCreate file). A simulated node's host is its own root directory (simulated_host.py): the
path is looked up, checked and made there (one of no type too, as containerd makes a missing
bind mount source), and errors name it as the pod gave it."""

from __future__ import annotations

import contextlib
import os
import stat
from typing import TYPE_CHECKING

from ..simulated_host import node_root, on_node
from .sources import MountError

if TYPE_CHECKING:
    from .manager import VolumeManager

#: type -> (what the path must be, as the check failure names it)
_TYPES = {"Directory": (stat.S_ISDIR, "a directory"), "File": (stat.S_ISREG, "a file"),
          "Socket": (stat.S_ISSOCK, "a socket file"), "CharDevice": (stat.S_ISCHR, "a character device"),
          "BlockDevice": (stat.S_ISBLK, "a block device")}


def _go_error(op: str, path: str, e: OSError) -> str:
    """An os.PathError as Go prints it: `open /x: no such file or directory`."""
    return f"{op} {path}: {(e.strerror or str(e))[:1].lower()}{(e.strerror or str(e))[1:]}"


def check_type(path: str, kind: str, volume: str, shown: str | None = None) -> None:
    """checkTypeInternal: DirectoryOrCreate and FileOrCreate make what is missing (0755, 0644),
    then the path must be of its type; no type is no check. `shown`: the path as errors name it."""
    shown = path if shown is None else shown
    if kind in ("DirectoryOrCreate", "FileOrCreate") and not os.path.lexists(path):
        try:
            if kind == "DirectoryOrCreate":
                os.makedirs(path, 0o755)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_RDONLY, 0o644))
        except OSError as e:
            raise MountError(volume, _go_error("mkdir" if kind == "DirectoryOrCreate" else "open", shown, e)) from None
        return
    is_kind, what = _TYPES.get(kind.removesuffix("OrCreate"), (None, ""))
    if is_kind is None:
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if not is_kind(mode):
        raise MountError(volume, f"hostPath type check failed: {shown} is not {what}")


async def host_path(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol.get("hostPath") or {}
    shown = path = src.get("path", "")
    if not mgr.host_paths:
        path = on_node(node_root(mgr.root, mgr.node_name), path)
        if not src.get("type") and not os.path.lexists(path):  # the runtime makes a missing source, as containerd's
            with contextlib.suppress(OSError):
                os.makedirs(path, 0o755)
    check_type(path, src.get("type", ""), vol["name"], shown)
    if os.path.islink(target):
        if os.readlink(target) == path:
            return None
        os.unlink(target)
    elif os.path.isdir(target):
        os.rmdir(target)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.symlink(path, target)
    return None
