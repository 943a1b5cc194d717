"""Topology aware hints (KEP-2433), as upstream's endpointslice topologycache: the hints the
EndpointSlice controller writes for a Service annotated `service.kubernetes.io/topology-mode: Auto`
(or the deprecated `service.kubernetes.io/topology-aware-hints: auto`).

Each zone is given a share of a Service's ready endpoints in proportion to the allocatable CPU of
its ready nodes (control-plane nodes left out): an endpoint is hinted for its own zone, then zones
holding more than their share give endpoints to zones holding less. Hints are written only where
every zone can get its share without an endpoint taking more than 20% over its fair load
(OVERLOAD_THRESHOLD); a safeguard that fails removes them, with a TopologyAwareHintsDisabled
event on the Service that says which. Slices the sync leaves alone keep their hints while those
still fit the shares, so a pod coming or going rewrites only its own slice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from ..machinery.conditions import find_condition
from ..machinery.quantity import QuantityError, parse_quantity

OVERLOAD_THRESHOLD = 0.2
ZONE_LABEL = "topology.kubernetes.io/zone"
TOPOLOGY_MODE_ANNOTATION = "service.kubernetes.io/topology-mode"
TOPOLOGY_HINTS_ANNOTATION = "service.kubernetes.io/topology-aware-hints"
#: nodes with one of these labels (any value) count for no zone's capacity
EXCLUDED_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

ENABLED, DISABLED = "TopologyAwareHintsEnabled", "TopologyAwareHintsDisabled"
# the events' messages, as upstream words them
NO_ZONE_SPECIFIED = "One or more endpoints do not have a zone specified"
HINTS_ENABLED = "Topology Aware Hints has been enabled"
HINTS_DISABLED = "Topology Aware Hints has been disabled"
INSUFFICIENT_NODE_INFO = "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
ONE_ZONE_ONLY = "Nodes only ready in one zone"
TOO_FEW_ENDPOINTS = "Insufficient number of endpoints"
OVER_THRESHOLD = "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold"


@dataclass(frozen=True, slots=True)
class Event:
    """An event for the Service (its message names the address type of the slices it is about)."""

    type: str
    reason: str
    message: str


def disabled(message: str, address_type: str) -> Event:
    return Event("Warning", DISABLED, f"{message}, addressType: {address_type}")


@dataclass(frozen=True, slots=True)
class Allocation:
    """How many of a Service's ready endpoints one zone should be hinted: at least `minimum` (its
    share over 1 + OVERLOAD_THRESHOLD, rounded up), at most `maximum`, ideally `desired`."""

    minimum: int
    maximum: int
    desired: float


def hints_enabled(svc: dict) -> bool:
    """The topology-mode annotation (else the deprecated topology-aware-hints one) is Auto or auto."""
    annotations = svc["metadata"].get("annotations") or {}
    return annotations.get(TOPOLOGY_MODE_ANNOTATION, annotations.get(TOPOLOGY_HINTS_ANNOTATION)) in ("Auto", "auto")


def node_ready(node: dict) -> bool:
    return (find_condition((node.get("status") or {}).get("conditions"), "Ready") or {}).get("status") == "True"


def node_zone(node: dict) -> str:
    return (node["metadata"].get("labels") or {}).get(ZONE_LABEL, "")


def _cpu(quantity: str) -> Fraction:
    try:
        return parse_quantity(quantity or "0")
    except QuantityError:
        return Fraction(0)


def _ready(ep: dict) -> bool:
    return ep["conditions"].get("ready") is True


def _zone_hints(ep: dict) -> list[str]:
    return [z.get("name") for z in (ep.get("hints") or {}).get("forZones") or ()]


class TopologyCache:
    """Each zone's share of the cluster's CPU, and the hints last given each Service, by address type."""

    def __init__(self) -> None:
        #: zone -> share of the allocatable CPU; None once the nodes were found insufficient
        self.ratios: dict[str, float] | None = {}
        #: service key -> address type -> zone -> endpoints hinted for it
        self.by_service: dict[str, dict[str, dict[str, int]]] = {}
        #: the Services whose hints were written (their Enabled event was recorded)
        self.populated: set[str] = set()

    def set_nodes(self, nodes: Iterable[dict]) -> None:
        """SetNodes: the shares of the ready nodes not excluded; none at all where one of those lacks
        a zone or allocatable CPU, or they are all in one zone. The nodes are counted by zone and
        CPU quantity first, so thousands of alike nodes parse and add a few quantities."""
        counts: dict[tuple[str, str], int] = {}
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            if any(k in labels for k in EXCLUDED_LABELS) or not node_ready(node):
                continue
            key = (labels.get(ZONE_LABEL, ""), ((node.get("status") or {}).get("allocatable") or {}).get("cpu") or "")
            counts[key] = counts.get(key, 0) + 1
        cpu_by_zone: dict[str, Fraction] = {}
        for (zone, quantity), n in counts.items():
            cpu = _cpu(quantity)
            if not zone or not cpu:
                cpu_by_zone = {}
                break
            cpu_by_zone[zone] = cpu_by_zone.get(zone, 0) + cpu * n
        milli = {zone: math.ceil(cpu * 1000) for zone, cpu in cpu_by_zone.items()}
        total = math.ceil(sum(cpu_by_zone.values()) * 1000)
        self.ratios = {zone: m / total for zone, m in milli.items()} if total and len(milli) >= 2 else None

    def allocations(self, endpoints: int, address_type: str) -> tuple[dict[str, Allocation] | None, Event | None]:
        """getAllocations for `endpoints` ready endpoints, or the event that says why there are none."""
        if self.ratios is None:
            return None, disabled(INSUFFICIENT_NODE_INFO, address_type)
        zones = len(self.ratios)
        if zones < 2:  # no node seen yet
            return None, disabled(ONE_ZONE_ONLY, address_type)
        if zones > endpoints:
            return None, disabled(f"{TOO_FEW_ENDPOINTS} ({endpoints} endpoints, {zones} zones)", address_type)
        out, min_total = {}, 0
        for zone, ratio in sorted(self.ratios.items()):
            desired = ratio * endpoints
            minimum = math.ceil(desired * (1 / (1 + OVERLOAD_THRESHOLD)))  # (upstream's rounding)
            min_total += minimum
            if min_total > endpoints:
                return None, disabled(f"{OVER_THRESHOLD} ({endpoints} endpoints, {zones} zones)", address_type)
            out[zone] = (minimum, max(desired, minimum))
        return {z: Allocation(m, m + endpoints - min_total, d) for z, (m, d) in out.items()}, None

    def check(self, key: str, address_type: str, endpoints: list[dict]) -> tuple[dict[str, Allocation] | None,
                                                                                   list[Event]]:
        """The allocations for the Service's `endpoints` of one address type, or (hints being
        removed) the event that says which safeguard failed: too few nodes' data or endpoints,
        a share over the threshold, a ready endpoint without a zone."""
        ready = [ep for ep in endpoints if _ready(ep)]
        allocations, event = self.allocations(len(ready), address_type)
        if allocations is not None and any(not ep.get("zone") for ep in ready):
            allocations, event = None, disabled(NO_ZONE_SPECIFIED, address_type)
        if allocations is None:
            self.remove_hints(key, address_type)
            return None, [event]
        return allocations, []

    def add_hints(self, key: str, address_type: str, allocations: dict[str, Allocation],
                  allocatable: list[list[dict]], unchanged: list[dict]) -> tuple[list[dict], list[Event]]:
        """AddHints, its safeguards passed (`check`): the endpoints of the slices being written
        (`allocatable`, changed in place) are hinted for their zones, then moved from zones over
        their share to zones under it. The `unchanged` slices keep their hints where those are all
        for zones with a share and keep each within its maximum; the others are returned, copied,
        to be written too. Also the Enabled event where the Service had no hints."""
        allocated: dict[str, int] = {}
        moved = []
        for sl in unchanged:
            counts = _hints_by_zone(sl, allocated, allocations)
            if counts is None:
                copy = {**sl, "endpoints": [dict(ep) for ep in sl.get("endpoints") or ()]}
                moved.append(copy)
                allocatable.append(copy["endpoints"])
            else:
                for zone, n in counts.items():
                    allocated[zone] = allocated.get(zone, 0) + n
        for eps in allocatable:
            for ep in eps:
                ep.pop("hints", None)
                if _ready(ep):
                    allocated[ep["zone"]] = allocated.get(ep["zone"], 0) + 1
                    ep["hints"] = {"forZones": [{"name": ep["zone"]}]}
        giving, receiving = _giving_and_receiving(allocations, allocated)
        for eps in allocatable:
            for ep in eps:
                if not (giving and receiving):
                    break
                if _ready(ep) and giving.get(ep["zone"], 0) > 0:
                    # upstream's redistributeHints takes whichever receiving zone Go's map order gives
                    # (as getMost breaks ties): the counts are fixed, the pick arbitrary; ours, the first by name
                    to = min(receiving)
                    ep["hints"] = {"forZones": [{"name": to}]}
                    for zones, zone in ((giving, ep["zone"]), (receiving, to)):
                        zones[zone] -= 1
                        if not zones[zone]:
                            del zones[zone]
                    allocated[to] = allocated.get(to, 0) + 1
                    allocated[ep["zone"]] -= 1
        events = [] if key in self.populated else [Event("Normal", ENABLED, f"{HINTS_ENABLED}, addressType: {address_type}")]
        self.by_service.setdefault(key, {})[address_type] = allocated
        self.populated.add(key)
        return moved, events

    def remove_hints(self, key: str, address_type: str) -> None:
        """RemoveHints: forget the Service's hints of one address type (and that it had any)."""
        types = self.by_service.get(key)
        if types is not None:
            types.pop(address_type, None)
            if not types:
                del self.by_service[key]
        self.populated.discard(key)

    def forget(self, key: str) -> None:
        """A deleted Service."""
        self.by_service.pop(key, None)
        self.populated.discard(key)

    def overloaded(self) -> list[str]:
        """GetOverloadedServices: those whose hints give some zone fewer endpoints than its share
        over 1 + OVERLOAD_THRESHOLD (all with hints, where the shares are gone)."""
        return [key for key, types in self.by_service.items()
                if any(_overloaded(counts, self.ratios or {}) for counts in types.values())]


def _hints_by_zone(sl: dict, allocated: dict[str, int], allocations: dict[str, Allocation]) -> dict[str, int] | None:
    """getHintsByZone: the slice's zone hints by zone; None where a ready endpoint has none, one
    names a zone without a share, or they would take a zone past its maximum."""
    counts: dict[str, int] = {}
    for ep in sl.get("endpoints") or ():
        if not _ready(ep):
            continue
        zones = _zone_hints(ep)
        if not zones:
            return None
        for zone in zones:
            if zone not in allocations:
                return None
            counts[zone] = counts.get(zone, 0) + 1
    if any(n + allocated.get(zone, 0) > allocations[zone].maximum for zone, n in counts.items()):
        return None
    return counts


def _giving_and_receiving(allocations: dict[str, Allocation], allocated: dict[str, int]
                          ) -> tuple[dict[str, int], dict[str, int]]:
    """getGivingAndReceivingZones: how many endpoints each zone gives and receives, whole endpoints
    moved from the zone most over its desired share to the one most under it, while both are at
    least half an endpoint off and one of them a whole one."""
    over = {z: allocated.get(z, 0) - a.desired for z, a in allocations.items() if allocated.get(z, 0) > a.desired}
    under = {z: a.desired - allocated.get(z, 0) for z, a in allocations.items() if allocated.get(z, 0) < a.desired}
    giving: dict[str, int] = {}
    receiving: dict[str, int] = {}
    while over and under:
        g = max(sorted(over), key=over.__getitem__)
        r = max(sorted(under), key=under.__getitem__)
        if (over[g] < 1 and under[r] < 1) or over[g] < 0.5 or under[r] < 0.5:
            break
        giving[g] = giving.get(g, 0) + 1
        receiving[r] = receiving.get(r, 0) + 1
        over[g] -= 1
        under[r] -= 1
    return giving, receiving


def _overloaded(counts: dict[str, int], ratios: dict[str, float]) -> bool:
    if not counts:
        return False
    if not ratios:
        return True
    total = sum(counts.values())
    return any(zone not in counts or counts[zone] < math.ceil(total * ratio * (1 / (1 + OVERLOAD_THRESHOLD)))
               for zone, ratio in ratios.items())
