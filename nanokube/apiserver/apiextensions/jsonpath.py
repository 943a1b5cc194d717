"""The JSONPath subset CRDs use in `additionalPrinterColumns` and `selectableFields`.

Upstream evaluates client-go's `util/jsonpath` with missing keys allowed:
`.spec.replicas`, `.items[0]`, `.items[*].name`, `['a.b']`, and filters such as
`.status.conditions[?(@.type=="Ready")].status`. A missing field yields no
result, which the table shows as an empty cell.
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
