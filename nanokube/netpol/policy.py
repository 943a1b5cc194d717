"""NetworkPolicy semantics, as data: which local pods are isolated in which
direction and what each direction allows.

A pod is isolated for ingress (egress) when a policy of its namespace selects
it and lists that policy type; policies add up (a union of allows); a rule's
peers are ORed, its ports are ORed, and a connection needs a matching peer
and a matching port. A peer with both selectors means pods matching the pod
selector in namespaces matching the namespace selector; ipBlock is a CIDR
minus its exceptions. Named ports resolve against the container ports of
the pod that receives the traffic (the selected pod for ingress, each
destination pod for egress, peers given or not).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from ..machinery.selectors import matches_labels, selector_from_object


@dataclass(frozen=True, slots=True)
class PortMatch:
    protocol: str  # TCP, UDP, SCTP
    first: int | None = None  # None: every port of the protocol
    last: int | None = None


@dataclass(frozen=True, slots=True)
class Peer:
    """Addresses a rule admits: pod IPs, or a CIDR minus exceptions; None is anyone."""

    ips: frozenset[str] | None = None
    cidr: str = ""
    excepts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Allow:
    peer: Peer
    ports: tuple[PortMatch, ...] | None  # None: every port and protocol


@dataclass(slots=True)
class PodRules:
    """What a local pod may receive (ingress) and send (egress); None: not isolated."""

    ip: str
    ingress: list[Allow] | None = None
    egress: list[Allow] | None = None
    policies: list[str] = field(default_factory=list)


def _selects(sel: dict | None, labels: dict | None) -> bool:
    """A LabelSelector as policies use it: `{}` matches everything."""
    reqs = selector_from_object(sel or {})
    return True if not reqs else matches_labels(reqs, labels or {})


def pod_ips(pod: dict) -> list[str]:
    st = pod.get("status") or {}
    ips = [p.get("ip") for p in st.get("podIPs") or [] if p.get("ip")] or ([st["podIP"]] if st.get("podIP") else [])
    return [ip for ip in ips if ":" not in ip]


def _named_ports(pod: dict, name: str, protocol: str) -> list[int]:
    return [p["containerPort"] for c in (pod.get("spec") or {}).get("containers") or []
            for p in c.get("ports") or [] if p.get("name") == name and p.get("protocol", "TCP") == protocol]


def _ports(rule_ports: list[dict] | None, receiver: dict) -> tuple[PortMatch, ...] | None:
    if not rule_ports:
        return None
    out: list[PortMatch] = []
    for p in rule_ports:
        proto = p.get("protocol", "TCP")
        port = p.get("port")
        if port is None:
            out.append(PortMatch(proto))
        elif isinstance(port, int):
            out.append(PortMatch(proto, port, p.get("endPort") or port))
        else:
            out += [PortMatch(proto, n, n) for n in _named_ports(receiver, port, proto)]
    return tuple(out)


class Cluster:
    """The pods and namespaces policies are evaluated against."""

    def __init__(self, pods: list[dict], namespaces: list[dict]) -> None:
        self.pods = [p for p in pods if pod_ips(p) and not (p.get("spec") or {}).get("hostNetwork")]
        self.ns_labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in namespaces}

    def peer_pods(self, peer: dict, policy_ns: str) -> list[dict]:
        ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
        out = []
        for p in self.pods:
            ns = p["metadata"]["namespace"]
            if ns_sel is not None:
                if not _selects(ns_sel, self.ns_labels.get(ns)):
                    continue
            elif ns != policy_ns:
                continue
            if pod_sel is not None and not _selects(pod_sel, p["metadata"].get("labels")):
                continue
            out.append(p)
        return out


def _in_block(ip: str, block: dict) -> bool:
    addr = ipaddress.ip_address(ip)
    return addr in ipaddress.ip_network(block["cidr"]) and not any(
        addr in ipaddress.ip_network(e) for e in block.get("except") or ())


def _ingress_allows(rule: dict, policy_ns: str, cluster: Cluster, selected: dict) -> list[Allow]:
    """Named ports are the selected pod's own."""
    ports = _ports(rule.get("ports"), selected)
    out = []
    for peer in rule.get("from") or [{}]:
        block = peer.get("ipBlock")
        if not peer:
            out.append(Allow(Peer(), ports))
        elif block is not None:
            out.append(Allow(Peer(cidr=block["cidr"], excepts=tuple(block.get("except") or ())), ports))
        else:
            ips = frozenset(ip for p in cluster.peer_pods(peer, policy_ns) for ip in pod_ips(p))
            if ips:
                out.append(Allow(Peer(ips=ips), ports))
    return out


def _egress_allows(rule: dict, policy_ns: str, cluster: Cluster) -> list[Allow]:
    """Named ports are each destination pod's: numbered ports go to the whole
    peer, named ones to the pods in it that name the port."""
    rule_ports = rule.get("ports")
    named = [p for p in rule_ports or () if isinstance(p.get("port"), str)]
    numbered = [p for p in rule_ports or () if not isinstance(p.get("port"), str)]
    out = []
    for peer in rule.get("to") or [{}]:
        block = peer.get("ipBlock")
        if not peer:
            target, pods = Peer(), cluster.pods
        elif block is not None:
            target = Peer(cidr=block["cidr"], excepts=tuple(block.get("except") or ()))
            pods = [p for p in cluster.pods if any(_in_block(ip, block) for ip in pod_ips(p))]
        else:
            pods = cluster.peer_pods(peer, policy_ns)
            target = Peer(ips=frozenset(ip for p in pods for ip in pod_ips(p)))
        if not rule_ports or numbered:
            out.append(Allow(target, _ports(numbered, {}) if rule_ports else None))
        for p in pods if named else ():
            ports = _ports(named, p)
            if ports:
                out.append(Allow(Peer(ips=frozenset(pod_ips(p))), ports))
    return [a for a in out if a.peer.ips is None or a.peer.ips]


def rules_for(pods: list[dict], policies: list[dict], cluster: Cluster) -> dict[str, PodRules]:
    """Pod uid -> its rules, for `pods` (a node's); isolated pods only."""
    out: dict[str, PodRules] = {}
    for pod in pods:
        ips = pod_ips(pod)
        if not ips or (pod.get("spec") or {}).get("hostNetwork"):
            continue
        ns, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels")
        r = PodRules(ips[0])
        for pol in policies:
            if pol["metadata"]["namespace"] != ns:
                continue
            spec = pol.get("spec") or {}
            if not _selects(spec.get("podSelector"), labels):
                continue
            types = spec.get("policyTypes") or ["Ingress"]
            r.policies.append(pol["metadata"]["name"])
            if "Ingress" in types:
                r.ingress = (r.ingress or []) + [a for rule in spec.get("ingress") or []
                                                 for a in _ingress_allows(rule, ns, cluster, pod) if a.ports != ()]
            if "Egress" in types:
                r.egress = (r.egress or []) + [a for rule in spec.get("egress") or []
                                               for a in _egress_allows(rule, ns, cluster)]
        if r.ingress is not None or r.egress is not None:
            out[pod["metadata"]["uid"]] = r
    return out
