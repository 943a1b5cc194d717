"""Pod garbage collector (upstream's podgc): every 20 seconds it force-deletes

- pods bound to a node that no longer exists (orphans), once the node has
  been missing for the 40-second quarantine and a GET confirms it is gone:
  a `kubectl delete node` leaves no pod Running on a node nobody runs;
- pods being deleted that were never scheduled;
- pods being deleted on a node that is not Ready and carries the
  `node.kubernetes.io/out-of-service` taint (non-graceful node shutdown);
- the oldest terminated (Succeeded or Failed) pods beyond the
  terminated-pod threshold (12500), evicted ones first.

A pod not yet terminal is first marked Failed by a server-side apply of its
status (field manager PodGC), an orphan with a DisruptionTarget condition
(DeletionByPodGC), so its controllers see why it went; then it is deleted
with a grace period of 0, as no kubelet is left to confirm it stopped."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..client.informer import InformerFactory
from ..clock import REAL, Clock, parse_time
from ..machinery.conditions import find_condition, observed_generation
from ..machinery.errors import APIError
from .base import Controller, in_turns

#: upstream's gcCheckPeriod, quarantineTime and --terminated-pod-gc-threshold
GC_PERIOD = 20.0
QUARANTINE = 40.0
TERMINATED_THRESHOLD = 12500
FIELD_MANAGER = "PodGC"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
APPLY = "application/apply-patch+yaml"
#: a shortened quarantine (seconds) `nanokube up` reads, as upstream's tests build the controller with one
QUARANTINE_ENV = "NANOKUBE_POD_GC_QUARANTINE"
ORPHAN_CONDITION = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists"}


def options_from_env(env: Mapping[str, str] = os.environ) -> dict[str, float]:
    """The quarantine from NANOKUBE_POD_GC_QUARANTINE, and a gc period that keeps upstream's
    ratio to it (a half), so a deleted node's pods go within one and a half quarantines."""
    if not env.get(QUARANTINE_ENV):
        return {}
    quarantine = float(env[QUARANTINE_ENV])
    return {"quarantine": quarantine, "period": min(GC_PERIOD, max(quarantine / 2, 0.1))}


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or ""


#: the phases isPodTerminated does not count as terminated (no phase yet is terminated)
_LIVE_PHASES = frozenset(("Pending", "Running", "Unknown"))
_EMPTY: dict = {}


def deletion_order(pod: dict) -> tuple:
    """byEvictionAndCreationTimestamp: evicted pods first, then the oldest, then by name."""
    status = pod.get("status") or {}
    evicted = status.get("phase") == "Failed" and status.get("reason") == "Evicted"
    created = pod["metadata"].get("creationTimestamp")
    return (not evicted, parse_time(created) if created else 0.0, pod["metadata"]["name"])


def _ready(node: dict) -> bool:
    ready = find_condition((node.get("status") or {}).get("conditions"), "Ready")
    return (ready or {}).get("status") == "True"


class PodGCController(Controller):
    name = "pod-garbage-collector-controller"
    aliases = ("podgc",)
    queue_name = "orphaned_pods_nodes"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None, *,
                 period: float = GC_PERIOD, quarantine: float = QUARANTINE,
                 terminated_threshold: int = TERMINATED_THRESHOLD):
        super().__init__(client, clock, informers)
        self.period = period
        self.quarantine = quarantine
        self.terminated_threshold = terminated_threshold
        self.pods_api = client.resource("", "v1", "pods")
        self.nodes_api = client.resource("", "v1", "nodes")
        self.pods = self.informer_factory.informer(self.pods_api)
        self.nodes = self.informer_factory.informer(self.nodes_api)
        #: nodes pods are bound to that the node informer lacks: when first seen missing (upstream's nodeQueue)
        self._missing: dict[str, float] = {}

    def informers(self):
        return [self.pods, self.nodes]

    async def start(self) -> None:
        await super().start()
        self.queue.add("gc")

    async def sync(self, key) -> None:
        """One gc pass, then the next one period later (a failed pass is retried with backoff)."""
        await self.gc()
        self.queue.add_after("gc", self.period)

    async def gc(self) -> None:
        """Upstream's gc: terminated beyond the threshold, terminating on out-of-service nodes,
        orphans, unscheduled terminating; one walk over the cached pods sorts them out, keeping only
        the names of the nodes pods are bound to (the orphans, rare, are picked out after): every
        20 s over every pod, it is the largest periodic cost of an idle server with a queue."""
        done, terminating, unscheduled, nodes = [], [], [], set()
        live, add = _LIVE_PHASES, nodes.add
        pods = self.pods.list()
        async for turn in in_turns(pods):
            for pod in turn:
                node = pod["spec"].get("nodeName")
                if (pod.get("status") or _EMPTY).get("phase") not in live:
                    done.append(pod)
                if node:
                    add(node)
                if pod["metadata"].get("deletionTimestamp"):
                    (terminating if node else unscheduled).append(pod)
        excess = len(done) - self.terminated_threshold
        if self.terminated_threshold > 0 and excess > 0:
            for pod in sorted(done, key=deletion_order)[:excess]:
                await self._mark_failed_and_delete(pod)
        for pod in sorted((p for p in terminating if self._out_of_service(p["spec"]["nodeName"])), key=deletion_order):
            await self._mark_failed_and_delete(pod)
        gone = await self._deleted_nodes(nodes)
        for pod in [p for p in pods if p["spec"].get("nodeName") in gone] if gone else ():
            await self._mark_failed_and_delete(pod, ORPHAN_CONDITION)
        for pod in unscheduled:
            await self._mark_failed_and_delete(pod)

    def _out_of_service(self, name: str) -> bool:
        """gcTerminating's node: not Ready and tainted node.kubernetes.io/out-of-service."""
        node = self.nodes.get(name)
        return node is not None and not _ready(node) and any(
            t.get("key") == OUT_OF_SERVICE for t in (node.get("spec") or {}).get("taints") or ())

    async def _deleted_nodes(self, bound: set[str]) -> set[str]:
        """gcOrphaned's nodes: pods are bound to them, the informer lacks them for the quarantine, and a
        GET confirms they are gone; a node seen missing is quarantined from then (upstream's nodeQueue)."""
        now = self.clock.monotonic()
        gone = set()
        for name in bound:
            if self.nodes.get(name) is None:
                self._missing.setdefault(name, now)
        for name, since in list(self._missing.items()):
            if self.nodes.get(name) is not None or name not in bound:
                del self._missing[name]
            elif now - since >= self.quarantine and not await self._exists(name):
                del self._missing[name]
                gone.add(name)
        return gone

    async def _exists(self, node: str) -> bool:
        """checkIfNodeExists: a GET, as the informer may lag behind a node that came back."""
        try:
            await self.nodes_api.get(node)
        except APIError as e:
            if e.code == 404:
                return False
            raise
        return True

    async def _mark_failed_and_delete(self, pod: dict, condition: dict | None = None) -> None:
        """markFailedAndDeletePodWithCondition: Failed (with `condition`) unless already terminal,
        then deleted at once; a pod already gone is no error."""
        md = pod["metadata"]
        try:
            if _phase(pod) not in ("Succeeded", "Failed"):
                status: dict = {"phase": "Failed"}
                if condition is not None:
                    status["conditions"] = [{**condition, **observed_generation(pod),
                                             "lastTransitionTime": self.clock.rfc3339()}]
                await self.pods_api.patch(md["name"], {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": md["name"], "namespace": md["namespace"]}, "status": status}, APPLY,
                    namespace=md["namespace"], subresource="status", field_manager=FIELD_MANAGER, force=True)
            await self.pods_api.delete(md["name"], md["namespace"], grace_period_seconds=0)
        except APIError as e:
            if e.code != 404:
                raise
