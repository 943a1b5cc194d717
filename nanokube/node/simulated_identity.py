"""Who and where a simulated container's process is, as busybox's `id`, `whoami`, `uname` and
`ps` say it: the first commands people type in a new pod (`kubectl exec -it pod -- sh`, the
security-context docs' `id`, `ps` in `kubectl debug --target`), which a shell would otherwise
answer `sh: id: not found`.

The identity is the pod's security context's (`run_as`: runAsUser, runAsGroup, fsGroup,
supplementalGroups; root without). Names and homes come from the accounts of the image's
family's /etc/passwd and /etc/group (`image_family`): another uid is shown as a number, as
busybox shows one its image does not name. `uname` answers for the simulated node's kernel (simulated_host).
`ps` lists the container's PID namespace (`processes`): its own main process, or with
`shareProcessNamespace` the pod's pause and every running container's, or for an ephemeral
container with `targetContainerName` the target's; each container one process (its command,
or its image's name without one), then `ps` itself.
"""

from __future__ import annotations

from .simulated_applets import Process, Unknown, _flags
from .simulated_fs import ContainerFS
from .simulated_host import KERNEL_BUILD, KERNEL_VERSION

#: the accounts (uid: name, home) of each image family's /etc/passwd: busybox's, Alpine's,
#: distroless's and Debian's (Ubuntu's alike: the base of most others, python, pytorch and
#: nvidia/cuda among them); runc sets HOME to "/" for a uid its image lacks
PASSWD = {"busybox": {0: ("root", "/root"), 65534: ("nobody", "/home")},
          "alpine": {0: ("root", "/root"), 65534: ("nobody", "/")},
          "distroless": {0: ("root", "/root"), 65532: ("nonroot", "/home/nonroot"), 65534: ("nobody", "/nonexistent")},
          "debian": {0: ("root", "/root"), 65534: ("nobody", "/nonexistent")}}
#: the groups of each family's /etc/group (65534 is nogroup in busybox and Debian, nobody elsewhere)
GROUP = {"busybox": {0: "root", 65534: "nogroup"}, "alpine": {0: "root", 65534: "nobody"},
         "distroless": {0: "root", 65532: "nonroot", 65534: "nobody"}, "debian": {0: "root", 65534: "nogroup"}}
#: what the images whose default command is a shell run without a command
DEFAULT_COMMANDS = {"busybox": "sh", "alpine": "/bin/sh", "ubuntu": "/bin/bash", "debian": "bash"}


def _containers(spec: dict) -> list[dict]:
    """The containers that run beside the app: sidecars (restartable init containers), the app's,
    the ephemeral ones."""
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    return [*sidecars, *(spec.get("containers") or ()), *(spec.get("ephemeralContainers") or ())]


def run_as(pod: dict, name: str) -> tuple[int, int, tuple[int, ...]]:
    """(uid, gid, groups) of container `name`'s processes: runAsUser and runAsGroup (the container's
    over the pod's; the image's root without), and as groups the gid, fsGroup and the pod's
    supplementalGroups, sorted as the kernel keeps them (the image's /etc/group is not read)."""
    spec = pod.get("spec") or {}
    container = next((c for c in _containers(spec) + list(spec.get("initContainers") or ()) if c.get("name") == name), {})
    ctx, own = spec.get("securityContext") or {}, container.get("securityContext") or {}
    uid = own.get("runAsUser", ctx.get("runAsUser")) or 0
    gid = own.get("runAsGroup", ctx.get("runAsGroup")) or 0
    extra = [ctx["fsGroup"]] if ctx.get("fsGroup") is not None else []
    return uid, gid, tuple(sorted({gid, *extra, *(ctx.get("supplementalGroups") or ())}))


def _family(pod: dict, name: str) -> str:
    spec = pod.get("spec") or {}
    container = next((c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or ()
                      if c.get("name") == name), {})
    return image_family(container.get("image") or "")


def home(pod: dict, name: str) -> str:
    """HOME of container `name`: its user's home in its image's /etc/passwd, "/" for an unknown uid."""
    account = PASSWD[_family(pod, name)].get(run_as(pod, name)[0])
    return account[1] if account else "/"


def names(fs: ContainerFS) -> tuple[dict[int, str], dict[int, str]]:
    """(user names, group names) by id, as the container's own image's /etc/passwd and /etc/group
    have them: those a command run there shows, whoever's processes it lists."""
    family = _family(fs.pod, fs.container)
    return {uid: account[0] for uid, account in PASSWD[family].items()}, GROUP[family]


def image_family(image: str) -> str:
    """Whose /etc/passwd an image has (PASSWD): busybox's, Alpine's (an `alpine` image or tag),
    distroless's, else Debian's."""
    reference = image.split("@")[0]
    repository, tag = reference.rsplit(":", 1) if ":" in reference.rsplit("/", 1)[-1] else (reference, "")
    base = repository.rsplit("/", 1)[-1]
    if base == "busybox":
        return "busybox"
    if base == "alpine" or "alpine" in tag:
        return "alpine"
    return "distroless" if "distroless" in repository else "debian"


def _main_process(container: dict) -> str:
    argv = [*(container.get("command") or ()), *(container.get("args") or ())]
    if argv:
        return " ".join(argv)
    image = (container.get("image") or "").split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return DEFAULT_COMMANDS.get(image, image)


def processes(pod: dict, name: str) -> list[tuple[int, str]]:
    """(uid, command line) of each process container `name` sees, PID 1 first: those of the
    containers in its PID namespace that run (the pod's status says so; `name` itself always)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    running = {s.get("name") for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
               for s in status.get(key) or () if "running" in (s.get("state") or {})}
    containers = _containers(spec)
    me = next((c for c in containers if c.get("name") == name), {"name": name})
    if spec.get("shareProcessNamespace"):
        members, head = containers, [(0, "/pause")]
    else:
        owner = me.get("targetContainerName") or name
        members, head = [c for c in containers if c.get("name") == owner or c.get("targetContainerName") == owner], []
    return head + [(run_as(pod, c["name"])[0], _main_process(c)) for c in members
                   if c.get("name") == name or c.get("name") in running or not status]


def _id(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """id [-u|-g|-G] [-n]: `uid=0(root) gid=0(root) groups=0(root)`, or one of them; a name
    asked for (-n) that the image lacks is the number, and an error (status 1)."""
    flags, rest = _flags(args, "ugGnr")
    if rest or len(flags & {"u", "g", "G"}) > 1 or ("n" in flags and not flags & {"u", "g", "G"}):
        raise Unknown
    uid, gid, groups = run_as(fs.pod, fs.container)
    users, group_names = names(fs)
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
    uid, users = run_as(fs.pod, fs.container)[0], names(fs)[0]
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
    rows = processes(fs.pod, fs.container) + [(run_as(fs.pod, fs.container)[0], " ".join([name, *args]))]
    users, lines = names(fs)[0], ["PID   USER     TIME  COMMAND"]
    for i, (uid, command) in enumerate(rows):
        lines.append(f"{1 + 6 * i:5d} {users.get(uid, str(uid)):<8.8s}  0:00 {command}")
    run.out("\n".join(lines) + "\n")
    return 0


APPLETS = {"id": _id, "whoami": _whoami, "uname": _uname, "ps": _ps}
