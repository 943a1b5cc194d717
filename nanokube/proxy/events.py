"""Events kube-proxy records about its own Node (core/v1, namespace
`default`, involvedObject the Node with its name as UID, as upstream does),
through the proxier's recorder so repeats are counted and spam filtered."""

from __future__ import annotations

from ..client.record import CoreEventRecorder


def node_ref(node: str) -> dict:
    """The Node as kube-proxy refers to it: by name, which is also its UID."""
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": node, "uid": node}}


async def record_node_event(recorder: CoreEventRecorder, node: str, reason: str, message: str,
                            type_: str = "Warning") -> None:
    """Record the Event; a refusal is logged by the recorder, never raised (events are best effort)."""
    await recorder.emit(node_ref(node), type_, reason, message)
