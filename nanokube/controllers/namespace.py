"""Namespace lifecycle: a deleting namespace has its contents deleted, then
the `kubernetes` finalizer removed so the server can remove the namespace
(its `default` ServiceAccount is serviceaccount.py's)."""

from __future__ import annotations

from ..machinery.errors import APIError
from .base import Controller


class NamespaceController(Controller):
    name = "namespace-controller"
    queue_name = "namespace"

    def __init__(self, client, clock=None, **kw):
        super().__init__(client, **({"clock": clock} if clock else {}), **kw)
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
            yield self.client.resource(r.group, r.versions[0], r.plural)

    async def sync(self, name: str) -> None:
        ns = self.inf.get(name)
        if ns is None:
            return
        if not ns["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for rc in self._namespaced():
            items, _ = await rc.list(name)
            for it in items:
                remaining += 1
                if not it["metadata"].get("deletionTimestamp"):
                    try:
                        await rc.delete(it["metadata"]["name"], name)
                    except APIError as e:
                        if e.code != 404:
                            raise
        if remaining:
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
