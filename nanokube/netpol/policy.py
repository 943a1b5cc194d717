"""NetworkPolicy semantics, as data: which local pods are isolated in which
direction and what each direction allows.

A pod is isolated for ingress (egress) when a policy of its namespace selects
it and lists that policy type; policies add up (a union of allows); a rule's
peers are ORed, its ports are ORed, and a connection needs a matching peer
and a matching port. A peer with both selectors means pods matching the pod
selector in namespaces matching the namespace selector; ipBlock is a CIDR
minus its exceptions. Named ports resolve against the container ports of
the pod that receives the traffic (the selected pod for ingress, each peer
pod for egress).
"""

from __future__ import annotations

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


def _allows(rules: list[dict], peers_key: str, policy_ns: str, cluster: Cluster, selected: dict,
            ingress: bool) -> list[Allow]:
    out: list[Allow] = []
    for rule in rules:
        peers = rule.get(peers_key) or []
        if not peers:
            out.append(Allow(Peer(), _ports(rule.get("ports"), selected) if ingress else _ports(rule.get("ports"), {})))
            continue
        for peer in peers:
            block = peer.get("ipBlock")
            if block is not None:
                out.append(Allow(Peer(cidr=block["cidr"], excepts=tuple(block.get("except") or ())),
                                 _ports(rule.get("ports"), selected if ingress else {})))
                continue
            pods = cluster.peer_pods(peer, policy_ns)
            if ingress:
                ips = frozenset(ip for p in pods for ip in pod_ips(p))
                if ips:
                    out.append(Allow(Peer(ips=ips), _ports(rule.get("ports"), selected)))
            else:  # named ports are the destination pod's: one allow per peer pod
                for p in pods:
                    ports = _ports(rule.get("ports"), p)
                    if ports != ():
                        out.append(Allow(Peer(ips=frozenset(pod_ips(p))), ports))
    return [a for a in out if a.ports != ()]


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
                r.ingress = (r.ingress or []) + _allows(spec.get("ingress") or [], "from", ns, cluster, pod, True)
            if "Egress" in types:
                r.egress = (r.egress or []) + _allows(spec.get("egress") or [], "to", ns, cluster, pod, False)
        if r.ingress is not None or r.egress is not None:
            out[pod["metadata"]["uid"]] = r
    return out
