"""The kubelet's user namespace manager (GetOrCreateUserNamespaceMappings) where no runtime handler
has user namespaces: a pod that asks for its own (`spec.hostUsers: false`) cannot have its sandbox
configured, so the sandbox is never made; the pod stays Pending in ContainerCreating, each sync's
refusal a FailedCreatePodSandBox event, as upstream's kubelet keeps it, rather than run in the node's
user namespace."""

from __future__ import annotations


class Unsupported(Exception):
    """The sandbox's user namespace cannot be set up (generatePodSandboxConfig's error)."""


def check(pod: dict, handler_features: dict) -> None:
    """Raise Unsupported for a pod with `hostUsers: false` where the runtime's handler has no user
    namespaces. The node looks up no RuntimeClass, so the handler is the default one ("") and the
    words are those for it."""
    if (pod.get("spec") or {}).get("hostUsers") is False and not handler_features.get("userNamespaces"):
        raise Unsupported("can't set `spec.hostUsers: false`, runtime does not support user namespaces")
