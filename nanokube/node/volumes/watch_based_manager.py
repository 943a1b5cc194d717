"""The kubelet's ConfigMap and Secret managers in Watch mode (pkg/kubelet/util/manager's
watch-based manager, what the default configMapAndSecretChangeDetectionStrategy picks): each
object the pods' volumes and containers' environment name is kept by a watch of that one object
(fieldSelector metadata.name, the only list and watch the node authorizer grants a node), shared
by every pod that names it and stopped when the last such pod is gone, or once the object is
seen immutable. Volume setups and their periodic resyncs read from here, so a resync costs no
request and an edit reaches the files at the next one. The node agents of one process share one
manager per resource, as they share one client."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from ...client.informer import Informer
from ...clock import REAL, Clock
from ...machinery.errors import APIError

#: how long a read waits for a new watch's first list before it reads the server (the manager's
#: wait for its reflector to sync)
SYNC_WAIT = 1.0


def referenced(pod: dict, plural: str) -> set[str]:
    """The names of the ConfigMaps (`plural` "configmaps") or Secrets ("secrets") the pod's
    volumes, projected volume sources and containers' environment (env valueFrom, envFrom) name,
    and its imagePullSecrets (VisitPodSecretNames: each sync reads them, lifecycle._pull_secrets)."""
    kind, name_key = ("configMap", "name") if plural == "configmaps" else ("secret", "secretName")
    key_ref, ref = ("configMapKeyRef", "configMapRef") if plural == "configmaps" else ("secretKeyRef", "secretRef")
    spec = pod.get("spec") or {}
    out = set()
    for vol in spec.get("volumes") or []:
        if (vol.get(kind) or {}).get(name_key):
            out.add(vol[kind][name_key])
        for s in (vol.get("projected") or {}).get("sources") or []:
            if (s.get(kind) or {}).get("name"):
                out.add(s[kind]["name"])
    for c in (c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or ()):
        out |= {e["valueFrom"][key_ref]["name"] for e in c.get("env") or ()
                if ((e.get("valueFrom") or {}).get(key_ref) or {}).get("name")}
        out |= {e[ref]["name"] for e in c.get("envFrom") or () if (e.get(ref) or {}).get("name")}
    if plural == "secrets":
        out |= {r["name"] for r in spec.get("imagePullSecrets") or () if r.get("name")}
    return out


async def synced_within(informer: Informer, clock: Clock, seconds: float = SYNC_WAIT) -> bool:
    """Whether the informer has listed, waiting up to `seconds` for its first list."""
    if not informer.synced.is_set():
        waiting = asyncio.ensure_future(informer.synced.wait())
        timer = asyncio.ensure_future(clock.sleep(seconds))
        await asyncio.wait((waiting, timer), return_when=asyncio.FIRST_COMPLETED)
        for t in (waiting, timer):
            t.cancel()
    return informer.synced.is_set()


async def read(rc, name: str, namespace: str | None = None) -> dict | None:
    """The object from the server (None: it does not exist)."""
    try:
        return await rc.get(name, namespace)
    except APIError as e:
        if e.code != 404:
            raise
        return None


@dataclass
class _Watched:
    informer: Informer
    task: asyncio.Task
    pods: set[str] = field(default_factory=set)


class WatchBasedManager:
    def __init__(self, client, plural: str, clock: Clock = REAL):
        self.plural = plural
        self.rc = client.resource("", "v1", plural)
        self.clock = clock
        #: pod uid -> the (namespace, name) objects it names
        self._pods: dict[str, set[tuple[str, str]]] = {}
        self._objects: dict[tuple[str, str], _Watched] = {}

    def register(self, pod: dict) -> None:
        """Watch what `pod` names from now on (again for a changed pod: what it no longer names
        is released)."""
        md = pod["metadata"]
        uid, ns = md["uid"], md.get("namespace") or ""
        now = {(ns, name) for name in referenced(pod, self.plural)}
        before = self._pods.get(uid, set())
        if now:
            self._pods[uid] = now
        else:
            self._pods.pop(uid, None)
        for key in now - before:
            w = self._objects.get(key)
            if w is None:
                informer = Informer(self.rc, key[0], field_selector=f"metadata.name={key[1]}", clock=self.clock)
                w = self._objects[key] = _Watched(informer, asyncio.create_task(informer.run()))
                informer.add_handlers(on_add=lambda obj, w=w: self._seen(w, obj),
                                      on_update=lambda _old, obj, w=w: self._seen(w, obj))
            w.pods.add(uid)
        for key in before - now:
            self._release(key, uid)

    @staticmethod
    def _seen(w: _Watched, obj: dict) -> None:
        """An immutable object cannot change: its watch ends and the copy is kept (the manager
        stops the reflector of an immutable object, sparing the server the watch)."""
        if obj.get("immutable"):
            w.task.cancel()

    def unregister(self, uid: str) -> None:
        for key in self._pods.pop(uid, set()):
            self._release(key, uid)

    def _release(self, key: tuple[str, str], uid: str) -> None:
        w = self._objects.get(key)
        if w is None:
            return
        w.pods.discard(uid)
        if not w.pods:
            del self._objects[key]
            w.task.cancel()

    def watching(self) -> list[tuple[str, str]]:
        """The (namespace, name) objects watched now."""
        return sorted(self._objects)

    async def get(self, namespace: str, name: str) -> dict | None:
        """The object as its watch last saw it (None: it does not exist). One no registered pod
        names, or whose watch has not listed within SYNC_WAIT, is read from the server."""
        w = self._objects.get((namespace, name))
        if w is not None and await synced_within(w.informer, self.clock):
            return w.informer.get(f"{namespace}/{name}")
        return await read(self.rc, name, namespace)

    async def close(self) -> None:
        tasks = [w.task for w in self._objects.values()]
        self._objects.clear()
        self._pods.clear()
        for t in tasks:
            t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
