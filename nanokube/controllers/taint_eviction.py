"""Taint eviction (upstream's taint-eviction-controller): a pod on a node
with NoExecute taints it does not tolerate is deleted at once; one that
tolerates them for `tolerationSeconds` is deleted when that time has passed
since the taint was added (a toleration without seconds tolerates forever).
Before the delete the pod gets a `DisruptionTarget` condition and an event.
"""

from __future__ import annotations

from ..machinery.conditions import find_condition, observed_generation, transition_time
from ..machinery.errors import APIError
from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock, parse_time
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
        self._first_seen: dict[tuple, float] = {}
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

    def _added(self, node: str, taint: dict) -> float:
        """The taint's timeAdded, or when this controller first saw it without one."""
        if taint.get("timeAdded"):
            return parse_time(taint["timeAdded"])
        ident = (node, taint.get("key"), taint.get("value"), taint.get("effect"))
        return self._first_seen.setdefault(ident, self.clock.now())

    def due(self, pod: dict) -> float | None:
        """When the pod must go, or None while its node's NoExecute taints are tolerated forever."""
        node = pod_node(pod)
        if node is None:
            return None
        tolerations = pod["spec"].get("tolerations") or []
        times = []
        for taint in _noexecute(self.nodes.get(node)):
            seconds = toleration_seconds(taint, tolerations)
            if seconds is not None:
                times.append(self._added(node, taint) + seconds)
        return min(times, default=None)

    async def sync(self, key) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp") or pod["metadata"]["uid"] in self._deleting:
            return
        when = self.due(pod)
        if when is None:
            return
        wait = when - self.clock.now()
        if wait > 0:
            self.queue.add_after(key, wait)
            return
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
