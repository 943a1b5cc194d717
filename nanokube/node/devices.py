"""A node's devices as the cluster file and NVML discovery describe them, for the DRA driver."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """One GPU or NIC of a node, kept for the DRA driver to publish."""

    kind: str
    name: str
    attributes: dict
    capacity: dict
