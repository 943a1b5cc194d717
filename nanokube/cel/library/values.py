"""Runtime representation of the Kubernetes library types: maps with one
marker key (the engine carries only plain CEL values), and the type test the
dispatchers use."""

from __future__ import annotations

import datetime
from typing import Any

import cel

from ..types import Type

MARKERS = {
    "kubernetes.Quantity": "@quantity",
    "kubernetes.Semver": "@semver",
    "net.IP": "@ip",
    "net.CIDR": "@cidr",
    "kubernetes.URL": "@url",
    "kubernetes.NamedFormat": "@format",
    "kubernetes.authorization.Authorizer": "@authz",
    "kubernetes.authorization.PathCheck": "@authzpath",
    "kubernetes.authorization.GroupCheck": "@authzgroup",
    "kubernetes.authorization.ResourceCheck": "@authzresource",
    "kubernetes.authorization.Decision": "@authzdecision",
}
_MARKER_KEYS = frozenset(MARKERS.values())


def marker(v: Any) -> str | None:
    """The marker key of a library value (an authorizer may also carry its
    `requestResource`), else None."""
    if isinstance(v, dict) and len(v) == 1:
        k = next(iter(v))
        return k if k in _MARKER_KEYS else None
    if isinstance(v, dict) and len(v) == 2 and "requestResource" in v and "@authz" in v:
        return "@authz"
    return None


def matches_type(v: Any, t: Type) -> bool:
    n = t.name
    if n in ("dyn", "A", "B"):
        return True
    if n in MARKERS:
        return marker(v) == MARKERS[n]
    if n == "string":
        return isinstance(v, str)
    if n in ("int", "uint"):
        return isinstance(v, int) and not isinstance(v, bool)
    if n == "double":
        return isinstance(v, float)
    if n == "bool":
        return isinstance(v, bool)
    if n == "bytes":
        return isinstance(v, bytes)
    if n == "list":
        return isinstance(v, list)
    if n in ("map", "object"):
        return isinstance(v, dict) and marker(v) is None
    if n == "optional":
        return isinstance(v, cel.OptionalValue)
    if n == "timestamp":
        return isinstance(v, datetime.datetime)
    if n == "duration":
        return isinstance(v, datetime.timedelta)
    if n == "null_type":
        return v is None
    return False
