"""Who and where a simulated container's process is, as busybox's `id`, `whoami` and `uname`
say it: the first commands people type in a new pod (`kubectl exec -it pod -- sh`, the
security-context docs' `id`), which a shell would otherwise answer `sh: id: not found`.

The identity is the pod's security context's (simulated_fs.run_as: runAsUser, runAsGroup,
fsGroup, supplementalGroups; root without). Names come from the accounts every image has (root,
nobody), not from the image's /etc/passwd: another uid is shown as a number, as busybox shows
one its image does not name. `uname` answers for the simulated node's kernel (simulated_host).
"""

from __future__ import annotations

from .simulated_applets import Process, Unknown, _flags
from .simulated_fs import ContainerFS
from .simulated_host import KERNEL_BUILD, KERNEL_VERSION

USERS = {0: "root", 65534: "nobody"}
GROUPS = {0: "root", 65534: "nogroup"}


def _id(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """id [-u|-g|-G] [-n]: `uid=0(root) gid=0(root) groups=0(root)`, or one of them; a name
    asked for (-n) that the image lacks is the number, and an error (status 1)."""
    flags, rest = _flags(args, "ugGnr")
    if rest or len(flags & {"u", "g", "G"}) > 1 or ("n" in flags and not flags & {"u", "g", "G"}):
        raise Unknown
    uid, gid, groups = fs.user
    if not flags & {"u", "g", "G"}:
        def named(n: int, names: dict[int, str]) -> str:
            return f"{n}({names[n]})" if n in names else str(n)

        run.out(f"uid={named(uid, USERS)} gid={named(gid, GROUPS)} "
                f"groups={','.join(named(g, GROUPS) for g in groups)}\n")
        return 0
    ids, names = ([uid], USERS) if "u" in flags else ([gid], GROUPS) if "g" in flags else (list(groups), GROUPS)
    status, words = 0, []
    for n in ids:
        if "n" in flags and n in names:
            words.append(names[n])
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
    uid = fs.user[0]
    if uid not in USERS:
        run.err(f"whoami: unknown uid {uid}\n")
        return 1
    run.out(USERS[uid] + "\n")
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


APPLETS = {"id": _id, "whoami": _whoami, "uname": _uname}
