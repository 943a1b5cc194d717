"""CRD schema `pattern`s matched in linear time, as Go's RE2 matches them upstream.

Python's `re` backtracks: `^(a+)+$` against thirty a's and a '!' takes minutes, and
the API server's one event loop with it. Here a pattern is parsed (Python's parser:
RE2's syntax is nearly a subset), compiled to a Pike VM program and run over the
value with a set of threads, so matching is linear in the value's length; the sets
met are cached per (set, character, context), so a long value costs one lookup a
character. Semantics are Go's: an unanchored search, `$` only at the end of the
text (unless (?m)), ASCII `\\d \\w \\s \\b`. What RE2 cannot express (backreferences,
lookaround, atomic and possessive groups, `\\Z`) is an invalid pattern; `\\p{..}`
classes, valid in RE2 but not parsed here, leave the pattern unchecked.
"""

from __future__ import annotations

import functools
import re
import re._constants as C  # noqa: N812 - sre's opcode names
import re._parser as sre_parse
from typing import Callable

MAX_REPEAT = 1000  # RE2's limit on a counted repetition
MAX_PROGRAM = 20_000  # instructions; RE2 refuses an "expression too large" too
_CACHE_LIMIT = 4096  # cached transitions (and short values' results) per pattern
_SHORT = 256

_CHAR, _SPLIT, _JMP, _ASSERT, _MATCH = range(5)
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DIGIT = frozenset("0123456789")
_SPACE = frozenset("\t\n\f\r ")
_CATEGORIES: dict[object, Callable[[str], bool]] = {
    C.CATEGORY_DIGIT: _DIGIT.__contains__, C.CATEGORY_NOT_DIGIT: lambda c: c not in _DIGIT,
    C.CATEGORY_WORD: _WORD.__contains__, C.CATEGORY_NOT_WORD: lambda c: c not in _WORD,
    C.CATEGORY_SPACE: _SPACE.__contains__, C.CATEGORY_NOT_SPACE: lambda c: c not in _SPACE,
}
_UNSUPPORTED = {C.GROUPREF: "backreferences", C.GROUPREF_EXISTS: "conditionals", C.ASSERT: "lookaround",
                C.ASSERT_NOT: "lookaround", C.POSSESSIVE_REPEAT: "possessive repetition",
                C.ATOMIC_GROUP: "atomic groups"}


class PatternError(ValueError):
    """The pattern is not a valid RE2 expression; str() reads as Go's `error parsing regexp: ...`."""


class Pattern:
    """A compiled pattern: `search(text)` is Go's regexp.MatchString."""

    def __init__(self, prog: list[tuple], contextual: bool) -> None:
        self.prog = prog
        self.contextual = contextual  # \b, \B or multi-line anchors: closures depend on the neighbours
        self._closures: dict[tuple, tuple[tuple[int, ...], bool]] = {}
        self._steps: dict[tuple, tuple[int, ...]] = {}
        self._results: dict[str, bool] = {}  # short values recur (quantities, names)

    def search(self, text: str) -> bool:
        hit = self._results.get(text)
        if hit is not None:
            return hit
        found = self._search(text)
        if len(text) <= _SHORT and len(self._results) < _CACHE_LIMIT:
            self._results[text] = found
        return found

    def _search(self, text: str) -> bool:
        n = len(text)
        current, matched = self._closure((), text, 0, n)
        for i, ch in enumerate(text):
            if matched:
                return True
            key = (current, ch)
            moved = self._steps.get(key)
            if moved is None:
                moved = tuple(pc + 1 for pc in current if self.prog[pc][1](ch))
                if len(self._steps) < _CACHE_LIMIT:
                    self._steps[key] = moved
            current, matched = self._closure(moved, text, i + 1, n)
        return matched

    def _closure(self, pcs: tuple[int, ...], text: str, i: int, n: int) -> tuple[tuple[int, ...], bool]:
        """The threads runnable at position i from `pcs` and a new start (the search is unanchored),
        and whether one of them matched."""
        ctx: tuple = (i == 0, i == n)
        if self.contextual:
            ctx += (text[i - 1] if i else "", text[i] if i < n else "")
        key = (pcs, ctx)
        hit = self._closures.get(key)
        if hit is not None:
            return hit
        out: list[int] = []
        seen: set[int] = set()
        stack = [0, *reversed(pcs)]
        matched = False
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            op = self.prog[pc]
            if op[0] == _CHAR:
                out.append(pc)
            elif op[0] == _JMP:
                stack.append(op[1])
            elif op[0] == _SPLIT:
                stack += (op[2], op[1])
            elif op[0] == _ASSERT:
                if _holds(op[1], text, i, n):
                    stack.append(pc + 1)
            else:
                matched = True
        hit = (tuple(sorted(out)), matched)
        if len(self._closures) < _CACHE_LIMIT:
            self._closures[key] = hit
        return hit


def _holds(kind: str, text: str, i: int, n: int) -> bool:
    prev, cur = (text[i - 1] if i else ""), (text[i] if i < n else "")
    if kind == "begin":
        return i == 0
    if kind == "end":
        return i == n
    if kind == "begin_line":
        return i == 0 or prev == "\n"
    if kind == "end_line":
        return i == n or cur == "\n"
    boundary = (prev in _WORD and prev != "") != (cur in _WORD and cur != "")
    return boundary if kind == "boundary" else not boundary


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Pattern | None:
    """The compiled pattern; None where it uses what this parser lacks (`\\p{..}`): unchecked.
    Raises PatternError for what RE2 refuses."""
    source = _translate(pattern)
    if source is None:
        return None
    try:
        parsed = sre_parse.parse(source, 0)
    except re.error as e:
        raise PatternError(f"error parsing regexp: {e.msg}: `{pattern}`") from None
    except RecursionError:
        raise PatternError(f"error parsing regexp: expression nests too deeply: `{pattern}`") from None
    comp = _Compiler(pattern)
    comp.seq(parsed.data, parsed.state.flags)
    comp.emit((_MATCH,))
    return Pattern(comp.prog, comp.contextual)


def _translate(pattern: str) -> str | None:
    """Go's escapes in Python's spelling: `\\z` (end of text) is Python's `\\Z`; Go has no `\\Z`."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in "pP":
                return None
            if nxt == "Z":
                raise PatternError(f"error parsing regexp: invalid escape sequence: `\\Z`: `{pattern}`")
            out.append("\\Z" if nxt == "z" else pattern[i:i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


class _Compiler:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.prog: list[tuple] = []
        self.contextual = False

    def emit(self, op: tuple) -> int:
        if len(self.prog) >= MAX_PROGRAM:
            raise PatternError(f"error parsing regexp: expression too large: `{self.pattern}`")
        self.prog.append(op)
        return len(self.prog) - 1

    def seq(self, items, flags: int) -> None:
        for op, av in items:
            self.node(op, av, flags)

    def node(self, op, av, flags: int) -> None:
        fold = bool(flags & re.IGNORECASE)
        if op in _UNSUPPORTED:
            raise PatternError(f"error parsing regexp: invalid or unsupported Perl syntax ({_UNSUPPORTED[op]}): "
                               f"`{self.pattern}`")
        if op is C.LITERAL:
            ch = chr(av)
            self.emit((_CHAR, (lambda c: c.lower() == ch.lower()) if fold else ch.__eq__))
        elif op is C.NOT_LITERAL:
            ch = chr(av)
            self.emit((_CHAR, (lambda c: c.lower() != ch.lower()) if fold else ch.__ne__))
        elif op is C.ANY:
            self.emit((_CHAR, (lambda c: True) if flags & re.DOTALL else "\n".__ne__))
        elif op is C.IN:
            self.emit((_CHAR, _char_class(av, fold)))
        elif op is C.SUBPATTERN:
            _, add, remove, body = av
            self.seq(body.data, (flags | add) & ~remove)
        elif op is C.BRANCH:
            self.branch([alt.data for alt in av[1]], flags)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):  # greediness changes which match, not whether
            self.repeat(*av, flags)
        elif op is C.AT:
            self.anchor(av, flags)
        else:
            raise PatternError(f"error parsing regexp: invalid or unsupported Perl syntax: `{self.pattern}`")

    def branch(self, alts: list, flags: int) -> None:
        jumps = []
        for k, alt in enumerate(alts):
            if k < len(alts) - 1:
                split = self.emit((_SPLIT, 0, 0))
                self.seq(alt, flags)
                jumps.append(self.emit((_JMP, 0)))
                self.prog[split] = (_SPLIT, split + 1, len(self.prog))
            else:
                self.seq(alt, flags)
        for j in jumps:
            self.prog[j] = (_JMP, len(self.prog))

    def repeat(self, lo: int, hi: int, body, flags: int) -> None:
        unbounded = hi == C.MAXREPEAT
        if lo > MAX_REPEAT or (not unbounded and hi > MAX_REPEAT):
            raise PatternError(f"error parsing regexp: invalid repeat count: `{self.pattern}`")
        for _ in range(lo):
            self.seq(body.data, flags)
        if unbounded:
            split = self.emit((_SPLIT, 0, 0))
            self.seq(body.data, flags)
            self.emit((_JMP, split))
            self.prog[split] = (_SPLIT, split + 1, len(self.prog))
            return
        splits = []
        for _ in range(hi - lo):
            splits.append(self.emit((_SPLIT, 0, 0)))
            self.seq(body.data, flags)
        for s in splits:
            self.prog[s] = (_SPLIT, s + 1, len(self.prog))

    def anchor(self, at, flags: int) -> None:
        multiline = bool(flags & re.MULTILINE)
        kind = {C.AT_BEGINNING: "begin_line" if multiline else "begin", C.AT_BEGINNING_STRING: "begin",
                C.AT_END: "end_line" if multiline else "end", C.AT_END_STRING: "end",
                C.AT_BOUNDARY: "boundary", C.AT_NON_BOUNDARY: "non_boundary"}.get(at)
        if kind is None:
            raise PatternError(f"error parsing regexp: invalid or unsupported Perl syntax: `{self.pattern}`")
        self.contextual |= kind not in ("begin", "end")
        self.emit((_ASSERT, kind))


def _char_class(items, fold: bool) -> Callable[[str], bool]:
    negate = False
    chars: set[str] = set()
    ranges: list[tuple[int, int]] = []
    cats: list[Callable[[str], bool]] = []
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            chars.add(chr(av))
        elif op is C.RANGE:
            ranges.append(av)
        elif op is C.CATEGORY:
            cats.append(_CATEGORIES[av])

    def member(c: str) -> bool:
        o = ord(c)
        return c in chars or any(a <= o <= b for a, b in ranges) or any(f(c) for f in cats)

    def test(c: str) -> bool:
        hit = member(c) or (fold and (member(c.lower()) or member(c.upper())))
        return hit != negate
    return test
