"""The `kubernetes` Service in `default` (kube-apiserver's
kubernetes-service-controller and endpoint reconciler): ClusterIP the first
address of the service range, port `https` 443 to the server's port, and,
when the server listens on an address pods can reach, the Endpoints and
EndpointSlice `kubernetes` pointing at it (a loopback listener gets none, as
endpoints may not be loopback addresses). Checked again every 10 seconds,
like upstream's reconcile interval."""

from __future__ import annotations

import ipaddress
import socket

from ..machinery.errors import APIError
from .background import BackgroundLoop
from .rest import SYSTEM, WriteOptions

NAME, NAMESPACE = "kubernetes", "default"
INTERVAL = 10.0
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"


def first_address(cidr: str) -> str:
    return str(ipaddress.ip_network(cidr).network_address + 1)


def advertise_address(listen: str) -> str | None:
    """The address endpoints name: the listen address, or for a wildcard one
    the host's outbound address; None for loopback."""
    try:
        addr = ipaddress.ip_address(listen)
    except ValueError:  # a host name
        addr = ipaddress.ip_address(socket.gethostbyname(listen))
    if addr.is_unspecified:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect(("10.255.255.255", 1))
            except OSError:
                return None
            addr = ipaddress.ip_address(s.getsockname()[0])
    return None if addr.is_loopback else str(addr)


def service(cluster_ip: str, port: int) -> dict:
    return {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "sessionAffinity": "None",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}}


def endpoints(ip: str, port: int) -> dict:
    return {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {SKIP_MIRROR: "true"}},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}


def endpoint_slice(ip: str, port: int) -> dict:
    return {"metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"kubernetes.io/service-name": NAME}},
            "addressType": "IPv4" if ipaddress.ip_address(ip).version == 4 else "IPv6",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}


class KubernetesService(BackgroundLoop):
    def __init__(self, server) -> None:
        self.server = server
        self.opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)

    async def _loop(self) -> None:
        while not self.server.ready:  # as upstream's, which polls /readyz first
            await self.server.clock.sleep(0.02)
        while True:
            try:
                await self.reconcile()
            except APIError:
                pass  # tried again next interval
            await self.server.clock.sleep(INTERVAL)

    async def _ensure(self, group: str, plural: str, want: dict, same) -> None:
        res = self.server.index.get(group, "v1", plural)
        rest = self.server.rest
        try:
            have = await rest.get(res, "v1", NAMESPACE, NAME)
        except APIError as e:
            if e.code != 404:
                raise
            await rest.create(res, "v1", NAMESPACE, want, self.opts)
            return
        if not same(have, want):
            body = {**have, **{k: v for k, v in want.items() if k != "metadata"}}
            body["metadata"] = {**have["metadata"], "labels": {**(have["metadata"].get("labels") or {}),
                                                               **want["metadata"]["labels"]}}
            await rest.update(res, "v1", NAMESPACE, NAME, body, self.opts)

    async def reconcile(self) -> None:
        services = self.server.index.get("", "v1", "services")
        port = self.server.port
        await self._ensure("", "services", service(first_address(str(services.strategy.ips.network)), port),
                           lambda have, want: have["spec"].get("ports") == want["spec"]["ports"])
        ip = advertise_address(self.server.host)
        if ip is None:
            return
        await self._ensure("", "endpoints", endpoints(ip, port), lambda have, want: have.get("subsets") == want["subsets"])
        await self._ensure("discovery.k8s.io", "endpointslices", endpoint_slice(ip, port),
                           lambda have, want: (have.get("endpoints"), have.get("ports")) == (want["endpoints"], want["ports"]))
