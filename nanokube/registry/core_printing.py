"""Shared pieces of the core group's `kubectl get` printers.

Upstream's printers render times as "how long ago" (duration.HumanDuration)
and take column descriptions from the API docs; both are needed by several
core kinds, so they live here once.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import schema
from ..clock import parse_time as _parse_rfc3339

Clock = Callable[[], float]


def doc(definition: str, field: str) -> str:
    """The OpenAPI description of `field` in `io.k8s.api.core.v1.<definition>`."""
    props = schema.definitions()[f"io.k8s.api.core.v1.{definition}"].get("properties") or {}
    return (props.get(field) or {}).get("description", "")


NAME_DOC = (schema.definitions()["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["name"]
            .get("description", ""))
AGE_DOC = (schema.definitions()["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["creationTimestamp"]
           .get("description", ""))


#: Go's zero time.Time (0001-01-01T00:00:00Z), which metav1.Time.IsZero calls unset; year 0000 is not
GO_ZERO_TIME = _parse_rfc3339("0001-01-01T00:00:00Z")
#: the largest time.Duration, in seconds: Go's Time.Sub saturates there (about 292 years)
MAX_DURATION = (2**63 - 1) / 1e9


def parse_time(ts: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 (Micro)Time (year 0000 too, as Go reads it), None if unset."""
    if not ts:
        return None
    return _parse_rfc3339(ts)


def human_duration(seconds: float) -> str:
    """duration.HumanDuration: '45s', '3m20s', '5h', '2d3h', '1y30d'. Its argument is a time.Duration,
    which time.Since saturates at about ±292 years: further off is '292y' (or '<invalid>' ahead)."""
    s = int(max(-MAX_DURATION, min(seconds, MAX_DURATION)))
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def since(ts: str | None, clock: Clock) -> str:
    """translateTimestampSince: '<unknown>' for an unset or Go's zero time."""
    t = parse_time(ts)
    return "<unknown>" if t is None or t == GO_ZERO_TIME else human_duration(clock() - t)


def format_labels(labels: dict[str, Any] | None) -> str:
    """labels.FormatLabels: sorted k=v pairs, '<none>' when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))
