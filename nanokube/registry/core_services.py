"""Services: defaulting, validation, printing, ClusterIP, NodePort and health check node port allocation.

Allocation happens in `prepare_for_create`/`prepare_for_update` once the
ClusterIP fields check out, and `begin_create`/`begin_update` report, before the
metadata and the rest of the spec are validated (upstream's Store.BeginCreate
allocates before BeforeCreate validates), the ClusterIP fields' errors or the
first value that could not be allocated, alone, with upstream's messages (an
allocation belongs to the service's uid, so a failed allocation shows up as
"owned by someone else"): a value asked for as the field's 422, a value to be
picked from a full range as upstream's 500 InternalError, which they raise. The API server must call
`strategy.release(obj)` after a service is deleted (and after a create that
failed after `prepare_for_create`), `strategy.finish_update(new, old, written)`
after every update `prepare_for_update` prepared, and `strategy.restore(services)`
once at startup so allocations survive restarts.
"""

from __future__ import annotations

import ipaddress
import random
import time
from typing import Any

from .base import AGE, Column, Strategy
from .core_printing import AGE_DOC, NAME_DOC, Clock, doc, format_labels
from .core_spec import PROTOCOLS, port_name, port_number
from ..machinery import errors
from ..machinery.gofmt import Struct
from ..machinery.services import health_check_node_port, needs_health_check
from ..machinery.validation import (
    FieldError,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    endpoint_ip,
    forbidden,
    invalid,
    is_ip,
    legacy_cidr_errors,
    legacy_ip_errors,
    not_supported,
    qualified_name,
    required,
    sloppy_ip,
    validate_labels,
)
from . import kind_warnings

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")
_IP_MODES = ("Proxy", "VIP")  # sorted, as upstream lists them
_LB_WIDTH = 16


class AllocationError(Exception):
    """Why a value could not be allocated; str() is upstream's wording."""


def _scans(stride: int) -> tuple[bool, ...]:
    """`shared` for each scan for a dynamic pick: with several processes (`stride` > 1), in their own
    share first, then, once that is full, in the others' values too (the store arbitrates them,
    apiserver/reservations.py), so that the range is full only when all of it is."""
    return (True, False) if stride > 1 else (True,)


class _RangeAllocator:
    """Integers in [lo, hi] owned by keys; explicit picks anywhere in the range,
    dynamic picks from the upper band first (upstream keeps the low band for
    static assignments such as the DNS service's IP)."""

    def __init__(self, lo: int, hi: int, static_band: int, picks: random.Random) -> None:
        self.lo, self.hi = lo, hi
        #: where a dynamic pick starts its scan of a band (upstream's rand.Intn)
        self.picks = picks
        self._dynamic_lo = min(hi, lo + static_band)
        self._owners: dict[int, str] = {}
        #: dynamic picks only of values equal to `offset` modulo `stride`: each of several API server
        #: processes allocates from a share of its own (apiserver/workers.py)
        self.stride, self.offset = 1, 0

    def owner(self, value: int) -> str | None:
        return self._owners.get(value)

    def clear(self) -> None:
        """Forget every owner (the store is about to be read again)."""
        self._owners.clear()

    def in_range(self, value: int) -> bool:
        return self.lo <= value <= self.hi

    def take(self, value: int, owner: str) -> None:
        held = self._owners.get(value)
        if held is not None and held != owner:
            raise AllocationError("allocated")
        self._owners[value] = owner

    def next_free(self, owner: str, shared: bool = True, after: int | None = None) -> int:
        """The first free value of the dynamic band from a random place in it, going round, then
        likewise of the static band, as upstream's randomScanStrategyWithOffset (and the IPAddress
        allocator) pick: a cluster's ClusterIPs and node ports read 10.96.183.20 and 31652, not
        10.96.1.1, 10.96.1.2. `after`: a value just picked and found taken elsewhere; its band's
        scan goes on past it, as upstream's iterator goes on to the next address. In this
        process's share of the values alone, unless not `shared`."""
        stride, offset = (self.stride, self.offset) if shared else (1, 0)
        for lo, size in ((self._dynamic_lo, self.hi - self._dynamic_lo + 1), (self.lo, self._dynamic_lo - self.lo)):
            if size <= 0:
                continue
            start = after - lo + 1 if after is not None and lo <= after < lo + size else self.picks.randrange(size)
            for i in range(size):
                value = lo + (start + i) % size
                if value not in self._owners and (stride == 1 or value % stride == offset):
                    self._owners[value] = owner
                    return value
        raise AllocationError("range is full")

    def release(self, value: int, owner: str) -> None:
        if self._owners.get(value) == owner:
            del self._owners[value]


class ServiceIPAllocator:
    """ClusterIPs from the default CIDR and from every further Ready ServiceCIDR
    (MultiCIDRServiceAllocator), network and broadcast addresses excluded.

    Ranges are kept in the order they were added, the default first; an
    address belongs to the first range that contains it, so overlapping
    ServiceCIDRs never own one address twice. Dynamic allocation takes the
    first range with a free address.
    """

    def __init__(self, cidr: str = "10.96.0.0/12", picks: random.Random | None = None) -> None:
        self.network = ipaddress.ip_network(cidr)
        self.picks = picks or random.Random()
        self.ranges: dict[str, tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, _RangeAllocator]] = {}
        self._share = (1, 0)
        self._add("", self.network)

    def share(self, stride: int, offset: int) -> None:
        """Pick dynamically only addresses equal to `offset` modulo `stride` (see _RangeAllocator)."""
        self._share = (stride, offset)
        for _, rng in self.ranges.values():
            rng.stride, rng.offset = stride, offset

    def clear(self) -> None:
        """Forget every allocation; the ranges stay."""
        for _, rng in self.ranges.values():
            rng.clear()

    def _add(self, name: str, network) -> None:
        first = int(network.network_address) + 1
        last = int(network.broadcast_address) - (1 if network.version == 4 else 0)
        size = last - first + 1
        rng = _RangeAllocator(first, last, min(max(16, size // 16), 256), self.picks)
        rng.stride, rng.offset = self._share
        self.ranges[name] = (network, rng)

    def set_extra_ranges(self, cidrs: dict[str, list[str]]) -> list[str]:
        """The ServiceCIDRs besides the default one (name -> cidrs); returns the names added."""
        wanted = {f"{name}/{c}": ipaddress.ip_network(c) for name, cs in cidrs.items() for c in cs}
        for key in [k for k in self.ranges if k and k not in wanted]:
            del self.ranges[key]
        added = [k for k in wanted if k not in self.ranges]
        for key in added:
            self._add(key, wanted[key])
        return added

    def _range_of(self, ip: str) -> tuple[int, _RangeAllocator] | None:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return None
        for network, rng in self.ranges.values():
            if addr.version == network.version and rng.in_range(int(addr)):
                return int(addr), rng
        return None

    def allocate(self, owner: str, ip: str | None = None, version: int | None = None, after: str | None = None) -> str:
        """Allocate `ip` (or a free one, of IP `version` if given, past `after`: see next_free) to
        `owner`; AllocationError says why not."""
        if ip is None:
            past = int(ipaddress.ip_address(after)) if after else None
            for shared in _scans(self._share[0]):
                for network, rng in self.ranges.values():
                    if version is not None and network.version != version:
                        continue
                    try:
                        return str(ipaddress.ip_address(rng.next_free(owner, shared, past)))
                    except AllocationError:
                        continue
            raise AllocationError("range is full")
        problem = self.check(owner, ip)
        if problem:
            raise AllocationError(problem)
        value, rng = self._range_of(ip)
        rng.take(value, owner)
        return ip

    def check(self, owner: str, ip: str) -> str | None:
        """Why `owner` could not hold `ip`, or None if it could."""
        found = self._range_of(ip)
        if found is None:
            valid = ", ".join(str(n) for n, _ in self.ranges.values())
            return f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {valid}"
        value, rng = found
        if rng.owner(value) not in (None, owner):
            return "provided IP is already allocated"
        return None

    def owner(self, ip: str) -> str | None:
        found = self._range_of(ip)
        return None if found is None else found[1].owner(found[0])

    def release(self, ip: str, owner: str) -> None:
        found = self._range_of(ip)
        if found is not None:
            found[1].release(found[0], owner)


class NodePortAllocator:
    """Node ports from a range such as 30000-32767."""

    def __init__(self, ports: str = "30000-32767", picks: random.Random | None = None) -> None:
        lo, hi = (int(p) for p in ports.split("-"))
        self.ports = ports
        size = hi - lo + 1
        self._range = _RangeAllocator(lo, hi, min(max(16, size // 32), 128), picks or random.Random())

    def share(self, stride: int, offset: int) -> None:
        """Pick dynamically only ports equal to `offset` modulo `stride` (see _RangeAllocator)."""
        self._range.stride, self._range.offset = stride, offset

    def clear(self) -> None:
        """Forget every allocation."""
        self._range.clear()

    def allocate(self, owner: str, port: int | None = None, after: int | None = None) -> int:
        """Allocate `port` (or a free one, past `after`: see next_free) to `owner`."""
        if port is None:
            for shared in _scans(self._range.stride):
                try:
                    return self._range.next_free(owner, shared, after)
                except AllocationError:
                    continue
            raise AllocationError("range is full")
        problem = self.check(owner, port)
        if problem:
            raise AllocationError(problem)
        self._range.take(port, owner)
        return port

    def check(self, owner: str, port: int) -> str | None:
        """Why `owner` could not hold `port`, or None if it could."""
        if not self._range.in_range(port):
            return f"provided port is not in the valid range. The range of valid ports is {self.ports}"
        if self._range.owner(port) not in (None, owner):
            return "provided port is already allocated"
        return None

    def owner(self, port: int) -> str | None:
        return self._range.owner(port)

    def release(self, port: int, owner: str) -> None:
        self._range.release(port, owner)


# --- helpers ---------------------------------------------------------------------


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def _owner(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


def _needs_ip(spec: dict) -> bool:
    return spec.get("type", "ClusterIP") != "ExternalName" and spec.get("clusterIP") != "None"


def _allocates_ip(spec: dict, old: dict | None) -> bool:
    """Whether allocation gives `spec` its ClusterIP: on create, or on an update from ExternalName
    (upstream's updateClusterIPs; another change of it is validation's 'may not change once set')."""
    return _needs_ip(spec) and (old is None or _spec(old).get("type") == "ExternalName")


def _upgrades(spec: dict, old: dict | None) -> bool:
    """Whether an update turns a single-stack Service dual-stack (upstream's updateClusterIPs after
    initIPFamilyFields): the policy changed to one asking for dual-stack, or a second ClusterIP or
    family was added; the secondary is then allocated."""
    ospec = _spec(old) if old else {}
    if not old or not _needs_ip(spec) or "ExternalName" in (spec.get("type"), ospec.get("type")):
        return False
    policy, families = spec.get("ipFamilyPolicy"), spec.get("ipFamilies") or []
    return (policy in ("PreferDualStack", "RequireDualStack") and len(ospec.get("ipFamilies") or []) == 1
            and len(cluster_ips(ospec)) == 1 and (policy != ospec.get("ipFamilyPolicy")
                                                 or len(spec.get("clusterIPs") or []) > 1 or len(families) > 1))


def _allocates_node_ports(spec: dict) -> bool:
    """Whether a port without a nodePort gets one (upstream's shouldAllocateNodePorts)."""
    return spec.get("type") == "NodePort" or (
        spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)


def _node_ports(spec: dict) -> list[int]:
    if spec.get("type") not in _NODE_PORT_TYPES:
        return []
    return [p["nodePort"] for p in spec.get("ports") or [] if p.get("nodePort")]


def cluster_ips(spec: dict) -> list[str]:
    """The ClusterIPs a Service's spec holds."""
    return [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None"]


def node_ports(spec: dict) -> list[int]:
    """Every node port a Service's spec holds: its ports' and its health check's."""
    hc = health_check_node_port(spec)
    return [*_node_ports(spec), *([hc] if hc else [])]


def _drop_type_dependent_fields(spec: dict, ospec: dict) -> None:
    """Upstream's dropTypeDependentFields for the type's own fields: one the new type does not use is
    dropped when the update left it as it was (so `kubectl patch -p '{"spec":{"type":"ClusterIP"}}'`
    turns a NodePort Service into a ClusterIP one); one the client changed is left to validation."""
    was_lb, is_lb = ospec.get("type") == "LoadBalancer", spec.get("type") == "LoadBalancer"
    fields = ["allocateLoadBalancerNodePorts", "loadBalancerClass"] if was_lb and not is_lb else []
    if ospec.get("type") in _NODE_PORT_TYPES and spec.get("type") not in _NODE_PORT_TYPES:
        fields.append("externalTrafficPolicy")
    for f in fields:
        if f in spec and spec[f] == ospec.get(f):
            del spec[f]


def default_service(obj: dict) -> None:
    """SetDefaults_Service (plus its traffic-policy defaults)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("type", "ClusterIP")
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        if p.get("targetPort") in (None, 0, ""):
            p["targetPort"] = p.get("port")
    if spec["type"] in _NODE_PORT_TYPES:
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
        for ing in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ():
            if ing.get("ip") and ing.get("ipMode") is None:  # LoadBalancerIPMode, GA
                ing["ipMode"] = "VIP"
    if spec["sessionAffinity"] == "ClientIP":
        cfg = spec.setdefault("sessionAffinityConfig", {}).setdefault("clientIP", {})
        cfg.setdefault("timeoutSeconds", 10800)
    if spec.get("clusterIPs") and not spec.get("clusterIP"):
        spec["clusterIP"] = spec["clusterIPs"][0]


def _default_families(spec: dict, have: list[str], init: bool) -> None:
    """initIPFamilyFields: the policy (RequireDualStack for a headless Service without a selector,
    else SingleStack), the families (of the ClusterIPs asked for, else the cluster's primary one,
    `have[0]`), and, where the Service is being given its IPs (`init`), the cluster's other family
    when the policy asks for dual-stack and the cluster has both."""
    if spec.get("type") == "ExternalName":
        return
    if spec.get("clusterIP") == "None" and not spec.get("selector"):
        spec.setdefault("ipFamilyPolicy", "RequireDualStack")
    else:
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    families = spec.get("ipFamilies") or [f"IPv{sloppy_ip(ip).version}" for ip in cluster_ips(spec)] or have[:1]
    if init and spec["ipFamilyPolicy"] != "SingleStack" and len(families) == 1 and len(have) == 2:
        families = [*families, *(f for f in have if f != families[0])]
    spec["ipFamilies"] = families


# --- validation --------------------------------------------------------------------


def validate_service_spec(spec: dict, annotations: dict | None = None, old: dict | None = None) -> list[FieldError]:
    """ValidateService's checks after the metadata's, in its order (the annotations: the topology
    mode's and the source ranges'). On update, `old` (the old Service) holds the IPs and CIDRs
    that stand unchecked (StrictIPCIDRValidation's ratcheting)."""
    errs: list[FieldError] = []
    ospec = _spec(old) if old else {}
    mode, hints = (annotations or {}).get(_TOPOLOGY_MODE), (annotations or {}).get(_TOPOLOGY_HINTS)
    if mode is not None and hints is not None and mode != hints:
        errs.append(invalid(f"metadata.annotations[{_TOPOLOGY_MODE}]", mode,
                            f"must match annotations[{_TOPOLOGY_HINTS}] when both are specified"))
    stype = spec.get("type", "")
    headless = _headless(spec)
    ports = spec.get("ports") or []
    if not ports and not headless and stype != "ExternalName":
        errs.append(required("spec.ports"))
    if stype in _NODE_PORT_TYPES and headless:
        errs.append(invalid("spec.clusterIPs[0]", "None", f"may not be set to 'None' for {stype} services"))
    elif stype == "ExternalName":
        if spec.get("clusterIP") or spec.get("clusterIPs"):
            errs.append(forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
        for f in ("ipFamilies", "ipFamilyPolicy"):
            if spec.get(f):
                errs.append(forbidden(f"spec.{f}", "may not be set for ExternalName services"))
        name = spec.get("externalName", "")
        if not name:
            errs.append(required("spec.externalName"))
        else:
            errs += [invalid("spec.externalName", name, m) for m in dns1123_subdomain(name.rstrip("."))]
    errs += _validate_ports(ports)
    if spec.get("selector"):
        errs += validate_labels(spec["selector"], "spec.selector")
    affinity = spec.get("sessionAffinity", "")
    if affinity not in ("ClientIP", "None"):
        errs.append(not_supported("spec.sessionAffinity", affinity, ["ClientIP", "None"]))
    timeout = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds")
    if affinity == "ClientIP" and timeout is not None and not 0 < timeout <= 86400:
        errs.append(invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                            "must be greater than 0 and less than 86400"))
    elif affinity == "None" and spec.get("sessionAffinityConfig") is not None:
        errs.append(forbidden("spec.sessionAffinityConfig", "must not be set when session affinity is None"))
    errs += _cluster_ips_related(spec, tuple(ospec.get("clusterIPs") or ()))
    old_external = tuple(ospec.get("externalIPs") or ())
    for i, ip in enumerate(spec.get("externalIPs") or []):
        p = f"spec.externalIPs[{i}]"
        errs += legacy_ip_errors(ip, p, old_external) or endpoint_ip(ip, p)
    if stype not in SERVICE_TYPES:
        errs.append(not_supported("spec.type", stype, SERVICE_TYPES))
    errs += _port_pairs(ports, stype)
    errs += _source_ranges(spec, annotations or {}, ospec, ((old or {}).get("metadata") or {}).get("annotations") or {})
    if spec.get("allocateLoadBalancerNodePorts") is not None and stype != "LoadBalancer":
        errs.append(forbidden("spec.allocateLoadBalancerNodePorts", _LB_ONLY))
    errs += _load_balancer_class(spec)
    etp = spec.get("externalTrafficPolicy")
    accessible = stype in _NODE_PORT_TYPES or (stype == "ClusterIP" and spec.get("externalIPs"))
    if etp and not accessible:
        errs.append(invalid("spec.externalTrafficPolicy", etp, "may only be set for externally-accessible services"))
    elif etp and etp not in ("Cluster", "Local"):
        errs.append(not_supported("spec.externalTrafficPolicy", etp, ["Cluster", "Local"]))
    hc = spec.get("healthCheckNodePort") or 0
    if hc and not needs_health_check(spec):
        errs.append(invalid("spec.healthCheckNodePort", hc,
                            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    # where one is needed, upstream allocates it before validation: none, or one outside the node port
    # range (-1, 70000), is the allocator's 500 (allocation_errors), its IsValidPortNum never reached
    itp = spec.get("internalTrafficPolicy")
    if itp is not None and itp not in ("Cluster", "Local"):
        errs.append(not_supported("spec.internalTrafficPolicy", itp, ["Cluster", "Local"]))
    td = spec.get("trafficDistribution")  # validateServiceTrafficDistribution (PreferSameTrafficDistribution GA)
    if td is not None and td not in _TRAFFIC_DISTRIBUTIONS:
        errs.append(not_supported("spec.trafficDistribution", td, _TRAFFIC_DISTRIBUTIONS))
    return errs


_TRAFFIC_DISTRIBUTIONS = ["PreferClose", "PreferSameZone", "PreferSameNode"]


_LB_ONLY = "may only be used when `type` is 'LoadBalancer'"
_TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
_TOPOLOGY_HINTS = "service.kubernetes.io/topology-aware-hints"
_SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"


def _source_ranges(spec: dict, annotations: dict, ospec: dict, old_annotations: dict) -> list[FieldError]:
    """loadBalancerSourceRanges (at upstream's path, capital L), else the older annotation: only on a
    LoadBalancer, each a legacy CIDR once trimmed (strict: a subnet, bits beyond the prefix refused);
    one the old Service held, trimmed, stands."""
    errs: list[FieldError] = []
    old_ranges = tuple(r.strip() for r in ospec.get("loadBalancerSourceRanges") or [] if isinstance(r, str))
    old_ranges += tuple(r.strip() for r in (old_annotations.get(_SOURCE_RANGES) or "").split(",") if r.strip())
    lb = spec.get("type") == "LoadBalancer"
    if ranges := spec.get("loadBalancerSourceRanges"):
        p = "spec.LoadBalancerSourceRanges"
        if not lb:
            errs.append(forbidden(p, _LB_ONLY))
        for i, r in enumerate(ranges):
            errs += legacy_cidr_errors(r.strip() if isinstance(r, str) else r, f"{p}[{i}]", old_ranges)
    elif (value := annotations.get(_SOURCE_RANGES)) is not None:
        p = f"metadata.annotations[{_SOURCE_RANGES}]"
        if not lb:
            errs.append(forbidden(p, _LB_ONLY))
        if value.strip():
            for r in value.strip().split(","):
                errs += legacy_cidr_errors(r.strip(), p, old_ranges)
    return errs


def _load_balancer_class(spec: dict, ospec: dict | None = None) -> list[FieldError]:
    """validateLoadBalancerClassField: a qualified name on a LoadBalancer, set on no other type, and
    (on update, LoadBalancer to LoadBalancer) never changed, unset included."""
    errs: list[FieldError] = []
    is_lb, cls = spec.get("type") == "LoadBalancer", spec.get("loadBalancerClass")
    if ospec is not None and is_lb and ospec.get("type") == "LoadBalancer" and cls != ospec.get("loadBalancerClass"):
        errs.append(invalid("spec.loadBalancerClass", cls, "may not change once set"))
    if cls is not None and is_lb:
        errs += [invalid("spec.loadBalancerClass", cls, m) for m in qualified_name(cls)]
    elif cls is not None:
        errs.append(forbidden("spec.loadBalancerClass", _LB_ONLY))
    return errs


def _headless(spec: dict) -> bool:
    """isHeadlessService: clusterIPs is exactly ["None"] (normalized from clusterIP)."""
    return (spec.get("clusterIPs") or [spec.get("clusterIP")]) == ["None"]


def _cluster_ips_related(spec: dict, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    """ValidateServiceClusterIPsRelatedFields, which upstream's allocator also runs before it
    allocates (its errors then come alone, ahead of the rest of validation); `old_ips`, the old
    Service's, stand unchecked."""
    if spec.get("type") == "ExternalName":
        return []
    errs: list[FieldError] = []
    ips, p = spec.get("clusterIPs") or [], "spec.clusterIPs"
    if spec.get("clusterIP") and ips and ips[0] != spec["clusterIP"]:
        errs.append(invalid(p, ips, "first value must match `clusterIP`"))
    seen: set = set()
    for i, family in enumerate(spec.get("ipFamilies") or []):
        if family not in ("IPv4", "IPv6"):
            errs.append(not_supported(f"spec.ipFamilies[{i}]", family, ["IPv4", "IPv6"]))
        if family in seen:
            errs.append(duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in _FAMILY_POLICIES:
        errs.append(not_supported("spec.ipFamilyPolicy", policy, _FAMILY_POLICIES))
    bad = False
    for i, ip in enumerate(ips):
        if i == 0 and ip == "None":
            if len(ips) > 1:
                bad = True
                errs.append(invalid(p, ips, "'None' must be the first and only value"))
        elif wrong := legacy_ip_errors(ip, f"{p}[{i}]", old_ips):
            bad = True
            errs += wrong
    if len(ips) > 2:
        errs.append(invalid(p, ips, "may only hold up to 2 values"))
    if bad:
        return errs
    if len(ips) > 1 and len({sloppy_ip(ip).version for ip in ips}) != len(ips):
        errs.append(invalid(p, ips, "may specify no more than one IP for each IP family"))
    if ips != ["None"]:
        for i, (ip, family) in enumerate(zip(ips, spec.get("ipFamilies") or [])):
            v6 = sloppy_ip(ip).version == 6
            if family == "IPv4" and v6 or family == "IPv6" and not v6:
                errs.append(invalid(f"{p}[{i}]", ip, f"expected an {family} value as indicated by `ipFamilies[{i}]`"))
    return errs


_FAMILY_POLICIES = ["PreferDualStack", "RequireDualStack", "SingleStack"]


def _cluster_ips_update(spec: dict, ospec: dict) -> list[FieldError]:
    """validateUpgradeDowngradeClusterIPs and validateUpgradeDowngradeIPFamilies: the primary
    ClusterIP and IP family never change; releasing the secondary needs SingleStack."""
    if "ExternalName" in (spec.get("type"), ospec.get("type")):
        return []
    errs: list[FieldError] = []
    headless, was_headless = _headless(spec), _headless(ospec)
    for f, noun, skip in (("clusterIPs", "clusterIP", headless and was_headless),
                          ("ipFamilies", "ipFamily", headless or was_headless)):
        new, old, p = spec.get(f) or [], ospec.get(f) or [], f"spec.{f}"
        if skip:
            continue
        if len(old) == len(new):
            errs += [invalid(f"{p}[{i if f == 'clusterIPs' else 0}]", new, "may not change once set")
                     for i, v in enumerate(old) if v != new[i]]
            continue
        if len(old) > len(new) and not new:
            errs.append(invalid(f"{p}[0]", new, f"primary {noun} can not be unset"))
        elif old and new and new[0] != old[0]:
            errs.append(invalid(f"{p}[0]", new, "may not change once set"))
        if len(old) > len(new) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            errs.append(invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                f"must be set to 'SingleStack' when releasing the secondary {noun}"))
    return errs


def _validate_ports(ports: list) -> list[FieldError]:
    """validateServicePort for each port."""
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = f"spec.ports[{i}]"
        name = port.get("name", "")
        if len(ports) > 1 and not name:
            errs.append(required(f"{p}.name"))
        elif name:
            errs += [invalid(f"{p}.name", name, m) for m in dns1123_label(name)]
            if name in names:
                errs.append(duplicate(f"{p}.name", name))
            names.add(name)
        errs += port_number(port.get("port"), f"{p}.port")
        proto = port.get("protocol", "")
        if not proto:
            errs.append(required(f"{p}.protocol"))
        elif proto not in PROTOCOLS:
            errs.append(not_supported(f"{p}.protocol", proto, PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, int):
            errs += port_number(target, f"{p}.targetPort")
        elif isinstance(target, str):
            errs += [invalid(f"{p}.targetPort", target, m) for m in port_name(target)]
        if port.get("appProtocol") is not None:
            errs += [invalid(f"{p}.appProtocol", port["appProtocol"], m) for m in qualified_name(port["appProtocol"])]
    return errs


def _port_pairs(ports: list, stype: str) -> list[FieldError]:
    """ValidateService after the type: no nodePort on a ClusterIP Service, then no (protocol,
    nodePort) and no (protocol, port) twice."""
    errs: list[FieldError] = []
    if stype == "ClusterIP":
        errs += [forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'")
                 for i, port in enumerate(ports) if port.get("nodePort")]
    node_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        if node_port := port.get("nodePort"):
            if (node_port, port.get("protocol", "")) in node_ports:
                errs.append(duplicate(f"spec.ports[{i}].nodePort", node_port))
            node_ports.add((node_port, port.get("protocol", "")))
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        key = (port.get("port"), port.get("protocol", ""))
        if key in seen:
            # upstream's key is an internal core.ServicePort holding only these two
            errs.append(duplicate(f"spec.ports[{i}]", Struct(Name="", Protocol=key[1], AppProtocol=None, Port=key[0],
                                                             TargetPort=0, NodePort=0)))
        seen.add(key)
    return errs


# --- printing ------------------------------------------------------------------------


def _lb_ingress(svc: dict) -> str:
    found = set()
    for ing in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        if ing.get("ip"):
            found.add(ing["ip"])
        elif ing.get("hostname"):
            found.add(ing["hostname"])
    text = ",".join(sorted(found))
    return text[: _LB_WIDTH - 3] + "..." if len(text) > _LB_WIDTH else text


def external_ip(svc: dict) -> str:
    spec = _spec(svc)
    stype = spec.get("type")
    ext = spec.get("externalIPs") or []
    if stype in ("ClusterIP", "NodePort"):
        return ",".join(ext) if ext else "<none>"
    if stype == "LoadBalancer":
        lb = _lb_ingress(svc)
        if ext:
            return ",".join((lb.split(",") if lb else []) + ext)
        return lb or "<pending>"
    if stype == "ExternalName":
        return spec.get("externalName", "")
    return "<unknown>"


def port_string(svc: dict) -> str:
    pieces = []
    for p in _spec(svc).get("ports") or []:
        if p.get("nodePort"):
            pieces.append(f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', '')}")
        else:
            pieces.append(f"{p.get('port')}/{p.get('protocol', '')}")
    return ",".join(pieces) or "<none>"


# --- strategy ------------------------------------------------------------------------


class ServiceStrategy(Strategy):
    """Services, with the cluster's ClusterIP and NodePort allocators.

    Extra hooks for the API server: `release(obj)` after delete (or a failed
    create), `restore(objs)` at startup.
    """
    return_deleted_object = True
    track_generation = False  # svcStrategy neither sets nor bumps it: a create keeps what was sent
    name_validator = staticmethod(dns1035_label)  # a Service's name is its DNS label
    #: values picked dynamically, remembered per owner while `reservations` records them
    _PICKS_KEPT = 256

    field_selectors = {
        "spec.clusterIP": lambda o: _spec(o).get("clusterIP", ""),
        "spec.type": lambda o: _spec(o).get("type", ""),
    }

    def __init__(self, service_cidr: str = "10.96.0.0/12", node_ports: str = "30000-32767",
                 clock: Clock = time.time) -> None:
        #: where the allocators' dynamic picks start, one source for both; a simulation seeds it so its runs repeat
        self.picks = random.Random()
        self.ips = ServiceIPAllocator(service_cidr, self.picks)
        self.node_ports = NodePortAllocator(node_ports, self.picks)
        self.clock = clock
        self._ranges = service_cidr, node_ports
        self._picks: dict[str, set] = {}
        self.columns = [
            Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name"),
            Column("Type", "string", lambda o: _spec(o).get("type", ""), doc("ServiceSpec", "type")),
            Column("Cluster-IP", "string", lambda o: (_spec(o).get("clusterIPs") or ["<none>"])[0],
                   doc("ServiceSpec", "clusterIP")),
            Column("External-IP", "string", external_ip, doc("ServiceSpec", "externalIPs")),
            Column("Port(s)", "string", port_string, doc("ServiceSpec", "ports")),
            Column("Age", "string", AGE, AGE_DOC),
            Column("Selector", "string", lambda o: format_labels(_spec(o).get("selector")),
                   doc("ServiceSpec", "selector"), priority=1),
        ]

    def own(self) -> ServiceStrategy:
        """Allocations are a server's: another server in the process (a test's, an operator's) starts
        with none of them."""
        return ServiceStrategy(*self._ranges, clock=self.clock)

    # allocation ----------------------------------------------------------------

    def _families(self) -> list[str]:
        """The families this cluster allocates from, its primary (the default range's) first."""
        have = [f"IPv{network.version}" for network, _ in self.ips.ranges.values()]
        return sorted(set(have), key=have.index)

    def _allocate(self, obj: dict, old: dict | None = None) -> None:
        spec, owner = _spec(obj), _owner(obj)
        upgrade = _upgrades(spec, old)
        _default_families(spec, self._families(), upgrade or old is None or _spec(old).get("type") == "ExternalName")
        if _allocates_ip(spec, old) or upgrade:
            asked = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
            start = 1 if upgrade else 0  # an upgrade keeps its primary
            given = asked[:start]
            for i, family in enumerate(spec.get("ipFamilies") or []):  # allocClusterIPs: one per family
                if i < start:
                    continue
                ip = asked[i] if i < len(asked) else None
                try:
                    got = self.ips.allocate(owner, ip, int(family[-1]))
                except AllocationError:  # reported by allocation_errors, which sees the IP is not ours
                    given += asked[i:]
                    break
                if self.reservations is not None and not ip:
                    self.pick(owner, got)
                given.append(got)
            if given:
                spec["clusterIP"], spec["clusterIPs"] = given[0], given
        elif spec.get("clusterIP"):  # a list of its own: prepare_for_update may have carried the old one's
            spec["clusterIPs"] = list(spec.get("clusterIPs") or [spec["clusterIP"]])
        old_ports = set(_node_ports(_spec(old))) if old else set()
        dynamic = _allocates_node_ports(spec)
        if spec.get("type") in _NODE_PORT_TYPES:
            for p in spec.get("ports") or []:
                if p.get("nodePort") in old_ports or not (p.get("nodePort") or dynamic):
                    continue
                if (port := self._node_port(owner, p.get("nodePort") or None)) is not None:
                    p["nodePort"] = port
        if needs_health_check(spec) and not (old and health_check_node_port(_spec(old))):
            asked = spec.get("healthCheckNodePort") or None
            if asked is None or self.node_ports.owner(asked) is None:  # one of its own node ports is taken too
                if (port := self._node_port(owner, asked)) is not None:
                    spec["healthCheckNodePort"] = port

    def _node_port(self, owner: str, asked: int | None) -> int | None:
        """`asked`, or a free port (remembered as picked where workers arbitrate), given to `owner`;
        None when it cannot be had (validation reports it)."""
        try:
            port = self.node_ports.allocate(owner, asked)
        except AllocationError:
            return None
        if self.reservations is not None and not asked:
            self.pick(owner, port)
        return port

    def pick(self, owner: str, value) -> None:
        """Remember that `value` was picked for `owner` dynamically, not asked for."""
        if owner not in self._picks and len(self._picks) >= self._PICKS_KEPT:
            del self._picks[next(iter(self._picks))]
        self._picks.setdefault(owner, set()).add(value)

    def picked(self, owner: str, value) -> bool:
        return value in self._picks.get(owner, ())

    def forget_picks(self, owner: str) -> None:
        self._picks.pop(owner, None)

    def allocation_errors(self, obj: dict, old: dict | None = None) -> list[FieldError]:
        """The first value `obj` was given but does not hold, as upstream's allocators stop at it: the
        ClusterIP, then each port. A value to be picked that was not (the range is full) is
        upstream's 500 InternalError, not a field's: raised when it comes first."""
        spec, owner = _spec(obj), _owner(obj)
        errs: list[FieldError] = []
        if _allocates_ip(spec, old) or _upgrades(spec, old):
            ips = spec.get("clusterIPs") or [spec.get("clusterIP")]
            for ip in ips:
                if is_ip(ip) and self.ips.owner(ip) != owner:
                    problem = self.ips.check(owner, ip) or "provided IP is already allocated"
                    return [invalid("spec.clusterIPs", ips, f"failed to allocate IP {ip}: {problem}")]
            if not ips[0] or len(ips) < len(spec.get("ipFamilies") or ()):
                raise errors.internal("failed to allocate a serviceIP: range is full")
        if spec.get("type") not in _NODE_PORT_TYPES:
            return errs
        ospec = _spec(old) if old else {}
        old_ports, old_hc = set(_node_ports(ospec)), health_check_node_port(ospec)
        dynamic = _allocates_node_ports(spec)
        for i, p in enumerate(spec.get("ports") or []):
            np = p.get("nodePort")
            if not np:
                if dynamic and not errs:
                    raise errors.internal("failed to allocate a nodePort: range is full")
                continue
            if np not in old_ports and (self.node_ports.owner(np) != owner or np == old_hc):
                problem = self.node_ports.check(owner, np) or "provided port is already allocated"
                return [invalid(f"spec.ports[{i}].nodePort", np, problem)]
        if errs or not needs_health_check(spec) or old_hc:
            return errs
        hc = spec.get("healthCheckNodePort")
        if not hc:  # upstream's message names the port its failed pick left at 0
            raise errors.internal("failed to allocate a HealthCheck NodePort 0: range is full")
        if hc in _node_ports(spec) or hc in node_ports(ospec) or self.node_ports.owner(hc) != owner:
            problem = self.node_ports.check(owner, hc) or "provided port is already allocated"
            raise errors.internal(f"failed to allocate requested HealthCheck NodePort {hc}: {problem}")
        return errs

    def _release_values(self, owner: str, ips: set[str], ports: set[int]) -> None:
        for ip in ips:
            self.ips.release(ip, owner)
        for port in ports:
            self.node_ports.release(port, owner)

    def release(self, obj: dict) -> None:
        """Free the ClusterIP and node ports held by this (deleted) service."""
        spec, owner = _spec(obj), _owner(obj)
        self.forget_picks(owner)
        self._release_values(owner, set(cluster_ips(spec)), set(node_ports(spec)))

    def restore(self, objs: list[dict], replace: bool = False) -> None:
        """Rebuild allocations from the services already stored. `replace` (a server starting):
        those services are all there is; the strategy outlives a server that stopped in this
        process (tests start many), whose allocations are not in the next one's store."""
        if replace:
            self.ips.clear()
            self.node_ports.clear()
            self._picks.clear()
        for obj in objs:
            spec, owner = _spec(obj), _owner(obj)
            for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]:
                if ip and ip != "None":
                    try:
                        self.ips.allocate(owner, ip)
                    except AllocationError:
                        continue
            for port in node_ports(spec):
                try:
                    self.node_ports.allocate(owner, port)
                except AllocationError:
                    continue

    # hooks ----------------------------------------------------------------------

    def default(self, obj, version):
        default_service(obj)

    def prepare_for_create(self, obj):
        spec = _spec(obj)
        if spec.get("clusterIP") and not spec.get("clusterIPs"):  # normalizeClusterIPs
            spec["clusterIPs"] = [spec["clusterIP"]]
        if not self._ip_field_errors(spec):
            self._allocate(obj)

    def prepare_for_update(self, new, old):
        spec, ospec = _spec(new), _spec(old)
        stype, otype = spec.get("type"), ospec.get("type")
        if stype != "ExternalName" and otype != "ExternalName" and not spec.get("clusterIP"):
            for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if f in ospec:
                    spec[f] = ospec[f]
        elif stype != "ExternalName" and otype != "ExternalName" and not spec.get("clusterIPs") and ospec.get("clusterIPs"):
            spec["clusterIPs"] = ospec["clusterIPs"]  # patchAllocatedValues: a clusterIP sent alone changes the first
        if spec.get("clusterIP") != ospec.get("clusterIP") and spec.get("clusterIPs") == ospec.get("clusterIPs"):
            # normalizeClusterIPs: a client that changed clusterIP alone changed the first of clusterIPs
            if spec.get("clusterIP"):
                spec["clusterIPs"] = [spec["clusterIP"], *(spec.get("clusterIPs") or [])[1:]]
            else:
                spec.pop("clusterIPs", None)
        if stype == "ExternalName" and otype != "ExternalName" and spec.get("clusterIP") == ospec.get("clusterIP"):
            for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                spec.pop(f, None)
        if stype in _NODE_PORT_TYPES:
            old_by_port = {(p.get("port"), p.get("protocol")): p.get("nodePort")
                           for p in ospec.get("ports") or [] if p.get("nodePort")}
            for p in spec.get("ports") or []:
                if not p.get("nodePort") and (p.get("port"), p.get("protocol")) in old_by_port:
                    p["nodePort"] = old_by_port[(p.get("port"), p.get("protocol"))]
        else:
            for p in spec.get("ports") or []:
                if otype in _NODE_PORT_TYPES and p.get("nodePort") in _node_ports(ospec):
                    p.pop("nodePort")
        old_hc = health_check_node_port(ospec)
        if old_hc and needs_health_check(spec):  # upstream's patchAllocatedValues: kept unless asked otherwise
            spec["healthCheckNodePort"] = spec.get("healthCheckNodePort") or old_hc
        elif old_hc and spec.get("healthCheckNodePort") == old_hc:  # dropTypeDependentFields: no longer needed
            spec.pop("healthCheckNodePort")
        _drop_type_dependent_fields(spec, ospec)
        if not self._ip_field_errors(spec, ospec):
            self._allocate(new, old)

    def finish_update(self, new, old, written):
        """The values only the old Service held are freed once the new one is stored, not before (a
        refused, failed or dry-run update leaves it holding them); those only the new one was given,
        once it is not stored."""
        kept, gone = (_spec(new), _spec(old)) if written else (_spec(old), _spec(new))
        self._release_values(_owner(old), set(cluster_ips(gone)) - set(cluster_ips(kept)),
                             set(node_ports(gone)) - set(node_ports(kept)))

    def _ip_field_errors(self, spec: dict, ospec: dict | None = None) -> list[FieldError]:
        """initIPFamilyFields' checks, which upstream's allocator runs before it allocates: the
        ClusterIP fields (ValidateServiceClusterIPsRelatedFields), then the policy and families
        against the families this cluster allocates from."""
        if errs := _cluster_ips_related(spec, tuple((ospec or {}).get("clusterIPs") or ())):
            return errs
        if spec.get("type") == "ExternalName":
            return []
        have = {f"IPv{network.version}" for network, _ in self.ips.ranges.values()}
        ips, families = spec.get("clusterIPs") or [], spec.get("ipFamilies") or []
        headless_any = ips[:1] == ["None"] and not spec.get("selector")
        policy = spec.get("ipFamilyPolicy") or ("RequireDualStack" if headless_any else "SingleStack")
        errs: list[FieldError] = []
        if policy == "SingleStack":
            for n, what in ((len(ips), "cluster IPs"), (len(families), "IP families")):
                if n == 2:
                    errs.append(invalid("spec.ipFamilyPolicy", policy,
                                        f"must be 'RequireDualStack' or 'PreferDualStack' when multiple {what} are specified"))
        for i, ip in enumerate(ips):
            if ip == "None":
                break
            family = f"IPv{sloppy_ip(ip).version}"
            if i >= len(families) and family not in have:
                errs.append(invalid(f"spec.clusterIPs[{i}]", ips, f"{family} is not configured on this cluster"))
        if errs or headless_any:
            return errs
        if policy == "RequireDualStack" and len(have) < 2:
            errs.append(invalid("spec.ipFamilyPolicy", policy, "this cluster is not configured for dual-stack services"))
        errs += [invalid(f"spec.ipFamilies[{i}]", f, "not configured on this cluster")
                 for i, f in enumerate(families) if f not in have]
        return errs

    def begin_create(self, obj):
        """upstream's beginCreate: the IP fields are checked and the values allocated before
        validation runs; the first that fails is the answer (a 422 of that field alone, or the
        range-full 500)."""
        return self._ip_field_errors(_spec(obj)) or self.allocation_errors(obj)

    def begin_update(self, new, old):
        return self._ip_field_errors(_spec(new), _spec(old)) or self.allocation_errors(new, old)

    def warnings_on_create(self, obj):
        return kind_warnings.service_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.service_warnings(new)

    def validate(self, obj):
        return validate_service_spec(_spec(obj), (obj.get("metadata") or {}).get("annotations"))

    def validate_update(self, new, old):
        """ValidateServiceUpdate: the ClusterIPs and IP families that may not change, the class
        (checked again by ValidateService: a class error is listed twice, as upstream lists it),
        the health check port, then ValidateService."""
        spec, ospec = _spec(new), _spec(old)
        errs = _cluster_ips_update(spec, ospec) + _load_balancer_class(spec, ospec)
        old_hc = health_check_node_port(ospec)
        if old_hc and needs_health_check(spec) and spec.get("healthCheckNodePort") != old_hc:
            errs.append(forbidden("spec.healthCheckNodePort", "field is immutable"))
        return errs + validate_service_spec(spec, (new.get("metadata") or {}).get("annotations"), old)

    def validate_status_update(self, new, old):
        """ValidateLoadBalancerStatus: ingress points on a LoadBalancer Service alone
        (AllowServiceLBStatusOnNonLB is gone); each ip a legacy IP (one the old status held stands)
        with its ipMode, which needs the ip; each hostname a DNS name and not an IP."""
        errs: list[FieldError] = []
        lb, old_lb = ((o.get("status") or {}).get("loadBalancer") or {} for o in (new, old))
        ingress = lb.get("ingress") or []
        if ingress and _spec(new).get("type") != "LoadBalancer":
            return [forbidden("status.loadBalancer.ingress", "may only be used when `spec.type` is 'LoadBalancer'")]
        old_ips = tuple(i.get("ip") for i in old_lb.get("ingress") or [] if i.get("ip"))
        for i, ing in enumerate(ingress):
            p = f"status.loadBalancer.ingress[{i}]"
            ip, mode = ing.get("ip"), ing.get("ipMode")
            if ip:
                errs += legacy_ip_errors(ip, f"{p}.ip", old_ips)
            if mode is None:
                if ip:
                    errs.append(required(f"{p}.ipMode", "must be specified when `ip` is set"))
            elif not ip:
                errs.append(forbidden(f"{p}.ipMode", "may not be specified when `ip` is not set"))
            elif mode not in _IP_MODES:
                errs.append(not_supported(f"{p}.ipMode", mode, _IP_MODES))
            if host := ing.get("hostname"):
                errs += [invalid(f"{p}.hostname", host, m) for m in dns1123_subdomain(host)]
                if sloppy_ip(host) is not None:
                    errs.append(invalid(f"{p}.hostname", host, "must be a DNS name, not an IP address"))
        return errs
