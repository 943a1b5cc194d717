"""What a simulated container sees of its node's machine, as busybox's `nproc`, `free` and `df`
print it: the first things people check in a new pod, which a shell would otherwise answer
`sh: nproc: not found`.

A container sees the node's, not its limits' (`NODE`: the node's capacity, set by simulated_io
for the commands about to run): `nproc` counts the CPUs its affinity allows, which a CPU limit
(a CFS quota) does not narrow (nanokube has no static CPU manager to pin CPUs), so it is the
node's CPU count; `free` reads /proc/meminfo, the node's memory, not the container's cgroup; `df`
lists the container's mounts: the overlay root on the node's disk (its ephemeral storage), the
runtime's tmpfs /dev and 64 MiB /dev/shm, each memory-backed emptyDir's tmpfs (its size, its
files' pages used), and the files the kubelet mounts from the node's disk.
Where no node is at hand the commands are not interpreted.
"""

from __future__ import annotations

import math
from contextvars import ContextVar

from ..machinery.quantity import parse_quantity
from .simulated_applets import Process, Unknown
from .simulated_fs import ContainerFS, tmpfs_bytes

#: the capacity (cpu, memory, ephemeral-storage) of the node whose container's commands are being
#: worked out; None where no node is at hand
NODE: ContextVar[dict | None] = ContextVar("simulated_node", default=None)
#: the share of the node's memory an idle node has in use, and in its page cache
USED, CACHED = 1 / 32, 1 / 16
#: the share of the node's disk its images and logs take
DISK_USED = 1 / 10
#: what the runtime mounts of its own, and how big (KiB): tmpfs /dev, the pod's shm
_RUNTIME_MOUNTS = (("tmpfs", 65536, "/dev"), ("shm", 65536, "/dev/shm"))
#: the files the kubelet mounts from the node's disk into every container
_NODE_FILES = ("/etc/hosts", "/dev/termination-log", "/etc/hostname", "/etc/resolv.conf")
_FREE_UNITS = {"-b": 0, "-k": 10, "-m": 20, "-g": 30}


def _capacity(name: str) -> int:
    node = NODE.get()
    if node is None or name not in node:
        raise Unknown
    return math.ceil(parse_quantity(str(node[name])))


def nproc(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    ignore = 0
    for a in args:
        if a.startswith("--ignore=") and a[9:].isdigit():
            ignore = int(a[9:])
        elif a != "--all":
            raise Unknown
    proc.out(f"{max(_capacity('cpu') - ignore, 1)}\n")
    return 0


def free(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    if len(args) > 1 or (args and args[0] not in _FREE_UNITS):
        raise Unknown
    steps = _FREE_UNITS[args[0]] - 10 if args else 0
    total = _capacity("memory") >> 10  # KiB
    used, cached = int(total * USED), int(total * CACHED)

    def row(label: str, *kib: int) -> str:
        return f"{label:<7}" + "".join(f"{(k << 10) >> (steps + 10):>12}" for k in kib) + "\n"
    proc.out(f"{'':7}{'total':>12}{'used':>12}{'free':>12}{'shared':>12}{'buff/cache':>12}{'available':>12}\n"
             + row("Mem:", total, used, total - used - cached, 0, cached, total - used) + row("Swap:", 0, 0, 0))
    return 0


def df(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    if args and args != ["-k"]:
        raise Unknown
    disk = _capacity("ephemeral-storage") >> 10
    used = int(disk * DISK_USED)
    tmpfs = sorted((m.path, m.limit >> 10, tmpfs_bytes(m.volume) >> 10) for m in fs.mounts if m.limit)
    rows = [("overlay", disk, used, "/"), *((dev, size, 0, at) for dev, size, at in _RUNTIME_MOUNTS),
            *(("tmpfs", size, taken, at) for at, size, taken in tmpfs),
            *(("/dev/sda1", disk, used, at) for at in _NODE_FILES)]
    out = [f"{'Filesystem':<20} {'1K-blocks':>9} {'Used':>9} {'Available':>9} Use% Mounted on\n"]
    for dev, size, taken, at in rows:
        percent = (taken * 100 + size // 2) // size  # busybox's rounding
        out.append(f"{dev:<20} {size:>9} {taken:>9} {size - taken:>9} {percent:>3}% {at}\n")
    proc.out("".join(out))
    return 0


APPLETS = {"nproc": nproc, "free": free, "df": df}
