"""The Container Device Interface as a container runtime applies it: a DRA
driver writes CDI spec files (JSON or YAML) into the node's CDI directory and
returns fully qualified device names ("vendor.com/class=device") from
NodePrepareResources; the runtime finds each name's spec by its `kind`
("vendor.com/class") and applies the spec's `containerEdits`, then the
device's, to the container.

Only environment edits are applied here (`env`: "NAME=value" entries, a later
one replacing an earlier one of the same name); mounts, device nodes and hooks
describe host resources a simulated node does not have.
"""

from __future__ import annotations

import json
import os
import re

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
    except FileNotFoundError:
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


def environment(cdi_dir: str, devices: list[str]) -> dict[str, str]:
    """The variables the named devices' specs set, spec-wide edits before each device's own."""
    specs = load_specs(cdi_dir)
    edits: list[dict] = []
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
            edits.append(specs[i].get("containerEdits") or {})
        edits.append(dev.get("containerEdits") or {})
    if missing:
        raise CDIError(f"unresolvable CDI devices {', '.join(missing)}")
    env: dict[str, str] = {}
    for e in edits:
        for entry in e.get("env") or []:
            key, sep, value = str(entry).partition("=")
            if key and sep:
                env[key] = value
    return env
