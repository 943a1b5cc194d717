"""The process runtime: pods as real processes in network namespaces, one
runtime per `nanokube up`. It builds the cluster's namespaces (netns.py) and
its cgroup, each container's processes in one below it (cgroup.py), limited
to the container's requests and limits (limits.py),
hands each bound pod to a ProcessPodWorker (worker.py), keeps the mount
targets it had to create so they go away with their pods (and after a
crash, on the next start). Each worker serves its containers' logs and
streams (stdio.py).

Mount targets live on the host's file system, which every runtime on the
host shares (two `nanokube up` at once, each with pods mounting
/var/run/secrets/kubernetes.io/serviceaccount): who uses each target is
kept in one host-wide record, under a lock, so a runtime whose last pod
goes never removes a target that another runtime's pods still bind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import tempfile

from ..containerlog import MAX_FILES, MAX_SIZE
from .cgroup import Cgroups
from .limits import Limits
from .netns import ClusterNetwork, reachable_from_pods
from .usage import measure
from .worker import ProcessPodWorker


#: the host-wide record of mount targets: target -> {"users": {runtime: pods}, "created": [paths, deepest first]}
MOUNTPOINTS = os.path.join(tempfile.gettempdir(), "nanokube-mountpoints.json")


class ProcessRuntime:
    """Runs pods as processes in network namespaces; one per `nanokube up`."""

    name = "process"
    #: what each of its handlers supports, as the CRI's status reports it: a read-only bind is
    #: remounted read-only at its top only (launch.py), its submounts stay writable; no user namespaces
    handler_features = {"recursiveReadOnlyMounts": False, "userNamespaces": False}

    def __init__(self, state_dir: str, tag: str, *, backoff_initial: float = 10.0,
                 log_max_size: int = MAX_SIZE, log_max_files: int = MAX_FILES,
                 mountpoints: str = MOUNTPOINTS):
        self.state_dir = state_dir
        #: each container instance's log rotates at this size, keeping this many files (the kubelet's defaults)
        self.log_max_size, self.log_max_files = log_max_size, log_max_files
        self.net = ClusterNetwork(tag)
        self.cgroups = Cgroups(tag)
        self.limits = Limits(tag)
        self.backoff_initial = backoff_initial
        self.pods: dict[tuple[str, str], ProcessPodWorker] = {}
        #: the host-wide mount target record, and this runtime's name in it (pid: a crashed runtime's entries are found)
        self.mountpoints = mountpoints
        self._user = f"{os.getpid()}:{id(self):x}"
        #: the kubelet's clusterDNS: the cluster DNS server's address where one serves the pods
        #: (`up`'s clusterdns), else none and dnsPolicy ClusterFirst falls back to the node's resolver
        self.cluster_dns: tuple[str, ...] = ()
        #: where its pods reach the node's resolvers, for the node's resolv.conf's own (`up`'s
        #: clusterdns forwards there, dns.NODE_RESOLVER), else those (which no pod reaches)
        self.node_dns: tuple[str, ...] = ()

    def start(self, nodes: list[tuple[str, int, str, str]], api: tuple[str, int] | None = None) -> socket.socket | None:
        """Remove what a crashed run left but its containers' logs (the agent's adopted pods count
        on from them, worker.py `_count_on`; a clean stop removes them), then build the network of
        `nodes` (name, index, node IP, podCIDR). `api` (advertised address, port): returns a
        socket listening there for pods, which the API server serves (None where pods
        cannot reach that address)."""
        self._remove_mountpoints()
        os.makedirs(self.state_dir, exist_ok=True)
        self.cgroups.create()
        self.limits.create(self.cgroups.root)
        self.net.create(nodes)
        return self.net.listen(*api) if api and reachable_from_pods(api[0]) else None

    def close(self) -> None:
        self.cgroups.close()
        self.limits.close()
        self.net.close()
        self._remove_mountpoints()
        shutil.rmtree(os.path.join(self.state_dir, "logs"), ignore_errors=True)

    def update_qos(self) -> None:
        """The burstable QoS cgroup weighs as its pods' cpu requests together (limits.py), set again
        as one is added, resized or goes."""
        self.limits.burstable(sum(w.burstable_cpu() for w in self.pods.values()))

    def worker(self, agent, pod: dict) -> ProcessPodWorker:
        return ProcessPodWorker(agent, pod, self)

    def usage(self, pod: dict) -> dict | None:
        """Measured usage of a pod's running containers (a MetricsProvider usage
        source); None for pods this runtime does not run."""
        md = pod["metadata"]
        w = self.pods.get((md.get("namespace"), md["name"]))
        if w is None or w.uid != md.get("uid"):
            return None
        return measure([*w.containers.values(), *(c for c in w.inits.values() if c.sidecar)], w.clock.monotonic())

    # --- mount targets created for volumes ---------------------------------------------

    @contextlib.contextmanager
    def _record(self):
        """The host-wide record, locked against the other runtimes, written back on exit."""
        with open(self.mountpoints + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(self.mountpoints) as f:
                    record = json.load(f)
            except (OSError, ValueError):
                record = {}
            yield record
            tmp = f"{self.mountpoints}.{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(record, f)
            os.replace(tmp, self.mountpoints)

    def claim_mountpoint(self, target: str, is_file: bool) -> None:
        """Make sure `target` exists; what had to be created for it (the target
        and missing parents) is removed again when no pod of any runtime uses it.
        A target some other process removed is made again."""
        with self._record() as record:
            entry = record.setdefault(target, {"users": {}, "created": []})
            entry["users"][self._user] = entry["users"].get(self._user, 0) + 1
            _make(entry, target, is_file)

    def restore_mountpoints(self, targets: list[tuple[str, bool]]) -> None:
        """Make again the claimed (target, is_file) pairs that are gone, before a command of a
        running container (an exec, a probe, a restart) binds them: another process on the host
        may have removed a target, or the record, while our pods use it. Made again, a target is
        ours to remove with its last use, as one claimed is."""
        missing = [(t, f) for t, f in targets if not os.path.lexists(t)]
        if not missing:
            return
        with self._record() as record:
            for target, is_file in missing:
                entry = record.setdefault(target, {"users": {}, "created": []})
                entry["users"].setdefault(self._user, 1)  # a lost record lost our use of it too
                _make(entry, target, is_file)

    def release_mountpoint(self, target: str) -> None:
        with self._record() as record:
            entry = record.get(target)
            if entry is None or self._user not in entry["users"]:
                return
            entry["users"][self._user] -= 1
            if entry["users"][self._user] <= 0:
                del entry["users"][self._user]
            _remove_unused(record)

    def _remove_mountpoints(self) -> None:
        """Drop this runtime's uses and those of runtimes whose process is gone, then
        remove what no one uses."""
        with self._record() as record:
            for entry in record.values():
                entry["users"] = {user: n for user, n in entry["users"].items()
                                  if user != self._user and _alive(int(user.split(":")[0]))}
            _remove_unused(record)


def _make(entry: dict, target: str, is_file: bool) -> None:
    """Create `target` and its missing parents, adding what was created to `entry`'s."""
    created, d = [], os.path.dirname(target)
    while not os.path.exists(d):
        created.append(d)
        d = os.path.dirname(d)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if not os.path.exists(target):
        if is_file:
            open(target, "a").close()
        else:
            os.mkdir(target)
        created.insert(0, target)
    entry["created"] = sorted({*entry["created"], *created}, key=len, reverse=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _remove_unused(record: dict) -> None:
    """Remove the paths created for targets no one uses; a directory created for one
    target that still holds another becomes that target's to remove (mount paths
    sharing a new parent)."""
    for target in [t for t, entry in record.items() if not entry["users"]]:
        for path in record.pop(target)["created"]:
            _remove_empty(path)
            if not os.path.lexists(path):
                continue
            for other, entry in record.items():
                if other.startswith(path.rstrip("/") + "/") and path not in entry["created"]:
                    entry["created"] = sorted([*entry["created"], path], key=len, reverse=True)
                    break


def _remove_empty(target: str) -> None:
    try:
        if os.path.isdir(target):
            os.rmdir(target)
        elif os.path.isfile(target) and os.path.getsize(target) == 0:
            os.unlink(target)
    except OSError:
        pass
