"""The admission configuration objects (webhook configurations, policies and
bindings) as the dispatchers read them on every write: listed from the watch
cache once and kept until one of them changes, so a write pays for matching,
not for re-reading configuration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .matching import ADMISSION_GROUP, EXEMPT


class ConfigSource:
    def __init__(self, rest) -> None:
        self.rest = rest
        self._prefixes = tuple(f"/registry/{plural}.{ADMISSION_GROUP}/" for plural in EXEMPT)
        self._generation = 0
        self._memo: dict[Any, tuple[int, Any]] = {}
        rest.cache.on_event.append(self._observe)

    def _observe(self, ev) -> None:
        if ev.key.startswith(self._prefixes):
            self._generation += 1

    def objects(self, plural: str) -> list[dict]:
        """The stored objects of an admissionregistration resource, by name."""
        return self.derived(("objects", plural), lambda: self._list(plural))

    def derived(self, key: Any, build: Callable[[], Any]) -> Any:
        """`build()`, computed again only after a configuration object changed."""
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
