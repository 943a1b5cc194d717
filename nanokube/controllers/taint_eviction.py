"""Taint eviction (upstream's taint-eviction-controller): a pod on a node
with NoExecute taints it does not tolerate is deleted at once; one that
tolerates them for `tolerationSeconds` is deleted that long after this
controller first found it on the tainted node (a toleration without seconds
tolerates forever), as upstream's timed queue counts it: from when the taint
was seen, or from the pod's arrival on a node tainted before it. Before the
delete the pod gets a `DisruptionTarget` condition and an event; a scheduled
deletion the taint's removal (or the pod's) calls off gets a "Cancelling
deletion" event.
"""

from __future__ import annotations

from ..machinery.conditions import find_condition, observed_generation, transition_time
from ..machinery.errors import APIError
from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock
from ..machinery.scheduling import tolerates
from .base import Controller
from ..client.record import CoreEventRecorder

REASON = "DeletionByTaintManager"
SMP = "application/strategic-merge-patch+json"
#: the shared pod informer's index of pods by node (upstream's "spec.nodeName" indexer, which its
#: getPodsAssignedToNode reads)
NODE_INDEX = "spec.nodeName"


def pod_node(pod: dict) -> str | None:
    return pod["spec"].get("nodeName") or None


def _noexecute(node: dict | None) -> list[dict]:
    return [t for t in ((node or {}).get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]


def toleration_seconds(taint: dict, tolerations: list[dict]) -> float | None:
    """How long the pod may stay after `taint` was added: 0 if nothing tolerates
    it, the smallest tolerationSeconds of the tolerations that do (negative
    counts as 0), None for forever when none of them has seconds."""
    used = [t for t in tolerations if tolerates(t, taint)]
    if not used:
        return 0.0
    finite = [max(float(t["tolerationSeconds"]), 0.0) for t in used if t.get("tolerationSeconds") is not None]
    return min(finite) if finite else None


def min_toleration(taints: list[dict], tolerations: list[dict]) -> float | None:
    """GetMatchingTolerations then getMinTolerationTime: each taint's first toleration that
    matches it; 0 when a taint has none or a used one's seconds are not positive, the smallest
    seconds of the used ones, None when they all tolerate forever."""
    seconds = []
    for taint in taints:
        used = next((t for t in tolerations if tolerates(t, taint)), None)
        if used is None:
            return 0.0
        if used.get("tolerationSeconds") is not None:
            seconds.append(float(used["tolerationSeconds"]))
    if any(s <= 0 for s in seconds):
        return 0.0
    return min(seconds, default=None)


class TaintEvictionController(Controller):
    name = "taint-eviction-controller"
    queue_name = "noexec_taint_pod"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.pods_api = client.resource("", "v1", "pods")
        self.recorder = CoreEventRecorder(client, self.name, clock)
        self.nodes = self.informer_factory.informer(client.resource("", "v1", "nodes"))
        self.pods = self.informer_factory.informer(self.pods_api)  # the manager's shared one
        self.pods.add_index(NODE_INDEX, pod_node)
        self.nodes.add_handlers(self._node_changed, self._node_updated)
        self.pods.add_handlers(self._pod_changed, lambda _o, n: self._pod_changed(n), self._pod_deleted)
        #: scheduled deletions by pod key: (uid, when scheduled, when due), upstream's timed workers
        self._timers: dict[str, tuple[str, float, float]] = {}
        #: pods (by uid) deleted here whose deletion the informer has not shown yet
        self._deleting: set[str] = set()

    def informers(self):
        return [self.nodes, self.pods]

    def _node_changed(self, node: dict) -> None:
        """The pods on the node, from the informer's node index."""
        for pod in self.pods.by_index(NODE_INDEX, node["metadata"]["name"]):
            self.queue.add(key_of(pod))

    def _node_updated(self, old: dict, new: dict) -> None:
        if _noexecute(old) != _noexecute(new):
            self._node_changed(new)

    def _pod_changed(self, pod: dict) -> None:
        """A scheduled pod on a node with NoExecute taints (an unscheduled one is on none)."""
        node = pod_node(pod)
        if node is not None and _noexecute(self.nodes.get(node)):
            self.queue.add(key_of(pod))

    def _pod_deleted(self, pod: dict) -> None:
        self._deleting.discard(pod["metadata"]["uid"])
        if key_of(pod) in self._timers:
            self.queue.add(key_of(pod))

    async def _cancel(self, key: str) -> None:
        """cancelWorkWithEvent: a scheduled deletion called off is reported on the pod."""
        if self._timers.pop(key, None) is not None:
            ns, name = key.split("/", 1)
            await self.recorder.emit({"kind": "Pod", "apiVersion": "v1", "metadata": {"namespace": ns, "name": name}}, "Normal",
                                     "TaintManagerEviction", f"Cancelling deletion of Pod {key}")

    async def sync(self, key) -> None:
        pod = self.pods.get(key)
        timer = self._timers.get(key)
        if pod is None or (timer is not None and timer[0] != pod["metadata"]["uid"]):
            await self._cancel(key)  # gone, or another pod under its name
        if pod is None or pod["metadata"].get("deletionTimestamp") or pod["metadata"]["uid"] in self._deleting:
            return
        node = pod_node(pod)
        taints = _noexecute(self.nodes.get(node)) if node is not None else []
        seconds = min_toleration(taints, pod["spec"].get("tolerations") or []) if taints else None
        if seconds is None:  # no NoExecute taint left, or tolerated forever
            await self._cancel(key)
            return
        now = self.clock.now()
        if seconds > 0:
            # a deletion already scheduled keeps its time (upstream's keepExisting)
            _, _, due = self._timers.setdefault(key, (pod["metadata"]["uid"], now, now + seconds))
            if due > now:
                self.queue.add_after(key, due - now)
                return
            del self._timers[key]
        else:
            await self._cancel(key)
        await self._evict(pod)

    async def _evict(self, pod: dict) -> None:
        md = pod["metadata"]
        ns, name = md["namespace"], md["name"]
        old = find_condition((pod.get("status") or {}).get("conditions"), "DisruptionTarget")
        cond = {"type": "DisruptionTarget", **observed_generation(pod), "status": "True", "reason": REASON,
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": transition_time(old, "True", self.clock.rfc3339())}
        self._deleting.add(md["uid"])
        try:
            await self.pods_api.patch(name, {"status": {"conditions": [cond]}}, SMP, namespace=ns, subresource="status")
            await self.recorder.emit(pod, "Normal", "TaintManagerEviction",
                                     f"Marking for deletion Pod {ns}/{name}")
            await self.pods_api.delete(name, ns, preconditions={"uid": md["uid"]})
        except APIError as e:
            self._deleting.discard(md["uid"])
            if e.code not in (404, 409):
                raise
