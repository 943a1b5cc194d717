"""The `kube-proxy` nftables table, computed as plain data from compact
typed service structures.

The layout follows upstream's (spec §7.1): base chains, static chains, the
`service-ips` / `service-nodeports` / `no-endpoint-*` verdict maps, the
`cluster-ips` set, per-service chains with `numgen random mod N vmap {...}`
over per-endpoint chains.

A tried alternative, one shared named dispatch map that every service chain
indexes with `numgen ... offset`, is quadratic in the kernel: commit-time
loop validation walks the whole shared map once per referencing chain
(10k x 50k), so the per-service anonymous vmaps stay.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

TABLE = "kube-proxy"
MASQ_BIT = 0x4000


@dataclass(frozen=True, slots=True)
class Endpoint:
    ip: str
    port: int
    ready: bool = True


@dataclass(frozen=True, slots=True)
class ServicePort:
    """One port of one Service, with the endpoints serving it."""

    namespace: str
    name: str
    port_name: str
    protocol: str  # tcp, udp or sctp
    cluster_ip: str
    port: int
    node_port: int = 0
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}/{self.protocol}/{self.port_name}"

    @property
    def ready_endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)


@dataclass(frozen=True, slots=True)
class Config:
    family: str = "ip"  # ip or ip6
    cluster_cidr: str = ""  # pod CIDR; empty means masquerade all ClusterIP traffic
    service_cidrs: tuple[str, ...] = ()


@dataclass
class ServiceRules:
    """What one service port contributes: its chains and its map elements."""

    chains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    elements: dict[str, dict[str, str]] = field(default_factory=dict)


def _hash(s: str) -> str:
    return base64.b32encode(hashlib.sha256(s.encode()).digest()).decode()[:8]


def chain_base(key: str) -> str:
    base = f"{_hash(key)}-{key}"
    return base if len(base) <= 240 else base[:237] + "..."


def endpoint_chain(sp: ServicePort, ep: Endpoint) -> str:
    ip = ep.ip.replace(":", ".")
    name = f"{sp.key}__{ip}/{ep.port}"
    return "endpoint-" + chain_base(name)


def _daddr(cfg: Config) -> str:
    return f"{cfg.family} daddr"


def _dnat_target(cfg: Config, ep: Endpoint) -> str:
    return f"[{ep.ip}]:{ep.port}" if cfg.family == "ip6" else f"{ep.ip}:{ep.port}"


def service_rules(cfg: Config, sp: ServicePort) -> ServiceRules:
    """Chains and elements of one service port."""
    out = ServiceRules()
    ip = cfg.family
    svc_key = f"{sp.cluster_ip} . {sp.protocol} . {sp.port}"
    out.elements["cluster-ips"] = {sp.cluster_ip: ""}
    eps = sp.ready_endpoints
    if not eps:
        out.elements["no-endpoint-services"] = {svc_key: "goto reject-chain"}
        if sp.node_port:
            out.elements["no-endpoint-nodeports"] = {f"{sp.protocol} . {sp.node_port}": "goto reject-chain"}
        return out
    base = chain_base(sp.key)
    svc_chain = "service-" + base
    masq = f"{ip} daddr {sp.cluster_ip} {sp.protocol} dport {sp.port}"
    if cfg.cluster_cidr:
        masq = f"{masq} {ip} saddr != {cfg.cluster_cidr}"
    dispatch = []
    for i, ep in enumerate(eps):
        chain = endpoint_chain(sp, ep)
        out.chains[chain] = (
            f"{ip} saddr {ep.ip} jump mark-for-masquerade",
            f"meta l4proto {sp.protocol} dnat to {_dnat_target(cfg, ep)}",
        )
        dispatch.append(f"{i} : goto {chain}")
    out.chains[svc_chain] = (
        f"{masq} jump mark-for-masquerade",
        f"numgen random mod {len(eps)} vmap {{ {', '.join(dispatch)} }}",
    )
    out.elements["service-ips"] = {svc_key: f"goto {svc_chain}"}
    if sp.node_port:
        ext_chain = "external-" + base
        out.chains[ext_chain] = ("jump mark-for-masquerade", f"goto {svc_chain}")
        out.elements["service-nodeports"] = {f"{sp.protocol} . {sp.node_port}": f"goto {ext_chain}"}
    return out


# (name, type, hook, priority) of the base chains; numeric because nft only
# accepts the `dstnat` keyword on prerouting (dstnat = -100, srcnat = 100).
BASE_CHAINS = (
    ("filter-prerouting", "filter", "prerouting", "-110"),
    ("filter-input", "filter", "input", "-110"),
    ("filter-forward", "filter", "forward", "-110"),
    ("filter-output", "filter", "output", "-110"),
    ("filter-output-post-dnat", "filter", "output", "-90"),
    ("nat-prerouting", "nat", "prerouting", "-100"),
    ("nat-output", "nat", "output", "-100"),
    ("nat-postrouting", "nat", "postrouting", "100"),
)


def maps(cfg: Config) -> dict[str, str]:
    """Set and map declarations, name -> the body between braces."""
    addr = "ipv4_addr" if cfg.family == "ip" else "ipv6_addr"
    return {
        "cluster-ips": f"type {addr} ; comment \"Active ClusterIPs\" ;",
        "service-ips": f"type {addr} . inet_proto . inet_service : verdict ; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ;",
        "service-nodeports": "type inet_proto . inet_service : verdict ; comment \"NodePort traffic\" ;",
        "no-endpoint-services": f"type {addr} . inet_proto . inet_service : verdict ; comment \"vmap to drop or reject packets to services with no endpoints\" ;",
        "no-endpoint-nodeports": "type inet_proto . inet_service : verdict ; comment \"vmap to drop or reject packets to service nodeports with no endpoints\" ;",
        "firewall-ips": f"type {addr} . inet_proto . inet_service : verdict ; comment \"destinations that are subject to LoadBalancerSourceRanges\" ;",
    }


def static_chains(cfg: Config) -> dict[str, tuple[str, ...]]:
    """Rules of the base and static chains, which only full syncs write."""
    ip = cfg.family
    lookup = f"{ip} daddr . meta l4proto . th dport"
    new = "ct state new"
    cluster_check = [f"{ip} daddr @cluster-ips reject"]
    if cfg.service_cidrs:
        cluster_check.append(f"{ip} daddr {{ {', '.join(cfg.service_cidrs)} }} drop")
    loopback = "127.0.0.0/8" if ip == "ip" else "::1"
    return {
        "filter-prerouting": (f"{new} jump firewall-check",),
        "filter-input": (f"{new} jump nodeport-endpoints-check", f"{new} jump service-endpoints-check"),
        "filter-forward": (f"{new} jump service-endpoints-check", f"{new} jump cluster-ips-check"),
        "filter-output": (f"{new} jump service-endpoints-check", f"{new} jump firewall-check"),
        "filter-output-post-dnat": (f"{new} jump cluster-ips-check",),
        "nat-prerouting": ("jump services",),
        "nat-output": ("jump services",),
        "nat-postrouting": ("jump masquerading",),
        "services": (
            f"{lookup} vmap @service-ips",
            f"fib daddr type local {ip} daddr != {loopback} meta l4proto . th dport vmap @service-nodeports",
        ),
        "service-endpoints-check": (f"{lookup} vmap @no-endpoint-services",),
        "nodeport-endpoints-check": (
            f"{ip} daddr != {loopback} meta l4proto . th dport vmap @no-endpoint-nodeports",),
        "firewall-check": (f"{lookup} vmap @firewall-ips",),
        "reject-chain": ("reject",),
        "cluster-ips-check": tuple(cluster_check),
        "mark-for-masquerade": (f"mark set mark or {MASQ_BIT:#x}",),
        "masquerading": (
            f"mark and {MASQ_BIT:#x} == 0 return",
            f"mark set mark xor {MASQ_BIT:#x}",
            "masquerade fully-random",
        ),
    }
