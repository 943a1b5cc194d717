"""Label and field selectors: the query-string syntax and the LabelSelector
object form, compiled once into matchers."""

from __future__ import annotations

import re
from typing import Any, Callable

from .errors import bad_request

Requirement = tuple[str, str, tuple[str, ...]]  # (key, op, values); ops: =, !=, in, notin, exists, !

_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")
_OPERATORS = {"!=", "==", "=", "(", ")", ",", "!"}


def _tokens(s: str) -> list[str]:
    out, pos = [], 0
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if not m:
            if s[pos:].strip() == "":
                break
            raise ValueError(f"unable to parse requirement: {s!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def parse_label_selector(s: str) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`. Raises APIError 400."""
    try:
        return _parse(_tokens(s))
    except ValueError as e:
        raise bad_request(f"unable to parse requirement: {e}") from None


def _parse(t: list[str]) -> list[Requirement]:
    reqs: list[Requirement] = []
    i = 0
    while i < len(t):
        if t[i] == "!":
            reqs.append((_identifier(t, i + 1), "!", ()))
            i += 2
        else:
            key = _identifier(t, i)
            i += 1
            if i >= len(t) or t[i] == ",":
                reqs.append((key, "exists", ()))
            elif t[i] in ("=", "=="):
                val = t[i + 1] if i + 1 < len(t) and t[i + 1] != "," else ""
                reqs.append((key, "=", (val,)))
                i += 2 if val else 1
            elif t[i] == "!=":
                val = t[i + 1] if i + 1 < len(t) and t[i + 1] != "," else ""
                reqs.append((key, "!=", (val,)))
                i += 2 if val else 1
            elif t[i] in ("in", "notin"):
                op = t[i]
                if i + 1 >= len(t) or t[i + 1] != "(":
                    raise ValueError(f"found '{t[i + 1] if i + 1 < len(t) else ''}', expected: '('")
                i += 2
                vals: list[str] = []
                while i < len(t) and t[i] != ")":
                    if t[i] != ",":
                        vals.append(t[i])
                    i += 1
                if i >= len(t):
                    raise ValueError("found '', expected: ')'")
                if not vals:
                    raise ValueError("for 'in', 'notin' operators, values set can't be empty")
                i += 1
                reqs.append((key, op, tuple(vals)))
            else:
                raise ValueError(f"found '{t[i]}', expected: '=', '!=', '==', 'in', notin'")
        if i < len(t):
            if t[i] != ",":
                raise ValueError(f"found '{t[i]}', expected: ','")
            i += 1
    return reqs


def _identifier(t: list[str], i: int) -> str:
    """A key must be a word, not an operator or the end of input."""
    found = t[i] if i < len(t) else ""
    if not found or found in _OPERATORS:
        raise ValueError(f"found '{found}', expected: identifier")
    return found


def selector_from_object(sel: dict | None) -> list[Requirement] | None:
    """metav1.LabelSelector → requirements; None selects nothing, {} everything."""
    if sel is None:
        return None
    reqs: list[Requirement] = [(k, "=", (v,)) for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}[e["operator"]]
        reqs.append((e["key"], op, tuple(e.get("values") or ())))
    return reqs


def selector_to_string(sel: dict | None) -> str:
    reqs = selector_from_object(sel) or []
    parts = []
    for k, op, vals in reqs:
        if op in ("=", "!="):
            parts.append(f"{k}{op}{vals[0]}")
        elif op in ("in", "notin"):
            parts.append(f"{k} {op} ({','.join(sorted(vals))})")
        elif op == "exists":
            parts.append(k)
        else:
            parts.append(f"!{k}")
    return ",".join(parts)


def matches_labels(reqs: list[Requirement] | None, labels: dict | None) -> bool:
    if reqs is None:
        return False
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "=":
            if v != vals[0]:
                return False
        elif op == "!=":
            if has and v == vals[0]:
                return False
        elif op == "in":
            if not has or v not in vals:
                return False
        elif op == "notin":
            if has and v in vals:
                return False
        elif op == "exists":
            if not has:
                return False
        elif op == "!":
            if has:
                return False
    return True


FieldReq = tuple[str, bool, str]  # (field, equal?, value)


def parse_field_selector(s: str, supported: dict[str, Callable[[dict], Any]], kind_desc: str, version: str) -> list[tuple[Callable[[dict], Any], bool, str]]:
    out = []
    for part in [p for p in s.split(",") if p.strip()]:
        if "!=" in part:
            f, v = part.split("!=", 1)
            eq = False
        elif "==" in part:
            f, v = part.split("==", 1)
            eq = True
        elif "=" in part:
            f, v = part.split("=", 1)
            eq = True
        else:
            raise bad_request(f"invalid selector: '{s}'; can't understand '{part}'")
        f = f.strip()
        fn = supported.get(f)
        if fn is None:
            raise bad_request(f'field label not supported: {f}')
        out.append((fn, eq, v.strip()))
    return out


def _field_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def matches_fields(reqs, obj: dict) -> bool:
    for fn, eq, val in reqs:
        if (_field_str(fn(obj)) == val) != eq:
            return False
    return True
