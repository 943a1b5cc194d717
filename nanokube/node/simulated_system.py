"""What a simulated container sees of its node's machine, as busybox's `nproc`, `free`, `df`,
`du`, `mount`, `uptime` and `top` print it: the first things people check in a new pod, which a shell would otherwise answer
`sh: nproc: not found`.

A container sees the node's, not its limits' (`NODE`: the node's capacity, set by simulated_io
for the commands about to run): `nproc` counts the CPUs its affinity allows, which a CPU limit
(a CFS quota) does not narrow (nanokube has no static CPU manager to pin CPUs), so it is the
node's CPU count; `free` reads /proc/meminfo, the node's memory, not the container's cgroup; `df`
lists the container's mounts: the overlay root on the node's disk (its ephemeral storage), the
runtime's tmpfs /dev and 64 MiB /dev/shm, each volume's mount (a memory-backed emptyDir's tmpfs,
its size and its files' pages used; the tmpfs of a secret, projected or downwardAPI volume; the
node's disk for the rest, a claim's hostPath volume too, as a checkpoint directory shows it), and
the files the kubelet mounts from the node's disk; in 1K blocks, 1M blocks (`-m`) or busybox's
human units (`-h`), all of them or those holding the paths named (`df -h /models`); `mount`
lists them as /proc/mounts has them, in the order runc mounts them; `uptime`
reads the node's, as /proc/uptime and /proc/loadavg are no namespace's: how long since the node
booted (its agent started), no users (no utmp in an image), and its load, steady at what its
running pods and system use in cores as `kubectl top node` shows it (metrics.usage). `top -b
-n 1`'s header is the node's too (/proc/meminfo as `free` reads it, /proc/stat's busy share, the
load); its processes are the container's PID namespace's (as `ps`), each container's process
as big as the working set the usage model gives it and busy with its CPU, in shares of the
node's memory and CPUs.
Where no node is at hand, or the node has no ephemeral-storage capacity, the commands are not
interpreted.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone

from ..machinery.quantity import parse_quantity
from ..metrics.usage import SYSTEM_CPU, simulated_usage
from .simulated_accounts import names, run_as
from .simulated_applets import Process, Unknown
from .simulated_fs import PAGE, ContainerFS, Dir, tmpfs_bytes
from .simulated_identity import processes

#: the capacity (cpu, memory, ephemeral-storage) of the node whose container's commands are being
#: worked out; None where no node is at hand
NODE: ContextVar[dict | None] = ContextVar("simulated_node", default=None)


@dataclass(frozen=True)
class Host:
    """The node's machine beyond its capacity: when it booted, and its load average."""

    booted: float
    load: float
    tasks: int


#: the machine of the node whose container's commands are being worked out; None where unknown
HOST: ContextVar[Host | None] = ContextVar("simulated_host", default=None)
#: the share of the node's memory an idle node has in use, and in its page cache
USED, CACHED = 1 / 32, 1 / 16
#: the share of the node's disk its images and logs take
DISK_USED = 1 / 10
#: the tasks a node runs besides its pods' (kernel threads, systemd, the kubelet, the runtime)
SYSTEM_TASKS = 180
#: the size (KiB) of busybox's own process (`top` itself)
BUSYBOX_VSZ = 1304
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


def load(pods: list[dict]) -> float:
    """The node's load average: the cores its system and its pods' running containers keep busy."""
    return (SYSTEM_CPU + sum(u.cpu for pod in pods for u in simulated_usage(pod).values())) / 1000


def tasks(pods: list[dict]) -> int:
    """The node's tasks (/proc/loadavg's count): its system's, and each pod's shim and pause and
    its running containers' processes."""
    return SYSTEM_TASKS + sum(2 + len(simulated_usage(pod)) for pod in pods)


def _average(load: float, rounded: bool) -> str:
    """A load in the kernel's 1/65536ths, two decimals: /proc/loadavg's rounded, sysinfo's (uptime) cut."""
    fixed = round(load * 65536) + (65536 // 200 if rounded else 0)
    return f"{fixed >> 16}.{(fixed & 0xFFFF) * 100 >> 16:02d}"


def uptime(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox uptime: the time (UTC, the container's zone), the node's uptime (days, then `H:MM`
    or `M min`), no users and its load average (1, 5 and 15 minutes: all the steady load)."""
    host = HOST.get()
    if host is None or args:
        raise Unknown
    now = proc.started + proc.now
    up = max(int(now - host.booted), 0)
    days, hours, minutes = up // 86400, up // 3600 % 24, up // 60 % 60
    since = (f"{days} day{'s' if days != 1 else ''}, " if days else "") + (
        f"{hours:2d}:{minutes:02d}" if hours else f"{minutes} min")
    average = _average(host.load, False)
    proc.out(f" {datetime.fromtimestamp(now, timezone.utc):%H:%M:%S} up {since},  0 users,  load average: "
             f"{average}, {average}, {average}\n")
    return 0


def top(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox top -b -n 1 (`-bn1`; its build's options: CPU and SMP columns, whole percents): the
    node's memory (MemTotal - MemFree used, as `free` sees them), its CPU time split (all the busy
    share user time, as cpu.stat), /proc/loadavg; then each process: PID, PPID (0: each was started
    from outside the namespace), user, state, VSZ (busybox's 5-character sizes), its share of the
    node's memory, the CPU it last ran on, its share of the node's CPU time, its command line."""
    words = "".join(a.lstrip("-") for a in args)
    host = HOST.get()
    if host is None or sorted(words) != ["1", "b", "n"]:
        raise Unknown
    cpus, total = _capacity("cpu"), _capacity("memory") >> 10
    used, cached = int(total * USED), int(total * CACHED)
    busy = min(host.load / cpus, 1)
    usr, idle = int(100 * busy), int(100 * (1 - busy))
    rows = processes(fs.pod, fs.container) + [(run_as(fs.pod, fs.container)[0], " ".join([name, *args]), None)]
    last_pid = 1 + 6 * (len(rows) - 1)
    usage, users = simulated_usage(fs.pod), names(fs.pod, fs.container)[0]
    lines = [f"Mem: {used + cached}K used, {total - used - cached}K free, 0K shrd, 0K buff, {cached}K cached",
             f"CPU:{usr:4d}% usr   0% sys   0% nic{idle:4d}% idle   0% io   0% irq   0% sirq",
             f"Load average: {' '.join([_average(host.load, True)] * 3)} {max(round(host.load), 1)}/{host.tasks} {last_pid}",
             "  PID  PPID USER     STAT   VSZ %VSZ CPU %CPU COMMAND"]
    for i, (uid, command, container) in enumerate(rows):
        pid, own = 1 + 6 * i, usage.get(container) if container else None
        vsz = BUSYBOX_VSZ if container is None else max(own.memory >> 10, BUSYBOX_VSZ) if own else 0
        pcpu = round(own.cpu / 10 / cpus) if own else 0
        lines.append(f"{pid:5d}{0:6d} {users.get(uid, str(uid)):<8.8} {'R' if container is None else 'S':<3}  "
                     f"{_size5(vsz)}{(vsz * 100 + total // 2) // total:4d}% {pid % cpus:3d}{pcpu:4d}% {command}")
    proc.out("\n".join(lines) + "\n")
    return 0


def _size5(kib: int) -> str:
    """busybox's smart_ulltoa5 of a size in KiB: five characters, the number alone up to 99999,
    else in m, g... with a decimal below 100 (`92.1m`) and none from 100 (` 512m`)."""
    if kib <= 99999:
        return f"{kib:5d}"
    tenths, suffix = kib * 10, 0
    while True:
        tenths //= 1024
        suffix += 1
        if tenths < 100000:
            break
    whole, tenth = divmod(tenths, 10)
    return f"{whole:4d}{' mgtpezy'[suffix]}" if whole >= 100 else f"{whole:2d}.{tenth}{' mgtpezy'[suffix]}"


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
    paths = [a for a in args if not a.startswith("-") or a == "-"]
    flags = "".join(a[1:] for a in args if a not in paths)
    if not set(flags) <= set("khm") or "-" in paths:
        raise Unknown
    unit = "h" if "h" in flags else "m" if "m" in flags else "k"
    rows, status = _mounts(fs), 0
    proc.out(f"Filesystem           {_UNITS[unit]:<15}Used Available Use% Mounted on\n")
    for path in paths or [None]:
        shown = rows
        if path is not None:
            at = fs.normal(path)
            if fs.lookup(at) is None:
                proc.err(f"df: {path}: can't find mount point\n")
                status = 1
                continue
            shown = [max((r for r in rows if at == r[3] or at.startswith(r[3].rstrip("/") + "/")),
                         key=lambda r: len(r[3]))]
        for dev, size, taken, point in shown:
            percent = (taken * 100 + size // 2) // size if size else 0  # busybox's rounding
            proc.out(f"{dev:<20} {_shown(size, unit):>9} {_shown(taken, unit):>9} {_shown(size - taken, unit):>9}"
                     f" {percent:>3}% {point}\n")
    return status


#: df's size column's header by its unit: 1K blocks (the default, -k), 1M blocks (-m), human (-h)
_UNITS = {"k": "1K-blocks", "m": "1M-blocks", "h": "     Size"}


def _mounts(fs: ContainerFS) -> list[tuple[str, int, int, str]]:
    """The container's filesystems as /proc/mounts lists them, each (device, KiB, KiB used, mount
    point): the overlay root, the runtime's tmpfs (but where a volume is mounted instead), each volume's mount (a memory-backed emptyDir's
    tmpfs, the kubelet's tmpfs of a secret, projected or downwardAPI volume, anything else a bind
    mount of the node's disk: a claim's hostPath volume, a configMap's or an emptyDir's directory),
    and the files the kubelet mounts from its disk."""
    disk = _capacity("ephemeral-storage") >> 10
    used = int(disk * DISK_USED)
    volumes = []
    for m in sorted((m for m in fs.mounts if m.kind), key=lambda m: m.path):
        if m.limit:
            volumes.append(("tmpfs", m.limit >> 10, tmpfs_bytes(m.volume) >> 10, m.path))
        elif m.size:
            volumes.append(("tmpfs", m.size >> 10, _pages(m.root) >> 10, m.path))
        else:
            volumes.append(("/dev/sda1", disk, used, m.path))
    over = {v[3] for v in volumes}  # a volume at /dev/shm takes the runtime's place (containerd's user mounts)
    return [("overlay", disk, used, "/"), *((dev, size, 0, at) for dev, size, at in _RUNTIME_MOUNTS if at not in over),
            *volumes, *(("/dev/sda1", disk, used, at) for at in _NODE_FILES)]


#: the runtime's own mounts before the pod's, as containerd's default spec has them: (device,
#: path, type, options); a privileged container's /sys and cgroup are writable
_SPEC_MOUNTS = (("proc", "/proc", "proc", "rw,nosuid,nodev,noexec,relatime"),
                ("tmpfs", "/dev", "tmpfs", "rw,nosuid,size=65536k,mode=755,inode64"),
                ("devpts", "/dev/pts", "devpts", "rw,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=666"),
                ("mqueue", "/dev/mqueue", "mqueue", "rw,nosuid,nodev,noexec,relatime"),
                ("sysfs", "/sys", "sysfs", "ro,nosuid,nodev,noexec,relatime"),
                ("cgroup", "/sys/fs/cgroup", "cgroup2", "ro,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot"))
#: what runc makes read-only under /proc, then masks (a directory under a read-only tmpfs, a file
#: under /dev/null from the container's /dev), in a container not privileged: containerd's
#: defaults that a 6.8 kernel has
_READ_ONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
_MASKED_DIRS = frozenset({"/proc/acpi", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"})
_MASKED = ("/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware",
           "/sys/devices/virtual/powercap", "/proc/scsi")
_DISK = "/dev/sda1"
_SNAPSHOTS = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"


def mount(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox mount without operands: /proc/mounts as `DEV on PATH type TYPE (OPTIONS)`. runc
    mounts the overlay root (read-only with readOnlyRootFilesystem), the spec's own mounts, then
    the CRI's (the kubelet's volumes, /etc/hosts and /dev/termination-log, then containerd's
    /etc/hostname, /etc/resolv.conf and /dev/shm where no volume takes its place) in a stable
    order by depth, then its read-only and masked /proc and /sys paths. A volume is a bind of the
    node's disk (ext4) or of the kubelet's tmpfs (a Memory emptyDir, a Secret, projected or
    downwardAPI volume), read-only where the kubelet mounts it so."""
    if args:
        raise Unknown
    spec = (fs.pod or {}).get("spec") or {}
    c = next((c for key in ("containers", "initContainers", "ephemeralContainers") for c in spec.get(key) or ()
              if c.get("name") == fs.container), {})
    security = c.get("securityContext") or {}
    privileged = bool(security.get("privileged"))
    rows = [("overlay", "/", "overlay", f"{'ro' if security.get('readOnlyRootFilesystem') else 'rw'},relatime,"
             f"lowerdir={_SNAPSHOTS}/1/fs,upperdir={_SNAPSHOTS}/2/fs,workdir={_SNAPSHOTS}/2/work")]
    rows += [(dev, at, kind, opts.replace("ro,", "rw,", 1) if privileged else opts) for dev, at, kind, opts in _SPEC_MOUNTS]
    cri = []
    for m in fs.mounts:
        if not m.kind and m.host is None:
            continue  # procfs and cgroupfs: the spec's
        flags = f"{'ro' if m.read_only else 'rw'},relatime"
        tmpfs = m.limit or m.size
        cri.append(("tmpfs", m.path, "tmpfs", f"{flags},size={tmpfs >> 10}k,inode64") if tmpfs else
                   (_DISK, m.path, "ext4", flags))
    taken = {row[1] for row in cri}
    cri += [(_DISK, at, "ext4", "rw,relatime") for at in _NODE_FILES]
    if "/dev/shm" not in taken:
        cri.append(("shm", "/dev/shm", "tmpfs", "rw,nosuid,nodev,noexec,relatime,size=65536k,inode64"))
    rows += sorted(cri, key=lambda row: len([p for p in row[1].split("/") if p]))
    if not privileged:
        rows += [("proc", at, "proc", "ro,nosuid,nodev,noexec,relatime") for at in _READ_ONLY_PATHS]
        rows += [("tmpfs", at, "tmpfs", "ro,relatime,inode64" if at in _MASKED_DIRS else
                  "rw,nosuid,size=65536k,mode=755,inode64") for at in _MASKED]
    proc.out("".join(f"{dev} on {at} type {kind} ({opts})\n" for dev, at, kind, opts in rows))
    return 0


def _pages(root: str | None) -> int:
    """The bytes the regular files under a tmpfs's directory on the node take, in whole pages (the
    atomic writer's links take none)."""
    total = 0
    for top, _, files in os.walk(root or ""):
        for f in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(top, f))
                total += -(-info.st_size // PAGE) * PAGE if stat.S_ISREG(info.st_mode) else 0
    return total


def _shown(kib: int, unit: str) -> str:
    """busybox's make_human_readable_str of `kib` KiB: whole 1K or 1M blocks (rounded), or with
    `h` one decimal and a unit suffix (`102.4G`; `0` alone)."""
    if unit != "h":
        return str(kib if unit == "k" else (kib + 512) >> 10)
    value, frac, suffix = kib << 10, 0, ""
    for letter in "KMGTPE":
        if value < 1024:
            break
        value, frac, suffix = value >> 10, ((value % 1024) * 10 + 512) // 1024, letter
    if frac >= 10:
        value, frac = value + 1, 0
    return f"{value}.{frac}{suffix}" if suffix else str(value)


def du(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox du [-aschkm] [-d N] [PATH...]: the space each directory below each PATH (`.`) takes
    with all below it, after its entries (-a: each file too; -s: each PATH only; -d N: N levels
    down; -c: a `total` after), in 1K blocks (-m: 1M, -h: busybox's human units). A file takes its
    size in whole 4K blocks, a directory one on disk and none on a tmpfs (a Memory emptyDir, a
    Secret's volume); a link is not followed and takes none."""
    flags, paths, depth = set(), [], None
    words = list(args)
    while words:
        word = words.pop(0)
        if word == "-d" and words and words[0].isdigit():
            depth = int(words.pop(0))
        elif word.startswith("-") and len(word) > 1 and set(word[1:]) <= set("aschkm"):
            flags |= set(word[1:])
        elif word.startswith("-"):
            raise Unknown
        else:
            paths.append(word)
    unit = "h" if "h" in flags else "m" if "m" in flags else "k"
    if "s" in flags:
        depth = 0
    status, total = 0, 0

    def size(path: str, level: int) -> int:
        node = fs.lookup(path)
        if node.link is not None:
            kib = 0
        elif isinstance(node, Dir):
            mount, _ = fs._mount(fs.normal(path))
            kib = 0 if mount is not None and (mount.limit or mount.size) else 4
            for entry in fs.listdir(path):
                kib += size(path.rstrip("/") + "/" + entry if path != "/" else "/" + entry, level + 1)
        else:
            kib = -(-len(node.data) // PAGE) * (PAGE >> 10)
        if (isinstance(node, Dir) and node.link is None or "a" in flags or level == 0) and (depth is None or level <= depth):
            proc.out(f"{_shown(kib, unit)}\t{path}\n")
        return kib

    for path in paths or ["."]:
        if fs.lookup(path) is None:
            proc.err(f"du: {path}: No such file or directory\n")
            status = 1
            continue
        total += size(path, 0)
    if "c" in flags:
        proc.out(f"{_shown(total, unit)}\ttotal\n")
    return status


APPLETS = {"nproc": nproc, "free": free, "df": df, "du": du, "mount": mount, "uptime": uptime, "top": top}
