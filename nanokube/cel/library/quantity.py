"""Kubernetes' `quantity` library. A quantity is carried as
{"@quantity": "<numerator>/<denominator>"}, canonical, so equal quantities
compare equal with `==`."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ...machinery.quantity import QuantityError, parse_quantity
from ..errors import CELError
from ..types import BOOL, DOUBLE, INT, QUANTITY, STRING
from .overload import Overload

MARK = "@quantity"


def quantity_value(v: Fraction) -> dict:
    return {MARK: f"{v.numerator}/{v.denominator}"}


def _q(x: Any) -> Fraction:
    if isinstance(x, dict) and MARK in x:
        return Fraction(x[MARK])
    if isinstance(x, int) and not isinstance(x, bool):
        return Fraction(x)
    raise CELError("no such overload")


def _quantity(s: str) -> dict:
    try:
        return quantity_value(parse_quantity(s))
    except QuantityError as e:
        raise CELError(str(e)) from None


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def compare(a: Any, b: Any) -> int:
    x, y = _q(a), _q(b)
    return (x > y) - (x < y)


def _as_integer(a: Any) -> int:
    v = _q(a)
    if v.denominator != 1 or not -(2**63) <= v < 2**63:
        raise CELError("cannot convert value to integer")
    return int(v)


def _is_integer(a: Any) -> bool:
    v = _q(a)
    return v.denominator == 1 and -(2**63) <= v < 2**63


OVERLOADS = [
    Overload("quantity", (STRING,), QUANTITY, impl=_quantity),
    Overload("isQuantity", (STRING,), BOOL, impl=_is_quantity),
    Overload("compareTo", (QUANTITY, QUANTITY), INT, member=True, impl=compare),
    Overload("isLessThan", (QUANTITY, QUANTITY), BOOL, member=True, impl=lambda a, b: compare(a, b) < 0),
    Overload("isGreaterThan", (QUANTITY, QUANTITY), BOOL, member=True, impl=lambda a, b: compare(a, b) > 0),
    *[Overload(n, (QUANTITY, t), QUANTITY, member=True, impl=lambda a, b, s=s: quantity_value(_q(a) + s * _q(b)))
      for n, s in (("add", 1), ("sub", -1)) for t in (QUANTITY, INT)],
    Overload("asInteger", (QUANTITY,), INT, member=True, impl=_as_integer),
    Overload("isInteger", (QUANTITY,), BOOL, member=True, impl=_is_integer),
    Overload("asApproximateFloat", (QUANTITY,), DOUBLE, member=True, impl=lambda a: float(_q(a))),
    Overload("sign", (QUANTITY,), INT, member=True, impl=lambda a: (_q(a) > 0) - (_q(a) < 0)),
]
