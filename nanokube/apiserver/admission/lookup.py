"""Reads admission plugins make: objects from the API server's watch cache
(upstream's plugins read through informers)."""

from __future__ import annotations

from typing import Any, Callable


def get(rest, group: str, plural: str, namespace: str | None, name: str) -> dict | None:
    res = rest.index.get(group, "v1", plural)
    entry = rest.cache.get(res.key(namespace or None, name)) if res is not None else None
    return entry.obj if entry is not None else None


def list_objects(rest, group: str, plural: str, namespace: str | None = None) -> list[dict]:
    res = rest.index.get(group, "v1", plural)
    if res is None:
        return []
    return [e.obj for _, e in rest.cache.list(res.key_prefix(namespace))]


class Listing:
    """A resource's objects of a namespace (all, for a cluster-scoped one), or what `derive` makes
    of them, kept until the watch cache says the resource changed: admission reads LimitRanges,
    quotas and PriorityClasses on every pod create, and listing them each time was 5% of a create
    (upstream's plugins read an informer's indexed cache). The answer is always the one a fresh
    listing would give, since the cache's change number moves with each write to the resource."""

    def __init__(self, rest, group: str, plural: str, derive: Callable[[list[dict]], Any] = list) -> None:
        self.rest, self.group, self.plural, self.derive = rest, group, plural, derive
        self._prefix: str | None = None
        self._mark: tuple[Any, int] | None = None
        self._memo: dict[str, Any] = {}

    def __call__(self, namespace: str | None = None) -> Any:
        cache = self.rest.cache
        if self._prefix is None:
            res = self.rest.index.get(self.group, "v1", self.plural)
            if res is None:
                return self.derive([])
            self._prefix = res.key_prefix()
        mark = cache.changes(self._prefix)
        if self._mark is None or mark != self._mark[1] or cache is not self._mark[0]:
            self._memo.clear()
            self._mark = (cache, mark)
        ns = namespace or ""
        try:
            return self._memo[ns]
        except KeyError:
            value = self._memo[ns] = self.derive(list_objects(self.rest, self.group, self.plural, namespace))
            return value


def object_name(a) -> str:
    """admission.NewForbidden's name: the request's, the object's, its generateName, else Unknown."""
    md = (a.obj or a.old or {}).get("metadata") or {}
    return a.name or md.get("name") or md.get("generateName") or "Unknown"
