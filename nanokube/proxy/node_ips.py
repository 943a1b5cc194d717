"""The node's IPs as kube-proxy takes them when it starts (upstream's nodemanager and
GetNodeHostIPs): its Node's status.addresses, InternalIPs before ExternalIPs, give the primary
IP (the first) and one of the other family (the first after it of that family); a bindAddress
that is not 0.0.0.0 or :: overrides its family's and makes that family primary. A family still
unknown is loopback (127.0.0.1, ::1), as upstream has it, which stands for "no node IP": it
matches no LoadBalancer source range here and gives no `primary` NodePort address."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

IPV4, IPV6 = "IPv4", "IPv6"
LOOPBACK = {IPV4: "127.0.0.1", IPV6: "::1"}


def _family(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return IPV4 if ip.version == 4 else IPV6


def host_ips(node: dict | None) -> list[str]:
    """GetNodeHostIPs: the Node's first InternalIP (else ExternalIP) and the first address of
    the other family after it; none when it has neither kind (or is None)."""
    addresses = ((node or {}).get("status") or {}).get("addresses") or []
    ips = []
    for kind in ("InternalIP", "ExternalIP"):
        for a in addresses:
            if a.get("type") == kind:
                try:
                    ips.append(ipaddress.ip_address(a.get("address") or ""))
                except ValueError:
                    continue
    if not ips:
        return []
    other = next((ip for ip in ips if ip.version != ips[0].version), None)
    return [str(ips[0])] + ([str(other)] if other else [])


def detect(raw: Sequence[str], bind_address: str) -> tuple[str, dict[str, str]]:
    """detectNodeIPs: the primary family and each family's node IP, from the Node's host IPs
    and the bindAddress override."""
    primary, ips = IPV4, dict(LOOPBACK)
    for i, text in enumerate(raw[:2]):
        family = _family(ipaddress.ip_address(text))
        primary = family if i == 0 else primary
        ips[family] = text
    try:
        bind = ipaddress.ip_address(bind_address)
    except ValueError:
        bind = None
    if bind is not None and not bind.is_unspecified:
        primary = _family(bind)
        ips[primary] = str(bind)
    return primary, ips


def known(ips: dict[str, str]) -> tuple[str, ...]:
    """The node IPs that are not the loopback placeholders (those a proxier is given)."""
    return tuple(ip for ip in ips.values() if not ipaddress.ip_address(ip).is_loopback)
