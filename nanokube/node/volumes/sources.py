"""The plain volume sources: configMap, secret and emptyDir, and the
helpers a projected volume shares with them."""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

from ...machinery.errors import APIError
from .atomic_writer import write_atomic

if TYPE_CHECKING:
    from .manager import VolumeManager

DEFAULT_MODE = 0o644


class MountError(Exception):
    def __init__(self, volume: str, message: str):
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {message}')
        self.volume = volume


def _select(data: dict[str, bytes], items: list[dict] | None, kind: str, volume: str) -> dict[str, bytes]:
    """All keys, or only `items` (key -> path), as the kubelet projects them."""
    if not items:
        return dict(data)
    out = {}
    for it in items:
        if it["key"] not in data:
            raise MountError(volume, f'configmap references non-existent config key: {it["key"]}'
                             if kind == "configmap" else f'references non-existent secret key: {it["key"]}')
        out[it["path"]] = data[it["key"]]
    return out


async def config_map_files(mgr: VolumeManager, namespace: str, src: dict, volume: str) -> dict[str, bytes]:
    """The files a configMap source (volume or projection) yields; none for a missing optional one."""
    try:
        cm = await mgr.client.resource("", "v1", "configmaps").get(src["name"], namespace)
    except APIError as e:
        if e.code != 404:
            raise
        if src.get("optional"):
            return {}
        raise MountError(volume, f'configmap "{src["name"]}" not found') from None
    data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    data |= {k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()}
    return _select(data, src.get("items"), "configmap", volume)


async def secret_files(mgr: VolumeManager, namespace: str, src: dict, volume: str, name_key: str = "secretName"
                       ) -> dict[str, bytes]:
    """The files a secret source yields (`secretName` in a volume, `name` in a projection)."""
    try:
        sec = await mgr.client.resource("", "v1", "secrets").get(src[name_key], namespace)
    except APIError as e:
        if e.code != 404:
            raise
        if src.get("optional"):
            return {}
        raise MountError(volume, f'secret "{src[name_key]}" not found') from None
    data = {k: base64.b64decode(v) for k, v in (sec.get("data") or {}).items()}
    return _select(data, src.get("items"), "secret", volume)


async def config_map(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol["configMap"]
    write_atomic(target, await config_map_files(mgr, pod["metadata"]["namespace"], src, vol["name"]),
                 src.get("defaultMode", DEFAULT_MODE))


async def secret(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol["secret"]
    write_atomic(target, await secret_files(mgr, pod["metadata"]["namespace"], src, vol["name"]),
                 src.get("defaultMode", DEFAULT_MODE))


async def empty_dir(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    os.makedirs(target, exist_ok=True)
