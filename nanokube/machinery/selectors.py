"""Label and field selectors: the query-string syntax and the LabelSelector
object form, compiled once into matchers."""

from __future__ import annotations

import re
from typing import Any, Callable

from .errors import bad_request
from .validation import invalid, label_value, qualified_name

Requirement = tuple[str, str, tuple[str, ...]]  # (key, op, values); ops: =, !=, in, notin, exists, !, gt, lt

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
#: the operator tokens (labels.string2token), and the order upstream lists the binary ones in
_SYMBOLS = frozenset({"=", "==", "!=", "!", "(", ")", ",", ">", "<"})
_KEYWORDS = frozenset({"in", "notin"})
_BINARY = "in, notin, =, ==, !=, gt, lt"
_OPS = {"in": "in", "notin": "notin", "=": "=", "==": "=", "!=": "!=", ">": "gt", "<": "lt"}
_ID, _END = "id", "end"


def _lex(s: str) -> list[tuple[str, str]]:
    """(kind, text) tokens as labels.Lexer scans them: an operator is the longest run of special
    characters that is one; anything else up to whitespace or a special character is an
    identifier, or the keyword `in`/`notin`."""
    out, pos, n = [], 0, len(s)
    while True:
        while pos < n and s[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            out.append((_END, ""))
            return out
        start = pos
        if s[pos] in _SPECIAL:
            end = pos + 1
            while end < n and s[end] in _SPECIAL and s[start:end + 1] in _SYMBOLS:
                end += 1
            out.append((s[start:end], s[start:end]))
        else:
            end = pos
            while end < n and s[end] not in _SPECIAL and s[end] not in _WHITESPACE:
                end += 1
            word = s[start:end]
            out.append((word if word in _KEYWORDS else _ID, word))
        pos = end


class _Parser:
    """labels.Parser: `in` and `notin` read as identifiers wherever a value may stand."""

    def __init__(self, s: str) -> None:
        self.items, self.pos = _lex(s), 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        kind, text = self.items[self.pos]
        return (_ID if values and kind in _KEYWORDS else kind), text

    def take(self, values: bool = True) -> tuple[str, str]:
        tok = self.peek(values)
        self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, text = self.peek()
            if kind == _END:
                return reqs
            if kind not in (_ID, "!"):
                raise ValueError(f"found '{text}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except ValueError as e:
                raise ValueError(f"unable to parse requirement: {e}") from None
            kind, text = self.take()
            if kind == _END:
                return reqs
            if kind != ",":
                raise ValueError(f"found '{text}', expected: ',' or 'end of string'")
            kind, text = self.peek()
            if kind not in (_ID, "!"):
                raise ValueError(f"found '{text}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        absent = kind == "!"
        if absent:
            kind, key = self.take()
        if kind != _ID:
            raise ValueError(f"found '{key}', expected: identifier")
        msgs = qualified_name(key)
        if msgs:  # (upstream's parser has no field path here: Go prints a nil one so)
            raise ValueError(str(invalid("<nil>", key, "; ".join(msgs))))
        if absent or self.peek()[0] in (_END, ","):
            return key, "!" if absent else "exists", ()
        kind, text = self.take(values=False)
        op = _OPS.get(kind)
        if op is None:
            raise ValueError(f"found '{text}', expected: {_BINARY}")
        values = self.values() if op in ("in", "notin") else self.exact()
        return _checked(key, op, tuple(sorted(values)))

    def values(self) -> set[str]:
        kind, text = self.take()
        if kind != "(":
            raise ValueError(f"found '{text}' expected: '('")
        kind, text = self.peek()
        if kind == ")":
            self.take()
            return {""}
        if kind not in (_ID, ","):
            raise ValueError(f"found '{text}', expected: ',', ')' or identifier")
        out: set[str] = set()
        while True:
            kind, lit = self.take()
            if kind == _ID:
                out.add(lit)
                after, lit2 = self.peek()
                if after == ")":
                    self.take()
                    return out
                if after != ",":
                    raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            elif kind == ",":
                after = self.peek()[0]
                if not out or after in (")", ","):
                    out.add("")
                if after == ")":
                    self.take()
                    return out
            else:
                raise ValueError(f"found '{lit}', expected: ',', or identifier")

    def exact(self) -> set[str]:
        if self.peek()[0] in (_END, ","):
            return {""}
        kind, text = self.take()
        if kind != _ID:
            raise ValueError(f"found '{text}', expected: identifier")
        return {text}


def _checked(key: str, op: str, values: tuple[str, ...]) -> Requirement:
    """labels.NewRequirement's checks of the values: integers for gt/lt, label values."""
    errs = []
    if op in ("gt", "lt"):
        errs += [invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
                 for i, v in enumerate(values) if not _int64(v)]
    for i, v in enumerate(values):
        msgs = label_value(v)
        if msgs:
            errs.append(invalid(f"values[{i}][{key}]", v, "; ".join(msgs)))
    if errs:
        texts = list(dict.fromkeys(str(e) for e in errs))
        raise ValueError(texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]")
    return key, op, values


_INT64 = re.compile(r"[+-]?[0-9]+")


def _int64(text: str) -> bool:
    """Whether strconv.ParseInt(text, 10, 64) reads it."""
    return bool(_INT64.fullmatch(text)) and -2**63 <= int(text) < 2**63


def parse_label_selector(s: str) -> list[Requirement]:
    """A label selector's query-string form as labels.Parse reads it (keys and values checked).
    Raises APIError 400."""
    try:
        return _Parser(s).parse()
    except ValueError as e:
        raise bad_request(str(e)) from None


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


def go_label_selector(sel: dict | None) -> str:
    """A LabelSelector as Go's `%v` prints one in upstream's messages (its generated String)."""
    if sel is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted((sel.get("matchLabels") or {}).items()))
    exprs = "".join(f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
                    f"Values:[{' '.join(e.get('values') or ())}],}},"
                    for e in sel.get("matchExpressions") or ())
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


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
        elif not _compares(v, op, vals[0]):
            return False
    return True


def _compares(label: str | None, op: str, bound: str) -> bool:
    """gt/lt: the label must be there and an integer."""
    if label is None or not _int64(label):
        return False
    return int(label) > int(bound) if op == "gt" else int(label) < int(bound)


FieldReq = tuple[str, bool, str]  # (field, equal?, value)

#: fields.ParseSelector's operators, in the order tried at each position of a term
_FIELD_OPS = ("!=", "==", "=")


def _field_terms(s: str) -> list[str]:
    """The selector split at each comma a backslash does not escape (escapes kept)."""
    terms, start, escaped = [], 0, False
    for i, c in enumerate(s):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(s[start:i])
            start = i + 1
    terms.append(s[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """(field, operator, raw value) at the term's first operator; a field has no escapes."""
    for i in range(len(term)):
        for op in _FIELD_OPS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape_field_value(v: str) -> str:
    """The value with its `\\\\`, `\\,`, `\\=` escapes undone; any other escape, a trailing
    backslash or a bare `,`/`=` is a 400, with the message fields.UnescapeValue's errors carry
    (a bare character as Go prints a rune: its code point)."""
    if "\\" not in v and "," not in v and "=" not in v:
        return v
    out, escaped = [], False
    for c in v:
        if escaped:
            if c not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if escaped:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def field_requirements(s: str) -> list[FieldReq]:
    """A fieldSelector's terms as fields.ParseSelector reads them: split at unescaped commas,
    sorted (so the first bad term in that order is the one reported), empty terms skipped, each
    split at its first operator with nothing trimmed, and its value unescaped."""
    out = []
    for term in sorted(_field_terms(s)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise bad_request(f"invalid selector: '{s}'; can't understand '{term}'")
        field, op, raw = split
        out.append((field, op != "!=", _unescape_field_value(raw)))
    return out


def parse_field_selector(s: str, supported: dict[str, Callable[[dict], Any]],
                         unsupported: Callable[[str], str]) -> list[tuple[Callable[[dict], Any], bool, str]]:
    """The selector's terms with their field's getter; a field not `supported` is a 400 worded by
    `unsupported` (the kind's field label conversion), judged once the whole selector has parsed,
    as the handler's Transform runs after decoding."""
    out = []
    for field, eq, value in field_requirements(s):
        fn = supported.get(field)
        if fn is None:
            raise bad_request(unsupported(field))
        out.append((fn, eq, value))
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
