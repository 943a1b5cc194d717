"""Static pods: the kubelet's file source (staticPodPath, --pod-manifest-path). Each manifest file
in the directory (or the one file the path names; hidden files and subdirectories skipped, as
upstream's) holds one Pod, which the node runs without anyone asking the API server for it, as
kubeadm's control plane runs. Its name becomes `<name>-<node>`, its namespace `default` where it
has none; its UID is a hash of the manifest, the node and the file, which the
kubernetes.io/config.hash annotation repeats (with config.seen, when first read, and
config.source "file"); it tolerates every NoExecute taint, so the node's own troubles never evict it.

The kubelet publishes each as a mirror pod, so that `kubectl get pods` shows it: the same pod with
kubernetes.io/config.mirror set to its hash, owned (as its controller) by the Node, which
NodeRestriction lets a node create. A changed file replaces the mirror pod (the old one is deleted
and the new one created once the old one is gone), a removed file deletes it, and so does a mirror
pod whose file is gone from an earlier run; a mirror pod deleted by someone else is deleted at once
(grace 0, on its UID) and created again. Upstream notices a file's change through inotify and reads
the directory again each fileCheckFrequency; here the directory's entries are stat-ed each second
and read where they changed, and read again each fileCheckFrequency regardless.

Upstream's kubelet runs the static pod itself and keeps the mirror pod as its reflection (it runs
before the API server answers, and without a Node); nanokube's node runs the mirror pod, as any pod
bound to it, so the pod starts once the Node exists and its mirror pod was created. The node agent
knows the hashes this source holds (`on_read`): a mirror pod another deletes is the reflection
alone, so its static pod keeps running (restartCount, containers and IP unchanged), and its status
goes to the mirror pod made next; a static pod whose manifest is gone or changed stops."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable

import yaml

from ..clock import Clock
from ..machinery.errors import APIError

log = logging.getLogger(__name__)

HASH, SEEN, SOURCE, MIRROR = ("kubernetes.io/config.hash", "kubernetes.io/config.seen", "kubernetes.io/config.source",
                              "kubernetes.io/config.mirror")
#: how often the manifests' directory is stat-ed (upstream's inotify notices a change at once)
STAT_INTERVAL = 1.0


def static_pod(doc: dict, node: str, path: str) -> dict:
    """The static pod a manifest's document describes on `node` (applyDefaults): named for the
    node, of namespace default where it names none, bound to the node, tolerating NoExecute taints,
    its UID and config.hash the hash of the document, the node and the file where it gives no UID."""
    md = dict(doc.get("metadata") or {})
    uid = md.get("uid") or hashlib.md5(json.dumps(doc, sort_keys=True, default=str).encode()
                                       + f"host:{node}file:{path}".encode()).hexdigest()
    md.update(name=f"{md.get('name', '')}-{node.lower()}", namespace=md.get("namespace") or "default",
              annotations={**(md.get("annotations") or {}), HASH: uid})
    md.pop("uid", None)
    spec = dict(doc.get("spec") or {})
    tolerations = list(spec.get("tolerations") or ())
    tolerate = {"operator": "Exists", "effect": "NoExecute"}
    if tolerate not in tolerations:
        tolerations.append(tolerate)
    spec.update(nodeName=node, tolerations=tolerations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def read_manifests(path: str, node: str) -> dict[str, dict]:
    """The static pods of the manifests at `path` (a directory's files, or the file it names), by
    namespace/name; a file that holds no Pod is logged and left out."""
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if not f.startswith(".")]
    elif os.path.exists(path):
        files = [path]
    else:
        log.info("Unable to read config path: path does not exist, ignoring (path %s)", path)
        return {}
    pods: dict[str, dict] = {}
    for file in files:
        if os.path.isdir(file):
            log.info("Not recursing into manifest path %s", file)
            continue
        try:
            with open(file, "rb") as f:
                doc = yaml.safe_load(f)
            if not isinstance(doc, dict) or doc.get("kind") != "Pod" or doc.get("apiVersion") != "v1":
                raise ValueError("the file holds no v1 Pod")
            if not (doc.get("metadata") or {}).get("name"):
                raise ValueError("the Pod has no metadata.name")
        except (OSError, yaml.YAMLError, ValueError) as e:
            log.error("Could not process manifest file %s: %s", file, e)
            continue
        pod = static_pod(doc, node, file)
        pods[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"] = pod
    return pods


def _signature(path: str) -> tuple:
    """What a change of the manifests changes: each entry's name, inode, size and modification time."""
    try:
        entries = [os.path.join(path, f) for f in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
        return tuple((e, s.st_ino, s.st_size, s.st_mtime_ns) for e in entries if (s := os.stat(e)))
    except OSError:
        return ()


class StaticPods:
    """One node's file source and mirror pods. `pods` is the node's pod informer (synced), whose
    cache says which mirror pods exist and whose events wake a pass; `node_uid` the Node's UID the
    mirror pods' owner reference names; `on_read` the node agent's (`static_pods_read`)."""

    def __init__(self, client, node: str, path: str, check_frequency: float, clock: Clock, pods,
                 node_uid: Callable[[], str], *, on_read: Callable[[set[str]], None]):
        self.api = client.resource("", "v1", "pods")
        self.node, self.path, self.check_frequency, self.clock = node, path, check_frequency, clock
        self.informer, self.node_uid = pods, node_uid
        #: told the static pods' hashes each time the manifests are read, before their mirror pods change
        self.on_read = on_read
        #: the static pods the manifests hold, by namespace/name
        self.desired: dict[str, dict] = {}
        #: when each hash was first seen (config.seen)
        self._seen: dict[str, str] = {}
        #: the hashes whose mirror pod the API server refused, not asked again before the next full read
        self._refused: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        wake = lambda *_: self._wake.set()  # noqa: E731
        self.informer.add_handlers(on_update=wake, on_delete=wake)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        signature, read_at = None, float("-inf")
        while True:
            now = self.clock.monotonic()
            if (current := _signature(self.path)) != signature or now - read_at >= self.check_frequency:
                signature, read_at = current, now
                self._refused.clear()
                self.desired = await asyncio.to_thread(read_manifests, self.path, self.node)
                self.on_read({pod["metadata"]["annotations"][HASH] for pod in self.desired.values()})
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("static pods of %s: sync failed", self.path)
            timer = self.clock.call_later(STAT_INTERVAL, self._wake.set)  # (the injected clock's second)
            try:
                await self._wake.wait()
            finally:  # (stopped while waiting: no timer left on a virtual clock's heap to wake a gone loop)
                timer.cancel()
            self._wake.clear()

    def mirror_pod(self, pod: dict) -> dict:
        """The mirror pod of a static pod (CreateMirrorPod): config.mirror its hash, config.seen and
        config.source added, owned by the Node as its controller."""
        md = pod["metadata"]
        digest = md["annotations"][HASH]
        seen = self._seen.setdefault(digest, self.clock.rfc3339_micro())
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self.node_uid(), "controller": True}
        return {**pod, "metadata": {**md, "annotations": {**md["annotations"], SEEN: seen, SOURCE: "file",
                                                          MIRROR: digest}, "ownerReferences": [owner]}}

    async def sync(self) -> None:
        """One pass: a mirror pod created for each static pod without one, one of a changed
        manifest deleted (its replacement created once it is gone), one deleted by another deleted
        at once to be created again, and the mirror pods of no manifest deleted."""
        for key, pod in self.desired.items():
            digest = pod["metadata"]["annotations"][HASH]
            current = self.informer.get(key)
            if current is None:
                if digest not in self._refused and not await self._write(self.api.create(self.mirror_pod(pod)),
                                                                          "create", key):
                    self._refused.add(digest)
                continue
            md = current["metadata"]
            mirror = (md.get("annotations") or {}).get(MIRROR)
            if mirror is None:
                log.warning("static pod %s: a pod that is not its mirror pod has its name", key)
            elif mirror != digest:  # a changed manifest: the old pod goes first, as its own deletion
                if not md.get("deletionTimestamp"):
                    await self._write(self.api.delete(md["name"], md["namespace"]), "delete", key)
            elif md.get("deletionTimestamp"):  # deleted by someone else: gone at once, then made again
                await self._write(self.api.delete(md["name"], md["namespace"], grace_period_seconds=0,
                                                  preconditions={"uid": md["uid"]}), "delete", key)
        for key, current in list(self.informer.store.items()):
            md = current["metadata"]
            if key not in self.desired and MIRROR in (md.get("annotations") or {}) and not md.get("deletionTimestamp"):
                await self._write(self.api.delete(md["name"], md["namespace"]), "delete", key)

    @staticmethod
    async def _write(request, verb: str, key: str) -> bool:
        """Whether the request did not fail but for a race (the pod already there, or gone)."""
        try:
            await request
        except APIError as e:
            if e.code not in (404, 409):
                log.warning("Failed to %s mirror pod %s: %s", verb, key, e)
                return False
        return True
