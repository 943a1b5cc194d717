"""The admission configuration objects (webhook configurations, policies and
bindings) as the dispatchers read them on every write: listed from the watch
cache once and kept until one of them changes, so a write pays for matching,
not for re-reading configuration. Changes are noticed through a cache watcher
per resource, which also hears when the cache relists."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..cache import Watcher
from .matching import ADMISSION_GROUP, EXEMPT


class _Changes(asyncio.Queue):
    """A configuration watcher's queue that keeps nothing but the fact that something arrived
    (the next write reads the configuration anew): each write's check is one attribute, not a
    look into every watcher's queue (several times per write)."""

    def __init__(self, source: ConfigSource) -> None:
        super().__init__()
        self._source = source

    def _put(self, item: Any) -> None:
        self._source._dirty = True


class ConfigSource:
    def __init__(self, rest) -> None:
        self.rest = rest
        self._dirty = False
        self._watchers = [Watcher(f"/registry/{plural}.{ADMISSION_GROUP}/", lambda ev: True, queue=_Changes(self))
                          for plural in EXEMPT]
        for w in self._watchers:
            rest.cache.add_watcher(w)
        self._generation = 0
        self._memo: dict[Any, tuple[int, Any]] = {}

    def _changed(self) -> bool:
        if not self._dirty:
            return False
        self._dirty = False
        for w in self._watchers:
            w.overflowed = False  # a relist (which also queues None) stops the cache offering events until reset
        return True

    def configured(self) -> bool:
        """Whether any webhook configuration, policy or binding exists: without one, the policy
        and webhook dispatchers have nothing to match, and a write skips their four rounds
        (~20 k instructions of every write). Read by every write, twice: the remembered answer
        without `derived`'s calls while no configuration object changed."""
        if not self._dirty:
            hit = self._memo.get("configured")
            if hit is not None and hit[0] == self._generation:
                return hit[1]
        return self.derived("configured", lambda: any(self.objects(plural) for plural in EXEMPT))

    def objects(self, plural: str) -> list[dict]:
        """The stored objects of an admissionregistration resource, by name."""
        return self.derived(("objects", plural), lambda: self._list(plural))

    def derived(self, key: Any, build: Callable[[], Any]) -> Any:
        """`build()`, computed again only after a configuration object changed."""
        if self._changed():
            self._generation += 1
        hit = self._memo.get(key)
        if hit is not None and hit[0] == self._generation:
            return hit[1]
        value = build()
        self._memo[key] = (self._generation, value)
        return value

    def _list(self, plural: str) -> list[dict]:
        res = self.rest.index.get(ADMISSION_GROUP, "v1", plural)
        if res is None:
            return []
        return [e.obj for _, e in self.rest.cache.list(res.key_prefix())]
