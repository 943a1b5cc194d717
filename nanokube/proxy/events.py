"""What kube-proxy's Events (events.k8s.io/v1, through the proxier's recorder) name: its own
Node, referenced as upstream's s.NodeRef is (by name, which is also its UID, no namespace: the
Events go to `default`), and the actions they report."""

from __future__ import annotations

#: the action of what kube-proxy reports while starting (upstream's birth cry, its mode warnings)
ACTION_START = "StartKubeProxy"
#: the action of a failed rules sync
ACTION_SYNC = "SyncProxyRules"


def node_ref(node: str) -> dict:
    """The Node as kube-proxy refers to it: by name, which is also its UID."""
    return {"kind": "Node", "name": node, "uid": node}
