"""kube-apiserver's lease endpoint reconciler (--endpoint-reconciler-type=lease, the default):
the Endpoints and EndpointSlice `default/kubernetes` list every API server that holds a lease.

Each server renews a lease on its advertise address in the store every reconcile (upstream keeps
them under /masterleases/ with an etcd TTL of 15 s; our stores have no TTL, so a lease records
when it expires and whoever lists it after that removes it), then writes both objects through
its loopback client from the unexpired leases, as EndpointsAdapter.Sync does: the Endpoints holds
one subset with the addresses sorted and the label endpointslice.kubernetes.io/skip-mirror=true
(so the mirroring controller leaves it alone), the EndpointSlice `kubernetes` of the service IP's
family the same addresses, each ready, labelled kubernetes.io/service-name=kubernetes; any other
slice with that label is deleted. Labels and addresses are reset whenever they differ; ports
only when empty or when asked to (the first reconcile after a start). A server that stops removes
its lease and the address with it, unless it was the last (an Endpoints subset without addresses
does not validate, so upstream's write fails and both objects stay)."""

from __future__ import annotations

import copy
import ipaddress
import logging

import orjson

from ..machinery.errors import APIError
from ..store.interface import KeyExists, KeyNotFound, RevisionMismatch

log = logging.getLogger(__name__)

NAME, NAMESPACE = "kubernetes", "default"
#: where leases live: LEASES + the address, {"ip": ..., "expires": seconds since the epoch}; outside
#: /registry/ and so outside every watch cache, like upstream's /masterleases/
LEASES = "/masterleases/"
#: how long a lease lives unrenewed (kube-apiserver's DefaultEndpointReconcilerTTL)
TTL = 15.0
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
SERVICE_NAME = "kubernetes.io/service-name"
#: attempts at one write that lost a race to another server (retry.DefaultBackoff's steps)
_ATTEMPTS = 4


class MasterLeases:
    """The store's record of which API servers are alive, by address."""

    def __init__(self, store, clock, ttl: float = TTL) -> None:
        self.store, self.clock, self.ttl = store, clock, ttl

    async def update(self, ip: str) -> None:
        key, value = LEASES + ip, orjson.dumps({"ip": ip, "expires": self.clock.now() + self.ttl})
        for _ in range(_ATTEMPTS):
            kv = await self.store.get(key)
            try:
                if kv is None:
                    await self.store.create(key, value)
                else:
                    await self.store.update(key, value, kv.mod_revision, kv)
                return
            except (KeyExists, RevisionMismatch, KeyNotFound):
                continue

    async def list(self) -> list[str]:
        """The addresses of unexpired leases; expired ones are removed."""
        kvs, _ = await self.store.list(LEASES)
        now, ips = self.clock.now(), []
        for kv in kvs:
            lease = orjson.loads(kv.value)
            if lease["expires"] > now:
                ips.append(lease["ip"])
                continue
            try:
                await self.store.delete(kv.key, kv.mod_revision, kv)
            except (KeyNotFound, RevisionMismatch):
                pass  # renewed or removed meanwhile
        return ips

    async def remove(self, ip: str) -> bool:
        """False when there was no lease."""
        try:
            await self.store.delete(LEASES + ip)
        except KeyNotFound:
            return False
        return True


def endpoint_ports(port: int) -> list[dict]:
    return [{"name": "https", "port": port, "protocol": "TCP"}]


def _address_type(ip: str) -> str:
    return "IPv4" if ipaddress.ip_address(ip).version == 4 else "IPv6"


def _retrying(e: APIError) -> bool:
    return e.code == 409  # Conflict or AlreadyExists: another server wrote first


class EndpointsAdapter:
    """Writes the Endpoints and the EndpointSlice `kubernetes` through a client."""

    def __init__(self, client, service_ip: str) -> None:
        self.endpoints = client.resource("", "v1", "endpoints")
        self.slices = client.resource("discovery.k8s.io", "v1", "endpointslices")
        self.address_type = _address_type(service_ip)

    async def sync(self, ips: set[str], ports: list[dict], reconcile_ports: bool) -> None:
        ips = sorted(ip for ip in ips if _address_type(ip) == self.address_type)
        if not ips:
            return  # an Endpoints subset needs an address: upstream's write is refused
        await self._retry(lambda: self._sync_endpoints(ips, ports, reconcile_ports))
        await self._retry(lambda: self._sync_slice(ips, ports, reconcile_ports))

    async def _retry(self, attempt) -> None:
        for i in range(_ATTEMPTS):
            try:
                return await attempt()
            except APIError as e:
                if not _retrying(e) or i == _ATTEMPTS - 1:
                    raise

    async def _sync_endpoints(self, ips: list[str], ports: list[dict], reconcile_ports: bool) -> None:
        try:
            current = await self.endpoints.get(NAME, NAMESPACE)
        except APIError as e:
            if e.code != 404:
                raise
            current = None
        want = copy.deepcopy(current) if current else {"metadata": {"name": NAME, "namespace": NAMESPACE}}
        want["metadata"]["labels"] = {SKIP_MIRROR: "true"}
        subsets = want.get("subsets") or []
        subset = subsets[0] if len(subsets) == 1 else {}
        subset["addresses"] = [{"ip": ip} for ip in ips]
        if not subset.get("ports") or (reconcile_ports and subset["ports"] != ports):
            subset["ports"] = ports
        want["subsets"] = [subset]
        if current is None:
            await self.endpoints.create(want, NAMESPACE)
        elif want["subsets"] != current.get("subsets") or want["metadata"]["labels"] != current["metadata"].get("labels"):
            log.warning("resetting endpoints for the kubernetes Service to %s", ips)
            await self.endpoints.update(want)

    async def _sync_slice(self, ips: list[str], ports: list[dict], reconcile_ports: bool) -> None:
        items, _ = await self.slices.list(NAMESPACE, label_selector=f"{SERVICE_NAME}={NAME}")
        current = None
        for s in items:
            if s["metadata"]["name"] == NAME and s.get("addressType") == self.address_type:
                current = s
                continue
            try:  # as far as this server is concerned it should not exist
                await self.slices.delete(s["metadata"]["name"], NAMESPACE)
            except APIError as e:
                if e.code != 404:
                    raise
        want = copy.deepcopy(current) if current else {"metadata": {"name": NAME, "namespace": NAMESPACE}}
        want["metadata"]["labels"] = {SERVICE_NAME: NAME}
        want["addressType"] = self.address_type
        want["endpoints"] = [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]
        if not want.get("ports") or (reconcile_ports and want["ports"] != ports):
            want["ports"] = ports
        if current is None:
            await self.slices.create(want, NAMESPACE)
        elif any(want.get(k) != current.get(k) for k in ("endpoints", "ports")) or \
                want["metadata"]["labels"] != current["metadata"].get("labels"):
            await self.slices.update(want)


class LeaseEndpointReconciler:
    def __init__(self, adapter: EndpointsAdapter, leases: MasterLeases) -> None:
        self.adapter, self.leases = adapter, leases
        self.stopping = False

    async def reconcile(self, ip: str, ports: list[dict], reconcile_ports: bool) -> None:
        """Renews this server's lease, then writes every leaseholder's address."""
        if self.stopping:
            return
        await self.leases.update(ip)
        await self._sync(ports, reconcile_ports)

    async def remove(self, ip: str, ports: list[dict]) -> bool:
        """Drops this server's lease and address; False when it held no lease."""
        if not await self.leases.remove(ip):
            return False
        await self._sync(ports, True)
        return True

    async def _sync(self, ports: list[dict], reconcile_ports: bool) -> None:
        ips = await self.leases.list()
        if not ips and not self.stopping:  # ours was just renewed: the listing is wrong
            raise RuntimeError("no API server IP addresses were listed in storage, refusing to erase all "
                               "endpoints for the kubernetes Service")
        await self.adapter.sync(set(ips), ports, reconcile_ports)
