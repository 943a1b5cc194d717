"""Reads admission plugins make: objects from the API server's watch cache
(upstream's plugins read through informers)."""

from __future__ import annotations


def get(rest, group: str, plural: str, namespace: str | None, name: str) -> dict | None:
    res = rest.index.get(group, "v1", plural)
    entry = rest.cache.get(res.key(namespace or None, name)) if res is not None else None
    return entry.obj if entry is not None else None


def list_objects(rest, group: str, plural: str, namespace: str | None = None) -> list[dict]:
    res = rest.index.get(group, "v1", plural)
    if res is None:
        return []
    return [e.obj for _, e in rest.cache.list(res.key_prefix(namespace))]


def object_name(a) -> str:
    """admission.NewForbidden's name: the request's, the object's, its generateName, else Unknown."""
    md = (a.obj or a.old or {}).get("metadata") or {}
    return a.name or md.get("name") or md.get("generateName") or "Unknown"
