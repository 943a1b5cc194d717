"""The node's CSINode (storage.k8s.io/v1), as the kubelet's CSI volume plugin makes it at start-up
(nodeinfomanager's InitializeCSINodeWithAnnotation): named after the Node and owned by it, so the
garbage collector removes it with the Node, with no drivers until a CSI driver registers. The
scheduler's volume plugins read it through their CSINode informer; `kubectl get csinodes` lists it."""

from __future__ import annotations

from ..machinery.errors import APIError


async def ensure(client, node: dict) -> None:
    """Create `node`'s CSINode unless there is one (a restarted kubelet keeps what it made)."""
    meta = node["metadata"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
    try:
        await client.resource("storage.k8s.io", "v1", "csinodes").create(
            {"metadata": {"name": meta["name"], "ownerReferences": [owner]}, "spec": {"drivers": []}})
    except APIError as e:
        if e.code != 409:
            raise
