"""upstream's nodeTree (pkg/scheduler/backend/cache/node_tree.go): node names
grouped by zone, in the order each zone and each node was first seen, listed
zone by zone in turn (the i-th node of every zone, then the (i+1)-th), so the
search, which takes a window of that list and rotates its start, meets every
zone early rather than one zone's nodes after another's."""

from __future__ import annotations

from itertools import chain, zip_longest

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"

#: what zip_longest pads exhausted zones with: never a node name
_GAP = object()


def zone_key(labels: dict) -> str:
    """upstream's GetZoneKey: region and zone (the beta labels first, as upstream
    reads them), or "" for a node with neither."""
    zone = labels.get(BETA_ZONE)
    if zone is None:
        zone = labels.get(ZONE, "")
    region = labels.get(BETA_REGION)
    if region is None:
        region = labels.get(REGION, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeTree:
    """Zone key -> the names of its nodes. A node moved to another zone leaves
    its old one and goes last in the new one; a zone left empty is dropped and
    goes last if it comes back. `version` moves whenever `list()` would answer
    differently, so a snapshot knows when its order is stale."""

    def __init__(self) -> None:
        self.zones: dict[str, list[str]] = {}
        self.zone_of: dict[str, str] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self.zone_of)

    def add(self, name: str, zone: str) -> None:
        """Adds a node, or moves it where its zone changed (an update in the same zone changes nothing)."""
        old = self.zone_of.get(name)
        if old == zone:
            return
        if old is not None:
            self._take(name, old)
        self.zones.setdefault(zone, []).append(name)
        self.zone_of[name] = zone
        self.version += 1

    def remove(self, name: str) -> None:
        zone = self.zone_of.pop(name, None)
        if zone is not None:
            self._take(name, zone)
            self.version += 1

    def _take(self, name: str, zone: str) -> None:
        names = self.zones[zone]
        names.remove(name)
        if not names:
            del self.zones[zone]

    def list(self) -> list[str]:
        """Every node name, the zones taken in turn."""
        if len(self.zones) <= 1:
            return [name for names in self.zones.values() for name in names]
        return [name for name in chain.from_iterable(zip_longest(*self.zones.values(), fillvalue=_GAP))
                if name is not _GAP]
