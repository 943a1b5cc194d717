"""What the API server and kube-proxy both read in a Service's spec (upstream's pkg/api/service)."""

from __future__ import annotations


def needs_health_check(spec: dict) -> bool:
    """Upstream's NeedsHealthCheck: a LoadBalancer whose external traffic stays on the node it reaches
    needs a node port on which each node's kube-proxy tells the load balancer whether it has endpoints."""
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def health_check_node_port(spec: dict) -> int:
    """The health check node port a Service's spec holds, or 0."""
    return (spec.get("healthCheckNodePort") or 0) if needs_health_check(spec) else 0
