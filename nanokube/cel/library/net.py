"""Kubernetes' `ip` and `cidr` libraries (1.30+), with their rules: no zones,
no IPv4-mapped IPv6 addresses, Go's address classes."""

from __future__ import annotations

import ipaddress
from typing import Any

from ..errors import CELError
from ..types import BOOL, CIDR, INT, IP, STRING
from .overload import Overload

IP_MARK, CIDR_MARK = "@ip", "@cidr"


def _parse_ip(s: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in s:
        raise CELError(f"IP address {s!r} with zone value is not allowed")
    try:
        a = ipaddress.ip_address(s)
    except ValueError:
        raise CELError(f"IP Address {s!r} parse error during conversion from string: "
                       f"ParseAddr({s!r}): unable to parse IP") from None
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        raise CELError(f"IPv4-mapped IPv6 address {s!r} is not allowed")
    return a


def _parse_cidr(s: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    addr, sep, bits = s.partition("/")
    if not sep or not bits.isdigit():
        raise CELError(f"network address {s!r} parse error during conversion from string: "
                       f"netip.ParsePrefix({s!r}): no '/'")
    _parse_ip(addr)
    try:
        return ipaddress.ip_interface(s)
    except ValueError:
        raise CELError(f"network address {s!r} parse error during conversion from string: "
                       f"netip.ParsePrefix({s!r}): bad bits after slash: {bits!r}") from None


def _ip(x: Any) -> Any:
    return ipaddress.ip_address(x[IP_MARK])


def _cidr(x: Any) -> Any:
    return ipaddress.ip_interface(x[CIDR_MARK])


def ip_value(s: str) -> dict:
    return {IP_MARK: str(_parse_ip(s))}


def cidr_value(s: str) -> dict:
    return {CIDR_MARK: str(_parse_cidr(s))}


def _valid(parse, s: str) -> bool:
    try:
        parse(s)
    except CELError:
        return False
    return True


def _is_global_unicast(a: Any) -> bool:
    if a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local:
        return False
    return not (a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"))


def _is_link_local_multicast(a: Any) -> bool:
    if a.version == 4:
        return a in ipaddress.IPv4Network("224.0.0.0/24")
    return a.is_multicast and (a.packed[1] & 0x0F) == 2


def _contains_ip(c: dict, other: Any) -> bool:
    a = _parse_ip(other) if isinstance(other, str) else _ip(other)
    return a in _cidr(c).network


def _contains_cidr(c: dict, other: Any) -> bool:
    n = (_parse_cidr(other) if isinstance(other, str) else _cidr(other)).network
    outer = _cidr(c).network
    return n.version == outer.version and n.subnet_of(outer)


OVERLOADS = [
    Overload("ip", (STRING,), IP, impl=ip_value),
    Overload("isIP", (STRING,), BOOL, impl=lambda s: _valid(_parse_ip, s)),
    Overload("ip.isCanonical", (STRING,), BOOL, impl=lambda s: str(_parse_ip(s)) == s),
    Overload("family", (IP,), INT, member=True, impl=lambda x: _ip(x).version),
    Overload("isUnspecified", (IP,), BOOL, member=True, impl=lambda x: _ip(x).is_unspecified),
    Overload("isLoopback", (IP,), BOOL, member=True, impl=lambda x: _ip(x).is_loopback),
    Overload("isLinkLocalMulticast", (IP,), BOOL, member=True, impl=lambda x: _is_link_local_multicast(_ip(x))),
    Overload("isLinkLocalUnicast", (IP,), BOOL, member=True,
             impl=lambda x: _ip(x).is_link_local and not _ip(x).is_multicast),
    Overload("isGlobalUnicast", (IP,), BOOL, member=True, impl=lambda x: _is_global_unicast(_ip(x))),
    Overload("string", (IP,), STRING, impl=lambda x: x[IP_MARK]),
    Overload("cidr", (STRING,), CIDR, impl=cidr_value),
    Overload("isCIDR", (STRING,), BOOL, impl=lambda s: _valid(_parse_cidr, s)),
    Overload("containsIP", (CIDR, IP), BOOL, member=True, impl=_contains_ip),
    Overload("containsIP", (CIDR, STRING), BOOL, member=True, impl=_contains_ip),
    Overload("containsCIDR", (CIDR, CIDR), BOOL, member=True, impl=_contains_cidr),
    Overload("containsCIDR", (CIDR, STRING), BOOL, member=True, impl=_contains_cidr),
    Overload("ip", (CIDR,), IP, member=True, impl=lambda c: {IP_MARK: str(_cidr(c).ip)}),
    Overload("masked", (CIDR,), CIDR, member=True, impl=lambda c: {CIDR_MARK: str(_cidr(c).network)}),
    Overload("prefixLength", (CIDR,), INT, member=True, impl=lambda c: _cidr(c).network.prefixlen),
    Overload("string", (CIDR,), STRING, impl=lambda c: c[CIDR_MARK]),
]
