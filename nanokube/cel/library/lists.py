"""Kubernetes' `lists` library: isSorted, sum, min, max, indexOf,
lastIndexOf on lists of comparable values, and (lists v1, Kubernetes 1.37)
`includes`, which only stored expressions may call until the minimum
compatibility version reaches 1.37."""

from __future__ import annotations

from typing import Any

from ..errors import CELError
from ..types import BOOL, DOUBLE, DURATION, DYN, INT, PARAM_A, UINT, list_of
from .overload import Overload
from . import quantity, semver

LIST_A = list_of(PARAM_A)


def less(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and semver.MARK in a:
        return semver.compare(a, b) < 0
    if isinstance(a, dict):
        return quantity.compare(a, b) < 0
    return a < b


def is_sorted(xs: list) -> bool:
    return all(not less(xs[i + 1], xs[i]) for i in range(len(xs) - 1))


def _sum(xs: list) -> Any:
    total = None
    for x in xs:
        total = x if total is None else total + x
    return 0 if total is None else total


def _extreme(xs: list, want_less: bool) -> Any:
    if not xs:
        raise CELError(f"{'min' if want_less else 'max'} called on empty list")
    best = xs[0]
    for x in xs[1:]:
        if less(x, best) if want_less else less(best, x):
            best = x
    return best


def _index_of(xs: list, v: Any) -> int:
    for i, x in enumerate(xs):
        if x == v and type(x) is type(v):
            return i
    return -1


def _last_index_of(xs: list, v: Any) -> int:
    for i in range(len(xs) - 1, -1, -1):
        if xs[i] == v and type(xs[i]) is type(v):
            return i
    return -1


def equal(a: Any, b: Any) -> bool:
    """CEL's runtime equality: numbers compare across int, uint and double, a bool
    equals only a bool (Python's True == 1 does not hold here), lists and maps by
    their elements."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(v, b[k]) for k, v in a.items())
    return type(a) is type(b) and a == b


def _includes(target: Any, v: Any) -> bool:
    """A list includes an element equal to `v`; anything else includes only what equals it."""
    if isinstance(target, list):
        return any(equal(x, v) for x in target)
    return equal(target, v)


OVERLOADS = [
    Overload("isSorted", (LIST_A,), BOOL, member=True, impl=is_sorted),
    *[Overload("sum", (list_of(t),), t, member=True, impl=_sum) for t in (INT, UINT, DOUBLE, DURATION)],
    Overload("min", (LIST_A,), PARAM_A, member=True, impl=lambda xs: _extreme(xs, True)),
    Overload("max", (LIST_A,), PARAM_A, member=True, impl=lambda xs: _extreme(xs, False)),
    Overload("indexOf", (LIST_A, PARAM_A), INT, member=True, impl=_index_of),
    Overload("lastIndexOf", (LIST_A, PARAM_A), INT, member=True, impl=_last_index_of),
    Overload("includes", (DYN, DYN), BOOL, member=True, impl=_includes, stored_only=True),
]
