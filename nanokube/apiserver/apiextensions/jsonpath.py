"""client-go's JSONPath dialect (`k8s.io/client-go/util/jsonpath`), as CRDs use it for
`additionalPrinterColumns`, `selectableFields` and scale paths.

The table convertor parses `{<jsonPath>}` with missing keys allowed and shows the first value of
the first result its FindResults gives; any evaluation error leaves the cell empty. The dialect is
not RFC 9535's, so no JSONPath library fits: `['a.b']` is re-read as `.a.b` (two fields; `\\.`
escapes a dot in a field), `[*]` is the slice `[:]` and fails on a map while `.*` takes a map's
values in key order and a string's UTF-8 bytes (Go's uint8s: a string column prints their number,
other columns nothing), `[-1]` counts from the end, a slice past the bounds or with a step under 1
is an error, `..` yields every non-empty map, list and string (a string's bytes are no containers),
numbers are ASCII (`strconv.Atoi`: a Unicode digit scans as one and fails to parse), and a filter
takes a list only and compares through Go's template rules: an integer with an integer, a float
with a float, a string with a string; any other pair (1 against 2.5, a bool ordered) is an error
that fails the whole path. kubectl's `{range ...}...{end}` runs as FindResults runs it, the
actions after `range` once per value it found, each run's results a result of its own (client-go
also leaves the parsed template cut to those actions after the first object with values to range
over, so its later rows read them alone; a path here stays what it was).
"""

from __future__ import annotations

import functools
import operator
import re
import threading
from collections.abc import Callable
from typing import Any

_SLICE = re.compile(r"(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?")
_DICT_KEY = re.compile(r"'([^']*)'")
_FILTER = re.compile(r"([^!<>=]+)([!<>=]+)(.+)")
_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"'}


class JSONPathError(ValueError):
    """The path does not parse (the table then drops this column and the ones after it)."""


class _Fail(Exception):
    """An evaluation error; `partial` is what the failing step hands back, which a filter's
    existence filter's left side still uses (evalFilter looks at its results before its error)."""

    def __init__(self, partial: list[Any]):
        self.partial = partial


def _alnum(c: str) -> bool:
    return c == "_" or c.isalpha() or c.isdecimal()


def _unquote(lit: str) -> str:
    """strconv.Unquote extended to single quotes: the common escapes and \\x, \\u, \\U."""
    body, quote, out, i = lit[1:-1], lit[0], [], 0
    while i < len(body):
        c = body[i]
        if c == quote:
            raise JSONPathError(f"unquote string {lit} error invalid syntax")
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1:i + 2]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        digits = body[i + 2:i + 2 + width] if width else ""
        point = int(digits, 16) if width and len(digits) == width and all(
            d in "0123456789abcdefABCDEF" for d in digits) else -1
        if not (0 <= point <= 0x10FFFF) or 0xD800 <= point <= 0xDFFF:  # (Go's utf8.ValidRune)
            raise JSONPathError(f"unquote string {lit} error invalid syntax")
        out.append(chr(point))
        i += 2 + width
    return "".join(out)


def _action_nodes(text: str) -> tuple:
    """parseAction: `text` read as the inside of one `{...}`."""
    return _parse("{" + text + "}")[0][1]


def _scan_field(s: str, pos: int, nodes: list) -> int:
    i = pos
    while i < len(s) and s[i] not in _TERMINATORS:
        i += 2 if s[i] == "\\" else 1
    i = min(i, len(s))
    value = s[pos:i]
    nodes.append(("wildcard",) if value == "*" else ("field", value.replace("\\", "")))
    return i


def _scan_array(s: str, pos: int, nodes: list) -> int:
    end = pos
    while end < len(s) and s[end] not in "]\n":
        end += 1
    if end >= len(s) or s[end] == "\n":
        raise JSONPathError("unterminated array")
    text = s[pos:end]
    if text == "*":
        text = ":"
    parts = text.split(",")
    if len(parts) > 1:
        nodes.append(("union", tuple(_action_nodes(f"[{p.strip(' ')}]") for p in parts)))
        return end + 1
    if m := _DICT_KEY.fullmatch(text):
        nodes.extend(_action_nodes("." + m.group(1)))
        return end + 1
    m = _SLICE.fullmatch(text)
    if not m:
        raise JSONPathError(f"invalid array index {text}")

    def number(t: str) -> int:
        try:
            return int(t)
        except ValueError:
            raise JSONPathError(f"array index {t} is not a number") from None
    start = number(m.group(1)) if m.group(1) else None
    if m.group(2):  # an explicit end; `[i]` alone ends at i+1, counted from the end when that is 0
        stop, derived = (number(m.group(2)[1:]) if m.group(2) != ":" else None), False
    else:
        stop, derived = (start or 0) + 1, True
    step = number(m.group(3)[1:]) if m.group(3) and m.group(3) != ":" else None
    nodes.append(("array", start, stop, derived, step))
    return end + 1


def _scan_filter(s: str, pos: int, nodes: list) -> int:
    i, begin, end, pair = pos, False, False, ""
    while True:
        if i >= len(s) or s[i] == "\n":
            raise JSONPathError("unterminated filter")
        r = s[i]
        i += 1
        if r in "\"'":
            if not begin:
                begin, pair = True, r
            elif s[i - 2] != "\\" and r == pair:
                end = True
        elif r == ")" and begin == end:
            break
    if s[i:i + 1] != "]":
        raise JSONPathError("unclosed array expect ]")
    text = s[pos:i - 1]
    if m := _FILTER.fullmatch(text):
        nodes.append(("filter", _action_nodes(m.group(1)), _action_nodes(m.group(3)), m.group(2)))
    else:
        nodes.append(("filter", _action_nodes(text), (), "exists"))
    return i + 1


def _scan_action(s: str, pos: int) -> tuple[tuple, int]:
    """The nodes of one `{...}` whose inside starts at `pos`, and the position after its `}`."""
    nodes: list[tuple] = []
    while True:
        if s.startswith("}", pos):
            return tuple(nodes), pos + 1
        if s.startswith("[?(", pos):
            pos = _scan_filter(s, pos + 3, nodes)
            continue
        if s.startswith("..", pos):
            if nodes and nodes[-1][0] == "recursive":
                raise JSONPathError("invalid multiple recursive descent")
            nodes.append(("recursive",))
            pos += 2
            if pos < len(s) and _alnum(s[pos]):
                pos = _scan_field(s, pos, nodes)
            continue
        if pos >= len(s) or s[pos] in "\r\n":
            raise JSONPathError("unclosed action")
        r = s[pos]
        pos += 1
        if r in " @$":
            continue
        if r == "[":
            pos = _scan_array(s, pos, nodes)
        elif r == ".":
            pos = _scan_field(s, pos, nodes)
        elif r in "\"'":
            end = pos
            while end < len(s) and s[end] != "\n" and (s[end] != r or s[end - 1] == "\\"):
                end += 1
            if end >= len(s) or s[end] == "\n":
                raise JSONPathError("unterminated quoted string")
            nodes.append(("text", _unquote(s[pos - 1:end + 1])))
            pos = end + 1
        elif r in "+-" or r.isdecimal():
            end = pos
            while end < len(s) and (s[end] == "." or s[end].isdecimal()):
                end += 1
            nodes.append(_number(s[pos - 1:end]))
            pos = end
        elif _alnum(r):
            end = pos
            while end < len(s) and s[end] not in _TERMINATORS:
                end += 1
            word = s[pos - 1:end]
            nodes.append(("bool", word == "true") if word in ("true", "false") else ("ident", word))
            pos = end
        else:
            raise JSONPathError(f"unrecognized character in action: U+{ord(r):04X} {r!r}")


def _number(t: str) -> tuple:
    """strconv.Atoi, then ParseFloat: ASCII digits only (Python's int() and float() read any
    Unicode decimal digit, which the scanner takes as Go's unicode.IsDigit does)."""
    if t.isascii():
        try:
            return ("int", int(t))
        except ValueError:
            pass
        try:
            return ("float", float(t))
        except ValueError:
            pass
    raise JSONPathError(f"cannot parse number {t}")


def _parse(text: str) -> tuple[tuple, ...]:
    """A template: text outside braces, and each `{...}` an action (its nodes)."""
    root: list[tuple] = []
    pos = 0
    while (brace := text.find("{", pos)) >= 0:
        if brace > pos:
            root.append(("text", text[pos:brace]))
        nodes, pos = _scan_action(text, brace + 1)
        root.append(("list", nodes))
    if pos < len(text):
        root.append(("text", text[pos:]))
    return tuple(root)


class Path:
    """A parsed path: its nodes (one per action or text between them) and their functions;
    `ranges`: whether `range` or `end` appears, which only a _Template runs."""

    __slots__ = ("nodes", "steps", "ranges")

    def __init__(self, nodes: tuple[tuple, ...]):
        self.nodes = nodes
        self.steps = tuple(_step(n) for n in nodes)
        self.ranges = _keywords(nodes)


def _keywords(node: tuple) -> bool:
    """Whether `range` or `end` is among these nodes or the nodes inside them."""
    if node[:1] == ("ident",):
        return node[1] in ("range", "end")
    return any(isinstance(part, tuple) and _keywords(part) for part in node)


@functools.lru_cache(maxsize=1024)
def compile_path(expr: str) -> Path:
    """A column's path as the table convertor parses it, `{<expr>}`; raises JSONPathError."""
    return Path(_parse("{" + expr + "}"))


def field_path(expr: str) -> list[str] | None:
    """The field names of a path made of fields only (`.spec.replicas`), else None;
    raises JSONPathError when it does not parse."""
    nodes = compile_path(expr).nodes
    if len(nodes) != 1 or any(n[0] != "field" for n in nodes[0][1]):
        return None
    return [n[1] for n in nodes[0][1]]


class Byte(int):
    """One byte of a string under `.*` (Go's uint8): an integer in filters (template compares signed
    and unsigned integers), a number in a string cell, no int64 for an integer or number column."""

    __slots__ = ()


def _children(v: Any) -> list[Any] | None:
    if isinstance(v, dict):
        return [v[k] for k in sorted(v)]
    if isinstance(v, list):
        return v
    if isinstance(v, str):
        return [Byte(b) for b in v.encode()]
    return None


def _kind(v: Any) -> str | None:
    """template's basicKind: a path's integer (Go's int) and a stored one (an int64) are both ints."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return "string" if isinstance(v, str) else None


_OPERATORS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le,
              ">=": operator.ge}


def _passes(op: str, left: Any, right: Any) -> bool:
    """Raises ValueError where template's comparison errs: an unknown operator, a value that is no
    basic kind, unlike kinds, a bool ordered."""
    compare = _OPERATORS.get(op)
    kind = _kind(left)
    if compare is None or kind is None or kind != _kind(right) or (kind == "bool" and op not in ("==", "!=")):
        raise ValueError(op)
    return compare(left, right)


def _array(cur: list[Any], start: int | None, stop: int | None, derived: bool, step: int | None) -> list[Any]:
    out: list[Any] = []
    for v in cur:
        if v is None:
            continue
        if not isinstance(v, list):
            raise _Fail(cur)
        n = len(v)
        lo = start or 0
        lo += n if lo < 0 else 0
        hi = n if stop is None else stop
        hi += n if hi < 0 or (hi == 0 and derived) else 0
        if lo == hi:  # no elements asked for: what was found so far, the other inputs unread
            return out
        if not (0 <= lo < n and 0 <= hi <= n and lo <= hi) or (step is not None and step <= 0):
            raise _Fail(cur)
        out.extend(v[lo:hi:step or 1])
    return out


def _filter(cur: list[Any], left: tuple, right: tuple, op: str) -> list[Any]:
    out: list[Any] = []
    for v in cur:
        if not isinstance(v, list):  # a map, a scalar or null: "cannot be filtered"
            raise _Fail(cur)
        for item in v:
            try:
                lefts = _run([item], left)
            except _Fail as e:
                if op != "exists":
                    raise _Fail(cur) from None
                lefts = e.partial
            if op == "exists":
                if lefts:
                    out.append(item)
                continue
            if not lefts:
                continue
            if len(lefts) > 1:
                raise _Fail(cur)
            try:
                rights = _run([item], right)
            except _Fail:
                raise _Fail(cur) from None
            if not rights:
                continue
            if len(rights) > 1:
                raise _Fail(cur)
            try:
                if _passes(op, lefts[0], rights[0]):
                    out.append(item)
            except ValueError:
                raise _Fail(out) from None
    return out


def _recursive(cur: list[Any]) -> list[Any]:
    """Every non-empty map, list and string at or under `cur`, depth first, maps in key order (a
    string has its bytes for children, which have none)."""
    found, stack = [], list(reversed(cur))
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v:
                found.append(v)
        elif kids := _children(v):
            found.append(v)
            stack.extend(reversed(kids))
    return found


def _step(node: tuple) -> Callable[[list[Any]], list[Any]]:
    """One node as a function from the values before it to the values after it; raises _Fail."""
    kind = node[0]
    if kind == "field":
        name = node[1]
        return lambda cur: [v[name] for v in cur if isinstance(v, dict) and name in v]
    if kind == "array":
        start, stop, derived, step = node[1:]
        return lambda cur: _array(cur, start, stop, derived, step)
    if kind == "filter":
        left, right = _steps(node[1]), _steps(node[2])
        return lambda cur: _filter(cur, left, right, node[3])
    if kind == "wildcard":
        return lambda cur: [x for v in cur for x in _children(v) or ()]
    if kind == "recursive":
        return _recursive
    if kind == "union":
        branches = [_steps(b) for b in node[1]]
        return lambda cur: [x for b in branches for x in _union_branch(cur, b)]
    if kind == "text":
        return lambda cur: [node[1]]
    if kind in ("int", "float", "bool"):
        return lambda cur: [node[1]] * len(cur)
    if kind == "list":
        steps = _steps(node[1])
        return lambda cur: _run(cur, steps)
    if kind == "ident" and node[1] in ("range", "end"):
        keyword = node[1]
        return lambda cur: getattr(_LOCAL.template, keyword)(cur)

    def unknown(cur: list[Any]) -> list[Any]:  # "unrecognized identifier"
        raise _Fail(cur)
    return unknown


def _steps(nodes: tuple) -> tuple:
    return tuple(_step(n) for n in nodes)


def _run(cur: list[Any], steps: tuple) -> list[Any]:
    for step in steps:
        cur = step(cur)
    return cur


def _union_branch(cur: list[Any], steps: tuple) -> list[Any]:
    """A union's branch: its error fails the union, handing back the union's input."""
    try:
        return _run(cur, steps)
    except _Fail:
        raise _Fail(cur) from None


_LOCAL = threading.local()


class _Template:
    """One FindResults: the values each top-level action (or text) yields in turn, `range`
    running the actions after it once per value found and `end` closing the innermost run."""

    def __init__(self) -> None:
        self.cur: list[Any] = []
        self.saved: list[list[Any]] = []  # each open range's values before it, back after its end
        self.begin = self.inside = self.ending = 0

    def results(self, data: Any, steps: tuple) -> list[list[Any]]:
        self.cur, out = [data], []
        for i, step in enumerate(steps):
            found = step(self.cur)
            if self.ending and self.ending <= self.inside:  # an end inside a range: this run is over
                self.ending -= 1
                break
            if self.begin:
                self.begin -= 1
                self.inside += 1
                for k, v in enumerate(found):
                    if k == len(found) - 1:  # the last run goes on past its end, on the values before range
                        self.inside -= 1
                    out.extend(self.results(v, steps[i + 1:]))
                break
            out.append(found)
        return out

    def range(self, cur: list[Any]) -> list[Any]:
        self.saved.append(self.cur)
        self.begin += 1
        return cur

    def end(self, cur: list[Any]) -> list[Any]:
        if self.ending < self.inside:
            self.ending += 1
        elif self.saved:
            self.cur = self.saved.pop()
        else:  # "not in range, nothing to end"
            raise _Fail([])
        return []


def find(obj: Any, expr: str | Path) -> list[Any]:
    """What the first result of the path's template holds in `obj`: empty when it holds nothing or
    any action fails (the table convertor's empty cell)."""
    path = compile_path(expr) if isinstance(expr, str) else expr
    if not path.ranges:  # each action on the object, as a template without range or end runs them
        try:
            results = [step([obj]) for step in path.steps]
        except _Fail:
            return []
        return results[0] if results else []
    outer = getattr(_LOCAL, "template", None)
    _LOCAL.template = _Template()
    try:
        results = _LOCAL.template.results(obj, path.steps)
    except _Fail:
        return []
    finally:
        _LOCAL.template = outer
    return results[0] if results else []
