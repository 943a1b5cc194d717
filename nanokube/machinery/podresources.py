"""A pod's effective requests and limits, computed once for the scheduler, quota and validation
as upstream's component-helpers resource package does (PodRequests, PodLimits and
AggregateContainerRequests/Limits with their PodResourcesOptions): regular containers and
restartable (sidecar) init containers run together, each other init container runs next to
the sidecars started before it and the larger wins; pod-level resources replace the
containers' cpu, memory and hugepages; pod overhead is added. Each caller counts in its own
numbers (an `Arithmetic`): the scheduler in integers (milli-CPU, bytes), quota and validation
in exact quantities that keep their format as Go's Quantity.Add does. UseStatusResources (a pod
resized in place) is `podresize.resources_spec`, whose result is the spec these functions take."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from .quantity import Quantity, QuantityError, add, parse

V = TypeVar("V")

#: what pod-level requests and limits (spec.resources) set for the whole pod (IsSupportedPodLevelResource)
POD_LEVEL = ("cpu", "memory")
HUGEPAGES = "hugepages-"
SIDECAR = "Always"


@dataclass(frozen=True, slots=True)
class Arithmetic(Generic[V]):
    """How a caller counts: `value(name, quantity)` is one entry of a resource list in its
    numbers (None leaves the entry out), `add` sums two, `more` tells whether the first is larger,
    `zero` whether one is nothing."""

    value: Callable[[str, object], V | None]
    add: Callable[[V, V], V]
    more: Callable[[V, V], bool]
    zero: Callable[[V], bool]


def amounts(rl: Mapping | None, arith: Arithmetic[V]) -> dict[str, V]:
    """A resource list ({"cpu": "100m", ...}) in `arith`'s numbers."""
    out = {}
    value = arith.value
    for name, q in (rl or {}).items():
        v = value(name, q)
        if v is not None:
            out[name] = v
    return out


def _quantity(name: str, q) -> Quantity | None:
    try:
        return parse(str(q))
    except QuantityError:
        return None  # reported by validation


#: exact quantities, each keeping its format (a sum the first non-zero term's, as Go's)
QUANTITIES: Arithmetic[Quantity] = Arithmetic(_quantity, add, lambda a, b: a.value > b.value, lambda q: not q.value)


@functools.lru_cache(maxsize=4096)
def scaled(text: str, milli: bool) -> int:
    """A quantity in thousandths (CPU) or rounded up to an integer: the rounding is exact
    `Fraction` arithmetic, and a cluster's pods and nodes repeat a few strings ("100m", "500Mi")."""
    try:
        parsed = parse(text)
    except QuantityError:
        return 0
    return parsed.milli() if milli else parsed.ceil()


@functools.lru_cache(maxsize=4096)
def _count(name: str, q) -> int | None:
    """A resource list's entry as an integer (`pods` left out): one cached call per entry, as a
    cluster's pods repeat a few (name, quantity) pairs."""
    return None if name == "pods" else scaled(str(q), name == "cpu")


#: how the scheduler's NodeInfo and the kubelet's admission count: milli-CPU, bytes, and the
#: integer value of every other resource (upstream's framework.Resource)
INTEGERS: Arithmetic[int] = Arithmetic(_count, operator.add, operator.gt, operator.not_)


def _sum_into(into: dict, more: dict, plus: Callable) -> None:
    for name, v in more.items():
        into[name] = plus(into[name], v) if name in into else v


def _max_into(into: dict, more: dict, larger: Callable) -> None:
    for name, v in more.items():
        if name not in into or larger(v, into[name]):
            into[name] = v


def _own(c: dict, bag: str, arith: Arithmetic[V], non_missing: Mapping[str, V] | None) -> dict[str, V]:
    """One container's requests or limits, with `non_missing`'s amount for each it leaves out."""
    rl = (c.get("resources") or {}).get(bag)
    own = amounts(rl, arith)
    if non_missing:
        for name, v in non_missing.items():
            if name not in (rl or ()):
                own[name] = v
    return own


def aggregate(spec: dict, bag: str, arith: Arithmetic[V], non_missing: Mapping[str, V] | None = None) -> dict[str, V]:
    """AggregateContainerRequests (bag "requests") or AggregateContainerLimits ("limits"): the
    regular containers and sidecars added up, each other init container with the sidecars started
    before it a floor. `non_missing` is NonMissingContainerRequests: the amount a container that
    names no such resource counts (the scheduler's defaults for cpu and memory)."""
    plus, larger, value = arith.add, arith.more, arith.value
    total: dict[str, V] = {}
    for c in spec.get("containers") or ():
        # the common pod's only loop: summed in place, no list per container
        rl = (c.get("resources") or {}).get(bag)
        if rl:
            for name, q in rl.items():
                v = value(name, q)
                if v is not None:
                    total[name] = plus(total[name], v) if name in total else v
        if non_missing:
            for name, v in non_missing.items():
                if not rl or name not in rl:
                    total[name] = plus(total[name], v) if name in total else v
    inits = spec.get("initContainers")
    if inits:
        sidecars: dict[str, V] = {}
        peak: dict[str, V] = {}
        for c in inits:
            own = _own(c, bag, arith, non_missing)
            if c.get("restartPolicy") == SIDECAR:
                _sum_into(total, own, plus)
                _sum_into(sidecars, own, plus)
                _max_into(peak, sidecars, larger)
            else:
                _sum_into(own, sidecars, plus)
                _max_into(peak, own, larger)
        _max_into(total, peak, larger)
    return total


def _pod_level(total: dict, spec: dict, bag: str, arith: Arithmetic) -> None:
    """Pod-level requests or limits replace the containers' cpu, memory and hugepages."""
    for name, q in ((spec.get("resources") or {}).get(bag) or {}).items():
        if (name in POD_LEVEL or name.startswith(HUGEPAGES)) and (v := arith.value(name, q)) is not None:
            total[name] = v


def pod_requests(spec: dict, arith: Arithmetic[V], non_missing: Mapping[str, V] | None = None) -> dict[str, V]:
    """PodRequests: what the pod asks of a node and of quota (`aggregate`, pod-level requests
    over it, overhead added)."""
    total = aggregate(spec, "requests", arith, non_missing)
    if spec.get("resources"):
        _pod_level(total, spec, "requests", arith)
    if overhead := spec.get("overhead"):
        _sum_into(total, amounts(overhead, arith), arith.add)
    return total


def pod_limits(spec: dict, arith: Arithmetic[V]) -> dict[str, V]:
    """PodLimits: `aggregate` of the limits, pod-level limits over it, and overhead added to each
    limit that is set and not zero (a resource without one stays unlimited)."""
    total = aggregate(spec, "limits", arith)
    if spec.get("resources"):
        _pod_level(total, spec, "limits", arith)
    if overhead := spec.get("overhead"):
        plus, zero = arith.add, arith.zero
        for name, v in amounts(overhead, arith).items():
            if name in total and not zero(total[name]):
                total[name] = plus(total[name], v)
    return total
