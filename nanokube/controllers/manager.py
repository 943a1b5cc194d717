"""Runs the in-process controllers of `nanokube up` over the local client."""

from __future__ import annotations

import os

from ..apiserver.rest import User
from ..client.local import LocalClient
from ..clock import REAL, Clock
from ..pki.signer import PodCertificateSigner
from .base import Controller
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


def build_controllers(client, clock: Clock = REAL) -> list[Controller]:
    """Every controller of kube-controller-manager that nanokube runs, in start order."""
    return [
        NamespaceController(client, clock=clock),
        GarbageCollector(client, clock=clock),
        ResourceClaimController(client, clock=clock),
        EndpointSliceController(client, clock=clock),
        ReplicaSetController(client, clock=clock),
        DeploymentController(client, clock=clock),
        JobController(client, clock=clock),
        TTLAfterFinishedController(client, clock=clock),
        DisruptionController(client, clock=clock),
        PodGroupProtectionController(client, clock=clock),
        HPAController(client, clock=clock, **options_from_env()),
        NodeLifecycleController(client, clock=clock, **node_lifecycle_options()),
        TaintEvictionController(client, clock=clock),
        DeviceTaintEvictionController(client, clock=clock, **device_taint_options()),
    ]


class ControllerManager:
    def __init__(self, server, data_dir: str | None = None):
        """`data_dir` holds the signer's CA; it defaults to the one the server's
        PKI lives in, and without either no signer runs."""
        self.client = LocalClient(server.rest)
        self.controllers = build_controllers(self.client, server.clock)
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
