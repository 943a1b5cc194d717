"""cel-go's AST validators as Kubernetes' base environment enables them (1.29): run on a checked
expression that has no issues, they refuse a literal argument of `duration()`, `timestamp()` or
`matches()` that would fail at runtime ('invalid duration argument'), and a list or map literal
whose elements are not all of one type ("expected type 'int' but found 'string'"; those within a
string format call's arguments are exempt, as `'%s %d'.format(['a', 1])` mixes them by design)."""

from __future__ import annotations

import datetime
import re

from ..machinery import goduration, regex
from .parser import Node
from .types import DYN, Type

#: Go's time.RFC3339 layout as time.Parse reads it (fractional seconds allowed)
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")
#: time.Duration's range in seconds
_MAX_DURATION = (2 ** 63 - 1) / 1e9


def _duration_ok(s: str) -> bool:
    try:
        return abs(goduration.parse(s)) <= _MAX_DURATION
    except ValueError:
        return False


def _timestamp_ok(s: str) -> bool:
    m = _RFC3339.match(s)
    if m is None:
        return False
    try:
        datetime.datetime(*(int(m[i]) for i in range(1, 7)))
    except ValueError:
        return False
    zone = m[8]
    return zone == "Z" or (int(zone[1:3]) < 24 and int(zone[4:6]) < 60)


def _regex_ok(s: str) -> bool:
    try:
        regex.compile_pattern(s)
    except regex.PatternError:
        return False
    return True


#: function -> the check of its first argument (not counting a receiver), when a string literal
_LITERAL_CHECKS = {"duration": _duration_ok, "timestamp": _timestamp_ok, "matches": _regex_ok}


def _equivalent(a: Type, b: Type) -> bool:
    """cel-go's Type.IsEquivalentType: one kind with equivalent parameters. A dyn here may be what
    cel-go types as a free type parameter (the elements of `[]`, `optional.none()`'s value), which
    it unifies with the other elements, so it is taken as equivalent to anything."""
    if a.name in ("dyn", "A", "B") or b.name in ("dyn", "A", "B"):
        return True
    return a.name == b.name and len(a.params) == len(b.params) and all(
        _equivalent(x, y) for x, y in zip(a.params, b.params))


def validate(root: Node, types: dict[int, Type]) -> list[tuple[int, str]]:
    """The issues (offset, message) the validators find, in the order of the source."""
    issues: list[tuple[int, str]] = []
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        n, in_format = stack.pop()
        if n.kind == "call" and n.args:
            check = _LITERAL_CHECKS.get(n.name)
            arg = n.args[0]
            if check is not None and arg.kind == "lit" and arg.name == "string" and not check(arg.value):
                issues.append((arg.pos, f"invalid {n.name} argument"))
        if n.kind in ("list", "map") and not in_format:
            issues.extend(_mixed(n, types))
        # exempt: a format call's arguments, and the lists and maps nested in them
        exempt = (n.kind == "call" and n.name == "format") or (n.kind in ("list", "map") and in_format)
        for c in ([n.target] if n.target is not None else []) + n.args:
            if n.kind == "map":  # an entry: its key and value sit right in the map
                stack.extend((x, exempt) for x in c.args)
            else:
                stack.append((c, exempt))
    return sorted(issues)


def _mixed(n: Node, types: dict[int, Type]) -> list[tuple[int, str]]:
    def mismatch(node: Node, expected: Type, found: Type) -> tuple[int, str]:
        return node.pos, f"expected type '{expected}' but found '{found}'"

    if n.kind == "list":
        first: Type | None = None
        for e in n.args:
            t = types.get(id(e), DYN)
            if first is None:
                first = t
            elif not _equivalent(first, t):
                return [mismatch(e, first, t)]
        return []
    out, key_type, value_type = [], None, None
    for entry in n.args:
        key, value = entry.args[0], entry.args[1]
        kt, vt = types.get(id(key), DYN), types.get(id(value), DYN)
        if key_type is None:
            key_type, value_type = kt, vt
            continue
        if not _equivalent(key_type, kt):
            out.append(mismatch(key, key_type, kt))
        if not _equivalent(value_type, vt):
            out.append(mismatch(value, value_type, vt))
    return out
