"""Starts and stops every simulated node of a cluster description.

One pod informer (bound pods only) serves all agents and dispatches by
spec.nodeName: a watch per node would cost thousands of watchers.
"""

from __future__ import annotations

import asyncio
import logging

from ..apiserver.rest import User
from ..client.informer import Informer
from ..client.local import LocalClient
from ..clock import REAL, Clock
from .agent import NodeAgent
from .cluster import Cluster
from .dra.deviceclasses import ensure_device_classes

log = logging.getLogger(__name__)

NODE_USER = User("system:node-agents", ("system:nodes", "system:authenticated"))
START_CONCURRENCY = 64


class NodeManager:
    def __init__(self, rest, cluster: Cluster, clock: Clock = REAL, *, renew_interval: float = 10.0,
                 status_interval: float = 300.0):
        self.client = LocalClient(rest, NODE_USER, field_manager="kubelet")
        self.clock = clock
        specs = cluster.nodes()
        self.agents = {
            s.name: NodeAgent(self.client, s, clock, renew_interval=renew_interval, status_interval=status_interval,
                              start_offset=renew_interval * i / max(len(specs), 1))
            for i, s in enumerate(specs)
        }
        self.pods = Informer(self.client.resource("", "v1", "pods"), field_selector="spec.nodeName!=")
        self.pods.add_handlers(on_add=self._dispatch, on_update=lambda _old, new: self._dispatch(new),
                               on_delete=self._forget)
        self._informer: asyncio.Task | None = None

    async def start(self) -> None:
        """Register every node and publish its devices (bounded concurrency),
        then start running pods. One list of ResourceSlices up front lets each
        driver adopt what a previous run published."""
        sem = asyncio.Semaphore(START_CONCURRENCY)
        await ensure_device_classes(self.client)
        existing: dict[str, dict[str, list[dict]]] = {}
        items, _ = await self.client.resource("resource.k8s.io", "v1", "resourceslices").list()
        for s in items:
            node = s["spec"].get("nodeName")
            if node in self.agents:
                existing.setdefault(node, {}).setdefault(s["spec"]["driver"], []).append(s)

        async def one(agent: NodeAgent) -> None:
            async with sem:
                await agent.start(existing.get(agent.name, {}))

        await asyncio.gather(*(one(a) for a in self.agents.values()))
        self._informer = asyncio.create_task(self.pods.run())
        await self.pods.synced.wait()
        log.info("%d simulated nodes registered", len(self.agents))

    async def stop(self) -> None:
        if self._informer:
            self._informer.cancel()
            await asyncio.gather(self._informer, return_exceptions=True)
        await asyncio.gather(*(a.stop() for a in self.agents.values()), return_exceptions=True)

    def _agent(self, pod: dict) -> NodeAgent | None:
        return self.agents.get((pod.get("spec") or {}).get("nodeName") or "")

    def _dispatch(self, pod: dict) -> None:
        agent = self._agent(pod)
        if agent is not None:
            agent.sync_pod(pod)

    def _forget(self, pod: dict) -> None:
        agent = self._agent(pod)
        if agent is not None:
            agent.forget_pod(pod)
