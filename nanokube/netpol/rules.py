"""A node's policy rules as one nftables transaction.

Table `inet nanokube-netpol`, chain `forward` (hook forward): replies of
allowed connections pass (conntrack established/related); a packet from an
egress-isolated local pod (it enters through the pod's node-side veth) jumps
to that pod's egress chain, a packet to an ingress-isolated local pod (it
leaves through that veth) jumps to the pod's ingress chain. A pod chain
`return`s for an allowed packet and drops the rest, so a packet between two
isolated pods of one node is checked on both ends, as two nodes would.
"""

from __future__ import annotations

from .policy import Allow, PodRules

TABLE = "nanokube-netpol"
_PROTO = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}


def _peer(a: Allow, direction: str) -> list[str]:
    """nft matches for the remote end: saddr for ingress, daddr for egress."""
    addr = "saddr" if direction == "ingress" else "daddr"
    if a.peer.ips is not None:
        return [f"ip {addr} {{ {', '.join(sorted(a.peer.ips))} }}"]
    if a.peer.cidr:
        m = [f"ip {addr} {a.peer.cidr}"]
        if a.peer.excepts:
            m.append(f"ip {addr} != {{ {', '.join(a.peer.excepts)} }}")
        return m
    return []


def _port_matches(a: Allow) -> list[list[str]]:
    if a.ports is None:
        return [[]]
    out = []
    for p in a.ports:
        proto = _PROTO[p.protocol]
        if p.first is None:
            out.append([f"meta l4proto {proto}"])
        elif p.first == p.last:
            out.append([f"{proto} dport {p.first}"])
        else:
            out.append([f"{proto} dport {p.first}-{p.last}"])
    return out


def _chain(name: str, allows: list[Allow], direction: str) -> list[str]:
    lines = [f"add chain inet {TABLE} {name}"]
    for a in allows:
        if a.peer.ips is not None and not a.peer.ips:
            continue
        for ports in _port_matches(a):
            lines.append(f"add rule inet {TABLE} {name} {' '.join(_peer(a, direction) + ports + ['return'])}")
    lines.append(f"add rule inet {TABLE} {name} counter drop")
    return lines


def transaction(pods: dict[str, PodRules], veth) -> str:
    """The whole table, replaced atomically; `veth(uid)` names a pod's node-side interface."""
    lines = [f"add table inet {TABLE}", f"delete table inet {TABLE}", f"add table inet {TABLE}",
             f"add chain inet {TABLE} forward {{ type filter hook forward priority filter; policy accept; }}",
             f"add rule inet {TABLE} forward ct state established,related accept"]
    for uid in sorted(pods):
        r, dev = pods[uid], veth(uid)
        short = uid.replace("-", "")[:12]
        if r.egress is not None:
            lines += _chain(f"egress-{short}", r.egress, "egress")
            lines.append(f'add rule inet {TABLE} forward iifname "{dev}" jump egress-{short}')
        if r.ingress is not None:
            lines += _chain(f"ingress-{short}", r.ingress, "ingress")
            lines.append(f'add rule inet {TABLE} forward oifname "{dev}" jump ingress-{short}')
    return "\n".join(lines) + "\n"


def removal() -> str:
    return f"add table inet {TABLE}\ndelete table inet {TABLE}\n"
