"""Storage version migration (kube-controller-manager's resource-version and
storage-version-migrator controllers, one worker here).

For a new StorageVersionMigration it records the resource's current list
resourceVersion in `status.resourceVersion`, sets Running, then rewrites every
object of the resource at its preferred version with an empty server-side
apply that carries only the object's uid and resourceVersion, so the API
server stores it again in the current storage version; a conflict means the
object changed or went away meanwhile, which needs no migration. Succeeded or
Failed ends it; finished migrations are not looked at again. While discovery
does not know the resource and no resourceVersion is recorded, the migration is
retried with backoff and left as it is: the status validation refuses any
condition before a resourceVersion, so upstream's Failed write at that point is
refused too (a resource that appears later, such as a CRD installed after the
migration was created, is then migrated). One whose resource went away after its
resourceVersion was recorded is Failed.
"""

from __future__ import annotations

import orjson

from ..machinery.conditions import is_condition_true, remove_condition
from ..machinery.errors import APIError
from .base import Controller

GROUP = "storagemigration.k8s.io"
FIELD_MANAGER = "storage-version-migrator-controller"
SUCCEEDED, RUNNING, FAILED = ("StorageVersionMigrationSucceeded", "StorageVersionMigrationInProgress",
                              "StorageVersionMigrationFailed")


def with_condition(svm: dict, kind: str, reason: str, message: str, now: str) -> dict:
    """setStatusConditions: add `kind`=True; Succeeded or Failed turn Running False."""
    status = dict(svm.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or []]
    if not is_condition_true(conditions, kind):
        if kind in ("Succeeded", "Failed"):
            for c in conditions:
                if c.get("type") == "Running" and c.get("status") != "False":
                    c.update(status="False", lastTransitionTime=now)
        conditions = remove_condition(conditions, kind) + [{
            "type": kind, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message}]
    status["conditions"] = conditions
    return {**svm, "status": status}


class NotInDiscovery(Exception):
    """The migrated resource is not served (yet): the sync is retried with backoff."""


class StorageVersionMigrator(Controller):
    name = "storage-version-migrator-controller"
    queue_name = "storage-version-migrator-controller"
    retriable = (NotInDiscovery,)

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.migrations = client.resource(GROUP, "v1", "storageversionmigrations")
        self.inf = self.informer_factory.informer(self.migrations)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.inf]

    def _enqueue(self, svm: dict) -> None:
        self.queue.add(svm["metadata"]["name"])

    async def _target(self, svm: dict):
        """The client of the migrated resource at its preferred version, or None. A resource the
        client's discovery lacks has it read again where that read is stale, as the resource-version
        controller's RESTMapper (ResourcesFor) resets on a miss: a CRD installed after the last read
        is found at a retry, with no periodic read."""
        gr = (svm.get("spec") or {}).get("resource") or {}
        group, plural = gr.get("group", ""), gr.get("resource")
        for _ in range(2):
            for r in self.client.index.resources:
                if r.group == group and r.plural == plural:
                    return self.client.resource(r.group, r.versions[0], r.plural)
            if not await self.client.rediscover_if_stale():
                break
        return None

    async def _set(self, svm: dict) -> dict:
        return await self.migrations.update(svm, subresource="status")

    async def sync(self, name: str) -> None:
        svm = self.inf.get(name)
        if svm is None:
            return
        conds = (svm.get("status") or {}).get("conditions")
        if is_condition_true(conds, "Succeeded") or is_condition_true(conds, "Failed"):
            return
        target = await self._target(svm)
        if target is None:
            if not (svm.get("status") or {}).get("resourceVersion"):
                raise NotInDiscovery("resource does not exist in discovery")
            await self._set(with_condition(svm, "Failed", FAILED, "resource does not exist in discovery",
                                           self.clock.rfc3339()))
            return
        if not (svm.get("status") or {}).get("resourceVersion"):
            _, rv = await target.list()
            await self._set({**svm, "status": {**(svm.get("status") or {}), "resourceVersion": rv}})
            return  # the update comes back through the informer
        svm = await self._set(with_condition(svm, "Running", RUNNING, "", self.clock.rfc3339()))
        items, _ = await target.list()
        api_version = f"{target.res.group}/{target.version}" if target.res.group else target.version
        for obj in items:
            md = obj["metadata"]
            body = {"apiVersion": api_version, "kind": target.res.kind,
                    "metadata": {"uid": md.get("uid"), "resourceVersion": md.get("resourceVersion")}}
            try:
                await target.patch(md["name"], orjson.dumps(body), "application/apply-patch+yaml",
                                   namespace=md.get("namespace"), field_manager=FIELD_MANAGER)
            except APIError as e:
                if e.code in (404, 409):
                    continue  # changed, deleted or recreated since: nothing to migrate
                await self._set(with_condition(svm, "Failed", FAILED, "migration encountered unhandled error",
                                               self.clock.rfc3339()))
                return
        await self._set(with_condition(svm, "Succeeded", SUCCEEDED, "", self.clock.rfc3339()))
