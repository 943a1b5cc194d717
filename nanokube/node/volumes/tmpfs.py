"""A memory-backed emptyDir on the process runtime, as the kubelet's emptyDir plugin sets one up
(setupTmpfs): a tmpfs mounted at the volume's directory, sized as calculateEmptyDirMemorySize
says (stats.tmpfs_size), so a write past the size fails with ENOSPC and its files take memory,
not disk. Mounting needs CAP_SYS_ADMIN in the host's mount namespace (the process runtime runs as
root for its network namespaces anyway); where the mount is refused the volume stays a directory
on disk, its size then bounded only by the eviction manager's sizeLimit check."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
#: umount2's lazy unmount: the mount goes at once, its files when nothing holds them open
MNT_DETACH = 2


def mount(target: str, size: int) -> bool:
    """Mount a tmpfs of `size` bytes (0: the kernel's default) at directory `target`, its root
    1777 as the kernel makes one the kubelet mounts without a mode; False where it could not be
    mounted."""
    options = f"mode=1777,size={size}" if size else "mode=1777"
    if _libc.mount(b"tmpfs", target.encode(), b"tmpfs", 0, options.encode()) == 0:
        return True
    log.warning("memory-backed emptyDir %s left on disk: mounting a tmpfs failed: %s", target,
                os.strerror(ctypes.get_errno()))
    return False


def unmount(target: str) -> None:
    """Unmount the tmpfs at `target` (lazily: a process still in it keeps its files until it goes)."""
    if _libc.umount2(target.encode(), MNT_DETACH) != 0:
        log.warning("tmpfs at %s not unmounted: %s", target, os.strerror(ctypes.get_errno()))
