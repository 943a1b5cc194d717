"""Serving custom resources: the API server's view follows its CRDs (upstream's crdHandler).

Every change of a CustomResourceDefinition in the watch cache is applied before the
write that made it returns (the cache's event hook runs ahead of read-your-writes
waiters): the CRD's `Resource` is added to, replaced in or removed from the index,
its kinds' OpenAPI definitions are (re)defined, and discovery and OpenAPI documents
are rebuilt on next request. So a schema change takes effect at once, without a
restart, and after a restart the stored CRDs are served before the first request.
The naming, establishing, API approval and finalizer controllers run beside it, as
upstream runs them inside the apiextensions-apiserver.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from ... import schema
from ...registry.apiextensions import CRD
from ..cache import DELETED, CacheEvent
from . import conversion
from .apiapproval import APIApprovalController
from .establishing import EstablishingController
from .finalizer import CRDFinalizer
from .naming import NamingController
from .resource import CustomResourceStrategy, definitions, resource_for

log = logging.getLogger(__name__)


class CustomResources:
    def __init__(self, server, client, changed: Callable[[], None]) -> None:
        self.index = server.index
        self.cache = server.cache
        self.changed = changed
        self.prefix = CRD.key_prefix()
        #: CRD name -> (served (group, plural), definitions it defined, what it was built from,
        #: what its storage was built from)
        self._served: dict[str, tuple[tuple[str, str], list[str], tuple, tuple]] = {}
        # conversion webhooks go through the admission webhooks' client (and its Service
        # resolver); a server without admission (unit tests) converts with a one-off client
        admission = getattr(getattr(server, "rest", None), "admission", None)
        if admission is not None:
            conversion.use_client(admission.client)
        self.controllers = [NamingController(client, clock=server.clock),
                            EstablishingController(client, clock=server.clock),
                            APIApprovalController(client, clock=server.clock),
                            CRDFinalizer(client, clock=server.clock)]

    async def start(self) -> None:
        for _, e in self.cache.list(self.prefix):
            self._sync(e.obj)
        self.cache.on_event.append(self._on_event)
        for c in self.controllers:
            await c.start()

    async def stop(self) -> None:
        conversion.use_client(None)
        if self._on_event in self.cache.on_event:
            self.cache.on_event.remove(self._on_event)
        for c in self.controllers:
            await c.stop()

    def _on_event(self, ev: CacheEvent) -> None:
        if not ev.key.startswith(self.prefix):
            return
        try:
            if ev.type == DELETED:
                self._unserve(ev.entry.obj["metadata"]["name"])
            else:
                self._sync(ev.entry.obj)
        except Exception:  # a CRD that cannot be served must not stop the watch cache
            log.exception("serving CustomResourceDefinition %s failed", ev.key)

    @staticmethod
    def _basis(crd: dict) -> tuple:
        md, st = crd["metadata"], crd.get("status") or {}
        conds = tuple((c.get("type"), c.get("status")) for c in st.get("conditions") or []
                      if c.get("type") in ("NamesAccepted", "Established"))
        return (md.get("uid"), md.get("generation"), bool(md.get("deletionTimestamp")), repr(st.get("acceptedNames")), conds)

    @staticmethod
    def _storage(crd: dict) -> tuple:
        """What upstream's crdHandler keeps a CRD's storage for: a change of its spec (a version,
        a schema, the scope, a printer column) or of its accepted names tears the storage down,
        and with it every watch of its objects, so clients list again and see the new schema."""
        return crd.get("spec"), (crd.get("status") or {}).get("acceptedNames")

    def _sync(self, crd: dict) -> None:
        name = crd["metadata"]["name"]
        basis = self._basis(crd)
        known = self._served.get(name)
        if known is not None and known[2] == basis:
            return
        res = resource_for(crd)
        if res is not None:
            res = self._unshadowed(res)
        if res is None or self._built_in(res):
            self._unserve(name)
            return
        if known is not None and known[0] != (res.group, res.plural):
            self.index.remove(*known[0])
        if known is not None:
            schema.forget(known[1])
        storage = self._storage(crd)
        if known is None or known[3] != storage:  # a new storage, and so a new cacher and history
            if known is not None:
                self.cache.end_watches(res.key_prefix())
            self.cache.begin_history(res.key_prefix())
        defs = definitions(crd, res)
        schema.define(defs)
        self.index.add(res)
        self._served[name] = ((res.group, res.plural), list(defs), basis, storage)
        self.changed()

    def _unshadowed(self, res):
        """`res` without the versions at a group version the server itself serves: kube-apiserver's
        director hands every path under such a /apis/<group>/<version> to its own routes (a 404 for
        a kind they lack), and aggregated discovery takes a group version from its built-in source
        before a CRD's. The CRD is established all the same; its other versions are served."""
        built_in = {(r.group, v) for r in self.index.resources if r.group == res.group
                    and not isinstance(r.strategy, CustomResourceStrategy) for v in r.versions}
        kept = [v for v in res.versions if (res.group, v) not in built_in]
        if len(kept) == len(res.versions):
            return res
        log.warning("CustomResourceDefinition %s.%s not served at %s: the server serves those group versions",
                    res.plural, res.group, ", ".join(v for v in res.versions if v not in kept))
        return dataclasses.replace(res, versions=kept) if kept else None

    def _built_in(self, res) -> bool:
        """A CRD never shadows a kind the server itself serves (upstream's local APIServices win)."""
        for v in res.versions:
            other = self.index.get(res.group, v, res.plural)
            if other is not None and not isinstance(other.strategy, CustomResourceStrategy):
                log.warning("CustomResourceDefinition %s.%s not served: %s/%s %s is built in",
                            res.plural, res.group, res.group, v, res.plural)
                return True
        return False

    def _unserve(self, name: str) -> None:
        known = self._served.pop(name, None)
        if known is None:
            return
        res = self.index.remove(*known[0])
        if res is not None:
            self.cache.end_watches(res.key_prefix())
        schema.forget(known[1])
        self.changed()
