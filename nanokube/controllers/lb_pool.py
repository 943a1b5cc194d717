"""The service load-balancer controller's address pool (--load-balancer-pool): its default and its
parsing, apart from the controller so that `up`'s and the controller manager's flags name the
default without importing the controller, its client and aiohttp (half of a refused `up`'s CPU)."""

from __future__ import annotations

import ipaddress

#: outside the pod CIDRs (10.0.0.0/8), the service CIDR (10.96.0.0/12) and the
#: process runtime's node bridge (172.18.0.0/16)
DEFAULT_POOL = "172.19.0.0/24"


def parse_pool(cidr: str) -> ipaddress.IPv4Network:
    """The pool as a network; anything but an IPv4 CIDR is a ValueError."""
    try:
        net = ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError as e:
        raise ValueError(f"--load-balancer-pool: {cidr!r} is not a CIDR") from e
    if net.version != 4:
        raise ValueError(f"--load-balancer-pool: {cidr!r} is not an IPv4 CIDR")
    return net
