"""A pod's phase as podutil reads it: Succeeded and Failed are terminal (IsPodPhaseTerminal), a
pod in either never runs a container again; the controllers, quota and the node all ask it."""

from __future__ import annotations

TERMINAL_PHASES = ("Succeeded", "Failed")


def pod_is_terminal(pod: dict) -> bool:
    """IsPodTerminal: the pod's phase is Succeeded or Failed."""
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
