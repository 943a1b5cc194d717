"""The kubelet's device manager for device plugins' extended resources (pkg/kubelet/cm/devicemanager)."""
