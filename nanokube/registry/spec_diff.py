"""The diff a refused update names: upstream's ValidatePodUpdate and
ValidatePodEphemeralContainersUpdate append go-cmp's diff of the stored and the sent struct to
their Forbidden message, so a user sees which field an update may not change (`kubectl set env
pod/p`, `kubectl edit pod`, `kubectl debug -c` reusing a name). This lays the two out as go-cmp
does (a "-" line for the stored value, a "+" line for the sent one, unchanged fields and elements
counted, not printed, nested objects and equal-length lists opened), with the API's JSON field
names and values where go-cmp prints the Go struct's."""

from __future__ import annotations

from typing import Any

import orjson


def diff(old: Any, new: Any) -> str:
    """The lines that tell `old` from `new` (both JSON values; an object or a list at the top)."""
    return "\n".join(_value("", old, new, 0, ""))


def _json(v: Any) -> str:
    return orjson.dumps(v).decode()


def _opens(old: Any, new: Any) -> bool:
    return isinstance(old, dict) and isinstance(new, dict) or \
        isinstance(old, list) and isinstance(new, list) and len(old) == len(new)


def _value(label: str, old: Any, new: Any, depth: int, end: str) -> list[str]:
    """`label` (`"name": ` or nothing) followed by old and new: opened where both are objects or
    lists of one length, else a "-" and a "+" line."""
    tabs = "\t" * depth
    if not _opens(old, new):
        return [f"- {tabs}{label}{_json(old)}{end}", f"+ {tabs}{label}{_json(new)}{end}"]
    if isinstance(old, dict):
        opening, closing = "{", "}"
        entries = [(k, old.get(k, _MISSING), new.get(k, _MISSING)) for k in sorted(set(old) | set(new))]
        unit = "field"
    else:
        opening, closing = "[", "]"
        entries = [(None, o, n) for o, n in zip(old, new)]
        unit = "element"
    lines = [f"  {tabs}{label}{opening}"]
    same = 0
    for key, o, n in entries:
        if o == n:
            same += 1
            continue
        if same:
            lines.append(_identical(same, unit, depth + 1))
            same = 0
        inner = "" if key is None else f"{_json(key)}: "
        if o is _MISSING or n is _MISSING:
            sign, v = ("+", n) if o is _MISSING else ("-", o)
            lines.append(f"{sign} {tabs}\t{inner}{_json(v)},")
        else:
            lines += _value(inner, o, n, depth + 1, ",")
    if same:
        lines.append(_identical(same, unit, depth + 1))
    return [*lines, f"  {tabs}{closing}{end}"]


def _identical(n: int, unit: str, depth: int) -> str:
    tabs = "\t" * depth
    return f"  {tabs}... // {n} identical {unit}{'' if n == 1 else 's'}"


class _Missing:
    """A field one side lacks (an absent optional field: go-cmp prints its zero value)."""


_MISSING = _Missing()
