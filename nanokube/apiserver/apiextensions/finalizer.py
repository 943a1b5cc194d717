"""The CRD finalizer (apiextensions `controller/finalizer/crd_finalizer.go`).

A deleted CRD lingers with `customresourcecleanup.apiextensions.k8s.io` until this
controller has deleted every custom object of it (one deletecollection per
namespace, through the in-process client, so no admission runs, as upstream) and
seen none left; objects with finalizers of their own keep it waiting. Its
`Terminating` condition says where it is. Upstream polls the remaining objects
every 5 s for up to a minute; here every 0.2 s, so a CRD goes as soon as its
objects are gone.
"""

from __future__ import annotations

import copy

from ...machinery.errors import APIError
from ...registry.apiextensions import CLEANUP_FINALIZER
from .naming import CRDController, condition, set_crd_condition

POLL_INTERVAL = 0.2
POLL_TIMEOUT = 60.0


class InstancesRemain(Exception):
    """Custom objects are left (or deleting them failed): the queue retries the CRD with backoff."""


class CRDFinalizer(CRDController):
    name = "crd-finalizer"
    retriable = (InstancesRemain,)
    #: as upstream runs it: a CRD whose objects wait on their finalizers holds a worker for up to a
    #: minute, and the CRDs deleted with it go meanwhile
    workers = 5

    def _enqueue(self, crd: dict) -> None:
        md = crd["metadata"]
        if md.get("deletionTimestamp") and CLEANUP_FINALIZER in (md.get("finalizers") or []):
            self.queue.add(md["name"])

    def _updated(self, old: dict, new: dict) -> None:
        """A write that moved only the Terminating condition is most likely this controller's own:
        requeuing on it would hot-loop a cleanup that keeps failing (a conversion webhook that is
        down), which the queue's backoff retries instead (upstream's updateCustomResourceDefinition).
        A resync (the same resourceVersion) requeues, as upstream's does."""
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion") \
                or _without_terminating(old) != _without_terminating(new):
            self._enqueue(new)

    async def _set(self, crd: dict, status: str, reason: str, message: str) -> dict:
        st = copy.deepcopy(crd.get("status") or {})
        set_crd_condition(st, "Terminating", status, reason, message, self.clock.rfc3339())
        return await self.crds.update({**crd, "status": st}, subresource="status")

    async def sync(self, name: str) -> None:
        crd = self.inf.get(name)
        if crd is None or CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return
        crd = await self.crds.get(name)
        if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
            return
        if (condition(crd, "Established") or {}).get("status") == "True":
            crd = await self._set(crd, "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress")
            outcome = await self._delete_instances(crd)
        else:
            outcome = ("False", "NeverEstablished", "resource was never established")
        crd = await self._set(crd, *outcome)
        if outcome[0] == "True":
            raise InstancesRemain(outcome[2])
        md = crd["metadata"]
        try:
            await self.crds.update({**crd, "metadata": {**md, "finalizers": [f for f in md["finalizers"] if f != CLEANUP_FINALIZER]}})
        except APIError as e:
            if e.code != 404:
                raise

    async def _delete_instances(self, crd: dict) -> tuple[str, str, str]:
        spec, names = crd["spec"], crd["status"]["acceptedNames"]
        version = next(v["name"] for v in spec["versions"] if v.get("storage"))
        try:
            rc = self.client.resource(spec["group"], version, names["plural"])
            items, _ = await rc.list()
        except (APIError, LookupError) as e:
            return ("True", "InstanceDeletionFailed", f"could not list instances: {getattr(e, 'message', e)}")
        for ns in sorted({(o["metadata"].get("namespace") or "") for o in items}):
            try:
                await rc.delete_collection(ns or None)
            except APIError as e:
                return ("True", "InstanceDeletionFailed", f"could not issue all deletes: {e.message}")
        waited = 0.0
        while True:
            items, _ = await rc.list()
            if not items:
                return ("False", "InstanceDeletionCompleted", "removed all instances")
            if waited >= POLL_TIMEOUT:
                return ("True", "InstanceDeletionCheck",
                        "could not confirm zero CustomResources remaining: timed out waiting for the condition")
            await self.clock.sleep(POLL_INTERVAL)
            waited += POLL_INTERVAL


def _without_terminating(crd: dict) -> dict:
    """`crd` less what writing its Terminating condition changes: that condition, the
    resourceVersion, and the managedFields entry the status write touches."""
    md = {k: v for k, v in crd["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    status = dict(crd.get("status") or {})
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Terminating"]
    return {**crd, "metadata": md, "status": status}
