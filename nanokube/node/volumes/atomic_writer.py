"""The kubelet's AtomicWriter: a volume's files live in a timestamped
directory that a `..data` symlink points at, and each visible name is a
symlink through `..data`. Swapping the one link replaces every file at
once, so a reader never sees a new certificate with an old key. With the
pod's fsGroup every file and directory is that group's (SetVolumeOwnership
for a read-only volume: files readable by the group, directories setgid and
searchable), so a runAsUser container reads a 0440 Secret key through it."""

from __future__ import annotations

import os
import random
import shutil
import time

from ...clock import REAL, Clock
from . import ownership

DATA = "..data"


class Moded(bytes):
    """A file's content with the mode its own item asks for (KeyToPath's and DownwardAPIVolumeFile's
    `mode`), which wins over the volume's defaultMode."""

    def __new__(cls, data: bytes, mode: int):
        obj = super().__new__(cls, data)
        obj.mode = mode
        return obj


def item(data: bytes, spec: dict) -> bytes:
    """`data` as item `spec` projects it: with its own mode, if it has one."""
    return Moded(data, spec["mode"]) if spec.get("mode") is not None else data


def write_atomic(target: str, files: dict[str, bytes], mode: int = 0o644, group: int | None = None,
                 clock: Clock = REAL) -> bool:
    """Make `target` hold exactly `files` (relative paths), of the fsGroup `group` if given, in a
    directory named for `clock`'s time (the kubelet's); False if it already did."""
    os.makedirs(target, exist_ok=True)
    current = os.path.join(target, DATA)
    if os.path.islink(current) and _same(os.path.join(target, os.readlink(current)), files):
        return False
    ts = _timestamped(target, clock.now())
    for rel, data in files.items():
        path = os.path.join(ts, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, getattr(data, "mode", mode))
    os.chmod(ts, 0o755)
    if group is not None:
        _own(target, ts, group)
    old = os.readlink(current) if os.path.islink(current) else None
    tmp_link = os.path.join(target, "..data_tmp")
    if os.path.lexists(tmp_link):
        os.unlink(tmp_link)
    os.symlink(os.path.basename(ts), tmp_link)
    os.replace(tmp_link, current)
    tops = {rel.split("/", 1)[0] for rel in files}
    for name in tops:
        link = os.path.join(target, name)
        if not os.path.islink(link):
            os.symlink(os.path.join(DATA, name), link)
    if group is not None:  # (the links the group's too, as SetVolumeOwnership's walk leaves them)
        for name in [DATA, *tops]:
            ownership.change(os.path.join(target, name), group, read_only=True)
    for name in os.listdir(target):
        if not name.startswith("..") and name not in tops:
            os.unlink(os.path.join(target, name))
    if old:
        shutil.rmtree(os.path.join(target, old), ignore_errors=True)
    return True


def _timestamped(target: str, now: float) -> str:
    """A new directory for the files, named as the kubelet's MkdirTemp names it: `..` and the UTC
    time `now` to the second (`..2026_12_07_06_59_01.`), then a random decimal number."""
    prefix = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime(now))
    while True:
        path = os.path.join(target, prefix + str(random.getrandbits(32)))
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _own(target: str, ts: str, group: int) -> None:
    """The volume's directory and the new timestamped tree the fsGroup's, as SetVolumeOwnership
    leaves a read-only volume: group-readable files, setgid group-searchable directories."""
    paths = [target, ts] + [os.path.join(root, n) for root, dirs, names in os.walk(ts) for n in dirs + names]
    for path in paths:
        ownership.change(path, group, read_only=True)


def _same(directory: str, files: dict[str, bytes]) -> bool:
    found = {}
    for root, _dirs, names in os.walk(directory):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                found[os.path.relpath(p, directory)] = f.read()
    return found == files
