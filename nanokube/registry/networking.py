"""networking.k8s.io/v1: Ingress, IngressClass, NetworkPolicy, and the
ClusterIP allocator's objects ServiceCIDR and IPAddress.

Validation follows pkg/apis/networking/validation with upstream's messages.
NetworkPolicy is enforced by nanokube/netpol (process runtime); ServiceCIDR
and IPAddress record what the API server's ClusterIP allocator holds
(apiserver/ipaddresses.py writes them).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from .apps import age_column, name_column, selector_string
from .base import RESET_DELETION, Column, Obj, Resource, Strategy, register
from .core_spec import PORT_RANGE_MSG, port_name
from ..machinery.gofmt import Struct
from ..machinery.validation import (
    FieldError,
    cidr_errors,
    cidr_family,
    dns1035_label,
    dns1123_subdomain,
    forbidden,
    immutable,
    invalid,
    ip_errors,
    legacy_cidr_errors,
    legacy_ip_errors,
    not_supported,
    path_segment_name,
    required,
    sloppy_ip,
    sloppy_network,
    too_long,
    validate_label_selector,
    wildcard_dns1123_subdomain,
)
from . import kind_warnings

GROUP = "networking.k8s.io"

# --- shared -----------------------------------------------------------------------


def _spec(o: Obj) -> dict:
    return o.get("spec") or {}


def _port_number(v: Any, path: str) -> list[FieldError]:
    if not isinstance(v, int) or not 1 <= v <= 65535:
        return [invalid(path, v, PORT_RANGE_MSG)]
    return []


def _subdomain(value: Any, path: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in dns1123_subdomain(value if isinstance(value, str) else "")]


# --- NetworkPolicy ------------------------------------------------------------------

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_POLICY_TYPES = ("Egress", "Ingress")


def default_network_policy(obj: Obj) -> None:
    """SetDefaults_NetworkPolicy: ports default to TCP; policyTypes always
    hold Ingress, plus Egress when egress rules exist."""
    spec = obj.setdefault("spec", {})
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or []:
            for p in rule.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        types = ["Ingress"]
        if spec.get("egress"):
            types.append("Egress")
        spec["policyTypes"] = types


def _validate_np_port(p: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    proto = p.get("protocol")
    if proto is not None and proto not in _PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", proto, _PROTOCOLS))
    port, end = p.get("port"), p.get("endPort")
    if port is None:
        if end is not None:
            errs.append(required(f"{path}.port", "must be specified when `endPort` is specified"))
        return errs
    if isinstance(port, int):
        errs += _port_number(port, f"{path}.port")
        if end is not None:
            if isinstance(end, int) and end < port:
                errs.append(invalid(f"{path}.endPort", port, "must be greater than or equal to `port`"))
            errs += _port_number(end, f"{path}.endPort")
    else:
        if end is not None:
            errs.append(invalid(f"{path}.endPort", port, "may not be specified when `port` is non-numeric"))
        errs += [invalid(f"{path}.port", port, m) for m in port_name(str(port))]
    return errs


def _validate_ip_block(block: dict, path: str, valid_old: tuple[str, ...]) -> list[FieldError]:
    """ValidateIPBlock: cidr and each except legacy CIDRs (any the old policy held passes, see
    network_policy_cidrs), each except a strict subset of cidr as Go's IPNet.Contains tells it."""
    cidr = block.get("cidr", "")
    if not cidr:
        return [required(f"{path}.cidr", "")]
    errs = legacy_cidr_errors(cidr, f"{path}.cidr", valid_old)
    if (net := sloppy_network(cidr)) is None:
        return errs
    for i, e in enumerate(block.get("except") or []):
        p = f"{path}.except[{i}]"
        errs += legacy_cidr_errors(e, p, valid_old)
        if (sub := sloppy_network(e)) is None:
            continue
        if sub.version != net.version or not sub.subnet_of(net) or sub.prefixlen <= net.prefixlen:
            errs.append(invalid(p, e, "must be a strict subset of `cidr`"))
    return errs


def network_policy_cidrs(spec: dict) -> tuple[str, ...]:
    """Every cidr and except an (old) policy holds: ValidateNetworkPolicyUpdate lets any of them
    stand anywhere in the new one unchecked, since a rule's CIDRs cannot be told new from moved."""
    return tuple(c for direction, peers in (("ingress", "from"), ("egress", "to"))
                 for rule in spec.get(direction) or [] for peer in rule.get(peers) or []
                 if isinstance(block := peer.get("ipBlock"), dict)
                 for c in [block.get("cidr"), *(block.get("except") or [])] if isinstance(c, str))


def _validate_peer(peer: dict, path: str, valid_old: tuple[str, ...]) -> list[FieldError]:
    errs: list[FieldError] = []
    n = 0
    if peer.get("podSelector") is not None:
        n += 1
        errs += validate_label_selector(peer["podSelector"], f"{path}.podSelector")
    if peer.get("namespaceSelector") is not None:
        n += 1
        errs += validate_label_selector(peer["namespaceSelector"], f"{path}.namespaceSelector")
    if peer.get("ipBlock") is not None:
        n += 1
        errs += _validate_ip_block(peer["ipBlock"], f"{path}.ipBlock", valid_old)
    if n == 0:
        errs.append(required(path, "must specify a peer"))
    elif peer.get("ipBlock") is not None and n > 1:
        errs.append(forbidden(path, "may not specify both ipBlock and another peer"))
    return errs


def validate_network_policy_spec(spec: dict, path: str = "spec", valid_old: tuple[str, ...] = ()) -> list[FieldError]:
    errs = validate_label_selector(spec.get("podSelector"), f"{path}.podSelector")
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(spec.get(direction) or []):
            rp = f"{path}.{direction}[{i}]"
            for j, port in enumerate(rule.get("ports") or []):
                errs += _validate_np_port(port, f"{rp}.ports[{j}]")
            for j, peer in enumerate(rule.get(peers) or []):
                errs += _validate_peer(peer, f"{rp}.{peers}[{j}]", valid_old)
    types = spec.get("policyTypes") or []
    for i, t in enumerate(types):
        if t not in _POLICY_TYPES:
            errs.append(not_supported(f"{path}.policyTypes[{i}]", t, _POLICY_TYPES))
    if len(types) > len(_POLICY_TYPES):
        errs.append(invalid(f"{path}.policyTypes", types, "may not specify more than two policyTypes"))
    return errs


class NetworkPolicyStrategy(Strategy):
    columns = [
        name_column(),
        Column("Pod-Selector", "string", lambda o: selector_string(_spec(o).get("podSelector")) or "<none>",
               "Selects the pods to which this NetworkPolicy object applies."),
        age_column(),
    ]

    def default(self, obj, version):
        default_network_policy(obj)

    def warnings_on_create(self, obj):
        return kind_warnings.network_policy_warnings(obj)

    def warnings_on_update(self, new, old):
        return kind_warnings.network_policy_warnings(new)

    def validate(self, obj):
        return validate_network_policy_spec(_spec(obj))

    def validate_update(self, new, old):
        return validate_network_policy_spec(_spec(new), valid_old=network_policy_cidrs(_spec(old)))


# --- Ingress ----------------------------------------------------------------------

_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")


def _validate_backend(b: dict, path: str) -> list[FieldError]:
    svc, res = b.get("service"), b.get("resource")
    if svc is not None and res is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if res is not None:
        return _typed_local_ref(res, f"{path}.resource")
    if svc is None:
        return [invalid(path, "", "resource or service backend is required")]
    errs = []
    name = svc.get("name", "")
    if not name:
        errs.append(required(f"{path}.service.name", ""))
    else:
        errs += [invalid(f"{path}.service.name", name, m) for m in dns1035_label(name)]
    port = svc.get("port") or {}
    pp = f"{path}.service.port"
    # a port number of 0 is no number (the internal type's zero value)
    if port.get("name") and port.get("number"):
        errs.append(invalid(path, "", "cannot set both port name & port number"))
    elif port.get("name"):
        errs += [invalid(f"{pp}.name", port["name"], m) for m in port_name(port["name"])]
    elif port.get("number"):
        errs += _port_number(port["number"], f"{pp}.number")
    else:
        errs.append(required(path, "port name or number is required"))
    return errs


def _typed_local_ref(ref: dict, path: str) -> list[FieldError]:
    """validateIngressTypedLocalObjectReference: a DNS subdomain apiGroup, a kind and a name that
    are path segments."""
    errs: list[FieldError] = []
    if ref.get("apiGroup") is not None:
        errs += [invalid(f"{path}.apiGroup", ref["apiGroup"], m) for m in dns1123_subdomain(ref["apiGroup"])]
    for f in ("kind", "name"):
        if not ref.get(f):
            errs.append(required(f"{path}.{f}", f"{f} is required"))
        else:
            errs += [invalid(f"{path}.{f}", ref[f], m) for m in path_segment_name(ref[f])]
    return errs


def _host_names(host: str, path: str) -> list[FieldError]:
    """A host with a '*' anywhere is judged as a wildcard subdomain, any other as a subdomain."""
    check = wildcard_dns1123_subdomain if "*" in host else dns1123_subdomain
    return [invalid(path, host, m) for m in check(host)]


def _validate_http_path(p: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    value = p.get("path", "")
    ptype = p.get("pathType")
    if ptype is None:
        return [required(f"{path}.pathType", "pathType must be specified")]
    if ptype not in _PATH_TYPES:
        errs.append(not_supported(f"{path}.pathType", ptype, _PATH_TYPES))
    elif ptype in ("Exact", "Prefix"):
        if not value.startswith("/"):
            errs.append(invalid(f"{path}.path", value, "must be an absolute path"))
        if value:
            for seq in _INVALID_PATH_SEQUENCES:
                if seq in value:
                    errs.append(invalid(f"{path}.path", value, f"must not contain '{seq}'"))
            for suffix in _INVALID_PATH_SUFFIXES:
                if value.endswith(suffix):
                    errs.append(invalid(f"{path}.path", value, f"cannot end with '{suffix}'"))
    elif value and not value.startswith("/"):
        errs.append(invalid(f"{path}.path", value, "must be an absolute path"))
    return errs + _validate_backend(p.get("backend") or {}, f"{path}.backend")


def validate_ingress_spec(spec: dict, path: str = "spec") -> list[FieldError]:
    errs: list[FieldError] = []
    rules = spec.get("rules") or []
    if not rules and spec.get("defaultBackend") is None:
        errs.append(invalid(path, spec.get("rules"), "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        errs += _validate_backend(spec["defaultBackend"], f"{path}.defaultBackend")
    for i, rule in enumerate(rules):
        rp = f"{path}.rules[{i}]"
        if host := rule.get("host"):
            if sloppy_ip(host) is not None:  # ParseIPSloppy; the names are judged all the same
                errs.append(invalid(f"{rp}.host", host, "must be a DNS name, not an IP address"))
            errs += _host_names(host, f"{rp}.host")
        http = rule.get("http")
        if http is not None:
            paths = http.get("paths") or []
            if not paths:
                errs.append(required(f"{rp}.http.paths", ""))
            for j, p in enumerate(paths):
                errs += _validate_http_path(p, f"{rp}.http.paths[{j}]")
    for i, tls in enumerate(spec.get("tls") or []):
        for j, host in enumerate(tls.get("hosts") or []):
            errs += _host_names(host, f"{path}.tls[{i}].hosts[{j}]")
        if tls.get("secretName"):
            errs += _subdomain(tls["secretName"], f"{path}.tls[{i}].secretName")
    if spec.get("ingressClassName") is not None:
        errs += _subdomain(spec["ingressClassName"], f"{path}.ingressClassName")
    return errs


def _validate_lb_ingress(status: dict, old_status: dict, path: str) -> list[FieldError]:
    """ValidateIngressLoadBalancerStatus: each ip a legacy IP (any the old status held passes), each
    hostname a DNS name."""
    errs: list[FieldError] = []
    old_ips = tuple(i.get("ip") for i in (old_status.get("loadBalancer") or {}).get("ingress") or [] if i.get("ip"))
    for i, ing in enumerate((status.get("loadBalancer") or {}).get("ingress") or []):
        p = f"{path}.loadBalancer.ingress[{i}]"
        if ing.get("ip"):
            errs += legacy_ip_errors(ing["ip"], f"{p}.ip", old_ips)
        if ing.get("hostname"):
            errs += _subdomain(ing["hostname"], f"{p}.hostname")
            if sloppy_ip(ing["hostname"]) is not None:
                errs.append(invalid(f"{p}.hostname", ing["hostname"], "must be a DNS name, not an IP address"))
    return errs


def _ingress_hosts(o: Obj) -> str:
    """formatHosts: the first three rules' hosts (a hostless rule adds none), '*' when there are
    none, and once three are listed any rule after them counts as 'more'."""
    rules = _spec(o).get("rules") or []
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
            break
        if rule.get("host"):
            hosts.append(rule["host"])
    if not hosts:
        return "*"
    return ",".join(hosts) + (f" + {len(rules) - 3} more..." if more else "")


def _lb_addresses(o: Obj) -> str:
    ing = ((o.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return ",".join(i.get("ip") or i.get("hostname") or "" for i in ing)


class IngressStrategy(Strategy):
    columns = [
        name_column(),
        Column("Class", "string", lambda o: _spec(o).get("ingressClassName") or "<none>",
               "The name of the IngressClass resource that should be used for ingress."),
        Column("Hosts", "string", _ingress_hosts, "Hosts that incoming requests are matched against before the ingress rule"),
        Column("Address", "string", _lb_addresses, "Address is a list containing ingress points for the load-balancer"),
        Column("Ports", "string", lambda o: "80, 443" if _spec(o).get("tls") else "80",
               "Ports of TLS configurations that open"),
        age_column(),
    ]

    def warnings_on_create(self, obj):
        return kind_warnings.ingress_warnings(obj)

    def validate(self, obj):
        return validate_ingress_spec(_spec(obj))

    def validate_status_update(self, new, old):
        return _validate_lb_ingress(new.get("status") or {}, old.get("status") or {}, "status")


class IngressClassStrategy(Strategy):
    columns = [
        name_column(),
        Column("Controller", "string", lambda o: _spec(o).get("controller", ""),
               "Controller that is responsible for handling this class"),
        Column("Parameters", "string", lambda o: _parameters(_spec(o).get("parameters")),
               "A reference to a resource with additional parameters"),
        age_column(),
    ]

    def validate(self, obj):
        spec = _spec(obj)
        errs: list[FieldError] = []
        controller = spec.get("controller", "")
        if not controller:
            errs.append(required("spec.controller", ""))
        elif len(controller) > 250:
            errs.append(too_long("spec.controller", 250))
        else:
            domain = controller.split("/", 1)[0]
            if "/" not in controller or dns1123_subdomain(domain):
                errs.append(invalid("spec.controller", controller, "must be a domain-prefixed path (such as \"acme.io/foo\")"))
        params = spec.get("parameters")
        if params is not None:
            pp = "spec.parameters"
            errs += _typed_local_ref(params, pp)
            scope = params.get("scope")
            if scope is not None and scope not in ("Cluster", "Namespace"):
                errs.append(not_supported(f"{pp}.scope", scope, ("Cluster", "Namespace")))
            if scope == "Namespace" and not params.get("namespace"):
                errs.append(required(f"{pp}.namespace", "`parameters.scope` is set to 'Namespace'"))
            if scope == "Cluster" and params.get("namespace"):
                errs.append(forbidden(f"{pp}.namespace", "`parameters.scope` is set to 'Cluster'"))
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if _spec(new).get("controller") != _spec(old).get("controller"):
            errs.append(immutable("spec.controller", _spec(new).get("controller")))
        return errs

    def default(self, obj, version):
        params = _spec(obj).get("parameters")
        if params is not None:
            params.setdefault("scope", "Cluster")


def _parameters(p: dict | None) -> str:
    if not p:
        return "<none>"
    gk = f"{p.get('kind', '')}.{p['apiGroup']}" if p.get("apiGroup") else p.get("kind", "")
    return f"{gk}/{p.get('name', '')}"


# --- ServiceCIDR and IPAddress ---------------------------------------------------------


class ServiceCIDRStrategy(Strategy):
    track_generation = False  # serviceCIDRStrategy neither sets nor bumps it
    status_metadata = ()  # ResetObjectMetaForStatus, which its reset fields do not name
    status_deletion_kept = RESET_DELETION
    status_owns_dropped_metadata = True
    columns = [
        name_column(),
        Column("CIDRs", "string", lambda o: ",".join(_spec(o).get("cidrs") or []),
               "CIDRs defines the IP blocks in CIDR notation for the Service ClusterIPs."),
        age_column(),
    ]

    def validate(self, obj):
        """validateServiceCIDRSpec: one or two CIDRs (a third is reported with the internal spec),
        each strictly valid (IsValidCIDR), of two families."""
        cidrs = _spec(obj).get("cidrs") or []
        if not cidrs:
            return [required("spec.cidrs", "at least one CIDR required")]
        if len(cidrs) > 2:
            return [invalid("spec.cidrs", Struct(CIDRs=cidrs), "may only hold up to 2 values")]
        errs: list[FieldError] = []
        for i, c in enumerate(cidrs):
            errs += cidr_errors(c, f"spec.cidrs[{i}]")
        families = [cidr_family(c) for c in cidrs]
        if len(cidrs) == 2 and families[0] == families[1] is not None:
            errs.append(invalid("spec.cidrs", cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
        return errs

    def validate_update(self, new, old):
        """ValidateServiceCIDR, then ValidateServiceCIDRUpdate: each CIDR immutable; single stack may
        become dual stack by appending the other family (validated again)."""
        errs = self.validate(new)
        ncidrs, ocidrs = _spec(new).get("cidrs") or [], _spec(old).get("cidrs") or []
        if len(ncidrs) == len(ocidrs):
            errs += [immutable(f"spec.cidrs[{i}]", c) for i, (c, o) in enumerate(zip(ncidrs, ocidrs)) if c != o]
        elif len(ocidrs) == 1 and len(ncidrs) == 2:
            if ncidrs[0] != ocidrs[0]:
                errs.append(immutable("spec.cidrs[0]", ncidrs[0]))
            errs += self.validate(new)
        else:
            errs.append(immutable("spec.cidrs", ncidrs))
        return errs

    def validate_status_update(self, new, old):
        # upstream checks only the spec here: the default ServiceCIDR's Ready condition carries no reason
        errs: list[FieldError] = []
        for i, c in enumerate((new.get("status") or {}).get("conditions") or []):
            if c.get("status") not in ("True", "False", "Unknown"):
                errs.append(not_supported(f"status.conditions[{i}].status", c.get("status", ""), ("False", "True", "Unknown")))
        return errs


def _ip_name(name: str) -> list[str]:
    """An IPAddress is named by its address in canonical form (ValidateIPAddressName: IsValidIP)."""
    if errs := ip_errors(name, ""):
        return [e.detail for e in errs]
    ip = ipaddress.ip_address(name)
    if ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_multicast:
        return ["may not be an unspecified, loopback, link-local or multicast address"]
    return []


def _parent_ref(o: Obj) -> str:
    ref = _spec(o).get("parentRef")
    if not ref:
        return "<none>"
    gr = f"{ref.get('resource', '')}.{ref['group']}" if ref.get("group") else ref.get("resource", "")
    text = gr.lower()
    if ref.get("namespace"):
        text += "/" + ref["namespace"]
    return f"{text}/{ref.get('name', '')}"


class IPAddressStrategy(Strategy):
    name_validator = staticmethod(_ip_name)
    track_generation = False
    columns = [
        name_column(),
        Column("ParentRef", "string", _parent_ref, "ParentRef references the resource that an IPAddress is attached to."),
    ]

    def validate(self, obj):
        ref = _spec(obj).get("parentRef")
        if ref is None:
            return [required("spec.parentRef", "")]
        errs: list[FieldError] = []
        p = "spec.parentRef"
        if ref.get("group"):
            errs += _subdomain(ref["group"], f"{p}.group")
        if not ref.get("resource"):
            errs.append(required(f"{p}.resource", ""))
        elif ref["resource"] != ref["resource"].lower() or "/" in ref["resource"]:
            errs.append(invalid(f"{p}.resource", ref["resource"], "must be a lowercase resource name"))
        if not ref.get("name"):
            errs.append(required(f"{p}.name", ""))
        if ref.get("namespace"):
            errs += _subdomain(ref["namespace"], f"{p}.namespace")
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if _spec(new).get("parentRef") != _spec(old).get("parentRef"):
            errs.append(immutable("spec.parentRef", _spec(new).get("parentRef")))
        return errs


register(
    Resource(GROUP, "ingresses", "Ingress", ["v1"], namespaced=True, short_names=("ing",),
             subresources=("status",), strategy=IngressStrategy()),
    Resource(GROUP, "ingressclasses", "IngressClass", ["v1"], namespaced=False, strategy=IngressClassStrategy()),
    Resource(GROUP, "networkpolicies", "NetworkPolicy", ["v1"], namespaced=True, short_names=("netpol",),
             strategy=NetworkPolicyStrategy()),
    Resource(GROUP, "servicecidrs", "ServiceCIDR", ["v1"], namespaced=False, subresources=("status",),
             strategy=ServiceCIDRStrategy()),
    Resource(GROUP, "ipaddresses", "IPAddress", ["v1"], namespaced=False, short_names=("ip",),
             strategy=IPAddressStrategy()),
)
