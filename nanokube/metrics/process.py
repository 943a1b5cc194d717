"""client_golang's process collector (process_cpu_seconds_total, process_resident_memory_bytes,
process_start_time_seconds, ...), which every component's legacyregistry registers for /metrics:
one instance shared by the API server and the components, kept out of apiserver so kube-proxy and
the standalone components can serve it without importing the server's packages."""

from __future__ import annotations

from prometheus_client import ProcessCollector

PROCESS = ProcessCollector(registry=None)
