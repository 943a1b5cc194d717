"""Becomes one container's process, run inside its pod's network namespace
by `ip netns exec` (which already gives it a private mount namespace):
set the pod's hostname in a UTS namespace of its own, bind its volumes at
their mount paths and its cgroups at /sys/fs/cgroup (read-only, as runc
does), change to its working directory, and exec the command
as the leader of a session of its own (a terminal on stdin becomes its
controlling one), as the user the security context names (`"user"`: uid, gid
and supplementary groups, runAsUser/runAsGroup/fsGroup/supplementalGroups;
root without), which it becomes last, after the mounts, /proc and its cgroup.

The command runs in a PID namespace, as runc runs it: a new one (`"pid":
"new"`: the command is its PID 1, which sees its own PIDs under a /proc
mounted for it), one to join (a path to a namespace file: a pod's shared
namespace, a container an exec enters), or the host's (`null`: hostPID; the
command replaces this process). A namespace is entered only by a fork, so
for the first two this process stays as the command's parent, a shim like
containerd's: it passes the stop signals it gets on to the command (the
kernel drops those a PID 1 has no handler for), reaps it, and exits as it
exited (128+N for a signal N, as runtimes report it); were the shim killed,
the parent-death signal kills the command. With `"pause": true` the
namespace's PID 1 is the pod sandbox's pause process: it reaps what is
reparented to it and ends on SIGINT or SIGTERM.

The second argument is a file descriptor: once the command's process
exists, its PID (the host's numbering) is written there, so the runtime can
kill its process group (in a new namespace, the namespace), and a namespace
to join is the command's (/proc/SHIM/ns/pid_for_children), never the one the
shim started in.

Further arguments, where given, are open cgroup.procs files (cgroup.py's, and
on a cgroup v1 host limits.py's of each controller): the command's process
joins those cgroups before it runs anything, so all it starts is in them; the shim stays out, as containerd's does, so that a kill of the
cgroup leaves it to reap the command and end as it did (137).

Run as a plain script (stdlib only) so a container starts without
importing nanokube: `python3 -I launch.py SPEC_JSON READY_FD [CGROUP_FD...]`.
"""

import ctypes
import fcntl
import json
import os
import resource
import signal
import sys
import termios

CLONE_NEWUTS, CLONE_NEWPID = 0x04000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15
#: the limits a container has under containerd 2, which sets none of its own: those its systemd unit
#: and systemd's defaults give it (simulated_limits lists them all), here those that differ from what
#: nanokube's own process may have: open files 1024 (hard 524288), processes unlimited
RLIMITS = ((resource.RLIMIT_NOFILE, (1024, 524288)), (resource.RLIMIT_NPROC, (resource.RLIM_INFINITY,) * 2))
#: what the shim passes on to the command (the runtime's stop signal among them)
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

libc = ctypes.CDLL(None, use_errno=True)


def _fail(what: str, err: int) -> None:
    sys.stderr.write(f"nanokube launch: {what}: {os.strerror(err)}\n")
    sys.exit(128)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        _fail(what, ctypes.get_errno())


def _cgroupfs(views: dict) -> None:
    """The container's cgroups at /sys/fs/cgroup, read-only, as runc mounts them (cgroup.py's
    `views`): its v2 cgroup there on a v2-only host; else a tmpfs holding each v1 hierarchy's
    cgroup under the hierarchy's controllers' names (memory, cpu, pids) and the v2 one as
    `unified`. Each hierarchy is mounted afresh, the cgroup bound over it. One that cannot be is
    left out: a container starts without the view rather than not at all."""
    base = "/sys/fs/cgroup"
    v1, v2 = views.get("v1") or [], views.get("v2")
    if not v1 and v2 is None:
        return
    if v1 and libc.mount(b"tmpfs", base.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"mode=755") != 0:
        return
    for kind, options, where, at in [*(("cgroup", o, w, f"{base}/{o}") for o, w in v1),
                                     *([("cgroup2", "", v2, f"{base}/unified" if v1 else base)] if v2 else [])]:
        try:
            os.makedirs(at, exist_ok=True)
        except OSError:
            continue
        if libc.mount(kind.encode(), at.encode(), kind.encode(), MS_NOSUID | MS_NODEV | MS_NOEXEC, options.encode() or None) == 0:
            inner = f"{at}/{where.strip('/')}".rstrip("/").encode()
            if libc.mount(inner, at.encode(), None, MS_BIND, None) == 0:
                libc.mount(None, at.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    if v1:
        libc.mount(None, base.encode(), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"mode=755")


def _enter_pid_namespace(pid: str) -> None:
    """Make the next child's PID namespace a new one, or the one the file `pid` names."""
    if pid == "new":
        _check(libc.unshare(CLONE_NEWPID), "unshare PID namespace")
        return
    try:
        fd = os.open(pid, os.O_RDONLY)
    except OSError as e:
        _fail(f"open PID namespace {pid}", e.errno)
    _check(libc.setns(fd, CLONE_NEWPID), f"join PID namespace {pid}")
    os.close(fd)


def _join_cgroups(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.write(fd, b"0")
        except OSError as e:
            _fail("join cgroup", e.errno)
        os.close(fd)


def _ready(fd: int, pid: int) -> None:
    os.write(fd, str(pid).encode())
    os.close(fd)


def _session() -> None:
    """Lead a session of its own; a terminal on stdin becomes its controlling one (job control)."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    if os.isatty(0):
        try:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        except OSError:
            pass


def _become(user) -> None:
    """Drop root for the user (uid, gid, groups), groups first, as runc does before the exec."""
    if not user:
        return
    uid, gid, groups = user
    try:
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
    except OSError as e:
        _fail(f"become user {uid}:{gid}", e.errno)


def _limit() -> None:
    """containerd 2's limits (RLIMITS), each as far as this host lets root go: without
    CAP_SYS_RESOURCE no hard limit is raised, and the soft one stays within the hard."""
    def at_most(a: int, b: int) -> int:
        return b if a == resource.RLIM_INFINITY else a if b == resource.RLIM_INFINITY else min(a, b)
    for limit, (soft, hard) in RLIMITS:
        try:
            resource.setrlimit(limit, (soft, hard))
        except (OSError, ValueError):  # (no CAP_SYS_RESOURCE: the hard limit as it is)
            have = resource.getrlimit(limit)[1]
            resource.setrlimit(limit, (at_most(soft, have), at_most(hard, have)))


def _exec(spec: dict) -> None:
    """The command, as its user, with the signals Python ignores at start (SIGPIPE, SIGXFSZ) put back
    and containerd 2's resource limits (RLIMITS)."""
    _limit()
    _become(spec.get("user"))
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as e:
        sys.stderr.write(f"nanokube launch: exec {argv[0]}: {e.strerror}\n")
        sys.exit(127)


def _pause() -> None:
    """The pod sandbox's PID 1: reap every child, end on SIGINT or SIGTERM (the pause image's)."""
    def reap(*_):
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
    libc.prctl(PR_SET_NAME, b"pause", 0, 0, 0)  # its name in ps, as the pause image's /pause
    signal.signal(signal.SIGCHLD, reap)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: os._exit(0))
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    reap()
    while True:
        signal.pause()


def _child(spec: dict) -> None:
    """In the namespace: die with the shim, see the namespace's PIDs under /proc, run."""
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    _session()
    if spec.get("pause"):
        _pause()
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    _exec(spec)


def _shim(child: int) -> None:
    """Pass the stop signals on to `child` until it ends, then end as it did; none of the
    command's stdio is held open here."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for sig in FORWARDED:
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    status = os.waitpid(child, 0)[1]  # a forwarded signal interrupts it; Python retries (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def main() -> None:
    spec, ready_fd = json.loads(sys.argv[1]), int(sys.argv[2])
    cgroup_fds = [int(fd) for fd in sys.argv[3:]]
    _check(libc.unshare(CLONE_NEWUTS), "unshare UTS namespace")
    name = spec["hostname"].encode()
    _check(libc.sethostname(name, len(name)), "sethostname")
    for src, dst, read_only in spec.get("mounts", ()):
        _check(libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None), f"bind {src} on {dst}")
        if read_only:
            _check(libc.mount(None, dst.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None), f"read-only {dst}")
    _cgroupfs(spec.get("cgroupfs") or {})
    try:
        os.chdir(spec.get("workdir", "/"))
    except OSError as e:
        sys.stderr.write(f"nanokube launch: workingDir {spec['workdir']}: {e.strerror}\n")
        sys.exit(128)
    if spec.get("pid") is None:
        _join_cgroups(cgroup_fds)
        _session()
        _ready(ready_fd, os.getpid())
        _exec(spec)
    _enter_pid_namespace(spec["pid"])
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # none is lost before the shim passes them on
    try:
        child = os.fork()
    except OSError as e:  # a namespace whose PID 1 is gone takes no more processes
        _fail("start in the PID namespace", e.errno)
    if child == 0:
        os.close(ready_fd)
        _join_cgroups(cgroup_fds)
        _child(spec)
    for fd in cgroup_fds:
        os.close(fd)
    _ready(ready_fd, child)
    _shim(child)


if __name__ == "__main__":
    main()
