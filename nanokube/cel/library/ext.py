"""cel-go's extension libraries as the Kubernetes environment enables them:
ext.Strings (v2), ext.Lists (v3), ext.Sets, ext.Math, ext.Encoders and the
optional types' functions. Implementations come from the
`common-expression-language` package's stdlib where it has them."""

from __future__ import annotations

from typing import Any

import cel
from cel import stdlib

from ..cost import RANGE_LIMIT
from ..errors import COST_LIMIT_ERROR, CELError
from ..types import BOOL, BYTES, DOUBLE, DYN, INT, PARAM_A, STRING, UINT, list_of, optional_of
from . import formatting
from .overload import Overload

LIST_A, LIST_S, OPT_A = list_of(PARAM_A), list_of(STRING), optional_of(PARAM_A)


def _m(name: str, args: tuple, result: Any, impl: Any = None) -> Overload:
    return Overload(name, args, result, member=True, impl=impl)


def _g(name: str, args: tuple, result: Any, impl: Any = None) -> Overload:
    return Overload(name, args, result, impl=impl)


def _range(n: int) -> list[int]:
    """lists.range(n), refused (as over the cost limit) past what any use of it could afford."""
    if n > RANGE_LIMIT:
        raise CELError(COST_LIMIT_ERROR)
    return stdlib.lists_range(n)


def _char_at(s: str, i: int) -> str:
    try:
        return stdlib.char_at(s, i)
    except IndexError:
        raise CELError(f"index out of range: {i}") from None


def _index_of(s: str, sub: str, offset: int = 0) -> int:
    try:
        return stdlib.index_of(s, sub, offset)
    except IndexError:
        raise CELError(f"index out of range: {offset}") from None


def _last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    try:
        return stdlib.last_index_of(s, sub, offset)
    except IndexError:
        raise CELError(f"index out of range: {offset}") from None


def _substring(s: str, start: int, end: int | None = None) -> str:
    try:
        return stdlib.substring(s, start, end)
    except IndexError:
        if end is not None and start > end:
            raise CELError(f"invalid substring range. start: {start}, end: {end}") from None
        raise CELError(f"index out of range: {start if start < 0 or start > len(s) else end}") from None


def _slice(xs: list, start: int, end: int) -> list:
    if start < 0 or end < 0:
        raise CELError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CELError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if len(xs) < end:
        raise CELError(f"cannot slice({start}, {end}), list is length {len(xs)}")
    return xs[start:end]


def _flatten(xs: list, depth: int = 1) -> list:
    if depth < 0:
        raise CELError("level must be non-negative")
    return stdlib.flatten(xs, depth)


def _shift(name: str, impl: Any) -> Any:
    def shift(a: int, n: int) -> int:
        if n < 0:
            raise CELError(f"math.{name}() negative offset: {n}")
        return impl(a, n)
    return shift


def _first(xs: list) -> Any:
    return cel.OptionalValue.of(xs[0]) if xs else cel.OptionalValue.none()


def _last(xs: list) -> Any:
    return cel.OptionalValue.of(xs[-1]) if xs else cel.OptionalValue.none()


OVERLOADS = [
    # strings
    _m("charAt", (STRING, INT), STRING, _char_at),
    _m("indexOf", (STRING, STRING), INT, _index_of),
    _m("indexOf", (STRING, STRING, INT), INT, _index_of),
    _m("lastIndexOf", (STRING, STRING), INT, _last_index_of),
    _m("lastIndexOf", (STRING, STRING, INT), INT, _last_index_of),
    _m("lowerAscii", (STRING,), STRING, stdlib.lower_ascii),
    _m("upperAscii", (STRING,), STRING, stdlib.upper_ascii),
    _m("replace", (STRING, STRING, STRING), STRING, stdlib.replace),
    _m("replace", (STRING, STRING, STRING, INT), STRING, stdlib.replace),
    _m("split", (STRING, STRING), LIST_S, stdlib.split),
    _m("split", (STRING, STRING, INT), LIST_S, stdlib.split),
    _m("substring", (STRING, INT), STRING, _substring),
    _m("substring", (STRING, INT, INT), STRING, _substring),
    _m("trim", (STRING,), STRING, stdlib.trim),
    _m("join", (LIST_S,), STRING, stdlib.join),
    _m("join", (LIST_S, STRING), STRING, stdlib.join),
    _m("reverse", (STRING,), STRING, stdlib.reverse),
    _m("format", (STRING, list_of(DYN)), STRING, formatting.format_string),
    _g("strings.quote", (STRING,), STRING, stdlib.quote),
    # lists (ext.Lists v3)
    _m("distinct", (LIST_A,), LIST_A, stdlib.distinct),
    _m("flatten", (list_of(DYN),), list_of(DYN), _flatten),
    _m("flatten", (list_of(DYN), INT), list_of(DYN), _flatten),
    _m("slice", (LIST_A, INT, INT), LIST_A, _slice),
    _m("sort", (LIST_A,), LIST_A, stdlib.sort),
    _m("reverse", (LIST_A,), LIST_A, stdlib.reverse),
    _m("first", (LIST_A,), OPT_A, _first),
    _m("last", (LIST_A,), OPT_A, _last),
    _g("lists.range", (INT,), list_of(INT), _range),
    # sets
    _g("sets.contains", (LIST_A, LIST_A), BOOL, stdlib.sets_contains),
    _g("sets.equivalent", (LIST_A, LIST_A), BOOL, stdlib.sets_equivalent),
    _g("sets.intersects", (LIST_A, LIST_A), BOOL, stdlib.sets_intersects),
    # math
    _g("math.greatest", (LIST_A,), PARAM_A, stdlib.math_greatest),
    _g("math.least", (LIST_A,), PARAM_A, stdlib.math_least),
    *[_g(f"math.{n}", (DYN, DYN), DYN, getattr(stdlib, f"math_{n}"))
      for n in ("greatest", "least")],
    *[_g(f"math.{n}", (DYN, DYN, DYN), DYN, getattr(stdlib, f"math_{n}")) for n in ("greatest", "least")],
    *[_g(f"math.{n}", (t,), t, getattr(stdlib, f"math_{n}")) for n in ("abs", "sign") for t in (INT, DOUBLE)],
    *[_g(f"math.{n}", (DOUBLE,), DOUBLE, getattr(stdlib, f"math_{n}")) for n in ("ceil", "floor", "round", "trunc")],
    *[_g(f"math.{n}", (DOUBLE,), BOOL, getattr(stdlib, f"math_{p}")) for n, p in
      (("isNaN", "is_nan"), ("isInf", "is_inf"), ("isFinite", "is_finite"))],
    _g("math.sqrt", (DYN,), DOUBLE, stdlib.math_sqrt),
    *[_g(f"math.{n}", (t, t), t, getattr(stdlib, f"math_{p}")) for n, p in
      (("bitOr", "bit_or"), ("bitAnd", "bit_and"), ("bitXor", "bit_xor")) for t in (INT, UINT)],
    *[_g("math.bitNot", (t,), t, stdlib.math_bit_not) for t in (INT, UINT)],
    *[_g(f"math.{n}", (t, INT), t, _shift(n, getattr(stdlib, f"math_{p}"))) for n, p in
      (("bitShiftLeft", "bit_shift_left"), ("bitShiftRight", "bit_shift_right")) for t in (INT, UINT)],
    # encoders
    _g("base64.encode", (BYTES,), STRING, stdlib.base64_encode),
    _g("base64.decode", (STRING,), BYTES, stdlib.base64_decode),
    # optional types: the engine implements these natively
    _g("optional.of", (PARAM_A,), OPT_A),
    _g("optional.ofNonZeroValue", (PARAM_A,), OPT_A),
    _g("optional.none", (), optional_of(DYN)),
    _m("hasValue", (OPT_A,), BOOL),
    _m("value", (OPT_A,), PARAM_A),
    _m("orValue", (OPT_A, PARAM_A), PARAM_A),
    _m("or", (OPT_A, OPT_A), OPT_A),
]
