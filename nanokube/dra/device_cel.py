"""The `device` variable of DRA's CEL selectors as upstream's
dynamic-resource-allocation/cel declares it, the object type
kubernetes.DRADevice: `driver` (string), `attributes` (domain -> name ->
any), `capacity` (domain -> name -> Quantity) and `allowMultipleAllocations`
(bool). Typed, a selector that reads a field the device has not
(`device.drivr`), compares a field with the wrong type, or does not end in a
bool is refused when the claim or class is written, as kube-apiserver does,
instead of failing each scheduling attempt."""

from __future__ import annotations

from ..cel import Environment
from ..cel.types import BOOL, DYN, QUANTITY, STRING, Type, map_of

DEVICE = Type("object", max_size=4, schema=({"title": "kubernetes.DRADevice"}, False))
FIELDS = {
    "driver": Type("string", max_size=63),
    # unbounded here: the cost bound takes a device's own sizes (scheduler.dra.cel)
    "attributes": map_of(STRING, map_of(STRING, DYN)),
    "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
    "allowMultipleAllocations": BOOL,
}


#: upstream's resourceapi.CELSelectorExpressionMaxCost
MAX_COST = 1_000_000
#: worst-case sizes a selector's compile-time estimate assumes (upstream declares them on the type):
#: attributes and capacities per device, and the longest string attribute
MAX_ENTRIES = 32
MAX_STRING = 64


def sizes(entries: int, longest: int):
    """A cost bound's sizes for a device of at most `entries` entries per map and `longest` characters."""
    def size(t: Type) -> int:
        if t.exact:
            return t.max_size
        if t.name in ("string", "bytes"):
            return min(t.max_size, longest)
        if t.name in ("list", "map"):
            return min(t.max_size, entries)
        return max(entries, longest, 1) if t.name == "dyn" else 1
    return size


def estimated_cost(program) -> int:
    """A compiled selector's worst case on any device (CompilationResult.MaxCost)."""
    return program.cost_bound(sizes(MAX_ENTRIES, MAX_STRING))


def field_type(obj: Type, name: str) -> Type | None:
    return FIELDS.get(name) if obj == DEVICE else None


def environment() -> Environment:
    """An environment whose `device` is a kubernetes.DRADevice."""
    return Environment({"device": DEVICE}, field_type)
