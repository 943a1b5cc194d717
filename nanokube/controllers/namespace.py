"""Namespace lifecycle: a deleting namespace has its contents deleted, then
the `kubernetes` finalizer removed so the server can remove the namespace
(its `default` ServiceAccount is serviceaccount.py's).

While it empties a namespace the controller reports its progress on the
namespace's status conditions as upstream's namespaced resources deleter
does, so `kubectl describe ns` of a namespace stuck Terminating says what is
left and which finalizers hold it: NamespaceContentRemaining and
NamespaceFinalizersRemaining True, NamespaceDeletionContentFailure True when a
delete failed, each False with upstream's "ok" reason and message otherwise."""

from __future__ import annotations

from collections import Counter

from ..machinery.conditions import find_condition
from ..machinery.errors import APIError
from .base import Controller

#: the conditions the deleter keeps, in upstream's order, with their reason and message when all is well
OK_CONDITIONS = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
)


def deletion_conditions(remaining: dict[str, int], finalizers: Counter, failures: list[str]) -> dict[str, tuple]:
    """The (status, reason, message) of each condition whose news is bad (deleteAllContent's), by type:
    `remaining` counts what is left by "resource.group", `finalizers` what holds it."""
    bad: dict[str, tuple] = {}
    if failures:
        bad["NamespaceDeletionContentFailure"] = (
            "True", "ContentDeletionFailed",
            f"Failed to delete all resource types, {len(failures)} remaining: {_aggregate(failures)}")
    if remaining:
        left = sorted(f"{gr} has {n} resource instances" for gr, n in remaining.items())
        bad["NamespaceContentRemaining"] = ("True", "SomeResourcesRemain",
                                            f"Some resources are remaining: {', '.join(left)}")
    if finalizers:
        held = sorted(f"{f} in {n} resource instances" for f, n in finalizers.items())
        bad["NamespaceFinalizersRemaining"] = (
            "True", "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {', '.join(held)}")
    return bad


def _aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate's Error(): one message alone, several in brackets."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def updated_conditions(conditions: list[dict] | None, bad: dict[str, tuple], now: str) -> list[dict] | None:
    """The namespace's conditions with the deleter's set to this pass's news (updateConditions:
    a transition time moves only with the status), or None when nothing changed."""
    out = [dict(c) for c in conditions or ()]
    changed = False
    for ctype, ok_reason, ok_message in OK_CONDITIONS:
        status, reason, message = bad.get(ctype, ("False", ok_reason, ok_message))
        old = find_condition(out, ctype)
        if old is None:
            out.append({"type": ctype, "status": status, "lastTransitionTime": now, "reason": reason,
                        "message": message})
            changed = True
        elif (old.get("status"), old.get("reason"), old.get("message")) != (status, reason, message):
            if old.get("status") != status:
                old["lastTransitionTime"] = now
            old.update(status=status, reason=reason, message=message)
            changed = True
    return out if changed else None


class NamespaceController(Controller):
    name = "namespace-controller"
    queue_name = "namespace"
    #: upstream's --concurrent-namespace-syncs default: emptying a namespace is many slow API calls,
    #: so one large namespace must not hold back the deletion of others
    workers = 10

    def __init__(self, client, clock=None, metadata_client=None, **kw):
        """`client` reads discovery and writes the namespaces; `metadata_client` (else `client`) lists
        and deletes their contents, a clientset with a token bucket of its own as upstream's
        metadata client."""
        super().__init__(client, **({"clock": clock} if clock else {}), **kw)
        self.metadata = metadata_client or client
        self.ns = client.resource("", "v1", "namespaces")
        self.inf = self.informer_factory.informer(self.ns)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda o, n: self._enqueue(n))

    def _enqueue(self, obj: dict) -> None:
        self.queue.add(obj["metadata"]["name"])

    def informers(self):
        return [self.inf]

    def _namespaced(self):
        """The namespaced resources to empty: those discovery says support list and delete, as
        upstream's deleter filters them (a review or other create-only kind answers 405)."""
        seen = set()
        for r in self.client.resources():
            if not r.namespaced or r.storage_alias or r.group_resource in seen or not {"list", "delete"} <= set(r.verbs):
                continue
            seen.add(r.group_resource)
            yield f"{r.plural}.{r.group}", self.metadata.resource(r.group, r.versions[0], r.plural)

    async def sync(self, name: str) -> None:
        ns = self.inf.get(name)
        if ns is None:
            return
        if not ns["metadata"].get("deletionTimestamp"):
            return
        remaining: dict[str, int] = {}
        finalizers: Counter = Counter()
        failures: list[str] = []
        await self.client.discover()  # each pass, as upstream's deleter asks discovery for what to empty
        for group_resource, rc in self._namespaced():
            items, _ = await rc.list(name)
            if not items:
                continue
            for it in items:
                if not it["metadata"].get("deletionTimestamp"):
                    try:
                        await rc.delete(it["metadata"]["name"], name)
                    except APIError as e:
                        if e.code != 404:
                            failures.append(e.message)
            left, _ = await rc.list(name)  # what the deletes left: finalizers, or graceful deletion under way
            if left:
                remaining[group_resource] = len(left)
                finalizers.update(f for it in left for f in it["metadata"].get("finalizers") or ())
        ns = await self._report(ns, deletion_conditions(remaining, finalizers, failures))
        if remaining or failures:
            self.queue.add_after(name, 0.5)
            return
        fins = [f for f in (ns.get("spec") or {}).get("finalizers") or [] if f != "kubernetes"]
        if fins != (ns.get("spec") or {}).get("finalizers"):
            body = {**ns, "spec": {**(ns.get("spec") or {}), "finalizers": fins}}
            try:
                await self.ns.update(body, subresource="finalize")
            except APIError as e:
                if e.code != 404:
                    raise

    async def _report(self, ns: dict, bad: dict[str, tuple]) -> dict:
        """Write this pass's conditions to the namespace's status when they changed; the namespace
        as written, which the finalize then updates (as upstream's deleter goes on with the object
        its status update returned: the informer's copy is one write behind, and its finalize
        failed with a conflict, a warning and a retry for every namespace deleted)."""
        status = ns.get("status") or {}
        conditions = updated_conditions(status.get("conditions"), bad, self.clock.rfc3339())
        if conditions is None:
            return ns
        try:
            return await self.ns.update({**ns, "status": {**status, "conditions": conditions}}, subresource="status")
        except APIError as e:
            if e.code not in (404, 409):  # gone, or changed: the next pass reports again
                raise
            return ns
