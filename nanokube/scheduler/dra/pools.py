"""Resource pools built from ResourceSlices (and DeviceTaintRules) once per
change: the latest generation per (driver, pool), completeness and validity,
and each device as a compact typed record with its CEL input ready."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import orjson

from ...machinery.quantity import QuantityError, parse_quantity
from ...machinery.scheduling import selector_matches
from .cel import DeviceInput, quantity_value, semver_value

DeviceID = tuple[str, str, str]  # driver, pool, device


def _typed(attr: dict) -> tuple[str, object] | None:
    """(type, value) of a DeviceAttribute, so matchAttribute compares types."""
    for kind in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions"):
        if kind in attr and attr[kind] is not None:
            v = attr[kind]
            return kind, tuple(v) if isinstance(v, list) else v
    return None


def _cel_value(kind: str, v: object) -> object:
    if kind == "version":
        return semver_value(v)
    if kind == "versions":
        return [semver_value(x) for x in v]
    return list(v) if isinstance(v, tuple) else v


def exact(q: Fraction) -> int | Fraction:
    """An integral quantity as an int, others as they are: the allocator adds and compares the
    capacity of every shared device of each node it counts, and the counters every search takes
    for the devices other claims hold on the node; an int's arithmetic and hash are C-level where
    a Fraction's are Python (several µs a device)."""
    return q.numerator if q.denominator == 1 else q


def _qualify(driver: str, name: str) -> tuple[str, str]:
    domain, _, ident = name.rpartition("/")
    return (domain or driver), ident


@dataclass(slots=True, eq=False)
class Device:
    """One device of a pool at its latest generation."""

    id: DeviceID
    attributes: dict[str, tuple[str, object]]  # fully qualified name -> (type, value)
    capacity: dict[str, int | Fraction]  # fully qualified name -> value (`exact`)
    capacity_text: dict[str, str]  # fully qualified name -> value as the slice wrote it
    policies: dict[str, dict]  # fully qualified name -> requestPolicy
    consumes: list[tuple[str, dict[str, int | Fraction]]]  # (counterSet, counters), `exact`
    taints: list[dict]
    allow_multiple: bool
    node_name: str | None  # node-local device
    node_selector: dict | None
    all_nodes: bool
    binds_to_node: bool  # the allocation is pinned to the node it was made for
    slice_selector: dict | None  # nodeSelector of the slice, for allocation.nodeSelector
    extra: dict  # result fields copied as-is (bindingConditions, ...)
    cel: DeviceInput
    #: what decides the capacity an allocation takes of it: devices alike share the allocator's answer
    capacity_key: tuple
    selected: dict[str, bool | str] = field(default_factory=dict)  # per expression: the match or the error message

    def on_node(self, node_name: str, labels: dict) -> bool:
        if self.node_name is not None:
            return self.node_name == node_name
        if self.node_selector is not None:
            return selector_matches(self.node_selector, labels, node_name)
        return self.all_nodes


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    generation: int
    devices: list[Device]
    counters: dict[str, dict[str, int | Fraction]]  # counterSet -> counter -> value (`exact`)
    incomplete: bool = False
    invalid: str = ""  # why, when the pool cannot be used
    #: node selection of each latest slice that is not per-device
    scopes: list[tuple[str | None, dict | None, bool]] = field(default_factory=list)

    def targets(self, node_name: str, labels: dict) -> bool:
        """Whether some slice of the pool is meant for `node_name`."""
        for name, selector, all_nodes in self.scopes:
            if name is not None and name == node_name or all_nodes:
                return True
            if selector is not None and selector_matches(selector, labels, node_name):
                return True
        return False


def _rule_matches(rule: dict, d: DeviceID) -> bool:
    sel = (rule.get("spec") or {}).get("deviceSelector")
    if sel is None:
        return False
    return all(not sel.get(k) or sel[k] == v for k, v in zip(("driver", "pool", "device"), d))


def _device(driver: str, pool: str, spec: dict, dev: dict, rules: list[dict]) -> Device:
    did = (driver, pool, dev["name"])
    attrs: dict[str, tuple[str, object]] = {}
    cel_attrs: dict[str, dict] = {}
    for key, a in (dev.get("attributes") or {}).items():
        typed = _typed(a or {})
        if typed is None:
            continue
        domain, ident = _qualify(driver, key)
        attrs[f"{domain}/{ident}"] = typed
        cel_attrs.setdefault(domain, {})[ident] = _cel_value(*typed)
    cap: dict[str, Fraction] = {}
    cap_text: dict[str, str] = {}
    policies: dict[str, dict] = {}
    cel_cap: dict[str, dict] = {}
    for key, c in (dev.get("capacity") or {}).items():
        domain, ident = _qualify(driver, key)
        cap_text[f"{domain}/{ident}"] = text = str((c or {}).get("value", "0"))
        value = parse_quantity(text)
        cap[f"{domain}/{ident}"] = exact(value)
        if (c or {}).get("requestPolicy"):
            policies[f"{domain}/{ident}"] = c["requestPolicy"]
        cel_cap.setdefault(domain, {})[ident] = quantity_value(value)
    consumes = [
        (cc.get("counterSet", ""), {k: exact(parse_quantity(str(v.get("value", "0"))))
                                    for k, v in (cc.get("counters") or {}).items()})
        for cc in dev.get("consumesCounters") or []
    ]
    taints = list(dev.get("taints") or []) + [r["spec"]["taint"] for r in rules if _rule_matches(r, did)]
    per_device = spec.get("perDeviceNodeSelection")
    src = dev if per_device else spec
    multi = bool(dev.get("allowMultipleAllocations"))
    extra = {k: dev[k] for k in ("bindingConditions", "bindingFailureConditions") if dev.get(k)}
    return Device(
        id=did, attributes=attrs, capacity=cap, capacity_text=cap_text, policies=policies, consumes=consumes, taints=taints,
        allow_multiple=multi, node_name=src.get("nodeName") or None, node_selector=src.get("nodeSelector"),
        all_nodes=bool(src.get("allNodes")), binds_to_node=bool(dev.get("bindsToNode")), slice_selector=src.get("nodeSelector"), extra=extra,
        cel=DeviceInput(driver, cel_attrs, cel_cap, multi),
        capacity_key=(driver, tuple(sorted(cap.items())), orjson.dumps(policies, option=orjson.OPT_SORT_KEYS)),
    )


def _pool(driver: str, name: str, slices: list[dict], rules: list[dict]) -> Pool:
    gen = max(int((s["spec"].get("pool") or {}).get("generation") or 0) for s in slices)
    latest = [s for s in slices if int((s["spec"].get("pool") or {}).get("generation") or 0) == gen]
    want = int((latest[0]["spec"].get("pool") or {}).get("resourceSliceCount") or 1)
    pool = Pool(driver, name, gen, [], {}, incomplete=len(latest) < want)
    seen: set[str] = set()
    for s in latest:
        spec = s["spec"]
        if not spec.get("perDeviceNodeSelection"):
            pool.scopes.append((spec.get("nodeName") or None, spec.get("nodeSelector"), bool(spec.get("allNodes"))))
        for cs in spec.get("sharedCounters") or []:
            if cs.get("name") in pool.counters:
                pool.invalid = f"duplicate counter set name {cs.get('name')}"
            pool.counters[cs.get("name", "")] = {
                k: exact(parse_quantity(str(v.get("value", "0")))) for k, v in (cs.get("counters") or {}).items()}
        for dev in spec.get("devices") or []:
            if dev.get("name") in seen:
                pool.invalid = f"duplicate device name {dev.get('name')}"
            seen.add(dev.get("name"))
            try:
                pool.devices.append(_device(driver, name, spec, dev, rules))
            except QuantityError as e:
                pool.invalid = f"device {dev.get('name')}: {e}"
    for d in pool.devices:
        for cs, counters in d.consumes:
            if cs not in pool.counters or not counters.keys() <= pool.counters[cs].keys():
                pool.invalid = f"device {d.id[2]} consumes unknown counters of set {cs}"
    return pool


class PoolIndex:
    """All pools of the cluster, rebuilt when slices or taint rules change;
    `for_node` caches the per-node view until then."""

    def __init__(self, slices: list[dict], taint_rules: list[dict] = ()) -> None:
        by_pool: dict[tuple[str, str], list[dict]] = {}
        for s in slices:
            spec = s.get("spec") or {}
            by_pool.setdefault((spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")), []).append(s)
        rules = list(taint_rules)
        self.pools = [_pool(d, p, ss, rules) for (d, p), ss in sorted(by_pool.items())]
        #: pools whose slices and devices all name their node: node name -> positions of its pools;
        #: every other pool is matched against each node
        self._named: dict[str, list[int]] = {}
        self._matched: list[int] = []
        for i, p in enumerate(self.pools):
            names = {d.node_name for d in p.devices} | {
                name if selector is None and not all_nodes else None for name, selector, all_nodes in p.scopes}
            if None in names:
                self._matched.append(i)
            else:
                for name in names:
                    self._named.setdefault(name, []).append(i)
        self._by_node: dict[str, list[tuple[Pool, list[Device]]]] = {}
        #: the allocator's candidate devices per (request shape, node, driver, pool), valid as long as the index
        self.selected: dict[tuple, list] = {}
        #: the allocator's per-pool free candidates of a simple request per (request shape, node)
        self.fits: dict[tuple, object] = {}
        #: what one allocation takes of a device per (capacity requested, device's capacity_key)
        self.amounts: dict[tuple, dict | None] = {}
        #: the allocator's per-node answers of a simple request per (request shape, count, step bound)
        self.answers: dict[tuple, object] = {}

    def for_node(self, node: dict) -> list[tuple[Pool, list[Device]]]:
        """Each pool with the devices usable on `node`, in a stable order."""
        meta = node.get("metadata") or {}
        name = meta.get("name", "")
        hit = self._by_node.get(name)
        if hit is None:
            labels = meta.get("labels") or {}
            hit = []
            for i in sorted((*self._named.get(name, ()), *self._matched)):
                p = self.pools[i]
                devs = [d for d in p.devices if d.on_node(name, labels)]
                if devs or p.targets(name, labels):
                    hit.append((p, devs))
            self._by_node[name] = hit
        return hit
