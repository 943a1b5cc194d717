"""The structured allocator: finds devices on one node for a pod's
unallocated claims by a bounded depth-first search with backtracking over
claims, requests (and firstAvailable subrequests) and device slots, checking
selectors, taints, constraints, consumable capacity and shared counters."""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import orjson

from ...machinery.quantity import QuantityError, format_quantity, parse, parse_quantity
from ...machinery.scheduling import tolerates
from .cel import CELError, compile_selector
from .pools import Device, DeviceID, Pool, PoolIndex, exact

#: search steps before giving up on a node, whatever the time (upstream bounds it by filterTimeout alone)
MAX_STEPS = 200_000
#: search steps between two readings of the clock against filterTimeout's deadline
CLOCK_EVERY = 16
_BLOCKING = ("NoSchedule", "NoExecute")
#: pool changes an AllocatedDevices remembers for `NodeMemo` (one who fell further behind forgets all)
CHANGES_KEPT = 8192
#: one sequence for every AllocatedDevices: a pool's stamp is never reused, so
#: what was derived from one state can never be taken for another's
_STAMPS = itertools.count(1)


class AllocationError(Exception):
    """Allocation cannot even be attempted (missing class, CEL failure, All
    over an incomplete pool): an error status, not merely unschedulable."""


class SearchLimitExceeded(Exception):
    """The search ran past its step budget; the node counts as unschedulable."""


@dataclass(slots=True)
class AllocatedDevices:
    """Devices taken by other claims (allocations plus in-flight ones):
    exclusively, or by capacity consumed on shareable devices. Counted per
    allocation so the scheduler can keep it up to date incrementally; each
    change stamps its pool, so what the allocator derives from a pool's free
    devices is kept until the pool's stamp moves."""

    exclusive: dict[DeviceID, int] = field(default_factory=dict)  # device -> allocations holding it
    consumed: dict[DeviceID, dict[str, Fraction]] = field(default_factory=dict)
    shares: dict[DeviceID, int] = field(default_factory=dict)  # device -> allocations sharing it
    #: (driver, pool) -> the stamp of the pool's last change (unchanged pools have none)
    stamps: dict[tuple[str, str], int] = field(default_factory=dict, compare=False, repr=False)
    #: the pools of the latest changes, oldest first (at most CHANGES_KEPT), and how many older ones
    #: were dropped: what `NodeMemo` reads to forget just the nodes whose pools changed
    changes: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)
    dropped: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        for did in (*self.exclusive, *self.consumed):
            self.stamps[did[:2]] = next(_STAMPS)

    def add(self, allocation: dict, sign: int = 1) -> None:
        for r in ((allocation or {}).get("devices") or {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            did = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            self.stamps[did[:2]] = next(_STAMPS)
            self.changes.append(did[:2])
            if len(self.changes) > CHANGES_KEPT:
                del self.changes[:CHANGES_KEPT // 2]
                self.dropped += CHANGES_KEPT // 2
            if r.get("shareID") or r.get("consumedCapacity"):
                used = self.consumed.setdefault(did, {})
                for k, v in (r.get("consumedCapacity") or {}).items():
                    k = k if "/" in k else f"{did[0]}/{k}"  # as the pools key capacity
                    used[k] = exact(used.get(k, 0) + sign * parse_quantity(str(v)))
                _count(self.shares, did, sign)
                if did not in self.shares:
                    del self.consumed[did]
            else:
                _count(self.exclusive, did, sign)

    def remove(self, allocation: dict) -> None:
        """Undoes `add` of the same allocation."""
        self.add(allocation, -1)


def _count(refs: dict[DeviceID, int], did: DeviceID, sign: int) -> None:
    n = refs.get(did, 0) + sign
    if n > 0:
        refs[did] = n
    else:
        refs.pop(did, None)


@dataclass(slots=True, eq=False)
class _Alt:
    """One way to satisfy a request: `exactly` or one subrequest."""

    claim: int
    request: str  # the top-level request name
    name: str  # result name: "req" or "req/sub"
    class_name: str
    klass: dict
    spec: dict
    candidates: list[Device] = field(default_factory=list)
    capacity: dict[str, Fraction] = field(default_factory=dict)  # requested, keys as written

    @property
    def all_mode(self) -> bool:
        return self.spec.get("allocationMode") == "All"


def _untolerated(d: Device, tolerations: list) -> bool:
    return any(t.get("effect") in _BLOCKING and not any(tolerates(tol, t) for tol in tolerations) for t in d.taints)


def _qualified(d: Device, name: str) -> str:
    return name if "/" in name else f"{d.id[0]}/{name}"


def _short(d: Device, qualified: str) -> str:
    domain, _, ident = qualified.rpartition("/")
    return ident if domain == d.id[0] else qualified


def _round(policy: dict, want: Fraction) -> Fraction | None:
    """The amount a requestPolicy grants for `want`, or None if it cannot."""
    valid = policy.get("validValues")
    if valid:
        fits = [v for v in (parse_quantity(str(x)) for x in valid) if v >= want]
        return min(fits) if fits else None
    rng = policy.get("validRange")
    if rng:
        lo = parse_quantity(str(rng.get("min", "0")))
        got = max(want, lo)
        if rng.get("step"):
            step = parse_quantity(str(rng["step"]))
            got = lo + math.ceil((got - lo) / step) * step
        if rng.get("max") is not None and got > parse_quantity(str(rng["max"])):
            return None
        return got
    return want


def _consumed_format(d: Device, name: str, asked: str | None, granted: Fraction) -> str:
    """The format of the Quantity upstream's calculateConsumedCapacity grants: the request
    as written, or the policy's minimum, step (a rounded amount) or valid value it took, or
    without a request the policy's default, else the device's capacity."""
    policy = d.policies.get(name) or {}
    if asked is None:
        source = policy.get("default") if policy.get("default") is not None else d.capacity_text[name]
    elif (policy.get("validRange") or {}).get("min") is not None:
        rng = policy["validRange"]
        if parse_quantity(asked) < parse_quantity(str(rng["min"])):
            source = rng["min"]
        else:
            source = rng.get("step") or asked
    else:
        source = next((v for v in policy.get("validValues") or () if parse_quantity(str(v)) == granted), asked)
    return parse(str(source)).format


def _consumption(d: Device, requests: dict[str, Fraction]) -> dict[str, Fraction] | None:
    """Capacity one allocation takes from `d`, or None if a request cannot
    be met by the device at all."""
    if any(k not in d.capacity for k in requests):
        return None
    out: dict[str, Fraction] = {}
    for name, total in d.capacity.items():
        policy = d.policies.get(name) or {}
        if name in requests:
            got = _round(policy, requests[name])
        elif policy.get("default") is not None:
            got = parse_quantity(str(policy["default"]))
        else:
            got = total
        if got is None or got > total:
            return None
        out[name] = exact(got)
    return out


class _Constraint:
    """matchAttribute or distinctAttribute over some requests of a claim,
    checked incrementally with an undo stack."""

    def __init__(self, spec: dict) -> None:
        self.scope = set(spec.get("requests") or [])
        self.match = spec.get("matchAttribute")
        self.attr = self.match or spec.get("distinctAttribute")
        self.values: list[tuple[str, object]] = []

    def applies(self, alt: _Alt) -> bool:
        return not self.scope or alt.request in self.scope or alt.name in self.scope

    def admits(self, d: Device) -> bool:
        v = d.attributes.get(self.attr)
        if v is None:
            return False
        if self.match:
            return not self.values or self.values[0] == v
        return v not in self.values


class _Search:
    def __init__(self, claims: list[dict], alts: list[list[_Alt]], pools: list[tuple[Pool, list[Device]]],
                 allocated: AllocatedDevices, max_steps: int, clock=None, timeout: float = 0.0) -> None:
        self.alts = alts
        #: filterTimeout: the search gives up on the node once `clock` passes the deadline
        self.clock, self.timeout = clock, timeout
        self.deadline = clock.monotonic() + timeout if clock is not None and timeout > 0 else None
        self.allocated = allocated
        exclusive, consumed = allocated.exclusive, allocated.consumed
        for alt in (a for options in alts for a in options):
            if not alt.all_mode and not alt.spec.get("adminAccess"):
                # devices other claims hold can never be picked: leave them out of the search
                alt.candidates = [d for d in alt.candidates
                                  if d.id not in exclusive and (d.allow_multiple or d.id not in consumed)]
        self.constraints = [[_Constraint(c) for c in ((cl.get("spec") or {}).get("devices") or {}).get("constraints") or []]
                            for cl in claims]
        self.steps, self.max_steps = 0, max_steps
        self.used: dict[DeviceID, int] = {}  # picks by this allocation
        self.consumed: dict[DeviceID, dict[str, Fraction]] = {}
        self.counters: dict[tuple[str, str, str], dict[str, int | Fraction]] = {}
        for p, _ in pools:
            for cs, values in p.counters.items():
                self.counters[(p.driver, p.name, cs)] = dict(values)
            for d in p.devices:  # counters of devices other claims hold
                if d.consumes and (d.id in allocated.exclusive or d.id in allocated.consumed):
                    self._take_counters(d, -1)
        self.picks: list[tuple[_Alt, Device, dict[str, Fraction] | None]] = []

    def _take_counters(self, d: Device, sign: int) -> None:
        for cs, values in d.consumes:
            left = self.counters.setdefault((d.id[0], d.id[1], cs), {})
            for k, v in values.items():
                left[k] = left.get(k, 0) + sign * v

    def _counters_fit(self, d: Device) -> bool:
        for cs, values in d.consumes:
            left = self.counters.get((d.id[0], d.id[1], cs), {})
            if any(left.get(k, 0) < v for k, v in values.items()):
                return False
        return True

    def _taken(self, d: Device) -> bool:
        return d.id in self.allocated.exclusive or d.id in self.allocated.consumed or d.id in self.used

    def _try(self, alt: _Alt, d: Device) -> bool:
        """Add `d` for `alt` if every rule allows it; True when added."""
        admin = bool(alt.spec.get("adminAccess"))
        cons = [c for c in self.constraints[alt.claim] if c.applies(alt)]
        if not all(c.admits(d) for c in cons):
            return False
        amount = None
        if not admin:
            if d.allow_multiple:
                if d.id in self.allocated.exclusive:
                    return False
                amount = _consumption(d, {_qualified(d, k): v for k, v in alt.capacity.items()})
                prior = self.allocated.consumed.get(d.id, {})
                mine = self.consumed.get(d.id, {})
                if amount is None or any(prior.get(k, 0) + mine.get(k, 0) + v > d.capacity[k] for k, v in amount.items()):
                    return False
            elif self._taken(d):
                return False
            first = not self._taken(d)
            if first and not self._counters_fit(d):
                return False
            if first:
                self._take_counters(d, -1)
            self.used[d.id] = self.used.get(d.id, 0) + 1
            if amount is not None:
                mine = self.consumed.setdefault(d.id, {})
                for k, v in amount.items():
                    mine[k] = mine.get(k, 0) + v
        for c in cons:
            c.values.append(d.attributes[c.attr])
        self.picks.append((alt, d, amount))
        return True

    def _undo(self) -> None:
        alt, d, amount = self.picks.pop()
        for c in self.constraints[alt.claim]:
            if c.applies(alt):
                c.values.pop()
        if alt.spec.get("adminAccess"):
            return
        if amount is not None:
            mine = self.consumed[d.id]
            for k, v in amount.items():
                mine[k] -= v
        self.used[d.id] -= 1
        if not self.used[d.id]:
            del self.used[d.id]
            if not (d.id in self.allocated.exclusive or d.id in self.allocated.consumed):
                self._take_counters(d, 1)

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise SearchLimitExceeded(f"device allocation gave up after {self.max_steps} steps")
        if self.deadline is not None and not self.steps % CLOCK_EVERY and self.clock.monotonic() >= self.deadline:
            raise SearchLimitExceeded(f"device allocation gave up after {self.timeout:g}s")

    def solve(self, i: int = 0) -> bool:
        if i == len(self.alts):
            return True
        for alt in self.alts[i]:
            self._tick()
            if alt.all_mode:
                if self._all(alt, i):
                    return True
            elif self._pick(alt, i, int(alt.spec.get("count") or 1), 0):
                return True
        return False

    def _all(self, alt: _Alt, i: int) -> bool:
        if not alt.candidates:
            return False
        if not alt.spec.get("adminAccess") and any(self._taken(d) and not d.allow_multiple for d in alt.candidates):
            return False
        added = 0
        for d in alt.candidates:
            if not self._try(alt, d):
                break
            added += 1
        ok = added == len(alt.candidates) and self.solve(i + 1)
        if not ok:
            for _ in range(added):
                self._undo()
        return ok

    def _pick(self, alt: _Alt, i: int, need: int, start: int) -> bool:
        if need == 0:
            return self.solve(i + 1)
        cands = alt.candidates
        for j in range(start, len(cands) - need + 1):
            self._tick()
            if self._try(alt, cands[j]):
                if self._pick(alt, i, need - 1, j + 1):
                    return True
                self._undo()
        return False


@dataclass(slots=True, eq=False)
class _Request:
    """One `exactly` or subrequest of a claim, prepared once per Allocator:
    its class, selectors, tolerations, parsed capacity and the shape that
    keys its candidate devices in the pool index."""

    request: str
    name: str
    who: str
    class_name: str
    klass: dict
    spec: dict
    selectors: list[tuple[str, dict]]
    tolerations: list
    capacity: dict[str, Fraction]
    shape: bytes
    capacity_key: tuple


@dataclass(slots=True, eq=False)
class Placement:
    """Devices found for a pod's claims on one node, not yet written out;
    `search` is None while only the fit is known (the simple case, which
    Filter answers from each pool's free devices; `results` then searches).
    `counted` holds the devices the search would pick there when some of
    them are shared (allowMultipleAllocations), as the search's picks.
    `claims` is None in such an answer kept for every pod of the shape
    while the node is unchanged: `results` takes the claims counted last."""

    node: dict
    claims: list[dict] | None
    search: _Search | None
    counted: list[tuple[Device, dict[str, Fraction] | None]] | None = None

    @property
    def taken(self) -> list[tuple[Device, dict[str, Fraction] | None]] | None:
        """(device, capacity it takes or None) per device chosen, in the
        search's order; None where Filter only counted free unshared devices."""
        if self.search is not None:
            return [(d, amount) for _, d, amount in self.search.picks]
        return self.counted


@dataclass(slots=True, eq=False)
class _PoolFit:
    """A simple request's candidates in one pool on one node, with what one
    allocation takes of each shared device, and the free ones (with that
    amount) as of the allocated-devices stamp `stamp`."""

    key: tuple[str, str]
    candidates: list[Device]
    amounts: list[dict[str, Fraction] | None]  # per candidate: None if unshared (or a share cannot be met)
    shared: bool  # some candidate allows multiple allocations
    stamp: int = -1
    free: list[tuple[Device, dict[str, Fraction] | None]] = field(default_factory=list)
    #: count -> Filter's answer where that many fit, for this stamp: one per node and state,
    #: not one per pod and node (they would be most of what a scheduling cycle allocates)
    _placed: dict[int, Placement] = field(default_factory=dict)

    def placement(self, count: int, node: dict) -> Placement:
        hit = self._placed.get(count)
        if hit is None:
            hit = self._placed[count] = Placement(node, None, None, self.free[:count] if self.shared else None)
        return hit

    def refresh(self, allocated: AllocatedDevices, stamp: int) -> None:
        """The candidates one more allocation could take, as `_Search._try`
        decides for a device no earlier pick of the same search holds."""
        exclusive, consumed = allocated.exclusive, allocated.consumed
        free = []
        for d, amount in zip(self.candidates, self.amounts):
            if d.id in exclusive:
                continue
            if d.allow_multiple:
                if amount is None:
                    continue
                prior = consumed.get(d.id)
                if prior and any(prior.get(k, 0) + v > d.capacity[k] for k, v in amount.items()):
                    continue
            elif d.id in consumed:
                continue
            free.append((d, amount))
        self.free, self.stamp = free, stamp
        self._placed = {}


#: `_counted_fit`: the shape is not counted on this node, search it
_SEARCH = object()
_MISSING = object()


class NodeMemo:
    """Values kept per node, each forgotten once an allocation change touches
    one of the node's pools (read from the allocated devices' change log at
    `sync`): a pod that fits nowhere asks about every node, and between two
    pods hardly any changed. The allocator keeps its answers for a simple
    request shape here, the GPU score plugins each node's free shares."""

    __slots__ = ("allocated", "by_pool", "seen", "values")

    def __init__(self, allocated: AllocatedDevices) -> None:
        self.allocated = allocated
        self.seen = allocated.dropped + len(allocated.changes)  # position in the change log read up to
        self.values: dict[str, object] = {}
        self.by_pool: dict[tuple[str, str], list[str]] = {}  # pool -> nodes kept with a value from it

    def sync(self) -> None:
        """Forgets the values of nodes whose pools changed since the last call."""
        changes, base = self.allocated.changes, self.allocated.dropped
        if self.seen == base + len(changes):
            return
        if self.seen < base:  # fell behind what the log keeps
            self.values.clear()
            self.by_pool.clear()
        else:
            values, by_pool = self.values, self.by_pool
            for key in changes[self.seen - base:]:
                for name in by_pool.pop(key, ()):
                    values.pop(name, None)
        self.seen = base + len(changes)

    def keep(self, name: str, pools, value) -> None:
        self.values[name] = value
        for key in pools:
            self.by_pool.setdefault(key, []).append(name)


class Allocator:
    """Allocates a pod's claims on one node.

    `classes` maps DeviceClass names to objects; `index` is the PoolIndex of
    the current slices and taint rules; `allocated` what other claims hold.
    One Allocator serves one scheduling cycle: what it derives from the
    claims is kept across the nodes it is asked about. With a `clock` and a
    `timeout` (DynamicResourcesArgs.filterTimeout, seconds; 0 for none) the
    search on each node gives up once `timeout` has passed on the clock, as
    upstream's Filter bounds each node's allocation; the counted answer of
    the common shape takes no search, and no time."""

    def __init__(self, classes: dict[str, dict], index: PoolIndex, allocated: AllocatedDevices,
                 new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()), max_steps: int = MAX_STEPS,
                 clock=None, timeout: float = 0.0) -> None:
        self.classes = classes
        self.clock, self.timeout = clock, timeout
        self.index = index
        self.allocated = allocated
        self.new_share_id = new_share_id
        self.max_steps = max_steps
        #: claim position -> (claim, its requests' alternatives prepared)
        self._prepared: dict[int, tuple[dict, list[list[_Request | AllocationError]]]] = {}
        #: (the claim, its simple request and count or None) of the last `_simple`, and its claims list
        self._simple_for: tuple[dict, tuple[_Request, int] | None, list[dict]] | None = None
        #: whether the last `find_each` answered some node with an error: its caller then looks
        #: for them, not at every answer (a kept answer is never one)
        self.failed = False

    def allocate(self, node: dict, claims: list[dict]) -> list[dict] | None:
        """One AllocationResult per claim (v1 JSON, without
        allocationTimestamp), or None when the claims do not fit on `node`.
        Raises AllocationError or SearchLimitExceeded."""
        found = self.find(node, claims)
        return None if found is None else self.results(found)

    def find(self, node: dict, claims: list[dict]) -> Placement | None:
        """The devices for `claims` on `node`, or None; `results` writes
        them out (Filter finds them on every node, Reserve writes one)."""
        pools = self.index.for_node(node)
        node_name = (node.get("metadata") or {}).get("name", "")
        simple = self._simple(claims)
        if simple is not None:
            fits = self._counted_fits(simple[0], node, node_name)
            if fits is not _SEARCH:
                found = self._count(fits, simple[1], node)
                if found is not _SEARCH:
                    return found
        return self._search(node, claims, pools, node_name)

    def find_each(self, nodes: list, claims: list[dict]) -> list:
        """`find` on each of `nodes` (objects with the node's `name` and its
        object as `node`, as the scheduler's NodeInfo): its Placement or
        None, or the AllocationError or SearchLimitExceeded it raises. The
        simple shape's counted answer on a node is kept until an allocation
        changes one of the node's pools (`NodeMemo`): a node answered since
        costs one lookup."""
        self.failed = False
        try:
            simple = self._simple(claims)
        except AllocationError as e:
            self.failed = True
            return [e] * len(nodes)
        out: list = []
        if simple is None:
            for n in nodes:
                try:
                    out.append(self.find(n.node, claims))
                except (AllocationError, SearchLimitExceeded) as e:
                    out.append(e)
                    self.failed = True
            return out
        r, need = simple
        memo_key = (r.shape, need, self.max_steps)
        memo = self.index.answers.get(memo_key)
        if memo is None or memo.allocated is not self.allocated:
            memo = self.index.answers[memo_key] = NodeMemo(self.allocated)
        memo.sync()
        get = memo.values.get
        out = [get(n.name, _MISSING) for n in nodes]
        i = -1
        # C-level scans (answers compare by identity): mostly every node is kept, or all but one
        for _ in range(out.count(_MISSING)):
            i = out.index(_MISSING, i + 1)
            hit = out[i] = self._answer(nodes[i], claims, memo, r, need)
            if hit is not None and hit.__class__ is not Placement:
                self.failed = True
        return out

    def _answer(self, n, claims: list[dict], memo: NodeMemo, r: _Request, need: int):
        """`find_each`'s answer on a node it has none kept for: the counted
        one, kept (a node without the devices too: it is asked about by every
        pod of the shape that fits its CPU and memory), else the search's.
        The search's verdict is kept as well, as a Placement without claims
        or search (`results` searches the chosen node for the pod's claims,
        as for a counted one): for the simple shape it is decided by the
        node's pools and what is allocated in them, so devices that consume
        counters (MIG partitions, searched on every node) are searched again
        only on nodes whose pools changed."""
        node, name = n.node, n.name
        try:
            fits = self._counted_fits(r, node, name)
            if fits is not _SEARCH:
                found = self._count(fits, need, node)
                if found is not _SEARCH:
                    memo.keep(name, [pf.key for pf in fits], found)
                    return found
            pools = self.index.for_node(node)
            found = self._search(node, claims, pools, name)
        except (AllocationError, SearchLimitExceeded) as e:
            return e
        memo.keep(name, [(p.driver, p.name) for p, _ in pools],
                  None if found is None else Placement(node, None, None, found.taken))
        return found

    def _search(self, node: dict, claims: list[dict], pools, node_name: str) -> Placement | None:
        flat = [req for ci, c in enumerate(claims) for req in self._alternatives(ci, c, pools, node_name)]
        search = _Search(claims, flat, pools, self.allocated, self.max_steps, self.clock, self.timeout)
        return Placement(node, claims, search) if search.solve() else None

    def _simple(self, claims: list[dict]) -> tuple[_Request, int] | None:
        """The request and count of the common shape: one claim, one request
        with one alternative, no constraints, neither All mode nor admin
        access; None for any other shape. Raises the request's
        preparation error, as the search would on reaching it."""
        if len(claims) != 1:
            return None
        claim = claims[0]
        memo = self._simple_for
        if memo is not None and memo[0] is claim:
            if memo[2] is not claims:
                self._simple_for = (claim, memo[1], claims)
            return memo[1]
        out = None
        if not ((claim.get("spec") or {}).get("devices") or {}).get("constraints"):
            requests = self._prepare(0, claim)
            if len(requests) == 1 and len(requests[0]) == 1:
                r = requests[0][0]
                if isinstance(r, AllocationError):
                    raise AllocationError(*r.args)
                if r.spec.get("allocationMode") != "All" and not r.spec.get("adminAccess"):
                    out = (r, int(r.spec.get("count") or 1))
        self._simple_for = (claim, out, claims)
        return out

    def _counted_fits(self, r: _Request, node: dict, node_name: str):
        """The simple request's `_PoolFit`s on the node, kept per node and
        request shape, from which `_count` reads Filter's answer; `_SEARCH`
        where a device consumes counters. Every pick of the search is then
        decided by its device alone (no constraint, no counter, no earlier
        pick on the same device), so the search takes the first `need`
        candidates that one more allocation fits on: the same verdict and
        devices, read from each pool's free candidates, recomputed only
        when the pool's allocated-devices stamp moved."""
        key = (r.shape, node_name)
        fits = self.index.fits.get(key)
        if fits is None:
            fits = self.index.fits[key] = self._pool_fits(r, self.index.for_node(node), node_name)
        return fits

    def _count(self, fits: list[_PoolFit], need: int, node: dict):
        """Filter's answer from the node's free candidates (a Placement
        without claims, as `results` writes out what it counted for the
        claims of the latest `_simple`), or `_SEARCH` where the search's
        step bound could decide instead."""
        stamps, allocated = self.allocated.stamps, self.allocated
        free = candidates = 0
        shared = False
        for pf in fits:
            stamp = stamps.get(pf.key, 0)
            if pf.stamp != stamp:
                pf.refresh(allocated, stamp)
            free += len(pf.free)
            candidates += len(pf.candidates)
            shared = shared or pf.shared
        if free >= need:
            # the search ticks once, then once per candidate up to its last pick
            if candidates + 1 > self.max_steps:
                return _SEARCH
            if len(fits) == 1:
                return fits[0].placement(need, node)
            return Placement(node, None, None, [x for pf in fits for x in pf.free][:need] if shared else None)
        # a failed search tries each candidate after each set of fewer than `need` free ones
        if 1 + candidates * 2 ** free > self.max_steps:
            return _SEARCH
        return None

    def _pool_fits(self, r: _Request, pools, node_name: str):
        """The request's `_PoolFit` per pool of the node, or `_SEARCH` if
        some candidate consumes counters (picks then depend on each other)."""
        out = []
        for key, hit in self._candidate_lists(r, False, pools, node_name):
            if any(d.consumes for d in hit):
                return _SEARCH
            amounts = [self._amount(r, d) if d.allow_multiple else None for d in hit]
            out.append(_PoolFit(key[2:], hit, amounts, any(d.allow_multiple for d in hit)))
        return out

    def results(self, found: Placement) -> list[dict]:
        """One AllocationResult per claim of a Placement (searching now
        for one whose fit was counted)."""
        node = found.node
        claims = found.claims if found.claims is not None else self._simple_for[2]
        search = found.search
        if search is None:
            searched = self._search(node, claims, self.index.for_node(node), (node.get("metadata") or {}).get("name", ""))
            if searched is None:
                raise AllocationError("the devices counted free at Filter are no longer free")
            search = searched.search
        return [self._result(ci, c, search, node) for ci, c in enumerate(claims)]

    # -- preparation ------------------------------------------------------

    def _alternatives(self, ci: int, claim: dict, pools: list[tuple[Pool, list[Device]]],
                      node_name: str) -> list[list[_Alt]]:
        out = []
        for requests in self._prepare(ci, claim):
            alts = []
            for r in requests:
                if isinstance(r, AllocationError):
                    raise AllocationError(*r.args)
                alt = _Alt(ci, r.request, r.name, r.class_name, r.klass, r.spec, capacity=r.capacity)
                alt.candidates = self._candidates(r, alt.all_mode, pools, node_name)
                alts.append(alt)
            out.append(alts)
        return out

    def _prepare(self, ci: int, claim: dict) -> list[list[_Request | AllocationError]]:
        cached = self._prepared.get(ci)
        if cached is not None and cached[0] is claim:
            return cached[1]
        meta = claim.get("metadata") or {}
        who = f"claim {meta.get('namespace', '')}/{meta.get('name', '')}"
        out = []
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = req.get("name", "")
            specs = ([(name, req["exactly"])] if req.get("exactly") is not None
                     else [(f"{name}/{s.get('name', '')}", s) for s in req.get("firstAvailable") or []])
            out.append([self._request(who, name, rname, spec) for rname, spec in specs])
        self._prepared[ci] = (claim, out)
        return out

    def _request(self, claim_who: str, request: str, name: str, spec: dict) -> _Request | AllocationError:
        """The prepared request, or the error to raise when the search reaches it."""
        try:
            return self._prepare_request(claim_who, request, name, spec)
        except AllocationError as e:
            return e

    def _prepare_request(self, claim_who: str, request: str, name: str, spec: dict) -> _Request:
        who = f"{claim_who}, request {name}"
        cls_name = spec.get("deviceClassName", "")
        klass = self.classes.get(cls_name)
        if klass is None:
            raise AllocationError(f"{who}: could not retrieve device class {cls_name}: "
                                  f'deviceclass.resource.k8s.io "{cls_name}" not found')
        selectors = [(f"class {cls_name}: selector #{i}", s)
                     for i, s in enumerate((klass.get("spec") or {}).get("selectors") or [])]
        # a selector's error names the claim or the class it came from, not the request, as upstream's
        selectors += [(f"{claim_who}: selector #{i}", s) for i, s in enumerate(spec.get("selectors") or [])]
        tolerations = spec.get("tolerations") or []
        try:
            capacity = {k: exact(parse_quantity(str(v))) for k, v in ((spec.get("capacity") or {}).get("requests") or {}).items()}
        except QuantityError as e:
            raise AllocationError(f"{who}: capacity: {e}") from None
        shape = orjson.dumps([[s for _, s in selectors], tolerations, spec.get("capacity")], option=orjson.OPT_SORT_KEYS)
        return _Request(request, name, who, cls_name, klass, spec, selectors, tolerations, capacity, shape,
                        tuple(sorted(capacity.items())))

    def _candidates(self, r: _Request, all_mode: bool, pools: list[tuple[Pool, list[Device]]],
                    node_name: str) -> list[Device]:
        """The devices of `pools` the request may use, before counting what
        is taken; the index remembers them per node and request shape."""
        out = []
        for _, hit in self._candidate_lists(r, all_mode, pools, node_name):
            out.extend(hit)
        return out

    def _candidate_lists(self, r: _Request, all_mode: bool, pools: list[tuple[Pool, list[Device]]], node_name: str):
        """(index key, the request's usable devices) per pool, as `_candidates` joins them."""
        for pool, devices in pools:
            if all_mode:
                state = "being updated" if pool.incomplete else "invalid" if pool.invalid else ""
                if state and devices:
                    raise AllocationError(f"{r.who}: asks for all devices, but resource pool "
                                          f"{pool.driver}/{pool.name} is currently {state}")
            elif pool.invalid:
                continue
            key = (r.shape, node_name, pool.driver, pool.name)
            hit = self.index.selected.get(key)
            if hit is None:
                hit = [d for d in devices if self._usable(r, d)]
                self.index.selected[key] = hit
            yield key, hit

    def _amount(self, r: _Request, d: Device) -> dict[str, Fraction] | None:
        """`_consumption` of the request on `d`, kept per capacity asked and device capacity."""
        key = (r.capacity_key, d.capacity_key)
        hit = self.index.amounts.get(key, _MISSING)
        if hit is _MISSING:
            hit = self.index.amounts[key] = _consumption(d, {_qualified(d, k): v for k, v in r.capacity.items()})
        return hit

    def _usable(self, r: _Request, d: Device) -> bool:
        if _untolerated(d, r.tolerations):
            return False
        if r.capacity and self._amount(r, d) is None:
            return False
        return all(self._selects(label, s, d) for label, s in r.selectors)

    @staticmethod
    def _selects(label: str, selector: dict, d: Device) -> bool:
        expr = (selector.get("cel") or {}).get("expression", "")
        hit = d.selected.get(expr)
        if hit is None:
            try:
                compiled = compile_selector(expr)
            except CELError as e:
                hit = f"CEL compile error: {e}"
            else:
                try:
                    hit = compiled.matches(d.cel)
                except CELError as e:
                    hit = f"CEL runtime error: {e}"
            d.selected[expr] = hit
        if isinstance(hit, str):
            raise AllocationError(f"{label}: {hit}")
        return hit

    # -- results ----------------------------------------------------------

    def _result(self, ci: int, claim: dict, search: _Search, node: dict) -> dict:
        results, config, seen_alts = [], [], []
        for alt, d, amount in search.picks:
            if alt.claim != ci:
                continue
            r = {"request": alt.name, "driver": d.id[0], "pool": d.id[1], "device": d.id[2]}
            if alt.spec.get("adminAccess"):
                r["adminAccess"] = True
            if alt.spec.get("tolerations"):
                r["tolerations"] = [dict(t) for t in alt.spec["tolerations"]]
            r.update(d.extra)
            if d.allow_multiple and amount is not None:
                r["shareID"] = self.new_share_id()
                asked = {_qualified(d, k): str(v) for k, v in ((alt.spec.get("capacity") or {}).get("requests") or {}).items()}
                r["consumedCapacity"] = {_short(d, k): format_quantity(v, _consumed_format(d, k, asked.get(k), v))
                                         for k, v in amount.items()}
            results.append(r)
            if alt not in seen_alts:
                seen_alts.append(alt)
        for alt in seen_alts:
            for c in (alt.klass.get("spec") or {}).get("config") or []:
                config.append({"source": "FromClass", "requests": [alt.name], "opaque": c.get("opaque")})
        for c in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
            config.append({"source": "FromClaim", "requests": list(c.get("requests") or []), "opaque": c.get("opaque")})
        out: dict = {"devices": {"results": results}}
        if config:
            out["devices"]["config"] = config
        selector = _node_selector([d for alt, d, _ in search.picks if alt.claim == ci], node)
        if selector is not None:
            out["nodeSelector"] = selector
        return out


def _node_selector(devices: list[Device], node: dict) -> dict | None:
    """Upstream's createNodeSelector: matchFields on the node name if any device is node-local
    or binds to the node it is allocated for (bindsToNode); nil when every device comes from
    allNodes; else the one node selector, or the requirements of the devices' one-term selectors
    gathered into one term, each once (any other shape pins the node)."""
    name = (node.get("metadata") or {}).get("name", "")
    by_name = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}
    selectors = []
    for d in devices:
        if d.node_name is not None or d.binds_to_node:
            return by_name
        if d.node_selector is not None and d.node_selector not in selectors:
            selectors.append(d.node_selector)
    if len(selectors) < 2:
        return selectors[0] if selectors else None
    term: dict[str, list] = {}
    for sel in selectors:
        terms = sel.get("nodeSelectorTerms") or []
        if len(terms) != 1:
            return by_name
        for kind in ("matchFields", "matchExpressions"):
            have = term.setdefault(kind, [])
            have += [r for r in terms[0].get(kind) or [] if r not in have]
    return {"nodeSelectorTerms": [{k: v for k, v in term.items() if v}]}
