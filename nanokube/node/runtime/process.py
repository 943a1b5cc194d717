"""The process runtime: pods as real processes in network namespaces, one
runtime per `nanokube up`. It builds the cluster's namespaces (netns.py),
hands each bound pod to a ProcessPodWorker (worker.py), keeps the mount
targets it had to create so they go away with their pods (and after a
crash, on the next start). Each worker serves its containers' logs and
streams (stdio.py).
"""

from __future__ import annotations

import json
import os
import shutil

from ..containerlog import MAX_FILES, MAX_SIZE
from .netns import ClusterNetwork
from .usage import measure
from .worker import ProcessPodWorker


class ProcessRuntime:
    """Runs pods as processes in network namespaces; one per `nanokube up`."""

    name = "process"

    def __init__(self, state_dir: str, tag: str, *, backoff_initial: float = 10.0,
                 log_max_size: int = MAX_SIZE, log_max_files: int = MAX_FILES):
        self.state_dir = state_dir
        #: each container instance's log rotates at this size, keeping this many files (the kubelet's defaults)
        self.log_max_size, self.log_max_files = log_max_size, log_max_files
        self.net = ClusterNetwork(tag)
        self.backoff_initial = backoff_initial
        self.pods: dict[tuple[str, str], ProcessPodWorker] = {}
        #: mount target -> [pods using it, paths created for it, deepest first]
        self._mountpoints: dict[str, list] = {}

    @property
    def _mountpoint_record(self) -> str:
        return os.path.join(self.state_dir, "mountpoints.json")

    def start(self, nodes: list[tuple[str, int, str, str]]) -> None:
        """Remove what a crashed run left, then build the network of `nodes`
        (name, index, node IP, podCIDR)."""
        self._remove_mountpoints()
        shutil.rmtree(os.path.join(self.state_dir, "logs"), ignore_errors=True)
        os.makedirs(self.state_dir, exist_ok=True)
        self.net.create(nodes)

    def close(self) -> None:
        self.net.close()
        self._remove_mountpoints()
        shutil.rmtree(os.path.join(self.state_dir, "logs"), ignore_errors=True)

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

    def claim_mountpoint(self, target: str, is_file: bool) -> None:
        """Make sure `target` exists; what this runtime had to create for it
        (the target and missing parents) is removed again when no pod uses it."""
        if target in self._mountpoints:
            self._mountpoints[target][0] += 1
            return
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
        self._mountpoints[target] = [1, created]
        self._save_mountpoints()

    def release_mountpoint(self, target: str) -> None:
        entry = self._mountpoints.get(target)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] <= 0:
            del self._mountpoints[target]
            for path in entry[1]:
                _remove_empty(path)
                if os.path.lexists(path):
                    self._hand_over(path)
        self._save_mountpoints()

    def _hand_over(self, path: str) -> None:
        """A directory created for one target that still holds another target
        becomes that target's to remove (mount paths sharing a new parent)."""
        for other, (_, created) in self._mountpoints.items():
            if other.startswith(path.rstrip("/") + "/") and path not in created:
                created.append(path)
                created.sort(key=len, reverse=True)
                return

    def _save_mountpoints(self) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        with open(self._mountpoint_record, "w") as f:
            json.dump([path for _, created in self._mountpoints.values() for path in created], f)

    def _remove_mountpoints(self) -> None:
        try:
            with open(self._mountpoint_record) as f:
                paths = json.load(f)
        except (OSError, ValueError):
            paths = []
        paths += [path for _, created in self._mountpoints.values() for path in created]
        for path in sorted(set(paths), key=len, reverse=True):
            _remove_empty(path)
        self._mountpoints.clear()
        if os.path.exists(self._mountpoint_record):
            os.unlink(self._mountpoint_record)


def _remove_empty(target: str) -> None:
    try:
        if os.path.isdir(target):
            os.rmdir(target)
        elif os.path.isfile(target) and os.path.getsize(target) == 0:
            os.unlink(target)
    except OSError:
        pass
