"""The device manager's checkpoint, `kubelet_internal_checkpoint` in the node's device-plugins
directory, in upstream's shape: {"Data": {"PodDeviceEntries": [{PodUID, ContainerName,
ResourceName, DeviceIDs: {NUMA node: [IDs]}, AllocResp}], "RegisteredDevices": {resource:
[IDs]}}, "Checksum": N}. AllocResp is bytes (base64 in JSON) as upstream's, holding the
allocation's JSON rather than its protobuf; the checksum is a CRC-32 of the data's canonical
JSON. A file whose checksum does not match is refused whole, as upstream's corrupt checkpoint."""

from __future__ import annotations

import contextlib
import json
import os
import zlib

NAME = "kubelet_internal_checkpoint"


class CorruptCheckpoint(ValueError):
    """The file is not a checkpoint, or its checksum does not match its data."""


def _checksum(data: dict) -> int:
    return zlib.crc32(json.dumps(data, sort_keys=True, separators=(",", ":")).encode())


def write(path: str, data: dict) -> None:
    """Replace the checkpoint atomically (a crash leaves the old one or the new one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"Data": data, "Checksum": _checksum(data)}, f)
    os.replace(tmp, path)


def read(path: str) -> dict | None:
    """The checkpoint's data, None when there is none; CorruptCheckpoint when unreadable."""
    with contextlib.suppress(FileNotFoundError):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            doc = json.loads(text)
            data = doc["Data"]
            ok = isinstance(data, dict) and doc["Checksum"] == _checksum(data)
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise CorruptCheckpoint(f"checkpoint {path} is corrupted")
        return data
    return None
