"""Cgroups (v2) for the process runtime, as runc gives each container one: a
process stays in its cgroup whatever process group or session it makes, so
a kill through cgroup.kill reaches every process a container (or one exec
in it) started, where a process group's kill misses those that left it.

The tree is /nanokube-TAG/POD_UID/CONTAINER/exec-N under this process's own
cgroup of the cgroup2 mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
hybrid host): killing a pod's or a container's cgroup kills what its execs
run too, as a container's execs die with it. No controller is enabled, so
processes may sit in a cgroup that has children. Where there is no writable
cgroup2 hierarchy with cgroup.kill (Linux 5.14), `Cgroups.root` is None and
the runtime kills process groups only.

A launched process joins its cgroup itself (launch.py writes to an open
cgroup.procs), before it starts anything: `ip netns exec` mounts a /sys of
its own, in which the host's cgroup tree is not to be seen.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import select
import subprocess
import time

log = logging.getLogger(__name__)


def own_cgroup_dir(controller: str | None = None) -> str | None:
    """Where this process's cgroup of the cgroup2 hierarchy (or of `controller`'s cgroup v1
    hierarchy, limits.py's) is in the file system, if mounted."""
    def ours(names: str) -> bool:
        return controller in names.split(",") if controller else names == ""
    try:
        with open("/proc/self/cgroup") as f:
            own = next((line.split(":", 2)[2].strip() for line in f if ours(line.split(":", 2)[1])), None)
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    for fields in mounts:
        fstype = fields[fields.index("-") + 1]
        if own is not None and fields[3] == "/" and (fstype == "cgroup" and ours(fields[-1]) if controller
                                                     else fstype == "cgroup2"):
            return os.path.join(fields[4], own.lstrip("/"))
    return None


def views(paths: list[str | None]) -> dict:
    """How a container sees its cgroups at /sys/fs/cgroup (launch.py mounts them): for each of
    `paths` (its cgroup v2 one, its v1 ones; None left out) the kind of hierarchy, the mount
    options that name it (its v1 controllers) and the cgroup's path in it. `ip netns exec` gives
    the launcher a /sys of its own, so it mounts each hierarchy afresh and binds the cgroup there."""
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return {}
    found: dict = {"v1": []}
    for path in filter(None, paths):
        fields = max((m for m in mounts if m[m.index("-") + 1] in ("cgroup", "cgroup2")
                      and (path == m[4] or path.startswith(m[4].rstrip("/") + "/"))), key=lambda m: len(m[4]), default=None)
        if fields is None:
            continue
        kind, options = fields[fields.index("-") + 1], fields[-1].split(",")
        where = os.path.join(fields[3], os.path.relpath(path, fields[4])).rstrip("/.") or "/"
        if kind == "cgroup2":
            found["v2"] = where
        else:
            named = ",".join(o for o in options if o not in ("rw", "ro") and "=" not in o or o.startswith("name="))
            found["v1"].append([named, where])
    return found


class Cgroups:
    """One runtime's cgroup tree."""

    def __init__(self, tag: str):
        self.tag = tag
        self.root: str | None = None
        self._execs = itertools.count()

    def create(self) -> None:
        """Make the runtime's cgroup, killing and removing what a crashed run of its tag left."""
        base = own_cgroup_dir()
        if base is None:
            log.warning("no cgroup2 hierarchy: the process runtime's kills reach process groups only")
            return
        root = os.path.join(base, f"nanokube-{self.tag}")
        remove(root)
        try:
            os.mkdir(root)
        except OSError as e:
            log.warning("no cgroup for the process runtime's containers (%s): kills reach process groups only", e)
            return
        if not os.path.exists(os.path.join(root, "cgroup.kill")):
            log.warning("cgroup v2 at %s lacks cgroup.kill: kills reach process groups only", base)
            os.rmdir(root)
            return
        if (why := refuses_processes(root)) is not None:
            log.warning("cgroup %s takes no process (%s): kills reach process groups only", root, why)
            remove(root)
            return
        self.root = root

    def close(self) -> None:
        remove(self.root)
        self.root = None

    def path(self, *names: str, create: bool = True) -> str | None:
        """The cgroup of a pod (its UID) or a container in it, made where it is missing
        (`create`); None without cgroups."""
        if self.root is None:
            return None
        path = os.path.join(self.root, *names)
        return made(path) if create else path

    def exec_path(self, container: str | None) -> str | None:
        """A new cgroup for one exec below `container`'s (None without cgroups)."""
        if container is None:
            return None
        return made(os.path.join(container, f"exec-{next(self._execs)}"), parents=False)


def refuses_processes(root: str) -> str | None:
    """Why no process can join a cgroup below `root` (a host that delegates the directory but not
    its cgroup.procs, a read-only or foreign hierarchy), tried once with a short-lived shell; None
    where one can. Without this a launch would fail every container instead of falling back."""
    probe = os.path.join(root, "probe")
    try:
        os.mkdir(probe)
        done = subprocess.run(["sh", "-c", 'test -f "$1" && echo 0 > "$1"', "sh", os.path.join(probe, "cgroup.procs")],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    finally:
        if os.path.exists(os.path.join(probe, "cgroup.events")):
            remove(probe)
        else:
            with contextlib.suppress(OSError):
                os.rmdir(probe)
    return None if done.returncode == 0 else done.stderr.strip() or "it has no cgroup.procs"


def made(path: str, parents: bool = True, without: str = "") -> str | None:
    """`path`, made where missing (with its `parents`: an exec's is made only in its container's
    as it is, never anew after its pod's removal); None (its processes then in nanokube's cgroup)
    where it cannot be, logged with `without`: what then runs without which limits (limits.py)."""
    try:
        if parents:
            os.makedirs(path, exist_ok=True)
        else:
            os.mkdir(path)
    except FileExistsError:
        pass
    except OSError as e:
        log.warning("cgroup %s not made: %s%s", path, e, without and f": {without}")
        return None
    return path


def open_procs(path: str | None) -> int | None:
    """An open cgroup.procs of `path` for a process to join by (None for None)."""
    return None if path is None else os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)


def kill(path: str | None) -> None:
    """SIGKILL every process in the cgroup and those below it (gone already: nothing to do)."""
    if path is None:
        return
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
    except FileNotFoundError:
        pass


def release(path: str | None) -> None:
    """Remove an exec's cgroup once its command is done: what it left running in the background
    (a `cmd &`) moves up to its container's, where upstream's exec processes all are. A cgroup
    that cannot be removed is left to its pod's removal (logged), never failing the exec."""
    if path is None:
        return
    try:
        for _ in range(100):
            try:
                os.rmdir(path)
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = f.read().split()
            if not pids:  # killed ones on their way out
                wait_empty(path, 1.0)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError), open(os.path.join(path, "..", "cgroup.procs"), "w") as f:
                    f.write(pid)
        log.warning("cgroup %s not removed: its processes keep coming", path)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("cgroup %s not removed: %s", path, e)


def populated(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            return any(line.split() == ["populated", "1"] for line in f)
    except FileNotFoundError:
        return False


def wait_empty(path: str, timeout: float) -> bool:
    """Block until no process is left in the cgroup or below (cgroup.events says so, with a
    POLLPRI); whether that happened within `timeout` seconds."""
    try:
        fd = os.open(os.path.join(path, "cgroup.events"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI)
        deadline = time.monotonic() + timeout
        while populated(path):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poller.poll(left * 1000)
        return True
    finally:
        os.close(fd)


def remove(path: str | None, timeout: float = 5.0) -> None:
    """Kill what is left in the cgroup, wait for it to go, and remove the cgroup and those
    below it (a crashed run's too)."""
    if path is None or not os.path.isdir(path):
        return
    kill(path)
    if not wait_empty(path, timeout):
        log.warning("cgroup %s: processes left after cgroup.kill; not removed", path)
        return
    for parent, dirs, _ in os.walk(path, topdown=False):
        for target in [*(os.path.join(parent, d) for d in dirs), *([path] if parent == path else [])]:
            try:
                os.rmdir(target)
            except FileNotFoundError:
                pass
            except OSError as e:
                log.warning("cgroup %s not removed: %s", target, e)
