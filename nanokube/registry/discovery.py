"""discovery.k8s.io/v1: EndpointSlices."""

from __future__ import annotations

from .apps import age_column, api_doc, name_column
from .base import Column, Obj, Resource, Strategy, register
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    endpoint_ip,
    fully_qualified_domain_name,
    immutable,
    invalid,
    label_value,
    legacy_ip_errors,
    not_supported,
    qualified_name,
    required,
    sloppy_ip,
    too_many,
    validate_labels,
)
from . import kind_warnings

_ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
_PROTOCOLS = ["SCTP", "TCP", "UDP"]
_MAX_TOPOLOGY_LABELS = 16
_MAX_ADDRESSES = 100
_MAX_PORTS = 20000
_MAX_ENDPOINTS = 1000
_MAX_HINTS = 8


def _list_with_more(items: list[str], total: int) -> str:
    """listWithMoreString: at most three entries, then '+ N more...'; '<unset>' when empty."""
    text = ",".join(items[:3])
    if total > 3:
        return f"{text} + {total - 3} more..."
    return text or "<unset>"


def format_ports(obj: Obj) -> str:
    ports = obj.get("ports") or []
    cells = [str(p["port"]) if p.get("port") is not None else (p.get("name") if p.get("name") is not None else "*")
             for p in ports]
    return _list_with_more(cells, len(cells))


def format_endpoints(obj: Obj) -> str:
    addrs = [a for ep in obj.get("endpoints") or [] for a in ep.get("addresses") or []]
    return _list_with_more(addrs, len(addrs))


def _ip_errors(addr: str, family: int, path: str) -> list[FieldError]:
    """An address of the slice's type: a legacy IP (IsValidIPForLegacyField, strict), of that
    family as Go's net.IP tells it, then ValidateEndpointIP's reserved ranges."""
    if errs := legacy_ip_errors(addr, path):
        return errs
    if sloppy_ip(addr).version != family:
        return [invalid(path, addr, f"must be an IPv{family} address"), *endpoint_ip(addr, path)]
    return endpoint_ip(addr, path)


def _validate_hints(hints: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("forZones", "forNodes"):
        entries = hints.get(key) or []
        if len(entries) > _MAX_HINTS:
            errs.append(too_many(f"{path}.{key}", len(entries), _MAX_HINTS))
            continue
        seen: set[str] = set()
        for i, h in enumerate(entries):
            p, name = f"{path}.{key}[{i}].name", h.get("name", "")
            if name in seen:
                errs.append(duplicate(p, name))
            seen.add(name)
            check = label_value if key == "forZones" else dns1123_subdomain
            errs += [invalid(p, name, m) for m in check(name)]
    return errs


def _validate_endpoints(endpoints: list, address_type: str, check_ips: bool = True) -> list[FieldError]:
    if len(endpoints) > _MAX_ENDPOINTS:
        return [too_many("endpoints", len(endpoints), _MAX_ENDPOINTS)]
    errs: list[FieldError] = []
    for i, ep in enumerate(endpoints):
        p = f"endpoints[{i}]"
        addrs = ep.get("addresses") or []
        if not addrs:
            errs.append(required(f"{p}.addresses", "must contain at least 1 address"))
        elif len(addrs) > _MAX_ADDRESSES:
            errs.append(too_many(f"{p}.addresses", len(addrs), _MAX_ADDRESSES))
        for j, a in enumerate(addrs):
            ap = f"{p}.addresses[{j}]"
            if address_type in ("IPv4", "IPv6") and check_ips:
                errs += _ip_errors(a, 4 if address_type == "IPv4" else 6, ap)
            elif address_type == "FQDN":
                errs += fully_qualified_domain_name(a, ap)
        if ep.get("nodeName") is not None:
            errs += [invalid(f"{p}.nodeName", ep["nodeName"], m) for m in dns1123_subdomain(ep["nodeName"])]
        topology = ep.get("deprecatedTopology") or {}
        if len(topology) > _MAX_TOPOLOGY_LABELS:
            errs.append(too_many(f"{p}.deprecatedTopology", len(topology), _MAX_TOPOLOGY_LABELS))
        errs += validate_labels(topology, f"{p}.deprecatedTopology")
        if ep.get("hostname") is not None:
            errs += [invalid(f"{p}.hostname", ep["hostname"], m) for m in dns1123_label(ep["hostname"])]
        if ep.get("hints") is not None:
            errs += _validate_hints(ep["hints"], f"{p}.hints")
    return errs


def _validate_ports(ports: list) -> list[FieldError]:
    if len(ports) > _MAX_PORTS:
        return [too_many("ports", len(ports), _MAX_PORTS)]
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        p, name = f"ports[{i}]", port.get("name") or ""
        if name:
            errs += [invalid(f"{p}.name", name, m) for m in dns1123_label(name)]
        if name in names:
            errs.append(duplicate(f"{p}.name", name))
        names.add(name)
        proto = port.get("protocol")
        if proto is None:
            errs.append(required(f"{p}.protocol"))
        elif proto not in _PROTOCOLS:
            errs.append(not_supported(f"{p}.protocol", proto, _PROTOCOLS))
        if port.get("appProtocol") is not None:
            errs += [invalid(f"{p}.appProtocol", port["appProtocol"], m) for m in qualified_name(port["appProtocol"])]
    return errs


def validate_endpoint_slice(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """ValidateEndpointSlice; on update, addresses stored before strict IP validation stand only
    while the whole of `endpoints` is unchanged (KEP-4858's rule for EndpointSlices)."""
    errs: list[FieldError] = []
    at = obj.get("addressType", "")
    if not at:
        errs.append(required("addressType"))
    elif at not in _ADDRESS_TYPES:
        errs.append(not_supported("addressType", at, _ADDRESS_TYPES))
    endpoints = obj.get("endpoints") or []
    errs += _validate_endpoints(endpoints, at, old is None or endpoints != (old.get("endpoints") or []))
    return errs + _validate_ports(obj.get("ports") or [])


_DOC = "io.k8s.api.discovery.v1.EndpointSlice"


class EndpointSliceStrategy(Strategy):
    columns = [
        name_column(),
        Column("AddressType", "string", lambda o: o.get("addressType", ""), api_doc(_DOC, "addressType")),
        Column("Ports", "string", format_ports, api_doc(_DOC, "ports")),
        Column("Endpoints", "string", format_endpoints, api_doc(_DOC, "endpoints")),
        age_column(),
    ]

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_EndpointPort: unnamed TCP ports."""
        for port in obj.get("ports") or []:
            if port.get("name") is None:
                port["name"] = ""
            if port.get("protocol") is None:
                port["protocol"] = "TCP"

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        """Upstream bumps generation when labels change too (the server handles the rest)."""
        nm, om = new.setdefault("metadata", {}), old.get("metadata") or {}
        rest_equal = {k: v for k, v in new.items() if k != "metadata"} == {k: v for k, v in old.items() if k != "metadata"}
        if rest_equal and (nm.get("labels") or {}) != (om.get("labels") or {}):
            nm["generation"] = om.get("generation", 0) + 1

    def warnings_on_create(self, obj):
        return kind_warnings.endpoint_slice_warnings(obj, True)

    def warnings_on_update(self, new, old):
        return kind_warnings.endpoint_slice_warnings(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_endpoint_slice(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_endpoint_slice(new, old)
        if new.get("addressType") != old.get("addressType"):
            errs.append(immutable("addressType", new.get("addressType")))
        return errs


register(Resource("discovery.k8s.io", "endpointslices", "EndpointSlice", ["v1"], namespaced=True,
                  strategy=EndpointSliceStrategy()))
