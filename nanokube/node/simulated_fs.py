"""The files a simulated container sees, so that `kubectl cp`, `kubectl exec
-- cat` and `sh -c 'echo x > /f'` behave as on a real node.

A simulated container runs no image, so its root is a small in-memory tree
(the directories a busybox image has, `/etc/hostname`, the kubelet's
/etc/resolv.conf and /etc/hosts: simulated_net) made when something
first looks, and made afresh for each new instance, as a new container gets
a fresh root. Its volume mounts lie over it:

- a ConfigMap, Secret, downwardAPI or projected volume (the service account
  token too) shows the files the kubelet wrote for it on the node
  (volumes/manager.py), read when read, so an update shows through; the
  kubelet mounts these read-only, so writing there fails as on a real node;
- a persistentVolumeClaim (generic ephemeral too), hostPath or nfs volume is
  the node's own directory for it (the claim's volume, the fake NFS export,
  linked at the pod's volume directory by volumes/), read and written there,
  so what a pod writes outlives it, as a checkpoint on a claim does;
- any other volume (emptyDir first) is an in-memory tree of the pod's, shared
  by every container that mounts it and kept across container restarts, gone
  with the pod as upstream's emptyDir is.

A mount's `subPath` and `readOnly` are honoured, and a volume the pod or its
PersistentVolume takes read-only (`read_only`) is read-only at every mount; a
container with readOnlyRootFilesystem has its root read-only but for /dev and
/etc/hosts (`WRITABLE_OVER_READ_ONLY_ROOT`), its volumes as their mounts say. A
volume that is a file on the node (a hostPath of one) is mounted as that file.
The CDI devices of a container's DRA claims add theirs (`cdi`): a CDI mount is
the node's file or directory at its container path, and a device node an empty
file at its path (its `fileMode`), as the runtime would create it. The
container sees its own cgroup (cgroup v2 in a namespace of its own) at
/sys/fs/cgroup, read-only, with its limits and the usage `kubectl top` shows
(memory.current, cpu.stat), and as its /proc/self/cgroup (its cgroup
namespace's root).
A symbolic link (`ln -s`, one `kubectl cp` brings in a tar archive) is a File with its
`link` set in an in-memory tree, followed as the kernel follows one (`ContainerFS._find`), or
a real link in a volume on the node.
Nothing here touches the node's disk but those volumes' directories, and a
link there that leads out of its volume is not followed.
"""

from __future__ import annotations

import contextlib
import copy
import os
import posixpath
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..clock import parse_time
from ..metrics.usage import simulated_usage
from .runtime.limits import PERIOD, container_settings
from .simulated_accounts import run_as

#: volume kinds the kubelet always mounts read-only, whose files it writes on the node
WRITTEN_BY_KUBELET = frozenset({"configMap", "secret", "downwardAPI", "projected"})
#: volume kinds the kubelet writes to a tmpfs (a memory-backed emptyDir it wraps), not to its disk
ON_TMPFS = frozenset({"secret", "downwardAPI", "projected"})
#: volume kinds that are a directory on the node, written where they are
ON_NODE = frozenset({"persistentVolumeClaim", "ephemeral", "hostPath", "nfs"})
#: the directories of a busybox image's root
IMAGE_DIRS = ("bin", "dev", "etc", "home", "proc", "root", "sys", "tmp", "usr", "var")
#: where a container sees its cgroup
CGROUP = "/sys/fs/cgroup"
#: what stays writable over a read-only root (readOnlyRootFilesystem): runc's tmpfs at /dev (its
#: /dev/shm, the kubelet's termination log) and the kubelet's /etc/hosts, a read-write bind mount;
#: containerd's /etc/hostname and /etc/resolv.conf go read-only with the root
WRITABLE_OVER_READ_ONLY_ROOT = ("/dev", "/etc/hosts")


class FsError(Exception):
    """A system call's failure: `reason` as strerror words it ("No such file or directory")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


NOT_FOUND = "No such file or directory"
NOT_DIR = "Not a directory"
IS_DIR = "Is a directory"
EXISTS = "File exists"
READ_ONLY = "Read-only file system"
NOT_EMPTY = "Directory not empty"
NO_SPACE = "No space left on device"
LOOP = "Too many levels of symbolic links"
#: the links a path's walk follows before it fails with ELOOP (Linux's MAXSYMLINKS)
MAX_LINKS = 40
#: a tmpfs's page: what a file's data takes of its size, in whole pages (its directories take none)
PAGE = 4096


class NoSpace(FsError):
    """A write past a tmpfs's size (ENOSPC): `written` of its bytes went in first, as a write(2)
    that fills the last free pages returns short and the next one fails."""

    def __init__(self, written: int):
        super().__init__(NO_SPACE)
        self.written = written


@dataclass
class File:
    """A file: its owner (`uid`, `gid`) as the process that made it, or the kubelet, left it; `link`:
    where the link it was reached by points (a volume the kubelet wrote has links), else None."""

    data: bytes = b""
    mode: int = 0o644
    mtime: float = 0.0
    uid: int = 0
    gid: int = 0
    link: str | None = field(default=None, compare=False)


@dataclass
class Dir:
    """A directory, its owner and `link` as File's."""

    entries: dict[str, File | Dir] = field(default_factory=dict)
    mode: int = 0o755
    mtime: float = 0.0
    uid: int = 0
    gid: int = 0
    link: str | None = field(default=None, compare=False)


@dataclass
class _Mount:
    path: str  # where it is in the container, normalised
    tree: Dir | None = None  # an in-memory volume (its subPath already walked to)
    host: str | None = None  # a volume the kubelet wrote: its directory on the node (subPath joined)
    root: str | None = None  # the volume's own directory on the node: nothing outside it is read
    read_only: bool = False
    volume: Dir | None = None  # a tmpfs's whole tree (a subPath mount's too), its size `limit` bytes
    limit: int = 0
    kind: str = ""  # the volume's kind (emptyDir, secret, persistentVolumeClaim...); "" for a CDI mount
    #: the size of the tmpfs the kubelet mounts a secret, projected or downwardAPI volume on (df's)
    size: int = 0
    #: the tmpfs's pages in use as last counted, and the `_changes` they were counted at
    used: tuple[int, int] | None = None
    #: the pod's fsGroup, which the kubelet gives a volume it writes (a ConfigMap's...)
    group: int | None = None


#: in-memory files' changes (a write, a removal), in any tree: a tmpfs's count of its pages
#: (`_Mount.used`) holds while none came since, so a loop writing file after file into one does
#: not walk it again at each write
_changes = 0


class PodFiles:
    """One pod's in-memory volumes and its containers' roots, made when first needed."""

    def __init__(self, pod: dict, volume_dir, clock, read_only=lambda name: False, node: str = "", cdi=None,
                 etc=None, tmpfs_size=None):
        """`volume_dir(name)`: where the kubelet set up volume `name` on the node; `read_only(name)`:
        whether the kubelet mounts it read-only everywhere (a claim or its PersistentVolume says so);
        `node`: the node's name (a hostNetwork pod's hostname); `cdi(container)`: the CDI edits of
        its devices (`mounts`: (host path, container path, read-only); `device_nodes`: (path, host
        path, mode)); `etc(container)`: the files the kubelet and runtime put in its /etc (name: text),
        /etc/resolv.conf and /etc/hosts; `tmpfs_size(volume)`: the size in bytes the kubelet mounts a
        memory-backed emptyDir's tmpfs with (0: unbounded), past which a write fails (ENOSPC)."""
        self.pod = pod
        self.tmpfs_size = tmpfs_size
        self.etc = etc
        self.node = node
        self.cdi = cdi
        self.volume_dir = volume_dir
        self.read_only = read_only
        self.clock = clock
        self.volumes: dict[str, Dir | File] = {}
        self.roots: dict[str, Dir] = {}
        #: a draft's copy: a volume on the node is copied into memory, so working a command out
        #: leaves the node's directory as it is
        self.snapshot = False

    def restarted(self, container: str) -> None:
        """A new instance of the container: a fresh root; the pod's volumes stay as they are."""
        self.roots.pop(container, None)

    def draft(self, container: str, pod: dict | None = None, fresh: bool = True) -> ContainerFS:
        """What a new instance of `container` would see (`fresh`), or the running one sees, on a
        copy: a command is worked out on it (a container's more than once, as the kubelet's sync
        looks at it) without touching the files, and what it changes (`journal`) is done when
        its time comes (`replay`)."""
        scratch = PodFiles(pod or self.pod, self.volume_dir, self.clock, self.read_only, self.node, self.cdi, self.etc,
                           self.tmpfs_size)
        scratch.volumes = copy.deepcopy(self.volumes)
        scratch.snapshot = True
        if not fresh:
            self.container(container, pod)
            scratch.roots[container] = copy.deepcopy(self.roots[container])
        fs = scratch.container(container)
        fs.journal = []
        return fs

    def container(self, name: str, pod: dict | None = None) -> ContainerFS:
        """What container `name` sees (`pod`: the newest copy of the pod, for its mounts)."""
        if pod is not None:
            self.pod = pod
        spec = self.pod.get("spec") or {}
        c = next((c for key in ("containers", "initContainers", "ephemeralContainers") for c in spec.get(key) or ()
                  if c.get("name") == name), {})
        volumes = {v.get("name"): v for v in spec.get("volumes") or ()}
        now = self.clock.now()
        mounts = []
        # a Block claim's device (the file the kubelet linked the volume to) sits at its devicePath
        devices = [{"name": d.get("name"), "mountPath": d.get("devicePath")} for d in c.get("volumeDevices") or ()]
        for m in [*(c.get("volumeMounts") or ()), *devices]:
            vol = volumes.get(m.get("name"))
            if vol is None or not m.get("mountPath"):
                continue
            kind = next((k for k in vol if k != "name"), "emptyDir")
            path = posixpath.normpath(posixpath.join("/", m["mountPath"]))
            sub = [p for p in posixpath.normpath("/" + (m.get("subPath") or "")).split("/") if p]
            read_only = bool(m.get("readOnly") or (vol.get(kind) or {}).get("readOnly")) or self.read_only(vol["name"])
            if kind in WRITTEN_BY_KUBELET or (kind in ON_NODE and (read_only or not self.snapshot)):
                root = self.volume_dir(vol["name"])
                if kind in ON_NODE and not read_only:  # the kubelet makes a missing subPath directory
                    _make_sub(root, sub)
                size = self.tmpfs_size(vol) if kind in ON_TMPFS and self.tmpfs_size else 0
                mounts.append(_Mount(path, host=os.path.join(root, *sub), root=root,
                                     read_only=read_only or kind in WRITTEN_BY_KUBELET, kind=kind, size=size,
                                     group=(spec.get("securityContext") or {}).get("fsGroup")))
                continue
            if kind in ON_NODE and vol["name"] not in self.volumes:
                root = self.volume_dir(vol["name"])
                copied = _host_node(_Mount("/", host=root, root=root), [])
                self.volumes[vol["name"]] = copied if copied is not None else Dir(mode=0o777, mtime=now)
            tmpfs = kind == "emptyDir" and (vol.get("emptyDir") or {}).get("medium") == "Memory"
            if vol["name"] not in self.volumes:
                self.volumes[vol["name"]] = _empty_dir(tmpfs, (spec.get("securityContext") or {}).get("fsGroup"), now)
            tree = volume = self.volumes[vol["name"]]
            limit = self.tmpfs_size(vol) if tmpfs and self.tmpfs_size else 0
            if isinstance(tree, File):  # a hostPath of a file, mounted as that file
                if not sub:
                    mounts.append(_Mount(path, tree=tree, read_only=read_only, kind=kind))
                continue
            for part in sub:  # the kubelet makes a missing subPath directory
                tree = tree.entries.setdefault(part, Dir(mtime=now))
                if not isinstance(tree, Dir):
                    break
            else:
                mounts.append(_Mount(path, tree=tree, read_only=read_only, volume=volume if limit else None,
                                     limit=limit, kind=kind))
        edits = self.cdi(name) if self.cdi and c else None
        for host, target, read_only in edits.mounts if edits else ():
            host = os.path.normpath(host)
            mounts.append(_Mount(posixpath.normpath(target), host=host, root=host, read_only=read_only))
        if c:  # (procfs and cgroupfs: not the container's writable layer)
            own = {pid: Dir({"cgroup": File(b"0::/\n", 0o444, now)}, 0o555, now) for pid in ("self", "1")}
            mounts += [_Mount(CGROUP, tree=_cgroup(self.pod, c, now), read_only=True),
                       _Mount("/proc", tree=Dir(own, 0o555, now), read_only=True)]
        workdir = posixpath.normpath(posixpath.join("/", c.get("workingDir") or "/"))
        root = self.roots.get(name)
        if root is None:
            root = self.roots[name] = Dir(entries={d: Dir(mtime=now) for d in IMAGE_DIRS}, mtime=now)
            root.entries["tmp"].mode = 0o1777
            root.entries["dev"].entries["shm"] = Dir(mode=0o1777, mtime=now)  # the runtime's shm mount
            from .container_env import kernel_hostname  # (here: container_env's volumes import this module)
            host = kernel_hostname(self.pod, self.node) if self.node or not spec.get("hostNetwork") else \
                spec.get("hostname") or (self.pod.get("metadata") or {}).get("name", "")
            root.entries["etc"].entries["hostname"] = File(f"{host}\n".encode(), mtime=now)  # (the UTS name)
            for file, text in (self.etc(c) if self.etc else {}).items():
                root.entries["etc"].entries[file] = File(text.encode(), mtime=now)
            for path in [m.path for m in mounts] + [workdir]:  # the runtime makes each mount point, and workingDir
                d = root
                for part in path.split("/")[1:]:
                    d = d.entries.setdefault(part, Dir(mtime=now)) if isinstance(d, Dir) and part else d
        for path, _, mode in edits.device_nodes if edits else ():
            *parents, leaf = [p for p in posixpath.normpath(path).split("/") if p]
            d = root
            for part in parents:
                d = d.entries.setdefault(part, Dir(mtime=now)) if isinstance(d, Dir) else d
            if isinstance(d, Dir):
                d.entries.setdefault(leaf, File(mode=0o666 if mode is None else mode & 0o7777, mtime=now))
        fs = ContainerFS(root, sorted(mounts, key=lambda m: len(m.path), reverse=True), now)
        fs.read_only_root = bool((c.get("securityContext") or {}).get("readOnlyRootFilesystem"))
        fs.cwd = workdir
        fs.pod, fs.container = self.pod, name
        return fs


class ContainerFS:
    """A container's view of its files: paths are absolute or relative to `cwd` (its workingDir,
    or where a shell's `cd` went)."""

    def __init__(self, root: Dir, mounts: list[_Mount], now: float):
        self.root = root
        self.mounts = mounts
        self.now = now
        self.cwd = "/"
        #: the pod and the container whose view it is (who its processes run as, what they see
        #: of the pod's: simulated_accounts)
        self.pod: dict = {}
        self.container = ""
        #: the changes made, where they are kept to be done again (`PodFiles.draft`): (when, change,
        #: its arguments)
        self.journal: list[tuple[float, str, tuple, dict]] | None = None
        #: where this view's root is in the container's (`chrooted`): its changes are kept at that path
        self.within = "/"
        #: the container's root is mounted read-only (readOnlyRootFilesystem): a change there but in
        #: WRITABLE_OVER_READ_ONLY_ROOT fails with EROFS, as its volumes' mounts say for theirs
        self.read_only_root = False

    def _done(self, change: str, path: str, *args, **kwargs) -> None:
        """Keep `change` to `path` to be made again, on a view whose working directory is not this
        one's (the container's own, where a script made it after a `cd`): its path absolute."""
        if self.journal is not None:
            self.journal.append((self.now, change, (self._outer(path), *args), kwargs))

    def _outer(self, path: str) -> str:
        """`path` as the container's own view names it (the same but in a `chrooted` view)."""
        return posixpath.normpath(posixpath.join(self.within, self.normal(path).lstrip("/")))

    def replay(self, journal) -> None:
        """Make changes a draft of this container made; one the files no longer allow is skipped."""
        for _, change, args, kwargs in journal:
            try:
                getattr(self, change)(*args, **kwargs)
            except FsError:
                pass

    def normal(self, path: str, cwd: str | None = None) -> str:
        """`path` made absolute (from `cwd`, by default the working directory) and normalised."""
        return posixpath.normpath(posixpath.join("/", self.cwd if cwd is None else cwd, path))

    def _mount(self, path: str) -> tuple[_Mount | None, list[str]]:
        """The mount `path` (normalised) lies in, and its parts below the mount point."""
        for m in self.mounts:
            if path == m.path or path.startswith(m.path.rstrip("/") + "/"):
                return m, [p for p in path[len(m.path):].split("/") if p]
        return None, [p for p in path.split("/") if p]

    def chrooted(self, path: str) -> ContainerFS | None:
        """What a process sees after chroot(2) to `path` and chdir("/") (`chroot /host`, as a
        `kubectl debug node/N` pod is used): its root that directory, the mounts below it seen from
        there; None where `path` is no directory. Its changes are kept (on a draft) as the
        container sees their paths, to be made on its own view."""
        path = self.normal(path)
        node = self.lookup(path)
        if not isinstance(node, Dir):
            return None
        mount, parts = self._mount(path)
        below = path.rstrip("/") + "/"
        mounts = [replace(m, path=posixpath.normpath("/" + m.path[len(below):])) for m in self.mounts
                  if m.path.startswith(below)]
        if mount is not None:
            mounts.append(replace(mount, path="/", host=os.path.join(mount.host, *parts)) if mount.host is not None
                          else replace(mount, path="/", tree=node))
        view = ContainerFS(node if mount is None else Dir(), sorted(mounts, key=lambda m: len(m.path), reverse=True),
                           self.now)
        view.pod, view.container, view.journal, view.within = self.pod, self.container, self.journal, self._outer(path)
        view.read_only_root = self.read_only_root and mount is None
        return view

    def lookup(self, path: str, follow: bool = True) -> File | Dir | None:
        """What is at `path`: through the links on its way, its own too where `follow` (stat(2); not:
        lstat(2), a link itself, its `link` its target). One reached through its own link is its
        target's with the link's owner, time and `link` (as the links of a volume the kubelet wrote);
        None where nothing is there, or the links loop."""
        try:
            return self._find(self.normal(path), follow)[1]
        except FsError:
            return None

    def _find(self, path: str, follow: bool, hops: int = 0, nodes: bool = True) -> tuple[str, File | Dir | None]:
        """Normal `path` walked as the kernel walks it, through the links made in memory (`symlink`;
        the last part's only where `follow`): the path it leads to and (where `nodes`) what is there.
        A volume the kubelet wrote follows its own links (`_host_node`). Past MAX_LINKS links: ELOOP."""
        mount, parts = self._mount(path)
        if mount is not None and mount.host is not None:
            return path, _host_node(mount, parts, follow) if nodes else None
        node: File | Dir | None = mount.tree if mount else self.root
        for i, part in enumerate(parts):
            if not isinstance(node, Dir):
                return path, None
            node = node.entries.get(part)
            if type(node) is File and node.link is not None and (follow or i < len(parts) - 1):  # (a link)
                if hops == MAX_LINKS:
                    raise FsError(LOOP)
                here = posixpath.join(mount.path if mount else "/", *parts[:i])
                real, found = self._find(posixpath.normpath(posixpath.join(here, node.link, *parts[i + 1:])), follow,
                                         hops + 1, nodes)
                if i == len(parts) - 1 and found is not None:
                    found = replace(found, link=node.link, mtime=node.mtime, uid=node.uid, gid=node.gid)
                return real, found
        return path, node

    def _real(self, path: str, follow: bool) -> str:
        """`path` normalised, through the links made in memory on its way (its own where `follow`):
        where a change to it is made (a link's target, made where it is missing)."""
        return self._find(self.normal(path), follow, nodes=False)[0]

    def resolved(self, path: str) -> str | None:
        """`path` as `readlink -f` gives it: absolute, normalised, and through the links of a volume the
        kubelet wrote (a ConfigMap's file is a link through `..data` to its timestamped directory);
        None where a directory on the way is not there."""
        path = self.normal(path)
        if not isinstance(self.lookup(posixpath.dirname(path)), Dir):
            return None
        try:
            path = self._real(path, follow=True)
        except FsError:
            return None
        mount, parts = self._mount(path)
        if mount is None or mount.host is None:
            return path
        rel = os.path.relpath(os.path.realpath(os.path.join(mount.host, *parts)), os.path.realpath(mount.host))
        outside = rel == ".." or rel.startswith("../")  # (not `..2026_...`: the volume's own directory)
        return path if outside else posixpath.normpath(posixpath.join(mount.path, rel))

    def link(self, path: str) -> str | None:
        """What the link at `path` points to (`readlink`), None where it is no link."""
        node = self.lookup(path, follow=False)
        return node.link if node is not None else None

    def symlink(self, path: str, target: str, mtime: float | None = None) -> None:
        """Make a symbolic link at `path` to `target` (`ln -s`, tar's): in memory, or on the node in a
        volume there (where a target out of the volume leads nowhere: `_host_node`)."""

        def on_node(real: str) -> None:
            os.symlink(target, real)
            if mtime is not None:
                os.utime(real, (mtime, mtime), follow_symlinks=False)

        self._make(self._real(path, follow=False), on_node, lambda parent, uid, gid: File(
            mode=0o777, mtime=self.now if mtime is None else mtime, uid=uid, gid=gid, link=target),
            "symlink", target, mtime=mtime)

    def read(self, path: str) -> bytes:
        node = self._find(self.normal(path), True)[1]  # (links that loop: ELOOP)
        if node is None:
            raise FsError(NOT_FOUND)
        if isinstance(node, Dir):
            raise FsError(IS_DIR)
        return node.data

    def listdir(self, path: str) -> list[str]:
        node = self.lookup(path)
        if node is None:
            raise FsError(NOT_FOUND)
        if not isinstance(node, Dir):
            raise FsError(NOT_DIR)
        return sorted(node.entries)

    def _on_node(self, path: str) -> str | None:
        """Where `path` is on the node when it lies below the mount point of a writable volume
        there (None when it does not): its directory must exist within the volume."""
        path = self.normal(path)
        mount, parts = self._mount(path)
        if mount is None or mount.host is None:
            return None
        if mount.read_only:
            raise FsError(READ_ONLY)
        if not parts:
            raise FsError(EXISTS if self.lookup(path) is not None else NOT_FOUND)
        parent = self.lookup(posixpath.dirname(path))
        if parent is None:
            raise FsError(NOT_FOUND)
        if not isinstance(parent, Dir):
            raise FsError(NOT_DIR)
        return os.path.join(os.path.realpath(os.path.join(mount.host, *parts[:-1])), parts[-1])

    def _parent(self, path: str) -> tuple[Dir, str]:
        """The directory that holds `path` (to change it) and its name there."""
        path = self.normal(path)
        mount, parts = self._mount(path)
        if mount is not None and (mount.read_only or mount.host is not None):
            raise FsError(READ_ONLY)
        if mount is None and self.read_only_root and not any(
                (outer := self._outer(path)) == at or outer.startswith(at + "/") for at in WRITABLE_OVER_READ_ONLY_ROOT):
            raise FsError(READ_ONLY)
        if not parts:  # the root or a mount point itself
            raise FsError(EXISTS if self.lookup(path) is not None else NOT_FOUND)
        parent = self.lookup(posixpath.dirname(path))
        if parent is None:
            raise FsError(NOT_FOUND)
        if not isinstance(parent, Dir):
            raise FsError(NOT_DIR)
        return parent, parts[-1]

    def write(self, path: str, data: bytes, append: bool = False, mode: int | None = None,
              mtime: float | None = None) -> None:
        """Create or replace (or add to) a regular file (a link's target: made where it is missing)."""
        path = self._real(path, follow=True)
        mount, parts = self._mount(path)
        if mount is not None and not parts and not isinstance(self.lookup(path), Dir | None):
            return self._write_mounted_file(mount, path, data, append, mode, mtime)
        real = self._on_node(path)
        if real is not None:
            if os.path.isdir(real):
                raise FsError(IS_DIR)
            if os.path.islink(real) and not _within(os.path.realpath(real), os.path.realpath(mount.root or "")):
                raise FsError(NOT_FOUND)  # (a link out of its volume leads nowhere, as `_host_node` reads it)
            _write_real(real, data, append, mode, mtime)
            self._done("write", path, data, append=append, mode=mode, mtime=mtime)
            return
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if isinstance(node, Dir):
            raise FsError(IS_DIR)
        others = self._others(mount, node)
        room = None if others is None else max((mount.limit // PAGE) * PAGE - others - (
            len(node.data) if node is not None and append else 0), 0)
        if node is None:
            node = parent.entries[name] = File(mode=0o644, uid=(owner := self._owner(parent))[0], gid=owner[1])
            parent.mtime = self.now
        if room is not None and len(data) > room:
            data, full = data[:room], True
        else:
            full = False
        self._write_node(node, data, append, mode, mtime)
        if others is not None:
            mount.used = others + _pages(len(node.data)), _changes
        self._done("write", path, data, append=append, mode=mode, mtime=mtime)
        if full:
            raise NoSpace(room)

    @staticmethod
    def _others(mount: _Mount | None, node: File | None) -> int | None:
        """The pages of `mount`'s tmpfs that files other than `node` (None: a new file) use, so
        what a write to it can put in before the tmpfs is full; None where the mount has no size
        (not a tmpfs, or one of unknown size)."""
        if mount is None or not mount.limit or mount.volume is None:
            return None
        used = mount.used[0] if mount.used is not None and mount.used[1] == _changes else tmpfs_bytes(mount.volume)
        return used - (_pages(len(node.data)) if node is not None else 0)

    def _write_mounted_file(self, mount: _Mount, path: str, data: bytes, append: bool, mode: int | None,
                            mtime: float | None) -> None:
        """Write a file mounted as itself (a hostPath of a file, a subPath of one), on the node or in memory."""
        if mount.read_only:
            raise FsError(READ_ONLY)
        if isinstance(mount.tree, File):
            self._write_node(mount.tree, data, append, mode, mtime)
        else:
            _write_real(os.path.realpath(mount.host or ""), data, append, mode, mtime)
        self._done("write", path, data, append=append, mode=mode, mtime=mtime)

    def _write_node(self, node: File, data: bytes, append: bool, mode: int | None, mtime: float | None) -> None:
        """Write an in-memory file."""
        global _changes
        _changes += 1
        node.data = node.data + data if append else data
        node.mtime = self.now if mtime is None else mtime
        if mode is not None:
            node.mode = mode

    def mkdir(self, path: str, parents: bool = False, mode: int = 0o755) -> None:
        path = self._real(path, follow=False)
        if parents:
            for i, part in enumerate(path.split("/")[1:], 1):
                sub = "/" + "/".join(path.split("/")[1:i + 1])
                node = self.lookup(sub)
                if node is None:
                    self.mkdir(sub, mode=mode)
                elif not isinstance(node, Dir):
                    raise FsError(NOT_DIR if sub != path else EXISTS)
            return
        self._make(path, lambda real: os.mkdir(real, mode), lambda parent, uid, gid: Dir(
            mode=mode | parent.mode & 0o2000, mtime=self.now, uid=uid, gid=gid), "mkdir", mode=mode)

    def _make(self, path: str, on_node: Callable[[str], None], made: Callable[[Dir, int, int], File | Dir],
              change: str, *args, **kwargs) -> None:
        """Make what is new at normal `path` (not there yet): `on_node` at its path on the node in a
        volume there, else `made` in its parent directory (given it and the new owner's ids), kept as
        `change` with its arguments (`_done`)."""
        real = self._on_node(path)
        if real is not None:
            if os.path.lexists(real):
                raise FsError(EXISTS)
            with _os_error():
                on_node(real)
        else:
            parent, name = self._parent(path)
            if name in parent.entries:
                raise FsError(EXISTS)
            parent.entries[name] = made(parent, *self._owner(parent))
            parent.mtime = self.now
        self._done(change, path, *args, **kwargs)

    def _owner(self, parent: Dir) -> tuple[int, int]:
        """Who a file or directory made in `parent` belongs to: the container's user and group or,
        in a setgid directory (an emptyDir of a pod with an fsGroup), the directory's group."""
        uid, gid, _ = run_as(self.pod, self.container)
        return uid, parent.gid if parent.mode & 0o2000 else gid

    def remove(self, path: str, recursive: bool = False) -> None:
        """Remove a file, a link (not its target) or a directory (with what it holds where `recursive`)."""
        path = self._real(path, follow=False)
        node = self.lookup(path, follow=False)
        if node is None:
            raise FsError(NOT_FOUND)
        if isinstance(node, Dir) and node.entries and not recursive:
            raise FsError(NOT_EMPTY)
        real = self._on_node(path)
        if real is not None:
            with _os_error():
                if os.path.isdir(real) and not os.path.islink(real):
                    shutil.rmtree(real)
                else:
                    os.unlink(real)
            self._done("remove", path, recursive=True)
            return
        global _changes
        _changes += 1
        parent, name = self._parent(path)
        del parent.entries[name]
        parent.mtime = self.now
        self._done("remove", path, recursive=True)


def tmpfs_bytes(tree: Dir | File | None) -> int:
    """What a tmpfs holding `tree` uses: its files' data in whole pages; its directories take none."""
    used = 0
    stack: list = [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, Dir):
            stack.extend(node.entries.values())
        else:
            used += _pages(len(node.data))
    return used


def _pages(size: int) -> int:
    return -(-size // PAGE) * PAGE


@contextlib.contextmanager
def _os_error():
    """An OSError on the node's disk as the FsError the command reports."""
    try:
        yield
    except OSError as e:
        raise FsError(e.strerror or str(e)) from None


#: the cgroup files the kernel makes read-only (-r--r--r--): what it reports, not a setting
_READ_ONLY_FILES = frozenset({"cgroup.controllers", "memory.current", "cpu.stat"})


def _cgroup(pod: dict, container: dict, now: float) -> Dir:
    """The container's cgroup as it sees it at /sys/fs/cgroup: cgroup v2, mounted read-only in a
    cgroup namespace of its own (containerd's on a v2 node), its limits as runc sets them from what
    it runs with (its status's resources, the spec's before the kubelet reports them: limits.py's
    conversions); no pids limit of its own (the kubelet's podPidsLimit is its pod's, above it)."""
    status = next((s for key in ("initContainerStatuses", "containerStatuses") for s in
                   (pod.get("status") or {}).get(key) or () if s.get("name") == container.get("name")), {})
    settings = container_settings(status.get("resources") or container.get("resources") or {})
    files = {"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc", "cgroup.type": "domain",
             "memory.min": "0", "memory.low": "0", "memory.high": "max", "memory.oom.group": "1"}
    for controller in ("cpu", "memory", "pids"):
        files |= settings.files(2, controller)
    files |= _usage(pod, container.get("name"), status, settings.cpu_limit, now)
    return Dir({n: File(f"{v}\n".encode(), 0o444 if n in _READ_ONLY_FILES else 0o644, now)
                for n, v in sorted(files.items())}, 0o555, now)


def _usage(pod: dict, name: str | None, status: dict, cpu_limit: int | None, now: float) -> dict[str, str]:
    """memory.current and cpu.stat from what the usage model (metrics.usage) says the container
    uses, so they agree with `kubectl top`: its working set, and its CPU at that rate since it
    started (all user time: the model has no split; CFS periods counted only under a quota, none
    throttled, as the model never uses more than half its limit)."""
    usage = simulated_usage(pod).get(name)
    started = ((status.get("state") or {}).get("running") or {}).get("startedAt")
    seconds = max(now - parse_time(started), 0) if started and usage else 0
    cpu_usec = int(usage.cpu * seconds * 1000) if usage else 0
    periods = int(seconds * 1_000_000 // PERIOD) if cpu_limit is not None else 0
    stat = {"usage_usec": cpu_usec, "user_usec": cpu_usec, "system_usec": 0, "nr_periods": periods,
            "nr_throttled": 0, "throttled_usec": 0, "nr_bursts": 0, "burst_usec": 0}
    return {"memory.current": str(usage.memory if usage else 0),
            "cpu.stat": "\n".join(f"{k} {v}" for k, v in stat.items())}


def _empty_dir(tmpfs: bool, fs_group: int | None, now: float) -> Dir:
    """A new emptyDir as the kubelet leaves it: 0777 (a tmpfs 1777, sticky), given the pod's
    fsGroup where it has one (setgid, so what is made in it is the group's)."""
    mode = 0o1777 if tmpfs else 0o777
    if fs_group is None:
        return Dir(mode=mode, mtime=now)
    return Dir(mode=mode | 0o2000, mtime=now, gid=fs_group)


def _make_sub(root: str, sub: list[str]) -> None:
    """A subPath's directory in a volume on the node, made where it is missing (not through a link
    out of the volume)."""
    if not sub or not os.path.isdir(root):
        return
    where = os.path.join(root, *sub)
    real_root = os.path.realpath(root)
    if os.path.realpath(where).startswith(real_root + os.sep):
        os.makedirs(where, mode=0o755, exist_ok=True)


def _host_node(mount: _Mount, parts: list[str], follow: bool = True) -> File | Dir | None:
    """A copy of what the kubelet wrote at `parts` below a mount of its volume, with its owners:
    its links followed only while they stay in the volume, the last one's target kept (`link`;
    an AtomicWriter volume's files are links through its `..data` link to its timestamped
    directory, all three listed as `ls -a` lists them); the last one itself where not `follow`."""
    root = os.path.realpath(mount.root or "")
    here = os.path.join(mount.host or "", *parts)
    if not follow and parts and os.path.islink(here):
        if not _within(os.path.realpath(os.path.dirname(here)), root):
            return None
        own = os.lstat(here)
        uid, gid = (0, mount.group or 0) if mount.kind in WRITTEN_BY_KUBELET else (own.st_uid, own.st_gid)
        return File(mode=0o777, mtime=own.st_mtime, uid=uid, gid=gid, link=os.readlink(here))
    real = os.path.realpath(here)
    if not _within(real, root):
        return None
    try:
        st = os.stat(real)
        own = os.lstat(here) if parts else st
    except OSError:
        return None
    link = os.readlink(here) if parts and stat.S_ISLNK(own.st_mode) else None
    mode, uid, gid = st.st_mode & 0o7777, own.st_uid, own.st_gid
    if mount.kind in WRITTEN_BY_KUBELET:  # (root's, as the kubelet leaves them, whoever runs the simulation)
        uid, gid = 0, mount.group or 0
        if mount.group is not None:  # SetVolumeOwnership's, read-only: group-readable, setgid directories
            mode |= 0o2550 if stat.S_ISDIR(st.st_mode) else 0o440
    if os.path.isdir(real):
        return Dir({n: node for n in os.listdir(real) if (node := _host_node(mount, [*parts, n])) is not None},
                   mode=mode, mtime=own.st_mtime, uid=uid, gid=gid, link=link)
    with open(real, "rb") as f:
        return File(f.read(), mode=mode, mtime=own.st_mtime, uid=uid, gid=gid, link=link)


def _within(real: str, root: str) -> bool:
    return real == root or real.startswith(root + os.sep)


def _write_real(real: str, data: bytes, append: bool, mode: int | None, mtime: float | None) -> None:
    """Write a file on the node's disk (the node's root, a hostPath), its mode and time as asked."""
    with _os_error():
        with open(real, "ab" if append else "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(real, mode)
        if mtime is not None:
            os.utime(real, (mtime, mtime))
