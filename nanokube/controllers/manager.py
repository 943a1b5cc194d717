"""Runs the in-process controllers of `nanokube up` over the local client."""

from __future__ import annotations

from ..client.local import LocalClient
from .deployment import DeploymentController
from .endpointslice import EndpointSliceController
from .garbagecollector import GarbageCollector
from .hpa import HPAController, options_from_env
from .job import JobController
from .namespace import NamespaceController
from .resourceclaim import ResourceClaimController
from .replicaset import ReplicaSetController
from .podgroup_protection import PodGroupProtectionController


class ControllerManager:
    def __init__(self, server):
        self.client = LocalClient(server.rest)
        self.controllers = [
            NamespaceController(self.client, clock=server.clock),
            GarbageCollector(self.client, clock=server.clock),
            ResourceClaimController(self.client, clock=server.clock),
            EndpointSliceController(self.client, clock=server.clock),
            ReplicaSetController(self.client, clock=server.clock),
            DeploymentController(self.client, clock=server.clock),
            JobController(self.client, clock=server.clock),
            PodGroupProtectionController(self.client, clock=server.clock),
            HPAController(self.client, clock=server.clock, **options_from_env()),
        ]

    async def start(self) -> None:
        for c in self.controllers:
            await c.start()

    async def stop(self) -> None:
        for c in self.controllers:
            await c.stop()
