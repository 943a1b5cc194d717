"""The metrics client-go keeps for a component's own requests (component-base's restclient adapters
and leaderelection's): what the kubernetes-mixin's scheduler and controller-manager dashboards read
from the components. Only the HTTP client counts; the in-process (loopback) clients of `nanokube up`
have no upstream counterpart, so they keep none. One registry a process, as legacyregistry is."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from ..machinery.metrics import Family

REGISTRY = CollectorRegistry()
#: component-base's restclient buckets, the same for the request and the rate limiter latency
BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

REQUESTS = Family("counter", "rest_client_requests_total",
                  "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
                  ["code", "method", "host"], REGISTRY)
LATENCY = Family("histogram", "rest_client_request_duration_seconds",
                 "[ALPHA] Request latency in seconds. Broken down by verb, and host.", ["verb", "host"], REGISTRY,
                 BUCKETS)
RATE_LIMITER = Family("histogram", "rest_client_rate_limiter_duration_seconds",
                      "[ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and host.",
                      ["verb", "host"], REGISTRY, BUCKETS)
LEADER = Family("gauge", "leader_election_master_status",
                "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
                "1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
                ["name"], REGISTRY)

#: the HTTP verb each rate-limited call of a resource client sends
VERBS = {"get": "GET", "list": "GET", "list_page": "GET", "get_scale": "GET", "create": "POST",
         "create_subresource": "POST", "update": "PUT", "patch": "PATCH", "update_scale": "PATCH",
         "delete": "DELETE", "delete_collection": "DELETE", "get_raw": "GET"}


def reset() -> None:
    """legacyregistry.Reset's share of these (kube-scheduler's DELETE /metrics)."""
    for family in (REQUESTS, LATENCY, RATE_LIMITER, LEADER):
        family.reset()
