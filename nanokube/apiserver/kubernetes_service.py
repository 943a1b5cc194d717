"""The `kubernetes` Service in `default` (kube-apiserver's kubernetes-service-controller): ClusterIP
the first address of the service range, port `https` 443 to the server's port; its Endpoints and
EndpointSlice name the address the server advertises (--advertise-address), kept by the lease
endpoint reconciler (endpoint_reconciler.py). Checked again every 10 seconds, like upstream's
reconcile interval; ports are corrected on the first pass after a start only. Upstream has no flag
for that interval or the leases' 15 s TTL; NANOKUBE_ENDPOINT_RECONCILER_INTERVAL (seconds) sets a
shorter one for tests, the TTL kept at one and a half intervals, so that a killed server's address
goes sooner."""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import logging
import os
import socket

from ..machinery.errors import APIError
from .background import BackgroundLoop
from .endpoint_reconciler import TTL, EndpointsAdapter, LeaseEndpointReconciler, MasterLeases, endpoint_ports
from .loopback import LocalClient
from .rest import SYSTEM, WriteOptions

log = logging.getLogger(__name__)

NAME, NAMESPACE = "kubernetes", "default"
INTERVAL = 10.0
INTERVAL_ENV = "NANOKUBE_ENDPOINT_RECONCILER_INTERVAL"


def first_address(cidr: str) -> str:
    return str(ipaddress.ip_network(cidr).network_address + 1)


def _resolve(listen: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(listen)
    except ValueError:  # a host name
        return ipaddress.ip_address(socket.gethostbyname(listen))


def host_address() -> str | None:
    """The address of the interface the default route leaves by (upstream's ChooseHostInterface);
    None when the host has no route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            return None
        return s.getsockname()[0]


def advertise_address(listen: str) -> str | None:
    """The address a server listening on `listen` is reached at from elsewhere: the listen
    address, or for a wildcard one the host's; None for loopback."""
    addr = _resolve(listen)
    if addr.is_unspecified:
        return host_address()
    return None if addr.is_loopback else str(addr)


def default_advertise_address(listen: str) -> str | None:
    """kube-apiserver's default --advertise-address (DefaultExternalAddress): the listen address,
    or for a wildcard or loopback one the host's; None when the host has no route."""
    addr = _resolve(listen)
    return host_address() if addr.is_unspecified or addr.is_loopback else str(addr)


def service(cluster_ip: str, port: int) -> dict:
    return {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}}


class KubernetesService(BackgroundLoop):
    def __init__(self, server) -> None:
        self.server = server
        self.opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)
        services = server.index.get("", "v1", "services")
        self.cluster_ip = first_address(str(services.strategy.ips.network))
        adapter = EndpointsAdapter(LocalClient(server.rest, SYSTEM, "kube-apiserver"), self.cluster_ip)
        self.interval = float(os.environ.get(INTERVAL_ENV) or INTERVAL)
        leases = MasterLeases(server.store, server.clock, ttl=TTL * self.interval / INTERVAL)
        self.endpoints = LeaseEndpointReconciler(adapter, leases)

    async def start(self) -> None:
        """Removes a lease this address left behind (its server did not stop cleanly), then starts
        the loop."""
        if ip := self.server.advertise:
            try:
                if await self.endpoints.remove(ip, endpoint_ports(self.server.port)):
                    log.error("found stale data, removed previous endpoints on kubernetes service, "
                              "apiserver didn't exit successfully previously")
            except (APIError, RuntimeError) as e:
                log.error("error removing old endpoints from kubernetes service: %s", e)
        await super().start()

    async def stop(self) -> None:
        """Stops reconciling and removes this server's address, so that clients move to the others."""
        await super().stop()
        if ip := self.server.advertise:
            self.endpoints.stopping = True
            try:  # a bounded wait: a store that cannot be reached does not hold the shutdown
                await asyncio.wait_for(self.endpoints.remove(ip, endpoint_ports(self.server.port)), 2 * INTERVAL)
            except (APIError, RuntimeError, asyncio.TimeoutError) as e:
                log.error("unable to remove endpoints from kubernetes service: %s", e)

    async def _loop(self) -> None:
        while not self.server.ready:  # as upstream's, which polls /readyz first
            await self.server.clock.sleep(0.02)
        reconcile = True
        while True:
            try:
                await self.update(reconcile)
                reconcile = False
            except (APIError, RuntimeError) as e:
                log.warning("unable to sync kubernetes service: %s", e)  # tried again next interval
            await self.server.clock.sleep(self.interval)

    async def update(self, reconcile: bool) -> None:
        """Creates the Service if it is missing (`reconcile`: also corrects its ports), then
        reconciles the endpoints (`reconcile`: their ports too)."""
        port = self.server.port
        res = self.server.index.get("", "v1", "services")
        want = service(self.cluster_ip, port)
        try:
            have = await self.server.rest.get(res, "v1", NAMESPACE, NAME)
        except APIError as e:
            if e.code != 404:
                raise
            await self.server.rest.create(res, "v1", NAMESPACE, want, self.opts)
        else:
            if reconcile and have["spec"].get("ports") != want["spec"]["ports"]:
                body = copy.deepcopy(have)  # the cache's object: the update changes what it is given
                body["spec"]["ports"] = want["spec"]["ports"]
                await self.server.rest.update(res, "v1", NAMESPACE, NAME, body, self.opts)
        if ip := self.server.advertise:
            await self.endpoints.reconcile(ip, endpoint_ports(port), reconcile)
