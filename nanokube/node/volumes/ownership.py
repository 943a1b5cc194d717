"""The kubelet's SetVolumeOwnership: with the pod's fsGroup every file and directory of a volume
becomes that group's, readable and writable by it (read-only for a volume the kubelet manages
read-only: configMap, secret, projected, downwardAPI), each directory setgid and searchable, so
what is made inside is the group's too. The pod's fsGroupChangePolicy decides how often: Always
walks the whole volume at every mount; OnRootMismatch only where the volume's root is not yet the
group's with those permissions (a large volume set up once is not walked again). Symbolic links
are the group's, their modes left alone."""

from __future__ import annotations

import os
import stat

ON_ROOT_MISMATCH = "OnRootMismatch"


def _mask(mode: int, read_only: bool) -> int:
    """What the group needs of a file or directory of mode `mode`."""
    mask = 0o440 if read_only else 0o660
    return mask | stat.S_ISGID | 0o110 if stat.S_ISDIR(mode) else mask


def change(path: str, group: int, read_only: bool) -> None:
    """One file or directory the group's, with what the group needs of it."""
    os.lchown(path, -1, group)
    st = os.lstat(path)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(path, stat.S_IMODE(st.st_mode) | _mask(st.st_mode, read_only))


def needs_change(root: str, group: int, read_only: bool = False) -> bool:
    """Whether the volume's root is not yet the group's with its permissions (OnRootMismatch's test)."""
    st = os.stat(root)
    mask = _mask(st.st_mode, read_only)
    return st.st_gid != group or stat.S_IMODE(st.st_mode) & mask != mask


def set_volume_ownership(root: str, group: int | None, policy: str | None = None, read_only: bool = False) -> bool:
    """Give the volume at `root` (a link to its directory is followed) to `group` as `policy` says;
    whether it walked it."""
    if group is None:
        return False
    root = os.path.realpath(root)
    if policy == ON_ROOT_MISMATCH and not needs_change(root, group, read_only):
        return False
    for parent, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            change(os.path.join(parent, name), group, read_only)
    change(root, group, read_only)
    return True
