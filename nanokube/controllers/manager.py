"""Runs the in-process controllers of `nanokube up` over the local client."""

from __future__ import annotations

import os

from ..apiserver.rest import User
from ..client.local import LocalClient
from ..pki.signer import PodCertificateSigner
from .deployment import DeploymentController
from .device_taint_eviction import DeviceTaintEvictionController
from .device_taint_eviction import options_from_env as device_taint_options
from .disruption import DisruptionController
from .endpointslice import EndpointSliceController
from .garbagecollector import GarbageCollector
from .hpa import HPAController, options_from_env
from .job import JobController
from .namespace import NamespaceController
from .nodelifecycle import NodeLifecycleController
from .nodelifecycle import options_from_env as node_lifecycle_options
from .podgroup_protection import PodGroupProtectionController
from .replicaset import ReplicaSetController
from .resourceclaim import ResourceClaimController
from .taint_eviction import TaintEvictionController
from .ttl_after_finished import TTLAfterFinishedController

#: the pod-identity signer acts as its own service account, bound by the
#: default policy to `sign` and `attest` for its signer name only
SIGNER_USER = User("system:serviceaccount:kube-system:pod-identity-signer",
                   ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


class ControllerManager:
    def __init__(self, server, data_dir: str | None = None):
        """`data_dir` holds the signer's CA; it defaults to the one the server's
        PKI lives in, and without either no signer runs."""
        self.client = LocalClient(server.rest)
        self.controllers = [
            NamespaceController(self.client, clock=server.clock),
            GarbageCollector(self.client, clock=server.clock),
            ResourceClaimController(self.client, clock=server.clock),
            EndpointSliceController(self.client, clock=server.clock),
            ReplicaSetController(self.client, clock=server.clock),
            DeploymentController(self.client, clock=server.clock),
            JobController(self.client, clock=server.clock),
            TTLAfterFinishedController(self.client, clock=server.clock),
            DisruptionController(self.client, clock=server.clock),
            PodGroupProtectionController(self.client, clock=server.clock),
            HPAController(self.client, clock=server.clock, **options_from_env()),
            NodeLifecycleController(self.client, clock=server.clock, **node_lifecycle_options()),
            TaintEvictionController(self.client, clock=server.clock),
            DeviceTaintEvictionController(self.client, clock=server.clock, **device_taint_options()),
        ]
        if data_dir is None and getattr(server, "pki", None) is not None:
            data_dir = os.path.dirname(server.pki.dir)
        if data_dir is not None:
            signer_client = LocalClient(server.rest, SIGNER_USER, field_manager="pod-identity-signer")
            self.controllers.append(PodCertificateSigner(signer_client, data_dir, clock=server.clock))

    async def start(self) -> None:
        for c in self.controllers:
            await c.start()

    async def stop(self) -> None:
        for c in self.controllers:
            await c.stop()
