"""Materialises a pod's volumes under `<root>/<pod uid>/volumes/<name>`
before its containers start, and removes them when the pod is gone.

A source that cannot be set up yet (a ConfigMap that does not exist) raises
`MountError`; the pod stays in ContainerCreating and the lifecycle reports
a `FailedMount` event with the kubelet's wording, then retries.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Awaitable, Callable

from ...apiserver.errors import APIError
from ...clock import REAL, Clock
from .atomic_writer import write_atomic

DEFAULT_MODE = 0o644


class MountError(Exception):
    def __init__(self, volume: str, message: str):
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {message}')
        self.volume = volume


#: a volume source's setup: (manager, pod, volume, target dir) -> None
Source = Callable[["VolumeManager", dict, dict, str], Awaitable[None]]


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


async def _config_map(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol["configMap"]
    try:
        cm = await mgr.client.resource("", "v1", "configmaps").get(src["name"], pod["metadata"]["namespace"])
    except APIError as e:
        if e.code != 404:
            raise
        if src.get("optional"):
            write_atomic(target, {})
            return
        raise MountError(vol["name"], f'configmap "{src["name"]}" not found') from None
    data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    data |= {k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()}
    write_atomic(target, _select(data, src.get("items"), "configmap", vol["name"]),
                 src.get("defaultMode", DEFAULT_MODE))


async def _secret(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol["secret"]
    try:
        sec = await mgr.client.resource("", "v1", "secrets").get(src["secretName"], pod["metadata"]["namespace"])
    except APIError as e:
        if e.code != 404:
            raise
        if src.get("optional"):
            write_atomic(target, {})
            return
        raise MountError(vol["name"], f'secret "{src["secretName"]}" not found') from None
    data = {k: base64.b64decode(v) for k, v in (sec.get("data") or {}).items()}
    write_atomic(target, _select(data, src.get("items"), "secret", vol["name"]),
                 src.get("defaultMode", DEFAULT_MODE))


async def _empty_dir(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    os.makedirs(target, exist_ok=True)


SOURCES: dict[str, Source] = {"configMap": _config_map, "secret": _secret, "emptyDir": _empty_dir}


class VolumeManager:
    """One node's pod volume directories."""

    def __init__(self, client, node_name: str, root: str, clock: Clock = REAL):
        self.client = client
        self.node_name = node_name
        self.root = root
        self.clock = clock

    def pod_dir(self, uid: str) -> str:
        return os.path.join(self.root, uid)

    def volume_dir(self, uid: str, volume: str) -> str:
        return os.path.join(self.pod_dir(uid), "volumes", volume)

    async def mount(self, pod: dict) -> dict[str, str]:
        """Set up every volume of a known kind; returns volume name -> directory.
        Kinds a simulated node cannot provide (persistent disks) get an empty
        directory, as an image is recorded rather than pulled."""
        uid = pod["metadata"]["uid"]
        out = {}
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            target = self.volume_dir(uid, vol["name"])
            kind = next((k for k in vol if k != "name"), "emptyDir")
            await SOURCES.get(kind, _empty_dir)(self, pod, vol, target)
            out[vol["name"]] = target
        return out

    def unmount(self, uid: str) -> None:
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)
