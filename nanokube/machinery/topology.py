"""Topology-aware routing, as upstream's pkg/proxy/topology.go: which ready endpoints a
Service's cluster traffic from a node goes to, from the hints the EndpointSlice controller writes
(spec.trafficDistribution, or the topology-mode annotation's proportional hints). kube-proxy's
rules follow it, and so does the simulated pod network (node/simulated_net), so a connection from
a simulated pod reaches the endpoints the node's nftables rules would send it to.

Hints are used only when every ready endpoint carries the kind needed and one of them names
this node (PreferSameNode) or its zone (PreferSameZone, the node's
topology.kubernetes.io/zone label); otherwise all ready endpoints are used, so a slice
written half with hints, or a zone with no endpoint, never black-holes traffic. Local traffic
policies pick this node's endpoints and ignore hints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ZONE_LABEL = "topology.kubernetes.io/zone"
SAME_NODE, SAME_ZONE = "PreferSameNode", "PreferSameZone"


@dataclass(frozen=True, slots=True)
class Hints:
    """An endpoint's hints.forZones and hints.forNodes names."""

    zones: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()


NONE = Hints()


def hints_of(ep: dict) -> Hints:
    """The hints of an EndpointSlice endpoint."""
    h = ep.get("hints")
    if not h:
        return NONE
    return Hints(frozenset(z["name"] for z in h.get("forZones") or [] if z.get("name")),
                 frozenset(n["name"] for n in h.get("forNodes") or [] if n.get("name")))


def topology_mode(ready: Iterable[Hints], node_name: str, zone: str) -> str:
    """topologyModeFromHints over the ready endpoints' hints: PreferSameNode when all have node
    hints and one names this node, else PreferSameZone when all have zone hints and one names
    this node's zone, else "" (no filter)."""
    all_nodes = all_zones = True
    for_node = for_zone = False
    for h in ready:
        if h.nodes:
            for_node |= node_name in h.nodes
        else:
            all_nodes = False
        if h.zones:
            for_zone |= bool(zone) and zone in h.zones
        else:
            all_zones = False
    if all_nodes and for_node:
        return SAME_NODE
    if all_zones and for_zone:
        return SAME_ZONE
    return ""


def available(h: Hints, mode: str, node_name: str, zone: str) -> bool:
    """availableForTopology: whether cluster traffic from this node may use the endpoint."""
    if mode == SAME_NODE:
        return node_name in h.nodes
    if mode == SAME_ZONE:
        return zone in h.zones
    return True
