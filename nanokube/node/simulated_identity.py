"""Who and where a simulated container's process is, as busybox's `id`, `whoami`, `uname` and
`ps` say it: the first commands people type in a new pod (`kubectl exec -it pod -- sh`, the
security-context docs' `id`, `ps` in `kubectl debug --target`), which a shell would otherwise
answer `sh: id: not found`.

The identity is the pod's security context's (simulated_accounts.run_as: runAsUser, runAsGroup,
fsGroup, supplementalGroups; root without). Names come from the accounts of the image's
family's /etc/passwd and /etc/group (simulated_accounts): another uid is shown as a number, as
busybox shows one its image does not name. `uname` answers for the simulated node's kernel (simulated_host).
`ps` lists the container's PID namespace (`processes`): its own main process, or with
`shareProcessNamespace` the pod's pause and every running container's, or for an ephemeral
container with `targetContainerName` the target's; each container one process (its command,
or its image's name without one), then `ps` itself.
"""

from __future__ import annotations

from .simulated_accounts import containers, names, run_as
from .simulated_applets import Process, Unknown, _flags
from .simulated_fs import ContainerFS
from .simulated_host import KERNEL_BUILD, KERNEL_VERSION

#: what the images whose default command is a shell run without a command
DEFAULT_COMMANDS = {"busybox": "sh", "alpine": "/bin/sh", "ubuntu": "/bin/bash", "debian": "bash"}


def _main_process(container: dict) -> str:
    argv = [*(container.get("command") or ()), *(container.get("args") or ())]
    if argv:
        return " ".join(argv)
    image = (container.get("image") or "").split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return DEFAULT_COMMANDS.get(image, image)


def processes(pod: dict, name: str) -> list[tuple[int, str, str]]:
    """(uid, command line, its container: "" for the pause process) of each process container
    `name` sees, PID 1 first: those of the containers in its PID namespace that run (the pod's
    status says so; `name` itself always)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    running = {s.get("name") for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
               for s in status.get(key) or () if "running" in (s.get("state") or {})}
    beside = containers(spec)
    me = next((c for c in beside if c.get("name") == name), {"name": name})
    if spec.get("shareProcessNamespace"):
        members, head = beside, [(0, "/pause", "")]
    else:
        owner = me.get("targetContainerName") or name
        members, head = [c for c in beside if c.get("name") == owner or c.get("targetContainerName") == owner], []
    return head + [(run_as(pod, c["name"])[0], _main_process(c), c["name"]) for c in members
                   if c.get("name") == name or c.get("name") in running or not status]


def _id(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """id [-u|-g|-G] [-n]: `uid=0(root) gid=0(root) groups=0(root)`, or one of them; a name
    asked for (-n) that the image lacks is the number, and an error (status 1)."""
    flags, rest = _flags(args, "ugGnr")
    if rest or len(flags & {"u", "g", "G"}) > 1 or ("n" in flags and not flags & {"u", "g", "G"}):
        raise Unknown
    uid, gid, groups = run_as(fs.pod, fs.container)
    users, group_names = names(fs.pod, fs.container)
    if not flags & {"u", "g", "G"}:
        def named(n: int, names: dict[int, str]) -> str:
            return f"{n}({names[n]})" if n in names else str(n)

        run.out(f"uid={named(uid, users)} gid={named(gid, group_names)} "
                f"groups={','.join(named(g, group_names) for g in groups)}\n")
        return 0
    ids, known = ([uid], users) if "u" in flags else ([gid], group_names) if "g" in flags else (list(groups), group_names)
    status, words = 0, []
    for n in ids:
        if "n" in flags and n in known:
            words.append(known[n])
            continue
        words.append(str(n))
        if "n" in flags:
            run.err(f"id: unknown ID {n}\n")
            status = 1
    run.out(" ".join(words) + "\n")
    return status


def _whoami(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    if args:
        raise Unknown
    uid, users = run_as(fs.pod, fs.container)[0], names(fs.pod, fs.container)[0]
    if uid not in users:
        run.err(f"whoami: unknown uid {uid}\n")
        return 1
    run.out(users[uid] + "\n")
    return 0


def _uname(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """uname [-snrvmoa]: the kernel's name (alone without options), the pod's hostname, the
    simulated node's release and build, its machine and the OS, in that order."""
    flags, rest = _flags(args, "snrvmoa")
    if rest:
        raise Unknown
    if "a" in flags:
        flags = set("snrvmo")
    host = fs.read("/etc/hostname").decode().strip()
    fields = {"s": "Linux", "n": host, "r": KERNEL_VERSION, "v": KERNEL_BUILD, "m": "x86_64", "o": "GNU/Linux"}
    run.out(" ".join(v for k, v in fields.items() if k in (flags or {"s"})) + "\n")
    return 0


def _ps(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox ps: PID, USER, TIME and COMMAND of each process; its options (`aux`, `-ef`) change
    nothing, but `-o`, a format, is not simulated."""
    if any(a.startswith("-") and "o" in a for a in args):
        raise Unknown
    rows = processes(fs.pod, fs.container) + [(run_as(fs.pod, fs.container)[0], " ".join([name, *args]), fs.container)]
    users, lines = names(fs.pod, fs.container)[0], ["PID   USER     TIME  COMMAND"]
    for i, (uid, command, _) in enumerate(rows):
        lines.append(f"{1 + 6 * i:5d} {users.get(uid, str(uid)):<8.8s}  0:00 {command}")
    run.out("\n".join(lines) + "\n")
    return 0


APPLETS = {"id": _id, "whoami": _whoami, "uname": _uname, "ps": _ps}
