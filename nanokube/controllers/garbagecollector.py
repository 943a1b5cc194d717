"""Garbage collector: ownerReferences across every resource.

- a dependent whose owners are all gone is deleted (background cascading);
- an owner deleting with the `foregroundDeletion` finalizer has its
  dependents deleted first, and loses the finalizer once none that block
  remain;
- an owner deleting with the `orphan` finalizer has its ownerReference
  removed from every dependent, then loses the finalizer.

It keeps an owner graph (uid → dependents) fed by informers over every
resource, as kube-controller-manager's GC does with metadata informers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..client.http import EXPECTED
from ..client.record import CoreEventRecorder
from ..machinery.errors import APIError
from .base import Controller

log = logging.getLogger(__name__)

#: seconds between looks for resources to monitor: kube-controller-manager's garbage collector Sync
#: period (syncPeriod = 30 s in startGarbageCollectorController), which resyncs its monitors
MONITOR_PERIOD = 30.0
#: resources the collector never monitors, as upstream's graph builder ignores them (ignoredResources):
#: events, which upstream leaves to the API server's event TTL. Every pod that fits nowhere gets one,
#: and each was handed to a monitor's informer and kept in the owner graph for nothing.
IGNORED = frozenset({"events", "events.events.k8s.io"})
#: the resources whose objects add served resources: a change of one looks for new resources at once
#: instead of at the next `MONITOR_PERIOD` (a custom resource's dependents are collected from its start,
#: where upstream's collector monitors it at its next Sync, up to 30 s on)
SERVING = frozenset({"customresourcedefinitions.apiextensions.k8s.io"})
#: what an owner reference points at, as classifyReferences sorts them
SOLID, DANGLING, WAITING = "solid", "dangling", "waiting"
#: an owner reference whose kind discovery does not list (upstream's restMappingError)
UNMAPPED = "unmapped"
#: the first and the longest wait before a dependent whose owner only the server has shown is looked at
#: again (the attemptToDelete queue's rate limiter upstream: 5 ms, doubling, at most 1000 s)
RECHECK_BASE, RECHECK_MAX = 0.005, 1000.0


@dataclass(slots=True)
class Node:
    """An object of the graph, one per object of every monitored resource (300,000 for 300,000 pods):
    it keeps the object's own ownerReferences list (objects handed to informers are never changed)
    and has no instance dict, so the cycle collector walks one object per node instead of three."""

    rc: object
    namespace: str | None
    name: str
    uid: str
    owners: Sequence[dict] = ()
    deleting: bool = False
    finalizers: tuple[str, ...] = ()


class GarbageCollector(Controller):
    name = "garbage-collector-controller"
    aliases = ("garbagecollector",)
    queue_name = "garbage_collector_attempt_to_delete"
    workers = 2

    def __init__(self, client, events_client=None, **kw):
        """`client` reads and writes the objects (upstream's metadata client); `events_client`
        (else `client`) sends the Events, as upstream's recorder sinks into a clientset of its own."""
        super().__init__(client, **kw)
        self.nodes: dict[str, Node] = {}
        self.dependents: dict[str, set[str]] = {}
        #: dependent uid → the uid of an owner the graph saw in another namespace, reported at its next sync
        self._misplaced: dict[str, str] = {}
        #: dependent uid → how often an owner of it was found only by asking the server (see `_recheck`)
        self._unobserved: dict[str, int] = {}
        self._infs = []
        self._monitored: set[str] = set()
        self._started = False
        #: the read of discovery a CRD the client's copy lacks asked for (`_serving_changed`), and
        #: whether another CRD event asked again while it ran
        self._reading: asyncio.Task | None = None
        self._read_again = False
        self.recorder = CoreEventRecorder(events_client or client, "garbage-collector-controller", self.clock)
        self._add_monitors()

    def _add_monitors(self) -> list:
        """Informers for the resources not monitored yet (custom resources appear at run time)."""
        added = []
        for r in self.client.resources():
            if r.storage_alias or r.group_resource in self._monitored or r.group_resource in IGNORED \
                    or "delete" not in r.verbs:
                continue
            self._monitored.add(r.group_resource)
            rc = self.client.resource(r.group, r.versions[0], r.plural)
            inf = self.informer_factory.informer(rc)
            inf.add_handlers(on_add=lambda o, rc=rc: self._observe(rc, o),
                             on_update=lambda old, o, rc=rc: self._observe(rc, o),
                             on_delete=lambda o, rc=rc: self._forget(o))
            if r.group_resource in SERVING:
                inf.add_handlers(on_add=self._serving_changed, on_update=lambda old, o: self._serving_changed(o))
            added.append(inf)
        self._infs.extend(added)
        return added

    def informers(self):
        return self._infs

    def _rediscover(self) -> None:
        """Monitors for the resources served since the last look, started at once; before `start`
        has started the others it does nothing, and `start` looks itself then (upstream's GC Sync
        looks at discovery as it starts): a CRD established while the monitors sync, whose events
        came too early, is not left to the next `MONITOR_PERIOD`."""
        if self._started:
            self.informer_factory.start(self._add_monitors())

    def _serving_changed(self, crd: dict) -> None:
        """A CRD changed: monitors for what it serves. Where the client's copy of discovery lacks
        that (over HTTP a copy is read at start and then when asked), discovery is read again first,
        in the background: the CRD's event is the miss that a RESTMapper reset answers, so its
        resource is monitored at once with no periodic read (an idle client stays idle)."""
        if not self._started:
            return
        if not self._unlisted(crd):
            self._rediscover()
            return
        self._read_again = True
        if self._reading is None:
            self._reading = asyncio.create_task(self._read_discovery())
            self._tasks.append(self._reading)

    def _unlisted(self, crd: dict) -> bool:
        """Whether the CRD serves a version its accepted names put at a path discovery (as the client
        read it) lists no resource at; one not served yet (names not accepted) or going serves none."""
        spec, status = crd.get("spec") or {}, crd.get("status") or {}
        plural = (status.get("acceptedNames") or {}).get("plural")
        accepted = any(c.get("type") in ("NamesAccepted", "Established") and c.get("status") == "True"
                       for c in status.get("conditions") or ())
        if not plural or not accepted or crd["metadata"].get("deletionTimestamp"):
            return False
        return any(v.get("served") and self.client.index.get(spec.get("group", ""), v.get("name"), plural) is None
                   for v in spec.get("versions") or ())

    async def _read_discovery(self) -> None:
        """Discovery read, and monitors started, until no CRD event asked again meanwhile (a read
        already in flight when one came may have been answered before its CRD was served)."""
        try:
            while self._read_again:
                self._read_again = False
                try:
                    await self.client.discover()
                except EXPECTED as e:  # the next CRD event or periodic look reads it again
                    log.warning("garbage collector: reading discovery failed: %s", e)
                    return
                self._rediscover()
        finally:
            self._tasks.remove(self._reading)
            self._reading = None

    async def start(self) -> None:
        await super().start()
        self._started = True
        self._rediscover()
        self._tasks.append(asyncio.create_task(self._resync_monitors()))

    async def _resync_monitors(self) -> None:
        """Rediscovers resources every `MONITOR_PERIOD`, reading discovery afresh as upstream's GC
        Sync does (over HTTP the client reads it only when asked; a CRD's events look at once
        besides, `SERVING`). What only this look finds: a resource an aggregated APIService serves,
        one whose CRD event came while a read failed. A monitor of a resource no longer served just
        sees no events."""
        while True:
            await self.clock.sleep(MONITOR_PERIOD)
            try:
                await self.client.discover()
            except EXPECTED as e:  # upstream's Sync skips a look whose discovery failed; here the copy serves
                log.warning("garbage collector: reading discovery failed: %s", e)
            self.informer_factory.start(self._add_monitors())

    def _observe(self, rc, obj: dict) -> None:
        """Keep the object's graph node and queue a new or changed one for a look. An update that
        changes none of what the graph holds (most are status writes) does nothing, as upstream's
        graph builder: an owner that goes queues its dependents (`_forget`)."""
        md = obj["metadata"]
        uid = md["uid"]
        owners = md.get("ownerReferences") or ()
        deleting, finalizers = bool(md.get("deletionTimestamp")), tuple(md.get("finalizers") or ())
        n = old = self.nodes.get(uid)
        if n is not None and n.owners == owners and n.deleting == deleting and n.finalizers == finalizers:
            return
        if n is not None:
            for ref in n.owners:
                self.dependents.get(ref["uid"], set()).discard(uid)
            # addUnblockedOwnersToDeleteQueue: an owner waiting on this object may go once it no longer blocks
            blocking = {r["uid"] for r in owners if r.get("blockOwnerDeletion")}
            for ref in n.owners:
                if ref.get("blockOwnerDeletion") and ref["uid"] not in blocking and ref["uid"] in self.nodes:
                    self.queue.add(ref["uid"])
        n = Node(rc, md.get("namespace"), md["name"], uid, owners, deleting, finalizers)
        self.nodes[uid] = n
        for ref in n.owners:
            self.dependents.setdefault(ref["uid"], set()).add(uid)
        self._note_misplaced(n, old)
        if n.owners or (n.deleting and {"foregroundDeletion", "orphan"} & set(n.finalizers)):
            self.queue.add(uid)

    def _note_misplaced(self, n: Node, old: Node | None) -> None:
        """The graph builder's OwnerRefInvalidNamespace, once per observation that shows it, not at
        every attempt to collect: a reference `n` gained to an owner seen in another namespace
        (addDependentToOwners), or dependents of other namespaces naming `n` when it is first seen."""
        had = {r["uid"] for r in old.owners} if old is not None else set()
        for ref in n.owners:
            owner = self.nodes.get(ref["uid"])
            if ref["uid"] not in had and owner is not None and owner.namespace and owner.namespace != n.namespace:
                self._misplaced[n.uid] = ref["uid"]
                break
        if old is None and n.namespace:
            for dep in self.dependents.get(n.uid, ()):
                d = self.nodes.get(dep)
                if d is not None and d.namespace != n.namespace:
                    self._misplaced.setdefault(dep, n.uid)
                    self.queue.add(dep)

    def _forget(self, obj: dict) -> None:
        uid = obj["metadata"]["uid"]
        self._unobserved.pop(uid, None)
        n = self.nodes.pop(uid, None)
        if n:
            for ref in n.owners:
                deps = self.dependents.get(ref["uid"])
                if deps is not None:
                    deps.discard(uid)
                    owner = self.nodes.get(ref["uid"])
                    if owner and owner.deleting:
                        self.queue.add(ref["uid"])
        for dep in self.dependents.get(uid, ()):
            self.queue.add(dep)

    async def sync(self, uid: str) -> None:
        n = self.nodes.get(uid)
        misplaced = self._misplaced.pop(uid, None)
        if n is None:
            return
        for ref in n.owners:
            if ref["uid"] == misplaced:
                await self._report_invalid_namespace(n, ref)
        if n.deleting and "orphan" in n.finalizers:
            await self._orphan(n)
            return
        if n.deleting and "foregroundDeletion" in n.finalizers:
            await self._foreground(n)
            return
        if n.owners and not n.deleting:
            await self._maybe_collect(n)

    async def _owner_state(self, n: Node, ref: dict) -> tuple[str | None, bool]:
        """isDangling and classifyReferences for one reference: SOLID, DANGLING or WAITING (the owner
        is deleting in the foreground), UNMAPPED for a kind discovery does not list (yet: a CRD the
        client has not read), None for a namespaced kind named by a cluster-scoped dependent
        (upstream leaves such a dependent as it is);
        and whether the graph answered. A graph node of the reference's uid answers only where it is
        the object named (its kind, name and namespace: the dependent's own, for a namespaced owner);
        else the server is asked by name in the dependent's namespace, so that an owner of another
        namespace is absent here, as upstream."""
        group = ref["apiVersion"].split("/")[0] if "/" in ref["apiVersion"] else ""
        res = await self.client.mapping(group, ref["kind"])
        if res is None:
            return UNMAPPED, False
        if res.namespaced and not n.namespace:
            return None, False
        namespace = n.namespace if res.namespaced else None
        owner = self.nodes.get(ref["uid"])
        if owner is not None and (not owner.namespace or owner.namespace == n.namespace) \
                and owner.rc.res.group_resource == res.group_resource and owner.name == ref["name"]:
            return WAITING if owner.deleting and "foregroundDeletion" in owner.finalizers else SOLID, True
        # the graph may lag, or hold that uid under other coordinates: confirm with the server by name (and uid)
        rc = self.client.resource(res.group, res.versions[0], res.plural)
        try:
            live = await rc.get(ref["name"], namespace)
        except APIError as e:
            if e.code == 404:
                return DANGLING, False
            raise
        md = live["metadata"]
        if md["uid"] != ref["uid"]:
            return DANGLING, False
        deleting = md.get("deletionTimestamp") and "foregroundDeletion" in (md.get("finalizers") or ())
        return WAITING if deleting else SOLID, False

    def _recheck(self, n: Node, unobserved: bool) -> None:
        """attemptToDeleteWorker's requeue of an item "not observed via informer yet" (kubernetes
        issue 56121): an owner only the server has shown may go before its monitor ever sees it (a
        custom resource whose monitor starts late, an add and a delete inside a watch gap, a kind
        never monitored), and then no deletion of it queues `n`; and its requeue on a restMappingError,
        an owner kind not mapped yet, which a later look (the client reads discovery again once its
        read is stale) may map. So `n` is looked at again, each time twice as late, until the graph
        answers for its owners or they are gone; the count is dropped then, or when `n` goes, so it
        holds one entry per such dependent at most."""
        if not unobserved:
            self._unobserved.pop(n.uid, None)
            return
        k = self._unobserved.get(n.uid, 0)
        self._unobserved[n.uid] = min(k + 1, 18)  # 5 ms · 2¹⁸ passes the longest wait
        self.queue.add_after(n.uid, min(RECHECK_BASE * 2 ** k, RECHECK_MAX))

    async def _report_invalid_namespace(self, n: Node, ref: dict) -> None:
        """reportInvalidNamespaceOwnerRef: the owner was seen in another namespace than its dependent's."""
        res, namespace = n.rc.res, n.namespace or ""  # (a cluster-scoped dependent's: none, "")
        obj = {"kind": res.kind, "apiVersion": res.api_version(n.rc.version),
               "metadata": {"name": n.name, "namespace": n.namespace, "uid": n.uid}}
        owner = f"[{ref['apiVersion']}/{ref['kind']}, namespace: {namespace}, name: {ref['name']}, uid: {ref['uid']}]"
        await self.recorder.emit(obj, "Warning", "OwnerRefInvalidNamespace",
                                 f'ownerRef {owner} does not exist in namespace "{namespace}"')

    async def _maybe_collect(self, n: Node) -> None:
        """attemptToDeleteItem: a dependent with a solid owner loses its references to the owners that
        are gone or deleting in the foreground; else one waiting on an owner's foreground deletion that
        has dependents of its own is deleted in the foreground, and one whose owners are all gone in the
        background (orphaning, or in the foreground, where it carries that finalizer already). One reference
        that cannot be resolved leaves it as it is (for now, where its kind is not mapped: `_recheck`)."""
        looks = [await self._owner_state(n, ref) for ref in n.owners]
        states = [st for st, _ in looks]
        unmapped = UNMAPPED in states
        self._recheck(n, unmapped or None not in states and any(st == SOLID and not seen for st, seen in looks))
        if unmapped or None in states:
            return
        if SOLID in states:
            stale = {ref["uid"] for ref, st in zip(n.owners, states) if st != SOLID}
            if stale:
                await self._strip_owners(n, stale)
            return
        if WAITING in states and self.dependents.get(n.uid):
            if any(self._deleting_dependents(d) for d in self.dependents[n.uid]):
                # upstream's cycle breaking: a dependent of ours already waits on us, so that our owner
                # waiting on us and we on it would never end: our references stop blocking first
                await self._unblock_owners(n)
            await self._delete(n, "Foreground")
            return
        # no owner waits on it: a finalizer it already carries picks the propagation, as upstream's
        await self._delete(n, "Orphan" if "orphan" in n.finalizers
                           else "Foreground" if "foregroundDeletion" in n.finalizers else "Background")

    def _deleting_dependents(self, uid: str) -> bool:
        d = self.nodes.get(uid)
        return d is not None and d.deleting and "foregroundDeletion" in d.finalizers

    async def _unblock_owners(self, n: Node) -> None:
        """unblockOwnerReferences: every reference of `n` set to blockOwnerDeletion false."""
        def unblocked(refs: list[dict]) -> list[dict] | None:
            if not any(r.get("blockOwnerDeletion") for r in refs):
                return None
            return [{**r, "blockOwnerDeletion": False} if r.get("blockOwnerDeletion") else r for r in refs]
        await self._edit_owners(n, unblocked)

    async def _strip_owners(self, n: Node, uids: set[str]) -> None:
        await self._edit_owners(n, lambda refs: [r for r in refs if r["uid"] not in uids])

    async def _edit_owners(self, n: Node, edit: Callable[[list[dict]], list[dict] | None]) -> None:
        """`n`'s ownerReferences patched to what `edit` makes of those it has now (None: left as
        they are), at the resourceVersion read: a conflict is raised, so the sync is retried on the
        object as it is then; an object gone, or another of its name, is left alone."""
        cur = await self._current(n)
        md = cur["metadata"] if cur is not None else {}
        refs = edit(md.get("ownerReferences") or []) if md.get("uid") == n.uid else None
        if refs is None:
            return
        try:
            await n.rc.patch(n.name, {"metadata": {"ownerReferences": refs or None,
                                                   "resourceVersion": md["resourceVersion"]}}, namespace=n.namespace)
        except APIError as e:
            if e.code != 404:
                raise

    async def _current(self, n: Node) -> dict | None:
        """`n`'s object as the server has it now (by name: it may be another of that name); None where none is."""
        try:
            return await n.rc.get(n.name, n.namespace)
        except APIError as e:
            if e.code == 404:
                return None
            raise

    async def _delete(self, n: Node, policy: str) -> None:
        try:
            await n.rc.delete(n.name, n.namespace, propagation_policy=policy, preconditions={"uid": n.uid})
        except APIError as e:
            if e.code not in (404, 409):
                raise

    async def _foreground(self, n: Node) -> None:
        """processDeletingDependentsItem: each dependent not deleting yet gets attemptToDeleteItem's look
        (one with another live owner only loses its reference to `n`); `n` goes once none blocks it."""
        deps = [self.nodes[d] for d in self.dependents.get(n.uid, ()) if d in self.nodes]
        for d in deps:
            if not d.deleting:
                await self._maybe_collect(d)
        blocking = [d for d in deps if any(r["uid"] == n.uid and r.get("blockOwnerDeletion") for r in d.owners)]
        if blocking:
            return
        await self._remove_finalizer(n, "foregroundDeletion")

    async def _orphan(self, n: Node) -> None:
        for d in [self.nodes[d] for d in self.dependents.get(n.uid, ()) if d in self.nodes]:
            await self._strip_owners(d, {n.uid})
        await self._remove_finalizer(n, "orphan")

    async def _remove_finalizer(self, n: Node, fin: str) -> None:
        for _ in range(5):
            cur = await self._current(n)
            if cur is None:
                return
            fins = [f for f in cur["metadata"].get("finalizers") or [] if f != fin]
            if len(fins) == len(cur["metadata"].get("finalizers") or []):
                return
            try:
                await n.rc.patch(n.name, {"metadata": {"finalizers": fins or None,
                                                       "resourceVersion": cur["metadata"]["resourceVersion"]}},
                                 namespace=n.namespace)
                return
            except APIError as e:
                if e.code != 409:
                    raise
