"""TTL controller: every node carries `node.alpha.kubernetes.io/ttl`, the
seconds a kubelet may cache the Secrets and ConfigMaps its pods use, sized by
the cluster: 0 up to 100 nodes, then 15, 30, 60 and 300 s as it grows past
500, 1000 and 2000, with upstream's overlapping bounds so a cluster near a
bound does not flap. As upstream's, a node is patched when it is added or
updated and its annotation is missing or not the desired value."""

from __future__ import annotations

import re

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from .base import Controller

ANNOTATION = "node.alpha.kubernetes.io/ttl"
SMP = "application/strategic-merge-patch+json"
#: upstream's ttlBoundaries: (sizeMin, sizeMax, ttlSeconds)
BOUNDARIES = ((0, 100, 0), (90, 500, 15), (450, 1000, 30), (900, 2000, 60), (1800, 2 ** 31 - 1, 300))


class TTLController(Controller):
    name = "ttl-controller"
    aliases = ("ttl",)
    queue_name = "ttlcontroller"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.nodes_api = client.resource("", "v1", "nodes")
        self.nodes = self.informer_factory.informer(self.nodes_api)
        self.nodes.add_handlers(self._added, lambda _o, n: self._enqueue(n), self._deleted)
        self.node_count = 0
        self.step = 0

    def informers(self):
        return [self.nodes]

    @property
    def desired_ttl(self) -> int:
        return BOUNDARIES[self.step][2]

    def _added(self, node: dict) -> None:
        self.node_count += 1
        if self.node_count > BOUNDARIES[self.step][1]:
            self.step += 1
        self._enqueue(node)

    def _deleted(self, node: dict) -> None:
        self.node_count -= 1
        if self.node_count < BOUNDARIES[self.step][0]:
            self.step -= 1

    def _enqueue(self, node: dict) -> None:
        self.queue.add(node["metadata"]["name"])

    async def sync(self, name: str) -> None:
        """updateNodeIfNeeded."""
        node = self.nodes.get(name)
        if node is None:
            return
        want = self.desired_ttl
        current = (node["metadata"].get("annotations") or {}).get(ANNOTATION)
        if current is not None and re.fullmatch(r"[+-]?[0-9]+", current) and int(current) == want:  # strconv.Atoi
            return
        try:
            await self.nodes_api.patch(name, {"metadata": {"annotations": {ANNOTATION: str(want)}}}, SMP)
        except APIError as e:
            if e.code != 404:
                raise
