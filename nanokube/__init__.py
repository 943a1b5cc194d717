"""nanokube: Kubernetes' control plane in Python."""
