"""kube-proxy's local traffic detector (--detect-local-mode): how the proxier
tells this cluster's pods' traffic from the rest. ClusterIP traffic it does
not place is masqueraded; pods it places reach an `externalTrafficPolicy:
Local` destination through any endpoint.

The modes are upstream's: ClusterCIDR (the default; --cluster-cidr, one CIDR
or a dual-stack pair, each family's first for its table; none is the no-op
detector), NodeCIDR (the Node's spec.podCIDRs, which the proxy waits for),
BridgeInterface (--pod-bridge-interface) and InterfaceNamePrefix
(--pod-interface-name-prefix), both matched by input interface name in both
families. Validation is upstream's, errors under its KubeProxyConfiguration
field paths.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..machinery.validation import FieldError, invalid, not_supported
from .nftables.layout import Config

CLUSTER_CIDR, NODE_CIDR, BRIDGE, PREFIX = "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"
MODES = (CLUSTER_CIDR, NODE_CIDR, BRIDGE, PREFIX)
_PATH = "KubeProxyConfiguration"
_CIDR_EXAMPLE = "must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)"
_PAIR = "must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]"


@dataclass(frozen=True)
class DetectLocal:
    mode: str = CLUSTER_CIDR  # upstream defaults an unset mode to ClusterCIDR
    cluster_cidrs: tuple[str, ...] = ()
    bridge_interface: str = ""
    interface_name_prefix: str = ""

    def validate(self) -> list[FieldError]:
        """validateDetectLocalMode, then validateDetectLocalConfiguration for the mode."""
        if self.mode not in MODES:
            return [not_supported(f"{_PATH}.DetectLocalMode", self.mode, (*MODES, ""))]
        if self.mode == BRIDGE and not self.bridge_interface:
            return [invalid(f"{_PATH}.DetectLocal.InterfaceName", "", "must not be empty")]
        if self.mode == PREFIX and not self.interface_name_prefix:
            return [invalid(f"{_PATH}.DetectLocal.InterfacePrefix", "", "must not be empty")]
        if self.mode == CLUSTER_CIDR and self.cluster_cidrs:
            return _dual_stack_cidrs(list(self.cluster_cidrs), f"{_PATH}.DetectLocal.ClusterCIDRs")
        return []

    def configs(self, base: Sequence[Config], pod_cidrs: Sequence[str] = (), masquerade_all: bool = False) -> tuple[Config, ...]:
        """`base` (one Config per table) with this detector and --masquerade-all; `pod_cidrs`: the
        Node's, for NodeCIDR. A CIDR mode gives each family its first CIDR of that family, none
        leaving the family without a detector, as upstream's MapCIDRsByIPFamily."""
        cidrs = self.cluster_cidrs if self.mode == CLUSTER_CIDR else pod_cidrs if self.mode == NODE_CIDR else ()
        iface = self.bridge_interface if self.mode == BRIDGE else \
            self.interface_name_prefix + "*" if self.mode == PREFIX else ""
        return tuple(replace(c, cluster_cidr=_first_of_family(cidrs, c.family), local_interface=iface,
                             masquerade_all=masquerade_all) for c in base)


def _first_of_family(cidrs: Sequence[str], family: str) -> str:
    for c in cidrs:
        net = ipaddress.ip_network(c, strict=False)
        if (net.version == 6) == (family == "ip6"):
            return str(net)
    return ""


def _dual_stack_cidrs(cidrs: list[str], path: str) -> list[FieldError]:
    """validateDualStackCIDRStrings: one CIDR or a pair of one of each family."""
    if len(cidrs) > 2:
        return [invalid(path, cidrs, _PAIR)]
    errs, nets = [], []
    for i, c in enumerate(cidrs):
        try:
            nets.append(ipaddress.ip_network(c, strict=False) if "/" in c else None)
        except ValueError:
            nets.append(None)
        if nets[-1] is None:
            errs.append(invalid(f"{path}[{i}]", c, _CIDR_EXAMPLE))
    if len(cidrs) == 2 and None not in nets and nets[0].version == nets[1].version:
        errs.append(invalid(path, cidrs, _PAIR))
    return errs
