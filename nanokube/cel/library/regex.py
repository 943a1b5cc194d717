"""Kubernetes' `regex` library: `find` and `findAll`, run by RE2 as cel-go runs them on Go's regexp
(machinery/regex.py): a rule's pattern is user-supplied, and Python's backtracking `re` would let one
pattern hold the server's event loop."""

from __future__ import annotations

from ...machinery import regex
from ..errors import CELError
from ..types import INT, STRING, list_of
from .overload import Overload


def _compile(pattern: str):
    try:
        return regex.compile_pattern(pattern)
    except regex.PatternError as e:
        raise CELError(str(e)) from None


def _find(s: str, pattern: str) -> str:
    m = _compile(pattern).search(regex.utf8(s).decode())
    return m.group() if m else ""


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's FindAllString: an empty match right after the previous match is skipped. The text is searched as
    str so that the binding steps past an empty match by a character, as Go steps by a rune."""
    if limit == 0:
        return []
    found, prev_end = [], -1
    for m in _compile(pattern).finditer(regex.utf8(s).decode()):
        start, end = m.span()
        if not (start == end == prev_end):
            found.append(m.group())
            if len(found) == limit:
                break
        prev_end = end
    return found


OVERLOADS = [
    Overload("find", (STRING, STRING), STRING, member=True, impl=_find),
    Overload("findAll", (STRING, STRING), list_of(STRING), member=True, impl=_find_all),
    Overload("findAll", (STRING, STRING, INT), list_of(STRING), member=True, impl=_find_all),
]
