"""Object-meta helpers every side uses."""

from __future__ import annotations


def object_key(obj: dict) -> str:
    md = obj["metadata"]
    return f"{md.get('namespace', '')}/{md['name']}"
