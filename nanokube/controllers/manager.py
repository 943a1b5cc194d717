"""The controller manager: every controller over one client, in `nanokube up`
(local client) or alone (`nanokube controller-manager`, over HTTPS)."""

from __future__ import annotations

import asyncio
import os

from ..machinery.featuregates import enabled as gate_enabled
from ..machinery.user import CONTROLLER_USER, User
from ..client.informer import InformerFactory
from ..client.leaderelection import LeaderElector
from ..client.ratelimit import ClientBuilder
from ..clock import REAL, Clock
from ..pki.signer import PodCertificateSigner
from ..pki.jwt import load_key
from .base import Controller
from .bootstrapsigner import BootstrapSignerController
from .clusterroleaggregation import ClusterRoleAggregationController
from .cronjob import CronJobController
from .csrapproving import CSRApprovingController
from .csrcleaner import CSRCleanerController
from .csrsigning import CSRSigningController
from .csrsigning_options import SIGNING_DURATION, Files, cluster_ca
from .daemonset import DaemonSetController
from .deployment import DeploymentController
from .device_taint_eviction import DeviceTaintEvictionController
from .device_taint_eviction import options_from_env as device_taint_options
from .disruption import DisruptionController
from .endpointslice import EndpointSliceController
from .endpointslicemirroring import EndpointSliceMirroringController
from .ephemeral_volume import EphemeralVolumeController
from .attachdetach import AttachDetachController
from .expand import ExpandController
from .garbagecollector import GarbageCollector
from .hpa import HPAController, options_from_env
from .job import JobController
from .job import options_from_env as job_options
from .metrics import ControllerMetrics
from .namespace import NamespaceController
from .nodelifecycle import NodeLifecycleController
from .nodelifecycle import options_from_env as node_lifecycle_options
from .persistentvolume import PersistentVolumeController
from .podgc import PodGCController
from .podgc import options_from_env as pod_gc_options
from .podgroup_protection import PodGroupProtectionController
from .pv_protection import PVProtectionController
from .pvc_protection import PVCProtectionController
from .replicaset import ReplicaSetController
from .replicationcontroller import ReplicationControllerController
from .resourceclaim import ResourceClaimController
from .resourcepoolstatusrequest import ResourcePoolStatusRequestController
from .resourcequota import ResourceQuotaController
from .rootcacertpublisher import RootCACertPublisher
from .service_lb import DEFAULT_POOL, ServiceLBController
from .serviceaccount import ServiceAccountsController
from .serviceaccount_token import TokensController
from .servicecidrs import ServiceCIDRController
from .statefulset import StatefulSetController
from .storageversionmigrator import StorageVersionMigrator
from .taint_eviction import TaintEvictionController
from .tokencleaner import TokenCleanerController
from .ttl import TTLController
from .ttl_after_finished import TTLAfterFinishedController
from .vac_protection import VACProtectionController
from .validatingadmissionpolicy_status import ValidatingAdmissionPolicyStatusController

#: the Lease (in kube-system) whose holder runs the controllers
LEASE_NAME = "kube-controller-manager"
#: seconds between resets of the controllers' RESTMapper (CreateControllerContext's, 30 s): a kind
#: a controller cannot map (an HPA's or a PDB's target, an owner reference) has discovery read
#: again when the last read is that old, at most once a period and only then (`HTTPClient.mapping`)
MAPPER_RESET_PERIOD = 30.0
#: kube-controller-manager's client limit by default (--kube-api-qps 20, --kube-api-burst 30)
KCM_CLIENT_LIMIT = (20.0, 30)
#: the clients that raise it: the namespace controller's qps 20 times, its burst 100 times, both of its
#: clientsets (one deletecollection and one list per namespaced resource make it the chattiest;
#: startNamespaceController); the garbage collector's qps twice (a collection takes two requests:
#: startGarbageCollectorController's metadata client, which sends its reads and writes; its Events
#: go through a clientset at 1x, `unscaled_client`)
_SCALED_LIMITS = {NamespaceController.name: (20, 100), "generic-garbage-collector": (2, 1)}

#: the pod-identity signer acts as its own service account, bound by the
#: default policy to `sign` and `attest` for its signer name only
SIGNER_USER = User("system:serviceaccount:kube-system:pod-identity-signer",
                   ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
#: the certificate controllers act as their service account, as kube-controller-manager's do with
#: --use-service-account-credentials: the default policy lets it approve kubelet client requests and
#: sign for the kubernetes.io signers (CertificateApproval and CertificateSigning admission ask)
CERTIFICATE_CONTROLLER_USER = User(
    "system:serviceaccount:kube-system:certificate-controller",
    ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
#: the controllers built over the certificate controller's client when the manager has one
_CERTIFICATE_CONTROLLERS = (CSRApprovingController, CSRCleanerController)
#: the ClusterRole aggregation controller acts as its service account too: only its policy's `escalate`
#: lets it write rules it does not hold (RBAC escalation prevention)
AGGREGATION_CONTROLLER_USER = User(
    "system:serviceaccount:kube-system:clusterrole-aggregation-controller",
    ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


#: the client name each controller's client builder is asked for upstream, where it is not the
#: controller's name: the user agent's last part and, with --use-service-account-credentials, the
#: kube-system service account the controller acts as
CLIENT_NAMES = {
    "garbage-collector-controller": "generic-garbage-collector",
    "resourceclaim-controller": "resource-claim-controller",
    "service-lb-controller": "service-controller",  # cloud-controller-manager's
    "replicationcontroller-controller": "replication-controller",
    "daemonset-controller": "daemon-set-controller",
    "persistentvolume-binder-controller": "persistent-volume-binder",
    "persistentvolumeclaim-protection-controller": "pvc-protection-controller",
    "persistentvolume-protection-controller": "pv-protection-controller",
    "persistentvolume-expander-controller": "expand-controller",
    "persistentvolume-attach-detach-controller": "attachdetach-controller",
    "pod-garbage-collector-controller": "pod-garbage-collector",
    "endpointslice-mirroring-controller": "endpointslicemirroring-controller",
    "horizontal-pod-autoscaler-controller": "horizontal-pod-autoscaler",
    "node-lifecycle-controller": "node-controller",
    "taint-eviction-controller": "node-controller",
    "service-cidr-controller": "service-cidrs-controller",
    "serviceaccount-controller": "service-account-controller",
    "root-ca-certificate-publisher-controller": "root-ca-cert-publisher",
    "certificatesigningrequest-approving-controller": "certificate-controller",
    "certificatesigningrequest-cleaner-controller": "certificate-controller",
    "certificatesigningrequest-signing-controller": "certificate-controller",
    "serviceaccount-token-controller": "tokens-controller",  # upstream's root client, not an account's
    "bootstrap-signer-controller": "bootstrap-signer",
    "token-cleaner-controller": "token-cleaner",
}


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _service_account_key(data_dir: str | None):
    """The API server's service-account signing key in `data_dir`, if it made one."""
    path = os.path.join(data_dir, "pki", "sa.key") if data_dir else ""
    return load_key(path) if path and os.path.exists(path) else None


def controller_client(client, kind: type[Controller]):
    """The client `kind` runs over: `client` named for it, as kube-controller-manager's client
    builder makes one per controller (user agent '.../<name>'); each call another clientset, with
    a token bucket of its own under a limit."""
    return client.named(CLIENT_NAMES.get(kind.name, kind.name))


def unscaled_client(client, kind: type[Controller]):
    """`kind`'s clientset at the manager's own limit where `_SCALED_LIMITS` raises its main one."""
    name = CLIENT_NAMES.get(kind.name, kind.name)
    return client.unscaled(name) if isinstance(client, ClientBuilder) else client.named(name)


#: every controller of kube-controller-manager that nanokube runs, in start order
CONTROLLERS = [
    NamespaceController, ServiceAccountsController, RootCACertPublisher, ClusterRoleAggregationController,
    GarbageCollector, ResourceClaimController,
    EndpointSliceController, EndpointSliceMirroringController, ServiceLBController,
    ReplicaSetController, ReplicationControllerController, DeploymentController, DaemonSetController,
    StatefulSetController, JobController, CronJobController, TTLController, TTLAfterFinishedController,
    DisruptionController,
    PodGroupProtectionController, ResourceQuotaController, PersistentVolumeController, PVCProtectionController,
    PVProtectionController, VACProtectionController, ExpandController, AttachDetachController,
    EphemeralVolumeController, HPAController, NodeLifecycleController,
    TaintEvictionController, PodGCController, DeviceTaintEvictionController, ValidatingAdmissionPolicyStatusController,
    StorageVersionMigrator, ServiceCIDRController, ResourcePoolStatusRequestController, CSRApprovingController,
    CSRCleanerController, BootstrapSignerController, TokenCleanerController,
]


def build_controllers(client, clock: Clock = REAL, load_balancer_pool: str = DEFAULT_POOL,
                      metrics: ControllerMetrics | None = None, informers: InformerFactory | None = None,
                      kinds: list[type[Controller]] = CONTROLLERS, root_ca: bytes = b"") -> list[Controller]:
    """The controllers of `kinds`. With `informers` they share its informers (the caller stops it),
    so only enabled kinds are built: a built controller's handlers run on every event. `root_ca`
    is the PEM bundle the root CA publisher puts in every namespace."""
    metrics = metrics or ControllerMetrics()
    options = {
        ServiceLBController: {"pool": load_balancer_pool},
        EndpointSliceController: {"endpoints_client": client.named("endpoint-controller"), "metrics": metrics},
        CronJobController: {"metrics": metrics},
        JobController: {"metrics": metrics, **job_options()},
        HPAController: {**options_from_env(), "metrics": metrics,
                        "metrics_api_clients": tuple(controller_client(client, HPAController) for _ in range(3))},
        NodeLifecycleController: {**node_lifecycle_options(), "evictions": metrics.node_evictions},
        PodGCController: pod_gc_options(),
        DeviceTaintEvictionController: device_taint_options(),
        RootCACertPublisher: {"root_ca": root_ca},
        # upstream's GC: a 1x clientset for its Events beside its 2x metadata client; the namespace
        # controller: a typed clientset (namespaces, discovery) and a metadata client (the contents)
        GarbageCollector: {"events_client": unscaled_client(client, GarbageCollector)},
        NamespaceController: {"metadata_client": controller_client(client, NamespaceController)},
    }
    return [kind(controller_client(client, kind), clock=clock, informers=informers, **options.get(kind, {}))
            for kind in kinds]


def enabled(controllers: list, spec: str = "*") -> list:
    """kube-controller-manager's `--controllers`: `*` for all on by default, a name to enable, `-name` to disable,
    by upstream's name or one of its aliases; the name without its `-controller` suffix is taken
    too (nanokube's earlier names). Of controllers or their classes."""
    canonical: dict[str, str] = {}
    for c in controllers:
        for n in (c.name, c.name.removesuffix("-controller"), *c.aliases):
            canonical.setdefault(n, c.name)
    items = [i.strip() for i in spec.split(",") if i.strip()]
    unknown = [i.removeprefix("-") for i in items if i != "*" and i.removeprefix("-") not in canonical]
    if unknown:
        raise ValueError("--controllers: " + ", ".join(f'"{n}" is not in the list of known controllers'
                                                       for n in unknown))
    on = {canonical[i] for i in items if i != "*" and not i.startswith("-")}
    off = {canonical[i[1:]] for i in items if i.startswith("-")}
    return [c for c in controllers if c.name not in off and ("*" in items and c.enabled_by_default or c.name in on)]


class ControllerManager:
    """Runs controllers over one client; with an elector, only while it
    holds the `kube-controller-manager` Lease, so two managers never both act."""

    def __init__(self, client, clock: Clock = REAL, *, controllers: str = "*", signer_client=None,
                 data_dir: str | None = None, elector: LeaderElector | None = None,
                 load_balancer_pool: str = DEFAULT_POOL, certificate_client=None, aggregation_client=None,
                 signers: dict[str, Files] | None = None, signing_duration: int = SIGNING_DURATION,
                 controller_clients=None, root_ca: bytes = b"", service_account_key=None,
                 client_limit: tuple[float, int] | None = None):
        """`signer_client` and `data_dir` (the signer's CA) run the pod-identity signer too;
        `signers` (each CSR signer's CA files) and `signing_duration` the CSR signer;
        `load_balancer_pool` is the IPv4 CIDR LoadBalancer Services get their address from;
        `certificate_client` (else `client`) is the certificate controllers', `aggregation_client` (else the
        builder's) the ClusterRole aggregation controller's; `controller_clients`
        (else `client`) names each controller's client (clientbuilder's service-account clients);
        `root_ca` is what kube-root-ca.crt publishes; `service_account_key` (the API server's signing
        key) runs the token controller; the shared informers read through `client`, as
        'shared-informers', those of resources client-go has no typed informers for (custom resources:
        the garbage collector's and quota's monitors) as 'metadata-informers'. `client_limit`
        (--kube-api-qps, --kube-api-burst; None: none) gives each controller's client, each of those
        two and the token controller's a token bucket of its own, as upstream's builder makes each a
        clientset (the pod-identity signer, not kube-controller-manager's, has none)."""
        self.client = client
        #: kept across terms of leadership, as one process's counters are
        self.metrics = ControllerMetrics(clock=clock)

        def clientsets(c):
            return c if c is None or client_limit is None else ClientBuilder(c, *client_limit, clock, _SCALED_LIMITS)

        def build() -> list[Controller]:
            """A term's controllers over a fresh shared informer factory, stopped with them."""
            signer = [PodCertificateSigner] if signer_client is not None and data_dir is not None else []
            # a known name also without CA files (then it does not run, as upstream's skips)
            tokens = [TokensController] if service_account_key is not None else []
            on = [k for k in enabled([*CONTROLLERS, CSRSigningController, *signer, *tokens], controllers)
                  if (k is not CSRSigningController or signers) and all(map(gate_enabled, k.feature_gates))]
            root = clientsets(client)
            self.informers = InformerFactory(clock, root.named("shared-informers"), root.named("metadata-informers"))
            own = (PodCertificateSigner, CSRSigningController, TokensController, *_CERTIFICATE_CONTROLLERS)
            builder = clientsets(controller_clients or client)
            kinds = [k for k in on if k not in own]
            if aggregation_client is not None:
                kinds = [k for k in kinds if k is not ClusterRoleAggregationController]
            out = build_controllers(builder, clock, load_balancer_pool, self.metrics, self.informers, kinds, root_ca)
            if aggregation_client is not None and ClusterRoleAggregationController in on:
                out.append(ClusterRoleAggregationController(controller_client(clientsets(aggregation_client),
                                                                              ClusterRoleAggregationController),
                                                            clock, self.informers))
            certs = clientsets(certificate_client) or builder
            out += [k(controller_client(certs, k), clock, self.informers) for k in on if k in _CERTIFICATE_CONTROLLERS]
            if CSRSigningController in on:
                out.append(CSRSigningController(controller_client(certs, CSRSigningController), signers, clock,
                                                self.informers, signing_duration))
            if TokensController in on:
                out.append(TokensController(controller_client(root, TokensController), service_account_key, root_ca,
                                            clock, self.informers))
            if PodCertificateSigner in on:
                out.append(PodCertificateSigner(signer_client, data_dir, clock=clock))
            self.metrics.meter(out)
            return out

        self._build = build
        self.controllers = build()
        self._fresh = True
        self.elector = elector
        self.started = asyncio.Event()
        self._running: list[Controller] = []
        self._task: asyncio.Task | None = None

    @classmethod
    def elected(cls, client, identity: str, clock: Clock = REAL, **kw) -> ControllerManager:
        """A manager that leads only while it holds the `kube-controller-manager` Lease."""
        return cls(client, clock, elector=LeaderElector(client, LEASE_NAME, identity, clock=clock), **kw)

    @classmethod
    def in_process(cls, connect, clock: Clock = REAL, data_dir: str | None = None, signers=None, root_ca: bytes = b"",
                   service_account_key=None, **kw) -> ControllerManager:
        """Over clients from `connect(user, field_manager)` (the loopback client in `up`), with the
        signers when a data dir is known (the CSR signer on its cluster CA, the token controller with
        its service-account key, kube-root-ca.crt its CA) unless the operator's are given."""
        signer = connect(SIGNER_USER, "pod-identity-signer") if data_dir else None
        return cls(connect(CONTROLLER_USER, "kube-controller-manager"), clock, signer_client=signer, data_dir=data_dir,
                   certificate_client=connect(CERTIFICATE_CONTROLLER_USER, "kube-controller-manager"),
                   aggregation_client=connect(AGGREGATION_CONTROLLER_USER, "kube-controller-manager"),
                   signers=signers if signers is not None else cluster_ca(data_dir) if data_dir else None,
                   root_ca=root_ca or (_read(os.path.join(data_dir, "pki", "ca.crt")) if data_dir else b""),
                   service_account_key=service_account_key or _service_account_key(data_dir), **kw)

    async def start(self) -> None:
        """With no controllers enabled there is nothing to lead: no campaign."""
        if not self.controllers:
            return
        if self.elector is None:
            await self._start_all()
        else:
            self._task = asyncio.create_task(self._campaign())

    async def _campaign(self) -> None:
        """Lead while holding the lease; after losing it, stand by again
        (kube-controller-manager exits instead, and its supervisor restarts it). The term's
        controllers stop whenever the elector returns, also when `_lead` was cancelled while
        (or before) it started them."""
        while True:
            try:
                await self.elector.run(self._lead)
            finally:
                await self._stop_all()

    async def _start_all(self) -> None:
        """Start every controller; a stopped one cannot restart, so a new
        term of leadership gets new instances."""
        if not self._fresh:
            self.controllers = self._build()
        self._fresh = False
        self.client.reset_mapping_every(MAPPER_RESET_PERIOD)
        for c in self.controllers:
            # listed before it starts: a start cut short is stopped too (stopping an unstarted one is harmless)
            self._running.append(c)
            await c.start()
        self.started.set()

    async def _lead(self) -> None:
        await self._start_all()
        await asyncio.Event().wait()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            await self.elector.release()
        else:
            await self._stop_all()

    async def _stop_all(self) -> None:
        self.started.clear()
        while self._running:
            await self._running.pop().stop()
        await self.informers.stop()
