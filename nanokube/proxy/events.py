"""Events kube-proxy records about its own Node (core/v1, namespace
`default`, involvedObject the Node with its name as UID, as upstream does)."""

from __future__ import annotations

import logging

from ..machinery.errors import APIError
from ..clock import Clock

log = logging.getLogger(__name__)


async def record_node_event(client, clock: Clock, node: str, reason: str, message: str,
                            type_: str = "Warning") -> None:
    """Create the Event; a refusal is logged, never raised (events are best effort)."""
    now = clock.now()
    body = {
        "metadata": {"name": f"{node}.{int(now * 1e9):x}", "namespace": "default"},
        "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": node, "uid": node},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "source": {"component": "kube-proxy", "host": node},
        "firstTimestamp": clock.rfc3339(now), "lastTimestamp": clock.rfc3339(now),
        "reportingComponent": "kube-proxy", "reportingInstance": node,
    }
    try:
        await client.resource("", "v1", "events").create(body, namespace="default")
    except APIError as e:
        log.warning("node %s: event %s not recorded: %s", node, reason, e.message)
