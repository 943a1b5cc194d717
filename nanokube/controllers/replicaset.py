"""ReplicaSet controller: keeps `spec.replicas` active pods matching the
selector, owned through a controller ownerReference.

Also home of the pod helpers the Deployment and Job controllers share
(expectations, readiness, pod construction, controller refs), so that all
three count and create pods the same way.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cmp_to_key

from ..machinery.conditions import find_condition, remove_condition
from ..machinery.deletioncost import pod_deletion_cost
from ..machinery.errors import NAMESPACE_TERMINATING, APIError, has_status_cause
from ..machinery.meta import controller_ref
from ..machinery.podphase import pod_is_terminal
from ..machinery.selectors import matches_labels, selector_from_object
from ..client.informer import InformerFactory, key_of
from ..clock import Clock, format_time, parse_time
from .base import Controller, in_turns
from .own_writes import OwnWrites
from ..client.record import CoreEventRecorder
from .slow_start import slow_start_batch

BURST = 500  # upstream's burstReplicas: the most pods one sync creates or deletes
EXPECTATIONS_TTL = 300.0


# --- shared pod helpers ---------------------------------------------------------

@dataclass
class _Pending:
    adds: int
    dels: int
    at: float


class Expectations:
    """Creates and deletes a controller issued but its informer has not yet
    shown: while any are outstanding (and not expired) the controller does not
    recount, so a lagging cache never makes it over-create or over-delete."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._pending: dict[str, _Pending] = {}

    def expect(self, key: str, adds: int = 0, dels: int = 0) -> None:
        self._pending[key] = _Pending(adds, dels, self.clock.monotonic())

    def observed_add(self, key: str) -> None:
        if p := self._pending.get(key):
            p.adds -= 1

    def observed_del(self, key: str) -> None:
        if p := self._pending.get(key):
            p.dels -= 1

    def satisfied(self, key: str) -> bool:
        p = self._pending.get(key)
        if p is None or (p.adds <= 0 and p.dels <= 0):
            return True
        return self.clock.monotonic() - p.at > EXPECTATIONS_TTL

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)

    def expect_deletions(self, key: str, pods: list[dict]) -> None:
        """Expect `pods` to go; this counter only counts them."""
        self.expect(key, dels=len(pods))

    def observed_deletion(self, key: str, pod: dict) -> None:
        """`pod` went, or will not (its delete failed)."""
        self.observed_del(key)


class UIDTrackingExpectations(Expectations):
    """UIDTrackingControllerExpectations (the ReplicaSet's): the deletions expected are the pods' own keys
    (namespace/name), so a pod counts once whether its deletionTimestamp or its removal is seen first, and
    a pod the controller did not delete counts not at all."""

    def __init__(self, clock: Clock):
        super().__init__(clock)
        self._deleting: dict[str, set[str]] = {}

    def expect_deletions(self, key: str, pods: list[dict]) -> None:
        self._deleting[key] = names = {key_of(p) for p in pods}
        self.expect(key, dels=len(names))

    def observed_deletion(self, key: str, pod: dict) -> None:
        names = self._deleting.get(key)
        if names and (name := key_of(pod)) in names:
            names.discard(name)
            self.observed_del(key)

    def forget(self, key: str) -> None:
        super().forget(key)
        self._deleting.pop(key, None)


def controller_refs(old: dict, pod: dict) -> tuple[dict | None, dict | None]:
    """The controller references of an update's old and new object, the new one's looked up
    only when it has ownerReferences, and once when they did not change (most updates)."""
    refs = pod["metadata"].get("ownerReferences")
    ref = controller_ref(pod) if refs else None
    if old["metadata"].get("ownerReferences") == refs:
        return ref, ref
    return controller_ref(old), ref


def owned_by(kind: str) -> Callable[[dict, dict | None], str | None]:
    """The namespace/name key of the `kind` controller a pod's reference names, else None."""
    def key(pod: dict, ref: dict | None) -> str | None:
        if ref is not None and ref.get("kind") == kind:
            return f"{pod['metadata']['namespace']}/{ref['name']}"
        return None
    return key


def resolving(inf, kind: str) -> Callable[[dict, dict | None], str | None]:
    """resolveControllerRef as a key: that of the `kind` controller a pod's reference names, only while
    `inf` holds it with the reference's uid (a successor of the same name controls none of its pods)."""
    named = owned_by(kind)

    def key(pod: dict, ref: dict | None) -> str | None:
        if (k := named(pod, ref)) is None or (owner := inf.get(k)) is None:
            return None
        return k if owner["metadata"]["uid"] == ref.get("uid") else None
    return key


def pod_added(pod: dict, owner_key: Callable[[dict, dict | None], str | None], enqueue: Callable[[str], None],
              enqueue_adopters: Callable[[dict], None], deleted: Callable[[dict], None],
              observed_add: Callable[[str], None] | None = None) -> None:
    """addPod of a controller of pods (ReplicaSet, DaemonSet, StatefulSet): a pod already being deleted
    when first seen (after a restart) counts as its deletion, never as a creation; else its owner is
    synced (an expected creation `observed_add`), or an orphan's possible adopters."""
    if pod["metadata"].get("deletionTimestamp"):
        deleted(pod)
        return
    ref = controller_ref(pod)
    if ref is None:
        enqueue_adopters(pod)
    elif key := owner_key(pod, ref):
        if observed_add is not None:
            observed_add(key)
        enqueue(key)


def pod_updated(old: dict, pod: dict, owner_key: Callable[[dict, dict | None], str | None],
                enqueue: Callable[[str], None], enqueue_adopters: Callable[[dict], None]) -> None:
    """updatePod of a controller of pods (ReplicaSet, DaemonSet, StatefulSet, Job; the Deployment's
    updateReplicaSet reads alike): the owner of each side is synced; an orphan's possible adopters only when its labels or controller reference
    changed, since nothing else can make it adoptable (most pod updates are status writes)."""
    old_ref, ref = controller_refs(old, pod)
    if old_ref != ref and (old_key := owner_key(old, old_ref)):
        enqueue(old_key)
    if ref is not None:
        if key := owner_key(pod, ref):
            enqueue(key)
    elif old_ref is not None or old["metadata"].get("labels") != pod["metadata"].get("labels"):
        enqueue_adopters(pod)


def selecting(inf, obj: dict, selector_of: Callable[[dict], list | None]) -> list[dict]:
    """getPodReplicaSets and kin: the objects of `inf` in `obj`'s namespace (from its namespace
    index, not a walk of the cluster's) whose selector (`selector_of`) matches `obj`'s labels. A
    namespace with none of them (most pod events) costs one lookup."""
    found = inf.list_namespace(obj["metadata"]["namespace"])
    if found:
        labels = obj["metadata"].get("labels")
        found = [o for o in found if matches_labels(selector_of(o), labels)]
    return found


def owner_reference(owner: dict, api_version: str, kind: str) -> dict:
    md = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": md["name"], "uid": md["uid"],
            "controller": True, "blockOwnerDeletion": True}


def pod_is_active(pod: dict) -> bool:
    """FilterActivePods: neither finished nor being deleted."""
    return not pod_is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def pod_is_ready(pod: dict) -> bool:
    c = find_condition((pod.get("status") or {}).get("conditions"), "Ready")
    return bool(c and c.get("status") == "True")


def pod_available_in(pod: dict, min_ready: int, now: float) -> float | None:
    """Seconds until a ready pod counts as available (0: it already does);
    None when it is not ready."""
    c = find_condition((pod.get("status") or {}).get("conditions"), "Ready")
    if not c or c.get("status") != "True":
        return None
    if min_ready <= 0 or not c.get("lastTransitionTime"):
        return 0.0
    return max(0.0, parse_time(c["lastTransitionTime"]) + min_ready - now)


def pod_from_template(template: dict, owner: dict, ref: dict, generate_name: str) -> dict:
    """A pod as upstream's GetPodFromTemplate builds it."""
    tmd = template.get("metadata") or {}
    md: dict = {"generateName": generate_name, "namespace": owner["metadata"]["namespace"], "ownerReferences": [ref]}
    for f in ("labels", "annotations", "finalizers"):
        if tmd.get(f):
            md[f] = dict(tmd[f]) if isinstance(tmd[f], dict) else list(tmd[f])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": dict(template.get("spec") or {})}


_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True, slots=True)
class ScaleDownRank:
    """What upstream's ActivePodsWithRanks compares of one pod, read once."""
    node: str
    phase: int
    ready: bool
    cost: int
    colocated: int  # active related pods on the pod's node
    ready_at: float | None
    restarts: tuple[int, int]  # regular containers', then sidecars'
    created: float | None
    uid: str


def scale_down_rank(pod: dict, colocated: int) -> ScaleDownRank:
    md, spec, st = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    ready = find_condition(st.get("conditions"), "Ready")
    is_ready = bool(ready and ready.get("status") == "True")
    sidecar_restarts = 0
    if init_statuses := st.get("initContainerStatuses"):
        sidecars = {c.get("name") for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"}
        sidecar_restarts = max((c.get("restartCount", 0) for c in init_statuses if c.get("name") in sidecars), default=0)
    return ScaleDownRank(
        spec.get("nodeName") or "", _PHASE_ORDER.get(st.get("phase"), 0), is_ready,
        pod_deletion_cost(md.get("annotations")), colocated,
        _at(ready.get("lastTransitionTime")) if is_ready else None,
        (max((c.get("restartCount", 0) for c in st.get("containerStatuses") or []), default=0), sidecar_restarts),
        _at(md.get("creationTimestamp")), md.get("uid") or "")


def _at(t: str | None) -> float | None:
    return parse_time(t) if t else None


def _sign(x) -> int:
    return (x > 0) - (x < 0)


def _age_bucket(t: float, now: float) -> int:
    """floor(log2(age in ns)), -1 for no age: pods whose ages share a bucket count as the same age."""
    ns = round((now - t) * 1e9)
    return int(math.log2(ns)) if ns > 0 else -1


def _newer_first(a: float | None, b: float | None, uid_a: str, uid_b: str, now: float) -> int:
    """LogarithmicScaleDown (GA): a missing time first, then the younger by age bucket, a tie in the
    bucket going to the smaller uid (a random but stable spread)."""
    if a == b:
        return 0
    if a is None or b is None:
        return -1 if a is None else 1
    diff = _age_bucket(a, now) - _age_bucket(b, now)
    return _sign(diff) if diff else (uid_a > uid_b) - (uid_a < uid_b)


def scale_down_order(a: ScaleDownRank, b: ScaleDownRank, now: float) -> int:
    """ActivePodsWithRanks' Less as a comparison (negative: `a` goes first): unassigned before
    assigned, Pending before Unknown before Running, not ready before ready, lower deletion cost,
    more colocated related pods, ready for less time, more restarts, newer."""
    if a.node != b.node and not (a.node and b.node):
        return -1 if not a.node else 1
    for x, y in ((a.phase, b.phase), (a.ready, b.ready), (a.cost, b.cost), (b.colocated, a.colocated)):
        if x != y:
            return -1 if x < y else 1
    if a.ready and b.ready and (order := _newer_first(a.ready_at, b.ready_at, a.uid, b.uid, now)):
        return order
    if a.restarts != b.restarts:
        return -1 if a.restarts > b.restarts else 1
    return _newer_first(a.created, b.created, a.uid, b.uid, now)


async def delete_pods(pods, expectations: Expectations, key, victims: list[dict], recorder: CoreEventRecorder,
                      owner: dict, expect: bool = True) -> tuple[list[dict], Exception | None]:
    """Delete `victims` (by uid) at once, expecting each deletion (`expect`: set here, not by the caller)
    so the controller never acts twice on a cache that has not seen them go yet; each outcome is an
    Event on `owner`. A failed delete comes off the expectations without stopping the others. Returns
    the victims deleted (one already gone counts, as upstream's) and the first failure, for the
    caller to raise once it has counted the others (the Job's status.active)."""
    if expect:
        expectations.expect_deletions(key, victims)

    async def delete(p: dict) -> None:
        try:
            await pods.delete(p["metadata"]["name"], p["metadata"]["namespace"], preconditions={"uid": p["metadata"]["uid"]})
        except APIError as e:
            expectations.observed_deletion(key, p)
            if e.code not in (404, 409):
                await recorder.emit(owner, "Warning", "FailedDelete", f"Error deleting: {e.message}")
                raise
        else:
            await recorder.emit(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {p['metadata']['name']}")
    results = await asyncio.gather(*(delete(p) for p in victims), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, Exception):
            raise r  # a cancellation stops the sync
    deleted = [p for p, r in zip(victims, results) if r is None]
    return deleted, next((r for r in results if r is not None), None)


async def create_pods(pods, expectations: Expectations, key, bodies: list[dict], recorder: CoreEventRecorder,
                      owner: dict, expect: bool = True,
                      answered: Callable[[bool], None] | None = None) -> tuple[int, Exception | None]:
    """Create `bodies` in slow-start batches (slow_start.py), as upstream's manageReplicas, syncNodes
    and manageJob do, each outcome an Event on `owner`. A create refused because the namespace is
    being deleted counts as made and reports nothing: every other would be refused alike. The
    creations not made (failed, or never begun after a failed batch) come off the expectations
    (`expect`: set here, not by the caller), so the next sync tries them again. Returns how many
    were made and the first failure, for the caller to raise once its status is written. `answered(ok)`
    hears of each create but those refused for the namespace (the Job's job_pods_creation_total)."""
    if expect:
        expectations.expect(key, adds=len(bodies))

    async def create(i: int) -> None:
        try:
            pod = await pods.create(bodies[i])
        except Exception as e:
            if has_status_cause(e, NAMESPACE_TERMINATING):
                return
            if answered is not None:
                answered(False)
            await recorder.emit(owner, "Warning", "FailedCreate", f"Error creating: {getattr(e, 'message', e)}")
            raise
        if answered is not None:
            answered(True)
        await recorder.emit(owner, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
    made, failure = await slow_start_batch(len(bodies), create)
    for _ in range(len(bodies) - made):
        expectations.observed_add(key)
    return made, failure


async def claim_objects(client, candidates: list[dict], owner: dict, selector, api_version: str, kind: str,
                        member=None, finalizer: str | None = None) -> list[dict]:
    """ControllerRefManager: the objects `owner` controls: its own that still
    match the selector (and `member`), plus orphans that match (adopted), less
    its own that no longer match (released). A `finalizer` (the Job's tracking
    one) is added on adoption and removed on release, in the same patch. Lets the
    loop run every TURN candidates (in_turns)."""
    md = owner["metadata"]
    owned = []
    async for part in in_turns(candidates):
        for obj in part:
            omd = obj["metadata"]
            if omd.get("namespace") != md["namespace"]:
                continue
            ref = controller_ref(obj)
            matches = matches_labels(selector, omd.get("labels")) and (member is None or member(obj))
            if ref is not None and ref["uid"] == md["uid"]:
                if matches:
                    owned.append(obj)
                elif not omd.get("deletionTimestamp"):
                    refs = [r for r in omd.get("ownerReferences") or [] if r["uid"] != md["uid"]]
                    release = {"ownerReferences": refs or None, "uid": omd["uid"]}
                    if finalizer in (fins := omd.get("finalizers") or []):
                        release["finalizers"] = [f for f in fins if f != finalizer] or None
                    await ignore_missing(client.patch(omd["name"], {"metadata": release}, namespace=omd["namespace"]))
            elif ref is None and matches and not omd.get("deletionTimestamp") and not md.get("deletionTimestamp"):
                refs = list(omd.get("ownerReferences") or []) + [owner_reference(owner, api_version, kind)]
                adopt = {"ownerReferences": refs, "uid": omd["uid"]}
                if finalizer and finalizer not in (fins := omd.get("finalizers") or []):
                    adopt["finalizers"] = [*fins, finalizer]
                try:
                    owned.append(await client.patch(omd["name"], {"metadata": adopt}, namespace=omd["namespace"]))
                except APIError as e:
                    if e.code not in (404, 409, 422):
                        raise
    return owned


async def ignore_missing(coro) -> None:
    try:
        await coro
    except APIError as e:
        if e.code not in (404, 409):
            raise


# --- the controller -------------------------------------------------------------

class ReplicaSetController(Controller):
    """Also runs ReplicationControllers (as upstream, which wraps them as
    ReplicaSets): a subclass names the resource and how its selector reads."""

    name = "replicaset-controller"
    queue_name = "replicaset"
    workers = 2
    kind = "ReplicaSet"
    api_version = "apps/v1"
    resource = ("apps", "v1", "replicasets")
    component = "replicaset-controller"  # the events' source

    def __init__(self, client, clock: Clock | None = None, informers: InformerFactory | None = None):
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.rs = client.resource(*self.resource)
        self.pods = client.resource("", "v1", "pods")
        self.recorder = CoreEventRecorder(client, self.component, self.clock)
        self.rs_inf = self.informer_factory.informer(self.rs)
        self.pod_inf = self.informer_factory.informer(self.pods)
        self.expectations = UIDTrackingExpectations(self.clock)
        self.own_writes = OwnWrites()
        self._owner_key = resolving(self.rs_inf, self.kind)
        self.rs_inf.add_handlers(on_add=self._enqueue, on_update=self._rs_updated, on_delete=self._enqueue)
        self.pod_inf.add_handlers(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)

    def informers(self):
        return [self.rs_inf, self.pod_inf]

    def _enqueue(self, rs: dict) -> None:
        self.queue.add(key_of(rs))

    def _rs_updated(self, old: dict, rs: dict) -> None:
        self.own_writes.seen(key_of(rs), rs)
        self._enqueue(rs)

    def selector(self, rs: dict):
        """The parsed label selector of `rs`."""
        return selector_from_object(rs["spec"].get("selector"))

    def _enqueue_matching(self, pod: dict) -> None:
        """An orphan may be adopted by any ReplicaSet selecting it."""
        for rs in selecting(self.rs_inf, pod, self.selector):
            self._enqueue(rs)

    def _pod_added(self, pod: dict) -> None:
        pod_added(pod, self._owner_key, self.queue.add, self._enqueue_matching, self._pod_deleted,
                  self.expectations.observed_add)

    def _pod_updated(self, old: dict, pod: dict) -> None:
        """updatePod (the informer hands over no update with the same resourceVersion, upstream's first
        check): a pod given its deletionTimestamp counts as deleted at once, so its set replaces it without
        waiting out the grace period (the old side too when the labels changed with it)."""
        if pod["metadata"].get("deletionTimestamp"):
            self._pod_deleted(pod)
            if old["metadata"].get("labels") != pod["metadata"].get("labels"):
                self._pod_deleted(old)
            return
        pod_updated(old, pod, self._owner_key, self.queue.add, self._enqueue_matching)

    def _pod_deleted(self, pod: dict) -> None:
        if key := self._owner_key(pod, controller_ref(pod)):
            self.expectations.observed_deletion(key, pod)
            self.queue.add(key)

    async def sync(self, key: str) -> None:
        """syncReplicaSet: a set being deleted creates and deletes no pods but still reports them (its
        status follows its pods until it is gone); its expectations go with the set itself."""
        rs = self.own_writes.latest(key, self.rs_inf.get(key))
        if rs is None:
            self.expectations.forget(key)
            self.own_writes.forget(key)
            return
        needs_sync = self.expectations.satisfied(key)  # before the list, as upstream's (in_turns)
        pods = self.pod_inf.list_namespace(rs["metadata"]["namespace"])
        active = await self._claim(rs, pods)
        failure = None
        if needs_sync and not rs["metadata"].get("deletionTimestamp"):
            try:
                await self._manage(key, rs, active)
            except APIError as e:
                failure = e
        await self._update_status(rs, active, failure, await self._terminating(rs, pods))
        if failure is not None:
            raise failure

    async def _claim(self, rs: dict, pods: list[dict]) -> list[dict]:
        """The active pods `rs` controls, as upstream's claimPods over FilterActivePods: a finished or
        terminating pod is neither adopted nor released."""
        active = [p async for part in in_turns(pods) for p in part if pod_is_active(p)]
        return await claim_objects(self.pods, active, rs, self.selector(rs), self.api_version, self.kind)

    async def _terminating(self, rs: dict, pods: list[dict]) -> int | None:
        """status.terminatingReplicas (DeploymentReplicaSetTerminatingReplicas, on by default since 1.35):
        the pods `rs` controls (by uid) and selects that are being deleted and not yet finished."""
        uid, selector = rs["metadata"]["uid"], self.selector(rs)
        return sum([1 async for part in in_turns(pods) for p in part
                    if p["metadata"].get("deletionTimestamp") and not pod_is_terminal(p)
                    and (controller_ref(p) or {}).get("uid") == uid and matches_labels(selector, p["metadata"].get("labels"))])

    async def _manage(self, key: str, rs: dict, active: list[dict]) -> None:
        diff = len(active) - rs["spec"].get("replicas", 1)
        if diff < 0:
            pod = pod_from_template(rs["spec"].get("template") or {}, rs,
                                    owner_reference(rs, self.api_version, self.kind), f"{rs['metadata']['name']}-")
            _, failure = await create_pods(self.pods, self.expectations, key, [pod] * min(-diff, BURST), self.recorder, rs)
            if failure is not None:
                raise failure
        elif diff > 0:
            victims = await self._pods_to_delete(rs, active, min(diff, BURST))
            _, failure = await delete_pods(self.pods, self.expectations, key, victims, self.recorder, rs)
            if failure is not None:
                raise failure

    async def _pods_to_delete(self, rs: dict, active: list[dict], n: int) -> list[dict]:
        """getPodsToDelete: the first `n` of `active` in ActivePodsWithRanks' order, a pod ranked by the
        active pods on its node that the sets sharing `rs`'s controller (a Deployment's old and new
        sets) select; a set no controller owns has no related pods, so that rank ties."""
        on_node: Counter[str] = Counter()
        if (owner := controller_ref(rs)) is not None:
            ns = rs["metadata"]["namespace"]
            selectors = [self.selector(other) for other in self.rs_inf.list_namespace(ns)
                         if (controller_ref(other) or {}).get("uid") == owner["uid"]]
            async for part in in_turns(self.pod_inf.list_namespace(ns)):
                for p in part:
                    if pod_is_active(p) and any(matches_labels(s, p["metadata"].get("labels")) for s in selectors):
                        on_node[(p.get("spec") or {}).get("nodeName") or ""] += 1
        ranks = [scale_down_rank(p, on_node[(p.get("spec") or {}).get("nodeName") or ""])
                 async for part in in_turns(active) for p in part]
        now = self.clock.now()
        order = cmp_to_key(lambda i, j: scale_down_order(ranks[i], ranks[j], now))
        return [active[i] for i in heapq.nsmallest(n, range(len(active)), key=order)]

    def _failure_condition(self, rs: dict, status: dict, active: list[dict], failure: APIError | None) -> list[dict]:
        """ReplicaFailure is set when creating or deleting pods fails and
        dropped once managing them works again."""
        conds = list(status.get("conditions") or [])
        has = find_condition(conds, "ReplicaFailure") is not None
        if failure is not None and not has:
            reason = "FailedCreate" if len(active) < rs["spec"].get("replicas", 1) else "FailedDelete"
            conds.append({"type": "ReplicaFailure", "status": "True", "reason": reason, "message": failure.message,
                          "lastTransitionTime": format_time(self.clock.now())})
        elif failure is None and has:
            conds = remove_condition(conds, "ReplicaFailure")
        return conds

    async def _update_status(self, rs: dict, active: list[dict], failure: APIError | None = None,
                             terminating: int | None = None) -> None:
        spec = rs["spec"]
        tlabels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = spec.get("minReadySeconds", 0)
        now = self.clock.now()
        waits = [pod_available_in(p, min_ready, now) async for part in in_turns(active) for p in part]
        labeled = [1 async for part in in_turns(active) for p in part
                   if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in tlabels.items())]
        status = dict(rs.get("status") or {})
        status.update({
            "replicas": len(active),
            "fullyLabeledReplicas": len(labeled),
            "readyReplicas": sum(1 for w in waits if w is not None),
            "availableReplicas": sum(1 for w in waits if w == 0),
            "observedGeneration": rs["metadata"].get("generation", 1),
        })
        if terminating is not None:
            status["terminatingReplicas"] = terminating
        status["conditions"] = self._failure_condition(rs, status, active, failure)
        if not status["conditions"]:
            status.pop("conditions")
        pending = [w for w in waits if w]
        if pending:
            self.queue.add_after(key_of(rs), min(pending) + 0.05)
        for f in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            if not status[f]:
                status.pop(f)
        if status == (rs.get("status") or {}):
            return
        await self._write_status(rs, status)

    async def _write_status(self, rs: dict, status: dict) -> None:
        """updateReplicaSetStatus: a conflict (another writer, the Deployment controller scaling the set)
        reads the set again and tries once more (upstream's statusUpdateRetries) before the sync fails
        and retries with backoff; the status stays the one computed, its observedGeneration that of the
        set it was computed from. A set gone, or replaced by another of its name, needs none."""
        key, uid = key_of(rs), rs["metadata"]["uid"]
        for last in (False, True):
            try:
                self.own_writes.wrote(key, rs, await self.rs.update({**rs, "status": status}, subresource="status"))
                return
            except APIError as e:
                if e.code == 404:
                    return
                if e.code != 409 or last:
                    raise
            try:
                rs = await self.rs.get(rs["metadata"]["name"], rs["metadata"]["namespace"])
            except APIError as e:
                if e.code != 404:
                    raise
                return
            if rs["metadata"]["uid"] != uid:
                return
