"""Who a simulated container's processes are, and the accounts its image names: the pod's
security context's user, group and groups (`run_as`), and each image family's /etc/passwd and
/etc/group (`image_family`), for the commands that show owners (`id`, `ps`, `ls -l`, `stat`) and
for the files a process makes (simulated_fs)."""

from __future__ import annotations

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


def containers(spec: dict) -> list[dict]:
    """The containers that run beside the app: sidecars (restartable init containers), the app's,
    the ephemeral ones."""
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    return [*sidecars, *(spec.get("containers") or ()), *(spec.get("ephemeralContainers") or ())]


def run_as(pod: dict, name: str) -> tuple[int, int, tuple[int, ...]]:
    """(uid, gid, groups) of container `name`'s processes: runAsUser and runAsGroup (the container's
    over the pod's; the image's root without), and as groups the gid, fsGroup and the pod's
    supplementalGroups, sorted as the kernel keeps them (the image's /etc/group is not read)."""
    spec = pod.get("spec") or {}
    container = next((c for c in containers(spec) + list(spec.get("initContainers") or ()) if c.get("name") == name), {})
    ctx, own = spec.get("securityContext") or {}, container.get("securityContext") or {}
    uid = own.get("runAsUser", ctx.get("runAsUser")) or 0
    gid = own.get("runAsGroup", ctx.get("runAsGroup")) or 0
    extra = [ctx["fsGroup"]] if ctx.get("fsGroup") is not None else []
    return uid, gid, tuple(sorted({gid, *extra, *(ctx.get("supplementalGroups") or ())}))


def image_of(pod: dict, name: str) -> str:
    """The image container `name` of `pod` runs ("" where it names none)."""
    spec = pod.get("spec") or {}
    container = next((c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or ()
                      if c.get("name") == name), {})
    return container.get("image") or ""


def _family(pod: dict, name: str) -> str:
    return image_family(image_of(pod, name))


def home(pod: dict, name: str) -> str:
    """HOME of container `name`: its user's home in its image's /etc/passwd, "/" for an unknown uid."""
    account = PASSWD[_family(pod, name)].get(run_as(pod, name)[0])
    return account[1] if account else "/"


def names(pod: dict, name: str) -> tuple[dict[int, str], dict[int, str]]:
    """(user names, group names) by id, as container `name`'s own image's /etc/passwd and
    /etc/group have them: those a command run there shows, whoever's processes or files it lists."""
    family = _family(pod, name)
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
