"""Kubernetes' `regex` library: `find` and `findAll`, run by RE2 as cel-go runs them on Go's regexp
(machinery/regex.py): a rule's pattern is user-supplied, and Python's backtracking `re` would let one
pattern hold the server's event loop."""

from __future__ import annotations

import re2

from ...machinery import regex
from ..errors import CELError
from ..types import INT, STRING, list_of
from .overload import Overload


_UNANCHORED = re2._Anchor.UNANCHORED
#: a UTF-8 sequence's length by its first byte's high four bits (the text is valid UTF-8: regex.utf8)
_RUNE_WIDTH = (1,) * 12 + (2, 2, 3, 4)


def _compile(pattern: str):
    try:
        return regex.compile_pattern(pattern)
    except regex.PatternError as e:
        raise CELError(str(e)) from None


def _find(s: str, pattern: str) -> str:
    m = _compile(pattern).search(regex.utf8(s).decode())
    return m.group() if m else ""


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's FindAllString, on the text's UTF-8 as Go runs it: leftmost-first matches left to right; after an
    empty match the search moves one rune on, and an empty match where the previous match ended is skipped.
    It drives google-re2's RE2 object itself: the package's match iterator spends ~10 us of Python a match,
    which made `'.'` over a 100 KB string (upstream's cost: 10,001 of the 1,000,000 a call may spend) take
    seconds."""
    if limit == 0:
        return []
    text, found = regex.utf8(s), []
    match, end, pos, prev_end = _compile(pattern)._regexp.Match, len(text), 0, -1
    while pos <= end:
        start, stop = match(_UNANCHORED, text, pos, end)[0]
        if start < 0:
            break
        if stop == pos:  # an empty match: kept unless right after the previous one; then one rune on
            keep = start != prev_end
            pos += 1 if pos == end else _RUNE_WIDTH[text[pos] >> 4]
        else:
            keep, pos = True, stop
        prev_end = stop
        if keep:
            found.append(text[start:stop].decode())
            if len(found) == limit:
                break
    return found


OVERLOADS = [
    Overload("find", (STRING, STRING), STRING, member=True, impl=_find),
    Overload("findAll", (STRING, STRING), list_of(STRING), member=True, impl=_find_all),
    Overload("findAll", (STRING, STRING, INT), list_of(STRING), member=True, impl=_find_all),
]
