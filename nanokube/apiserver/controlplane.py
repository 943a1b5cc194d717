"""What kube-apiserver's control-plane package creates and runs beside the
generic API: objects every cluster has from the first start (the default
ServiceCIDR, API Priority and Fairness configuration) and the loops the API
server itself runs through its loopback client (IPAddress repair, FlowSchema
status)."""

from __future__ import annotations

from .apiextensions.serving import CustomResources
from .flowcontrol import FlowSchemaStatus, ensure_bootstrap_configuration
from .ipaddresses import IPAddressRepair, ensure_default_service_cidr
from .loopback import LocalClient
from .rest import SYSTEM


async def bootstrap(server) -> None:
    services = server.index.get("", "v1", "services")
    await ensure_default_service_cidr(server.rest, server.index, server.clock, str(services.strategy.ips.network))
    await ensure_bootstrap_configuration(server)


async def start_loops(server) -> list:
    """The API server's own controllers, started; stop each with `await c.stop()`."""
    loopback = LocalClient(server.rest, SYSTEM, "kube-apiserver")
    loops = [IPAddressRepair(loopback, clock=server.clock), FlowSchemaStatus(loopback, clock=server.clock),
             CustomResources(server, LocalClient(server.rest, SYSTEM, "kube-apiextensions-apiserver"),
                             server.resources_changed)]
    for c in loops:
        await c.start()
    return loops
