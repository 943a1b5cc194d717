"""The Container Device Interface as a container runtime applies it: a DRA
driver writes CDI spec files (JSON or YAML) into one of the runtime's CDI directories and
returns fully qualified device names ("vendor.com/class=device") from
NodePrepareResources; the runtime finds each name's spec by its `kind`
("vendor.com/class") and applies the spec's `containerEdits`, then the
device's, to the container.

The edits a node applies (`edits`): `env` ("NAME=value" entries, a later one
replacing an earlier one of the same name), `mounts` (a host file or directory
bound at `containerPath`, read-only with the "ro" option) and `deviceNodes`
(`path` in the container, from `hostPath`, else the same path, on the host;
`fileMode`). Hooks run programs on the host at the container's creation, which
a simulated node does not do.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

#: vendor/class=name, as the CDI spec's parser.ParseQualifiedName accepts it
_QUALIFIED = re.compile(r"([A-Za-z0-9][A-Za-z0-9.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*)=([A-Za-z0-9][A-Za-z0-9_.:-]*)")


class CDIError(Exception):
    """A device name that no spec in the directory resolves (containerd's "unresolvable CDI devices")."""


def load_specs(cdi_dir: str) -> list[dict]:
    """The spec files in the directory, in name order; unreadable ones are skipped."""
    specs = []
    try:
        names = sorted(os.listdir(cdi_dir))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    for name in names:
        if not name.endswith((".json", ".yaml", ".yml")):
            continue
        try:
            with open(os.path.join(cdi_dir, name)) as f:
                spec = json.load(f) if name.endswith(".json") else yaml.safe_load(f)
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if isinstance(spec, dict) and isinstance(spec.get("kind"), str):
            specs.append(spec)
    return specs


@dataclass
class ContainerEdits:
    """What the named devices' specs do to a container, spec-wide edits before each device's own."""

    env: dict[str, str] = field(default_factory=dict)
    #: (host path, container path, read-only), in order
    mounts: list[tuple[str, str, bool]] = field(default_factory=list)
    #: (container path, host path, file mode or None), in order, each path once
    device_nodes: list[tuple[str, str, int | None]] = field(default_factory=list)


def environment(cdi_dirs: Sequence[str], devices: list[str]) -> dict[str, str]:
    """The variables the named devices' specs set, spec-wide edits before each device's own."""
    return edits(cdi_dirs, devices).env


def edits(cdi_dirs: Sequence[str], devices: list[str]) -> ContainerEdits:
    """The named devices' edits; CDIError naming those no spec in the directories resolves. The
    directories are in rising precedence, as a runtime's cdi_spec_dirs (containerd's default:
    /etc/cdi, then /var/run/cdi): a device a later one's spec defines shadows an earlier one's."""
    specs = [s for d in reversed(cdi_dirs) for s in load_specs(d)]
    found_edits: list[dict] = []
    applied_specs: list[int] = []
    missing = []
    for qualified in devices:
        m = _QUALIFIED.fullmatch(qualified)
        found = None
        if m:
            kind, name = m.groups()
            for i, spec in enumerate(specs):
                dev = next((d for d in spec.get("devices") or [] if d.get("name") == name), None)
                if spec["kind"] == kind and dev is not None:
                    found = (i, dev)
                    break
        if found is None:
            missing.append(qualified)
            continue
        i, dev = found
        if i not in applied_specs:
            applied_specs.append(i)
            found_edits.append(specs[i].get("containerEdits") or {})
        found_edits.append(dev.get("containerEdits") or {})
    if missing:
        raise CDIError(f"unresolvable CDI devices {', '.join(missing)}")
    out = ContainerEdits()
    for e in found_edits:
        for entry in e.get("env") or []:
            key, sep, value = str(entry).partition("=")
            if key and sep:
                out.env[key] = value
        for m in e.get("mounts") or []:
            if isinstance(m, dict) and m.get("hostPath") and str(m.get("containerPath", "")).startswith("/"):
                out.mounts.append((str(m["hostPath"]), str(m["containerPath"]), "ro" in (m.get("options") or [])))
        for d in e.get("deviceNodes") or []:
            path = str(d.get("path", "")) if isinstance(d, dict) else ""
            if path.startswith("/") and all(n[0] != path for n in out.device_nodes):
                mode = d.get("fileMode")
                out.device_nodes.append((path, str(d.get("hostPath") or path), mode if isinstance(mode, int) else None))
    return out
