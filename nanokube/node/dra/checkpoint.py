"""The node's prepared claims on disk, upstream's DRA manager checkpoint
(`dra_manager_state` in the kubelet's root directory): a restarted node agent
reads which claims its drivers prepared, for which pods and with what devices,
so that it adopts running pods without asking a driver to prepare a claim
again and still unprepares each claim when its last pod goes (and those a
driver failed to prepare, or to unprepare).

The file is JSON with a checksum of its data, written whole to a temporary
file then renamed over the old one; one that does not parse or whose checksum
does not match is ignored (logged), as a kubelet starting with no state would.
"""

from __future__ import annotations

import json
import logging
import os
import zlib

log = logging.getLogger(__name__)

FILE = "dra_manager_state"
VERSION = "v1"


def save(path: str, claims: dict[str, dict]) -> None:
    """Write `claims` (claim uid -> its JSON-able state) to `path`."""
    data = json.dumps({"version": VERSION, "claims": claims}, sort_keys=True, separators=(",", ":"))
    tmp = f"{path}.tmp"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(tmp, "w") as f:
        json.dump({"data": data, "checksum": zlib.crc32(data.encode())}, f)
    os.replace(tmp, path)


def load(path: str) -> dict[str, dict]:
    """The claims `save` wrote to `path`; none if there is no file or it cannot be trusted."""
    try:
        with open(path) as f:
            outer = json.load(f)
        data = outer["data"]
        if zlib.crc32(data.encode()) != outer["checksum"]:
            raise ValueError("checksum mismatch")
        inner = json.loads(data)
        if inner.get("version") != VERSION:
            raise ValueError(f"unknown version {inner.get('version')!r}")
        return inner["claims"]
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("DRA checkpoint %s ignored: %s", path, e)
        return {}
