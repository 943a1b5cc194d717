"""kube-apiserver's truncate plugin (plugin/pkg/audit/truncate), which `--audit-log-truncate-enabled`
and `--audit-webhook-truncate-enabled` put in front of a backend: an event whose JSON is longer
than `--audit-*-truncate-max-event-size` bytes (100 KiB) loses its request and response objects,
where its level logs them, and is annotated `audit.k8s.io/truncated: "true"`; one still too long
is dropped (and counted as the `truncate` plugin's error). The webhook's batches are split so that
none is longer than `--audit-webhook-truncate-max-batch-size` bytes (10 MiB)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from .audit_policy import REQUEST, REQUEST_RESPONSE

ANNOTATION = "audit.k8s.io/truncated"
#: upstream's defaults: 10 MiB a batch, 100 KiB an event
MAX_BATCH, MAX_EVENT = 10 * 1024 * 1024, 100 * 1024


@dataclass(frozen=True, slots=True)
class Truncate:
    """A backend's truncate options (upstream's defaults)."""
    max_batch: int = MAX_BATCH
    max_event: int = MAX_EVENT


def truncated(line: bytes, max_event: int) -> bytes | None:
    """The event's line (newline included) as the backend gets it, or None: too long even without
    its objects (or at a level without them)."""
    if len(line) - 1 <= max_event:
        return line
    event = orjson.loads(line)
    if event.get("level") not in (REQUEST, REQUEST_RESPONSE):
        return None
    event.pop("requestObject", None)
    event.pop("responseObject", None)
    event["annotations"] = {**(event.get("annotations") or {}), ANNOTATION: "true"}
    line = orjson.dumps(event) + b"\n"
    return line if len(line) - 1 <= max_event else None


def split(batch: list[bytes], max_batch: int) -> list[list[bytes]]:
    """A batch of encoded events in consecutive parts of at most `max_batch` bytes (a part of one
    event at least), as the plugin hands its delegate."""
    parts, part, size = [], [], 0
    for line in batch:
        if part and size + len(line) > max_batch:
            parts.append(part)
            part, size = [], 0
        part.append(line)
        size += len(line)
    if part:
        parts.append(part)
    return parts
