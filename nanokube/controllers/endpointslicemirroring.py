"""EndpointSlice mirroring: the Endpoints a user writes for a Service without
a selector (an external database, a hand-managed backend) are mirrored into
EndpointSlices, as upstream's endpointslicemirroring controller does, so
kube-proxy (which reads only slices) routes the Service and `kubectl
describe svc` lists its endpoints.

Each subset, canonicalized (subsets with the same ports merged, addresses
deduplicated and sorted), becomes one slice per address type with its ports;
at most 1000 addresses of a subset are mirrored. A mirrored slice carries the
Endpoints' labels and annotations (less the last-change trigger time and
kubectl's last-applied configuration), the service-name and managed-by
labels, and the Endpoints as its controller owner. Endpoints labelled
`endpointslice.kubernetes.io/skip-mirror: "true"` (the endpoints controller's
own) or carrying a leader-election annotation are not mirrored; a Service
with a selector, or none, has its mirrored slices removed.
"""

from __future__ import annotations

import ipaddress

import orjson

from ..client.informer import InformerFactory, key_of
from ..client.record import CoreEventRecorder
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from .base import Controller
from .endpointslice import MANAGED_BY_LABEL, SERVICE_NAME_LABEL, SKIP_MIRROR_LABEL
from .replicaset import owner_reference

CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
#: --mirroring-max-endpoints-per-subset's default
MAX_ENDPOINTS_PER_SUBSET = 1000
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
_NOT_COPIED = ("endpoints.kubernetes.io/last-change-trigger-time", "kubectl.kubernetes.io/last-applied-configuration")


def should_mirror(endpoints: dict) -> bool:
    md = endpoints["metadata"]
    return (md.get("labels") or {}).get(SKIP_MIRROR_LABEL) != "true" and LEADER_ANNOTATION not in (md.get("annotations") or {})


def address_type(ip: str) -> str | None:
    try:
        return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"
    except ValueError:
        return None


def slice_ports(ports: list[dict]) -> list[dict]:
    """epPortsToEpsPorts: every field, the name even when empty."""
    out = []
    for p in ports:
        port = {"name": p.get("name", ""), "port": p.get("port"), "protocol": p.get("protocol", "TCP")}
        if p.get("appProtocol") is not None:
            port["appProtocol"] = p["appProtocol"]
        out.append(port)
    return out


def _endpoint(address: dict, ready: bool) -> dict:
    """addressToEndpoint."""
    ep: dict = {"addresses": [address["ip"]], "conditions": {"ready": ready}}
    if address.get("hostname"):
        ep["hostname"] = address["hostname"]
    if address.get("nodeName"):
        ep["nodeName"] = address["nodeName"]
    if address.get("targetRef"):
        ep["targetRef"] = address["targetRef"]
    return ep


def desired_slices(endpoints: dict, limit: int = MAX_ENDPOINTS_PER_SUBSET) -> tuple[dict, int, int]:
    """(address type, ports) key -> (ports, endpoints) of the slices the Endpoints mirror to, and how
    many addresses were invalid, and how many were not mirrored (invalid, or over `limit` in a
    subset; upstream's addressesSkipped): subsets with the same ports
    are one (RepackSubsets), an address listed ready and not ready counts as ready."""
    repacked: dict[bytes, tuple[list, dict[str, tuple[dict, bool]]]] = {}
    for subset in endpoints.get("subsets") or []:
        ports = slice_ports(subset.get("ports") or [])
        key = orjson.dumps(sorted(ports, key=lambda p: (p["name"], p["port"], p["protocol"])))
        _, by_ip = repacked.setdefault(key, (ports, {}))
        for ready, addresses in ((True, subset.get("addresses")), (False, subset.get("notReadyAddresses"))):
            for a in addresses or []:
                if a.get("ip") and (a["ip"] not in by_ip or (ready and not by_ip[a["ip"]][1])):
                    by_ip[a["ip"]] = (a, ready)
    out: dict[tuple[str, bytes], tuple[list, list]] = {}
    invalid = skipped = 0
    for key, (ports, by_ip) in repacked.items():
        added = 0
        for ip in sorted(by_ip, key=lambda ip: (not by_ip[ip][1], ip)):
            if added >= limit:
                break
            family = address_type(ip)
            if family is None:
                invalid += 1
                continue
            out.setdefault((family, key), (ports, []))[1].append(_endpoint(*by_ip[ip]))
            added += 1
        skipped += len(by_ip) - added
    return out, invalid, skipped


def _slice_key(sl: dict) -> tuple[str, bytes]:
    ports = slice_ports(sl.get("ports") or [])
    return sl.get("addressType", ""), orjson.dumps(sorted(ports, key=lambda p: (p["name"], p["port"], p["protocol"])))


class EndpointSliceMirroringController(Controller):
    name = "endpointslice-mirroring-controller"
    aliases = ("endpointslicemirroring",)
    queue_name = "endpoint_slice_mirroring"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None,
                 max_endpoints_per_subset: int = MAX_ENDPOINTS_PER_SUBSET):
        super().__init__(client, clock, informers)
        self.limit = max_endpoints_per_subset
        self.slices = client.resource("discovery.k8s.io", "v1", "endpointslices")
        self.svc_inf = self.informer_factory.informer(client.resource("", "v1", "services"))
        self.ep_inf = self.informer_factory.informer(client.resource("", "v1", "endpoints"))
        self.slice_inf = self.informer_factory.informer(self.slices, label_selector=f"{MANAGED_BY_LABEL}={CONTROLLER_NAME}")
        for inf in (self.svc_inf, self.ep_inf):
            inf.add_handlers(self._enqueue, lambda _o, n: self._enqueue(n), self._enqueue)
        self.slice_inf.add_handlers(self._slice_changed, lambda _o, n: self._slice_changed(n), self._slice_changed)
        self.recorder = CoreEventRecorder(client, "endpoint-slice-mirroring-controller", clock)

    def informers(self):
        return [self.svc_inf, self.ep_inf, self.slice_inf]

    def _enqueue(self, obj: dict) -> None:
        self.queue.add(key_of(obj))

    def _slice_changed(self, sl: dict) -> None:
        if name := (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL):
            self.queue.add(f"{sl['metadata']['namespace']}/{name}")

    def _mirrored(self, ns: str, name: str) -> list[dict]:
        return [sl for sl in self.slice_inf.list_namespace(ns)
                if (sl["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name]

    async def sync(self, key: str) -> None:
        ns, name = key.split("/", 1)
        existing = self._mirrored(ns, name)
        svc, endpoints = self.svc_inf.get(key), self.ep_inf.get(key)
        if svc is None or (svc.get("spec") or {}).get("selector") or endpoints is None or not should_mirror(endpoints):
            for sl in existing:
                await self._delete(sl)
            return
        if endpoints["metadata"].get("deletionTimestamp"):
            return
        desired, invalid, skipped = desired_slices(endpoints, self.limit)
        if invalid:
            await self.recorder.emit(endpoints, "Warning", "InvalidIPAddress",
                                     f"Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices")
        if skipped > invalid:
            await self.recorder.emit(endpoints, "Warning", "TooManyAddressesToMirror",
                                     f"A max of {self.limit} addresses can be mirrored to EndpointSlices per "
                                     f"Endpoints subset. {skipped} addresses were skipped")
        meta = self._meta(endpoints)
        by_key: dict[tuple[str, bytes], list[dict]] = {}
        for sl in sorted(existing, key=lambda s: s["metadata"]["name"]):
            by_key.setdefault(_slice_key(sl), []).append(sl)
        for k, (ports, eps) in desired.items():
            have = by_key.pop(k, [])
            body = {"addressType": k[0], "ports": ports, "endpoints": eps}
            if not have:
                await self.slices.create({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {
                    "generateName": f"{name}-", "namespace": ns, **meta}, **body})
                continue
            first, *extra = have
            if any(first.get(f) != v for f, v in body.items()) or any(
                    (first["metadata"].get(f) or None) != (v or None) for f, v in meta.items()):
                await self.slices.update({**first, **body, "metadata": {**first["metadata"], **meta}})
            for sl in extra:
                await self._delete(sl)
        for stale in by_key.values():
            for sl in stale:
                await self._delete(sl)

    @staticmethod
    def _meta(endpoints: dict) -> dict:
        """newEndpointSlice's metadata: the Endpoints' labels and annotations, ours, its owner."""
        md = endpoints["metadata"]
        labels = {**(md.get("labels") or {}), SERVICE_NAME_LABEL: md["name"], MANAGED_BY_LABEL: CONTROLLER_NAME}
        annotations = {k: v for k, v in (md.get("annotations") or {}).items() if k not in _NOT_COPIED}
        return {"labels": labels, "annotations": annotations,
                "ownerReferences": [owner_reference(endpoints, "v1", "Endpoints")]}

    async def _delete(self, sl: dict) -> None:
        try:
            await self.slices.delete(sl["metadata"]["name"], sl["metadata"]["namespace"])
        except APIError as e:
            if e.code != 404:
                raise
