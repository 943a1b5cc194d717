"""Core v1 events about an object, as client-go's event recorder writes them:
`kubectl describe` and `kubectl get events` show what a controller did."""

from __future__ import annotations

import logging

from ..machinery.errors import APIError
from ..clock import Clock

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, client, component: str, clock: Clock):
        self.events = client.resource("", "v1", "events")
        self.component = component
        self.clock = clock
        self._seq = 0

    async def emit(self, obj: dict, type_: str, reason: str, message: str) -> None:
        """Record one event on `obj` (which needs apiVersion and kind); a failed
        write is logged, never raised, so the action it reports still counts."""
        md = obj["metadata"]
        ns = md.get("namespace") or "default"
        now = self.clock.now()
        self._seq += 1
        ref = {"kind": obj["kind"], "apiVersion": obj["apiVersion"], "name": md["name"], "uid": md.get("uid")}
        if md.get("namespace"):
            ref["namespace"] = md["namespace"]
        if md.get("resourceVersion"):
            ref["resourceVersion"] = md["resourceVersion"]
        try:
            await self.events.create({
                "metadata": {"name": f"{md['name']}.{int(now * 1e9) + self._seq:x}", "namespace": ns},
                "involvedObject": ref, "reason": reason, "message": message, "type": type_, "count": 1,
                "firstTimestamp": self.clock.rfc3339(now), "lastTimestamp": self.clock.rfc3339(now),
                "source": {"component": self.component}, "reportingComponent": self.component,
            })
        except APIError as e:
            log.info("%s: event %s on %s/%s not written: %s", self.component, reason, ns, md["name"], e.message)
