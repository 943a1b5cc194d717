"""Simulated nodes: cluster files, per-node agents (the kubelet's role) and the
manager that runs thousands of them in one process."""
