"""The resource-quota controller: keeps each ResourceQuota's `status.hard`
(its spec) and `status.used` (what the namespace's objects charge, by the
evaluators quota admission uses). A quota is recounted when it changes, when
an object of a kind it counts goes or changes what it charges in its
namespace (replenishment), and every resync period. Pods, services, claims,
ResourceClaims, ConfigMaps and Secrets are watched from the start; any other
kind gets its informer when a quota first names `count/<resource>.<group>`
(upstream's quota monitor), from discovery read again when a `count/` names
nothing it lists, at most once a `DISCOVERY_PERIOD`, and at once when a CRD that
serves it is established."""

from __future__ import annotations

import asyncio
import logging

from ..client.http import EXPECTED
from ..client.informer import Informer, InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..machinery.quantity import add
from ..quota.evaluators import ClaimLookup, charge_changed, extended_names, quota_covers, usage
from ..quota.resources import IMPLICIT_DEVICE_CLASS_PREFIX, OBJECT_COUNTS, is_extended
from .base import Controller, in_turns

#: kinds watched for replenishment: (group, version, plural)
WATCHED = (("", "v1", "pods"), ("", "v1", "services"), ("", "v1", "persistentvolumeclaims"),
           ("resource.k8s.io", "v1", "resourceclaims"), ("", "v1", "configmaps"), ("", "v1", "secrets"))
#: upstream's --resource-quota-sync-period
RESYNC = 300.0
#: the least seconds between two reads of discovery for the kinds a quota may count (the quota
#: controller's Sync period, 30 s in startResourceQuotaController); taken when a name maps to
#: nothing, not by a ticker, so that an idle plane is not woken for it
DISCOVERY_PERIOD = 30.0

log = logging.getLogger(__name__)
#: what the pods evaluator counts besides extended resources (upstream's podResources and
#: podResourcePrefixes): no limits of extended resources or hugepages, no other `requests.` name
_POD = ("pods", "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
        "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage")
_POD_PREFIXES = ("hugepages-", "requests.hugepages-")


def kinds_for(name: str, resources) -> set[tuple[str, str]]:
    """The (group, plural) pairs whose objects can charge the quota resource `name`."""
    if name in OBJECT_COUNTS:
        return {OBJECT_COUNTS[name]}
    if name.startswith("services."):
        return {("", "services")}
    if name == "requests.storage" or ".storageclass.storage.k8s.io/" in name:
        return {("", "persistentvolumeclaims")}
    if name.endswith(".deviceclass.resource.k8s.io/devices"):
        return {("resource.k8s.io", "resourceclaims")}
    if name.startswith("count/"):
        plural, _, group = name[len("count/"):].partition(".")
        return {(group, plural)} if any(r.group == group and r.plural == plural for r in resources) else set()
    if name.startswith("requests.") and (is_extended(name[9:]) or name[9:].startswith(IMPLICIT_DEVICE_CLASS_PREFIX)):
        # DRAExtendedResource: a ResourceClaim charges its classes' extended resources too
        return {("", "pods"), ("resource.k8s.io", "resourceclaims")}
    if name in _POD or name.startswith(_POD_PREFIXES):
        return {("", "pods")}
    return set()


class ResourceQuotaController(Controller):
    name = "resourcequota-controller"
    queue_name = "resourcequota_primary"

    def __init__(self, client, clock: Clock = REAL, resync: float = RESYNC,
                 informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.resync = resync
        self.quotas_api = client.resource("", "v1", "resourcequotas")
        self.quotas = self.informer_factory.informer(self.quotas_api)
        self.quotas.add_handlers(on_add=self._enqueue, on_update=self._quota_updated)
        self.watched: dict[tuple[str, str], Informer] = {}
        self.classes: Informer | None = None
        for group, version, plural in WATCHED:
            self._watch(group, version, plural)
        self.crds = self.informer_factory.informer(
            client.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
        self.crds.add_handlers(on_add=self._crd_changed, on_update=lambda old, new: self._crd_changed(new))
        self._resync_task: asyncio.Task | None = None
        #: when discovery may be read again for a `count/` that maps to nothing (`_kinds`)
        self._discover_after = float("-inf")

    def informers(self):
        return [self.quotas, self.crds, *self.watched.values()]

    def _watch(self, group: str, version: str, plural: str) -> Informer:
        """Replenishment as upstream's: an object going, or an update that changes what it
        charges (a pod turning terminal), recounts its namespace's quotas; creations were
        charged by admission already."""
        inf = self.informer_factory.informer(self.client.resource(group, version, plural))

        def updated(old: dict, new: dict) -> None:
            # with no quota at all there is nothing to recount (every pod write comes here)
            if self.quotas.store and charge_changed(group, plural, old, new, self.clock.now()):
                self._replenish(new)

        inf.add_handlers(on_update=updated, on_delete=self._replenish)
        self.watched[(group, plural)] = inf
        return inf

    def _quota_updated(self, old: dict, new: dict) -> None:
        """Only a changed spec needs a recount: status writes are this controller's and
        admission's, and recounting on admission's would race its charges with the
        informers of the objects just admitted (upstream ignores them too)."""
        if (old.get("spec") or {}) != (new.get("spec") or {}) or not (new.get("status") or {}).get("hard"):
            self._enqueue(new)

    def _crd_changed(self, crd: dict) -> None:
        """An established CRD recounts the quotas whose `count/` of its resource has no used yet, with
        discovery read afresh for it: quota admission refuses the kind's creates while their used is
        unknown, which upstream leaves to its next discovery Sync (30 s) and full resync (5 min)."""
        status = crd.get("status") or {}
        plural = (status.get("acceptedNames") or {}).get("plural")
        if not plural or not any(c.get("type") == "Established" and c.get("status") == "True"
                                 for c in status.get("conditions") or ()):
            return
        name = f"count/{plural}.{(crd.get('spec') or {}).get('group', '')}"
        for q in self.quotas.list():
            if name in ((q.get("spec") or {}).get("hard") or {}) and name not in ((q.get("status") or {}).get("used") or {}):
                self._discover_after = float("-inf")
                self._enqueue(q)

    def _enqueue(self, quota: dict) -> None:
        self.queue.add(f"{quota['metadata']['namespace']}/{quota['metadata']['name']}")

    def _replenish(self, obj: dict) -> None:
        for q in self.quotas.list_namespace(obj["metadata"].get("namespace") or ""):
            self._enqueue(q)

    async def start(self) -> None:
        await super().start()
        self._resync_task = asyncio.create_task(self._resync_loop())
        self._tasks.append(self._resync_task)

    async def _kinds(self, name: str) -> set[tuple[str, str]]:
        """`kinds_for` the quota resource `name`; a `count/` that maps to nothing has discovery read
        again first, at most once a DISCOVERY_PERIOD (upstream's Sync finds new resources on that
        period; over HTTP the client reads discovery only when asked): a custom resource whose CRD
        came later is counted."""
        found = kinds_for(name, self.client.resources())
        if found or not name.startswith("count/") or self.clock.monotonic() < self._discover_after:
            return found
        self._discover_after = self.clock.monotonic() + DISCOVERY_PERIOD
        try:
            await self.client.discover()
        except EXPECTED as e:  # as upstream's Sync, a later one tries again
            log.warning("resource quota controller: reading discovery failed: %s", e)
        return kinds_for(name, self.client.resources())

    async def _resync_loop(self) -> None:
        while True:
            await self.clock.sleep(self.resync)
            for q in self.quotas.list():
                self._enqueue(q)

    async def _objects(self, group: str, plural: str, namespace: str) -> list[dict]:
        inf = self.watched.get((group, plural))
        if inf is None:
            res = next((r for r in self.client.resources() if r.group == group and r.plural == plural), None)
            if res is None or not res.namespaced:
                return []
            inf = self._watch(group, res.versions[0], plural)
            self.informer_factory.start([inf])
            await inf.synced.wait()
        return inf.list_namespace(namespace)

    async def _claim_lookup(self, namespace: str) -> ClaimLookup:
        """What the namespace's claims' charges read: the DeviceClasses' extended resource
        names, its pods and its claims."""
        if self.classes is None:
            self.classes = self.informer_factory.informer(self.client.resource("resource.k8s.io", "v1", "deviceclasses"))
            self.informer_factory.start([self.classes])
        await self.classes.synced.wait()
        pods = {p["metadata"]["name"]: p for p in await self._objects("", "pods", namespace)}
        claims = await self._objects("resource.k8s.io", "resourceclaims", namespace)
        return ClaimLookup(extended_names(self.classes.list()), lambda ns, name: pods.get(name), lambda ns: claims)

    async def sync(self, key: str) -> None:
        quota = self.quotas.get(key)
        if quota is None or quota["metadata"].get("deletionTimestamp"):
            return
        ns = quota["metadata"]["namespace"]
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        kinds: set[tuple[str, str]] = set()
        tracked = set()
        for name in hard:
            if found := await self._kinds(name):
                kinds |= found
                tracked.add(name)
        now = self.clock.now()
        totals: dict = {}
        claims = await self._claim_lookup(ns) if ("resource.k8s.io", "resourceclaims") in kinds else None
        for group, plural in sorted(kinds):
            # a namespace's pods may be 300,000: the loop runs between slices (in_turns)
            async for part in in_turns(await self._objects(group, plural, ns)):
                for obj in part:
                    if not quota_covers(quota, group, plural, obj):
                        continue
                    for name, q in usage(group, plural, obj, now, claims).items():
                        if name in hard:
                            totals[name] = add(totals.get(name), q)
        # as upstream's syncResourceQuota: what no evaluator counts (limits.nvidia.com/gpu, a count of
        # a resource not served) keeps the used it had, or has none
        status = quota.get("status") or {}
        before = status.get("used") or {}
        used = {name: str(totals[name]) if name in totals else "0" if name in tracked else before[name]
                for name in hard if name in tracked or name in before}
        if status.get("hard") == hard and status.get("used") == used:
            return
        body = {**quota, "status": {"hard": hard, "used": used}}
        try:
            await self.quotas_api.update(body, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
