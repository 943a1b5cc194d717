"""What kube-apiserver's control-plane package creates and runs beside the
generic API: objects every cluster has from the first start (the default
ServiceCIDR, API Priority and Fairness configuration, local APIServices) and
the loops the API server itself runs through its loopback client (IPAddress
repair, FlowSchema status and API Priority and Fairness, ComponentStatuses, the identity
Lease and StorageVersions, the `kubernetes` Service, the aggregator)."""

from __future__ import annotations

from ..metrics.api import GROUPS as METRICS_GROUPS
from .aggregator.aggregator import Aggregator
from .aggregator.autoregister import register_local_apiservices
from .aggregator.crdregistration import CRDRegistration
from .aggregator.requestheader import AuthenticationTrust, authentication_configmap, front_proxy_files
from .apf import FlowControl
from .apiextensions.serving import CustomResources
from .componentstatus import ComponentStatuses
from .flowcontrol import FlowSchemaStatus, ensure_bootstrap_configuration
from .identitygc import IdentityLeaseGC
from .ipaddresses import ORPHAN_GRACE, IPAddressRepair, ServiceCIDRRanges, ensure_default_service_cidr
from .reservations import NodePortRepair
from .kubernetes_service import KubernetesService
from .loopback import LocalClient
from .rest import SYSTEM
from .storageversion import APIServerIdentity
from .systemnamespaces import SystemNamespaces


async def bootstrap(server) -> None:
    services = server.index.get("", "v1", "services")
    await ensure_default_service_cidr(server.rest, server.index, server.clock, str(services.strategy.ips.network))
    await ensure_bootstrap_configuration(server)
    await register_local_apiservices(server, METRICS_GROUPS)
    if server.pki is not None:
        await server.ensure("", "v1", "configmaps", "kube-system", authentication_configmap(server))


async def start_loops(server, writer: bool = True) -> list:
    """The API server's own controllers, started; stop each with `await c.stop()`.

    With several API server processes on one store (workers.py) only worker 0 is the `writer`:
    the loops that write objects on their own (IPAddress repair, ComponentStatuses, the APIService
    registration of CRD groups, the identity Lease, its garbage collector and StorageVersions, the
    `kubernetes` Service, the system namespaces, the CRD naming, establishing and finalizer
    controllers) run once, as each would otherwise race its twins over the same objects, and the
    identity Lease names the host, not a process. Every
    worker runs what serving needs from its own informers and watch cache: CRDs served as their
    objects change (whichever worker wrote them), the ServiceCIDRs its Service allocator
    allocates from, API Priority and Fairness (the FlowSchema status loop holds its informers and
    writes a status only when it differs, as in each upstream kube-apiserver), and the aggregator,
    which proxies to the APIServices it follows and keeps their availability (idempotent too)."""
    loopback = LocalClient(server.rest, SYSTEM, "kube-apiserver")
    services = server.index.get("", "v1", "services").strategy
    apf_status = FlowSchemaStatus(loopback, clock=server.clock)
    server.flow_control = FlowControl(apf_status.fs_inf, apf_status.pl_inf, inflight=server.metrics.inflight,
                                      refused=server.metrics.refused)
    server.component_metrics.append(server.flow_control.registry)
    crds = CustomResources(server, LocalClient(server.rest, SYSTEM, "kube-apiextensions-apiserver"),
                           server.resources_changed)
    if writer:
        # allocations shared with other processes (workers, or API servers on one etcd) leave records another
        # may be about to use: orphans are repaired after a grace period, node port records too
        shared = services.reservations is not None
        grace = ORPHAN_GRACE if shared else 0.0
        loops = [IPAddressRepair(loopback, services, grace, clock=server.clock), ServiceCIDRRanges(loopback, services, clock=server.clock),
                 apf_status,
                 ComponentStatuses(loopback, server.store, clock=server.clock), CRDRegistration(loopback, clock=server.clock),
                 APIServerIdentity(server), IdentityLeaseGC(server), KubernetesService(server), SystemNamespaces(server), crds]
        if shared:
            loops.append(NodePortRepair(server, ORPHAN_GRACE))
    else:
        crds.controllers = []
        loops = [ServiceCIDRRanges(loopback, services, clock=server.clock), apf_status, crds]
    if server.pki is not None:
        handlers = server.handlers
        aggregator = Aggregator(loopback, front_proxy_files(server.pki), lambda: handlers.set_aggregated(aggregator),
                                clock=server.clock)
        handlers.aggregator = aggregator
        loops.append(aggregator)
        if writer:
            loops.append(AuthenticationTrust(server))
    for c in loops:
        await c.start()
    return loops
