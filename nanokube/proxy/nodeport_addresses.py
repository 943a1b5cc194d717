"""Which of the node's addresses take NodePort traffic: upstream's nodePortAddresses
(`--nodeport-addresses`, pkg/proxy/util/nodeport_addresses.go), whose nftables-mode default is
`primary`.

The setting is a list of CIDRs, or `primary` alone: each family's node IP (node_ips.py) as a /32
or /128, taken when the proxy starts; an unknown (loopback) one gives none. Each family's table
takes the CIDRs of its family. None of its family, or a zero CIDR among them, is every local
address (the `fib daddr type local` rule, no `nodeport-ips` set). Otherwise each full sync
fills `nodeport-ips` with the addresses of the node's interfaces in those CIDRs, as upstream's
GetNodeIPs lists them; a loopback one is logged and left out, localhost NodePorts being
unsupported in nftables mode."""

from __future__ import annotations

import ipaddress
import json
import logging
import subprocess
from collections.abc import Iterable, Sequence

log = logging.getLogger(__name__)

PRIMARY = "primary"


def resolve(addresses: Sequence[str], node_ips: Iterable[str]) -> tuple[str, ...]:
    """The CIDRs the setting stands for: `primary` as the node IPs' host CIDRs (loopback left
    out), anything else as given."""
    if tuple(addresses) != (PRIMARY,):
        return tuple(addresses)
    ips = (ipaddress.ip_address(ip) for ip in node_ips)
    return tuple(f"{ip}/{ip.max_prefixlen}" for ip in ips if not ip.is_loopback)


def of_family(family: str, cidrs: Iterable[str]) -> tuple[str, ...]:
    """NewNodePortAddresses for nftables `family` ("ip" or "ip6"): the CIDRs of that family as
    networks, or () for every local address (none of the family, or 0.0.0.0/0 or ::/0 among them)."""
    nets = [ipaddress.ip_network(c.strip(), strict=False) for c in cidrs]
    mine = [n for n in nets if n.version == (6 if family == "ip6" else 4)]
    if not mine or any(n.prefixlen == 0 for n in mine):
        return ()
    return tuple(str(n) for n in mine)


def config_warning(cidrs: Sequence[str], primary: str, dual_stack: bool) -> str:
    """checkBadConfig's complaint about the resolved CIDRs leaving a family's NodePorts open on every
    local address ("" when they do not); `primary`: "IPv4" or "IPv6", the node's primary family;
    `dual_stack`: whether a setting (cluster CIDRs, these, the Node's podCIDRs) has both families."""
    other = "IPv6" if primary == "IPv4" else "IPv4"
    mine = sum(1 for c in cidrs if (":" in c) == (primary == "IPv6"))
    if not cidrs:
        return ("nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using "
                "`--nodeport-addresses primary`")
    if dual_stack and mine == len(cidrs):
        return (f"cluster appears to be dual-stack but nodePortAddresses contains only {primary} addresses; NodePort "
                f"connections will be accepted on all local {other} IPs")
    if not mine:
        return (f"cluster appears to be {primary}-primary but nodePortAddresses contains only {other} addresses; "
                f"NodePort connections will be accepted on all local {primary} IPs")
    return ""


def local_addresses(netns: str | None) -> list[str]:
    """Every address of every interface in `netns` (None: this process's namespace)."""
    argv = ["ip", "-j", *(["-n", netns] if netns else []), "address", "show"]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return [a["local"] for link in json.loads(out or "[]") for a in link.get("addr_info") or [] if a.get("local")]


def nodeport_ips(netns: str | None, cidrs: Sequence[str]) -> list[str]:
    """The local addresses in `cidrs`, loopback ones left out (logged), for `nodeport-ips`; none
    (logged) when the addresses cannot be listed, as upstream goes on without."""
    nets = [ipaddress.ip_network(c) for c in cidrs]
    try:
        addresses = local_addresses(netns)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        log.error("Failed to get node ip address matching nodeport cidrs, services with nodeport may not work as "
                  "intended: CIDRs %s: %s", list(cidrs), e)
        return []
    out = []
    for text in dict.fromkeys(addresses):
        ip = ipaddress.ip_address(text)
        if not any(ip in n for n in nets):
            continue
        if ip.is_loopback:
            log.error("--nodeport-addresses includes localhost but localhost NodePorts are not supported: address %s",
                      ip)
            continue
        out.append(str(ip))
    return out
