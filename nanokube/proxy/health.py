"""kube-proxy's health as its healthz server defines it.

The proxier is unhealthy when a change it was told about (a Service or
EndpointSlice event) has waited longer than `timeout` for a successful sync;
upstream uses twice the sync period. `/healthz` is also unhealthy while the
proxy's own Node is being deleted or carries the cluster autoscaler's
to-be-deleted taint, so load balancers drain it; `/livez` ignores the Node.
Bodies carry Go's time formatting, as upstream's do.
"""

from __future__ import annotations

import datetime as _dt

import orjson
from prometheus_client import CollectorRegistry, Counter

from ..clock import REAL, Clock

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
#: Go's zero time.Time, what upstream reports before the first sync
ZERO_TIME = "0001-01-01 00:00:00 +0000 UTC"


def go_time(t: float | None) -> str:
    """`t` (epoch seconds) as Go prints a time.Time in UTC."""
    if t is None:
        return ZERO_TIME
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC")


class ProxyHealth:
    def __init__(self, timeout: float, clock: Clock = REAL, registry: CollectorRegistry | None = None):
        self.timeout, self.clock = timeout, clock
        self.last_updated: float | None = None
        self.oldest_pending: float | None = None
        self.node_eligible = True
        registry = registry or CollectorRegistry()
        # upstream's subsystem "kubeproxy" and names "proxy_healthz_total", "proxy_livez_total"
        self._healthz = Counter("kubeproxy_proxy_healthz", "[ALPHA] Cumulative proxy healthz HTTP status", ["code"],
                                registry=registry)
        self._livez = Counter("kubeproxy_proxy_livez", "[ALPHA] Cumulative proxy livez HTTP status", ["code"],
                              registry=registry)

    def queued(self) -> None:
        """A change arrived that a sync has yet to write; the oldest one counts."""
        if self.oldest_pending is None:
            self.oldest_pending = self.clock.now()

    def updated(self) -> None:
        """A sync succeeded: the rules match everything queued before it."""
        self.oldest_pending = None
        self.last_updated = self.clock.now()

    def sync_node(self, node: dict | None) -> None:
        """Follow the proxy's own Node: deleted or being deleted makes it ineligible."""
        if node is None or node["metadata"].get("deletionTimestamp"):
            self.node_eligible = False
            return
        self.node_eligible = not any(t.get("key") == TO_BE_DELETED_TAINT for t in node.get("spec", {}).get("taints") or [])

    def healthy(self) -> bool:
        return self.oldest_pending is None or self.clock.now() - self.oldest_pending < self.timeout

    def healthz(self) -> tuple[int, bytes]:
        """Status code and body of `/healthz`."""
        ok = self.healthy() and self.node_eligible
        code, body = self._answer(ok)
        self._healthz.labels(str(code)).inc()
        return code, orjson.dumps(body | {"nodeEligible": self.node_eligible})

    def livez(self) -> tuple[int, bytes]:
        code, body = self._answer(self.healthy())
        self._livez.labels(str(code)).inc()
        return code, orjson.dumps(body)

    def _answer(self, ok: bool) -> tuple[int, dict]:
        now = self.clock.now()
        # a healthy answer reports "now" as lastUpdated, as upstream keeps doing for older clients
        last = now if ok else self.last_updated
        return (200 if ok else 503), {"lastUpdated": go_time(last), "currentTime": go_time(now)}
