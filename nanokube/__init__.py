"""nanokube: Kubernetes' control plane in Python."""

from prometheus_client import disable_created_metrics

# Kubernetes components expose client_golang's text format, which has no `_created` series:
# prometheus_client's Counters and Histograms, in any nanokube process, leave them out too
disable_created_metrics()
