"""Kubernetes' `regex` library: `find` and `findAll` (RE2 syntax; Python's
`re` accepts the RE2 subset Kubernetes rules use)."""

from __future__ import annotations

import re
from functools import lru_cache

from ..errors import CELError
from ..types import INT, STRING, list_of
from .overload import Overload


@lru_cache(maxsize=512)
def compile_regex(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise CELError(f"error parsing regexp: {e}") from None


def _find(s: str, pattern: str) -> str:
    m = compile_regex(pattern).search(s)
    return m.group() if m else ""


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group() for m in compile_regex(pattern).finditer(s)]
    return found if limit < 0 else found[:limit]


OVERLOADS = [
    Overload("find", (STRING, STRING), STRING, member=True, impl=_find),
    Overload("findAll", (STRING, STRING), list_of(STRING), member=True, impl=_find_all),
    Overload("findAll", (STRING, STRING, INT), list_of(STRING), member=True, impl=_find_all),
]
