"""DynamicResources: schedules pods that use ResourceClaims. PreEnqueue
waits for the pod's claims to exist; Filter runs the structured allocator
per node for unallocated claims (allocated ones only constrain the node by
their nodeSelector, or not at all once their binding failed or timed out);
PostFilter deallocates such an unavailable claim nobody else holds, so the
next attempt can allocate elsewhere, or deletes the pod's extended resource
claim an earlier cycle left behind, for which Filter refuses every node;
Reserve keeps the chosen allocations in flight so no other pod can take
those devices; PreBind adds the delete-protection finalizer, then writes
allocation and reservedFor in one status update, and waits for the binding
conditions of devices that have them (KEP-5007), at most the configured
bindingTimeout."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from operator import attrgetter

from ...clock import parse_time
from ...machinery import gofmt, goduration
from ...machinery.errors import APIError
from ...dra.resourceclaim import FINALIZER, GROUP, VERSION, ClaimError, claim_name, claim_names
from ..dra.allocator import (
    AllocatedDevices,
    AllocationError,
    Allocator,
    Placement,
    SearchLimitExceeded,
)
from ..dra.pools import PoolIndex
from ..framework import (
    NODE,
    SKIP,
    Action,
    ClusterEvent,
    Code,
    Hint,
    Registration,
    Status,
    unschedulable,
)
from ...machinery.scheduling import selector_matches, tolerates
from ...dra.podgroup_claims import consumer, group_entry, owned_by_group
from ...dra import extended_resources
from ...machinery.podgroups import group_key

log = logging.getLogger(__name__)

RESERVED_FOR_MAX = 256
CLAIM, SLICE, DEVICE_CLASS, TAINT_RULE = "ResourceClaim", "ResourceSlice", "DeviceClass", "DeviceTaintRule"
NOT_ON_NODE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
TIMED_OUT = "timed out trying to allocate devices"
#: PostFilter's verdicts: a claim was deallocated, or none it may deallocate stands in the way
DEALLOCATED = "deallocation of ResourceClaim completed"
DELETED = "deletion of ResourceClaim completed"
#: Filter's verdict on every node while an extended resource claim of an earlier cycle is left over
STALE_EXTENDED = "cannot schedule extended resource claim"
STILL_UNSCHEDULABLE = "still not schedulable"
#: DynamicResourcesArgs.bindingTimeout's default and the interval PreBind polls binding conditions at
BINDING_TIMEOUT = 600.0
#: DynamicResourcesArgs.filterTimeout's default: the longest Filter searches one node for devices
FILTER_TIMEOUT = 10.0
BINDING_POLL = 5.0
#: CycleState key of the DRA-backed extended resources the pod asks for (name -> DeviceClass),
#: which NodeResourcesFit leaves to this plugin on nodes that do not advertise them
EXTENDED_RESOURCES = "DynamicResources/extendedResources"
_STATE = "DynamicResources"
_name = attrgetter("name")


def owned_by(claim: dict, pod: dict) -> bool:
    """Generated for the pod, or for its PodGroup (a claim the group shares)."""
    uid = pod["metadata"].get("uid")
    return any(r.get("uid") == uid and r.get("controller") for r in claim["metadata"].get("ownerReferences") or []) \
        or owned_by_group(claim, pod)


def _allocated(claim: dict | None) -> bool:
    return bool(claim) and (claim.get("status") or {}).get("allocation") is not None


def _created_or_status_changed(old: dict | None, new: dict | None) -> bool:
    """Whether a claim change can concern the pods using it: it was created, or its status changed
    (a deleted claim, or an update of its metadata alone, cannot let them in). A status left out and
    an empty one are the same (a create answers without it, a later write with `status: {}`)."""
    return new is not None and (old is None or (old.get("status") or {}) != (new.get("status") or {}))


def _devices(allocation: dict) -> list:
    """What `AllocatedDevices.add` counts of an allocation."""
    return (allocation.get("devices") or {}).get("results") or []


class BindingFailed(Exception):
    """A device's binding failure condition is True."""


def ready_for_binding(claim: dict) -> bool:
    """Upstream's isClaimReadyForBinding: every allocated device with binding conditions has
    them all True in `status.devices` (the first entry naming the device); BindingFailed when
    one of its binding failure conditions is True."""
    status = claim.get("status") or {}
    if status.get("allocation") is None:
        return False
    reported: dict[tuple, dict] = {}
    for d in status.get("devices") or []:
        reported.setdefault((d.get("driver"), d.get("pool"), d.get("device")), d)
    for r in _devices(status["allocation"]):
        if not r.get("bindingConditions"):
            continue
        d = reported.get((r.get("driver"), r.get("pool"), r.get("device")))
        if d is None:
            return False
        conditions = {c.get("type"): c for c in d.get("conditions") or []}
        for t in r.get("bindingFailureConditions") or []:
            c = conditions.get(t)
            if c is not None and c.get("status") == "True":
                raise BindingFailed(f"claim {claim['metadata']['name']} binding failed: reason={c.get('reason', '')}, "
                                    f"message={gofmt.quote(c.get('message', ''))}")
        if any((conditions.get(t) or {}).get("status") != "True" for t in r["bindingConditions"]):
            return False
    return True


def _extended_owner(claim: dict) -> str | None:
    """The uid of the pod controlling an extended resource claim (upstream's
    findExtendedResourceClaim: the annotation set to "true", the pod its controller), else None."""
    md = claim["metadata"]
    if (md.get("annotations") or {}).get(extended_resources.ANNOTATION) != "true":
        return None
    return next((r.get("uid") for r in md.get("ownerReferences") or [] if r.get("controller") and r.get("kind") == "Pod"),
                None)


def _key(pod: dict) -> str:
    """The scheduling queue's key of a pod."""
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


class DRAState:
    """What every profile's DynamicResources shares: the resource.k8s.io
    informers, the pool index (rebuilt after slice or rule changes), the
    in-flight allocations (claim uid -> claim with its allocation) of pods
    between Reserve and the informer seeing their PreBind write, and the
    devices all of those allocations hold, kept up to date per claim change
    rather than rebuilt from every claim per cycle."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.claims = handle.informer(GROUP, VERSION, "resourceclaims")
        self.slices = handle.informer(GROUP, VERSION, "resourceslices")
        self.classes = handle.informer(GROUP, VERSION, "deviceclasses")
        self.rules = handle.informer(GROUP, VERSION, "devicetaintrules")
        self.in_flight: dict[str, dict] = {}
        #: pod uid -> the extended resource claim (annotated, controlled by the pod) the informer has
        #: for it: one an earlier cycle's PreBind created that a restart or a lost Unreserve left behind
        self.extended_claims: dict[str, dict] = {}
        #: claim uid -> lock serialising PreBind writes of pods sharing a PodGroup claim
        self.locks: dict[str, asyncio.Lock] = {}
        self.allocated = AllocatedDevices()
        self._informer_allocations: dict[str, dict] = {}  # claim uid -> allocation the informer has
        self._counted: dict[str, dict] = {}  # claim uid -> allocation counted in `allocated`
        self._index: PoolIndex | None = None
        self._devices: dict | None = None
        #: the GPU score plugins' view of each node's free GPU shares (gpu_fragmentation.FreeGPUs)
        self.free_gpus = None
        self.claims.add_handlers(self._claim_added, self._claim_updated, self._claim_deleted)
        for inf, kind in ((self.slices, SLICE), (self.rules, TAINT_RULE)):
            inf.add_handlers(*self._pool_handlers(kind))
        self.classes.add_handlers(lambda o: self._event(DEVICE_CLASS, Action.ADD, None, o),
                                  lambda o, n: self._event(DEVICE_CLASS, Action.UPDATE, o, n))
        #: extended resource name -> DeviceClass (DRAExtendedResource), rebuilt after a class change
        self._mapping: dict[str, str] | None = None
        self.classes.add_handlers(*[lambda *_: setattr(self, "_mapping", None)] * 3)
        #: (namespace, claim name) -> keys of the pods naming it (spec or status), and back:
        #: a claim's arrival retries only the pods that can be waiting for it
        self._users: dict[tuple[str, str], dict[str, None]] = {}
        self._uses: dict[str, set[tuple[str, str]]] = {}
        handle.pods.add_handlers(on_add=self._index_pod, on_update=self._pod_updated,
                                 on_delete=lambda pod: self._unindex_pod(_key(pod)))
        for pod in handle.pods.list():
            self._index_pod(pod)

    # --- informer handlers -------------------------------------------------

    def _event(self, kind: str, action: Action, old, new) -> None:
        self.handle.queue.on_event(ClusterEvent(kind, action, f"{kind}{action.name.title()}"), old, new)

    def _retry_gated(self, concerns, keys) -> None:
        """Pods PreEnqueue turned away (of `keys`) that the change `concerns`
        may now find their claims; run after the scheduler's own handlers so
        the queue holds the latest pod."""
        asyncio.get_running_loop().call_soon(self.handle.queue.retry_gated, DynamicResources.name, "ResourceClaimAdd",
                                             concerns, keys)

    def _index_pod(self, pod: dict) -> None:
        claims = (pod.get("spec") or {}).get("resourceClaims")
        if not claims and not self._uses:
            return  # no pod has claims: nearly every cluster
        key = _key(pod)
        old = self._uses.get(key)
        if not claims and old is None:
            return  # no claims, before or now: nearly every pod
        ns = pod["metadata"].get("namespace", "")
        uses = {(ns, n) for n in claim_names(pod)} if claims else set()
        old = old or set()
        if uses == old:
            return
        for ref in old - uses:
            self._drop_user(ref, key)
        for ref in uses - old:
            self._users.setdefault(ref, {})[key] = None
        if uses:
            self._uses[key] = uses
        else:
            self._uses.pop(key, None)

    def _unindex_pod(self, key: str) -> None:
        for ref in self._uses.pop(key, ()):
            self._drop_user(ref, key)

    def _drop_user(self, ref: tuple[str, str], key: str) -> None:
        users = self._users.get(ref)
        if users is not None:
            users.pop(key, None)
            if not users:
                del self._users[ref]

    def _claim_added(self, claim: dict) -> None:
        self._observe(claim)
        self._event(CLAIM, Action.ADD, None, claim)
        ns, name = claim["metadata"].get("namespace", ""), claim["metadata"]["name"]
        users = self._users.get((ns, name))
        if users:
            self._retry_gated(lambda info: info.pod["metadata"].get("namespace", "") == ns
                              and name in claim_names(info.pod), list(users))

    def _claim_updated(self, old: dict, new: dict) -> None:
        if _allocated(new):
            self.in_flight.pop(new["metadata"].get("uid", ""), None)
        self._observe(new)
        self._event(CLAIM, Action.UPDATE, old, new)

    def _claim_deleted(self, claim: dict) -> None:
        owner = _extended_owner(claim)
        if owner is not None and (self.extended_claims.get(owner) or {}).get("metadata", {}).get("uid") == \
                claim["metadata"].get("uid"):
            del self.extended_claims[owner]
        uid = claim["metadata"].get("uid", "")
        self.in_flight.pop(uid, None)
        self.locks.pop(uid, None)
        self._informer_allocations.pop(uid, None)
        self._recount(uid)
        self._event(CLAIM, Action.DELETE, claim, None)

    def _observe(self, claim: dict) -> None:
        owner = _extended_owner(claim)
        if owner is not None:
            self.extended_claims[owner] = claim
        uid = claim["metadata"].get("uid", "")
        alloc = (claim.get("status") or {}).get("allocation")
        if alloc is None:
            self._informer_allocations.pop(uid, None)
        else:
            self._informer_allocations[uid] = alloc
        self._recount(uid)

    def _recount(self, uid: str) -> None:
        """Counts the claim's effective allocation (in flight, else the
        informer's) in `allocated` in place of what was counted before."""
        flight = self.in_flight.get(uid)
        alloc = flight["status"]["allocation"] if flight is not None else self._informer_allocations.get(uid)
        old = self._counted.get(uid)
        if old is alloc:
            return
        if old is not None and alloc is not None and _devices(old) == _devices(alloc):
            # the same devices under a new object (PreBind's write of the in-flight allocation, then
            # the informer's copy of it): nothing changed, and a change would make every pool reader
            # (the allocator's kept answers, the GPU policies' free shares) work the node out again
            self._counted[uid] = alloc
            return
        if old is not None:
            self.allocated.remove(old)
            del self._counted[uid]
        if alloc is not None:
            self.allocated.add(alloc)
            self._counted[uid] = alloc

    def set_in_flight(self, uid: str, claim: dict) -> None:
        self.in_flight[uid] = claim
        self._recount(uid)

    def drop_in_flight(self, uid: str) -> None:
        if self.in_flight.pop(uid, None) is not None:
            self._recount(uid)

    def _pool_handlers(self, kind: str):
        def changed(action: Action, old, new) -> None:
            self._index = self._devices = self.free_gpus = None
            self._event(kind, action, old, new)

        return (lambda o: changed(Action.ADD, None, o), lambda o, n: changed(Action.UPDATE, o, n),
                lambda o: changed(Action.DELETE, o, None))

    def _pod_updated(self, old: dict, new: dict) -> None:
        """Re-indexes the pod only when what names its claims changed (most updates of a pod are
        its binding and status writes)."""
        generated = (old.get("status") or {}).get("resourceClaimStatuses") != \
            (new.get("status") or {}).get("resourceClaimStatuses")
        if generated or new.get("spec") is not old.get("spec") and \
                (old.get("spec") or {}).get("resourceClaims") != (new.get("spec") or {}).get("resourceClaims"):
            self._index_pod(new)
        if generated:
            uid = new["metadata"].get("uid")
            self._retry_gated(lambda info: info.uid == uid, [_key(new)])

    # --- views ---------------------------------------------------------------

    def index(self) -> PoolIndex:
        if self._index is None:
            self._index = PoolIndex(self.slices.list(), self.rules.list())
        return self._index

    def extended_mapping(self) -> dict[str, str]:
        if self._mapping is None:
            self._mapping = extended_resources.class_mapping(self.classes.list())
        return self._mapping

    def device_taints(self, did: tuple[str, str, str]) -> list[dict]:
        if self._devices is None:
            self._devices = {d.id: d for p in self.index().pools for d in p.devices}
        d = self._devices.get(did)
        return d.taints if d is not None else []

    def claim(self, namespace: str, name: str) -> dict | None:
        """The claim as the informer has it, or its in-flight version."""
        claim = self.claims.get(f"{namespace}/{name}")
        if claim is None:
            return None
        return self.in_flight.get(claim["metadata"].get("uid", ""), claim)


@dataclass
class _Cycle:
    """One pod's claims for one scheduling cycle."""

    claims: list[dict]
    pending: list[dict] = field(default_factory=list)  # to allocate, in claims order
    selectors: list[tuple[str, dict]] = field(default_factory=list)  # allocated: (claim, nodeSelector)
    #: allocated claims whose binding failed or timed out: no node can use their allocation
    expired: list[str] = field(default_factory=list)
    #: allocated claims some node could not use (upstream's unavailableClaims), for PostFilter
    unavailable: set[str] = field(default_factory=set)
    allocator: Allocator | None = None
    found: dict[str, Placement] = field(default_factory=dict)  # node -> devices for the pending claims
    #: (nodes, find_each's answers) per chunk `filter_nodes` saw: Reserve looks up its one node
    #: there rather than Filter keeping every feasible node's answer by name
    answers: list[tuple[list, list]] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)  # claim uids put in flight
    group: dict | None = None  # the pod's PodGroup, when some claims are the group's
    shared: set[str] = field(default_factory=set)  # uids of the claims reserved for the PodGroup
    written: list[dict] = field(default_factory=list)  # claims whose reservedFor PreBind extended
    #: DRAExtendedResource: the DRA-backed resources the pod asks for (name -> class), the claim
    #: Filter made for each node that lacks some of them, its in-flight uid, and PreBind's claim
    backed: dict[str, str] = field(default_factory=dict)
    extended: dict[str, dict] = field(default_factory=dict)  # node -> its claim
    extended_by_lack: dict[tuple, dict] = field(default_factory=dict)  # resources lacking -> claim
    extended_uid: str = ""
    #: the pod's extended resource claim an earlier cycle left in the API (PostFilter deletes it)
    stale_extended: dict | None = None
    created: dict | None = None
    extended_written: dict | None = None

    def answer(self, node: str) -> Placement | None:
        """Filter's Placement for `node` from the chunks `filter_nodes` answered (the latest wins)."""
        for nodes, hits in reversed(self.answers):
            names = list(map(_name, nodes))
            if node in names:
                hit = hits[names.index(node)]
                return hit if hit.__class__ is Placement else None
        return None


class DynamicResources:
    name = "DynamicResources"

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        if handle is None:  # built without a scheduler (queue tests): pods without claims only
            return
        shared = handle.shared.get(self.name)
        if shared is None:
            shared = handle.shared[self.name] = DRAState(handle)
        self.dra: DRAState = shared
        self.api = handle.client.resource(GROUP, VERSION, "resourceclaims")
        timeout = args.get("bindingTimeout")
        self.binding_timeout = BINDING_TIMEOUT if timeout is None else goduration.parse(timeout)
        timeout = args.get("filterTimeout")
        self.filter_timeout = FILTER_TIMEOUT if timeout is None else goduration.parse(timeout)

    def state_version(self) -> int:
        """How many times the devices counted as allocated changed, in flight (Reserve, PreBind,
        Unreserve) or through the informer: a failed attempt's verdicts hold until it moves."""
        allocated = self.dra.allocated
        return allocated.dropped + len(allocated.changes)

    def _claims(self, pod: dict) -> list[dict]:
        """The pod's claims (each once), or ClaimError."""
        md = pod["metadata"]
        ns = md.get("namespace", "")
        out, seen = [], set()
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, must_own = claim_name(pod, pc)
            if name is None or name in seen:
                continue
            seen.add(name)
            claim = self.dra.claim(ns, name)
            if claim is None:
                raise ClaimError(f'resourceclaim.resource.k8s.io "{name}" not found')
            if claim["metadata"].get("deletionTimestamp"):
                raise ClaimError(f'resourceclaim "{name}" is being deleted')
            if must_own and not owned_by(claim, pod):
                raise ClaimError(f"ResourceClaim {ns}/{name} was not created for pod {ns}/{md['name']} (pod is not owner)")
            out.append(claim)
        return out

    def pre_enqueue(self, info):
        if not info.spec.get("resourceClaims"):
            return None
        try:
            self._claims(info.pod)
        except ClaimError as e:
            return unschedulable(str(e), resolvable=False)
        return None

    def _backed(self, info) -> dict[str, str]:
        """The DRA-backed extended resources the pod asks for (name -> DeviceClass)."""
        scalars = info.requests.scalars
        if not scalars:
            return {}
        mapping = self.dra.extended_mapping()
        return {name: mapping[name] for name, q in scalars.items() if q and name in mapping}

    def pre_filter(self, state, info):
        backed = self._backed(info)
        if not info.spec.get("resourceClaims") and not backed:
            return None, SKIP
        try:
            claims = self._claims(info.pod)
        except ClaimError as e:
            return None, unschedulable(str(e), resolvable=False)
        if not claims and not backed:
            return None, SKIP
        cyc = _Cycle(claims, backed=backed)
        if backed:
            state[EXTENDED_RESOURCES] = backed
            cyc.stale_extended = self.dra.extended_claims.get(info.uid)
        self._group_claims(cyc, info.pod)
        uid = info.uid
        for c in claims:
            status = c.get("status") or {}
            alloc = status.get("allocation")
            if alloc is None:
                cyc.pending.append(c)
                continue
            name = c["metadata"]["name"]
            reserved = status.get("reservedFor") or []
            mine = {uid, cyc.group["metadata"].get("uid")} if c["metadata"].get("uid") in cyc.shared else {uid}
            if not any(r.get("uid") in mine for r in reserved):
                if len(reserved) >= RESERVED_FOR_MAX:
                    return None, unschedulable(f"resourceclaim {name} is in use", resolvable=False)
                taint = self._untolerated_no_execute(alloc)
                if taint is not None:
                    return None, unschedulable(
                        f"resourceclaim {name}: device {taint[0]} has an untolerated NoExecute taint "
                        f"{{{taint[1].get('key', '')}: {taint[1].get('value', '')}}}", resolvable=False)
            if alloc.get("nodeSelector"):
                cyc.selectors.append((name, alloc["nodeSelector"]))
            if self._binding_expired(c, state):
                cyc.expired.append(name)
        if cyc.pending or backed:
            classes = {c["metadata"]["name"]: c for c in self.dra.classes.list()}
            cyc.allocator = Allocator(classes, self.dra.index(), self.dra.allocated, clock=self.handle.clock,
                                      timeout=self.filter_timeout)
        state[_STATE] = cyc
        return None, None

    def _group_claims(self, cyc: _Cycle, pod: dict) -> None:
        """Marks the claims the pod shares with its PodGroup."""
        key = group_key(pod)
        pg = self.handle.podgroups.get(key) if key else None
        if pg is None:
            return
        names = {claim_name(pod, pc)[0] for pc in pod["spec"].get("resourceClaims") or () if group_entry(pg, pc) is not None}
        cyc.shared = {c["metadata"].get("uid", "") for c in cyc.claims if c["metadata"]["name"] in names}
        cyc.group = pg if cyc.shared else None

    def _binding_expired(self, claim: dict, state=None) -> bool:
        """Upstream's Filter check of an allocated claim: a binding failure condition is True, or
        its devices' binding conditions are not all True bindingTimeout after allocationTimestamp
        (read on the injected clock, which the cycle's `state` then notes). Devices without binding
        conditions (nearly all) never expire."""
        alloc = claim["status"]["allocation"]
        if not any(r.get("bindingConditions") for r in _devices(alloc)):
            return False
        try:
            if ready_for_binding(claim):
                return False
        except BindingFailed:
            return True
        stamp = alloc.get("allocationTimestamp")
        if stamp and state is not None:
            state.read_clock = True
        return bool(stamp) and parse_time(stamp) + self.binding_timeout < self.handle.clock.now()

    def _untolerated_no_execute(self, alloc: dict) -> tuple[str, dict] | None:
        for r in (alloc.get("devices") or {}).get("results") or []:
            did = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            for t in self.dra.device_taints(did):
                if t.get("effect") == "NoExecute" and not any(tolerates(tol, t) for tol in r.get("tolerations") or []):
                    return "/".join(did), t
        return None

    def filter(self, state, info, node):
        cyc: _Cycle = state[_STATE]
        if cyc.stale_extended is not None:
            return unschedulable(STALE_EXTENDED, resolvable=False)
        if cyc.selectors or cyc.expired:
            away = [name for name, selector in cyc.selectors if not selector_matches(selector, node.labels, node.name)]
            if away or cyc.expired:
                cyc.unavailable.update(away, cyc.expired)
                return unschedulable(NOT_ON_NODE, resolvable=False)
        if cyc.allocator is None:
            return None
        claims = cyc.pending
        if cyc.backed:
            extended = self._extended_claim(cyc, info.pod, node)
            if extended is not None:
                claims = [*claims, extended]
            if not claims:
                return None
        try:
            found = cyc.allocator.find(node.node, claims)
        except AllocationError as e:  # a broken claim or class (CEL error, no such class): an error, as upstream's
            return Status(Code.ERROR, [str(e)])
        except SearchLimitExceeded:
            state.read_clock = True  # filterTimeout: the next search may finish in time
            return unschedulable(TIMED_OUT)
        if found is None:
            return unschedulable(CANNOT_ALLOCATE)
        cyc.found[node.name] = found
        return None

    def filter_nodes(self, state, info, nodes) -> dict:
        """`filter` over many nodes, asking the allocator about all of them at once."""
        cyc: _Cycle = state[_STATE]
        if cyc.selectors or cyc.expired or cyc.allocator is None or cyc.backed:
            fn = self.filter
            return {i: st for i, n in enumerate(nodes) if (st := fn(state, info, n)) is not None}
        hits = cyc.allocator.find_each(nodes, cyc.pending)
        cyc.answers.append((nodes, hits))
        # one status for every node without the devices: nothing tells them apart
        full = unschedulable(CANNOT_ALLOCATE)
        out = {i: full for i, hit in enumerate(hits) if hit is None}
        if cyc.allocator.failed:  # errors: a node's own status each
            for i, hit in enumerate(hits):
                if isinstance(hit, AllocationError):
                    out[i] = Status(Code.ERROR, [str(hit)])
                elif isinstance(hit, SearchLimitExceeded):
                    state.read_clock = True
                    out[i] = unschedulable(TIMED_OUT)
        return out

    def _extended_claim(self, cyc: _Cycle, pod: dict, node) -> dict | None:
        """The pod's extended resource claim for `node`: requests for the DRA-backed resources the
        node does not advertise itself (one a device plugin serves is NodeResourcesFit's), None when
        it advertises them all. Nodes alike share one claim, kept for Reserve."""
        own = node.allocatable.scalars
        lacking = {name: cls for name, cls in cyc.backed.items() if not own.get(name)}
        if not lacking:
            cyc.extended.pop(node.name, None)
            return None
        key = tuple(sorted(lacking))
        claim = cyc.extended_by_lack.get(key)
        if claim is None:
            md = pod["metadata"]
            cyc.extended_uid = cyc.extended_uid or str(uuid.uuid4())
            claim = cyc.extended_by_lack[key] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "metadata": {
                "name": "<extended-resources>", "namespace": md.get("namespace", ""), "uid": cyc.extended_uid,
                "generateName": f"{md['name']}-extended-resources-",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": md["name"], "uid": md.get("uid", ""),
                                     "controller": True}],
                "annotations": {extended_resources.ANNOTATION: "true"}},
                "spec": {"devices": {"requests": extended_resources.device_requests(pod.get("spec") or {}, lacking)}}}
        cyc.extended[node.name] = claim
        return claim

    def post_filter(self, state, info, statuses):
        """Upstream's PostFilter: when no node fits, one allocated claim some node could not use
        (its nodeSelector left the node out, or its binding failed or timed out) that no other
        pod holds loses its allocation, its reservation by this pod and its device status, so the
        next attempt can allocate it anew; the informer's update of it retries the pod. Else the
        pod's extended resource claim an earlier cycle left behind (a scheduler restart between its
        PreBind and the binding) is deleted, its deletion retrying the pod. Nothing to say for a
        pod without claims."""
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None:
            return None, unschedulable()
        uid = info.uid
        for claim in cyc.claims:
            md = claim["metadata"]
            if md["name"] not in cyc.unavailable or md.get("uid") in self.dra.in_flight:
                continue
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if not reserved or len(reserved) == 1 and reserved[0].get("uid") == uid:
                self.handle.spawn(self._deallocate(claim))
                return None, unschedulable(DEALLOCATED)
        if cyc.stale_extended is not None:
            # upstream's brute force for an allocation that may be stale: delete the claim, and the
            # pod's next cycle (its deletion retries the pod) allocates anew
            self.handle.spawn(self._delete_extended(cyc.stale_extended))
            return None, unschedulable(DELETED)
        return None, unschedulable(STILL_UNSCHEDULABLE)

    def pod_group_post_filter(self, group):
        """PostFilter's rule for a pod group that failed as a whole: the first allocated claim of a
        pending member that some node cannot use as allocated (its nodeSelector leaves the node
        out, or its binding failed or timed out) is deallocated, if nobody holds it or only this
        group does while none of the pods using it is bound."""
        nodes = self.handle.snapshot.nodes
        uid = group.pg["metadata"].get("uid")
        for info in group.pods:
            try:
                claims = self._claims(info.pod)
            except ClaimError:
                continue
            for claim in claims:
                status = claim.get("status") or {}
                alloc = status.get("allocation")
                if alloc is None or claim["metadata"].get("uid") in self.dra.in_flight:
                    continue
                reserved = status.get("reservedFor") or []
                if reserved and (len(reserved) > 1 or reserved[0].get("uid") != uid or self._bound_user(claim)):
                    continue
                selector = alloc.get("nodeSelector")
                if self._binding_expired(claim) or selector and any(
                        not selector_matches(selector, n.labels, n.name) for n in nodes):
                    self.handle.spawn(self._deallocate(claim))
                    return None, unschedulable(DEALLOCATED)
        return None, unschedulable()

    def _bound_user(self, claim: dict) -> bool:
        """Whether a pod naming the claim is bound to a node."""
        md = claim["metadata"]
        pods = self.handle.pods
        return any(((pods.get(key) or {}).get("spec") or {}).get("nodeName")
                   for key in self.dra._users.get((md.get("namespace", ""), md["name"]), ()))

    async def _deallocate(self, claim: dict) -> None:
        """The claim as this cycle saw it (its resourceVersion a precondition) without allocation,
        reservedFor and devices; a conflict leaves it to the next attempt."""
        md = claim["metadata"]
        status = {k: v for k, v in (claim.get("status") or {}).items() if k not in ("allocation", "reservedFor", "devices")}
        try:
            await self.api.update({**claim, "status": status}, subresource="status")
        except APIError as e:
            log.info("deallocating claim %s/%s: %s", md.get("namespace"), md["name"], e.message)

    def reserve(self, state, info, node: str):
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None or not cyc.pending and node not in cyc.extended:
            return None
        found = cyc.found.get(node) or cyc.answer(node)
        if found is None:
            return Status(Code.ERROR, [f"no allocation was computed for node {node}"])
        try:
            results = cyc.allocator.results(found)
        except (AllocationError, SearchLimitExceeded) as e:
            return Status(Code.ERROR, [str(e)])
        stamp = self.handle.clock.rfc3339()
        claims = [*cyc.pending, cyc.extended[node]] if node in cyc.extended else cyc.pending
        for claim, alloc in zip(claims, results):
            uid = claim["metadata"].get("uid", "")
            status = {**(claim.get("status") or {}), "allocation": {**alloc, "allocationTimestamp": stamp}}
            self.dra.set_in_flight(uid, {**claim, "status": status})
            cyc.reserved.append(uid)
        return None

    def unreserve(self, state, info, node: str) -> None:
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None:
            return
        for uid in cyc.reserved:
            self.dra.drop_in_flight(uid)
        cyc.reserved.clear()
        if cyc.written:
            written, cyc.written = cyc.written, []
            asyncio.get_running_loop().create_task(self._release(written, info.uid))
        if cyc.created is not None:
            created, cyc.created = cyc.created, None
            asyncio.get_running_loop().create_task(self._delete_extended(created))

    async def _delete_extended(self, claim: dict) -> None:
        """Unreserve's end of an extended resource claim PreBind created: without its finalizer,
        then gone, so its devices are free again."""
        md = claim["metadata"]
        try:
            cur = await self.api.get(md["name"], md.get("namespace"))
            fins = cur["metadata"].get("finalizers") or []
            if FINALIZER in fins:
                await self.api.update({**cur, "metadata": {**cur["metadata"], "finalizers": [f for f in fins if f != FINALIZER]}})
            await self.api.delete(md["name"], md.get("namespace"))
        except APIError as e:
            log.info("deleting extended resource claim %s/%s: %s", md.get("namespace"), md["name"], e.message)

    async def _release(self, claims: list[dict], pod_uid: str) -> None:
        """Takes the pod back out of reservedFor after a failed binding."""
        for c in claims:
            md = c["metadata"]
            try:
                cur = await self.api.get(md["name"], md.get("namespace"))
                reserved = (cur.get("status") or {}).get("reservedFor") or []
                keep = [r for r in reserved if r.get("uid") != pod_uid]
                if len(keep) != len(reserved):
                    await self.api.update({**cur, "status": {**cur["status"], "reservedFor": keep}}, subresource="status")
            except APIError as e:
                log.info("unreserving claim %s/%s: %s", md.get("namespace"), md["name"], e.message)

    def pre_bind_pre_flight(self, state, info, node: str) -> bool:
        """PreBind has work for a pod with claims or DRA-backed extended resources (upstream's
        PreBindPreFlight: its claims, the in-memory extended resource claim included, are not
        none), whatever `node` serves itself."""
        return _STATE in state

    async def pre_bind(self, state, info, node: str):
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None:
            return None
        for claim in cyc.claims:
            if (st := await self._bind_claim(cyc, claim, info.pod)) is not None:
                return st
        if node in cyc.extended and (st := await self._bind_extended(cyc, cyc.extended[node], info.pod)):
            return st
        return await self._await_binding_conditions(cyc, info.pod, node)

    async def _bind_extended(self, cyc: _Cycle, claim: dict, pod: dict) -> Status | None:
        """Creates the pod's extended resource claim, writes its in-flight allocation with the pod
        in reservedFor (after the delete-protection finalizer), and records the claim and which
        container each request serves in the pod's status.extendedResourceClaimStatus. A failed
        write is an error in upstream's words (a quota refusing the claim is the one most seen)."""
        md = claim["metadata"]
        alloc = self.dra.in_flight[md["uid"]]["status"]["allocation"]
        meta = {k: v for k, v in md.items() if k not in ("name", "uid")}
        try:
            created = cyc.created = await self.api.create({"apiVersion": claim["apiVersion"], "kind": claim["kind"],
                                                           "metadata": {**meta, "finalizers": [FINALIZER]},
                                                           "spec": claim["spec"]})
        except APIError as e:
            # upstream names the claim its failed Create returned, an empty one: no name at all
            return Status(Code.ERROR, [f"create claim for extended resources : {e.message}"])
        try:
            written = await self.api.update({**created, "status": {"allocation": alloc,
                                                                   "reservedFor": [consumer(pod, None)]}},
                                            subresource="status")
        except APIError as e:
            return Status(Code.ERROR, [f"add allocation and reservation to claim {_key(created)}: {e.message}"])
        uid = written["metadata"]["uid"]
        self.dra.set_in_flight(uid, written)
        self.dra.drop_in_flight(md["uid"])
        cyc.reserved.append(uid)
        cyc.extended_written = written
        pmd = pod["metadata"]
        mappings = extended_resources.request_mappings(pod.get("spec") or {}, claim["spec"]["devices"]["requests"])
        try:
            await self.handle.api.pods.patch(pmd["name"], {"status": {"extendedResourceClaimStatus": {
                "requestMappings": mappings, "resourceClaimName": written["metadata"]["name"]}}},
                "application/merge-patch+json", namespace=pmd.get("namespace"), subresource="status")
        except APIError as e:
            return Status(Code.ERROR, [f"update pod {_key(pod)} ExtendedResourceClaimStatus: {e.message}"])
        return None

    async def _await_binding_conditions(self, cyc: _Cycle, pod: dict, node: str) -> Status | None:
        """Holds the binding until the devices with binding conditions report them all True, as
        upstream's PreBind polls (every 5 s, up to the binding timeout); a true failure condition
        or the timeout fails it, and Unreserve takes the pod back out of the claims."""
        written = {c["metadata"].get("uid"): c for c in cyc.written}

        def latest(c: dict) -> dict:
            md = c["metadata"]
            return self.dra.claims.get(f"{md.get('namespace', '')}/{md['name']}") or c

        claims = [written.get(c["metadata"].get("uid")) or latest(c) for c in cyc.claims]
        if cyc.extended_written is not None:
            claims.append(cyc.extended_written)
        if not any(r.get("bindingConditions") for c in claims for r in _devices((c.get("status") or {}).get("allocation") or {})):
            return None
        await self.handle.api.event(pod, "Normal", "BindingConditionsPending",
                                    f"waiting for binding conditions for device on node {node}")
        clock = self.handle.clock
        deadline = clock.monotonic() + self.binding_timeout
        while True:
            try:
                if all(ready_for_binding(c) for c in claims):
                    return None
            except BindingFailed as e:
                return Status(Code.ERROR, [str(e)])
            if clock.monotonic() >= deadline:
                return Status(Code.ERROR, ["device binding timeout"])
            await clock.sleep(BINDING_POLL)
            claims = [latest(c) for c in claims]

    async def _bind_claim(self, cyc: _Cycle, claim: dict, pod: dict) -> Status | None:
        uid = claim["metadata"].get("uid", "")
        if uid not in cyc.shared:
            return await self._write_claim(cyc, claim, pod, uid in cyc.reserved)
        async with self.dra.locks.setdefault(uid, asyncio.Lock()):
            # any member holding the group's in-flight allocation may write it
            return await self._write_claim(cyc, claim, pod, uid in self.dra.in_flight)

    async def _write_claim(self, cyc: _Cycle, claim: dict, pod: dict, in_flight: bool) -> Status | None:
        """Writes the claim's in-flight allocation (after the delete-protection finalizer) and the
        pod into reservedFor; a failed write is an error in upstream's bindClaim's words."""
        md = claim["metadata"]
        uid = md.get("uid", "")
        alloc = self.dra.in_flight[uid]["status"]["allocation"] if in_flight else None
        who = consumer(pod, cyc.group if uid in cyc.shared else None)
        doing = f"add {'allocation and ' if alloc is not None else ''}reservation to claim {_key(claim)}"
        try:
            cur = await self.api.get(md["name"], md.get("namespace"))
        except APIError as e:
            return Status(Code.ERROR, [f"{doing}: {e.message}"])
        if cur["metadata"].get("uid") != uid:
            return Status(Code.ERROR, [f"resourceclaim {md['name']} was replaced"])
        status = dict(cur.get("status") or {})
        reserved = status.get("reservedFor") or []
        if any(r.get("uid") == who["uid"] for r in reserved):
            return None
        if alloc is None and status.get("allocation") is None:
            return unschedulable(f"resourceclaim {md['name']} is not allocated yet")
        if alloc is not None:
            if status.get("allocation") is not None:
                return Status(Code.ERROR, [f"claim {_key(claim)} got allocated elsewhere in the meantime"])
            finalizers = cur["metadata"].get("finalizers") or []
            if FINALIZER not in finalizers:
                try:
                    cur = await self.api.update({**cur, "metadata": {**cur["metadata"],
                                                                     "finalizers": [*finalizers, FINALIZER]}})
                except APIError as e:
                    return Status(Code.ERROR, [f"add finalizer to claim {_key(claim)}: {e.message}"])
            status["allocation"] = alloc
        status["reservedFor"] = [*reserved, who]
        try:
            written = await self.api.update({**cur, "status": status}, subresource="status")
        except APIError as e:
            return Status(Code.ERROR, [f"{doing}: {e.message}"])
        cyc.written.append(written)
        if uid in self.dra.in_flight:
            self.dra.set_in_flight(uid, written)
        return None

    def events_to_register(self) -> list[Registration]:
        users = self.dra._users if self.handle is not None else None

        def claim_hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterClaimChange: devices were freed, or the pod's own claim
            was created or its status changed (an allocation, reservedFor; not a finalizer or a
            label). Whether it is the pod's is read from the index of claim users (one lookup), as
            the queue asks this of every pod DynamicResources turned away, once per claim event.
            A pod waiting in PreEnqueue for its claim is retried apart (DRAState._retry_gated); one
            whose leftover extended resource claim PostFilter deleted is retried by its deletion."""
            if _allocated(old) and not _allocated(new):
                return Hint.QUEUE  # devices were freed
            if new is None:
                return Hint.QUEUE if _extended_owner(old) == pod["metadata"].get("uid") else Hint.SKIP
            if not _created_or_status_changed(old, new):
                return Hint.SKIP
            md = new["metadata"]
            if users is None:
                mine = md.get("namespace") == pod["metadata"].get("namespace") and md["name"] in claim_names(pod)
            else:
                named_by = users.get((md.get("namespace", ""), md["name"]))
                mine = named_by is not None and _key(pod) in named_by
            return Hint.QUEUE if mine else Hint.SKIP

        def claim_targets(old, new):
            """The pods claim_hint can queue: any when devices were freed, else those naming the claim
            when it is new or its status changed, the owner of a deleted extended resource claim."""
            if _allocated(old) and not _allocated(new):
                return None
            if new is None:
                owner = _extended_owner(old)
                return () if owner is None else [f"{old['metadata'].get('namespace', '')}/{r['name']}" for r in
                                                 old["metadata"]["ownerReferences"] if r.get("uid") == owner]
            if not _created_or_status_changed(old, new):
                return ()
            md = new["metadata"]
            return users.get((md.get("namespace", ""), md["name"]), ())

        return [Registration(ClusterEvent(CLAIM, Action.ALL), claim_hint, claim_targets if users is not None else None),
                Registration(ClusterEvent(SLICE, Action.ALL)),
                Registration(ClusterEvent(TAINT_RULE, Action.ALL)),
                Registration(ClusterEvent(DEVICE_CLASS, Action.ADD | Action.UPDATE)),
                Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL))]
