"""Server-side printing: meta.k8s.io/v1 Table responses for `kubectl get`."""

from __future__ import annotations

from typing import Any

from ..clock import Clock, parse_time
from ..registry.apps import age_column, api_doc, name_column
from ..registry.base import AGE, Age, Column, Resource
from ..registry.core_printing import human_duration, since

_DEFAULT = [
    Column("Name", "string", lambda o: o["metadata"]["name"], "Name must be unique within a namespace.", "name"),
    Column("Created At", "date", lambda o: o["metadata"].get("creationTimestamp", ""),
           "CreationTimestamp is a timestamp representing the server time when this object was created."),
]

#: printScale's columns: a built-in workload's Scale (`kubectl get deployment/x --subresource=scale`)
SCALE_COLUMNS = [
    name_column(),
    Column("Desired", "integer", lambda s: (s.get("spec") or {}).get("replicas", 0),
           api_doc("io.k8s.api.autoscaling.v1.ScaleSpec", "replicas")),
    Column("Available", "integer", lambda s: (s.get("status") or {}).get("replicas", 0),
           api_doc("io.k8s.api.autoscaling.v1.ScaleStatus", "replicas")),
    age_column(),
]


def columns(res: Resource) -> list[Column]:
    return res.strategy.columns or _DEFAULT


def age(obj: dict, now: float) -> str:
    return since(obj.get("metadata", {}).get("creationTimestamp"), lambda: now)


def column_definitions(cols: list[Column]) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "type": c.type, "format": c.format, "description": c.description, "priority": c.priority}
        for c in cols
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
    return c.empty if v is None else v


def row(cols: list[Column], obj: dict, stored: dict, now: float, include: str, meta_version: str = "v1") -> dict[str, Any]:
    r: dict[str, Any] = {"cells": [_cell(c, stored, now) for c in cols]}
    if include == "Object":
        r["object"] = obj
    elif include != "None":
        r["object"] = partial_metadata(obj, meta_version)
    return r


def partial_metadata(obj: dict, meta_version: str = "v1") -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{meta_version}", "metadata": obj.get("metadata", {})}


def table(res: Resource, pairs: list[tuple[dict, dict]], clock: Clock, include: str, list_meta: dict,
          with_columns: bool = True, cols: list[Column] | None = None, meta_version: str = "v1",
          version: str = "") -> dict[str, Any]:
    """pairs: (object as served, stored object) — columns (`cols`, else the resource's) read the stored form,
    but for a resource whose columns are `version`'s own (a CRD's), which read the object as served.
    `meta_version`: the meta.k8s.io version asked for (v1beta1 Tables are served as v1beta1, their rows'
    PartialObjectMetadata too, as upstream's asTable sets them)."""
    now = clock.now()
    if cols is None and version and (own := res.strategy.columns_at(version)) is not None:
        cols, pairs = own, [(o, o) for o, _ in pairs]
    cols = cols or columns(res)
    key = res.strategy.table_sort_key
    if key is not None and len(pairs) > 1:  # one row (a watch event's, a bookmark's without a name) is in order
        pairs = sorted(pairs, key=lambda p: key(p[1]))
    t: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{meta_version}",
        "metadata": list_meta,
        "rows": [row(cols, o, s, now, include, meta_version) for o, s in pairs],
    }
    # a watch's later events: the table convertor's NoHeaders leaves the (not omitempty) field nil
    t["columnDefinitions"] = column_definitions(cols) if with_columns else None
    return t
