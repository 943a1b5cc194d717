"""Runs the in-process controllers of `nanokube up` over the local client."""

from __future__ import annotations

from ..client.local import LocalClient
from .garbagecollector import GarbageCollector
from .namespace import NamespaceController
from .podgroup_protection import PodGroupProtectionController


class ControllerManager:
    def __init__(self, server):
        self.client = LocalClient(server.rest)
        self.controllers = [
            NamespaceController(self.client, clock=server.clock),
            GarbageCollector(self.client, clock=server.clock),
            PodGroupProtectionController(self.client, clock=server.clock),
        ]

    async def start(self) -> None:
        for c in self.controllers:
            await c.start()

    async def stop(self) -> None:
        for c in self.controllers:
            await c.stop()
