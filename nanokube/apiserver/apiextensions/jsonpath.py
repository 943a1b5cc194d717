"""The JSONPath subset CRDs use in `additionalPrinterColumns` and `selectableFields`.

Upstream evaluates client-go's `util/jsonpath` with missing keys allowed:
`.spec.replicas`, `.items[0]`, `.items[*].name`, `['a.b']`, slices such as
`.status.conditions[-1:].type`, and filters such as
`.status.conditions[?(@.type=="Ready")].status`. A missing field, or a slice
past the list's bounds (client-go's error), yields no result, which the table
shows as an empty cell.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-$]+)
      | \[(?P<quoted>'[^']*'|"[^"]*")\]
      | \[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*(?P<op>==|!=)\s*(?P<fval>'[^']*'|"[^"]*"|[^)\s]+)\s*\)\]
      | \[(?P<index>-?\d+|\*)\]
      | \[(?P<start>-?\d*):(?P<end>-?\d*)(?::(?P<step>-?\d*))?\]
      | \.\.(?P<recursive>[A-Za-z0-9_\-]+)
    """,
    re.VERBOSE,
)


class JSONPathError(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def compile_path(expr: str) -> tuple[tuple, ...]:
    """Parse `.a.b[0]` (braces `{...}` allowed) into steps; raises JSONPathError."""
    s = expr.strip()
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1]
    if s.startswith("$"):
        s = s[1:]
    if not s.startswith((".", "[")):
        raise JSONPathError(f"unrecognized character in action: {s[:1]!r}")
    steps: list[tuple] = []
    pos = 0
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m or m.end() == pos:
            raise JSONPathError(f"unrecognized character in action: {s[pos:pos + 1]!r}")
        if m.group("field") is not None:
            steps.append(("field", m.group("field")))
        elif m.group("quoted") is not None:
            steps.append(("field", m.group("quoted")[1:-1]))
        elif m.group("fpath") is not None:
            val = m.group("fval")
            if val[:1] in "'\"":
                val = val[1:-1]
            else:
                try:
                    val = int(val)
                except ValueError:
                    val = {"true": True, "false": False}.get(val, val)
            steps.append(("filter", tuple(m.group("fpath").split(".")), m.group("op"), val))
        elif m.group("index") is not None:
            idx = m.group("index")
            steps.append(("all",) if idx == "*" else ("index", int(idx)))
        elif m.group("end") is not None:
            steps.append(("slice", *(int(m.group(g)) if m.group(g) else None for g in ("start", "end", "step"))))
        else:
            steps.append(("recursive", m.group("recursive")))
        pos = m.end()
    return tuple(steps)


def _descend(v: Any, name: str) -> list[Any]:
    out = []
    if isinstance(v, dict):
        if name in v:
            out.append(v[name])
        for x in v.values():
            out.extend(_descend(x, name))
    elif isinstance(v, list):
        for x in v:
            out.extend(_descend(x, name))
    return out


def _slice(v: list, start: int | None, end: int | None, step: int | None) -> list:
    """client-go's array slice: negative bounds count from the end; a slice of no elements is empty,
    one past the bounds (or a step under 1) is its error, here no result."""
    n = len(v)
    start = 0 if start is None else start + n if start < 0 else start
    end = n if end is None else end + n if end < 0 else end
    if start == end:
        return []
    if not (0 <= start < n and 0 <= end <= n and start <= end) or (step is not None and step <= 0):
        return []
    return v[start:end:step or 1]


def find(obj: Any, expr: str | tuple) -> list[Any]:
    """Every value the path selects in `obj` (empty when it selects nothing)."""
    steps = compile_path(expr) if isinstance(expr, str) else expr
    cur = [obj]
    for step in steps:
        nxt: list[Any] = []
        kind = step[0]
        for v in cur:
            if kind == "field":
                if isinstance(v, dict) and step[1] in v:
                    nxt.append(v[step[1]])
            elif kind == "index":
                if isinstance(v, list) and -len(v) <= step[1] < len(v):
                    nxt.append(v[step[1]])
            elif kind == "slice":
                if isinstance(v, list):
                    nxt.extend(_slice(v, *step[1:]))
            elif kind == "all":
                if isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict):
                    nxt.extend(v.values())
            elif kind == "filter":
                if isinstance(v, list):
                    for item in v:
                        got: Any = item
                        for part in step[1]:
                            got = got.get(part) if isinstance(got, dict) else None
                        if (got == step[3]) == (step[2] == "=="):
                            nxt.append(item)
            else:
                nxt.extend(_descend(v, step[1]))
        cur = nxt
    return cur
