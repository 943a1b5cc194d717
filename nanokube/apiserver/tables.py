"""Server-side printing: meta.k8s.io/v1 Table responses for `kubectl get`."""

from __future__ import annotations

from typing import Any

from ..clock import Clock, parse_time
from ..registry.base import AGE, Age, Column, Resource
from ..registry.core_printing import human_duration

_DEFAULT = [
    Column("Name", "string", lambda o: o["metadata"]["name"], "Name must be unique within a namespace.", "name"),
    Column("Created At", "date", lambda o: o["metadata"].get("creationTimestamp", ""),
           "CreationTimestamp is a timestamp representing the server time when this object was created."),
]


def columns(res: Resource) -> list[Column]:
    return res.strategy.columns or _DEFAULT


def age(obj: dict, now: float) -> str:
    ts = obj.get("metadata", {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    return human_duration(now - parse_time(ts))


def column_definitions(res: Resource) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "type": c.type, "format": c.format, "description": c.description, "priority": c.priority}
        for c in columns(res)
    ]


def _cell(c: Column, obj: dict, now: float) -> Any:
    if c.fn is AGE:
        return age(obj, now)
    try:
        v = c.fn(obj)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        v = "<unknown>"
    if isinstance(v, Age):
        try:
            return human_duration(now - parse_time(v))
        except ValueError:
            return "<invalid>"
    return "<none>" if v is None else v


def row(res: Resource, obj: dict, stored: dict, now: float, include: str) -> dict[str, Any]:
    r: dict[str, Any] = {"cells": [_cell(c, stored, now) for c in columns(res)]}
    if include == "Object":
        r["object"] = obj
    elif include != "None":
        r["object"] = partial_metadata(obj)
    return r


def partial_metadata(obj: dict) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def table(res: Resource, pairs: list[tuple[dict, dict]], clock: Clock, include: str, list_meta: dict,
          with_columns: bool = True) -> dict[str, Any]:
    """pairs: (object as served, stored object) — columns read the stored form."""
    now = clock.now()
    key = res.strategy.table_sort_key
    if key is not None:
        pairs = sorted(pairs, key=lambda p: key(p[1]))
    t: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "rows": [row(res, o, s, now, include) for o, s in pairs],
    }
    t["columnDefinitions"] = column_definitions(res) if with_columns else []
    return t
