"""What a container's environment needs from ConfigMaps and Secrets (env valueFrom configMapKeyRef
and secretKeyRef, envFrom configMapRef and secretRef), checked as the kubelet's
makeEnvironmentVariables reads them, through the node's watches of them
(volumes/watch_based_manager.py): one that is missing, or a key missing from it, and not
optional fails the container's start (CreateContainerConfigError) with the kubelet's words."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .volumes.watch_based_manager import WatchBasedManager

#: (valueFrom key, envFrom key, resource, kind as the errors name it, and in lower case)
_SOURCES = (("configMapKeyRef", "configMapRef", "configmaps", "ConfigMap", "configmap"),
            ("secretKeyRef", "secretRef", "secrets", "Secret", "secret"))


async def environment_error(watched: dict[str, WatchBasedManager], namespace: str, container: dict) -> str:
    """Why the container's environment cannot be made ('' when it can): `configmap "x" not found`,
    `couldn't find key k in ConfigMap ns/x`, and the same of Secrets."""
    for e in container.get("envFrom") or ():
        for _, ref, plural, _, lower in _SOURCES:
            src = e.get(ref)
            if src and src.get("name") and not src.get("optional") and \
                    await watched[plural].get(namespace, src["name"]) is None:
                return f'{lower} "{src["name"]}" not found'
    for e in container.get("env") or ():
        for key_ref, _, plural, kind, lower in _SOURCES:
            src = (e.get("valueFrom") or {}).get(key_ref)
            if not src or src.get("optional"):
                continue
            obj = await watched[plural].get(namespace, src.get("name", ""))
            if obj is None:
                return f'{lower} "{src.get("name", "")}" not found'
            if src.get("key") not in (obj.get("data") or {}):
                return f"couldn't find key {src.get('key')} in {kind} {namespace}/{src.get('name', '')}"
    return ""
